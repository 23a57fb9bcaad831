//! I32, U32, I64 and U64 tensors: the minimum, maximum, histogram bins and
//! quantiles are exact integers (also beyond 2^53); mean, standard
//! deviation, mean |x| and L2 norm are accumulated in f64.
//!
//! Values travel as order-preserving `u64` keys (the sign bit flipped for
//! signed types), so the exact-quantile search of [`super::refine`] works
//! on them unchanged.

use std::ops::Range;

use super::bins::IntBins;
use super::kernel::{self, BLOCK, Specials};
use super::moments::Moments;
use super::refine::{KeySource, Target, bins_of_quantiles, refine};
use super::report::Sigma6;
use super::simd::block_f64;
use super::{
    CHUNK_BYTES, Detail, Histogram, Quantiles, Scalar, StatsOptions, ValueStats, empty_histogram,
    log2_histogram, par_chunks,
};
use crate::dtype::{Dtype, DtypeKind};
use crate::jobs::{CancelToken, Cancelled, Progress};

/// The elements of an integer tensor as keys.
struct IntView<'a> {
    bytes: &'a [u8],
    size: usize,
    signed: bool,
}

const SIGN: u64 = 1 << 63;

impl IntView<'_> {
    fn len(&self) -> u64 {
        (self.bytes.len() / self.size.max(1)) as u64
    }

    /// Keys of elements `first..`; returns how many were written.
    fn decode(&self, first: u64, out: &mut [u64]) -> usize {
        let Some(start) = usize::try_from(first)
            .ok()
            .and_then(|f| f.checked_mul(self.size))
        else {
            return 0;
        };
        let Some(src) = self.bytes.get(start..) else {
            return 0;
        };
        let mut n = 0;
        match (self.size, self.signed) {
            (4, true) => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<4>().0) {
                    *o = (i64::from(i32::from_le_bytes(*c)) as u64) ^ SIGN;
                    n += 1;
                }
            }
            (4, false) => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<4>().0) {
                    *o = u64::from(u32::from_le_bytes(*c));
                    n += 1;
                }
            }
            (_, true) => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<8>().0) {
                    *o = u64::from_le_bytes(*c) ^ SIGN;
                    n += 1;
                }
            }
            (_, false) => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<8>().0) {
                    *o = u64::from_le_bytes(*c);
                    n += 1;
                }
            }
        }
        n
    }

    /// The value of a key.
    fn value(&self, key: u64) -> i128 {
        if self.signed {
            i128::from((key ^ SIGN) as i64)
        } else {
            i128::from(key)
        }
    }

    /// Calls `f` with the keys of `range`, a block at a time.
    fn for_each_block(&self, range: Range<u64>, f: impl FnMut(&[u64])) {
        kernel::for_each_block(range, |first, out| self.decode(first, out), f);
    }
}

struct Keys<'a> {
    view: &'a IntView<'a>,
    chunk: u64,
}

impl KeySource for Keys<'_> {
    fn len(&self) -> u64 {
        self.view.len()
    }
    fn chunk_elems(&self) -> u64 {
        self.chunk
    }
    fn key_bits(&self) -> u32 {
        64
    }
    fn for_each_block(&self, range: Range<u64>, f: &mut dyn FnMut(&[u64])) {
        self.view.for_each_block(range, |k| f(k));
    }
}

/// What pass 1 gathers over a chunk: exact range, moments, and (full
/// detail) key prefixes for the quantiles.
struct Pass1 {
    zeros: u64,
    min_key: u64,
    max_key: u64,
    moments: Moments,
    /// Values per bit length of |x| (index 0 unused: zeros are apart).
    exponents: [u64; 65],
}

/// How many of the values of `keys` lie beyond 6σ.
fn beyond(view: &IntView<'_>, keys: &[u64], sigma: Sigma6) -> u64 {
    keys.iter()
        .filter(|&&k| sigma.beyond(view.value(k) as f64))
        .count() as u64
}

