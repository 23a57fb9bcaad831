//! Structural and value diff of two checkpoints (DESIGN.md, "Diff
//! semantics"): tensors matched by name (after prefix stripping and
//! renames), a status per pair, and error metrics computed in one
//! streaming pass over the mapped bytes, in parallel over tensors.
//!
//! Here: the report types and [`diff`]; `matching` pairs the tensors,
//! `values` compares one pair, `detail` computes the GUI's extra views of
//! a pair (Δ histogram, |Δ| map).

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;

use crate::dtype::Dtype;
use crate::dtype::decode::BitOrder;
use crate::format::{Checkpoint, LoadError, TensorRef};
use crate::jobs::{CancelToken, Cancelled, Progress};

mod dequant;
mod detail;
mod matching;
mod values;
pub(crate) use values::bytes_equal;

pub(crate) use dequant::items;
pub(crate) use detail::Reader;
pub use detail::{
    DeltaHistogram, Source, abs_delta_map, abs_delta_map_of, delta_histogram, delta_histogram_of,
};
pub use matching::{Pair, Side, diff_metadata, match_key, match_tensors, metadata_of};
pub use values::diff_pair;

/// Elements decoded per chunk (per side): 64 Ki elements, at most 512 KiB
/// of input per side for 64-bit dtypes, so cancellation is checked often.
const CHUNK_ELEMENTS: usize = 1 << 16;

/// How tensors are matched and values compared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiffOptions {
    /// Prefixes removed from names on both sides before matching (the first
    /// that matches), such as `model.`.
    pub strip_prefixes: Vec<String>,
    /// Exact renames applied to A's names (after stripping): A's `from`
    /// matches B's `to`.
    pub renames: Vec<(String, String)>,
    /// Absolute tolerance (numpy.isclose): |a − b| ≤ atol + rtol·|b|.
    pub atol: f64,
    /// Relative tolerance: |a − b| ≤ atol + rtol·|b|, as numpy.isclose (0 by
    /// default).
    pub rtol: f64,
    /// Bit order of packed F6 elements.
    pub bit_order: BitOrder,
    /// Compare stored tensors only, even where a side is quantized (by
    /// default quantized weights are compared by their decoded values).
    pub raw: bool,
    /// For one pair's detail ([`delta_histogram_of`], [`abs_delta_map_of`]):
    /// the heads each side's rows are un-permuted by (a GGUF's attention Q
    /// or K met against its original; see [`PairSides`]).
    pub unpermute: (Option<u64>, Option<u64>),
}

/// How a pair met through llama.cpp's name table is read: each side's own
/// name, and the heads its rows are un-permuted by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairSides {
    /// A's name in A.
    pub a: String,
    /// B's name in B.
    pub b: String,
    /// The heads A's and B's rows are un-permuted by.
    pub unpermute: (Option<u64>, Option<u64>),
}

/// The status of a pair of tensors with the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Same dtype, shape and bytes.
    Identical,
    /// Same dtype and shape; bytes differ but every value is equal (±0, NaN
    /// payloads, or within the tolerances).
    Equal,
    /// Same dtype and shape; some values differ.
    Changed,
    /// Different dtypes (values compared when the shapes match).
    DtypeChanged,
    /// Different shapes (not compared element-wise).
    ShapeChanged,
}

impl Status {
    /// The JSON and display name.
    pub const fn name(self) -> &'static str {
        match self {
            Status::Identical => "identical",
            Status::Equal => "equal",
            Status::Changed => "changed",
            Status::DtypeChanged => "dtype_changed",
            Status::ShapeChanged => "shape_changed",
        }
    }

    /// True for the statuses that count as "no difference".
    pub const fn is_same(self) -> bool {
        matches!(self, Status::Identical | Status::Equal)
    }
}

/// Counts of |Δ| per binary exponent, one pass: how large the differences
/// are (for a quantized export, its error's scale).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeltaLog2Histogram {
    /// Exponents e, ascending: bin e counts |Δ| in [2^e, 2^(e+1)).
    pub exponents: Vec<i32>,
    /// Pairs whose |Δ| has each binary exponent, one count per entry of
    /// `exponents`.
    pub counts: Vec<u64>,
    /// Pairs with Δ = 0.
    pub zeros: u64,
}

