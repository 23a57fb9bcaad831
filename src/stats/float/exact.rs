//! The full scan of float values: every figure, exact quantiles (or, when
//! asked, quantiles read from the exact linear histogram, which skips the
//! quantiles' buckets), in two passes over the data whatever the tensor.
//!
//! Pass 1 counts NaN, ±Inf, zeros and subnormals, finds the range, sums the
//! moments and counts the values' key prefixes ([`BUCKETS`] buckets of
//! consecutive keys; for f32 a relative width of at most 2^−11). Once the
//! range is known, the counts already give:
//!
//! * the log2 histogram (a bucket lies inside one binade);
//! * the linear histogram, except for the few buckets that hold a bin
//!   edge (about one value in a hundred for a 256-bin histogram of weights);
//! * the bucket, and the rank inside it, of every quantile.
//!
//! Pass 2 reads the data once more but only looks at the values of those
//! marked buckets: the ones beside an edge are binned exactly, the ones in
//! a quantile's bucket are kept (their keys, at most [`MEMBER_BUDGET`]) and
//! selected. When the straddling values are many (a range of few distinct
//! values), pass 2 bins every value instead; when a quantile's bucket holds
//! more values than the budget, [`refine`] narrows it in extra passes.
//!
//! Tensors of at most [`SMALL`] elements skip the counters: their finite
//! values are sorted, which costs a few microseconds for a tiny tensor
//! instead of clearing a million counters.
//!
//! [`BUCKETS`]: crate::stats::kernel::BUCKETS

mod counts;
mod marked;
mod small;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pairs;

use std::sync::Mutex;

use counts::Counts;
use marked::Marked;
use small::{log2_of, small};

use super::views::{FloatLane, View};
use super::{Pass1Totals, for_each_block, histogram_counts, histogram_quantiles, tiny_bits};
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::stats::bins::{FloatBins, QUANTILES, nearest_rank};
use crate::stats::kernel::{
    BLOCK, Keyed, Lane, MARK_WORDS, PART, PREFIX_BITS, Prefilter, Prefilter64, Wide,
    marked as is_marked,
};
use crate::stats::refine::{KeySource, Target, refine};
use crate::stats::report::Sigma6;
use crate::stats::simd::{
    block_and_prefixes_f32, block_and_prefixes_f64, count_prefixes, for_each_marked,
    for_each_marked_f32, for_each_marked_f64, marked_tables, pairs_block_counting,
};
use crate::stats::{
    Histogram, QuantileMode, Quantiles, Scalar, StatsOptions, ValueStats, empty_histogram,
    par_chunks,
};

/// Tensors of at most this many elements are sorted instead of counted.
pub(crate) const SMALL: u64 = 1 << 15;

/// Keys of quantile buckets kept at most in pass 2 (16 MiB; a few
/// thousand in the tests, so that they reach the refining passes).
const MEMBER_BUDGET: u64 = if cfg!(test) { 1 << 12 } else { 1 << 21 };

/// Pass 2 bins every value when more than this share of them lie in
/// buckets that hold a bin edge.
const STRADDLE_SHARE: u64 = 8;

/// Bits of a key below its prefix.
fn low_bits<T: FloatLane>() -> u32 {
    T::KEY_BITS - PREFIX_BITS
}

