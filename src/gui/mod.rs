//! The desktop explorer (egui/eframe), behind the `gui` feature. Only this
//! module knows egui. A frame collects finished background jobs, draws the
//! panels, and runs the [`Command`]s they sent (see `ARCHITECTURE.md`):
//!
//! - [`app`]: the frame loop; `runner`: the one place commands change the
//!   session and start jobs, whose work is in `work`;
//! - [`command`] and [`state`]: plain data, importing no panel;
//!   [`task`]: the one type for a value computed in the background;
//! - `panels`: drawing only; [`model`]: the table's sorting, filtering and
//!   tree as plain functions; [`dialog`]: the native dialogs behind a trait.

pub mod app;
pub mod command;
pub mod demo;
pub mod dialog;
pub mod model;
mod panels;
mod runner;
pub mod state;
pub mod task;
mod theme;

pub use theme::icon_rgba;
mod work;

use std::path::PathBuf;
use std::sync::Arc;

use eframe::egui;

pub use app::TensorscopeApp;
pub use command::Command;
pub use state::{State, ThemeChoice};

pub use crate::text::{safe_multiline, safe_text};

/// Opens the window with `files` (and the demo when asked), `compare` as A
/// compared with B, and `series` as a training run; returns the process
/// exit code.
pub fn run(
    files: Vec<PathBuf>,
    demo: bool,
    compare: Option<(PathBuf, PathBuf)>,
    series: Option<Vec<PathBuf>>,
) -> i32 {
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
    // macOS sends Finder's files as events, the first during launch.
    crate::platform::open_files::install();
    let result = eframe::run_native(
        "Tensorscope",
        options,
        Box::new(move |cc| {
            let waker = cc.egui_ctx.clone();
            crate::platform::open_files::set_waker(move || waker.request_repaint());
            let state: State = cc
                .storage
                .and_then(|s| eframe::get_value(s, eframe::APP_KEY))
                .unwrap_or_default();
            theme::setup(&cc.egui_ctx);
            let mut app = TensorscopeApp::new(state, Arc::new(dialog::NativeDialog::new()));
            for f in files {
                app.send(Command::Open(f));
            }
            if demo {
                app.send(Command::OpenDemo);
            }
            if let Some((a, b)) = compare {
                // Compare acts on the active tab: A's, once Open has run.
                app.send(Command::Open(a));
                app.send(Command::Compare(b));
            }
            if let Some(paths) = series {
                app.send(Command::OpenSeries(paths));
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
        let missing: Vec<char> = "±·×Δ—…−⏴⏵⏶⏷ÄäéÅσ✔⚠🌐"
            .chars()
            .filter(|&c| !ctx.fonts_mut(|f| f.has_glyph(&egui::FontId::proportional(14.0), c)))
            .collect();
        assert!(missing.is_empty(), "no glyph for {missing:?}");
    }
}
