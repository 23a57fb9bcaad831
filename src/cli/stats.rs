//! `tensorscope stats`: statistics of every tensor of a file or sharded
//! model (or of the tensors picked by name or regex), with a summary.
//!
//! Exit codes: 0 when the statistics were computed, 2 for a file that
//! cannot be opened (invalid, unreadable, changed), an unknown `--tensor`
//! name or a bad `--tensor-regex`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::output::{
    ErrorDoc, Output, display_name, group_digits, path_string, report_error, with_progress_bar,
};
use super::{Common, EXIT_ERROR, EXIT_OK};
use tensorscope::format::{Checkpoint, TensorRef};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{
    DEFAULT_BINS, Histogram, MAX_BINS, QUANTILES, Scalar, ScanReport, StatsError, StatsOptions,
    Summary, TensorStats, ValueStats, scan,
};

/// `tensorscope stats FILE`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// A .safetensors file, a model.safetensors.index.json, or a folder.
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
    #[command(flatten)]
    pub f6: super::F6Order,
    #[command(flatten)]
    pub common: Common,
}

/// The `stats --json` document (fields as DESIGN.md fixes them).
#[derive(Debug, Serialize)]
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
pub fn run(args: &StatsArgs, out: &mut Output) -> i32 {
    let json = args.common.json;
    let ck = match Checkpoint::open(&args.file) {
        Ok(ck) => ck,
        Err(e) => return report_error(out, json, &e),
    };
    let selection = match select(&ck, args) {
        Ok(s) => s,
        Err(doc) => {
            if json {
                out.json(&doc.wrapped());
            }
            eprintln!("tensorscope: {}", doc.message);
            return EXIT_ERROR;
        }
    };
    let options = StatsOptions {
        bins: usize::try_from(args.bins).unwrap_or(DEFAULT_BINS),
        bit_order: args.f6.bit_order(),
        ..StatsOptions::default()
    };
    let started = Instant::now();
    let progress = Progress::new();
    let cancel = CancelToken::new();
    let result = with_progress_bar(&progress, started, || {
        scan(&ck, &selection, &options, &cancel, &progress)
    });
    let report = match result {
        Ok(r) => r,
        Err(StatsError::Load(e)) => return report_error(out, json, &e),
        Err(e @ (StatsError::Cancelled | StatsError::NoSuchTensor { .. })) => {
            let (kind, message) = match e {
                StatsError::Cancelled => ("Cancelled", "the scan was cancelled".to_owned()),
                other => ("NoSuchTensor", other.to_string()),
            };
            let doc = ErrorDoc {
                kind: kind.into(),
                message,
                path: Some(path_string(ck.path())),
            };
            if json {
                out.json(&doc.wrapped());
            }
            eprintln!("tensorscope: {}", doc.message);
            return EXIT_ERROR;
        }
    };
    if json {
        out.json(&StatsDoc {
            path: path_string(ck.path()),
            bins: args.bins,
            tensors: &report.tensors,
            summary: &report.summary,
        });
    } else {
        out.text(&to_text(&report, started.elapsed()));
    }
    EXIT_OK
}

/// The tensors to scan, in file order: all of them, or those named by
/// `--tensor` or matched by `--tensor-regex`.
fn select(ck: &Checkpoint, args: &StatsArgs) -> Result<Vec<TensorRef>, ErrorDoc> {
    let path = Some(path_string(ck.path()));
    let regex = match &args.tensor_regex {
        Some(re) => Some(regex::Regex::new(re).map_err(|e| ErrorDoc {
            kind: "Usage".into(),
            message: format!("invalid --tensor-regex: {e}"),
            path: None,
        })?),
        None => None,
    };
    for name in &args.tensors {
        if ck.find(name).is_none() {
            return Err(ErrorDoc {
                kind: "UnknownTensor".into(),
                message: format!("no tensor named {}", display_name(name)),
                path,
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
                args.tensors.iter().any(|n| n == i.name())
                    || regex.as_ref().is_some_and(|r| r.is_match(i.name()))
            })
        })
        .collect())
}

/// A number with 6 significant digits, fixed or exponent notation.
fn num(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    if (1e-4..1e6).contains(&a) {
        let digits = (5 - a.log10().floor() as i32).clamp(0, 10) as usize;
        let s = format!("{x:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    } else {
        format!("{x:.5e}")
    }
}

fn scalar(s: Option<Scalar>) -> String {
    match s {
        Some(Scalar::Float(x)) => num(x),
        Some(Scalar::Int(i)) => i.to_string(),
        Some(Scalar::UInt(u)) => u.to_string(),
        None => "-".into(),
    }
}

fn float(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), num)
}

