//! The window's frame: menu bar, tab bar, status bar, the start screen,
//! the panes of a tab that is loading, cancelled or failed, the drop
//! overlay and the notices.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use eframe::egui;

use crate::gui::command::{Command, JobId};
use crate::gui::safe_text;
use crate::gui::state::{DialogPurpose, Notice, Session, ThemeChoice};
use crate::gui::task::Failure;
use crate::jobs::Progress;
use crate::text::{human_bytes, human_count};

/// A header parses in milliseconds: show progress only after this long.
const LOADING_DELAY: Duration = Duration::from_millis(150);

/// File, View and Help menus.
pub fn menu_bar_ui(ui: &mut egui::Ui, session: &Session, out: &mut Vec<Command>) {
    egui::MenuBar::new().ui(ui, |ui| {
        ui.menu_button("File", |ui| file_menu_ui(ui, session, out));
        ui.menu_button("View", |ui| {
            let mut tree = session.state.tree_view;
            if ui.checkbox(&mut tree, "Tree by dotted prefix").changed() {
                out.push(Command::SetTreeView(tree));
            }
            ui.separator();
            ui.label("Theme");
            for (choice, label) in [
                (ThemeChoice::System, "Follow the system"),
                (ThemeChoice::Light, "Light"),
                (ThemeChoice::Dark, "Dark"),
            ] {
                if ui.radio(session.state.theme == choice, label).clicked() {
                    out.push(Command::SetTheme(choice));
                }
            }
        });
        ui.menu_button("Help", |ui| {
            ui.label(format!("Tensorscope {}", env!("CARGO_PKG_VERSION")));
            ui.label(
                "Drop .safetensors files, shard indexes or folders on the window to open them.",
            );
            ui.label(
                "Ctrl+O open · Ctrl+W close tab · Ctrl+Tab next tab · Ctrl+F filter · \
                 Esc clear filter, then selection · F5 reload · Ctrl+C copy names · \
                 Up/Down move selection",
            );
        });
    });
}

fn file_menu_ui(ui: &mut egui::Ui, session: &Session, out: &mut Vec<Command>) {
    let open_shortcut = egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::O);
    if ui
        .add(egui::Button::new("Open…").shortcut_text(ui.ctx().format_shortcut(&open_shortcut)))
        .clicked()
    {
        out.push(Command::OpenDialog(DialogPurpose::Open));
    }
    if ui
        .button("Open series…")
        .on_hover_text("A training run: a folder of checkpoints (checkpoint-N/, epoch=E-step=N.ckpt, …) as one series, how every layer moved and where it blew up")
        .clicked()
    {
        out.push(Command::OpenDialog(DialogPurpose::Series));
    }
    if ui
        .button("Open URL…")
        .on_hover_text("A checkpoint on a web server or the Hugging Face Hub, read in ranges: only what is looked at is downloaded")
        .clicked()
    {
        out.push(Command::ShowOpenUrl);
    }
    ui.menu_button("Open Recent", |ui| {
        if session.state.recent.is_empty() {
            ui.label("No recent files");
        }
        for p in &session.state.recent {
            if ui
                .button(safe_text(&p.display().to_string(), 120))
                .clicked()
            {
                out.push(Command::Open(p.clone()));
            }
        }
        ui.separator();
        if ui.button("Clear recent files").clicked() {
            out.push(Command::ClearRecent);
        }
    });
    if ui.button("Open demo checkpoint").clicked() {
        out.push(Command::OpenDemo);
    }
    let tab = session.active_tab();
    let loaded = tab.is_some_and(|t| t.loaded().is_some());
    let has_cursor = tab.is_some_and(|t| t.loaded().is_some() && t.table.cursor.is_some());
    ui.separator();
    if ui
        .add_enabled(has_cursor, egui::Button::new("Export tensor…"))
        .on_hover_text("Write the selected tensor to .npy, .csv, .bin or .png")
        .clicked()
    {
        out.push(Command::ExportTensor);
    }
    if ui
        .add_enabled(loaded, egui::Button::new("Save as…"))
        .on_hover_text(
            "A new checkpoint from the selection (or the filtered tensors): renames, metadata, dtypes",
        )
        .clicked()
    {
        out.push(Command::SaveAs);
    }
    ui.separator();
    if ui
        .add_enabled(loaded, egui::Button::new("Compare with…"))
        .on_hover_text(
            "Diff the open checkpoint against another (or Shift-drop a file on the window)",
        )
        .clicked()
    {
        out.push(Command::OpenDialog(DialogPurpose::Compare));
    }
    ui.separator();
    let has_tab = !session.tabs.is_empty();
    if ui
        .add_enabled(has_tab, egui::Button::new("Close tab"))
        .clicked()
    {
        out.push(Command::CloseTab(session.active));
    }
    if ui
        .add_enabled(has_tab, egui::Button::new("Reload"))
        .clicked()
    {
        out.push(Command::Reload(session.active));
    }
    ui.separator();
    if ui.button("Quit").clicked() {
        out.push(Command::Quit);
    }
}

