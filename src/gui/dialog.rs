//! The open dialog behind a trait, so tests can inject paths and the app can
//! fall back to its own picker where no native dialog exists.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a dialog returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogResult {
    /// The user chose these paths.
    Picked(Vec<PathBuf>),
    /// The user closed the dialog.
    Cancelled,
    /// No dialog could be shown.
    Unavailable,
}

/// A way to ask the user for files to open. Runs on a background thread.
pub trait FileDialog: Send + Sync {
    /// Whether a dialog can be shown at all.
    fn available(&self) -> bool;
    /// Shows the dialog and blocks until it closes.
    fn pick_files(&self) -> DialogResult;
    /// Shows a dialog for folders and blocks until it closes.
    fn pick_folders(&self) -> DialogResult {
        DialogResult::Unavailable
    }
    /// Shows a save dialog starting at `suggested` and blocks until it
    /// closes; `Picked` holds one path.
    fn save_file(&self, suggested: &Path) -> DialogResult {
        let _ = suggested;
        DialogResult::Unavailable
    }
}

/// The desktop's dialog through `rfd` (the XDG desktop portal, else zenity).
#[derive(Debug)]
pub struct NativeDialog {
    /// Whether a portal or zenity is there, found once at start: looking
    /// through `PATH` reads the file system, which a frame must not.
    available: bool,
}

impl NativeDialog {
    /// Finds out whether a native dialog can be shown here.
    pub fn new() -> Self {
        let on_path = |tool: &str| {
            std::env::var_os("PATH").is_some_and(|paths| {
                std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file())
            })
        };
        Self {
            available: std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some() || on_path("zenity"),
        }
    }
}

impl Default for NativeDialog {
    fn default() -> Self {
        Self::new()
    }
}

/// A dialog that closes faster than this was never shown: `rfd` returns
/// nothing both when the user cancels and when no backend exists.
const NOT_SHOWN: Duration = Duration::from_millis(300);

impl FileDialog for NativeDialog {
    fn available(&self) -> bool {
        self.available
    }

    fn pick_files(&self) -> DialogResult {
        let started = Instant::now();
        let picked = rfd::FileDialog::new()
            .set_title("Open checkpoint")
            .add_filter("checkpoints", crate::format::CHECKPOINT_EXTENSIONS)
            .add_filter("safetensors", &["safetensors", "json"])
            .add_filter("NumPy", &["npy", "npz"])
            .add_filter("PyTorch", &["bin", "pt", "pth", "ckpt"])
            .add_filter("all files", &["*"])
            .pick_files();
        match picked {
            Some(paths) if !paths.is_empty() => DialogResult::Picked(paths),
            _ if started.elapsed() < NOT_SHOWN => DialogResult::Unavailable,
            _ => DialogResult::Cancelled,
        }
    }

    fn pick_folders(&self) -> DialogResult {
        let started = Instant::now();
        let picked = rfd::FileDialog::new()
            .set_title("Open series: a folder of checkpoints")
            .pick_folders();
        match picked {
            Some(paths) if !paths.is_empty() => DialogResult::Picked(paths),
            _ if started.elapsed() < NOT_SHOWN => DialogResult::Unavailable,
            _ => DialogResult::Cancelled,
        }
    }

    fn save_file(&self, suggested: &Path) -> DialogResult {
        let started = Instant::now();
        let mut d = rfd::FileDialog::new().set_title("Save as");
        if let Some(dir) = suggested.parent() {
            d = d.set_directory(dir);
        }
        if let Some(name) = suggested.file_name() {
            d = d.set_file_name(name.to_string_lossy());
        }
        match d.save_file() {
            Some(p) => DialogResult::Picked(vec![p]),
            None if started.elapsed() < NOT_SHOWN => DialogResult::Unavailable,
            None => DialogResult::Cancelled,
        }
    }
}
