//! Values that come with counts: `(value, count)` pairs, as a quantized
//! weight's decoder hands them (a group of 32 elements under one scale
//! holds at most 16 values, each computed once, with how many elements
//! hold it). Every figure is the one of the elements themselves: a pair
//! stands for `count` copies of its value.
//!
//! [`scan_pairs`] gathers the specials, range and f64 sums of a batch of
//! pairs lane by lane (the weighted [`super::F32Lanes`]); [`pairs_block`]
//! turns them into [`Specials`] and [`Moments`], with the batch's
//! non-finite values split off first when it has any; [`count_pair_prefixes`]
//! counts the pairs' key prefixes. All are plain loops that the compiler
//! vectorises; [`crate::stats::simd`] compiles them again for AVX2 and
//! AVX-512, with the same results.

use super::moments::lane_total;
use super::prefix::{Keyed, MARK_WORDS, Tally, marked};
use super::{Specials, fold_range};
use crate::stats::moments::Moments;

/// Pairs per batch at most: the lanes' sums stay accurate and a batch's
/// counts (at most 2^20 each, as every caller's) stay below 2^32.
const PAIRS: usize = 2048;

/// What [`scan_pairs`] gathers over whole groups of eight pairs, lane by
/// lane (lane `j` sees the pairs `8·i + j`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PairLanes {
    /// Elements (the counts summed).
    pub n: [u32; 8],
    /// Elements whose magnitude bits are below `tiny_bits` (zeros
    /// included).
    pub tiny: [u32; 8],
    /// Elements of ±0.
    pub zero: [u32; 8],
    /// Smallest value of a pair that has elements.
    pub min: [f32; 8],
    /// Largest value of a pair that has elements.
    pub max: [f32; 8],
    /// Σ count·x.
    pub sum: [f64; 8],
    /// Σ count·|x|.
    pub abs: [f64; 8],
    /// Σ count·(x − x₀)².
    pub sq: [f64; 8],
}

impl PairLanes {
    /// Nothing seen yet.
    pub const EMPTY: PairLanes = PairLanes {
        n: [0; 8],
        tiny: [0; 8],
        zero: [0; 8],
        min: [f32::INFINITY; 8],
        max: [f32::NEG_INFINITY; 8],
        sum: [0.0; 8],
        abs: [0.0; 8],
        sq: [0.0; 8],
    };

    /// Adds `c` copies of `x` to lane `j`. A pair of no elements counts as
    /// `x₀` with weight 0 (its value may be NaN, which a zero weight would
    /// not cancel). The selects are the x86 min/max instructions'.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn add(&mut self, j: usize, x: f32, c: u32, tiny_bits: u32, x0: f32) {
        let x = if c == 0 { x0 } else { x };
        let magnitude = x.to_bits() & 0x7fff_ffff;
        self.n[j] += c;
        self.tiny[j] += if magnitude < tiny_bits { c } else { 0 };
        self.zero[j] += if magnitude == 0 { c } else { 0 };
        self.min[j] = if x < self.min[j] { x } else { self.min[j] };
        self.max[j] = if x > self.max[j] { x } else { self.max[j] };
        let (wide, weight) = (f64::from(x), f64::from(c));
        self.sum[j] += weight * wide;
        self.abs[j] += weight * wide.abs();
        let d = wide - f64::from(x0);
        self.sq[j] += weight * (d * d);
    }
}

/// The weighted lanes of whole groups of eight pairs (`vals` and `counts`
/// of one length, a multiple of eight), about `x0`, a finite value.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn scan_pairs(vals: &[f32], counts: &[u32], tiny_bits: u32, x0: f32) -> PairLanes {
    let mut l = PairLanes::EMPTY;
    let (vs, _) = vals.as_chunks::<8>();
    let (cs, _) = counts.as_chunks::<8>();
    for (v, c) in vs.iter().zip(cs) {
        for j in 0..8 {
            l.add(j, v[j], c[j], tiny_bits, x0);
        }
    }
    l
}

