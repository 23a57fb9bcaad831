//! `tensorscope diff A B`: which tensors changed, and by how much.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::output::{Output, display_name, report_error, with_progress_bar};
use super::{Common, EXIT_ERROR, EXIT_NO, EXIT_OK};
use crate::diff::{DiffError, DiffOptions, DiffReport, Status, diff};
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Progress};
use crate::resave::parse_pair;
use crate::text::fmt_value;

/// `tensorscope diff A B`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first checkpoint (file, shard index or folder).
    pub a: PathBuf,
    /// The second checkpoint.
    pub b: PathBuf,
    /// List only tensors that are not identical or equal.
    #[arg(long)]
    pub only_changed: bool,
    /// Absolute tolerance: values are equal when |a − b| ≤ atol + rtol·|b|.
    #[arg(long, default_value_t = 0.0, value_parser = tolerance, allow_negative_numbers = true)]
    pub atol: f64,
    /// Relative tolerance (numpy.isclose semantics).
    #[arg(long, default_value_t = 0.0, value_parser = tolerance, allow_negative_numbers = true)]
    pub rtol: f64,
    /// Remove this prefix from names on both sides before matching (repeatable).
    #[arg(long = "strip-prefix", value_name = "PREFIX")]
    pub strip_prefix: Vec<String>,
    /// Match A's tensor FROM with B's tensor TO (repeatable).
    #[arg(long, value_name = "FROM=TO")]
    pub rename: Vec<String>,
    /// Compare stored tensors only. By default a quantized weight (GPTQ,
    /// AWQ, NVFP4, …) is compared by its decoded values under its logical
    /// name, so a quantized checkpoint meets its original (put the
    /// original first: rel_l2 and snr_db take A as the reference).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `--atol` and `--rtol`: a number ≥ 0 (not NaN), so a usage error is
/// reported as every other one is, with its JSON document.
fn tolerance(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{text:?} is not a non-negative number"))
    }
}

#[derive(Serialize)]
struct Doc<'a> {
    a: String,
    b: String,
    #[serde(flatten)]
    report: &'a DiffReport,
}

fn text(report: &DiffReport, a: &str, b: &str, only_changed: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "A: {a}\nB: {b}");
    let counts: Vec<String> = report
        .summary
        .counts
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    let _ = writeln!(
        s,
        "{} pairs: {}; {} only in A, {} only in B",
        report.tensors.len(),
        if counts.is_empty() {
            "none".to_owned()
        } else {
            counts.join(", ")
        },
        report.only_in_a.len(),
        report.only_in_b.len()
    );
    if let Some((name, r)) = &report.summary.largest_rel_l2 {
        let _ = writeln!(
            s,
            "largest relative change: {} in {}",
            fmt_value(*r),
            display_name(name)
        );
    }
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_value);
    let shown: Vec<_> = report
        .tensors
        .iter()
        .filter(|t| !only_changed || !t.status.is_same())
        .filter(|t| t.status != Status::Identical || !only_changed)
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<14} {:>12} {:>12} {:>10} {:>10} {:>10}  name",
            "status", "max|Δ|", "mean|Δ|", "rel_l2", "cosine", "changed"
        );
    }
    for t in shown {
        let changed = t
            .changed_elements
            .map_or_else(|| "-".to_owned(), |c| c.to_string());
        let _ = write!(
            s,
            "{:<14} {:>12} {:>12} {:>10} {:>10} {:>10}  {}",
            t.status.name(),
            opt(t.max_abs_diff),
            opt(t.mean_abs_diff),
            opt(t.rel_l2),
            opt(t.cosine),
            changed,
            display_name(&t.name)
        );
        if let Some(side) = t.dequantized {
            let _ = write!(s, "  (dequantized: {side}");
            if let Some(snr) = t.snr_db {
                let _ = write!(s, ", SNR {snr:.1} dB");
            }
            s.push(')');
        } else if t.dtype_a != t.dtype_b {
            let _ = write!(s, "  ({} -> {})", t.dtype_a, t.dtype_b);
        }
        if t.shape_a != t.shape_b {
            let _ = write!(s, "  ({:?} -> {:?})", t.shape_a, t.shape_b);
        }
        s.push('\n');
    }
    if report
        .layers
        .iter()
        .any(|l| l.rel_l2.is_some_and(|r| r > 0.0))
    {
        let _ = writeln!(s, "\nlayer  tensors      rel_l2   SNR (dB)");
        for l in &report.layers {
            let snr = l
                .snr_db
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.1}"));
            let _ = writeln!(
                s,
                "{:>5}  {:>7}  {:>10}  {snr:>9}",
                l.layer,
                l.tensors,
                opt(l.rel_l2)
            );
        }
        s.push('\n');
    }
    for n in &report.only_in_a {
        let _ = writeln!(s, "only in A: {}", display_name(n));
    }
    for n in &report.only_in_b {
        let _ = writeln!(s, "only in B: {}", display_name(n));
    }
    for (k, v) in &report.metadata.removed {
        let _ = writeln!(
            s,
            "metadata removed: {} = {}",
            display_name(k),
            display_name(v)
        );
    }
    for (k, v) in &report.metadata.added {
        let _ = writeln!(
            s,
            "metadata added: {} = {}",
            display_name(k),
            display_name(v)
        );
    }
    for (k, v) in &report.metadata.changed {
        let _ = writeln!(
            s,
            "metadata changed: {}: {} -> {}",
            display_name(k),
            display_name(&v.a),
            display_name(&v.b)
        );
    }
    let _ = writeln!(
        s,
        "{}",
        if report.summary.same {
            "no differences"
        } else {
            "the checkpoints differ"
        }
    );
    s
}

