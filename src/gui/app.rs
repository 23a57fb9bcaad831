//! The application: one frame is *collect finished jobs → read input →
//! draw the panels → run the commands they sent*. Panels only draw and
//! send [`Command`]s; the runner is the one place commands change the
//! session and start jobs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use eframe::egui;

use super::command::Command;
use super::dialog::{DialogResult, FileDialog};
use super::panels;
use super::runner::{Runner, remember};
use super::state::{DialogPurpose, Listing, ReportDigest, Session, State, ThemeChoice, Views};

/// How long a notice stays.
const NOTICE_SECS: u64 = 6;

/// The Tensorscope application.
pub struct TensorscopeApp {
    /// Everything open; panels read it, the runner changes it.
    session: Session,
    /// What the panels show and the forms' inputs; the panels' own.
    views: Views,
    /// Commands sent since the last frame's run.
    commands: Vec<Command>,
    /// The open and save dialogs (native, or a test's).
    dialog: Arc<dyn FileDialog>,
    /// The window title last sent, so it is sent only when it changes.
    title: String,
    /// The theme last applied, so it is applied only when it changes.
    theme: Option<ThemeChoice>,
}

impl TensorscopeApp {
    /// A window with the given persisted settings and dialogs.
    pub fn new(state: State, dialog: Arc<dyn FileDialog>) -> Self {
        Self {
            session: Session::new(state),
            views: Views::default(),
            commands: Vec::new(),
            dialog,
            title: String::new(),
            theme: None,
        }
    }

    /// Queues a command; it runs at the end of the next frame.
    pub fn send(&mut self, command: Command) {
        self.commands.push(command);
    }

    /// True when no job runs and no command waits (tests step until then).
    pub fn is_idle(&self) -> bool {
        self.commands.is_empty() && !self.session.is_busy()
    }

    /// The window title: the active tab's file, then the app's name.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// The settings to persist.
    pub fn state(&self) -> &State {
        &self.session.state
    }

    /// Draws one frame: the whole window.
    pub fn frame_ui(&mut self, ui: &mut egui::Ui) {
        self.poll();
        input_commands(ui.ctx(), &self.session, &mut self.commands);
        self.refresh();
        panels::root_ui(ui, &self.session, &mut self.views, &mut self.commands);
        self.update_title(ui.ctx());
        self.apply_theme(ui.ctx());
        let commands = std::mem::take(&mut self.commands);
        Runner::new(&mut self.session, &mut self.views, &self.dialog, ui.ctx()).run_all(commands);
        self.refresh();
        let expiry = Duration::from_secs(NOTICE_SECS);
        self.session.notices.retain(|n| n.at.elapsed() < expiry);
        if !self.session.notices.is_empty() {
            ui.ctx().request_repaint_after(Duration::from_millis(500));
        }
    }

    /// Rebuilds the rows of the active tab (and its comparison) if their
    /// inputs changed: O(tensors) only then, never per frame.
    fn refresh(&mut self) {
        let tree_view = self.session.state.tree_view;
        if let Some(tab) = self.session.active_tab_mut() {
            tab.refresh_rows(tree_view);
            if let Some(c) = &mut tab.compare {
                c.refresh_rows();
            }
        }
    }

    /// Collects finished jobs and sends what follows from them.
    fn poll(&mut self) {
        let s = &mut self.session;
        let mut opened: Vec<PathBuf> = Vec::new();
        for (i, tab) in s.tabs.iter_mut().enumerate() {
            if tab.load.poll()
                && let Some(loaded) = tab.load.value()
            {
                tab.path = loaded.ck.path().to_path_buf();
                opened.push(loaded.ck.path().to_path_buf());
                tab.table.dirty = true;
            }
            if let Some(r) = &mut tab.run {
                r.task.poll();
            }
            tab.tensor.stats.poll();
            tab.tensor.heatmap.poll();
            tab.tensor.fetch.poll();
            tab.tensor.prepared.poll();
            if let Some(scan) = &mut tab.tensor.scan {
                let ended = scan.task.poll();
                if scan.refresh() || ended {
                    tab.table.dirty = true;
                }
            }
            if let Some(c) = &mut tab.compare {
                c.load_b.poll();
                if c.diff.poll() {
                    c.digest = c.diff.value().map(ReportDigest::of).unwrap_or_default();
                    c.dirty = true;
                }
                if c.detail.poll()
                    && let Some(v) = self.views.tabs.get_mut(i)
                {
                    v.delta_texture = None;
                }
                if c.diff.value().is_some()
                    && let Some(name) = c.pending_pair.take()
                    && let Some(k) = c
                        .diff
                        .value()
                        .and_then(|r| r.tensors.iter().position(|t| t.name == name))
                {
                    self.commands.push(Command::SelectPair(k));
                }
                if tab.load.value().is_some() && c.b().is_some() && c.diff.wants(&()) {
                    self.commands.push(Command::StartDiff(i));
                }
            }
        }
        for p in opened {
            remember(&mut s.state.recent, &p);
        }
        if s.open_dialog.poll() {
            let purpose = s.open_dialog.latest_key().copied();
            match (purpose, s.open_dialog.latest()) {
                (Some(DialogPurpose::Series), Some(Ok(DialogResult::Picked(paths)))) => {
                    self.commands.push(Command::OpenSeries(paths.clone()));
                }
                (Some(purpose), Some(Ok(DialogResult::Picked(paths)))) => {
                    for p in paths {
                        self.commands.push(Command::opening(purpose, p.clone()));
                    }
                }
                (Some(purpose), Some(Ok(DialogResult::Unavailable) | Err(_))) => {
                    self.commands.push(Command::ShowPicker(purpose));
                }
                _ => {}
            }
            s.open_dialog.clear();
        }
        if let Some(p) = &mut s.picker
            && p.listing.poll()
        {
            match (p.listing.latest_key(), p.listing.latest()) {
                (_, Some(Ok(Listing::File(file)))) => {
                    self.commands
                        .push(Command::opening(p.purpose, file.clone()));
                    self.commands.push(Command::ClosePicker);
                }
                (Some(folder), Some(Ok(Listing::Folder(_)))) => p.folder.clone_from(folder),
                _ => {}
            }
        }
        if let Some(d) = &mut s.export {
            d.task.poll();
            take_browsed(&mut d.browse, &mut self.views.export.path);
        }
        if let Some(d) = &mut s.save_as {
            d.task.poll();
            take_browsed(&mut d.browse, &mut self.views.save_as.path);
        }
    }

