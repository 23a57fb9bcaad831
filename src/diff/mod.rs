//! Structural and value diff of two checkpoints (DESIGN.md, "Diff
//! semantics"): tensors matched by name (after prefix stripping and
//! renames), a status per pair, and error metrics computed in one
//! streaming pass over the mapped bytes, in parallel over tensors.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rayon::prelude::*;
use serde::Serialize;

use crate::dtype::decode::{BitOrder, code_at, decode_c64, decode_f64};
use crate::dtype::{Dtype, DtypeKind};
use crate::format::{Checkpoint, CheckpointKind, LoadError, TensorRef};
use crate::jobs::{CancelToken, Cancelled, Progress};

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
    /// Relative tolerance.
    pub rtol: f64,
    /// Bit order of packed F6 elements.
    pub bit_order: BitOrder,
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
    /// Counts per exponent.
    pub counts: Vec<u64>,
    /// Pairs with Δ = 0.
    pub zeros: u64,
}

/// One matched pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorDiff {
    /// The matched name (B's name).
    pub name: String,
    /// A's name when it differs from B's (prefix stripped or renamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_a: Option<String>,
    /// The status.
    pub status: Status,
    /// A's dtype.
    pub dtype_a: Dtype,
    /// B's dtype.
    pub dtype_b: Dtype,
    /// A's shape.
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
    /// |Δ| per binary exponent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_log2_histogram: Option<DeltaLog2Histogram>,
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
    /// A's value.
    pub a: String,
    /// B's value.
    pub b: String,
}

impl MetadataDiff {
    /// True when nothing differs.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Counts per status and what stands out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DiffSummary {
    /// Pairs per status.
    pub counts: BTreeMap<&'static str, usize>,
    /// Names only in A.
    pub only_in_a: usize,
    /// Names only in B.
    pub only_in_b: usize,
    /// The pair with the largest relative change.
    pub largest_rel_l2: Option<(String, f64)>,
    /// True when the checkpoints count as equal (exit code 0).
    pub same: bool,
}

/// The whole diff.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DiffReport {
    /// Names only in A (A's names).
    pub only_in_a: Vec<String>,
    /// Names only in B.
    pub only_in_b: Vec<String>,
    /// Every matched pair, in B's order.
    pub tensors: Vec<TensorDiff>,
    /// Metadata differences.
    pub metadata: MetadataDiff,
    /// Counts and highlights.
    pub summary: DiffSummary,
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

/// The name a tensor is matched by.
pub fn match_key(name: &str, options: &DiffOptions, side_a: bool) -> String {
    let mut n = name;
    for p in &options.strip_prefixes {
        if let Some(rest) = n.strip_prefix(p.as_str()) {
            n = rest;
            break;
        }
    }
    if side_a && let Some((_, to)) = options.renames.iter().find(|(from, _)| from == n) {
        return to.clone();
    }
    n.to_owned()
}

