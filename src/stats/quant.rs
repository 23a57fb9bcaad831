//! Statistics of a quantized weight's true values (a logical tensor of
//! [`crate::quant`]), and what only quantization has: the histogram of
//! its integer codes, the share of elements at the extreme codes, and the
//! distribution of its scales.
//!
//! The values are decoded by [`Dequantizer`] block by block as the float
//! passes ask for them, so the figures and their exact quantiles follow
//! the same rules as for a stored F32 tensor, and memory does not grow
//! with the tensor.

use std::ops::Range;
use std::sync::Mutex;

use serde::Serialize;

use super::float::{self, View};
use super::simd::pair_kernels;
use super::{CHUNK_BYTES, Histogram, StatsError, StatsOptions, TensorStats, par_chunks, stats_of};
use crate::dtype::Dtype;
use crate::format::{Checkpoint, TensorInfo};
use crate::jobs::{CancelToken, Progress};
use crate::quant::{Counts, Dequantizer, Keep, LogicalTensor};

/// The decoded values of a logical tensor, as the float passes read them;
/// the codes of the elements its pairs gave (by code less the low end of
/// [`Dequantizer::code_range`]), counted in the pass that asked for them.
struct DequantView<'a> {
    dq: &'a Dequantizer<'a>,
    codes: Mutex<Vec<u64>>,
}

impl<'a> DequantView<'a> {
    fn new(dq: &'a Dequantizer<'a>) -> Self {
        Self {
            dq,
            codes: Mutex::new(vec![0; code_width(dq)]),
        }
    }

    /// The codes the passes counted, when they counted every element's
    /// (a pass over the pairs of the whole tensor).
    fn counted_codes(self) -> Option<CodeCounts> {
        let counts = self.codes.into_inner().ok()?;
        (counts.iter().sum::<u64>() == self.dq.len() && self.dq.has_codes())
            .then(|| code_histogram(self.dq, counts))
    }
}

/// Codes a logical tensor's elements can have.
fn code_width(dq: &Dequantizer<'_>) -> usize {
    let (lo, hi) = dq.code_range();
    usize::try_from(i64::from(hi) - i64::from(lo) + 1).unwrap_or(1)
}

/// The histogram of a logical tensor's codes, from its counts by code
/// less the low end of [`Dequantizer::code_range`].
fn code_histogram(dq: &Dequantizer<'_>, counts: Vec<u64>) -> CodeCounts {
    let (lo, hi) = dq.code_range();
    CodeCounts {
        values: (i64::from(lo)..=i64::from(hi)).collect(),
        counts,
        code_values: dq.code_values(),
    }
}

/// The smallest normal of the dtype a logical tensor's values are in (its
/// subnormals are counted as that dtype's).
fn value_normal(dq: &Dequantizer<'_>) -> f64 {
    super::smallest_normal(dq.tensor().value_dtype()).unwrap_or(f64::from(f32::MIN_POSITIVE))
}

impl View for DequantView<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        self.dq.len()
    }
    fn element_bytes(&self) -> u64 {
        4
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        self.dq.values(first, out)
    }
    fn smallest_normal(&self) -> f64 {
        value_normal(self.dq)
    }
    fn pairs(
        &self,
        range: Range<u64>,
        keep: Option<Keep<'_>>,
        codes: bool,
        f: &mut dyn FnMut(&[f32], &[u32]),
    ) -> bool {
        let (first, len) = (range.start, range.end - range.start);
        if !codes || !self.dq.has_codes() {
            return self
                .dq
                .value_pairs(first, len, keep, &pair_kernels(), None, f);
        }
        let mut mine = vec![0u64; code_width(self.dq)];
        let paired = self
            .dq
            .value_pairs(first, len, keep, &pair_kernels(), Some(&mut mine), f);
        if let Ok(mut all) = self.codes.lock() {
            for (x, y) in all.iter_mut().zip(mine) {
                *x += y;
            }
        }
        paired
    }
}

/// How many elements hold each integer code.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CodeCounts {
    /// Every code the scheme can store, ascending (the raw bits for float
    /// codes).
    pub values: Vec<i64>,
    /// Elements per code.
    pub counts: Vec<u64>,
    /// For float codes, the value each code stands for (before scaling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_values: Option<Vec<f64>>,
}

impl CodeCounts {
    /// No code histogram (a layout without one integer code per element).
    fn none() -> Self {
        Self {
            values: Vec::new(),
            counts: Vec::new(),
            code_values: None,
        }
    }
}