    fn apply_theme(&mut self, ctx: &egui::Context) {
        let theme = self.session.state.theme;
        if self.theme != Some(theme) {
            ctx.set_theme(match theme {
                ThemeChoice::System => egui::ThemePreference::System,
                ThemeChoice::Light => egui::ThemePreference::Light,
                ThemeChoice::Dark => egui::ThemePreference::Dark,
            });
            self.theme = Some(theme);
        }
    }

    fn update_title(&mut self, ctx: &egui::Context) {
        let title = match self.session.active_tab() {
            Some(t) => format!("{} — Tensorscope", t.title()),
            None => "Tensorscope".to_owned(),
        };
        if title != self.title {
            ctx.send_viewport_cmd(egui::ViewportCommand::Title(title.clone()));
            self.title = title;
        }
    }
}

/// Moves the path a save dialog picked into a form's path field.
fn take_browsed(browse: &mut super::state::Browse, path: &mut String) {
    if !browse.task.poll() {
        return;
    }
    match browse.task.latest() {
        Some(Ok(DialogResult::Picked(p))) => {
            if let Some(p) = p.first() {
                *path = p.display().to_string();
            }
        }
        Some(Ok(DialogResult::Unavailable) | Err(_)) => browse.unavailable = true,
        _ => {}
    }
    browse.task.clear();
}

/// Window-wide input: dropped files, and the shortcuts that work anywhere.
fn input_commands(ctx: &egui::Context, session: &Session, out: &mut Vec<Command>) {
    let dropped: Vec<PathBuf> = ctx.input(|i| {
        i.raw
            .dropped_files
            .iter()
            .map(|f| f.path().to_path_buf())
            .filter(|p| !p.as_os_str().is_empty())
            .collect()
    });
    // Files the desktop sent to the running app (macOS' Finder).
    out.extend(
        crate::platform::open_files::take()
            .into_iter()
            .map(Command::Open),
    );
    let shift = ctx.input(|i| i.modifiers.shift);
    let can_compare = session.active_tab().is_some_and(|t| t.loaded().is_some());
    for (k, p) in dropped.into_iter().enumerate() {
        // Shift-drop one file on an open checkpoint compares with it.
        if shift && can_compare && k == 0 {
            out.push(Command::Compare(p));
        } else {
            out.push(Command::Open(p));
        }
    }
    let typing = ctx.egui_wants_keyboard_input();
    let keys = ctx.input_mut(|i| Keys {
        open: i.consume_key(egui::Modifiers::COMMAND, egui::Key::O),
        find: i.consume_key(egui::Modifiers::COMMAND, egui::Key::F),
        close: i.consume_key(egui::Modifiers::COMMAND, egui::Key::W),
        previous: i.consume_key(
            egui::Modifiers::COMMAND | egui::Modifiers::SHIFT,
            egui::Key::Tab,
        ),
        next: i.consume_key(egui::Modifiers::COMMAND, egui::Key::Tab),
        reload: i.consume_key(egui::Modifiers::NONE, egui::Key::F5),
        escape: !typing && i.key_pressed(egui::Key::Escape),
        copy: i.events.iter().any(|e| matches!(e, egui::Event::Copy)),
    });
    let active = session.active_tab().map(|_| session.active);
    if keys.open {
        out.push(Command::OpenDialog(DialogPurpose::Open));
    }
    if keys.find {
        out.push(Command::FocusFilter);
    }
    if keys.copy && !typing {
        out.push(Command::CopySelectedNames);
    }
    if let Some(i) = active {
        if keys.close {
            out.push(Command::CloseTab(i));
        }
        if keys.reload {
            out.push(Command::Reload(i));
        }
    }
    if keys.next {
        out.push(Command::CycleTab(1));
    }
    if keys.previous {
        out.push(Command::CycleTab(-1));
    }
    // Escape clears the filter first, then the selection; a form or the
    // picker has it to itself.
    let form_open =
        session.picker.is_some() || session.export.is_some() || session.save_as.is_some();
    if keys.escape
        && !form_open
        && let Some(tab) = session.active_tab()
    {
        if tab.table.filter_text.is_empty() {
            out.push(Command::ClearSelection);
        } else {
            out.push(Command::SetFilter(String::new()));
        }
    }
}

/// The window-wide shortcuts pressed this frame.
#[expect(clippy::struct_excessive_bools, reason = "one flag per key, read once")]
struct Keys {
    open: bool,
    find: bool,
    close: bool,
    previous: bool,
    next: bool,
    reload: bool,
    escape: bool,
    copy: bool,
}

impl eframe::App for TensorscopeApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame_ui(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, eframe::APP_KEY, &self.session.state);
    }
}
