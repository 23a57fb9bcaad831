//! The `tensorscope` binary: parses the command line, then runs a verb, the
//! desktop explorer, or the desktop integration, and exits with its code.
//!
//! On Windows it is a console program, so that the verbs print to the
//! terminal they were started from and their exit codes reach it; the
//! registry opens files with `tensorscope-gui.exe` (`src/gui_main.rs`), a
//! program with no console.

fn main() {
    ignore_file_size_signal();
    std::process::exit(tensorscope::launch::main(std::env::args_os()));
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
