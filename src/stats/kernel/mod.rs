//! The hot loops: one block of a few thousand values at a time, read in
//! place from the mapped bytes (F32, F16, BF16) or decoded into a stack
//! buffer that stays in L1, or raw bytes for code counting.
//!
//! Written as simple loops over fixed-width lanes so that the compiler
//! vectorises them for the baseline x86-64 target without `unsafe`;
//! [`crate::stats::simd`] runs the hottest ones as AVX2 code where the CPU has it,
//! with the same results. Every loop takes any input: NaN and Inf are split
//! off before the arithmetic, and nothing indexes out of bounds.
//!
//! This module holds the block walker and what every kernel shares (the
//! [`Specials`] counts, the [`Lane`] value types); `moments` summarises a
//! block, `histogram` bins it, `counting` counts raw codes.

use std::ops::Range;

/// Values per block: the decode buffer and the lanes' partial sums stay in
/// L1, and a block's lane sums stay accurate (≤ 512 terms per lane).
pub(crate) const BLOCK: usize = 2048;

/// Calls `f` with the elements `range`, decoded a block at a time by
/// `decode(first, out)`, which fills `out` from element `first` on and
/// returns how many it wrote (0 ends the walk early).
pub(crate) fn for_each_block<T: Copy + Default>(
    range: Range<u64>,
    decode: impl FnMut(u64, &mut [T]) -> usize,
    f: impl FnMut(&[T]),
) {
    // A tensor of a few values (a bias, a scale) gets a buffer of its size:
    // zeroing a whole block for it would cost more than its statistics.
    if range.end.saturating_sub(range.start) <= FEW as u64 {
        blocks::<T, FEW>(range, decode, f);
    } else {
        blocks::<T, BLOCK>(range, decode, f);
    }
}

/// The buffer of [`for_each_block`] for at most this many elements.
const FEW: usize = 64;

fn blocks<T: Copy + Default, const N: usize>(
    range: Range<u64>,
    mut decode: impl FnMut(u64, &mut [T]) -> usize,
    mut f: impl FnMut(&[T]),
) {
    let mut buffer = [T::default(); N];
    let mut first = range.start;
    while first < range.end {
        let want = usize::try_from(range.end - first).unwrap_or(N).min(N);
        let Some(out) = buffer.get_mut(..want) else {
            break;
        };
        let got = decode(first, out);
        if got == 0 {
            break;
        }
        f(out.get(..got).unwrap_or(&[]));
        first += got as u64;
    }
}

/// Counts of the special values in a block, and its finite range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Specials {
    /// NaN values (every payload, either sign).
    pub nan: u64,
    /// +Inf values.
    pub pos_inf: u64,
    /// −Inf values.
    pub neg_inf: u64,
    /// ±0 values (counted apart from subnormals).
    pub zeros: u64,
    /// Non-zero values below the smallest normal number of the value type.
    pub subnormals: u64,
    /// Smallest finite value (+Inf when there is none).
    pub min: f64,
    /// Largest finite value (−Inf when there is none).
    pub max: f64,
}

impl Default for Specials {
    fn default() -> Self {
        Self {
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
            zeros: 0,
            subnormals: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Specials {
    /// Adds another block's counts and range.
    pub fn merge(&mut self, o: &Specials) {
        self.nan += o.nan;
        self.pos_inf += o.pos_inf;
        self.neg_inf += o.neg_inf;
        self.zeros += o.zeros;
        self.subnormals += o.subnormals;
        // −0 and +0 are equal; keep the first seen (callers print +0).
        if o.min < self.min {
            self.min = o.min;
        }
        if o.max > self.max {
            self.max = o.max;
        }
    }
}

/// A value type the float kernels work on.
pub(crate) trait Lane: Copy + Default + PartialOrd + Send + Sync + 'static {
    /// Widens exactly to f64.
    fn to_f64(self) -> f64;
    /// Whether the value is finite.
    fn finite(self) -> bool;
}

impl Lane for f32 {
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline]
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Lane for f64 {
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline]
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// Moves the finite values of `vals` to the front of `out` and counts the
/// others; returns how many finite values there are.
fn split_finite<T: Lane>(vals: &[T], out: &mut [T], sp: &mut Specials) -> usize {
    let mut n = 0;
    for &x in vals {
        if x.finite() {
            if let Some(slot) = out.get_mut(n) {
                *slot = x;
                n += 1;
            }
        } else {
            let v = x.to_f64();
            if v.is_nan() {
                sp.nan += 1;
            } else if v > 0.0 {
                sp.pos_inf += 1;
            } else {
                sp.neg_inf += 1;
            }
        }
    }
    n
}

/// Lanes of the floating-point sums: independent chains that the compiler
mod counting;
mod histogram;
mod moments;
mod prefix;
#[cfg(test)]
mod tests;
mod weighted;

pub(crate) use counting::{count_bytes, count_f6, count_u16, for_each_hit};
pub(crate) use histogram::{F32Guess, histogram_block, histogram_f32};
// On other CPUs than x86-64 the vector copies, their only users, are not
// compiled (the same for the items marked in `prefix.rs`).
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_imports))]
pub(crate) use moments::{
    F32Lanes, Wide, block_f64, block_f64_in, block_f64_with, block_wide, block_wide_by, f32_bytes,
    fold_lanes, fold_range, scan_groups,
};
#[cfg(test)]
pub(crate) use prefix::count_prefixes_f32;
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_imports))]
pub(crate) use prefix::{
    BLOOM_BITS, BUCKETS, Hits, Keyed, MARK_WORDS, PART, PREFIX_BITS, Prefilter, Prefilter64, Tally,
    count_prefixes, for_each_marked, for_each_marked_f32, key32, marked,
};
#[cfg(test)]
pub(crate) use weighted::count_pair_prefixes;
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_imports))]
pub(crate) use weighted::{
    PairLanes, PairScan, PairScanCount, marked_codes, nibble_counts, pairs_block,
    pairs_block_counting, scan_count_pairs, scan_pairs,
};