/// One button per open tab, marked while loading or when invalid.
pub fn tab_bar_ui(ui: &mut egui::Ui, session: &Session, out: &mut Vec<Command>) {
    ui.horizontal_wrapped(|ui| {
        for (i, tab) in session.tabs.iter().enumerate() {
            let title = safe_text(&tab.title(), 60);
            // A remote tab wears a badge: its bytes come over the network.
            let title = if crate::source::is_remote_location(&tab.path) {
                format!("🌐 {title}")
            } else {
                title
            };
            let marker = if tab.load.is_running() {
                " …"
            } else if matches!(tab.load.latest(), Some(Err(Failure::Error(_)))) {
                " (invalid)"
            } else {
                ""
            };
            let r = ui
                .selectable_label(i == session.active, format!("{title}{marker}"))
                .on_hover_text(safe_text(&tab.path.display().to_string(), 400));
            if r.clicked() {
                out.push(Command::ActivateTab(i));
            }
            if r.middle_clicked() {
                out.push(Command::CloseTab(i));
            }
            if ui.small_button("x").on_hover_text("Close").clicked() {
                out.push(Command::CloseTab(i));
            }
            ui.separator();
        }
    });
}

/// Tensor, parameter and byte totals, per dtype, and the selection size.
pub fn status_bar_ui(ui: &mut egui::Ui, session: &Session) {
    ui.horizontal_wrapped(|ui| {
        let Some(tab) = session.active_tab() else {
            ui.label("No file open");
            return;
        };
        let Some(loaded) = tab.loaded() else {
            ui.label(safe_text(&tab.path.display().to_string(), 200));
            return;
        };
        let (per, all) = &loaded.totals;
        // A quantized file stores fewer (packed) values than the model's
        // parameters: both are shown, each labelled.
        let logical = loaded.overview.parameters;
        if logical == all.parameters {
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
        } else {
            ui.label(format!(
                "{} tensors · {} parameters ({} stored values) · {}",
                all.tensors,
                human_count(logical),
                human_count(all.parameters),
                human_bytes(all.bytes)
            ))
            .on_hover_text(format!(
                "{logical} logical parameters of the model; {} values stored (packed codes, scales), {} bytes",
                all.parameters, all.bytes
            ));
        }
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

/// What an empty window shows: open, the demo, and the recent files.
pub fn start_screen_ui(ui: &mut egui::Ui, recent: &[PathBuf], out: &mut Vec<Command>) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.18);
        ui.heading("Tensorscope");
        ui.label(
            "Look inside checkpoints (safetensors, PyTorch, GGUF, NumPy) without running anything.",
        );
        ui.add_space(16.0);
        let size = egui::vec2(220.0, 32.0);
        if ui
            .add(egui::Button::new("Open a file…").min_size(size))
            .clicked()
        {
            out.push(Command::OpenDialog(DialogPurpose::Open));
        }
        ui.add_space(6.0);
        if ui
            .add(egui::Button::new("Open a URL…").min_size(size))
            .on_hover_text("A checkpoint on a web server or the Hugging Face Hub (hf://ORG/REPO)")
            .clicked()
        {
            out.push(Command::ShowOpenUrl);
        }
        ui.add_space(6.0);
        if ui
            .add(egui::Button::new("Open a training run…").min_size(size))
            .on_hover_text(
                "A folder of checkpoints as one series: how every layer moved, where it blew up",
            )
            .clicked()
        {
            out.push(Command::OpenDialog(DialogPurpose::Series));
        }
        ui.add_space(6.0);
        if ui
            .add(egui::Button::new("Open demo checkpoint").min_size(size))
            .on_hover_text("A small checkpoint with every dtype of the format")
            .clicked()
        {
            out.push(Command::OpenDemo);
        }
        ui.add_space(8.0);
        ui.weak("or drop a checkpoint file, a shard index or a folder here");
        if !recent.is_empty() {
            ui.add_space(24.0);
            ui.strong("Recent");
            for p in recent {
                if ui.link(safe_text(&p.display().to_string(), 120)).clicked() {
                    out.push(Command::Open(p.clone()));
                }
            }
        }
    });
}

