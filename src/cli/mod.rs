//! The command line: `tensorscope [FILE...]` for the explorer, or a verb
//! that runs headless. It uses the library only, never the explorer. Exit codes are a contract (DESIGN.md): 0 success, 1 the
//! answer is "no", 2 an error.

/// `eprintln!`, unless the verbs' messages are silenced
/// ([`output::set_quiet`]: the Python module, whose callers get the
/// document or an exception instead).
macro_rules! say {
    ($($t:tt)*) => {
        if !$crate::cli::output::quiet() {
            eprintln!($($t)*);
        }
    };
}

/// `eprint!`, unless the verbs' messages are silenced.
macro_rules! say_part {
    ($($t:tt)*) => {
        if !$crate::cli::output::quiet() {
            eprint!($($t)*);
        }
    };
}

mod diff;
mod export;
mod generate;
mod info;
mod json;
pub mod output;
mod quant_doc;
mod resave;
mod scan;
mod series;
mod stats;
mod validate;

use std::ffi::OsString;
use std::path::PathBuf;

use crate::platform::desktop;

use clap::{Args, Parser, Subcommand};

use crate::dtype::decode::BitOrder;

pub use export::ExportArgs;
pub use output::{ErrorDoc, Output};
pub use resave::ResaveArgs;
pub use scan::ScanArgs;
pub use stats::StatsArgs;

/// Exit code: success (valid, equal).
pub const EXIT_OK: i32 = 0;
/// Exit code: the answer is "no" (invalid, different).
pub const EXIT_NO: i32 = 1;
/// Exit code: an error (usage, I/O, unreadable input).
pub const EXIT_ERROR: i32 = 2;

/// Tensorscope: explore machine-learning checkpoints.
#[derive(Debug, Parser)]
#[command(
    name = "tensorscope",
    version,
    about = "A fast, safe explorer for machine-learning checkpoints (safetensors, NumPy, PyTorch, GGUF)",
    long_about = "A fast, safe explorer for machine-learning checkpoints: safetensors files and \
shard indexes, NumPy .npy/.npz, PyTorch files (read without running them) and GGUF \
models (every ggml type dequantized), local or remote (https://, hf://). Without a verb it opens the desktop explorer on FILE...; the \
verbs run headless and take --json.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// A headless verb; without one, the desktop explorer opens FILE...
    #[command(subcommand)]
    pub command: Option<Verb>,
    /// Files, shard indexes or folders to open in the desktop explorer.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Open a built-in demo checkpoint with every dtype.
    #[arg(long)]
    pub demo: bool,
    /// Open A and compare it with B in the desktop explorer.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub diff: Option<Vec<PathBuf>>,
    /// Open a training run in the desktop explorer's Run view: these
    /// checkpoints, or folders of them, as one series.
    #[arg(long, num_args = 1.., value_name = "PATH")]
    pub series: Option<Vec<PathBuf>>,
    /// Make a double-click on a checkpoint open Tensorscope, for the
    /// current user: the desktop entry, MIME types and icon (Linux), or the
    /// file types in the registry (Windows).
    #[arg(long, conflicts_with = "uninstall_desktop")]
    pub install_desktop: bool,
    /// Remove what --install-desktop wrote.
    #[arg(long)]
    pub uninstall_desktop: bool,
}

/// The headless verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Show the header: metadata and every tensor's dtype, shape and offsets.
    Info(InfoArgs),
    /// Check a file (or shard index) against the format; exit 1 if invalid.
    Validate(ValidateArgs),
    /// Statistics, histograms and quantiles of every tensor, with a summary.
    Stats(StatsArgs),
    /// Compare two checkpoints; exit 1 if they differ.
    Diff(diff::DiffArgs),
    /// A training run through time: how every tensor and layer moved over
    /// a series of checkpoints, and where it blew up.
    Series(series::SeriesArgs),
    /// Export one tensor to .npy, .csv, .bin or a .png heatmap.
    Export(ExportArgs),
    /// Write a new checkpoint: a subset, renamed, with edited metadata and
    /// converted dtypes, optionally re-sharded.
    Resave(ResaveArgs),
    /// Judge every file under each PATH (a file, a folder, a URL, a Hugging
    /// Face repository) without running anything: safe, unsafe, invalid or
    /// not a checkpoint; exit 1 if any is unsafe or invalid.
    Scan(scan::ScanArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// PowerShell (e.g. `tensorscope completions bash > ~/.local/share/bash-completion/completions/tensorscope`).
    Completions(generate::CompletionsArgs),
    /// Print the man page (roff), generated from these definitions.
    #[command(hide = true)]
    Man,
}

/// Options shared by every verb.
#[derive(Debug, Args, Clone, Copy)]
pub struct Common {
    /// Print exactly one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `--f6-order`, for the verbs that read values.
#[derive(Debug, Args, Clone)]
pub struct F6Order {
    /// Bit order of packed F6 elements.
    #[arg(long = "f6-order", value_name = "ORDER", default_value = "lsb-first",
          value_parser = ["lsb-first", "msb-first"])]
    pub f6_order: String,
}

impl F6Order {
    /// The bit order asked for.
    pub fn bit_order(&self) -> BitOrder {
        if self.f6_order == "msb-first" {
            BitOrder::MsbFirst
        } else {
            BitOrder::LsbFirst
        }
    }
}

/// `tensorscope info FILE`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// A checkpoint: a .safetensors, .npy/.npz, PyTorch or GGUF file, a shard
    /// index, a folder holding one, or an https:// or hf:// location.
    pub file: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

/// `tensorscope validate FILE`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// A checkpoint: a .safetensors, .npy/.npz, PyTorch or GGUF file, a shard
    /// index, a folder holding one, or an https:// or hf:// location.
    pub file: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

