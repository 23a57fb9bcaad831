//! `tensorscope stats`: statistics of every tensor of a file or sharded
//! model (or of the tensors picked by name or regex), with a summary.
//!
//! Exit codes: 0 when the statistics were computed, 2 for a file that
//! cannot be opened (invalid, unreadable, changed), an unknown `--tensor`
//! name or a bad `--tensor-regex`. The document is written as the scan
//! goes (`stream.rs`); the text report's lines are `text.rs`'s.

mod stream;
mod text;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::output::{ErrorDoc, Output, display_name, path_string, report_error, with_progress_bar};
use super::{Common, EXIT_ERROR, EXIT_NO, EXIT_OK};
use crate::format::{Checkpoint, TensorRef};
use crate::jobs::{CancelToken, Progress};
use crate::quant::{LogicalTensor, Quantization};
use crate::stats::{
    DEFAULT_BINS, Detail, MAX_BINS, StatsError, StatsOptions, Summary, TensorStats,
    scan_dequant_each, scan_each,
};
use stream::Streamed;

/// `tensorscope stats FILE`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// A checkpoint: a .safetensors, .npy/.npz, PyTorch or GGUF file, a shard
    /// index, a folder holding one, or an https:// or hf:// location.
    pub file: PathBuf,
    /// Only the tensor with exactly this name (repeatable).
    #[arg(long = "tensor", value_name = "NAME")]
    pub tensors: Vec<String>,
    /// Only tensors whose name matches this regular expression (a search:
    /// anchor it with ^…$ for a whole-name match). With --tensor, tensors
    /// matching either are scanned.
    #[arg(long, value_name = "RE")]
    pub tensor_regex: Option<String>,
    /// Bins of the linear histogram.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BINS as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BINS as u64))]
    pub bins: u64,
    /// Quantized weights as their true values: each logical tensor (by its
    /// logical name, with `scheme` and `quant`) in place of its parts.
    #[arg(long)]
    pub dequant: bool,
    /// Counts, range and moments only, in one pass: no histograms, and
    /// quantiles and `outliers_6sigma` `null` (a quick NaN/Inf sweep of a
    /// whole checkpoint).
    #[arg(long)]
    pub moments: bool,
    /// Exit 1 when a scanned tensor has any of these (comma-separated):
    /// `nan`, `inf`, `zero-tensor` (every element zero). The summary says
    /// which, in `fail_on`. For gating a pipeline:
    /// `tensorscope stats --moments --fail-on nan,inf model/`.
    #[arg(long, value_name = "WHAT", value_delimiter = ',')]
    pub fail_on: Vec<FailOn>,
    #[command(flatten)]
    pub f6: super::F6Order,
    #[command(flatten)]
    pub common: Common,
}

/// What `--fail-on` can fail on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailOn {
    /// A NaN element.
    Nan,
    /// A +Inf or -Inf element.
    Inf,
    /// A tensor whose elements are all zero.
    ZeroTensor,
}

impl FailOn {
    fn name(self) -> &'static str {
        match self {
            FailOn::Nan => "nan",
            FailOn::Inf => "inf",
            FailOn::ZeroTensor => "zero-tensor",
        }
    }
}

/// The `fail_on` member of the summary: what was checked, what was found.
#[derive(Debug, Serialize)]
struct FailOnDoc {
    checked: Vec<FailOn>,
    failed: Vec<FailOn>,
    /// The tensors holding NaN or Inf (when `nan` or `inf` failed) and the
    /// all-zero ones (when `zero-tensor` failed).
    tensors: Vec<String>,
}

fn fail_on(args: &StatsArgs, summary: &Summary) -> Option<FailOnDoc> {
    if args.fail_on.is_empty() {
        return None;
    }
    let mut checked: Vec<FailOn> = Vec::new();
    let mut failed = Vec::new();
    let mut tensors: Vec<String> = Vec::new();
    for &what in &args.fail_on {
        if checked.contains(&what) {
            continue;
        }
        checked.push(what);
        let (hit, names) = match what {
            FailOn::Nan => (summary.nan_count > 0, &summary.nonfinite_tensors),
            FailOn::Inf => (summary.inf_count > 0, &summary.nonfinite_tensors),
            FailOn::ZeroTensor => (
                !summary.all_zero_tensors.is_empty(),
                &summary.all_zero_tensors,
            ),
        };
        if hit {
            failed.push(what);
            for n in names {
                if !tensors.contains(n) {
                    tensors.push(n.clone());
                }
            }
        }
    }
    Some(FailOnDoc {
        checked,
        failed,
        tensors,
    })
}