/// Parses the `--rename FROM=TO` pairs.
pub fn parse_renames(items: &[String]) -> Result<Vec<(String, String)>, String> {
    items
        .iter()
        .map(|r| {
            parse_pair(r, "--rename", "FROM=TO")
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Runs `diff` and returns its exit code (0 same, 1 different, 2 error).
pub fn run(args: &DiffArgs, out: &mut Output, cancel: &CancelToken) -> i32 {
    let renames = match parse_renames(&args.rename) {
        Ok(r) => r,
        Err(e) => {
            if args.common.json {
                out.json(
                    &super::ErrorDoc {
                        kind: "Usage".into(),
                        message: e.clone(),
                        path: None,
                        globals: Vec::new(),
                    }
                    .wrapped(),
                );
            }
            say!("tensorscope: {e}");
            return EXIT_ERROR;
        }
    };
    let a = match Checkpoint::open_readable(&args.a) {
        Ok(c) => c,
        Err(e) => return report_error(out, args.common.json, &e),
    };
    let b = match Checkpoint::open_readable(&args.b) {
        Ok(c) => c,
        Err(e) => return report_error(out, args.common.json, &e),
    };
    let options = DiffOptions {
        strip_prefixes: args.strip_prefix.clone(),
        renames,
        atol: args.atol,
        rtol: args.rtol,
        raw: args.raw,
        ..DiffOptions::default()
    };
    let started = Instant::now();
    let progress = Progress::new();
    let result = with_progress_bar(&progress, started, || {
        diff(&a, &b, &options, cancel, &progress)
    });
    let mut report = match result {
        Ok(r) => r,
        Err(DiffError::Load(e)) => return report_error(out, args.common.json, &e),
        Err(DiffError::Cancelled) => {
            let doc = super::ErrorDoc {
                kind: "Cancelled".into(),
                message: "the diff was cancelled".into(),
                path: None,
                globals: Vec::new(),
            };
            return super::output::fail(out, args.common.json, &doc);
        }
    };
    if args.only_changed {
        report.tensors.retain(|t| !t.status.is_same());
    }
    let (pa, pb) = (
        a.path().display().to_string(),
        b.path().display().to_string(),
    );
    if args.common.json {
        out.json(&Doc {
            a: pa,
            b: pb,
            report: &report,
        });
    } else {
        out.text(&text(&report, &pa, &pb, args.only_changed));
    }
    if report.summary.same {
        EXIT_OK
    } else {
        EXIT_NO
    }
}
