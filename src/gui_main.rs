//! `tensorscope-gui`: the desktop explorer alone, on the files given.
//!
//! On Windows a program is either a console program or a window program,
//! chosen when it is linked. `tensorscope.exe` is a console program, so
//! its verbs print to the terminal that started it and `cmd` waits for its
//! exit code; started from Explorer it would bring a console window up
//! with its own. This one is a window program (no console): the registry's
//! file types open checkpoints with it (`--install-desktop`). Elsewhere it
//! is the same explorer as `tensorscope FILE...`.

#![cfg_attr(windows, windows_subsystem = "windows")]

fn main() {
    let mut files = Vec::new();
    let mut demo = false;
    for arg in std::env::args_os().skip(1) {
        if arg == "--demo" {
            demo = true;
        } else {
            files.push(std::path::PathBuf::from(arg));
        }
    }
    std::process::exit(tensorscope::gui::run(files, demo, None, None));
}