/// The comparison of one matched pair (DESIGN.md, "Diff semantics").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorDiff {
    /// The matched name (B's name).
    pub name: String,
    /// A's name when it differs from B's (prefix stripped or renamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_a: Option<String>,
    /// What the comparison found; decides the exit code with the metadata.
    pub status: Status,
    /// A's dtype; values are compared in f64 even when the dtypes differ.
    pub dtype_a: Dtype,
    /// B's dtype.
    pub dtype_b: Dtype,
    /// A's shape; element-wise figures need it equal to B's.
    pub shape_a: Vec<u64>,
    /// B's shape.
    pub shape_b: Vec<u64>,
    /// max |a − b| over pairs of finite values.
    pub max_abs_diff: Option<f64>,
    /// mean |a − b| over pairs of finite values.
    pub mean_abs_diff: Option<f64>,
    /// sqrt(mean (a − b)²) over pairs of finite values.
    pub rms_diff: Option<f64>,
    /// ‖a − b‖ / ‖a‖ over pairs of finite values (`null` when ‖a‖ = 0).
    pub rel_l2: Option<f64>,
    /// a·b / (‖a‖ ‖b‖) (`null` when a norm is 0).
    pub cosine: Option<f64>,
    /// Elements that are not equal (NaN against a number included).
    pub changed_elements: Option<u64>,
    /// `changed_elements` / element count.
    pub changed_fraction: Option<f64>,
    /// Elements where one side is NaN or ±Inf and the other is not the same.
    pub nan_mismatches: Option<u64>,
    /// |Δ| per binary exponent, over the changed finite pairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_log2_histogram: Option<DeltaLog2Histogram>,
    /// Which side was a quantized weight compared by its decoded values:
    /// `a`, `b` or `both` (absent for stored tensors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dequantized: Option<&'static str>,
    /// For a dequantized pair: 10·log10(‖a‖² / ‖a − b‖²), A as the signal
    /// (as `rel_l2`: put the original first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snr_db: Option<f64>,
    /// ‖a − b‖² and ‖a‖² over the finite pairs, when the values were
    /// compared (for [`DiffReport::layers`]).
    #[serde(skip)]
    pub sums: Option<[f64; 2]>,
    /// A pair met through llama.cpp's name table: how to read each side
    /// again (for the explorer's pair detail).
    #[serde(skip)]
    pub sides: Option<PairSides>,
}

/// The error of one layer's tensors together (a quantized model against
/// its original: which layers the quantization hurt most).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerDiff {
    /// The layer's number (`model.layers.N.`, `blk.N.`).
    pub layer: u64,
    /// Pairs of its tensors whose values were compared.
    pub tensors: u64,
    /// ‖a − b‖ / ‖a‖ over all of them (`null` when ‖a‖ = 0).
    pub rel_l2: Option<f64>,
    /// 10·log10(‖a‖² / ‖a − b‖²) over all of them (`null` when equal).
    pub snr_db: Option<f64>,
}

/// Per-layer figures of the compared pairs, by layer number.
pub fn layers(tensors: &[TensorDiff]) -> Vec<LayerDiff> {
    let mut by: BTreeMap<u64, (u64, f64, f64)> = BTreeMap::new();
    for t in tensors {
        if let (Some(l), Some([sq, aa])) = (layer_index(&t.name), t.sums) {
            let e = by.entry(l).or_default();
            *e = (e.0 + 1, e.1 + sq, e.2 + aa);
        }
    }
    by.into_iter()
        .map(|(layer, (n, sq, aa))| LayerDiff {
            layer,
            tensors: n,
            rel_l2: Some((sq / aa).sqrt()).filter(|x| aa > 0.0 && x.is_finite()),
            snr_db: Some(10.0 * (aa / sq).log10())
                .filter(|x| sq > 0.0 && aa > 0.0 && x.is_finite()),
        })
        .collect()
}

/// What changed in `__metadata__` (or a shard index's `metadata`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MetadataDiff {
    /// Keys only in B, with B's value.
    pub added: BTreeMap<String, String>,
    /// Keys only in A, with A's value.
    pub removed: BTreeMap<String, String>,
    /// Keys in both with different values: `{key: {a, b}}`.
    pub changed: BTreeMap<String, ChangedValue>,
}

/// A metadata value that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedValue {
    /// The value in A.
    pub a: String,
    /// The value in B.
    pub b: String,
}

