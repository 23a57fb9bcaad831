//! Streaming statistics of tensors: counts of NaN, ±Inf, zeros and
//! subnormals, the finite range, mean, standard deviation, mean |x|, L2
//! norm, a linear and a log2 histogram, and nearest-rank quantiles, for
//! every dtype (DESIGN.md, "Statistics semantics").
//!
//! The bytes are read where they are mapped, in chunks, and never turned
//! into a whole-tensor array; memory use does not grow with the tensor.
//!
//! * Dtypes of 16 bits or fewer (BOOL, F4, F6, the F8s, U8, I8, U16, I16,
//!   F16, BF16) count their raw codes (at most 65,536 counters) in one pass;
//!   every figure is then derived from the counts, so histograms and
//!   quantiles are exact (`codes.rs`).
//! * F32, F64 and the parts and magnitude of C64 count 20-bit key prefixes
//!   beside the counts, range and moments in pass 1; pass 2 looks only at
//!   the values beside a bin edge or in a quantile's bucket: exact
//!   histograms and quantiles in two passes (`float/exact.rs`). Tensors of
//!   at most 32,768 elements sort their values instead.
//! * I32, U32, I64 and U64 take a pass for the counts, range and moments,
//!   one for the linear histogram, and narrow the bin holding each rank in
//!   one or two more, on exact integers (`ints.rs`, `refine.rs`).
//!
//! Chunks of a tensor run in parallel on rayon's pool; [`scan`] also runs
//! tensors in parallel. Long work takes a [`CancelToken`] (checked before
//! every chunk of at most [`CHUNK_BYTES`]) and reports bytes read to a
//! [`Progress`].
//!
//! The result types are in `report`; the binning, moments and hot loops
//! in `bins`, `moments` and `kernel` (with `simd`, their AVX2 and AVX-512
//! copies).

mod bins;
mod codes;
mod float;
pub mod heatmap;
mod ints;
mod kernel;
pub(crate) mod moments;
mod quant;
mod refine;
mod report;
mod simd;

use std::ops::Range;

use rayon::prelude::*;

pub use bins::{DEFAULT_BINS, MAX_BINS, QUANTILES, nearest_rank};
pub use quant::{
    CodeCounts, Entry, LogicalStats, QuantStats, ScaleStats, Undecoded, ZeroCounts, logical_stats,
    planned_logical_work, scan_dequant_each,
};
pub use report::{
    CodeHistogram, Histogram, Log2Histogram, Quantiles, Scalar, ScanReport, Summary, TensorStats,
    ValueStats,
};
pub use simd::chosen_sets as vector_sets;

use crate::dtype::decode::BitOrder;
use crate::dtype::{Dtype, DtypeKind};
use crate::format::{Checkpoint, LoadError, TensorInfo, TensorRef};
use crate::jobs::{CancelToken, Cancelled, Progress};

/// Bytes read between two cancellation checks (per thread), and the unit
/// of parallel work inside a tensor. A multiple of 24 so that every chunk
/// holds whole elements of every dtype (F6 packs 4 elements in 3 bytes).
pub const CHUNK_BYTES: u64 = 8 * 1024 * 1024 - (8 * 1024 * 1024) % 24;

/// How much to compute: every figure, or the moments only (a quick pass
/// for tables of many tensors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Detail {
    /// Everything: counts, moments, histograms and quantiles.
    #[default]
    Full,
    /// Counts, range and moments only: no histogram, no quantiles (one pass
    /// over the data for every dtype).
    MomentsOnly,
    /// [`Detail::MomentsOnly`] and the count of values beyond 6σ: a second
    /// pass for the dtypes not counted by code (the explorer's scan).
    Outliers,
}

/// How F32, F64 and C64 quantiles are found (every other dtype's are
/// exact by construction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuantileMode {
    /// Exact nearest-rank values, found by narrowing the linear bin that
    /// holds each rank in a few extra passes over the data.
    #[default]
    Exact,
    /// The middle of the linear bin that holds each rank, with
    /// `quantile_error` bounding the distance to the exact value.
    FromHistogram,
}

/// Parameters of a statistics run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatsOptions {
    /// Linear histogram bins (1..=[`MAX_BINS`]; default [`DEFAULT_BINS`]).
    pub bins: usize,
    /// What to compute (see [`Detail`]).
    pub detail: Detail,
    /// How F32/F64/C64 quantiles are found.
    pub quantiles: QuantileMode,
    /// Bit order of packed F6 elements.
    pub bit_order: BitOrder,
}