/// Statistics of a float view with every figure and exact quantiles.
#[expect(
    clippy::too_many_lines,
    reason = "the two passes share the buckets' state; split, each part would take a dozen arguments"
)]
pub(crate) fn stats<V: View>(
    view: &V,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ValueStats, Cancelled> {
    if view.len() <= SMALL {
        return small(view, options, cancel, progress);
    }
    let n = view.len();
    let chunk = (crate::stats::CHUNK_BYTES / view.element_bytes()).max(1);
    let tiny = view.smallest_normal();
    // Pass 1: specials, moments and prefix counts.
    // One table per thread of the pool rather than per piece of work that
    // the pool splits off: the tables are merged once per thread, not once
    // per split (a merge adds every bucket the values' range spans, which
    // for values around zero is half the table).
    let tables: Vec<Mutex<Option<Counts>>> = (0..rayon::current_num_threads().max(1))
        .map(|_| Mutex::new(None))
        .collect();
    let totals = par_chunks(
        n,
        chunk,
        cancel,
        Pass1Totals::default,
        |acc, range| {
            let bytes = (range.end - range.start) * view.element_bytes();
            // A thread outside the pool (a single chunk runs on the caller)
            // takes the first table; the lock makes any sharing safe.
            let slot = rayon::current_thread_index()
                .and_then(|i| tables.get(i))
                .or(tables.first());
            let Some(mut guard) = slot.and_then(|m| m.lock().ok()) else {
                return;
            };
            let counts = guard.get_or_insert_with(Counts::new);
            counts.reserve(range.end - range.start);
            let Some(mut table) = counts.tally() else {
                return;
            };
            let mut idx = [0u32; PART];
            // Runs of few values: each value once, with its count.
            let paired = V::T::KEY_BITS == 32
                && view.pairs(range.clone(), None, true, &mut |vals, counts| {
                    let (sp, m) =
                        pairs_block_counting(vals, counts, tiny_bits(tiny), &mut idx, &mut table);
                    acc.specials.merge(&sp);
                    acc.moments.merge(&m);
                });
            if paired {
            } else if let Some((Wide::F32, raw)) = view.raw(range.clone()) {
                let tiny = tiny_bits(tiny);
                let (raw, _) = raw.as_chunks::<4>();
                for (i, block) in raw.chunks(BLOCK).enumerate() {
                    let next = raw.get((i + 1) * BLOCK..).unwrap_or(&[]);
                    let ahead = next.get(..BLOCK).unwrap_or(next);
                    let (sp, m) = block_and_prefixes_f32(
                        block.as_flattened(),
                        ahead.as_flattened(),
                        tiny,
                        &mut idx,
                        &mut table,
                    );
                    acc.specials.merge(&sp);
                    acc.moments.merge(&m);
                }
            } else if let Some(vals) = view.in_place(range.clone()) {
                for (i, block) in vals.chunks(BLOCK).enumerate() {
                    let next = vals.get((i + 1) * BLOCK..).unwrap_or(&[]);
                    let ahead = next.get(..BLOCK).unwrap_or(next);
                    let (sp, m) = if let (Some(block), Some(ahead)) =
                        (V::T::f64s(block), V::T::f64s(ahead))
                    {
                        block_and_prefixes_f64(block, ahead, tiny, &mut idx, &mut table)
                    } else {
                        count_prefixes(block, ahead, &mut idx, &mut table);
                        V::T::summarize(block, tiny)
                    };
                    acc.specials.merge(&sp);
                    acc.moments.merge(&m);
                }
            } else {
                for_each_block(view, range, |vals| {
                    let (sp, m) = V::T::summarize(vals, tiny);
                    acc.specials.merge(&sp);
                    acc.moments.merge(&m);
                    count_prefixes(vals, &[], &mut idx, &mut table);
                });
            }
            counts.touch::<V::T>(&acc.specials);
            progress.add(bytes);
        },
        |mut a, b| {
            a.merge(&b);
            a
        },
    )?;
    let mut counts = tables
        .into_iter()
        .filter_map(|m| m.into_inner().ok().flatten())
        .reduce(Counts::merge)
        .unwrap_or_else(Counts::new);
    let mut stats = totals.value_stats(n);
    let finite = stats.finite;
    let sp = totals.specials;
    // Outliers: counted by bucket, but for the buckets a threshold cuts.
    let sigma = Sigma6::of(&stats);
    let mut outliers = 0u64;
    let mut cut: Vec<u32> = Vec::new();
    // The buckets in key order: exponent fields, linear bins of the buckets
    // inside one bin, the buckets beside an edge, and the quantiles' buckets.
    let low = low_bits::<V::T>();
    let mut fields = vec![0u64; V::T::MAX_FIELD + 1];
    let bins = (finite > 0).then(|| FloatBins::new(sp.min, sp.max, options.bins()));
    let mut linear = vec![0u64; bins.as_ref().map_or(0, FloatBins::len)];
    let mut straddling: Vec<u32> = Vec::new();
    let mut straddle_count = 0u64;
    // Quantiles read from the histogram need no bucket kept.
    let from_histogram = options.quantiles == QuantileMode::FromHistogram;
    let ranks: Vec<(usize, u64)> = QUANTILES
        .iter()
        .enumerate()
        .filter(|_| !from_histogram)
        .filter_map(|(i, &(_, permille))| Some((i, nearest_rank(permille, finite)?)))
        .collect();
    let mut located: Vec<Located> = Vec::new();
    let mut next_rank = 0;
    let mut below = 0u64;
    for p in counts.occupied() {
        let p = p as usize;
        let c = counts.take(p);
        if c == 0 {
            continue;
        }
        let first = (p as u64) << low;
        let last = first | ((1u64 << low) - 1);
        let (lo, hi) = (V::T::from_key(first), V::T::from_key(last));
        let field = lo.field();
        if field >= V::T::MAX_FIELD {
            // NaN and ±Inf: counted apart.
            continue;
        }
        if let Some(slot) = fields.get_mut(field) {
            *slot += c;
        }
        if let Some(s) = sigma {
            match s.span(lo.to_f64(), hi.to_f64()) {
                Some(true) => outliers += c,
                Some(false) => {}
                None => cut.push(p as u32),
            }
        }
        if let Some(bins) = &bins {
            let b_lo = bins.bin_of(lo.to_f64().max(sp.min));
            let b_hi = bins.bin_of(hi.to_f64().min(sp.max));
            if b_lo == b_hi {
                if let Some(slot) = linear.get_mut(b_lo) {
                    *slot += c;
                }
            } else {
                straddling.push(p as u32);
                straddle_count += c;
            }
        }
        while let Some(&(q, rank)) = ranks.get(next_rank) {
            if rank > below + c {
                break;
            }
            located.push(Located {
                quantile: q,
                prefix: p as u32,
                rank: rank - below,
                count: c,
            });
            next_rank += 1;
        }
        below += c;
    }
    // Every counter was taken: the table goes back clear.
    counts.since = 0;
    drop(counts);
    stats.log2_histogram = Some(log2_of::<V::T>(&fields, tiny, sp.zeros, sp.subnormals));
    let Some(bins) = bins else {
        stats.histogram = Some(empty_histogram());
        stats.quantiles = Some(Quantiles([None; 9]));
        return Ok(stats);
    };
    // The quantile buckets whose values pass 2 keeps (each one once).
    let mut kept: Vec<u32> = located.iter().map(|l| l.prefix).collect();
    kept.sort_unstable();
    kept.dedup();
    let kept_values: u64 = located
        .iter()
        .filter(|l| kept.contains(&l.prefix))
        .map(|l| (l.prefix, l.count))
        .collect::<std::collections::BTreeMap<_, _>>()
        .values()
        .sum();
    if kept_values > MEMBER_BUDGET {
        kept.clear();
    }
    let bin_all = straddle_count > finite / STRADDLE_SHARE;
    if bin_all {
        straddling.clear();
    }
    let marked = Marked::new::<V::T>(&straddling, &kept, &cut, &bins, sp.min, sp.max);
    // The vector filters' first test, for f32 values: the straddling
    // buckets by their nearness to an edge, the others by the bloom.
    let prefilter = if V::T::KEY_BITS == 32 && !bins.guess_params().2 {
        let others: Vec<u32> = kept.iter().chain(&cut).copied().collect();
        let edges = (!straddling.is_empty()).then(|| (bins.edges(), sp.min, sp.max));
        Prefilter::new(edges, &others)
    } else {
        None
    };
    // The same for f64 values, in f64 arithmetic.
    let prefilter64 = if V::T::KEY_BITS == 64 {
        let others: Vec<u32> = kept.iter().chain(&cut).copied().collect();
        let edges = (!straddling.is_empty()).then(|| (bins.edges(), sp.min, sp.max));
        Prefilter64::new(edges, &others)
    } else {
        None
    };
    let Ok(marks) = <&[u64; MARK_WORDS]>::try_from(marked.words.as_slice()) else {
        return Ok(stats);
    };
    // Pass 2.
    let len = bins.len();
    let (extra, members, beyond) = par_chunks(
        n,
        chunk,
        cancel,
        || (vec![0u64; len], vec![Vec::<u64>::new(); kept.len()], 0u64),
        |(extra, members, beyond), range| {
            let bytes = (range.end - range.start) * view.element_bytes();
            if bin_all {
                histogram_counts(view, range.clone(), &bins, extra);
            }
            let filter = |vals: &[V::T], hits: &mut dyn FnMut(&[u64])| match V::T::f64s(vals) {
                Some(vals) => for_each_marked_f64(vals, marks, prefilter64.as_ref(), hits),
                None => for_each_marked(vals, marks, hits),
            };
            let mut hits = |keys: &[u64]| {
                for &key in keys {
                    let Some(e) = marked.entry((key >> low) as u32) else {
                        continue;
                    };
                    if e.straddles {
                        let bin = if e.steps_known {
                            e.base + usize::from(key >= e.steps[0]) + usize::from(key >= e.steps[1])
                        } else {
                            bins.bin_of(V::T::from_key(key).to_f64())
                        };
                        if let Some(slot) = extra.get_mut(bin) {
                            *slot += 1;
                        }
                    }
                    if let Some(list) = members.get_mut(e.kept as usize) {
                        list.push(key);
                    }
                    if e.cut && sigma.is_some_and(|s| s.beyond(V::T::from_key(key).to_f64())) {
                        *beyond += 1;
                    }
                }
            };
            // Runs of few values: only the runs whose table holds a value
            // of a marked bucket are counted, each such value's key handed
            // on once per element.
            let keep = |t: &[f32], masks: &mut [u16]| {
                marked_tables(t, marks, masks);
            };
            let mut repeated: Vec<u64> = Vec::new();
            let paired = !bin_all
                && V::T::KEY_BITS == 32
                && view.pairs(range.clone(), Some(&keep), false, &mut |vals, counts| {
                    repeated.clear();
                    for (&v, &c) in vals.iter().zip(counts) {
                        if c > 0 && is_marked(marks, v.prefix()) {
                            repeated.extend(std::iter::repeat_n(v.key(), c as usize));
                        }
                    }
                    hits(&repeated);
                });
            if paired {
            } else if let Some((Wide::F32, raw)) = view.raw(range.clone()) {
                for_each_marked_f32(raw, marks, prefilter.as_ref(), &mut hits);
            } else if let Some(vals) = view.in_place(range.clone()) {
                filter(vals, &mut hits);
            } else {
                for_each_block(view, range, |vals| filter(vals, &mut hits));
            }
            progress.add(bytes);
        },
        |(mut a, mut ma, oa), (b, mb, ob)| {
            for (x, y) in a.iter_mut().zip(&b) {
                *x += y;
            }
            for (x, y) in ma.iter_mut().zip(mb) {
                x.extend(y);
            }
            (a, ma, oa + ob)
        },
    )?;
    stats.outliers_6sigma = sigma.map(|_| outliers + beyond);
    if bin_all {
        linear = extra;
    } else {
        for (x, y) in linear.iter_mut().zip(&extra) {
            *x += y;
        }
    }
    let mut q = [None; 9];
    let mut members = members;
    let mut open = Vec::new();
    for l in &located {
        let Some(slot) = q.get_mut(l.quantile) else {
            continue;
        };
        match kept.binary_search(&l.prefix) {
            Ok(i) => {
                let Some(list) = members.get_mut(i).filter(|list| !list.is_empty()) else {
                    continue;
                };
                let index = usize::try_from(l.rank.saturating_sub(1))
                    .unwrap_or(usize::MAX)
                    .min(list.len() - 1);
                let (_, &mut key, _) = list.select_nth_unstable(index);
                *slot = Some(Scalar::float(V::T::from_key(key).to_f64()));
            }
            Err(_) => open.push(*l),
        }
    }
    drop(members);
    if !open.is_empty() {
        let targets: Vec<Target> = open
            .iter()
            .map(|l| {
                let lo = u64::from(l.prefix) << low;
                Target {
                    lo,
                    hi: lo | ((1u64 << low) - 1),
                    rank: l.rank,
                    count: l.count,
                }
            })
            .collect();
        let keys = refine(&Keys { view, chunk }, &targets, cancel)?;
        for (l, k) in open.iter().zip(keys) {
            if let Some(slot) = q.get_mut(l.quantile) {
                *slot = Some(Scalar::float(V::T::from_key(k).to_f64()));
            }
        }
    }
    stats.quantiles = Some(Quantiles(q));
    if from_histogram {
        let (q, error) = histogram_quantiles(&linear, finite, bins.edges());
        stats.quantiles = Some(q);
        stats.quantile_error = Some(error);
    }
    stats.histogram = Some(Histogram {
        edges: bins.into_edges(),
        counts: linear,
    });
    Ok(stats)
}

/// Where a quantile's rank falls among the buckets.
#[derive(Debug, Clone, Copy)]
struct Located {
    /// Index into [`QUANTILES`].
    quantile: usize,
    prefix: u32,
    /// Rank inside the bucket, 1-based.
    rank: u64,
    /// Values in the bucket.
    count: u64,
}

/// The keys of the finite values of a view.
struct Keys<'a, V> {
    view: &'a V,
    chunk: u64,
}

impl<V: View> KeySource for Keys<'_, V> {
    fn len(&self) -> u64 {
        self.view.len()
    }
    fn chunk_elems(&self) -> u64 {
        self.chunk
    }
    fn key_bits(&self) -> u32 {
        V::T::KEY_BITS
    }
    fn for_each_block(&self, range: std::ops::Range<u64>, f: &mut dyn FnMut(&[u64])) {
        let mut keys = [0u64; BLOCK];
        for_each_block(self.view, range, |vals| {
            // NaN and ±Inf keys lie outside every interval of finite
            // values, so they need no filtering here.
            for (k, &x) in keys.iter_mut().zip(vals) {
                *k = x.key();
            }
            f(keys.get(..vals.len()).unwrap_or(&[]));
        });
    }
}