/// What the command line asks for: `main` dispatches it.
#[derive(Debug)]
pub enum Launch {
    /// A headless verb: runs, prints, exits; never opens a window.
    Verb(Verb),
    /// The desktop explorer with these files open.
    Explorer(ExplorerArgs),
    /// `--install-desktop`: the double-click integration for this user.
    InstallDesktop,
    /// `--uninstall-desktop`: what `--install-desktop` wrote, removed.
    UninstallDesktop,
    /// Nothing more to do (help, version, a usage error): exit with this code.
    Exit(i32),
}

/// What the desktop explorer opens at start.
#[derive(Debug, Default)]
pub struct ExplorerArgs {
    /// Files, shard indexes or folders, one tab each.
    pub files: Vec<PathBuf>,
    /// Open the built-in demo checkpoint too.
    pub demo: bool,
    /// Open A and compare it with B.
    pub compare: Option<(PathBuf, PathBuf)>,
    /// Open these checkpoints as a training run.
    pub series: Option<Vec<PathBuf>>,
}

/// Parses `args` (including the program name). Help, version and usage
/// errors are printed here and come back as [`Launch::Exit`].
pub fn parse<I, T>(args: I) -> Launch
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match generate::command()
        .try_get_matches_from(&args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => return Launch::Exit(usage_error(&e, &args)),
    };
    match cli.command {
        Some(verb) => Launch::Verb(verb),
        None if cli.install_desktop => Launch::InstallDesktop,
        None if cli.uninstall_desktop => Launch::UninstallDesktop,
        None => {
            let compare = cli.diff.and_then(|v| {
                let mut it = v.into_iter();
                Some((it.next()?, it.next()?))
            });
            Launch::Explorer(ExplorerArgs {
                files: cli.files,
                demo: cli.demo,
                compare,
                series: cli.series,
            })
        }
    }
}

/// The `metadata` object of `info --json` for an opened checkpoint.
pub fn info_metadata(ck: &crate::format::Checkpoint) -> serde_json::Value {
    info::metadata_of(ck)
}

/// Runs a verb, writing its result on stdout; returns the exit code (2
/// when stdout could not be written, whatever the verb's answer).
pub fn run_verb(verb: Verb) -> i32 {
    let mut out = Output::stdout();
    run_verb_to(verb, &mut out, &crate::jobs::CancelToken::new())
}

/// Runs a verb, writing its result to `out`, stopping early when `cancel`
/// is set; returns the exit code (2 when `out` could not be written).
pub fn run_verb_to(verb: Verb, out: &mut Output, cancel: &crate::jobs::CancelToken) -> i32 {
    let code = match verb {
        Verb::Info(a) => info::run(&a, out),
        Verb::Validate(a) => validate::run(&a, out, cancel),
        Verb::Stats(a) => stats::run(&a, out, cancel),
        Verb::Diff(a) => diff::run(&a, out, cancel),
        Verb::Series(a) => series::run(&a, out, cancel),
        Verb::Export(a) => export::run(&a, out, cancel),
        Verb::Resave(a) => resave::run(&a, out, cancel),
        Verb::Scan(a) => scan::run(&a, out, cancel),
        Verb::Completions(a) => generate::completions(&a),
        Verb::Man => generate::man(),
    };
    if out.failed() { EXIT_ERROR } else { code }
}

fn print_report(report: &desktop::Report) {
    for p in &report.written {
        println!("wrote {}", p.display());
    }
    for p in &report.removed {
        println!("removed {}", p.display());
    }
    for s in &report.steps {
        println!("{s}");
    }
}

/// `--install-desktop`: registers this program for every container it
/// opens, for the current user.
pub fn install_desktop() -> i32 {
    let exe = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(p) => crate::platform::paths::for_people(&p),
        Err(e) => {
            eprintln!("tensorscope: cannot find this program's path: {e}");
            return EXIT_ERROR;
        }
    };
    match desktop::install(&exe) {
        Ok(report) => {
            print_report(&report);
            println!(
                "Tensorscope ({}) now opens .safetensors, .npy, .npz, .pt, .pth, .ckpt, .gguf, .onnx and .keras files for this user, and is offered for .index, .h5, .hdf5 and .msgpack files.",
                desktop::gui_program(&exe).display()
            );
            EXIT_OK
        }
        Err(e) => {
            eprintln!("tensorscope: cannot install the desktop integration: {e}");
            EXIT_ERROR
        }
    }
}

/// `--uninstall-desktop`: removes what `--install-desktop` wrote.
pub fn uninstall_desktop() -> i32 {
    match desktop::uninstall() {
        Ok(report) => {
            print_report(&report);
            println!("Tensorscope no longer opens checkpoints by a double-click for this user.");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("tensorscope: cannot remove the desktop integration: {e}");
            EXIT_ERROR
        }
    }
}

fn usage_error(e: &clap::Error, args: &[OsString]) -> i32 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return EXIT_OK;
    }
    let wants_json = args.iter().skip(1).any(|a| a == "--json");
    if wants_json {
        // clap's own first line names the argument and the value; its kind
        // alone ("invalid value for one of the arguments") does not.
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default();
        let message = match first.strip_prefix("error: ") {
            Some(line) if !line.is_empty() => line.to_owned(),
            _ => e.kind().as_str().unwrap_or(first).to_owned(),
        };
        let doc = ErrorDoc {
            kind: "Usage".into(),
            message,
            path: None,
            globals: Vec::new(),
        };
        Output::stdout().json(&doc.wrapped());
    }
    let _ = e.print();
    EXIT_ERROR
}