impl MetadataDiff {
    /// True when no key was added, removed or changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Counts per status and what stands out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DiffSummary {
    /// Pairs per status name (`identical`, `equal`, `changed`, …).
    pub counts: BTreeMap<&'static str, usize>,
    /// How many names are only in A (after prefixes and renames).
    pub only_in_a: usize,
    /// How many names are only in B.
    pub only_in_b: usize,
    /// The pair with the largest relative change.
    pub largest_rel_l2: Option<(String, f64)>,
    /// True when the checkpoints count as equal (exit code 0).
    pub same: bool,
}

/// The whole diff: every pair, the unmatched names, the metadata, and a
/// summary; `diff --json` prints it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DiffReport {
    /// Names only in A (A's names).
    pub only_in_a: Vec<String>,
    /// Names only in B, sorted.
    pub only_in_b: Vec<String>,
    /// Every matched pair, in B's order.
    pub tensors: Vec<TensorDiff>,
    /// Keys of `__metadata__` added, removed or changed from A to B.
    pub metadata: MetadataDiff,
    /// Counts per status and the pairs that changed most.
    pub summary: DiffSummary,
    /// Where a side is quantized (or a GGUF meets its original): the
    /// error layer by layer (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerDiff>,
}

/// Why a diff could not be computed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DiffError {
    /// Cancelled (an outcome, not a failure).
    #[error("cancelled")]
    Cancelled,
    /// A file changed or cannot be read.
    #[error(transparent)]
    Load(#[from] LoadError),
}

impl From<Cancelled> for DiffError {
    fn from(_: Cancelled) -> Self {
        DiffError::Cancelled
    }
}

/// Diffs two checkpoints: every matched pair in parallel (rayon), the
/// names on one side only, and the metadata. `progress` counts bytes read
/// from both sides.
pub fn diff(
    a: &Checkpoint,
    b: &Checkpoint,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<DiffReport, DiffError> {
    a.check_all_unchanged()?;
    b.check_all_unchanged()?;
    if !options.raw {
        let (qa, qb) = (crate::quant::detect(a), crate::quant::detect(b));
        let decoded = |q: &Option<crate::quant::Quantization>| {
            q.as_ref().is_some_and(|q| {
                q.tensors()
                    .iter()
                    .any(|t| t.status() == crate::quant::Status::Decoded)
            })
        };
        if decoded(&qa) || decoded(&qb) || dequant::meets_hf(a, b) {
            return dequant::diff_dequant(
                a,
                qa.as_ref(),
                b,
                qb.as_ref(),
                options,
                cancel,
                progress,
            );
        }
    }
    let (pairs, only_in_a, only_in_b) = match_tensors(a, b, options);
    let total: u64 = pairs
        .iter()
        .map(|p| {
            a.info(p.a).map_or(0, crate::format::TensorInfo::nbytes)
                + b.info(p.b).map_or(0, crate::format::TensorInfo::nbytes)
        })
        .sum();
    progress.set_total(total);
    // Largest first so the tail of the parallel run is short.
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| {
        std::cmp::Reverse(
            a.info(pairs[i].a)
                .map_or(0, crate::format::TensorInfo::nbytes),
        )
    });
    let bytes_of = |i: usize| {
        a.info(pairs[i].a)
            .map_or(0, crate::format::TensorInfo::nbytes)
            + b.info(pairs[i].b)
                .map_or(0, crate::format::TensorInfo::nbytes)
    };
    let mut results = in_batches(
        (a, b),
        &order,
        &|i| (vec![pairs[i].a], vec![pairs[i].b]),
        &bytes_of,
        &|i| diff_pair(a, b, pairs[i], options, cancel, progress),
        cancel,
        progress,
    )?;
    results.sort_by_key(|(i, _)| *i);
    // A comparison over a file that changed while being read is not one.
    a.check_all_unchanged()?;
    b.check_all_unchanged()?;
    let tensors: Vec<TensorDiff> = results.into_iter().map(|(_, d)| d).collect();
    let metadata = diff_metadata(&metadata_of(a), &metadata_of(b));
    let summary = summarize(&tensors, only_in_a.len(), only_in_b.len(), &metadata);
    Ok(DiffReport {
        only_in_a,
        only_in_b,
        tensors,
        metadata,
        summary,
        layers: Vec::new(),
    })
}

