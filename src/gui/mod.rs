//! The desktop explorer (egui/eframe). Only this module knows egui: it
//! draws the library's state and runs long work as [`crate::jobs::Job`]s.

pub mod app;
pub mod demo;
pub mod dialog;
pub mod diff_view;
pub mod error_pane;
pub mod model;
pub mod panels;
pub mod picker;
pub mod save_dialogs;
pub mod side;
pub mod stats_view;
pub mod table;
pub mod tensor_view;
pub mod theme;

use std::path::PathBuf;

use eframe::egui;
use std::sync::Arc;

pub use app::{Command, State, TensorscopeApp};

pub use crate::text::{safe_multiline, safe_text};

/// A running job's row: a spinner, a label, a progress bar once the total
/// is known, and a Cancel button.
pub fn job_row<T: Send + 'static>(
    ui: &mut egui::Ui,
    job: &crate::jobs::Job<T>,
    label: &str,
    width: f32,
) {
    ui.horizontal(|ui| {
        ui.spinner();
        if !label.is_empty() {
            ui.label(label);
        }
        if let Some(f) = job.progress().fraction() {
            ui.add(
                egui::ProgressBar::new(f)
                    .desired_width(width)
                    .show_percentage(),
            );
        }
        if ui.button("Cancel").clicked() {
            job.cancel();
        }
    });
}

/// Opens the window with `files` (and the demo when asked); returns the
/// process exit code.
pub fn run(files: Vec<PathBuf>, demo: bool, compare: Option<(PathBuf, PathBuf)>) -> i32 {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("Tensorscope")
            .with_app_id("tensorscope")
            .with_inner_size([1280.0, 800.0])
            .with_min_inner_size([640.0, 400.0])
            .with_icon(Arc::new(theme::icon()))
            .with_drag_and_drop(true),
        renderer: eframe::Renderer::Glow,
        persist_window: true,
        ..Default::default()
    };
    let result = eframe::run_native(
        "Tensorscope",
        options,
        Box::new(move |cc| {
            let state: State = cc
                .storage
                .and_then(|s| eframe::get_value(s, eframe::APP_KEY))
                .unwrap_or_default();
            theme::setup(&cc.egui_ctx);
            let mut app = TensorscopeApp::new(state, Arc::new(dialog::NativeDialog));
            app.set_context(cc.egui_ctx.clone());
            for f in files {
                app.open(f);
            }
            if demo {
                app.send(Command::OpenDemo);
            }
            if let Some((a, b)) = compare {
                app.open(a);
                app.send(Command::Compare(b));
            }
            Ok(Box::new(app))
        }),
    );
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tensorscope: cannot open a window: {e}");
            eprintln!(
                "(the desktop explorer needs a display; the verbs info and validate work without one)"
            );
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every symbol the UI draws must have a glyph in egui's fonts (a
    /// missing one draws as a box, and fails the kittest flows).
    #[test]
    fn ui_symbols_have_glyphs() {
        let ctx = egui::Context::default();
        let mut out = ctx.run_ui(egui::RawInput::default(), |_| {});
        out.textures_delta.clear();
        let missing: Vec<char> = "±·×Δ—…−⏴⏵⏶⏷ÄäéÅ"
            .chars()
            .filter(|&c| !ctx.fonts_mut(|f| f.has_glyph(&egui::FontId::proportional(14.0), c)))
            .collect();
        assert!(missing.is_empty(), "no glyph for {missing:?}");
    }
}
