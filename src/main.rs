//! The `tensorscope` binary: parses the command line and runs a verb.

fn main() {
    let code = tensorscope::cli::run(std::env::args_os());
    std::process::exit(code);
}
