//! What is generated from the one clap definition of the command line:
//! shell completions (`tensorscope completions bash|zsh|fish|…`), the man
//! page (`tensorscope man`, roff), and the long `--version` text (the
//! commit built from and the vector instruction sets chosen at run time).

use std::io::Write as _;

use clap::{Args, CommandFactory as _};

use super::{Cli, EXIT_ERROR, EXIT_OK};

/// `tensorscope completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The command line's definition, with its long version text.
pub fn command() -> clap::Command {
    static LONG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    Cli::command().long_version(LONG.get_or_init(long_version).as_str())
}

/// `--version`: the version, the commit, the vector instruction sets.
pub fn long_version() -> String {
    format!(
        "{}\ncommit: {}\nvector instructions (chosen at run time): {}\ntarget: {} {}",
        env!("CARGO_PKG_VERSION"),
        env!("TENSORSCOPE_COMMIT"),
        crate::stats::vector_sets().join(", "),
        std::env::consts::ARCH,
        std::env::consts::OS,
    )
}

/// Writes the completion script for `shell` on stdout.
pub fn completions(args: &CompletionsArgs) -> i32 {
    let mut cmd = command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "tensorscope", &mut out);
    write_stdout(&out)
}

/// Writes the man page (roff) on stdout.
pub fn man() -> i32 {
    match man_page() {
        Ok(out) => write_stdout(&out),
        Err(e) => {
            eprintln!("tensorscope: cannot render the man page: {e}");
            EXIT_ERROR
        }
    }
}

/// The man page: the command's own sections, then each verb's synopsis,
/// description and options under a section of its own, so that one
/// `man tensorscope` documents every flag.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let cmd = command().disable_help_subcommand(true);
    let mut out = Vec::new();
    let main = clap_mangen::Man::new(cmd.clone());
    main.render_title(&mut out)?;
    main.render_name_section(&mut out)?;
    main.render_synopsis_section(&mut out)?;
    main.render_description_section(&mut out)?;
    main.render_options_section(&mut out)?;
    // The verbs are sections of this page, not pages of their own.
    let mut verbs = Vec::new();
    main.render_subcommands_section(&mut verbs)?;
    let verbs = String::from_utf8_lossy(&verbs)
        .replace("tensorscope\\-", "tensorscope ")
        .replace("(1)\n", "\n");
    out.extend_from_slice(verbs.as_bytes());
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("tensorscope {}", sub.get_name());
        let verb = clap_mangen::Man::new(sub.clone().bin_name(&name).display_name(&name));
        let mut part = Vec::new();
        verb.render_synopsis_section(&mut part)?;
        verb.render_description_section(&mut part)?;
        verb.render_options_section(&mut part)?;
        let text = String::from_utf8_lossy(&part)
            .replacen(
                ".SH SYNOPSIS",
                &format!(".SH \"{}\"", name.to_uppercase()),
                1,
            )
            .replace(".SH DESCRIPTION\n", ".PP\n")
            .replace(".SH OPTIONS", ".SS Options");
        out.extend_from_slice(text.as_bytes());
    }
    main.render_version_section(&mut out)?;
    Ok(out)
}

fn write_stdout(bytes: &[u8]) -> i32 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => EXIT_OK,
        Err(e) if crate::platform::pipe::reader_closed(&e) => EXIT_OK,
        Err(e) => {
            eprintln!("tensorscope: cannot write to stdout: {e}");
            EXIT_ERROR
        }
    }
}