impl Default for StatsOptions {
    fn default() -> Self {
        Self {
            bins: DEFAULT_BINS,
            detail: Detail::Full,
            quantiles: QuantileMode::Exact,
            bit_order: BitOrder::LsbFirst,
        }
    }
}

impl StatsOptions {
    fn full(&self) -> bool {
        self.detail == Detail::Full
    }

    fn bins(&self) -> usize {
        self.bins.clamp(1, MAX_BINS)
    }
}

/// Why statistics could not be computed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StatsError {
    /// The run was cancelled (an outcome, not a failure).
    #[error("cancelled")]
    Cancelled,
    /// A file changed or cannot be read any more.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The tensor asked for is not in the checkpoint (a reference from
    /// another checkpoint, or one that outlived a reload).
    #[error("no tensor {index} in shard {shard} of this checkpoint")]
    NoSuchTensor {
        /// The shard index asked for.
        shard: usize,
        /// The tensor index within that shard.
        index: usize,
    },
}

impl From<Cancelled> for StatsError {
    fn from(_: Cancelled) -> Self {
        StatsError::Cancelled
    }
}

/// Progress units (bytes read) that [`stats_of`] reports for a tensor of
/// `nbytes` bytes: one pass with [`Detail::MomentsOnly`] and for the dtypes
/// counted by code (16 bits or fewer; F16 and BF16 only with
/// [`Detail::Full`]), two for the others, three times that for C64 (real part,
/// imaginary part, magnitude). Exact-quantile passes are not counted.
pub fn planned_work(dtype: Dtype, nbytes: u64, options: &StatsOptions) -> u64 {
    let by_code =
        dtype.bits() <= 16 && (options.full() || !matches!(dtype, Dtype::F16 | Dtype::BF16));
    let passes = match options.detail {
        Detail::MomentsOnly => 1,
        _ if by_code => 1,
        _ => 2,
    };
    let views = if dtype == Dtype::C64 { 3 } else { 1 };
    nbytes.saturating_mul(passes * views)
}

