//! F32, F64 and C64 tensors: views that decode blocks of values straight
//! from the mapped bytes, and the passes over them.
//!
//! The full scan (every figure) is `exact`'s: two passes whatever the
//! data, with exact quantiles or, as asked, quantiles read from its exact
//! linear histogram. The moments only (one pass, and one more for the
//! values beyond 6σ when asked) are here.
//!
//! The views and the value types they decode into are in `views`.

use std::ops::Range;

mod exact;
mod views;

#[cfg(test)]
pub(crate) use exact::SMALL;

pub(crate) use views::{C64Abs, C64Part, F32View, F64View, FloatLane, HalfView, View};

use super::bins::FloatBins;
use super::kernel::{self, Wide};
use super::kernel::{BLOCK, Lane, Specials};
use super::moments::Moments;
use super::refine::bins_of_quantiles;
use super::report::Sigma6;
use super::simd::{block_wide, histogram_block, histogram_f32, pairs_block};
use super::{CHUNK_BYTES, Detail, Quantiles, Scalar, StatsOptions, ValueStats, par_chunks};
use crate::jobs::{CancelToken, Cancelled, Progress};

/// The magnitude bits of f32 values below `smallest_normal` (and not zero)
/// are those below this.
fn tiny_bits(smallest_normal: f64) -> u32 {
    (smallest_normal as f32).to_bits()
}

/// Calls `f` with the elements `range` of a view block by block: read in
/// place where the view allows it, else decoded.
fn for_each_block<V: View>(view: &V, range: Range<u64>, f: impl FnMut(&[V::T])) {
    if let Some(vals) = view.in_place(range.clone()) {
        vals.chunks(kernel::BLOCK).for_each(f);
    } else {
        kernel::for_each_block(range, |first, out| view.decode(first, out), f);
    }
}

/// Counts, range and moments, as every first pass gathers them.
#[derive(Debug, Clone, Copy, Default)]
struct Pass1Totals {
    specials: Specials,
    moments: Moments,
}

impl Pass1Totals {
    fn merge(&mut self, o: &Pass1Totals) {
        self.specials.merge(&o.specials);
        self.moments.merge(&o.moments);
    }

    /// The figures of `n` elements without histograms or quantiles.
    fn value_stats(&self, n: u64) -> ValueStats {
        let sp = self.specials;
        let finite = n - sp.nan - sp.pos_inf - sp.neg_inf;
        let has_values = finite > 0;
        ValueStats {
            finite,
            nan: sp.nan,
            pos_inf: sp.pos_inf,
            neg_inf: sp.neg_inf,
            zeros: sp.zeros,
            subnormals: sp.subnormals,
            min: has_values.then(|| Scalar::float(sp.min)),
            max: has_values.then(|| Scalar::float(sp.max)),
            ..ValueStats::from_moments(n, &self.moments)
        }
    }
}

/// Adds the specials and moments of the elements `range` to `acc`.
fn summarize_range<V: View>(view: &V, range: Range<u64>, acc: &mut Pass1Totals) {
    // Runs of few values (GGUF's table types): each value once, with its
    // count.
    let tiny = tiny_bits(view.smallest_normal());
    if view.pairs(range.clone(), None, true, &mut |vals, counts| {
        let (sp, m) = pairs_block(vals, counts, tiny);
        acc.specials.merge(&sp);
        acc.moments.merge(&m);
    }) {
        return;
    }
    if let Some((kind, raw)) = view.raw(range.clone()) {
        for block in raw.chunks(kind.width() * BLOCK) {
            let (sp, m) = block_wide(kind, block, tiny);
            acc.specials.merge(&sp);
            acc.moments.merge(&m);
        }
    } else {
        for_each_block(view, range, |vals| {
            let (sp, m) = V::T::summarize(vals, view.smallest_normal());
            acc.specials.merge(&sp);
            acc.moments.merge(&m);
        });
    }
}