/// Runs `compare` over `order`, in parallel, and returns its results with
/// their indices. When a side is remote, in batches of about
/// [`crate::source::remote::batch_bytes`] whose tensors (`refs`) are fetched first and
/// checked as read after; local files are compared in one run.
fn in_batches<T: Send>(
    (a, b): (&Checkpoint, &Checkpoint),
    order: &[usize],
    refs: &(dyn Fn(usize) -> (Vec<TensorRef>, Vec<TensorRef>) + Sync),
    bytes_of: &(dyn Fn(usize) -> u64 + Sync),
    compare: &(dyn Fn(usize) -> Result<Option<T>, Cancelled> + Sync),
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Vec<(usize, T)>, DiffError> {
    let run = |batch: &[usize]| -> Result<Vec<(usize, T)>, Cancelled> {
        Ok(batch
            .par_iter()
            .map(|&i| compare(i).map(|d| d.map(|d| (i, d))))
            .collect::<Result<Vec<_>, Cancelled>>()?
            .into_iter()
            .flatten()
            .collect())
    };
    if !a.needs_fetch() && !b.needs_fetch() {
        return Ok(run(order)?);
    }
    let batch_bytes = crate::source::remote::batch_bytes();
    let mut out = Vec::new();
    let mut rest = order;
    while !rest.is_empty() {
        let len = crate::source::batch_len(rest, usize::MAX, batch_bytes, |&i| bytes_of(i));
        let (batch, next) = rest.split_at(len);
        rest = next;
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for &i in batch {
            let (x, y) = refs(i);
            ra.extend(x);
            rb.extend(y);
        }
        let _fa = a.fetch(&ra, cancel, progress)?;
        let _fb = b.fetch(&rb, cancel, progress)?;
        out.extend(run(batch)?);
        a.check_unchanged(&ra)?;
        b.check_unchanged(&rb)?;
    }
    Ok(out)
}

/// Counts per status and the largest relative change.
pub fn summarize(
    tensors: &[TensorDiff],
    only_a: usize,
    only_b: usize,
    metadata: &MetadataDiff,
) -> DiffSummary {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for t in tensors {
        *counts.entry(t.status.name()).or_insert(0) += 1;
    }
    let largest = tensors
        .iter()
        .filter_map(|t| Some((t.name.clone(), t.rel_l2?)))
        .filter(|(_, r)| *r > 0.0)
        .max_by(|x, y| x.1.total_cmp(&y.1));
    let same = only_a == 0
        && only_b == 0
        && metadata.is_empty()
        && tensors.iter().all(|t| t.status.is_same());
    DiffSummary {
        counts,
        only_in_a: only_a,
        only_in_b: only_b,
        largest_rel_l2: largest,
        same,
    }
}

/// The first numeric part of a dotted name (`model.layers.12.mlp` → 12),
/// for the per-layer chart.
pub fn layer_index(name: &str) -> Option<u64> {
    name.split('.').find_map(|p| {
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            p.parse().ok()
        }
    })
}

/// A linear histogram: `counts.len() + 1` edges and the counts.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_layers() {
        let o = DiffOptions {
            strip_prefixes: vec!["model.".into()],
            renames: vec![("w".into(), "weight".into())],
            ..DiffOptions::default()
        };
        assert_eq!(match_key("model.x", &o, Side::B), "x");
        assert_eq!(match_key("model.w", &o, Side::A), "weight");
        assert_eq!(match_key("w", &o, Side::B), "w");
        assert_eq!(layer_index("model.layers.12.mlp"), Some(12));
        assert_eq!(layer_index("embed"), None);
    }

    #[test]
    fn metadata() {
        let a = BTreeMap::from([
            ("k".to_owned(), "1".to_owned()),
            ("gone".to_owned(), "x".to_owned()),
        ]);
        let b = BTreeMap::from([
            ("k".to_owned(), "2".to_owned()),
            ("new".to_owned(), "y".to_owned()),
        ]);
        let d = diff_metadata(&a, &b);
        assert_eq!(d.added.len(), 1);
        assert_eq!(d.removed.len(), 1);
        assert_eq!(
            d.changed["k"],
            ChangedValue {
                a: "1".into(),
                b: "2".into()
            }
        );
    }
}