/// Statistics of the values of one tensor, whose header entry is `info` and
/// whose bytes are `bytes` (a slice of the mapped file). Adds the bytes it
/// reads to `progress` (see [`planned_work`]) without setting its total.
pub fn stats_of(
    info: &TensorInfo,
    bytes: &[u8],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<TensorStats, Cancelled> {
    cancel.check()?;
    let dtype = info.dtype();
    let (values, real, imag) = match dtype {
        Dtype::F32 => (
            float::stats(&float::F32View(bytes), options, cancel, progress)?,
            None,
            None,
        ),
        Dtype::F64 => (
            float::stats(&float::F64View(bytes), options, cancel, progress)?,
            None,
            None,
        ),
        Dtype::C64 => {
            let re = float::stats(
                &float::C64Part { bytes, imag: false },
                options,
                cancel,
                progress,
            )?;
            let im = float::stats(
                &float::C64Part { bytes, imag: true },
                options,
                cancel,
                progress,
            )?;
            let mag = float::stats(&float::C64Abs(bytes), options, cancel, progress)?;
            (mag, Some(Box::new(re)), Some(Box::new(im)))
        }
        Dtype::F16 | Dtype::BF16 if !options.full() => (
            float::stats(&float::HalfView { bytes, dtype }, options, cancel, progress)?,
            None,
            None,
        ),
        Dtype::I32 | Dtype::U32 | Dtype::I64 | Dtype::U64 => (
            ints::stats(dtype, bytes, options, cancel, progress)?,
            None,
            None,
        ),
        _ => (
            codes::stats(dtype, bytes, options, cancel, progress)?,
            None,
            None,
        ),
    };
    Ok(TensorStats {
        name: info.name().to_owned(),
        dtype,
        shape: info.shape().to_vec(),
        shard: None,
        values: values.with_ratio(),
        real: real.map(|r| Box::new(r.with_ratio())),
        imag: imag.map(|i| Box::new(i.with_ratio())),
        quant: None,
    })
}

/// Statistics of one tensor of a checkpoint. Checks first that its file has
/// not changed since it was mapped, and sets `progress`'s total.
pub fn tensor_stats(
    ck: &Checkpoint,
    tensor: TensorRef,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<TensorStats, StatsError> {
    let report = scan(ck, &[tensor], options, cancel, progress)?;
    report
        .tensors
        .into_iter()
        .next()
        .ok_or(StatsError::NoSuchTensor {
            shard: tensor.shard(),
            index: tensor.index(),
        })
}

/// Statistics of the tensors `selection` of a checkpoint (all of them:
/// `ck.tensors()`), computed in parallel, with a summary. Sets `progress`'s
/// total to the bytes it will read and adds to it as it goes; checks that
/// no file changed since it was mapped, before reading and after.
pub fn scan(
    ck: &Checkpoint,
    selection: &[TensorRef],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ScanReport, StatsError> {
    let mut tensors = Vec::with_capacity(selection.len());
    let summary = scan_each(ck, selection, options, cancel, progress, &mut |t| {
        tensors.push(t);
    })?;
    Ok(ScanReport { tensors, summary })
}

/// Tensors scanned together at most: their statistics are all that is
/// held at once, whatever the number of tensors.
const BATCH_TENSORS: usize = 1024;
/// Bytes of tensor data scanned together at most (a larger tensor makes a
/// batch of its own).
const BATCH_BYTES: u64 = 256 << 20;

/// [`scan`], handing each tensor's statistics to `each` in the order of
/// `selection` as soon as its batch is done, and returning the summary:
/// memory holds one batch of results, not one per tensor, so a checkpoint
/// of a million tensors streams. A batch whose file changed while it was
/// read is not handed on.
pub fn scan_each(
    ck: &Checkpoint,
    selection: &[TensorRef],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
    each: &mut dyn FnMut(TensorStats),
) -> Result<Summary, StatsError> {
    ck.check_files(selection)?;
    let bytes_of = |t: &TensorRef| ck.info(*t).map_or(0, crate::format::TensorInfo::nbytes);
    let total = selection
        .iter()
        .filter_map(|t| ck.info(*t))
        .map(|i| planned_work(i.dtype(), i.nbytes(), options))
        .fold(0u64, u64::saturating_add);
    progress.set_total(total);
    let mut summary =
        SummaryBuilder::new(selection.iter().map(bytes_of).fold(0, u64::saturating_add));
    // Remote bytes are fetched batch by batch: a batch is what the cache
    // holds for the scan at once.
    let batch_bytes = if ck.is_remote() {
        crate::source::remote::batch_bytes()
    } else {
        BATCH_BYTES
    };
    let mut rest = selection;
    while !rest.is_empty() {
        let len = crate::source::batch_len(rest, BATCH_TENSORS, batch_bytes, bytes_of);
        let (batch, next) = rest.split_at(len);
        rest = next;
        for t in scan_batch(ck, batch, options, cancel, progress)? {
            summary.add(&t);
            each(t);
        }
    }
    Ok(summary.finish())
}

/// The statistics of one batch, in order, after checking that no file of
/// the batch changed while it was read.
fn scan_batch(
    ck: &Checkpoint,
    batch: &[TensorRef],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Vec<TensorStats>, StatsError> {
    let _fetched = ck.fetch(batch, cancel, progress)?;
    let one = |t: TensorRef| -> Option<Result<TensorStats, Cancelled>> {
        let info = ck.info(t)?;
        Some(
            stats_of(info, ck.bytes(t), options, cancel, progress).map(|mut s| {
                if ck.is_sharded() {
                    s.shard = ck.shards().get(t.shard()).map(|sh| sh.name().to_owned());
                }
                s
            }),
        )
    };
    let mut tensors: Vec<TensorStats> = if batch.len() == 1 {
        // One tensor: its own chunks run in parallel; no hand-off to a pool.
        batch
            .iter()
            .filter_map(|&t| one(t))
            .collect::<Result<_, _>>()?
    } else {
        // Largest first, so that the last ones to finish are small; the
        // results go back to batch order.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| {
            std::cmp::Reverse(
                batch
                    .get(i)
                    .and_then(|t| ck.info(*t))
                    .map_or(0, crate::format::TensorInfo::nbytes),
            )
        });
        // Tiny tensors go to the pool 16 at a time (a hand-off costs more
        // than one of them). Large ones each on their own, so that one's
        // serial steps (deriving bins and quantiles from the counts,
        // selecting the kept keys) overlap the other's chunks.
        let bytes: u64 = batch
            .iter()
            .filter_map(|t| ck.info(*t))
            .map(crate::format::TensorInfo::nbytes)
            .fold(0, u64::saturating_add);
        let large = bytes / batch.len() as u64 >= 1 << 20;
        let mut results: Vec<(usize, TensorStats)> = order
            .par_iter()
            .with_min_len(if large { 1 } else { 16 })
            .filter_map(|&i| one(*batch.get(i)?).map(|r| r.map(|s| (i, s))))
            .collect::<Result<_, Cancelled>>()?;
        results.sort_unstable_by_key(|(i, _)| *i);
        results.into_iter().map(|(_, s)| s).collect()
    };
    // Figures over a file that changed while being read are not figures.
    ck.check_unchanged(batch)?;
    tensors.shrink_to_fit();
    Ok(tensors)
}

/// The summary of a scan, built tensor by tensor in scan order.
struct SummaryBuilder {
    summary: Summary,
    /// The largest |x| so far as f64 (the first tensor holding it wins).
    best: f64,
}

impl SummaryBuilder {
    fn new(data_bytes: u64) -> Self {
        Self {
            summary: Summary {
                tensor_count: 0,
                element_count: 0,
                data_bytes,
                nan_count: 0,
                inf_count: 0,
                nonfinite_tensors: Vec::new(),
                all_zero_tensors: Vec::new(),
                max_abs: None,
                max_abs_tensor: None,
            },
            best: f64::NEG_INFINITY,
        }
    }

    fn add(&mut self, t: &TensorStats) {
        let s = &mut self.summary;
        let v = &t.values;
        s.tensor_count += 1;
        s.element_count = s.element_count.saturating_add(v.count);
        let parts: Vec<&ValueStats> = match (&t.real, &t.imag) {
            (Some(re), Some(im)) => vec![re, im],
            _ => vec![v],
        };
        let nan: u64 = parts.iter().map(|p| p.nan).sum();
        let inf: u64 = parts.iter().map(|p| p.pos_inf + p.neg_inf).sum();
        s.nan_count = s.nan_count.saturating_add(nan);
        s.inf_count = s.inf_count.saturating_add(inf);
        if nan + inf > 0 {
            s.nonfinite_tensors.push(t.name.clone());
        }
        if v.count > 0 && v.zeros == v.count {
            s.all_zero_tensors.push(t.name.clone());
        }
        for m in [v.min, v.max].into_iter().flatten() {
            let a = m.abs();
            if a.to_f64() > self.best {
                self.best = a.to_f64();
                s.max_abs = Some(a);
                s.max_abs_tensor = Some(t.name.clone());
            }
        }
    }

    fn finish(self) -> Summary {
        self.summary
    }
}

/// Runs `fold` over the element ranges of `chunk_elems` elements that
/// cover `0..len`, in parallel, checking `cancel` before each chunk, and
/// merges the per-thread accumulators.
pub(crate) fn par_chunks<A, I, F, M>(
    len: u64,
    chunk_elems: u64,
    cancel: &CancelToken,
    identity: I,
    fold: F,
    merge: M,
) -> Result<A, Cancelled>
where
    A: Send,
    I: Fn() -> A + Sync + Send,
    F: Fn(&mut A, Range<u64>) + Sync + Send,
    M: Fn(A, A) -> A + Sync + Send,
{
    let chunk = chunk_elems.max(1);
    let count = usize::try_from(len.div_ceil(chunk)).unwrap_or(usize::MAX);
    if count <= 1 {
        cancel.check()?;
        let mut acc = identity();
        if len > 0 {
            fold(&mut acc, 0..len);
        }
        return Ok(acc);
    }
    (0..count)
        .into_par_iter()
        .try_fold(&identity, |mut acc, i| {
            cancel.check()?;
            let start = (i as u64).saturating_mul(chunk);
            fold(&mut acc, start..start.saturating_add(chunk).min(len));
            Ok(acc)
        })
        .try_reduce(&identity, |a, b| Ok(merge(a, b)))
}

/// A finite f64, or `None`.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// The smallest positive normal value of a float dtype (values below it,
/// but not zero, are subnormal); `None` for dtypes without subnormals.
pub fn smallest_normal(dtype: Dtype) -> Option<f64> {
    let e = match dtype {
        Dtype::F64 => -1022,
        Dtype::F32 | Dtype::BF16 | Dtype::C64 => -126,
        Dtype::F16 | Dtype::F8E5M2 => -14,
        Dtype::F8E4M3 => -6,
        Dtype::F8E4M3Fnuz => -7,
        Dtype::F8E5M2Fnuz => -15,
        Dtype::F6E3M2 => -2,
        Dtype::F6E2M3 | Dtype::F4 => 0,
        _ => return None,
    };
    Some(moments::ldexp(1.0, e))
}

/// Whether values of `dtype` are reported as exact integers.
fn is_integer(dtype: Dtype) -> bool {
    matches!(
        dtype.kind(),
        DtypeKind::Bool | DtypeKind::Signed | DtypeKind::Unsigned
    )
}

/// Builds the log2 histogram from `(exponent, count)` pairs in any order.
fn log2_histogram(
    pairs: impl Iterator<Item = (i32, u64)>,
    zeros: u64,
    subnormals: u64,
) -> Log2Histogram {
    let pairs: Vec<(i32, u64)> = pairs.filter(|&(_, c)| c > 0).collect();
    let lo = pairs.iter().map(|p| p.0).min();
    let hi = pairs.iter().map(|p| p.0).max();
    let (exponents, counts) = match (lo, hi) {
        (Some(lo), Some(hi)) => {
            let exponents: Vec<i32> = (lo..=hi).collect();
            let mut counts = vec![0u64; exponents.len()];
            for (e, c) in pairs {
                if let Some(slot) = usize::try_from(e - lo).ok().and_then(|i| counts.get_mut(i)) {
                    *slot += c;
                }
            }
            (exponents, counts)
        }
        _ => (Vec::new(), Vec::new()),
    };
    Log2Histogram {
        exponents,
        counts,
        zeros,
        subnormals,
    }
}

/// An empty histogram (no finite value).
fn empty_histogram() -> Histogram {
    Histogram {
        edges: Vec::new(),
        counts: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_serialize_exactly() {
        let j = |s: Scalar| serde_json::to_string(&s).expect("json");
        assert_eq!(j(Scalar::UInt(u64::MAX)), "18446744073709551615");
        assert_eq!(j(Scalar::Int(i64::MIN)), "-9223372036854775808");
        assert_eq!(j(Scalar::Float(f64::NAN)), "null");
        assert_eq!(j(Scalar::float(-0.0)), "0.0");
        assert_eq!(Scalar::Int(i64::MIN).abs(), Scalar::UInt(1 << 63));
        assert_eq!(Scalar::int(-5), Scalar::Int(-5));
        assert_eq!(Scalar::int(i128::from(u64::MAX)), Scalar::UInt(u64::MAX));
    }

    #[test]
    fn smallest_normals_match_the_code_tables() {
        use crate::dtype::decode::code_table;
        for dtype in Dtype::ALL.into_iter().filter(|d| d.is_small_float()) {
            let table = code_table(dtype).expect("small float");
            let tiny = smallest_normal(dtype).unwrap_or(0.0);
            let subnormals = table
                .iter()
                .filter(|v| v.is_finite() && **v != 0.0 && v.abs() < tiny)
                .count();
            let mantissa_bits = match dtype {
                Dtype::F4 => 1,
                Dtype::F6E2M3 | Dtype::F8E4M3 | Dtype::F8E4M3Fnuz => 3,
                Dtype::F6E3M2 | Dtype::F8E5M2 | Dtype::F8E5M2Fnuz => 2,
                _ => 0,
            };
            assert_eq!(subnormals, 2 * ((1 << mantissa_bits) - 1), "{dtype}");
            if tiny > 0.0 {
                // The smallest normal is itself a value of the dtype.
                assert!(table.contains(&tiny), "{dtype}");
            }
        }
    }

    #[test]
    fn chunks_cover_the_range_once() {
        let cancel = CancelToken::new();
        let total = par_chunks(
            1000,
            7,
            &cancel,
            || 0u64,
            |acc, r| *acc += r.end - r.start,
            |a, b| a + b,
        )
        .expect("not cancelled");
        assert_eq!(total, 1000);
        cancel.cancel();
        assert!(par_chunks(1000, 7, &cancel, || 0u64, |_, _| {}, |a, b| a + b).is_err());
    }

    #[test]
    fn log2_bins_are_consecutive() {
        let h = log2_histogram([(3, 2), (-1, 1), (0, 0)].into_iter(), 4, 5);
        assert_eq!(h.exponents, [-1, 0, 1, 2, 3]);
        assert_eq!(h.counts, [1, 0, 0, 0, 2]);
        assert_eq!((h.zeros, h.subnormals), (4, 5));
    }
}