/// The metadata of a checkpoint as strings (a shard index's values that
/// are not strings are written as JSON).
pub fn metadata_of(ck: &Checkpoint) -> BTreeMap<String, String> {
    match &ck.kind {
        CheckpointKind::Single => ck
            .shards
            .first()
            .and_then(|s| s.file.header().metadata.clone())
            .unwrap_or_default(),
        CheckpointKind::Sharded { metadata, .. } => metadata
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Compares the metadata of two checkpoints.
pub fn diff_metadata(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> MetadataDiff {
    let mut out = MetadataDiff::default();
    for (k, va) in a {
        match b.get(k) {
            None => {
                out.removed.insert(k.clone(), va.clone());
            }
            Some(vb) if vb != va => {
                out.changed.insert(
                    k.clone(),
                    ChangedValue {
                        a: va.clone(),
                        b: vb.clone(),
                    },
                );
            }
            Some(_) => {}
        }
    }
    for (k, vb) in b {
        if !a.contains_key(k) {
            out.added.insert(k.clone(), vb.clone());
        }
    }
    out
}

/// A matched pair before comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// A's tensor.
    pub a: TensorRef,
    /// B's tensor.
    pub b: TensorRef,
}

/// Matches the tensors of two checkpoints: pairs in B's order, then the
/// names only in A and only in B.
pub fn match_tensors(
    a: &Checkpoint,
    b: &Checkpoint,
    options: &DiffOptions,
) -> (Vec<Pair>, Vec<String>, Vec<String>) {
    let mut in_a: HashMap<String, TensorRef> = HashMap::with_capacity(a.tensors.len());
    for t in &a.tensors {
        if let Some(info) = a.info(*t) {
            in_a.insert(match_key(&info.name, options, true), *t);
        }
    }
    let mut pairs = Vec::new();
    let mut only_b = Vec::new();
    let mut matched: BTreeSet<String> = BTreeSet::new();
    for t in &b.tensors {
        let Some(info) = b.info(*t) else {
            continue;
        };
        let key = match_key(&info.name, options, false);
        match in_a.get(&key) {
            Some(ta) => {
                pairs.push(Pair { a: *ta, b: *t });
                matched.insert(key);
            }
            None => only_b.push(info.name.clone()),
        }
    }
    let mut only_a: Vec<String> = a
        .tensors
        .iter()
        .filter_map(|t| a.info(*t))
        .filter(|i| !matched.contains(&match_key(&i.name, options, true)))
        .map(|i| i.name.clone())
        .collect();
    only_a.sort();
    only_b.sort();
    (pairs, only_a, only_b)
}

/// Running sums of one comparison.
#[derive(Debug, Clone, Default)]
struct Acc {
    n_finite: u64,
    changed: u64,
    mismatches: u64,
    max_abs: f64,
    sum_abs: f64,
    sum_sq: f64,
    sum_aa: f64,
    sum_bb: f64,
    sum_ab: f64,
    /// Counts per binary exponent e of |Δ|, at index e + [`LOG2_OFFSET`]
    /// (allocated on first use).
    log2: Vec<u64>,
    zeros: u64,
}

/// Index offset of exponent 0 in [`Acc::log2`]: f64 exponents run from
/// −1074 (smallest subnormal) to 1023.
const LOG2_OFFSET: i32 = 1074;

impl Acc {
    fn delta(&mut self, d: f64) {
        let m = d.abs();
        self.n_finite += 1;
        if m > self.max_abs {
            self.max_abs = m;
        }
        self.sum_abs += m;
        self.sum_sq += m * m;
        if m == 0.0 {
            self.zeros += 1;
        } else {
            // The exponent field gives floor(log2 m) for normal values.
            let field = ((m.to_bits() >> 52) & 0x7ff) as i32;
            let e = if field == 0 {
                m.log2().floor() as i32
            } else {
                field - 1023
            };
            if self.log2.is_empty() {
                self.log2 = vec![0; 2 * LOG2_OFFSET as usize];
            }
            if let Some(c) = self.log2.get_mut((e + LOG2_OFFSET) as usize) {
                *c += 1;
            }
        }
    }

    /// Compares real values.
    fn real(&mut self, a: f64, b: f64, atol: f64, rtol: f64) {
        if a.is_finite() && b.is_finite() {
            let d = a - b;
            self.delta(d);
            self.sum_aa += a * a;
            self.sum_bb += b * b;
            self.sum_ab += a * b;
            if d.abs() > atol + rtol * b.abs() {
                self.changed += 1;
            }
        } else {
            let same = (a.is_nan() && b.is_nan()) || a == b;
            if !same {
                self.mismatches += 1;
                self.changed += 1;
            }
        }
    }

    /// Compares complex values (re, im).
    fn complex(&mut self, a: (f64, f64), b: (f64, f64), atol: f64, rtol: f64) {
        let finite = a.0.is_finite() && a.1.is_finite() && b.0.is_finite() && b.1.is_finite();
        if finite {
            let d = (a.0 - b.0).hypot(a.1 - b.1);
            self.delta(d);
            self.sum_aa += a.0 * a.0 + a.1 * a.1;
            self.sum_bb += b.0 * b.0 + b.1 * b.1;
            self.sum_ab += a.0 * b.0 + a.1 * b.1;
            if d > atol + rtol * b.0.hypot(b.1) {
                self.changed += 1;
            }
        } else {
            let same_part = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x == y;
            if !(same_part(a.0, b.0) && same_part(a.1, b.1)) {
                self.mismatches += 1;
                self.changed += 1;
            }
        }
    }
}

/// Compares the values of two tensors of the same shape. Returns the
/// running sums; `progress` receives the bytes read from both sides.
#[allow(
    clippy::too_many_arguments,
    reason = "the two sides' dtype and bytes, plus the run's context"
)]
fn compare_values(
    dtype_a: Dtype,
    bytes_a: &[u8],
    dtype_b: Dtype,
    bytes_b: &[u8],
    numel: u64,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Acc, Cancelled> {
    let mut acc = Acc::default();
    let (atol, rtol) = (options.atol, options.rtol);
    let exact_ints = dtype_a == dtype_b
        && matches!(
            dtype_a.kind(),
            DtypeKind::Signed | DtypeKind::Unsigned | DtypeKind::Bool
        )
        && atol == 0.0
        && rtol == 0.0;
    let complex = dtype_a == Dtype::C64 && dtype_b == Dtype::C64;
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    let mut ia = if complex {
        vec![0f64; CHUNK_ELEMENTS]
    } else {
        Vec::new()
    };
    let mut ib = if complex {
        vec![0f64; CHUNK_ELEMENTS]
    } else {
        Vec::new()
    };
    let bytes_per = |d: Dtype, n: usize| (n as u64 * u64::from(d.bits())).div_ceil(8);
    let mut first = 0u64;
    while first < numel {
        cancel.check()?;
        let n = ((numel - first).min(CHUNK_ELEMENTS as u64)) as usize;
        let (ga, gb) = if complex {
            (
                decode_c64(bytes_a, first, &mut va[..n], &mut ia[..n]),
                decode_c64(bytes_b, first, &mut vb[..n], &mut ib[..n]),
            )
        } else {
            (
                decode_f64(dtype_a, bytes_a, first, &mut va[..n], options.bit_order),
                decode_f64(dtype_b, bytes_b, first, &mut vb[..n], options.bit_order),
            )
        };
        let got = ga.min(gb);
        if got == 0 {
            break;
        }
        if complex {
            for k in 0..got {
                acc.complex((va[k], ia[k]), (vb[k], ib[k]), atol, rtol);
            }
        } else if exact_ints {
            for k in 0..got {
                let i = first + k as u64;
                let same = code_at(dtype_a, bytes_a, i, options.bit_order)
                    == code_at(dtype_b, bytes_b, i, options.bit_order);
                let d = va[k] - vb[k];
                acc.delta(d);
                acc.sum_aa += va[k] * va[k];
                acc.sum_bb += vb[k] * vb[k];
                acc.sum_ab += va[k] * vb[k];
                if !same {
                    acc.changed += 1;
                }
            }
        } else {
            for k in 0..got {
                acc.real(va[k], vb[k], atol, rtol);
            }
        }
        progress.add(bytes_per(dtype_a, got) + bytes_per(dtype_b, got));
        first += got as u64;
    }
    Ok(acc)
}

/// Compares byte ranges in chunks, checking cancellation.
fn bytes_equal(
    a: &[u8],
    b: &[u8],
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<bool, Cancelled> {
    if a.len() != b.len() {
        return Ok(false);
    }
    for (ca, cb) in a.chunks(8 << 20).zip(b.chunks(8 << 20)) {
        cancel.check()?;
        if ca != cb {
            return Ok(false);
        }
        progress.add(2 * ca.len() as u64);
    }
    Ok(true)
}

/// Compares one pair.
pub fn diff_pair(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<TensorDiff>, Cancelled> {
    let (Some(ia), Some(ib)) = (a.info(pair.a), b.info(pair.b)) else {
        return Ok(None);
    };
    let mut out = TensorDiff {
        name: ib.name.clone(),
        name_a: (ia.name != ib.name).then(|| ia.name.clone()),
        status: Status::Identical,
        dtype_a: ia.dtype,
        dtype_b: ib.dtype,
        shape_a: ia.shape.clone(),
        shape_b: ib.shape.clone(),
        max_abs_diff: None,
        mean_abs_diff: None,
        rms_diff: None,
        rel_l2: None,
        cosine: None,
        changed_elements: None,
        changed_fraction: None,
        nan_mismatches: None,
        delta_log2_histogram: None,
    };
    if ia.shape != ib.shape {
        out.status = Status::ShapeChanged;
        progress.add(ia.nbytes + ib.nbytes);
        return Ok(Some(out));
    }
    let (ba, bb) = (a.bytes(pair.a), b.bytes(pair.b));
    if ia.dtype == ib.dtype && bytes_equal(ba, bb, cancel, progress)? {
        out.status = Status::Identical;
        out.max_abs_diff = Some(0.0);
        out.mean_abs_diff = Some(0.0);
        out.rms_diff = Some(0.0);
        out.rel_l2 = Some(0.0);
        out.changed_elements = Some(0);
        out.changed_fraction = (ia.numel > 0).then_some(0.0);
        out.nan_mismatches = Some(0);
        return Ok(Some(out));
    }
    let comparable = (ia.dtype == Dtype::C64) == (ib.dtype == Dtype::C64);
    if !comparable {
        out.status = Status::DtypeChanged;
        progress.add(ia.nbytes + ib.nbytes);
        return Ok(Some(out));
    }
    let acc = compare_values(
        ia.dtype, ba, ib.dtype, bb, ia.numel, options, cancel, progress,
    )?;
    let n = acc.n_finite;
    let fin = |x: f64| x.is_finite().then_some(x);
    if n > 0 {
        out.max_abs_diff = fin(acc.max_abs);
        out.mean_abs_diff = fin(acc.sum_abs / n as f64);
        out.rms_diff = fin((acc.sum_sq / n as f64).sqrt());
        let norm_a = acc.sum_aa.sqrt();
        let norm_b = acc.sum_bb.sqrt();
        out.rel_l2 = if norm_a > 0.0 {
            fin(acc.sum_sq.sqrt() / norm_a)
        } else if acc.sum_sq == 0.0 {
            Some(0.0)
        } else {
            None
        };
        out.cosine = (norm_a > 0.0 && norm_b > 0.0)
            .then(|| (acc.sum_ab / (norm_a * norm_b)).clamp(-1.0, 1.0));
    }
    out.changed_elements = Some(acc.changed);
    out.changed_fraction = (ia.numel > 0).then(|| acc.changed as f64 / ia.numel as f64);
    out.nan_mismatches = Some(acc.mismatches);
    out.delta_log2_histogram = Some(DeltaLog2Histogram {
        exponents: (0..acc.log2.len())
            .filter(|&i| acc.log2[i] > 0)
            .map(|i| i as i32 - LOG2_OFFSET)
            .collect(),
        counts: acc.log2.iter().copied().filter(|&c| c > 0).collect(),
        zeros: acc.zeros,
    });
    out.status = if ia.dtype != ib.dtype {
        Status::DtypeChanged
    } else if acc.changed == 0 {
        Status::Equal
    } else {
        Status::Changed
    };
    Ok(Some(out))
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
    for ck in [a, b] {
        for shard in &ck.shards {
            shard.file.check_unchanged()?;
        }
    }
    let (pairs, only_in_a, only_in_b) = match_tensors(a, b, options);
    let total: u64 = pairs
        .iter()
        .map(|p| a.info(p.a).map_or(0, |i| i.nbytes) + b.info(p.b).map_or(0, |i| i.nbytes))
        .sum();
    progress.set_total(total);
    // Largest first so the tail of the parallel run is short.
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(a.info(pairs[i].a).map_or(0, |x| x.nbytes)));
    let mut results: Vec<(usize, TensorDiff)> = order
        .par_iter()
        .map(|&i| diff_pair(a, b, pairs[i], options, cancel, progress).map(|d| d.map(|d| (i, d))))
        .collect::<Result<Vec<_>, Cancelled>>()?
        .into_iter()
        .flatten()
        .collect();
    results.sort_by_key(|(i, _)| *i);
    let tensors: Vec<TensorDiff> = results.into_iter().map(|(_, d)| d).collect();
    let metadata = diff_metadata(&metadata_of(a), &metadata_of(b));
    let summary = summarize(&tensors, only_in_a.len(), only_in_b.len(), &metadata);
    Ok(DiffReport {
        only_in_a,
        only_in_b,
        tensors,
        metadata,
        summary,
    })
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
pub type DeltaHistogram = (Vec<f64>, Vec<u64>);

/// A linear histogram of Δ = a − b over finite pairs of one tensor pair
/// (two passes: range, then counts), for the GUI's pair view.
pub fn delta_histogram(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    bins: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<DeltaHistogram>, Cancelled> {
    let (Some(ia), Some(ib)) = (a.info(pair.a), b.info(pair.b)) else {
        return Ok(None);
    };
    if ia.shape != ib.shape || ia.dtype == Dtype::C64 || ib.dtype == Dtype::C64 {
        return Ok(None);
    }
    let (ba, bb) = (a.bytes(pair.a), b.bytes(pair.b));
    let bins = bins.clamp(1, 4096);
    progress.set_total(2 * (ia.nbytes + ib.nbytes));
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    let mut pass = |f: &mut dyn FnMut(f64)| -> Result<(), Cancelled> {
        let mut first = 0u64;
        while first < ia.numel {
            cancel.check()?;
            let n = ((ia.numel - first).min(CHUNK_ELEMENTS as u64)) as usize;
            let ga = decode_f64(ia.dtype, ba, first, &mut va[..n], options.bit_order);
            let gb = decode_f64(ib.dtype, bb, first, &mut vb[..n], options.bit_order);
            let got = ga.min(gb);
            if got == 0 {
                break;
            }
            for k in 0..got {
                let d = va[k] - vb[k];
                if d.is_finite() {
                    f(d);
                }
            }
            progress.add(((got as u64) * u64::from(ia.dtype.bits() + ib.dtype.bits())).div_ceil(8));
            first += got as u64;
        }
        Ok(())
    };
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    pass(&mut |d| {
        lo = lo.min(d);
        hi = hi.max(d);
    })?;
    if lo > hi {
        return Ok(Some((Vec::new(), Vec::new())));
    }
    let nb = if hi > lo { bins } else { 1 };
    let width = (hi - lo) / nb as f64;
    let mut counts = vec![0u64; nb];
    pass(&mut |d| {
        let i = if width > 0.0 {
            (((d - lo) / width) as usize).min(nb - 1)
        } else {
            0
        };
        counts[i] += 1;
    })?;
    let edges = (0..=nb)
        .map(|i| if i == nb { hi } else { lo + width * i as f64 })
        .collect();
    Ok(Some((edges, counts)))
}

/// A downsampled map of |a − b| for one pair of the same shape: the last
/// axis is the columns, all leading axes together the rows; each cell holds
/// the largest |Δ| of its block (NaN where a block has no finite pair).
#[allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of the comparison"
)]
pub fn abs_delta_map(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    max_side: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<crate::stats::heatmap::Heatmap>, Cancelled> {
    let (Some(ia), Some(ib)) = (a.info(pair.a), b.info(pair.b)) else {
        return Ok(None);
    };
    if ia.shape != ib.shape || ia.numel == 0 || ia.dtype == Dtype::C64 || ib.dtype == Dtype::C64 {
        return Ok(None);
    }
    let cols = ia.shape.last().copied().unwrap_or(1).max(1);
    let rows = ia.numel / cols;
    let side = max_side.max(1) as u64;
    let (height, width) = (rows.min(side) as usize, cols.min(side) as usize);
    let mut cells = vec![f64::NAN; width * height];
    let mut non_finite = vec![false; width * height];
    let (ba, bb) = (a.bytes(pair.a), b.bytes(pair.b));
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    progress.set_total(ia.nbytes + ib.nbytes);
    let mut first = 0u64;
    while first < ia.numel {
        cancel.check()?;
        let n = ((ia.numel - first).min(CHUNK_ELEMENTS as u64)) as usize;
        let got = decode_f64(ia.dtype, ba, first, &mut va[..n], options.bit_order).min(decode_f64(
            ib.dtype,
            bb,
            first,
            &mut vb[..n],
            options.bit_order,
        ));
        if got == 0 {
            break;
        }
        for k in 0..got {
            let i = first + k as u64;
            let (r, c) = (i / cols, i % cols);
            let cell = (r as u128 * height as u128 / rows as u128) as usize * width
                + (c as u128 * width as u128 / cols as u128) as usize;
            let d = (va[k] - vb[k]).abs();
            if d.is_finite() {
                if cells[cell].is_nan() || d > cells[cell] {
                    cells[cell] = d;
                }
            } else if !(va[k].is_nan() && vb[k].is_nan()) && va[k] != vb[k] {
                non_finite[cell] = true;
            }
        }
        progress.add(((got as u64) * u64::from(ia.dtype.bits() + ib.dtype.bits())).div_ceil(8));
        first += got as u64;
    }
    let finite = cells.iter().copied().filter(|v| v.is_finite());
    let min = finite.clone().reduce(f64::min);
    let max = finite.reduce(f64::max);
    Ok(Some(crate::stats::heatmap::Heatmap {
        width,
        height,
        cells,
        non_finite,
        min,
        max,
        rows,
        cols,
    }))
}

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
        assert_eq!(match_key("model.x", &o, false), "x");
        assert_eq!(match_key("model.w", &o, true), "weight");
        assert_eq!(match_key("w", &o, false), "w");
        assert_eq!(layer_index("model.layers.12.mlp"), Some(12));
        assert_eq!(layer_index("embed"), None);
    }

    #[test]
    fn accumulator_semantics() {
        let mut acc = Acc::default();
        acc.real(f64::NAN, f64::NAN, 0.0, 0.0);
        acc.real(0.0, -0.0, 0.0, 0.0);
        acc.real(f64::INFINITY, f64::INFINITY, 0.0, 0.0);
        assert_eq!((acc.changed, acc.mismatches), (0, 0));
        acc.real(f64::NAN, 1.0, 0.0, 0.0);
        acc.real(1.0, 1.5, 0.0, 0.0);
        assert_eq!((acc.changed, acc.mismatches), (2, 1));
        assert_eq!(acc.max_abs, 0.5);
        let mut tol = Acc::default();
        tol.real(1.0, 1.05, 0.0, 0.1);
        tol.real(1.0, 1.05, 0.06, 0.0);
        assert_eq!(tol.changed, 0);
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
