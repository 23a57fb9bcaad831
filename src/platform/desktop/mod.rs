//! The double-click integration of each desktop: `tensorscope
//! --install-desktop` makes this program open the checkpoints it reads for
//! the current user, `--uninstall-desktop` removes exactly that.
//!
//! - freedesktop (Linux): a `.desktop` entry, MIME types, the icon, the
//!   default handler (`freedesktop.rs`);
//! - Windows: a ProgID per container under `HKCU\Software\Classes`, with
//!   the icon and `"…\tensorscope-gui.exe" "%1"` (`registry.rs` says what
//!   is written and removed, `windows.rs` writes it);
//! - macOS: the app bundle declares its document types in its `Info.plist`
//!   (`assets/macos/Info.plist`), which Launch Services reads when the app
//!   is copied to `/Applications`: nothing to install.

#[cfg(not(any(windows, target_os = "macos")))]
pub mod freedesktop;
pub mod registry;
#[cfg(windows)]
mod windows;

use std::io;
use std::path::{Path, PathBuf};

/// A container Tensorscope opens, as desktops name it.
#[derive(Debug, Clone, Copy)]
pub struct Container {
    /// The Windows ProgID (`Tensorscope.Safetensors`).
    pub prog_id: &'static str,
    /// What a file manager calls such a file.
    pub description: &'static str,
    /// The freedesktop MIME type (ours, in `assets/tensorscope-mime.xml`,
    /// or one shared-mime-info defines, listed only:
    /// `freedesktop::SYSTEM_MIME_TYPES`).
    pub mime: &'static str,
    /// The extensions (without the dot) a double-click opens with
    /// Tensorscope.
    pub extensions: &'static [&'static str],
    /// Extensions other programs use too: Tensorscope is offered for them
    /// (*Open with*), never made their default.
    pub shared_extensions: &'static [&'static str],
}

/// Every container Tensorscope opens by a double-click; the MIME XML, the
/// desktop entry and the macOS `Info.plist` list the same (tests keep them
/// equal).
pub const CONTAINERS: &[Container] = &[
    Container {
        prog_id: "Tensorscope.Safetensors",
        description: "Safetensors checkpoint",
        mime: "application/x-safetensors",
        extensions: &["safetensors"],
        shared_extensions: &[],
    },
    Container {
        prog_id: "Tensorscope.Npy",
        description: "NumPy array",
        mime: "application/x-npy",
        extensions: &["npy"],
        shared_extensions: &[],
    },
    Container {
        prog_id: "Tensorscope.Npz",
        description: "NumPy archive of arrays",
        mime: "application/x-npz",
        extensions: &["npz"],
        shared_extensions: &[],
    },
    Container {
        prog_id: "Tensorscope.PyTorch",
        description: "PyTorch checkpoint",
        mime: "application/x-pytorch",
        extensions: &["pt", "pth", "ckpt"],
        // `pytorch_model.bin`: a `.bin` can be anything.
        shared_extensions: &["bin"],
    },
    Container {
        prog_id: "Tensorscope.Gguf",
        description: "GGUF model",
        mime: "application/x-gguf",
        extensions: &["gguf"],
        shared_extensions: &[],
    },
    Container {
        prog_id: "Tensorscope.Onnx",
        description: "ONNX model",
        mime: "application/x-onnx",
        extensions: &["onnx"],
        shared_extensions: &[],
    },
    Container {
        prog_id: "Tensorscope.TensorFlow",
        description: "TensorFlow checkpoint index",
        mime: "application/x-tensorflow-index",
        extensions: &[],
        // `ckpt-1.index`, `variables.index`: other programs write `.index`
        // files too.
        shared_extensions: &["index"],
    },
    Container {
        prog_id: "Tensorscope.Keras",
        description: "Keras model",
        mime: "application/x-keras",
        extensions: &["keras"],
        shared_extensions: &[],
    },
    Container {
        prog_id: "Tensorscope.Hdf5",
        description: "HDF5 file",
        // shared-mime-info's type of HDF files (HDF4 and HDF5): listed in
        // the desktop entry, never redefined.
        mime: "application/x-hdf",
        extensions: &[],
        // Keras' `.weights.h5` and `.h5` models, and every other program's
        // HDF5 data.
        shared_extensions: &["h5", "hdf5"],
    },
    Container {
        prog_id: "Tensorscope.Flax",
        description: "Flax checkpoint",
        mime: "application/x-flax-msgpack",
        extensions: &[],
        // MessagePack is a general serialization format.
        shared_extensions: &["msgpack"],
    },
];

impl Container {
    /// Whether Tensorscope becomes the default opener of the container's
    /// files: only when it has extensions of its own. A container known by
    /// shared extensions only (`.index`, `.h5`, `.msgpack`) is offered
    /// (*Open with*), never made the default.
    pub const fn claims_default(&self) -> bool {
        !self.extensions.is_empty()
    }
}

/// What an install or uninstall did, step by step.
#[derive(Debug, Default)]
pub struct Report {
    /// Every file created or replaced, in the order written (so a failed
    /// install can say how far it got).
    pub written: Vec<PathBuf>,
    /// Every file removed.
    pub removed: Vec<PathBuf>,
    /// Registry keys and values set or removed, helper programs run, and
    /// how each went.
    pub steps: Vec<String>,
}

/// Makes `exe` open every container for the current user.
pub fn install(exe: &Path) -> io::Result<Report> {
    #[cfg(windows)]
    return windows::install(exe);
    #[cfg(target_os = "macos")]
    return macos_bundle_only(exe);
    #[cfg(not(any(windows, target_os = "macos")))]
    return freedesktop::install(exe);
}

/// Removes what [`install`] wrote for the current user.
pub fn uninstall() -> io::Result<Report> {
    #[cfg(windows)]
    return windows::uninstall();
    #[cfg(target_os = "macos")]
    return macos_bundle_only(Path::new(""));
    #[cfg(not(any(windows, target_os = "macos")))]
    return freedesktop::uninstall();
}

/// On macOS the bundle's `Info.plist` is the registration.
#[cfg(target_os = "macos")]
fn macos_bundle_only(_exe: &Path) -> io::Result<Report> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "on macOS the app bundle declares the files it opens: copy Tensorscope.app to \
         /Applications (or open it once) and Finder offers it; nothing is installed",
    ))
}

/// The GUI program beside the command-line one: on Windows the registry
/// names `tensorscope-gui.exe` (no console window), when it is there.
pub fn gui_program(exe: &Path) -> PathBuf {
    let gui = exe.with_file_name(if cfg!(windows) {
        "tensorscope-gui.exe"
    } else {
        "tensorscope-gui"
    });
    if cfg!(windows) && gui.is_file() {
        gui
    } else {
        exe.to_path_buf()
    }
}