/// The distribution of a logical tensor's scales.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleStats {
    /// The scale tensor.
    pub tensor: String,
    /// How many scales.
    pub count: u64,
    /// Smallest finite scale.
    pub min: Option<f64>,
    /// Largest finite scale.
    pub max: Option<f64>,
    /// Linear histogram of the finite scales.
    pub histogram: Option<Histogram>,
}

/// What only quantization has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuantStats {
    /// The histogram of codes: clipping shows at the ends, unused codes as
    /// zeros.
    pub codes: CodeCounts,
    /// Share of elements at the extreme codes (the lowest or highest
    /// integer code; for float codes, the largest magnitude).
    pub at_extremes: f64,
    /// The scales' distribution.
    pub scales: Option<ScaleStats>,
    /// The zero points' distribution, for schemes that store them:
    /// how many (group, output column) pairs hold each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zeros: Option<ZeroCounts>,
}

/// How many (group, column) pairs hold each zero point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZeroCounts {
    /// The zero points present, ascending.
    pub values: Vec<i64>,
    /// Pairs per value.
    pub counts: Vec<u64>,
}

/// Statistics of a logical tensor: the values' figures (as a tensor of
/// the dtype the library computes in, named by its logical name), its
/// scheme, and the quantization's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogicalStats {
    /// The figures of the decoded values.
    #[serde(flatten)]
    pub stats: TensorStats,
    /// The scheme's identifier (`gptq`, `nvfp4`, …).
    pub scheme: &'static str,
    /// What a table shows for it ("GPTQ int4 g128").
    pub label: String,
    /// Codes, extremes and scales.
    pub quant: QuantStats,
}

/// Progress units [`logical_stats`] reports for `lt`.
pub fn planned_logical_work(lt: &LogicalTensor, options: &StatsOptions) -> u64 {
    super::planned_work(Dtype::F32, lt.numel().saturating_mul(4), options)
        .saturating_add(lt.numel())
}