/// A scan of whole groups of eight pairs: [`scan_pairs`] or a copy of it
/// compiled for wider vectors.
pub(crate) type PairScan = fn(&[f32], &[u32], u32, f32) -> PairLanes;

/// Specials, range and moments of the elements a batch of at most
/// [`PAIRS`] pairs stands for (`vals[i]` held by `counts[i]` elements).
/// Values whose magnitude bits are below `tiny_bits` are subnormal (or
/// zero).
pub(crate) fn pairs_block(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    scan: PairScan,
) -> (Specials, Moments) {
    pairs_block_with(vals, counts, tiny_bits, scan, |v, c, x0| {
        let whole = v.len() / 8 * 8;
        x0.map(|x0| scan(&v[..whole], &c[..whole], tiny_bits, x0))
    })
}

/// [`pairs_block`], and every pair's key prefix counted into `tally` by
/// its count, in `scan_count`'s one loop (`idx` as in
/// [`count_pair_prefixes`]).
pub(crate) fn pairs_block_counting(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    (scan, scan_count): (PairScan, PairScanCount),
    idx: &mut [u32],
    tally: &mut Tally<'_>,
) -> (Specials, Moments) {
    pairs_block_with(vals, counts, tiny_bits, scan, |v, c, x0| {
        if let Some(x0) = x0 {
            Some(scan_count(v, c, tiny_bits, x0, idx, tally))
        } else {
            count_pair_prefixes(v, c, idx, tally);
            None
        }
    })
}

/// [`pairs_block`] with the scan of the batch's whole groups of eight
/// made by `first` (given the batch and its first finite value; `None`
/// when there is none).
fn pairs_block_with(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    scan: PairScan,
    first: impl FnOnce(&[f32], &[u32], Option<f32>) -> Option<PairLanes>,
) -> (Specials, Moments) {
    let len = vals.len().min(counts.len());
    let (vals, counts) = (&vals[..len], &counts[..len]);
    let x0 = vals
        .iter()
        .zip(counts)
        .find(|(v, c)| **c > 0 && v.is_finite())
        .map(|(v, _)| *v);
    let (Some(x0), Some(mut l)) = (x0, first(vals, counts, x0)) else {
        // No finite element: the specials alone.
        return (specials_only(vals, counts), Moments::default());
    };
    let whole = len / 8 * 8;
    for (&v, &c) in vals[whole..].iter().zip(&counts[whole..]) {
        l.add(0, v, c, tiny_bits, x0);
    }
    let sum = lane_total(l.sum);
    // Values of f32 times counts below 2^32 cannot overflow a batch's f64
    // sum: a sum that is not finite means a NaN or an infinity is there.
    if !sum.is_finite() {
        return split_pairs(vals, counts, tiny_bits, scan);
    }
    let (abs_sum, sum_d2) = (lane_total(l.abs), lane_total(l.sq));
    let n: u64 = l.n.iter().map(|&x| u64::from(x)).sum();
    let tiny: u64 = l.tiny.iter().map(|&x| u64::from(x)).sum();
    let zero: u64 = l.zero.iter().map(|&x| u64::from(x)).sum();
    let (lo, hi) = fold_range(l.min, l.max);
    let sp = Specials {
        zeros: zero,
        subnormals: tiny.saturating_sub(zero),
        min: f64::from(lo),
        max: f64::from(hi),
        ..Specials::default()
    };
    let x0 = f64::from(x0);
    let sum_d = sum - n as f64 * x0;
    (
        sp,
        Moments::from_block(n, 0, x0, [sum, abs_sum, sum_d, sum_d2]),
    )
}