/// A one-line sketch of a histogram: 32 columns of block characters.
fn sparkline(h: &Histogram) -> String {
    const COLUMNS: usize = 32;
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if h.counts.is_empty() {
        return String::new();
    }
    let per = h.counts.len().div_ceil(COLUMNS);
    let sums: Vec<u64> = h.counts.chunks(per).map(|c| c.iter().sum()).collect();
    let top = sums.iter().copied().max().unwrap_or(0).max(1);
    sums.iter()
        .map(|&c| {
            if c == 0 {
                ' '
            } else {
                let i = ((c as f64 / top as f64) * 7.0).round() as usize;
                BARS.get(i).copied().unwrap_or('█')
            }
        })
        .collect()
}

fn values_text(s: &mut String, v: &ValueStats, indent: &str) {
    let _ = writeln!(
        s,
        "{indent}count {}  finite {}  nan {}  +inf {}  -inf {}  zeros {}  subnormal {}{}",
        group_digits(v.count),
        group_digits(v.finite),
        group_digits(v.nan),
        group_digits(v.pos_inf),
        group_digits(v.neg_inf),
        group_digits(v.zeros),
        group_digits(v.subnormals),
        v.true_count
            .map(|t| format!("  true {}", group_digits(t)))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "{indent}min {}  max {}  mean {}  std {}  mean|x| {}  l2 {}",
        scalar(v.min),
        scalar(v.max),
        float(v.mean),
        float(v.std),
        float(v.abs_mean),
        float(v.l2_norm)
    );
    if let Some(q) = &v.quantiles {
        let parts: Vec<String> = QUANTILES
            .iter()
            .zip(&q.0)
            .map(|((name, _), value)| format!("{} {}", name.replace('_', "."), scalar(*value)))
            .collect();
        let _ = writeln!(s, "{indent}{}", parts.join("  "));
    }
    if let Some(h) = &v.histogram
        && !h.counts.is_empty()
    {
        let _ = writeln!(s, "{indent}histogram |{}|", sparkline(h));
    }
}

fn to_text(report: &ScanReport, elapsed: Duration) -> String {
    let mut s = String::new();
    for t in &report.tensors {
        let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        let _ = writeln!(
            s,
            "{}  {}  [{}]{}",
            display_name(&t.name),
            t.dtype,
            shape.join(", "),
            t.shard
                .as_ref()
                .map(|sh| format!("  {}", display_name(sh)))
                .unwrap_or_default()
        );
        if let (Some(re), Some(im)) = (&t.real, &t.imag) {
            let _ = writeln!(s, "  |z|:");
            values_text(&mut s, &t.values, "    ");
            let _ = writeln!(s, "  real:");
            values_text(&mut s, re, "    ");
            let _ = writeln!(s, "  imag:");
            values_text(&mut s, im, "    ");
        } else {
            values_text(&mut s, &t.values, "  ");
        }
    }
    let m = &report.summary;
    let _ = writeln!(
        s,
        "\n{} tensors, {} elements, {} bytes in {:.2} s",
        group_digits(m.tensor_count as u64),
        group_digits(m.element_count),
        group_digits(m.data_bytes),
        elapsed.as_secs_f64()
    );
    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| display_name(n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if m.nonfinite_tensors.is_empty() {
        let _ = writeln!(s, "no NaN or Inf");
    } else {
        let _ = writeln!(
            s,
            "NaN/Inf ({} NaN, {} Inf) in {} tensors: {}",
            group_digits(m.nan_count),
            group_digits(m.inf_count),
            m.nonfinite_tensors.len(),
            list(&m.nonfinite_tensors)
        );
    }
    if !m.all_zero_tensors.is_empty() {
        let _ = writeln!(
            s,
            "all-zero tensors ({}): {}",
            m.all_zero_tensors.len(),
            list(&m.all_zero_tensors)
        );
    }
    if let (Some(v), Some(t)) = (m.max_abs, &m.max_abs_tensor) {
        let _ = writeln!(
            s,
            "largest |value|: {} in {}",
            scalar(Some(v)),
            display_name(t)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(-0.012_345_678_9), "-0.0123457");
        assert_eq!(num(123_456.7), "123457");
        assert_eq!(num(1e-7), "1.00000e-7");
        assert_eq!(num(3.4e38), "3.40000e38");
    }

    #[test]
    fn sparklines() {
        let h = Histogram {
            edges: vec![0.0, 1.0, 2.0, 3.0],
            counts: vec![1, 0, 8],
        };
        assert_eq!(sparkline(&h), "▂ █");
    }
}
