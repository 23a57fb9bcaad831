//! UI flows driven headless with egui_kittest. Every harness is built by
//! [`harness`]; dialogs and drops are injected, never shown. The tests look
//! at what a user sees (labels, their order on screen) and act as a user
//! does (clicks, keys, typing); they send a [`Command`] only for what comes
//! from outside the window (a path given on the command line).
//!
//! This file holds the shared helpers: the harness, a scripted dialog, and
//! what the tests read off the screen or do through it.

mod frameworks;
mod gguf;
mod numpy;
mod opening;
mod overview;
mod pytorch;
mod quant;
mod remote;
mod save;
mod series;
mod table;
mod views;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tensorscope::gui::dialog::{DialogResult, FileDialog};
use tensorscope::gui::{Command, State, TensorscopeApp};

/// A dialog that returns what the test says.
pub struct ScriptedDialog {
    pub answer: Mutex<DialogResult>,
    pub available: bool,
}

impl FileDialog for ScriptedDialog {
    fn available(&self) -> bool {
        self.available
    }
    fn pick_files(&self) -> DialogResult {
        self.answer
            .lock()
            .map_or(DialogResult::Cancelled, |a| a.clone())
    }
    fn pick_folders(&self) -> DialogResult {
        self.pick_files()
    }
}

type App = Harness<'static, TensorscopeApp>;

/// The one way tests build a harness around the app.
pub fn harness(state: State, dialog: Arc<dyn FileDialog>) -> App {
    let app = TensorscopeApp::new(state, dialog);
    Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut TensorscopeApp| app.frame_ui(ui), app)
}

fn no_dialog() -> Arc<dyn FileDialog> {
    Arc::new(ScriptedDialog {
        answer: Mutex::new(DialogResult::Cancelled),
        available: true,
    })
}

/// Steps until no job has run for a few frames (a click starts its job a
/// frame later), or fails the test after 60 s.
pub fn settle(h: &mut App) {
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut idle = 0;
    while idle < 4 {
        h.step();
        if h.state().is_idle() {
            idle += 1;
        } else {
            idle = 0;
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(Instant::now() < deadline, "jobs did not finish in time");
    }
}

/// Opens `path` as `tensorscope PATH` would.
fn open(h: &mut App, path: &Path) {
    h.state_mut().send(Command::Open(path.to_path_buf()));
    settle(h);
}

/// The tensor names the table shows, top to bottom: the labels among
/// `names` in the left half of the window (the table; the tensor view is on
/// the right), by their position on screen.
fn table_order(h: &App, names: &[&str]) -> Vec<String> {
    let mut shown: Vec<(f32, String)> = names
        .iter()
        .filter_map(|n| {
            let y = h
                .query_all_by_label(n)
                .map(|node| node.rect())
                .filter(|r| r.min.x < 700.0)
                .map(|r| r.min.y)
                .reduce(f32::min)?;
            Some((y, (*n).to_owned()))
        })
        .collect();
    shown.sort_by(|a, b| a.0.total_cmp(&b.0));
    shown.into_iter().map(|(_, n)| n).collect()
}

/// Replaces the text of a text field, as typing over it would.
fn set_text(node: &egui_kittest::Node<'_>, text: &str) {
    node.focus();
    node.set_text_value_accesskit(text);
}

/// True when a checkpoint is open in the active tab: its status line shows.
fn shows_a_checkpoint(h: &App) -> bool {
    h.query_by_label_contains("tensors ·").is_some()
}

/// Clicks an entry of the File menu.
fn file_menu(h: &mut App, entry: &str) {
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label(entry).click();
    h.run_steps(2);
}

/// A click at `pos` (a point in a plot, which has no widget of its own to
/// click), then two frames.
fn click_at(h: &mut App, pos: egui::Pos2) {
    h.hover_at(pos);
    h.drag_at(pos);
    h.event(egui::Event::PointerButton {
        pos,
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::NONE,
    });
    h.run_steps(2);
}