/// The NaN and ±Inf elements of a batch.
fn specials_only(vals: &[f32], counts: &[u32]) -> Specials {
    let mut sp = Specials::default();
    for (&v, &c) in vals.iter().zip(counts) {
        let c = u64::from(c);
        if v.is_nan() {
            sp.nan += c;
        } else if v == f32::INFINITY {
            sp.pos_inf += c;
        } else if v == f32::NEG_INFINITY {
            sp.neg_inf += c;
        }
    }
    sp
}

/// [`pairs_block`] of a batch that holds NaN or Inf: those counted apart,
/// the finite pairs summarised.
fn split_pairs(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    scan: PairScan,
) -> (Specials, Moments) {
    let mut sp = specials_only(vals, counts);
    let mut fv = [0f32; PAIRS];
    let mut fc = [0u32; PAIRS];
    let mut n = 0;
    for ((&v, &c), (ov, oc)) in vals
        .iter()
        .zip(counts)
        .filter(|(v, _)| v.is_finite())
        .zip(fv.iter_mut().zip(fc.iter_mut()))
    {
        (*ov, *oc) = (v, c);
        n += 1;
    }
    let (part, moments) = pairs_block(&fv[..n], &fc[..n], tiny_bits, scan);
    sp.merge(&part);
    (sp, moments)
}

/// Counts the key prefixes of the pairs into `tally`, each by its count.
/// `idx` is the caller's, at least as long as the batch (the keys first,
/// a loop the compiler vectorises, then the adds).
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn count_pair_prefixes(
    vals: &[f32],
    counts: &[u32],
    idx: &mut [u32],
    tally: &mut Tally<'_>,
) {
    for (o, &v) in idx.iter_mut().zip(vals) {
        *o = v.prefix();
    }
    for (&p, &c) in idx.iter().zip(counts) {
        tally.add_n(p, c);
    }
}

/// [`scan_pairs`] of the whole groups of eight of a batch, about `x0`,
/// and [`count_pair_prefixes`] of all its pairs: a loop that does both
/// (or the two loops, in the portable copy).
pub(crate) type PairScanCount =
    fn(&[f32], &[u32], u32, f32, &mut [u32], &mut Tally<'_>) -> PairLanes;

/// The portable [`PairScanCount`]: the two loops one after the other.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn scan_count_pairs(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    x0: f32,
    idx: &mut [u32],
    tally: &mut Tally<'_>,
) -> PairLanes {
    let len = vals.len().min(counts.len());
    let whole = len / 8 * 8;
    let lanes = scan_pairs(&vals[..whole], &counts[..whole], tiny_bits, x0);
    count_pair_prefixes(&vals[..len], &counts[..len], idx, tally);
    lanes
}

/// How many of `bytes` hold each low nibble, and each high nibble: the
/// codes of two runs of 4-bit codes packed in one stretch of bytes. (In
/// two tables each, so that neighbours of one code do not wait on each
/// other's add.)
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn nibble_counts(bytes: &[u8]) -> ([u32; 16], [u32; 16]) {
    let mut lo = [[0u32; 16]; 2];
    let mut hi = [[0u32; 16]; 2];
    let (twos, rest) = bytes.as_chunks::<2>();
    for p in twos {
        lo[0][usize::from(p[0] & 15)] += 1;
        hi[0][usize::from(p[0] >> 4)] += 1;
        lo[1][usize::from(p[1] & 15)] += 1;
        hi[1][usize::from(p[1] >> 4)] += 1;
    }
    for &b in rest {
        lo[0][usize::from(b & 15)] += 1;
        hi[0][usize::from(b >> 4)] += 1;
    }
    let add = |t: [[u32; 16]; 2]| std::array::from_fn(|q| t[0][q] + t[1][q]);
    (add(lo), add(hi))
}

/// The values of a table (at most 16) whose bucket is marked: bit `q`
/// for `t[q]`.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn marked_codes(t: &[f32], marks: &[u64; MARK_WORDS]) -> u16 {
    t.iter().take(16).enumerate().fold(0u16, |m, (q, v)| {
        m | (u16::from(marked(marks, v.prefix())) << q)
    })
}