/// One pass of counts, range and moments over the whole view.
fn moments_pass<V: View>(
    view: &V,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Pass1Totals, Cancelled> {
    let chunk = (CHUNK_BYTES / view.element_bytes()).max(1);
    par_chunks(
        view.len(),
        chunk,
        cancel,
        Pass1Totals::default,
        |acc, range| {
            let bytes = (range.end - range.start) * view.element_bytes();
            summarize_range(view, range, acc);
            progress.add(bytes);
        },
        |mut a, b| {
            a.merge(&b);
            a
        },
    )
}

/// Adds the finite values of the elements `range` to the linear
/// histogram `acc` (one counter per bin).
fn histogram_counts<V: View>(view: &V, range: Range<u64>, bins: &FloatBins, acc: &mut [u64]) {
    let len = bins.len();
    if let (Some((Wide::F32, raw)), Some(guess)) = (view.raw(range.clone()), bins.f32_guess()) {
        // Four tables of len + 1 counters (the last is scratch).
        let mut tables = vec![0u32; 4 * (len + 1)];
        for block in raw.chunks(4 * BLOCK) {
            histogram_f32(block, bins, &guess, &mut tables);
        }
        fold_tables(&tables, len + 1, acc);
    } else {
        let mut tables = vec![0u32; 4 * len];
        for_each_block(view, range, |vals| histogram_block(vals, bins, &mut tables));
        fold_tables(&tables, len, acc);
    }
}

/// The finite values of `range` beyond 6σ.
fn count_beyond<V: View>(view: &V, range: Range<u64>, sigma: Sigma6) -> u64 {
    let mut n = 0u64;
    if view.pairs(range.clone(), None, false, &mut |vals, counts| {
        for (v, c) in vals.iter().zip(counts) {
            let v = f64::from(*v);
            if sigma.beyond(v) && v.abs() < f64::INFINITY {
                n += u64::from(*c);
            }
        }
    }) {
        return n;
    }
    // F32 in place: read straight from the bytes, in blocks the compiler
    // vectorises (no copy through the decode buffer).
    if let Some((Wide::F32, raw)) = view.raw(range.clone()) {
        return raw
            .chunks(4 * BLOCK)
            .map(|block| {
                block
                    .chunks_exact(4)
                    .map(|b| {
                        let v = f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                        u32::from(sigma.beyond(v)) & u32::from(v.abs() < f64::INFINITY)
                    })
                    .sum::<u32>() as u64
            })
            .sum();
    }
    for_each_block(view, range, |vals| {
        // Branch-free, so that it vectorises: ±Inf is beyond any limit but
        // not finite, NaN compares false.
        n += vals
            .iter()
            .map(|x| {
                let v = x.to_f64();
                u64::from(sigma.beyond(v)) & u64::from(v.abs() < f64::INFINITY)
            })
            .sum::<u64>();
    });
    n
}

/// Statistics of a float view.
pub(crate) fn stats<V: View>(
    view: &V,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ValueStats, Cancelled> {
    let full = options.full();
    if !full {
        let mut stats = moments_pass(view, cancel, progress)?.value_stats(view.len());
        if options.detail == Detail::Outliers
            && let Some(sigma) = Sigma6::of(&stats)
        {
            let chunk = (CHUNK_BYTES / view.element_bytes()).max(1);
            let beyond = par_chunks(
                view.len(),
                chunk,
                cancel,
                || 0u64,
                |acc, range| {
                    let bytes = (range.end - range.start) * view.element_bytes();
                    *acc += count_beyond(view, range, sigma);
                    progress.add(bytes);
                },
                |a, b| a + b,
            )?;
            stats.outliers_6sigma = Some(beyond);
        } else if options.detail == Detail::Outliers {
            progress.add(view.len() * view.element_bytes());
        }
        return Ok(stats);
    }
    // Quantiles read from the histogram take the same scan: its histogram
    // is exact, and it bins only the values beside an edge value by value.
    exact::stats(view, options, cancel, progress)
}

/// The quantiles read from a linear histogram: the middle of the bin that
/// holds each rank, and the largest distance to the exact value (half the
/// widest such bin).
fn histogram_quantiles(counts: &[u64], finite: u64, edges: &[f64]) -> (Quantiles, f64) {
    let mut q = [None; 9];
    let mut error = 0f64;
    for (slot, loc) in q.iter_mut().zip(&bins_of_quantiles(counts, finite)) {
        if let Some((bin, _)) = *loc
            && let (Some(&lo), Some(&hi)) = (edges.get(bin), edges.get(bin + 1))
        {
            let mid = lo * 0.5 + hi * 0.5;
            error = error.max(hi * 0.5 - lo * 0.5);
            *slot = Some(Scalar::float(mid));
        }
    }
    (Quantiles(q), error)
}

/// Adds the first `acc.len()` counters of each table of `stride` counters.
fn fold_tables(tables: &[u32], stride: usize, acc: &mut [u64]) {
    for t in tables.chunks(stride.max(1)) {
        for (x, &c) in acc.iter_mut().zip(t) {
            *x += u64::from(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::views::magnitude;
    use super::*;
    use crate::stats::kernel::Keyed;

    #[test]
    fn keys_preserve_order_and_round_trip() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5,
            -1e-45,
            -0.0,
            0.0,
            1e-45,
            2.0,
            f32::MAX,
        ];
        for w in xs.windows(2) {
            assert!(w[0].key() < w[1].key(), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(f32::from_key(x.key()).to_bits(), x.to_bits());
        }
        let ys = [f64::MIN, -1.0, -0.0, 0.0, 5e-324, 1.0, f64::MAX];
        for w in ys.windows(2) {
            assert!(w[0].key() < w[1].key());
        }
        for y in ys {
            assert_eq!(f64::from_key(y.key()).to_bits(), y.to_bits());
        }
    }

    #[test]
    fn magnitudes() {
        assert_eq!(magnitude(3.0, -4.0), 5.0);
        assert_eq!(magnitude(f32::INFINITY, f32::NAN), f64::INFINITY);
        assert!(magnitude(f32::NAN, 1.0).is_nan());
    }
}
