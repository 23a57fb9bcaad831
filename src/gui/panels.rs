//! The window's layout: menu bar, tab bar, status bar, and what the central
//! area shows for the active tab (start screen, loading, error, or the
//! table with the side panel).

use std::time::Duration;

use eframe::egui;

use super::app::{Command, DialogPurpose, Load, TensorscopeApp};
use super::model::{human_bytes, human_count};
use super::{diff_view, error_pane, picker, save_dialogs, side, table};
use crate::format::LoadError;

/// Draws the whole window.
pub fn root_ui(ui: &mut egui::Ui, app: &mut TensorscopeApp) {
    egui::Panel::top("menu_bar").show(ui, |ui| menu_bar_ui(ui, app));
    if !app.tabs.is_empty() {
        egui::Panel::top("tab_bar").show(ui, |ui| tab_bar_ui(ui, app));
    }
    egui::Panel::bottom("status_bar").show(ui, |ui| status_bar_ui(ui, app));

    let active = app.active;
    let recent = app.state.recent.clone();
    let mut commands = Vec::new();
    match app.tabs.get_mut(active) {
        None => {
            egui::CentralPanel::default()
                .show(ui, |ui| start_screen_ui(ui, &recent, &mut commands));
        }
        Some(tab) => match &tab.load {
            Load::Loading { job, started } => {
                let started = *started;
                let fraction = job.progress().fraction();
                egui::CentralPanel::default().show(ui, |ui| {
                    ui.vertical_centered(|ui| {
                        ui.add_space(ui.available_height() * 0.35);
                        // A header parses in milliseconds; show progress only
                        // when it takes long enough to notice.
                        if started.elapsed() > Duration::from_millis(150) {
                            ui.spinner();
                            ui.label(format!(
                                "Reading the header of {}",
                                super::safe_text(&tab.path.display().to_string(), 200)
                            ));
                            if let Some(f) = fraction {
                                ui.add(egui::ProgressBar::new(f).desired_width(300.0));
                            }
                            if ui.button("Cancel").clicked() {
                                commands.push(Command::CancelLoad(active));
                            }
                        } else {
                            ui.ctx().request_repaint_after(Duration::from_millis(160));
                        }
                    });
                });
            }
            Load::Failed(err) => {
                let err: LoadError = err.clone();
                egui::CentralPanel::default().show(ui, |ui| {
                    error_pane::error_pane_ui(ui, &err, active, &mut commands);
                });
            }
            Load::Cancelled => {
                egui::CentralPanel::default().show(ui, |ui| {
                    ui.vertical_centered(|ui| {
                        ui.add_space(ui.available_height() * 0.35);
                        ui.label("Opening was cancelled.");
                        ui.horizontal(|ui| {
                            if ui.button("Open again").clicked() {
                                commands.push(Command::Reload(active));
                            }
                            if ui.button("Close tab").clicked() {
                                commands.push(Command::CloseTab(active));
                            }
                        });
                    });
                });
            }
            Load::Ready(_) if tab.compare.is_some() => {
                let a = tab.loaded().map(|l| std::sync::Arc::clone(&l.ck));
                let ctx = ui.ctx().clone();
                let repaint = move || ctx.request_repaint();
                let mut close = false;
                if let Some(c) = &mut tab.compare {
                    egui::Panel::right("diff_side_panel")
                        .resizable(true)
                        .default_size(ui.available_width() * 0.36)
                        .size_range(260.0..=f32::INFINITY)
                        .show(ui, |ui| diff_view::pair_ui(ui, c));
                    egui::CentralPanel::default().show(ui, |ui| {
                        diff_view::diff_table_ui(ui, c, a.as_ref(), repaint, &mut close);
                    });
                }
                if close {
                    commands.push(Command::CloseCompare(active));
                }
            }
            Load::Ready(_) => {
                egui::Panel::right("side_panel")
                    .resizable(true)
                    .default_size(ui.available_width() * 0.36)
                    .size_range(260.0..=f32::INFINITY)
                    .show(ui, |ui| side::side_panel_ui(ui, tab, &mut commands));
                egui::CentralPanel::default().show(ui, |ui| {
                    table::table_panel_ui(ui, tab, &mut app.state.tree_view, &mut commands);
                });
            }
        },
    }
    app.commands.extend(commands);

    if let Some(p) = &mut app.picker {
        let mut cmds = Vec::new();
        let keep = picker::picker_ui(ui.ctx(), p, &mut cmds);
        let compare = app.picker_purpose == DialogPurpose::Compare;
        app.commands.extend(cmds.into_iter().map(|c| match c {
            Command::Open(p) if compare => Command::Compare(p),
            other => other,
        }));
        if !keep {
            app.picker = None;
        }
    }
    let repaint = {
        let ctx = ui.ctx().clone();
        move || ctx.request_repaint()
    };
    let dialog = std::sync::Arc::clone(&app.dialog);
    if let Some(d) = &mut app.export_dialog
        && !save_dialogs::export_ui(ui.ctx(), d, &dialog, repaint.clone())
    {
        app.export_dialog = None;
    }
    if let Some(d) = &mut app.save_as {
        let mut cmds = Vec::new();
        if !save_dialogs::save_as_ui(ui.ctx(), d, &dialog, repaint, &mut cmds) {
            app.save_as = None;
        }
        app.commands.extend(cmds);
    }
    drop_overlay_ui(ui.ctx());
    notices_ui(ui.ctx(), app);
}