/// Statistics of a decoded logical tensor of `ck`. `None` when it is not
/// decoded. Checks that its parts' files did not change, before and after.
pub fn logical_stats(
    ck: &Checkpoint,
    lt: &LogicalTensor,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<LogicalStats>, StatsError> {
    let Some(dq) = Dequantizer::new(ck, lt) else {
        return Ok(None);
    };
    let parts = dq.parts();
    ck.check_files(&parts)?;
    let _fetched = ck.fetch(&parts, cancel, progress)?;
    // Values that are all of a 16-bit dtype (the library's F16 or BF16,
    // or F32 values that happen to be, as every MX format's) are counted by
    // code in one pass, codes beside them; every figure follows exactly.
    let (values, codes) = if let Some((dtype, dense, codes)) = count16(&dq, cancel, progress)? {
        (
            super::codes::stats_from_counts(dtype, &dense, options),
            codes,
        )
    } else {
        let view = DequantView::new(&dq);
        let values = float::stats(&view, options, cancel, progress)?.with_ratio();
        // The codes the float passes counted beside the values (GGUF's
        // table types), else a pass of their own.
        let codes = match view.counted_codes() {
            Some(codes) => codes,
            None if dq.has_codes() => code_counts(&dq, cancel, progress)?,
            None => CodeCounts::none(),
        };
        (values, codes)
    };
    let codes = if dq.has_codes() {
        codes
    } else {
        CodeCounts::none()
    };
    let scales = scale_stats(ck, &dq, options, cancel)?;
    ck.check_unchanged(&parts)?;
    let total: u64 = codes.counts.iter().sum();
    let extremes = extreme_codes(&dq, &codes);
    let at = codes
        .values
        .iter()
        .zip(&codes.counts)
        .filter(|(v, _)| extremes.contains(v))
        .map(|(_, c)| *c)
        .sum::<u64>();
    Ok(Some(LogicalStats {
        stats: TensorStats {
            name: lt.name().to_owned(),
            dtype: lt.value_dtype(),
            shape: lt.shape().to_vec(),
            shard: None,
            values,
            real: None,
            imag: None,
            quant: None,
        },
        scheme: lt.scheme().id(),
        label: lt.label().to_owned(),
        quant: QuantStats {
            codes,
            at_extremes: if total == 0 {
                0.0
            } else {
                at as f64 / total as f64
            },
            scales,
            zeros: dq.zero_counts().map(|z| ZeroCounts {
                values: z.iter().map(|(v, _)| *v).collect(),
                counts: z.iter().map(|(_, c)| *c).collect(),
            }),
        },
    }))
}

/// The extreme codes: the ends of an integer range, or the codes of
/// largest magnitude of a float table.
fn extreme_codes(dq: &Dequantizer<'_>, codes: &CodeCounts) -> Vec<i64> {
    if let Some(vals) = &codes.code_values {
        let top = vals
            .iter()
            .filter(|v| v.is_finite())
            .fold(0f64, |a, v| a.max(v.abs()));
        codes
            .values
            .iter()
            .zip(vals)
            .filter(|(_, v)| v.abs() == top && top > 0.0)
            .map(|(c, _)| *c)
            .collect()
    } else {
        let (lo, hi) = dq.code_range();
        vec![i64::from(lo), i64::from(hi)]
    }
}

/// One pass over the decoded values counting their 16-bit codes (in the
/// value dtype, or in BF16 for F32 values) and the integer codes beside
/// them; `None` when a value is not of that 16-bit dtype (the float passes
/// then run).
fn count16(
    dq: &Dequantizer<'_>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<(Dtype, Vec<u64>, CodeCounts)>, StatsError> {
    let dtype = match dq.tensor().value_dtype() {
        Dtype::F16 => Dtype::F16,
        Dtype::BF16 | Dtype::F32 => Dtype::BF16,
        _ => return Ok(None),
    };
    let counts = if let Some(units) = dq.storage_units() {
        // Packed across the logical rows: counted in stored order, a group
        // of every column at a time.
        let per_unit = dq.len() / units.max(1);
        par_chunks(
            units,
            1,
            cancel,
            || Counts::new(dq, dtype),
            |acc, range: Range<u64>| {
                for g in range {
                    if !acc.failed {
                        dq.count_unit(g, acc);
                    }
                    progress.add(per_unit * 8);
                }
            },
            |mut a, b| {
                a.merge(&b);
                a
            },
        )?
    } else {
        let chunk = (CHUNK_BYTES / 4).max(1);
        par_chunks(
            dq.len(),
            chunk,
            cancel,
            || Counts::new(dq, dtype),
            |acc, range: Range<u64>| {
                if !acc.failed {
                    dq.count16(range.start, range.end - range.start, acc);
                }
                progress.add((range.end - range.start) * 8);
            },
            |mut a, b| {
                a.merge(&b);
                a
            },
        )?
    };
    let mut counts = counts;
    dq.finish_counts(&mut counts);
    if counts.failed {
        return Ok(None);
    }
    let (lo, hi) = dq.code_range();
    Ok(Some((
        dtype,
        counts.dense,
        CodeCounts {
            values: (i64::from(lo)..=i64::from(hi)).collect(),
            counts: counts.codes,
            code_values: dq.code_values(),
        },
    )))
}

/// Counts every code, in parallel chunks.
fn code_counts(
    dq: &Dequantizer<'_>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<CodeCounts, StatsError> {
    let (lo, _) = dq.code_range();
    let width = code_width(dq);
    let chunk = (CHUNK_BYTES / 4).max(1);
    let counts = par_chunks(
        dq.len(),
        chunk,
        cancel,
        || vec![0u64; width],
        |acc, range: Range<u64>| {
            // GGUF's block types count their codes without their values.
            if dq.count_codes(range.start, range.end - range.start, acc) {
                progress.add(range.end - range.start);
                return;
            }
            let mut vals = [0f32; 1024];
            let mut cs = [0i32; 1024];
            let mut at = range.start;
            while at < range.end {
                let want = usize::try_from(range.end - at).unwrap_or(1024).min(1024);
                let got = dq.values_and_codes(at, &mut vals[..want], &mut cs[..want]);
                if got == 0 {
                    break;
                }
                for &c in &cs[..got] {
                    if let Some(slot) = usize::try_from(i64::from(c) - i64::from(lo))
                        .ok()
                        .and_then(|i| acc.get_mut(i))
                    {
                        *slot += 1;
                    }
                }
                at += got as u64;
            }
            progress.add(range.end - range.start);
        },
        |mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
            a
        },
    )?;
    Ok(code_histogram(dq, counts))
}

