//! The whole program behind one call: the command line parsed into a
//! verb, the desktop explorer or the desktop integration, each run. The
//! `tensorscope` binary and the Python module's `tensorscope` command both
//! call [`main`]; it sits above the command line and the explorer, which
//! never import each other.

use std::ffi::OsString;

use crate::cli::{self, ExplorerArgs, Launch};

/// The whole command line: parses `args` (the program's name first), then
/// runs a verb, the desktop explorer or the desktop integration; returns
/// the exit code. The `tensorscope` binary and the Python module's
/// `tensorscope` command both run this.
pub fn main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match cli::parse(args) {
        Launch::Verb(verb) => cli::run_verb(verb),
        Launch::Explorer(args) => explorer(args),
        Launch::InstallDesktop => cli::install_desktop(),
        Launch::UninstallDesktop => cli::uninstall_desktop(),
        Launch::Exit(code) => code,
    }
}

#[cfg(feature = "gui")]
fn explorer(args: ExplorerArgs) -> i32 {
    // Started by a double-click on the console program (Windows made a
    // console window for it): that window goes, the explorer's stays.
    #[cfg(windows)]
    crate::platform::windows::leave_own_console();
    crate::gui::run(args.files, args.demo, args.compare, args.series)
}

#[cfg(not(feature = "gui"))]
fn explorer(_: ExplorerArgs) -> i32 {
    eprintln!(
        "tensorscope: this build has no desktop explorer (built without the `gui` feature); \
         run a verb instead (tensorscope --help)"
    );
    cli::EXIT_ERROR
}
