//! The scan of a tensor of at most [`SMALL`] elements: pass 1 without
//! counters, then its finite values' keys sorted; and the log2 histogram
//! from exponent fields, which both scans read.

use super::super::views::{FloatLane, View};
use super::super::{for_each_block, histogram_quantiles, moments_pass};
use super::SMALL;
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::stats::bins::{FloatBins, QUANTILES, nearest_rank};
use crate::stats::kernel::{Keyed, Lane};
use crate::stats::report::Sigma6;
use crate::stats::{
    Histogram, QuantileMode, Quantiles, Scalar, StatsOptions, ValueStats, empty_histogram,
    log2_histogram,
};

/// The log2 histogram from exponent-field counts.
pub(super) fn log2_of<T: FloatLane>(
    fields: &[u64],
    tiny: f64,
    zeros: u64,
    subnormals: u64,
) -> crate::stats::Log2Histogram {
    log2_of_pairs::<T>(fields.iter().copied().enumerate(), tiny, zeros, subnormals)
}

/// The log2 histogram from `(exponent field, count)` pairs, in any order,
/// a field possibly more than once.
fn log2_of_pairs<T: FloatLane>(
    pairs: impl Iterator<Item = (usize, u64)>,
    tiny: f64,
    zeros: u64,
    subnormals: u64,
) -> crate::stats::Log2Histogram {
    let exponents = pairs.filter_map(|(field, c)| {
        let e = field as i32 - T::BIAS;
        (field > 0 && field < T::MAX_FIELD && crate::stats::moments::ldexp(1.0, e) >= tiny)
            .then_some((e, c))
    });
    log2_histogram(exponents, zeros, subnormals)
}

/// [`stats`](super::stats) of a tensor of at most [`SMALL`] elements:
/// pass 1 without counters, then the finite values' keys sorted.
pub(super) fn small<V: View>(
    view: &V,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ValueStats, Cancelled> {
    let n = view.len();
    let totals = moments_pass(view, cancel, progress)?;
    let mut stats = totals.value_stats(n);
    let sp = totals.specials;
    let capacity = usize::try_from(stats.finite).unwrap_or(0);
    let mut keys: Vec<u64> = Vec::with_capacity(capacity.min(SMALL as usize));
    cancel.check()?;
    for_each_block(view, 0..n, |vals| {
        keys.extend(vals.iter().filter(|x| x.finite()).map(|x| x.key()));
    });
    progress.add(n * view.element_bytes());
    keys.sort_unstable();
    stats.outliers_6sigma = Sigma6::of(&stats).map(|s| {
        keys.iter()
            .filter(|&&k| s.beyond(V::T::from_key(k).to_f64()))
            .count() as u64
    });
    let tiny = view.smallest_normal();
    // The sorted values' exponent fields fall, then rise: runs of equal
    // fields are few, and need no table of every field.
    let mut runs: Vec<(usize, u64)> = Vec::new();
    for &k in &keys {
        let field = V::T::from_key(k).field();
        match runs.last_mut() {
            Some((f, c)) if *f == field => *c += 1,
            _ => runs.push((field, 1)),
        }
    }
    stats.log2_histogram = Some(log2_of_pairs::<V::T>(
        runs.into_iter(),
        tiny,
        sp.zeros,
        sp.subnormals,
    ));
    if keys.is_empty() {
        stats.histogram = Some(empty_histogram());
        stats.quantiles = Some(Quantiles([None; 9]));
        return Ok(stats);
    }
    let bins = FloatBins::new(sp.min, sp.max, options.bins());
    let mut counts = vec![0u64; bins.len()];
    for &k in &keys {
        if let Some(slot) = counts.get_mut(bins.bin_of(V::T::from_key(k).to_f64())) {
            *slot += 1;
        }
    }
    let mut q = [None; 9];
    for (slot, &(_, permille)) in q.iter_mut().zip(&QUANTILES) {
        if let Some(&k) = nearest_rank(permille, keys.len() as u64)
            .and_then(|r| keys.get(usize::try_from(r - 1).ok()?))
        {
            *slot = Some(Scalar::float(V::T::from_key(k).to_f64()));
        }
    }
    stats.quantiles = Some(Quantiles(q));
    if options.quantiles == QuantileMode::FromHistogram {
        let (q, error) = histogram_quantiles(&counts, keys.len() as u64, bins.edges());
        stats.quantiles = Some(q);
        stats.quantile_error = Some(error);
    }
    stats.histogram = Some(Histogram {
        edges: bins.into_edges(),
        counts,
    });
    Ok(stats)
}
