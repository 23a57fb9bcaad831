//! The panels: functions `*_ui(ui, …)` that draw the session and push
//! [`Command`]s. They get the [`Session`] shared, so the compiler keeps them
//! from changing it; the only state they change is their own [`Views`]
//! (what each tab shows, the forms' inputs, textures), bound to their
//! widgets. They never start a job.

mod chrome;
mod dialogs;
mod diff_pair;
mod diff_table;
mod error_pane;
mod heatmap;
mod layers;
mod overview;
mod picker;
mod quant;
mod run;
mod side;
mod stats;
mod table;
mod tensor;
mod values;

use eframe::egui;

use super::command::{Command, JobId};
use super::state::{Session, Tab, ViewState, Views};
use super::task::{Failure, Task};

/// Draws the whole window.
pub fn root_ui(ui: &mut egui::Ui, session: &Session, views: &mut Views, out: &mut Vec<Command>) {
    egui::Panel::top("menu_bar").show(ui, |ui| chrome::menu_bar_ui(ui, session, out));
    if !session.tabs.is_empty() {
        egui::Panel::top("tab_bar").show(ui, |ui| chrome::tab_bar_ui(ui, session, out));
    }
    egui::Panel::bottom("status_bar").show(ui, |ui| chrome::status_bar_ui(ui, session));

    let active = session.active;
    let tree_view = session.state.tree_view;
    if let (Some(tab), Some(view)) = (session.tabs.get(active), views.tabs.get_mut(active)) {
        tab_ui(ui, tab, view, active, tree_view, out);
    } else {
        let recent = &session.state.recent;
        egui::CentralPanel::default().show(ui, |ui| chrome::start_screen_ui(ui, recent, out));
    }
    if let Some(p) = &session.picker {
        picker::picker_ui(ui.ctx(), p, &mut views.picker, out);
    }
    if let Some(d) = &session.export {
        dialogs::export_ui(ui.ctx(), d, &mut views.export, out);
    }
    if let Some(d) = &session.save_as {
        dialogs::save_as_ui(ui.ctx(), d, &mut views.save_as, out);
    }
    if session.open_url {
        let can_compare = session.active_tab().is_some_and(|t| t.loaded().is_some());
        dialogs::open_url_ui(
            ui.ctx(),
            &session.state.recent,
            can_compare,
            &mut views.url_text,
            out,
        );
    }
    chrome::drop_overlay_ui(ui.ctx());
    chrome::notices_ui(ui.ctx(), &session.notices);
}

/// The central area for a tab: loading, the error pane, the table with the
/// side panel, or a comparison.
fn tab_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    index: usize,
    tree_view: bool,
    out: &mut Vec<Command>,
) {
    if tab.run.is_some() {
        run::run_ui(ui, tab, view, index, out);
        return;
    }
    if tab.load.is_running() {
        let (path, started) = (&tab.path, tab.load_started);
        let progress = tab.load.progress();
        egui::CentralPanel::default().show(ui, |ui| {
            chrome::loading_ui(ui, path, started, progress, index, out);
        });
        return;
    }
    match tab.load.latest() {
        None => {}
        Some(Err(Failure::Error(err))) => {
            egui::CentralPanel::default()
                .show(ui, |ui| error_pane::error_pane_ui(ui, err, index, out));
        }
        Some(Err(Failure::Cancelled)) => {
            egui::CentralPanel::default().show(ui, |ui| chrome::cancelled_ui(ui, index, out));
        }
        Some(Err(failure)) => {
            let text = failure.to_string();
            egui::CentralPanel::default().show(ui, |ui| chrome::failed_ui(ui, &text, index, out));
        }
        Some(Ok(_)) if tab.compare.is_some() => {
            side_panel(ui, "diff_side_panel").show(ui, |ui| diff_pair::pair_ui(ui, tab, view, out));
            egui::CentralPanel::default().show(ui, |ui| {
                diff_table::diff_table_ui(ui, tab, view, index, out);
            });
        }
        Some(Ok(_)) => {
            side_panel(ui, "side_panel").show(ui, |ui| side::side_panel_ui(ui, tab, view, out));
            egui::CentralPanel::default().show(ui, |ui| {
                table::table_panel_ui(ui, tab, view, tree_view, out);
            });
        }
    }
}

/// The resizable panel on the right of a tab, a third of the window wide
/// at first.
fn side_panel(ui: &egui::Ui, id: &'static str) -> egui::Panel {
    egui::Panel::right(id)
        .resizable(true)
        .default_size(ui.available_width() * 0.36)
        .size_range(260.0..=f32::INFINITY)
}

/// A running task's row: a spinner, a label, a progress bar once the total
/// is known, and a Cancel button that sends `Cancel(id)`. Draws nothing
/// when the task is not running.
pub fn job_row<K, T, E>(
    ui: &mut egui::Ui,
    task: &Task<K, T, E>,
    id: JobId,
    label: &str,
    width: f32,
    out: &mut Vec<Command>,
) {
    if !task.is_running() {
        return;
    }
    ui.horizontal(|ui| {
        ui.spinner();
        if !label.is_empty() {
            ui.label(label);
        }
        if let Some(f) = task.progress().and_then(crate::jobs::Progress::fraction) {
            ui.add(
                egui::ProgressBar::new(f)
                    .desired_width(width)
                    .show_percentage(),
            );
        }
        fetched_label(ui, task.progress());
        if ui.button("Cancel").clicked() {
            out.push(Command::Cancel(id));
        }
    });
}

/// "fetched N MiB" beside a job that reads a remote file.
pub fn fetched_label(ui: &mut egui::Ui, progress: Option<&crate::jobs::Progress>) {
    if let Some(n) = progress
        .map(crate::jobs::Progress::fetched)
        .filter(|&n| n > 0)
    {
        ui.weak(format!("fetched {}", crate::text::human_bytes(n)));
    }
}

/// The bins of a linear histogram as `(low edge, high edge, count)`; a bin
/// without an upper edge (the last of a one-value histogram) is `lo..lo`.
pub fn bins<'a>(edges: &'a [f64], counts: &'a [u64]) -> impl Iterator<Item = (f64, f64, u64)> + 'a {
    counts.iter().enumerate().filter_map(move |(i, &c)| {
        let lo = *edges.get(i)?;
        Some((lo, edges.get(i + 1).copied().unwrap_or(lo), c))
    })
}

/// The width of a bar over `lo..hi`: the bin's, or 1 for a one-value bin.
pub fn bar_width(lo: f64, hi: f64) -> f64 {
    if hi > lo { hi - lo } else { 1.0 }
}

/// The message for a failed task, escaped: its error, or what happened
/// to it (cancelled, an internal error, not started).
pub fn failure_text<E: std::fmt::Display>(failure: &Failure<E>, max_chars: usize) -> String {
    super::safe_text(&failure.to_string(), max_chars)
}