/// The distribution of the scales, read as their dtype (U8 E8M0 scales as
/// powers of two).
fn scale_stats(
    ck: &Checkpoint,
    dq: &Dequantizer<'_>,
    options: &StatsOptions,
    cancel: &CancelToken,
) -> Result<Option<ScaleStats>, StatsError> {
    // GGUF's scales are inside its blocks: the distribution of each
    // block's (NVFP4: sub-block's) scale, under the tensor's own name.
    if let Some(count) = dq.block_scale_count() {
        let s = float::stats(
            &BlockScales { dq, count },
            options,
            cancel,
            &Progress::new(),
        )?;
        return Ok(Some(ScaleStats {
            tensor: dq.tensor().name().to_owned(),
            count: s.count,
            min: s.min.map(super::Scalar::to_f64),
            max: s.max.map(super::Scalar::to_f64),
            histogram: s.histogram,
        }));
    }
    let Some((t, dtype)) = dq.scale_part() else {
        return Ok(None);
    };
    let Some(info) = ck.info(t) else {
        return Ok(None);
    };
    // Double-quantized absmax: the distribution of the decoded per-block
    // absmax, not of their codes.
    if let Some((blocks, blocksize)) = dq.nested_blocks() {
        let view = NestedAbsmax {
            dq,
            blocks,
            blocksize,
        };
        let s = float::stats(&view, options, cancel, &Progress::new())?;
        return Ok(Some(ScaleStats {
            tensor: info.name().to_owned(),
            count: s.count,
            min: s.min.map(super::Scalar::to_f64),
            max: s.max.map(super::Scalar::to_f64),
            histogram: s.histogram,
        }));
    }
    let Some(as_read) = TensorInfo::new(info.name().to_owned(), dtype, info.shape().to_vec(), 0)
        .filter(|i| i.nbytes() == info.nbytes())
    else {
        return Ok(None);
    };
    let s = stats_of(&as_read, ck.bytes(t), options, cancel, &Progress::new())?;
    Ok(Some(ScaleStats {
        tensor: info.name().to_owned(),
        count: s.values.count,
        min: s.values.min.map(super::Scalar::to_f64),
        max: s.values.max.map(super::Scalar::to_f64),
        histogram: s.values.histogram,
    }))
}

/// The decoded per-block absmax of double-quantized bitsandbytes.
struct NestedAbsmax<'a> {
    dq: &'a Dequantizer<'a>,
    blocks: u64,
    blocksize: u64,
}

impl View for NestedAbsmax<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        self.blocks
    }
    fn element_bytes(&self) -> u64 {
        1
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        let n = usize::try_from(self.blocks.saturating_sub(first))
            .unwrap_or(usize::MAX)
            .min(out.len());
        for (i, o) in out.iter_mut().take(n).enumerate() {
            *o = self
                .dq
                .scale_at((first + i as u64) * self.blocksize)
                .unwrap_or(0.0) as f32;
        }
        n
    }
    fn smallest_normal(&self) -> f64 {
        f64::from(f32::MIN_POSITIVE)
    }
}

/// The scales stored inside GGUF's blocks.
struct BlockScales<'a> {
    dq: &'a Dequantizer<'a>,
    count: u64,
}

impl View for BlockScales<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        self.count
    }
    fn element_bytes(&self) -> u64 {
        2
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        self.dq.block_scales(first, out)
    }
    fn smallest_normal(&self) -> f64 {
        f64::from(f32::MIN_POSITIVE)
    }
}

/// A logical tensor that is not decoded: what `stats --dequant` gives in
/// place of its parts (no values: its parts hold packed codes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Undecoded {
    /// Its logical name.
    pub name: String,
    /// The scheme's identifier.
    pub scheme: &'static str,
    /// What a table shows for it.
    pub label: String,
    /// `recognized` or `inconsistent`.
    pub status: &'static str,
    /// Why, with the evidence.
    pub message: String,
}

/// One entry of a dequantized scan, in file order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Entry {
    /// A stored tensor that is no part of a quantized weight.
    Plain(Box<TensorStats>),
    /// A decoded logical tensor, in place of its parts.
    Logical(Box<LogicalStats>),
    /// A logical tensor that is not decoded, in place of its parts.
    Undecoded(Undecoded),
}