/// The values beyond 6σ, in a pass of their own (0 without `sigma`, whose
/// pass still reports its bytes).
fn outliers_pass(
    view: &IntView<'_>,
    chunk: u64,
    sigma: Option<Sigma6>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<u64, Cancelled> {
    par_chunks(
        view.len(),
        chunk,
        cancel,
        || 0u64,
        |acc, range| {
            let bytes = (range.end - range.start) * view.size as u64;
            if let Some(s) = sigma {
                view.for_each_block(range, |keys| *acc += beyond(view, keys, s));
            }
            progress.add(bytes);
        },
        |a, b| a + b,
    )
}

/// Statistics of an integer tensor of 32 or 64 bits.
pub(crate) fn stats(
    dtype: Dtype,
    bytes: &[u8],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ValueStats, Cancelled> {
    let view = IntView {
        bytes,
        size: (dtype.bits() / 8) as usize,
        signed: dtype.kind() == DtypeKind::Signed,
    };
    let n = view.len();
    let element_bytes = view.size as u64;
    let chunk = (CHUNK_BYTES / element_bytes).max(1);
    let full = options.full();
    let p1 = par_chunks(
        n,
        chunk,
        cancel,
        || Pass1 {
            zeros: 0,
            min_key: u64::MAX,
            max_key: 0,
            moments: Moments::default(),
            exponents: [0; 65],
        },
        |acc, range| {
            let bytes = (range.end - range.start) * element_bytes;
            let mut values = [0f64; BLOCK];
            view.for_each_block(range, |keys| {
                let mut lo = u64::MAX;
                let mut hi = 0;
                for (v, &k) in values.iter_mut().zip(keys) {
                    lo = lo.min(k);
                    hi = hi.max(k);
                    *v = view.value(k) as f64;
                }
                acc.min_key = acc.min_key.min(lo);
                acc.max_key = acc.max_key.max(hi);
                let (sp, m): (Specials, Moments) =
                    block_f64(values.get(..keys.len()).unwrap_or(&[]), 0.0);
                acc.zeros += sp.zeros;
                acc.moments.merge(&m);
                if full {
                    for &k in keys {
                        let magnitude = view.value(k).unsigned_abs();
                        let bits = 128 - magnitude.leading_zeros() as usize;
                        if let Some(slot) = acc.exponents.get_mut(bits) {
                            *slot += 1;
                        }
                    }
                }
            });
            progress.add(bytes);
        },
        |mut a, b| {
            a.zeros += b.zeros;
            a.min_key = a.min_key.min(b.min_key);
            a.max_key = a.max_key.max(b.max_key);
            a.moments.merge(&b.moments);
            for (x, y) in a.exponents.iter_mut().zip(&b.exponents) {
                *x += y;
            }
            a
        },
    )?;
    let has_values = n > 0;
    let min = view.value(p1.min_key);
    let max = view.value(p1.max_key);
    let mut stats = ValueStats {
        zeros: p1.zeros,
        min: has_values.then(|| Scalar::int(min)),
        max: has_values.then(|| Scalar::int(max)),
        ..ValueStats::from_moments(n, &p1.moments)
    };
    if !full {
        if options.detail == Detail::Outliers {
            let sigma = Sigma6::of(&stats);
            let beyond = outliers_pass(&view, chunk, sigma, cancel, progress)?;
            stats.outliers_6sigma = sigma.map(|_| beyond);
        }
        return Ok(stats);
    }
    // Bit length b ≥ 1 means 2^(b−1) ≤ |x| < 2^b.
    let exponents = p1
        .exponents
        .iter()
        .enumerate()
        .skip(1)
        .map(|(bits, &c)| (bits as i32 - 1, c));
    stats.log2_histogram = Some(log2_histogram(exponents, p1.zeros, 0));
    if !has_values {
        stats.histogram = Some(empty_histogram());
        stats.quantiles = Some(Quantiles([None; 9]));
        return Ok(stats);
    }
    let bins = IntBins::new(min, max, options.bins());
    let len = bins.len();
    let min_key = p1.min_key;
    let sigma = Sigma6::of(&stats);
    let (counts, outliers) = par_chunks(
        n,
        chunk,
        cancel,
        || (vec![0u64; len], 0u64),
        |(acc, outliers), range| {
            let bytes = (range.end - range.start) * element_bytes;
            view.for_each_block(range, |keys| {
                for &k in keys {
                    let bin = bins.bin_of_offset(u128::from(k.wrapping_sub(min_key)));
                    if let Some(slot) = acc.get_mut(bin) {
                        *slot += 1;
                    }
                }
                if let Some(s) = sigma {
                    *outliers += beyond(&view, keys, s);
                }
            });
            progress.add(bytes);
        },
        |(mut a, oa), (b, ob)| {
            for (x, y) in a.iter_mut().zip(&b) {
                *x += y;
            }
            (a, oa + ob)
        },
    )?;
    stats.outliers_6sigma = sigma.map(|_| outliers);
    let mut targets = Vec::new();
    let mut slots = Vec::new();
    for (i, loc) in bins_of_quantiles(&counts, n).iter().enumerate() {
        let Some((bin, rank)) = *loc else { continue };
        let (lo, hi) = bins.offsets_of(bin);
        targets.push(Target {
            lo: min_key.wrapping_add(lo as u64),
            hi: min_key.wrapping_add(hi as u64),
            rank,
            count: counts.get(bin).copied().unwrap_or(0),
        });
        slots.push(i);
    }
    let keys = refine(&Keys { view: &view, chunk }, &targets, cancel)?;
    let mut q = [None; 9];
    for (i, k) in slots.into_iter().zip(keys) {
        if let Some(slot) = q.get_mut(i) {
            *slot = Some(Scalar::int(view.value(k)));
        }
    }
    stats.quantiles = Some(Quantiles(q));
    stats.histogram = Some(Histogram {
        edges: bins.edges(),
        counts,
    });
    Ok(stats)
}
