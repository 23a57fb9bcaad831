//! The desktop explorer (egui/eframe). Only this module knows egui: it
//! draws the library's state and runs long work as [`crate::jobs::Job`]s.

pub mod app;
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

use std::fmt::Write as _;
use std::path::PathBuf;

use eframe::egui;
use std::sync::Arc;

pub use app::{Command, State, TensorscopeApp};

/// Makes untrusted text (names, metadata) safe to draw on one line:
/// control characters and bidi overrides are shown escaped, and text past
/// `max_chars` is cut with a note of its length.
pub fn safe_text(s: &str, max_chars: usize) -> String {
    escape(s, max_chars, false)
}

/// Like [`safe_text`] but keeps line breaks and tabs.
pub fn safe_multiline(s: &str, max_chars: usize) -> String {
    escape(s, max_chars, true)
}

fn escape(s: &str, max_chars: usize, keep_lines: bool) -> String {
    let mut out = String::with_capacity(s.len().min(max_chars.saturating_mul(4)));
    for (i, c) in s.chars().enumerate() {
        if i == max_chars {
            let _ = write!(out, "… ({} bytes in all)", s.len());
            break;
        }
        let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}');
        if keep_lines && (c == '\n' || c == '\t') {
            out.push(c);
        } else if c.is_control() || bidi {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs `work` on the thread pool of the GUI's jobs: all cores but one (at
/// least one thread), so the window stays responsive while a multi-GB scan
/// or diff runs. Falls back to the calling thread if no pool can be made.
pub fn on_job_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let threads =
            std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tensorscope-job-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(p) => p.install(work),
        None => work(),
    }
}

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

    #[test]
    fn untrusted_text_is_escaped() {
        assert_eq!(safe_text("a\nb\u{202E}", 10), "a\\u{a}b\\u{202e}");
        assert_eq!(safe_multiline("a\nb", 10), "a\nb");
        assert!(safe_text(&"x".repeat(1 << 20), 100).len() < 200);
    }
}