/// The `stats --json` document (fields as DESIGN.md fixes them). It is
/// written piece by piece by [`Streamed`]; its tests check that the pieces
/// make exactly this document.
#[derive(Debug, Serialize)]
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "the shape `Streamed` writes; built in tests")
)]
pub struct StatsDoc<'a> {
    /// What was opened, as given.
    pub path: String,
    /// Bins of the linear histograms asked for (`--bins`).
    pub bins: u64,
    /// One entry per tensor, in file order.
    pub tensors: &'a [TensorStats],
    /// What stands out over the tensors scanned (largest |x|, NaN counts).
    pub summary: &'a Summary,
}

/// Runs `stats` and returns its exit code (0, or 2 when a file cannot be
/// read).
pub fn run(args: &StatsArgs, out: &mut Output, cancel: &CancelToken) -> i32 {
    let json = args.common.json;
    let ck = match Checkpoint::open_readable(&args.file) {
        Ok(ck) => ck,
        Err(e) => return report_error(out, json, &e),
    };
    let quant = crate::quant::for_values(&ck, args.dequant);
    let selection = match select(&ck, quant.as_ref(), args) {
        Ok(s) => s,
        Err(doc) => {
            if json {
                out.json(&doc.wrapped());
            }
            say!("tensorscope: {}", doc.message);
            return EXIT_ERROR;
        }
    };
    let options = StatsOptions {
        bins: usize::try_from(args.bins).unwrap_or(DEFAULT_BINS),
        bit_order: args.f6.bit_order(),
        detail: if args.moments {
            Detail::MomentsOnly
        } else {
            Detail::Full
        },
        ..StatsOptions::default()
    };
    let started = Instant::now();
    let progress = Progress::new();
    // The document is written tensor by tensor as the scan goes, so its
    // size does not bound what fits in memory.
    let mut doc = Streamed::new(json, path_string(ck.path()), args.bins);
    let result = with_progress_bar(&progress, started, || match &quant {
        Some(q) => scan_dequant_each(&ck, q, &selection, &options, cancel, &progress, &mut |e| {
            doc.entry(out, e);
        }),
        None => scan_each(&ck, &selection, &options, cancel, &progress, &mut |t| {
            doc.tensor(out, t);
        }),
    });
    let summary = match result {
        Ok(s) => s,
        Err(StatsError::Load(e)) if doc.started() => {
            return doc.fail(out, &ErrorDoc::from_load(&e));
        }
        Err(StatsError::Load(e)) => return report_error(out, json, &e),
        Err(e @ (StatsError::Cancelled | StatsError::NoSuchTensor { .. })) => {
            let (kind, message) = match e {
                StatsError::Cancelled => ("Cancelled", "the scan was cancelled".to_owned()),
                other => ("NoSuchTensor", other.to_string()),
            };
            let error = ErrorDoc {
                kind: kind.into(),
                message,
                path: Some(path_string(ck.path())),
                globals: Vec::new(),
            };
            if doc.started() {
                return doc.fail(out, &error);
            }
            if json {
                out.json(&error.wrapped());
            }
            say!("tensorscope: {}", error.message);
            return EXIT_ERROR;
        }
    };
    let verdict = fail_on(args, &summary);
    doc.finish(out, &summary, verdict.as_ref(), started.elapsed());
    match verdict {
        Some(v) if !v.failed.is_empty() => EXIT_NO,
        _ => EXIT_OK,
    }
}

/// The tensors to scan, in file order: all of them, or those named by
/// `--tensor` or matched by `--tensor-regex`.
fn select(
    ck: &Checkpoint,
    quant: Option<&Quantization>,
    args: &StatsArgs,
) -> Result<Vec<TensorRef>, ErrorDoc> {
    let path = Some(path_string(ck.path()));
    let regex = match &args.tensor_regex {
        Some(re) => Some(regex::Regex::new(re).map_err(|e| ErrorDoc {
            kind: "Usage".into(),
            message: format!("invalid --tensor-regex: {e}"),
            path: None,
            globals: Vec::new(),
        })?),
        None => None,
    };
    let logical = |t: TensorRef| quant.and_then(|q| q.owner(t)).map(LogicalTensor::name);
    for name in &args.tensors {
        if ck.find(name).is_none() && quant.and_then(|q| q.find(name)).is_none() {
            return Err(ErrorDoc {
                kind: "UnknownTensor".into(),
                message: format!("no tensor named {}", display_name(name)),
                path,
                globals: Vec::new(),
            });
        }
    }
    if args.tensors.is_empty() && regex.is_none() {
        return Ok(ck.tensors().to_vec());
    }
    Ok(ck
        .tensors()
        .iter()
        .copied()
        .filter(|t| {
            ck.info(*t).is_some_and(|i| {
                let names = [Some(i.name()), logical(*t)];
                names.iter().flatten().any(|name| {
                    args.tensors.iter().any(|n| n == name)
                        || regex.as_ref().is_some_and(|r| r.is_match(name))
                })
            })
        })
        .collect())
}