fn menu_bar_ui(ui: &mut egui::Ui, app: &mut TensorscopeApp) {
    egui::MenuBar::new().ui(ui, |ui| {
        ui.menu_button("File", |ui| {
            if ui
                .add(
                    egui::Button::new("Open…").shortcut_text(ui.ctx().format_shortcut(
                        &egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::O),
                    )),
                )
                .clicked()
            {
                app.send(Command::OpenDialog);
            }
            ui.menu_button("Open Recent", |ui| {
                if app.state.recent.is_empty() {
                    ui.label("No recent files");
                }
                let recent = app.state.recent.clone();
                for p in recent {
                    if ui
                        .button(super::safe_text(&p.display().to_string(), 120))
                        .clicked()
                    {
                        app.send(Command::Open(p));
                    }
                }
                ui.separator();
                if ui.button("Clear recent files").clicked() {
                    app.send(Command::ClearRecent);
                }
            });
            if ui.button("Open demo checkpoint").clicked() {
                app.send(Command::OpenDemo);
            }
            let loaded = app.active_tab().is_some_and(|t| t.loaded().is_some());
            let has_cursor = app.active_tab().is_some_and(|t| t.loaded().is_some() && t.table.cursor.is_some());
            ui.separator();
            if ui
                .add_enabled(has_cursor, egui::Button::new("Export tensor…"))
                .on_hover_text("Write the selected tensor to .npy, .csv, .bin or .png")
                .clicked()
            {
                app.send(Command::ExportTensor);
            }
            if ui
                .add_enabled(loaded, egui::Button::new("Save as…"))
                .on_hover_text("A new checkpoint from the selection (or the filtered tensors): renames, metadata, dtypes")
                .clicked()
            {
                app.send(Command::SaveAs);
            }
            ui.separator();
            let can_compare = loaded;
            if ui
                .add_enabled(can_compare, egui::Button::new("Compare with…"))
                .on_hover_text(
                    "Diff the open checkpoint against another (or Shift-drop a file on the window)",
                )
                .clicked()
            {
                app.send(Command::CompareDialog);
            }
            ui.separator();
            let has_tab = !app.tabs.is_empty();
            if ui
                .add_enabled(has_tab, egui::Button::new("Close tab"))
                .clicked()
            {
                app.send(Command::CloseTab(app.active));
            }
            if ui
                .add_enabled(has_tab, egui::Button::new("Reload"))
                .clicked()
            {
                app.send(Command::Reload(app.active));
            }
            ui.separator();
            if ui.button("Quit").clicked() {
                app.send(Command::Quit);
            }
        });
        ui.menu_button("View", |ui| {
            if ui
                .checkbox(&mut app.state.tree_view, "Tree by dotted prefix")
                .changed()
                && let Some(t) = app.active_tab_mut()
            {
                t.table.dirty = true;
            }
        });
        ui.menu_button("Help", |ui| {
            ui.label(format!("Tensorscope {}", env!("CARGO_PKG_VERSION")));
            ui.label(
                "Drop .safetensors files, shard indexes or folders on the window to open them.",
            );
            ui.label("Ctrl+O open · Ctrl+F filter · Ctrl+C copy names · Up/Down move selection");
        });
    });
}

