//! The `tensorscope` binary: parses the command line, then runs a verb, the
//! desktop explorer, or the desktop integration, and exits with its code.
//!
//! On Windows it is a console program, so that the verbs print to the
//! terminal they were started from and their exit codes reach it; the
//! registry opens files with `tensorscope-gui.exe` (`src/gui_main.rs`), a
//! program with no console.

mod cli;

use cli::Launch;

fn main() {
    ignore_file_size_signal();
    let code = match cli::parse(std::env::args_os()) {
        Launch::Verb(verb) => cli::run_verb(verb),
        Launch::Explorer(args) => explorer(args),
        Launch::InstallDesktop => cli::install_desktop(),
        Launch::UninstallDesktop => cli::uninstall_desktop(),
        Launch::Exit(code) => code,
    };
    std::process::exit(code);
}

/// A write past the file-size limit (`ulimit -f`) then fails with EFBIG,
/// so the writer reports it and removes its temporary file, instead of the
/// process being killed by SIGXFSZ with the temporary file left behind.
#[cfg(unix)]
#[allow(
    unsafe_code,
    reason = "setting a signal's disposition has no safe interface in std"
)]
fn ignore_file_size_signal() {
    // SAFETY: SIG_IGN installs no handler code, so nothing can run in
    // signal context; this runs once, before any other thread is started.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

#[cfg(not(unix))]
fn ignore_file_size_signal() {}

#[cfg(feature = "gui")]
fn explorer(args: cli::ExplorerArgs) -> i32 {
    // Started by a double-click on the console program (Windows made a
    // console window for it): that window goes, the explorer's stays.
    #[cfg(windows)]
    tensorscope::platform::windows::leave_own_console();
    tensorscope::gui::run(args.files, args.demo, args.compare, args.series)
}

#[cfg(not(feature = "gui"))]
fn explorer(_: cli::ExplorerArgs) -> i32 {
    eprintln!(
        "tensorscope: this build has no desktop explorer (built without the `gui` feature); \
         run a verb instead (tensorscope --help)"
    );
    cli::EXIT_ERROR
}