/// The pane of a tab whose header is being read.
pub fn loading_ui(
    ui: &mut egui::Ui,
    path: &Path,
    started: Instant,
    progress: Option<&Progress>,
    tab: usize,
    out: &mut Vec<Command>,
) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.35);
        if started.elapsed() <= LOADING_DELAY {
            ui.ctx().request_repaint_after(LOADING_DELAY);
            return;
        }
        ui.spinner();
        ui.label(format!(
            "Reading the header of {}",
            safe_text(&path.display().to_string(), 200)
        ));
        if let Some(f) = progress.and_then(Progress::fraction) {
            ui.add(egui::ProgressBar::new(f).desired_width(300.0));
        }
        if crate::source::is_remote_location(path) {
            ui.weak("Remote: the headers (and config.json) are fetched; tensor bytes are fetched when looked at.");
        }
        if ui.button("Cancel").clicked() {
            out.push(Command::Cancel(JobId::Load(tab)));
        }
    });
}

/// Open again or close: the buttons under a pane that ends a tab.
fn reopen_row_ui(ui: &mut egui::Ui, tab: usize, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        if ui.button("Open again").clicked() {
            out.push(Command::Reload(tab));
        }
        if ui.button("Close tab").clicked() {
            out.push(Command::CloseTab(tab));
        }
    });
}

/// The pane of a tab whose opening was cancelled.
pub fn cancelled_ui(ui: &mut egui::Ui, tab: usize, out: &mut Vec<Command>) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.35);
        ui.label("Opening was cancelled.");
        reopen_row_ui(ui, tab, out);
    });
}

/// The pane of a tab whose opening job failed before it could read the
/// file (an internal error, or no thread to run it on).
pub fn failed_ui(ui: &mut egui::Ui, text: &str, tab: usize, out: &mut Vec<Command>) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.35);
        ui.colored_label(ui.visuals().error_fg_color, safe_text(text, 500));
        reopen_row_ui(ui, tab, out);
    });
}

/// Darkens the window while files are dragged over it.
pub fn drop_overlay_ui(ctx: &egui::Context) {
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

/// The notices, in the bottom-right corner.
pub fn notices_ui(ctx: &egui::Context, notices: &[Notice]) {
    if notices.is_empty() {
        return;
    }
    egui::Area::new(egui::Id::unique("notices"))
        .anchor(egui::Align2::RIGHT_BOTTOM, egui::vec2(-12.0, -36.0))
        .order(egui::Order::Foreground)
        .show(ctx, |ui| {
            for n in notices {
                egui::Frame::popup(ui.style()).show(ui, |ui| {
                    ui.label(safe_text(&n.text, 300));
                });
            }
        });
}