fn tab_bar_ui(ui: &mut egui::Ui, app: &mut TensorscopeApp) {
    ui.horizontal_wrapped(|ui| {
        for (i, tab) in app.tabs.iter().enumerate() {
            let title = super::safe_text(&tab.title(), 60);
            let marker = match tab.load {
                Load::Failed(_) => " (invalid)",
                Load::Loading { .. } => " …",
                _ => "",
            };
            let r = ui
                .selectable_label(i == app.active, format!("{title}{marker}"))
                .on_hover_text(super::safe_text(&tab.path.display().to_string(), 400));
            if r.clicked() {
                app.commands.push(Command::ActivateTab(i));
            }
            if r.middle_clicked() {
                app.commands.push(Command::CloseTab(i));
            }
            if ui.small_button("x").on_hover_text("Close").clicked() {
                app.commands.push(Command::CloseTab(i));
            }
            ui.separator();
        }
    });
}

fn status_bar_ui(ui: &mut egui::Ui, app: &TensorscopeApp) {
    ui.horizontal_wrapped(|ui| {
        let Some(tab) = app.active_tab() else {
            ui.label("No file open");
            return;
        };
        let Some(loaded) = tab.loaded() else {
            ui.label(super::safe_text(&tab.path.display().to_string(), 200));
            return;
        };
        let (per, all) = &loaded.totals;
        ui.label(format!(
            "{} tensors · {} parameters · {}",
            all.tensors,
            human_count(all.parameters),
            human_bytes(all.bytes)
        ))
        .on_hover_text(format!(
            "{} parameters, {} bytes",
            all.parameters, all.bytes
        ));
        ui.separator();
        for (dtype, t) in per {
            ui.label(format!("{dtype} ×{} {}", t.tensors, human_bytes(t.bytes)))
                .on_hover_text(format!(
                    "{dtype}: {} tensors, {} parameters, {} bytes",
                    t.tensors, t.parameters, t.bytes
                ));
        }
        if !tab.table.selection.is_empty() {
            ui.separator();
            ui.label(format!("{} selected", tab.table.selection.len()));
        }
    });
}

fn start_screen_ui(ui: &mut egui::Ui, recent: &[std::path::PathBuf], commands: &mut Vec<Command>) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.18);
        ui.heading("Tensorscope");
        ui.label("Look inside safetensors checkpoints without running anything.");
        ui.add_space(16.0);
        if ui
            .add(egui::Button::new("Open a file…").min_size(egui::vec2(220.0, 32.0)))
            .clicked()
        {
            commands.push(Command::OpenDialog);
        }
        ui.add_space(6.0);
        if ui
            .add(egui::Button::new("Open demo checkpoint").min_size(egui::vec2(220.0, 32.0)))
            .on_hover_text("A small checkpoint with every dtype of the format")
            .clicked()
        {
            commands.push(Command::OpenDemo);
        }
        ui.add_space(8.0);
        ui.weak("or drop a .safetensors file, a model.safetensors.index.json or a folder here");
        if !recent.is_empty() {
            ui.add_space(24.0);
            ui.strong("Recent");
            for p in recent {
                if ui
                    .link(super::safe_text(&p.display().to_string(), 120))
                    .clicked()
                {
                    commands.push(Command::Open(p.clone()));
                }
            }
        }
    });
}

fn drop_overlay_ui(ctx: &egui::Context) {
    let hovering = ctx.input(|i| !i.raw.hovered_files.is_empty());
    if !hovering {
        return;
    }
    let screen = ctx.content_rect();
    let painter = ctx.layer_painter(egui::LayerId::new(
        egui::Order::Foreground,
        egui::Id::unique("drop_overlay"),
    ));
    painter.rect_filled(screen, 0.0, egui::Color32::from_black_alpha(160));
    painter.text(
        screen.center(),
        egui::Align2::CENTER_CENTER,
        "Drop to open",
        egui::FontId::proportional(28.0),
        egui::Color32::WHITE,
    );
}

fn notices_ui(ctx: &egui::Context, app: &TensorscopeApp) {
    if app.notices.is_empty() {
        return;
    }
    egui::Area::new(egui::Id::unique("notices"))
        .anchor(egui::Align2::RIGHT_BOTTOM, egui::vec2(-12.0, -36.0))
        .order(egui::Order::Foreground)
        .show(ctx, |ui| {
            for n in &app.notices {
                egui::Frame::popup(ui.style()).show(ui, |ui| {
                    ui.label(super::safe_text(&n.text, 300));
                });
            }
        });
}