/// [`super::scan_each`] with every quantized weight seen as its logical
/// tensor: each part of `selection` that belongs to a logical tensor of
/// `q` gives that logical tensor once (at its first part), the others
/// their own statistics. The summary counts the entries with values.
pub fn scan_dequant_each(
    ck: &Checkpoint,
    q: &crate::quant::Quantization,
    selection: &[crate::format::TensorRef],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
    each: &mut dyn FnMut(Entry),
) -> Result<super::Summary, StatsError> {
    ck.check_files(selection)?;
    let mut seen = vec![false; q.tensors().len()];
    let mut total = 0u64;
    let mut bytes = 0u64;
    for t in selection {
        match q.owner_index(*t) {
            Some(i) => {
                if let (Some(false), Some(lt)) = (seen.get(i).copied(), q.tensors().get(i)) {
                    seen[i] = true;
                    total = total.saturating_add(planned_logical_work(lt, options));
                }
            }
            None => {
                if let Some(info) = ck.info(*t) {
                    total = total.saturating_add(super::planned_work(
                        info.dtype(),
                        info.nbytes(),
                        options,
                    ));
                }
            }
        }
        bytes = bytes.saturating_add(ck.info(*t).map_or(0, TensorInfo::nbytes));
    }
    progress.set_total(total);
    seen.fill(false);
    let mut summary = super::SummaryBuilder::new(bytes);
    let mut plain: Vec<crate::format::TensorRef> = Vec::new();
    let flush = |plain: &mut Vec<crate::format::TensorRef>,
                 summary: &mut super::SummaryBuilder,
                 each: &mut dyn FnMut(Entry)|
     -> Result<(), StatsError> {
        for batch in plain.chunks(super::BATCH_TENSORS) {
            for t in super::scan_batch(ck, batch, options, cancel, progress)? {
                summary.add(&t);
                each(Entry::Plain(Box::new(t)));
            }
        }
        plain.clear();
        Ok(())
    };
    for t in selection {
        let Some(i) = q.owner_index(*t) else {
            plain.push(*t);
            if plain.len() >= super::BATCH_TENSORS {
                flush(&mut plain, &mut summary, each)?;
            }
            continue;
        };
        if seen.get(i).copied().unwrap_or(true) {
            continue;
        }
        seen[i] = true;
        flush(&mut plain, &mut summary, each)?;
        let Some(lt) = q.tensors().get(i) else {
            continue;
        };
        match logical_stats(ck, lt, options, cancel, progress)? {
            Some(l) => {
                summary.add(&l.stats);
                each(Entry::Logical(Box::new(l)));
            }
            None => each(Entry::Undecoded(Undecoded {
                name: lt.name().to_owned(),
                scheme: lt.scheme().id(),
                label: lt.label().to_owned(),
                status: lt.status().id(),
                message: lt.message().to_owned(),
            })),
        }
    }
    flush(&mut plain, &mut summary, each)?;
    Ok(summary.finish())
}

#[cfg(test)]
mod tests {
    use super::{CodeCounts, DequantView, code_counts, float};
    use crate::dtype::Dtype;
    use crate::format::Checkpoint;
    use crate::jobs::{CancelToken, Progress};
    use crate::quant::{Dequantizer, code16, detect, gguf_test_file};
    use crate::stats::float::SMALL;
    use crate::stats::{Detail, StatsOptions};

    /// GGUF's table types above the size that is sorted: the codes the
    /// float passes count beside the pairs (the full scan's first pass, or
    /// the moments' one) are those a pass of their own counts, and the
    /// passes that see elements more than once or only some of them count
    /// none.
    #[test]
    fn table_types_count_their_codes_in_the_first_pass() {
        let ids = [2, 3, 10, 12, 20, 23, 35, 39, 40];
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.gguf");
        std::fs::write(&path, gguf_test_file(&ids, 600)).expect("write");
        let ck = Checkpoint::open(&path).expect("opens");
        let q = detect(&ck).expect("logical tensors");
        let (cancel, progress) = (CancelToken::new(), Progress::new());
        for lt in q.tensors() {
            let dq = Dequantizer::new(&ck, lt).expect("decoded");
            assert!(dq.len() > SMALL, "{}", lt.name());
            let alone = code_counts(&dq, &cancel, &progress).expect("counted");
            for detail in [Detail::Full, Detail::MomentsOnly, Detail::Outliers] {
                let options = StatsOptions {
                    detail,
                    ..StatsOptions::default()
                };
                let view = DequantView::new(&dq);
                float::stats(&view, &options, &cancel, &progress).expect("stats");
                let counted: Option<CodeCounts> = view.counted_codes();
                assert_eq!(counted.as_ref(), Some(&alone), "{} {detail:?}", lt.name());
            }
        }
    }

    #[test]
    fn sixteen_bit_codes_are_exact_or_refused() {
        for bits in 0..=u16::MAX {
            let h = half::f16::from_bits(bits);
            if h.is_nan() {
                continue;
            }
            assert_eq!(
                code16(Dtype::F16, h.to_f32()),
                Some(bits),
                "f16 {bits:#06x}"
            );
            let b = half::bf16::from_bits(bits);
            if !b.is_nan() {
                assert_eq!(
                    code16(Dtype::BF16, b.to_f32()),
                    Some(bits),
                    "bf16 {bits:#06x}"
                );
            }
        }
        assert_eq!(code16(Dtype::F16, 1.0 + f32::EPSILON), None);
        assert_eq!(code16(Dtype::BF16, 1.0 + f32::EPSILON), None);
        assert_eq!(code16(Dtype::F16, 1e6), None);
    }
}
