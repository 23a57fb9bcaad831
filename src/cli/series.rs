//! `tensorscope series PATH...`: a training run through time, the events
//! first, then how every tensor and layer moved.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::output::{ErrorDoc, Output, display_name, fail, with_progress_bar};
use super::{Common, EXIT_OK};
use crate::jobs::{CancelToken, Progress};
use crate::series::{SeriesError, SeriesOptions, SeriesReport, TensorSeries, series};
use crate::text::fmt_value;

/// `tensorscope series PATH...`.
#[derive(Debug, Args)]
pub struct SeriesArgs {
    /// Checkpoints in any order (files, folders, https:// or
    /// hf://ORG/REPO@REV locations), or folders of them (each checkpoint
    /// sub-folder and checkpoint file one step). The step comes from
    /// trainer_state.json, else step=N in the name, else the last number
    /// in the name.
    #[arg(required = true, num_args = 1..)]
    pub paths: Vec<PathBuf>,
    /// Only the tensors whose name this regex finds (unanchored); layers,
    /// roles and events are those of these tensors alone.
    #[arg(long, value_name = "RE")]
    pub tensor_regex: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), fmt_value)
}

/// The median and the largest of a tensor's update ratios, with the step
/// of the largest.
fn ratios(t: &TensorSeries, steps: &[u64]) -> (Option<f64>, Option<(f64, u64)>) {
    let mut r: Vec<(f64, u64)> = t
        .update_ratio
        .iter()
        .zip(steps)
        .filter_map(|(r, &s)| Some(((*r)?, s)))
        .collect();
    let largest = r.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0));
    r.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = match r.len() {
        0 => None,
        n if n % 2 == 1 => Some(r[n / 2].0),
        n => Some(f64::midpoint(r[n / 2 - 1].0, r[n / 2].0)),
    };
    (median, largest)
}

/// The compact text: the steps, the events, each tensor at its last step
/// with its update ratios, and each layer's update ratio per step.
fn text(report: &SeriesReport) -> String {
    let mut s = String::new();
    let steps: Vec<u64> = report.steps.iter().map(|s| s.step).collect();
    let _ = writeln!(s, "{}; {} tensors", report.span(), report.tensors.len());
    let _ = writeln!(s, "\nevents:");
    if report.events.is_empty() {
        let _ = writeln!(s, "  none");
    }
    for e in &report.events {
        let shown: Vec<String> = e.tensors.iter().take(6).map(|n| display_name(n)).collect();
        let more = e.tensors.len().saturating_sub(shown.len());
        let _ = writeln!(
            s,
            "  step {:<10} {:<10} {} tensor{}: {}{}",
            e.step,
            e.kind.name(),
            e.tensors.len(),
            if e.tensors.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    let last = steps.len().saturating_sub(1);
    let _ = writeln!(
        s,
        "\ntensors (figures at the last step; update ratio ‖ΔW‖/‖W‖ over the pairs):\n{:>12} {:>12} {:>12} {:>9} {:>12} {:>12} {:>10}  name",
        "l2_norm", "std", "max|x|", "nonfinite", "ratio med", "ratio max", "at step"
    );
    for t in &report.tensors {
        let (median, largest) = ratios(t, &steps);
        let _ = writeln!(
            s,
            "{:>12} {:>12} {:>12} {:>9} {:>12} {:>12} {:>10}  {}",
            opt(t.l2_norm[last]),
            opt(t.std[last]),
            opt(t.max_abs[last]),
            t.nonfinite[last].map_or_else(|| "-".to_owned(), |c| c.to_string()),
            opt(median),
            opt(largest.map(|l| l.0)),
            largest.map_or_else(|| "-".to_owned(), |l| l.1.to_string()),
            display_name(&t.name)
        );
    }
    if !report.layers.is_empty() {
        let _ = writeln!(s, "\nlayers (update ratio at each step after the first):");
        for l in &report.layers {
            let r: Vec<String> = l
                .figures
                .update_ratio
                .iter()
                .skip(1)
                .map(|&r| opt(r))
                .collect();
            let _ = writeln!(
                s,
                "  {:>4}  l2 {:>12}  {}",
                l.layer,
                opt(l.figures.l2_norm[last]),
                r.join(" ")
            );
        }
    }
    s
}

/// Runs `series`; returns its exit code (0, or 2 on an error).
pub fn run(args: &SeriesArgs, out: &mut Output, cancel: &CancelToken) -> i32 {
    let regex = match args
        .tensor_regex
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
    {
        Ok(r) => r,
        Err(e) => {
            let doc = ErrorDoc {
                kind: "Usage".into(),
                message: format!("invalid --tensor-regex: {e}"),
                path: None,
                globals: Vec::new(),
            };
            return fail(out, args.common.json, &doc);
        }
    };
    let options = SeriesOptions {
        tensor_regex: regex,
    };
    let progress = Progress::new();
    let result = with_progress_bar(&progress, Instant::now(), || {
        series(&args.paths, &options, cancel, &progress)
    });
    match result {
        Ok(report) => {
            for note in &report.notes {
                say!("tensorscope: note: {note}");
            }
            if args.common.json {
                out.json(&report);
            } else {
                out.text(&text(&report));
            }
            EXIT_OK
        }
        Err(e) => fail(out, args.common.json, &error_doc(&e)),
    }
}

fn error_doc(e: &SeriesError) -> ErrorDoc {
    ErrorDoc {
        kind: e.kind().into(),
        message: e.to_string(),
        path: e.path().map(|p| p.to_string_lossy().into_owned()),
        globals: Vec::new(),
    }
}
