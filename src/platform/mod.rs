//! What differs per operating system, one file per concern, each choosing
//! its OS behind `cfg`; nothing outside this module asks which OS it runs on.
//!
//! - [`fault`]: the guard that turns a read of a mapped file cut short
//!   (SIGBUS on Linux and macOS, `EXCEPTION_IN_PAGE_ERROR` on Windows) into
//!   zeros and a flag instead of a crash;
//! - [`lock`]: the advisory locks of the remote cache's entries;
//! - [`dirs`]: the home, cache and configuration folders (XDG on Linux,
//!   `~/Library` on macOS, `%LOCALAPPDATA%` and `%APPDATA%` on Windows);
//! - [`paths`]: two paths naming the same file, and paths as a person
//!   reads them (Windows' `\\?\` prefix dropped where it is not needed);
//! - [`desktop`]: the double-click integration (freedesktop's entry and MIME
//!   types, the Windows registry's ProgIDs; a macOS bundle declares its own
//!   in its `Info.plist`);
//! - [`pipe`]: a closed pipe told apart from a failed write;
//! - [`sparse`]: sparse files for the remote cache (NTFS must be asked)
//!   and their holes punched (Linux, Windows);
//! - [`open_files`]: files the desktop asks a running explorer to open
//!   (macOS delivers Finder's double-clicks, *Open With* and drops on the
//!   Dock icon as events, not as arguments; `macos` receives them);
//! - [`icons`]: the app icon's ICNS (macOS bundle) and ICO (Windows)
//!   containers, written on any OS by `examples/icons.rs`.

pub mod desktop;
pub mod dirs;
pub mod fault;
pub mod icons;
pub mod lock;
#[cfg(target_os = "macos")]
mod macos;
pub mod open_files;
pub mod paths;
pub mod pipe;
pub mod sparse;
#[cfg(windows)]
pub mod windows;
