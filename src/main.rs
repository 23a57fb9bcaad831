//! The `tensorscope` binary: parses the command line, then runs a verb, the
//! desktop explorer, or the desktop integration, and exits with its code.

mod cli;

use cli::Launch;

fn main() {
    let code = match cli::parse(std::env::args_os()) {
        Launch::Verb(verb) => cli::run_verb(verb),
        Launch::Explorer(args) => explorer(args),
        Launch::InstallDesktop => cli::install_desktop(),
        Launch::Exit(code) => code,
    };
    std::process::exit(code);
}

#[cfg(feature = "gui")]
fn explorer(args: cli::ExplorerArgs) -> i32 {
    tensorscope::gui::run(args.files, args.demo, args.compare)
}

#[cfg(not(feature = "gui"))]
fn explorer(_: cli::ExplorerArgs) -> i32 {
    eprintln!(
        "tensorscope: this build has no desktop explorer (built without the `gui` feature); \
         run a verb instead (tensorscope --help)"
    );
    cli::EXIT_ERROR
}
