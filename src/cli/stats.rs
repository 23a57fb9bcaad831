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

use super::json::JsonBuf;
use super::output::{
    ErrorDoc, Output, display_name, group_digits, path_string, pretty_at, report_error,
    with_progress_bar,
};
use super::{Common, EXIT_ERROR, EXIT_NO, EXIT_OK};
use tensorscope::format::{Checkpoint, TensorRef};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::quant::{LogicalTensor, Quantization};
use tensorscope::stats::{
    DEFAULT_BINS, Detail, Entry, Histogram, LogicalStats, MAX_BINS, QUANTILES, Scalar, StatsError,
    StatsOptions, Summary, TensorStats, ValueStats, scan_dequant_each, scan_each,
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
pub fn run(args: &StatsArgs, out: &mut Output) -> i32 {
    let json = args.common.json;
    let ck = match Checkpoint::open(&args.file) {
        Ok(ck) => ck,
        Err(e) => return report_error(out, json, &e),
    };
    let quant = if args.dequant {
        tensorscope::quant::detect(&ck)
    } else {
        None
    };
    let selection = match select(&ck, quant.as_ref(), args) {
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
        detail: if args.moments {
            Detail::MomentsOnly
        } else {
            Detail::Full
        },
        ..StatsOptions::default()
    };
    let started = Instant::now();
    let progress = Progress::new();
    let cancel = CancelToken::new();
    // The document is written tensor by tensor as the scan goes, so its
    // size does not bound what fits in memory.
    let mut doc = Streamed::new(json, path_string(ck.path()), args.bins);
    let result = with_progress_bar(&progress, started, || match &quant {
        Some(q) => scan_dequant_each(&ck, q, &selection, &options, &cancel, &progress, &mut |e| {
            doc.entry(out, e);
        }),
        None => scan_each(&ck, &selection, &options, &cancel, &progress, &mut |t| {
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
            };
            if doc.started() {
                return doc.fail(out, &error);
            }
            if json {
                out.json(&error.wrapped());
            }
            eprintln!("tensorscope: {}", error.message);
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

/// The output of `stats`, written as the tensors arrive: the same bytes as
/// the whole [`StatsDoc`] pretty-printed (or the text report), one tensor
/// at a time. An error after the first tensor closes the document with an
/// `error` member in place of the summary, so stdout still holds one JSON
/// document.
///
/// The JSON of a tensor (a histogram's hundreds of numbers) costs more than
/// scanning a small tensor, so tensors wait in `pending` (a bounded number,
/// see [`Streamed::room`]) and are encoded a run at a time on every core of
/// the pool while the scan goes on; each run is written, in order, when the
/// next one is handed over (at most one run is being encoded).
struct Streamed {
    json: bool,
    path: String,
    bins: u64,
    /// Tensors written so far.
    written: usize,
    /// Tensors received and not yet handed over to be encoded (JSON only).
    pending: Vec<Entry>,
    /// The run being encoded: its JSON arrives here, a buffer a slice of
    /// the run, with the number of tensors in it.
    encoding: Option<std::sync::mpsc::Receiver<Vec<Encoded>>>,
    /// Buffers of runs already written, for the next ones.
    spare: Vec<JsonBuf>,
}

/// The JSON of a slice of a run (its tensors, each after a comma and an
/// indent), and how many tensors it holds.
type Encoded = (usize, JsonBuf);

/// Bytes of JSON that the pending tensors may take at most, about.
const PENDING_BYTES: usize = 32 << 20;

impl Streamed {
    fn new(json: bool, path: String, bins: u64) -> Self {
        Self {
            json,
            path,
            bins,
            written: 0,
            pending: Vec::new(),
            encoding: None,
            spare: Vec::new(),
        }
    }

    /// True once a tensor was received: the document is under way.
    fn started(&self) -> bool {
        self.written > 0 || !self.pending.is_empty() || self.encoding.is_some()
    }

    /// Tensors that may wait: as many as `PENDING_BYTES` of JSON of
    /// tensors with `bins` bins hold (at least one, at most 1024).
    fn room(&self) -> usize {
        (PENDING_BYTES / self.per_tensor()).clamp(1, 1024)
    }

    /// Bytes of JSON of a tensor with `bins` bins, about.
    fn per_tensor(&self) -> usize {
        usize::try_from(self.bins.saturating_mul(24).saturating_add(2048)).unwrap_or(usize::MAX)
    }

    /// The document's opening, up to the tensors array.
    fn head(&self) -> String {
        let path = serde_json::to_string(&self.path).unwrap_or_else(|_| "\"\"".into());
        format!(
            "{{\n  \"path\": {path},\n  \"bins\": {},\n  \"tensors\": [",
            self.bins
        )
    }

    fn tensor(&mut self, out: &mut Output, t: TensorStats) {
        if !self.json {
            out.text(&tensor_text(&t));
            self.written += 1;
            return;
        }
        self.push(out, Entry::Plain(Box::new(t)));
    }

    /// An entry of a dequantized scan.
    fn entry(&mut self, out: &mut Output, e: Entry) {
        if self.json {
            self.push(out, e);
            return;
        }
        let text = match &e {
            Entry::Plain(t) => tensor_text(t),
            Entry::Logical(l) => logical_text(l),
            Entry::Undecoded(u) => format!(
                "{}  {}  {}: {}\n",
                display_name(&u.name),
                display_name(&u.label),
                u.status,
                display_name(&u.message)
            ),
        };
        out.text(&text);
        self.written += 1;
    }

    fn push(&mut self, out: &mut Output, e: Entry) {
        self.pending.push(e);
        if self.pending.len() >= self.room() {
            self.hand_over(out);
        }
    }

    /// Writes the run being encoded, then hands the pending tensors over to
    /// be encoded on the pool (in parallel) while the caller goes on.
    fn hand_over(&mut self, out: &mut Output) {
        self.write_encoded(out);
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let per_tensor = self.per_tensor();
        let mut spare = std::mem::take(&mut self.spare);
        let (send, receive) = std::sync::mpsc::channel();
        self.encoding = Some(receive);
        rayon::spawn(move || {
            use rayon::prelude::*;
            // A few slices a thread: balanced, and each one buffer (written
            // without a copy when it exceeds the output's buffer, and kept
            // for a later run).
            let slice = pending
                .len()
                .div_ceil(4 * rayon::current_num_threads())
                .max(1);
            let buffers: Vec<JsonBuf> = (0..pending.len().div_ceil(slice))
                .map(|_| {
                    spare
                        .pop()
                        .unwrap_or_else(|| JsonBuf::with_capacity(slice.saturating_mul(per_tensor)))
                })
                .collect();
            drop(spare);
            let encoded: Vec<Encoded> = pending
                .par_chunks(slice)
                .zip(buffers)
                .map(|(run, mut json)| {
                    for e in run {
                        json.raw(b",\n    ");
                        if let Err(e) = json.pretty(e, 2) {
                            eprintln!("tensorscope: cannot encode JSON: {e}");
                        }
                    }
                    (run.len(), json)
                })
                .collect();
            drop(pending);
            // The receiver waits for it; gone only if stdout was given up.
            let _ = send.send(encoded);
        });
    }

    /// Waits for the run being encoded, if any, and writes it.
    fn write_encoded(&mut self, out: &mut Output) {
        let Some(receive) = self.encoding.take() else {
            return;
        };
        let Ok(encoded) = receive.recv() else {
            eprintln!("tensorscope: cannot encode JSON: the encoder stopped");
            return;
        };
        for (tensors, mut json) in encoded {
            let buf = json.as_bytes();
            if self.written == 0 {
                out.bytes(self.head().as_bytes());
                // The first tensor has no comma before it.
                out.bytes(buf.get(1..).unwrap_or(&[]));
            } else {
                out.bytes(buf);
            }
            self.written += tensors;
            json.clear();
            self.spare.push(json);
        }
    }

    /// Writes every tensor received.
    fn flush(&mut self, out: &mut Output) {
        self.hand_over(out);
        self.write_encoded(out);
    }

    /// The rest of the document after the tensors: `key` and its value.
    fn close<T: Serialize>(&self, key: &str, value: &T) -> Vec<u8> {
        let mut s = if self.written == 0 {
            format!("{}]", self.head())
        } else {
            String::from("\n  ]")
        };
        let _ = write!(s, ",\n  \"{key}\": ");
        let mut buf = s.into_bytes();
        if let Err(e) = pretty_at(&mut buf, value, 1) {
            eprintln!("tensorscope: cannot encode JSON: {e}");
        }
        buf.extend_from_slice(b"\n}\n");
        buf
    }

    fn finish(
        mut self,
        out: &mut Output,
        summary: &Summary,
        verdict: Option<&FailOnDoc>,
        elapsed: Duration,
    ) {
        self.flush(out);
        if self.json {
            /// The summary with the verdict last, its own fields in order.
            #[derive(Serialize)]
            struct WithVerdict<'a> {
                #[serde(flatten)]
                summary: &'a Summary,
                fail_on: &'a FailOnDoc,
            }
            let doc = match verdict {
                Some(fail_on) => self.close("summary", &WithVerdict { summary, fail_on }),
                None => self.close("summary", summary),
            };
            out.bytes(&doc);
        } else {
            let mut text = summary_text(summary, elapsed);
            if let Some(v) = verdict {
                let names =
                    |w: &[FailOn]| w.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
                if v.failed.is_empty() {
                    let _ = writeln!(text, "fail-on {}: none found", names(&v.checked));
                } else {
                    let _ = writeln!(
                        text,
                        "fail-on: found {} in {}",
                        names(&v.failed),
                        v.tensors
                            .iter()
                            .map(|t| display_name(t))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
            out.text(&text);
        }
    }

    /// Ends a document already under way with `error` (exit code 2).
    fn fail(mut self, out: &mut Output, error: &ErrorDoc) -> i32 {
        self.flush(out);
        if self.json {
            out.bytes(&self.close("error", error));
        }
        eprintln!("tensorscope: {}", error.message);
        EXIT_ERROR
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
    if v.outliers_6sigma.is_some() || v.max_abs_over_std.is_some() {
        let _ = writeln!(
            s,
            "{indent}beyond 6σ {}  max|x|/σ {}",
            v.outliers_6sigma
                .map_or_else(|| "-".to_owned(), group_digits),
            float(v.max_abs_over_std)
        );
    }
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

/// One tensor's lines of the text report.
fn tensor_text(t: &TensorStats) -> String {
    let mut s = String::new();
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
    s
}

/// A logical tensor's lines of the text report: its values, then codes,
/// extremes and scales.
fn logical_text(l: &LogicalStats) -> String {
    let mut s = tensor_text(&l.stats);
    let q = &l.quant;
    let _ = writeln!(s, "  scheme     {} ({})", display_name(&l.label), l.scheme);
    let used = q.codes.counts.iter().filter(|c| **c > 0).count();
    let _ = writeln!(
        s,
        "  codes      {used} of {} used, {:.3}% at the extremes",
        q.codes.counts.len(),
        q.at_extremes * 100.0
    );
    if let Some(z) = &q.zeros {
        let _ = writeln!(
            s,
            "  zeros      {} values, {} .. {}",
            z.values.len(),
            z.values.first().copied().unwrap_or(0),
            z.values.last().copied().unwrap_or(0)
        );
    }
    if let Some(sc) = &q.scales {
        let _ = writeln!(
            s,
            "  scales     {} in {}: {} .. {}",
            group_digits(sc.count),
            display_name(&sc.tensor),
            float(sc.min),
            float(sc.max)
        );
    }
    s
}

/// The summary lines that end the text report.
fn summary_text(m: &Summary, elapsed: Duration) -> String {
    let mut s = String::new();
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

    /// A writer the test keeps a handle on.
    #[derive(Clone, Default)]
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn streamed(tensors: &[TensorStats], summary: &Summary, json: bool, bins: u64) -> String {
        let sink = Shared::default();
        let mut out = Output::to_writer(Box::new(sink.clone()));
        let mut doc = Streamed::new(json, "dir/m \"q\".safetensors".into(), bins);
        for t in tensors {
            doc.tensor(&mut out, t.clone());
        }
        doc.finish(&mut out, summary, None, Duration::from_millis(1));
        assert!(!out.failed(), "flushed");
        let bytes = sink.0.borrow().clone();
        String::from_utf8(bytes).expect("UTF-8")
    }

    /// The streamed document is byte for byte the one document
    /// pretty-printed whole (as every verb prints its document), with none,
    /// one and several tensors.
    #[test]
    fn the_streamed_document_is_the_whole_document() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data: Vec<u8> = (0..64u8).collect();
        let sources: Vec<tensorscope::format::write::TensorSource<'_>> = ["a", "b", "c"]
            .iter()
            .map(|name| tensorscope::format::write::TensorSource {
                name: (*name).into(),
                dtype: tensorscope::Dtype::F16,
                shape: vec![4, 8],
                data: &data,
            })
            .collect();
        let path = dir.path().join("m.safetensors");
        tensorscope::format::write::write_file(
            &path,
            &sources,
            None,
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("write");
        let ck = Checkpoint::open(&path).expect("open");
        let report = tensorscope::stats::scan(
            &ck,
            ck.tensors(),
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("scan");
        // 64 bins: the tensors wait and are written together at the end;
        // 2^20: each is written as it comes (one fits the pending bytes).
        for bins in [64, 1 << 20] {
            let doc = Streamed::new(true, String::new(), bins);
            assert_eq!(doc.room(), if bins == 64 { 1024 } else { 1 });
            for n in [0, 1, 3] {
                let tensors = &report.tensors[..n];
                let mut whole = Vec::new();
                crate::cli::output::pretty_at(
                    &mut whole,
                    &StatsDoc {
                        path: "dir/m \"q\".safetensors".into(),
                        bins,
                        tensors,
                        summary: &report.summary,
                    },
                    0,
                )
                .expect("JSON");
                let whole = String::from_utf8(whole).expect("UTF-8") + "\n";
                assert_eq!(
                    streamed(tensors, &report.summary, true, bins),
                    whole,
                    "{n} tensors, {bins} bins"
                );
            }
        }
        let text = streamed(&report.tensors, &report.summary, false, 64);
        assert!(
            text.starts_with("a  F16  [4, 8]") && text.contains("3 tensors"),
            "{text}"
        );
        // An error after some tensors still ends one JSON document.
        let sink = Shared::default();
        let mut out = Output::to_writer(Box::new(sink.clone()));
        let mut doc = Streamed::new(true, "m".into(), 64);
        for t in &report.tensors[..2] {
            doc.tensor(&mut out, t.clone());
        }
        let error = ErrorDoc {
            kind: "Changed".into(),
            message: "the file changed while being read".into(),
            path: Some("m".into()),
        };
        assert_eq!(doc.fail(&mut out, &error), EXIT_ERROR);
        assert!(!out.failed(), "flushed");
        let bytes = sink.0.borrow().clone();
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("one document");
        assert_eq!(v["tensors"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["error"]["kind"], "Changed");
        assert!(v.get("summary").is_none());
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
