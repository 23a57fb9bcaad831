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

use std::sync::Mutex;

use super::views::{FloatLane, View};
use super::{
    Pass1Totals, for_each_block, histogram_counts, histogram_quantiles, moments_pass, tiny_bits,
};
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::mem::written_zeros;
use crate::stats::bins::{FloatBins, QUANTILES, nearest_rank};
use crate::stats::kernel::{
    BLOCK, BUCKETS, Keyed, Lane, MARK_WORDS, PART, PREFIX_BITS, Prefilter, Prefilter64, Specials,
    Tally, Wide,
};
use crate::stats::refine::{KeySource, Target, refine};
use crate::stats::report::Sigma6;
use crate::stats::simd::{
    block_and_prefixes_f32, block_and_prefixes_f64, count_prefixes, for_each_marked,
    for_each_marked_f32, for_each_marked_f64,
};
use crate::stats::{
    Histogram, QuantileMode, Quantiles, Scalar, StatsOptions, ValueStats, empty_histogram,
    log2_histogram, par_chunks,
};

/// Tensors of at most this many elements are sorted instead of counted.
pub(crate) const SMALL: u64 = 1 << 15;

/// Keys of quantile buckets kept at most in pass 2 (16 MiB; a few
/// thousand in the tests, so that they reach the refining passes).
const MEMBER_BUDGET: u64 = if cfg!(test) { 1 << 12 } else { 1 << 21 };

/// Values a table of counters takes before it is spilled: below 2^40, so
/// that no wrap count can reach 2^32 (a few thousand in the tests, so that
/// they spill).
const SPILL_AFTER: u64 = if cfg!(test) {
    1 << 14
} else {
    (u32::MAX as u64) << 8
};

/// Pass 2 bins every value when more than this share of them lie in
/// buckets that hold a bin edge.
const STRADDLE_SHARE: u64 = 8;

/// A [`Tally`]'s tables, owned.
type Tables = (Box<[u8]>, Box<[u32]>);

/// Prefix tables kept for the next scan: clearing a table costs one pass
/// over its 5 MiB, mapping a new one a page fault per 4 KiB, which two
/// threads then take in turn.
static TABLES: Mutex<Vec<Tables>> = Mutex::new(Vec::new());

/// Tables kept at most in [`TABLES`] (20 MiB each with two of them).
const KEPT_TABLES: usize = 8;

/// Prefix counts of one thread's chunks, in a [`Tally`]'s tables, spilled
/// into 64-bit counters before any could wrap. The tables go back to
/// [`TABLES`], cleared, when the counts are dropped. Only the buckets in
/// `touched` can hold counts: merging, walking and clearing look at those
/// alone (a few thousand buckets for weights, of the million).
struct Counts {
    low: Box<[u8]>,
    wraps: Box<[u32]>,
    spill: Vec<u64>,
    /// Values counted in the tables since they were last spilled (or
    /// cleared).
    since: u64,
    /// The buckets that may hold counts (empty when `start ≥ end`).
    touched: std::ops::Range<usize>,
}

impl Counts {
    fn new() -> Self {
        let kept = TABLES.lock().ok().and_then(|mut t| t.pop());
        let (low, wraps) = kept.unwrap_or_else(|| {
            (
                written_zeros::<u8>(BUCKETS).into_boxed_slice(),
                written_zeros::<u32>(BUCKETS).into_boxed_slice(),
            )
        });
        Self {
            low,
            wraps,
            spill: Vec::new(),
            since: 0,
            touched: 0..0,
        }
    }

    fn tally(&mut self) -> Option<Tally<'_>> {
        Some(Tally {
            low: <&mut [u8; BUCKETS]>::try_from(&mut *self.low).ok()?,
            wraps: <&mut [u32; BUCKETS]>::try_from(&mut *self.wraps).ok()?,
        })
    }

    /// Records which buckets the values summed in `sp` fall in: those of
    /// its range, and every bucket when it holds NaN or ±Inf (their
    /// buckets lie at both ends).
    fn touch<T: FloatLane>(&mut self, sp: &Specials) {
        let touched = if sp.nan + sp.pos_inf + sp.neg_inf > 0 {
            0..BUCKETS
        } else if sp.min <= sp.max {
            let low = low_bits::<T>();
            // ±0 compare equal: the range takes −0's bucket below and +0's
            // above.
            let lo = T::from_f64(if sp.min == 0.0 { -0.0 } else { sp.min }).key() >> low;
            let hi = T::from_f64(if sp.max == 0.0 { 0.0 } else { sp.max }).key() >> low;
            usize::try_from(lo).unwrap_or(0)..usize::try_from(hi).map_or(BUCKETS, |h| h + 1)
        } else {
            return;
        };
        self.touched = union(&self.touched, &touched);
    }

    /// Makes room for `n` more values.
    fn reserve(&mut self, n: u64) {
        if self.since + n > SPILL_AFTER {
            self.spill_all();
        }
        self.since += n;
    }

    fn spill_all(&mut self) {
        if self.spill.is_empty() {
            self.spill = vec![0; BUCKETS];
        }
        for p in self.touched.clone() {
            let c = self.take_tables(p);
            if let Some(s) = self.spill.get_mut(p) {
                *s += c;
            }
        }
        self.since = 0;
    }

    /// Adds `other`'s counts, clearing its tables as it goes.
    fn merge(mut self, mut other: Counts) -> Counts {
        if self.since + other.since > SPILL_AFTER {
            self.spill_all();
            other.spill_all();
        }
        let r = other.touched.clone();
        if other.since > 0
            && let (Some(a), Some(b), Some(wa), Some(wb)) = (
                self.low.get_mut(r.clone()),
                other.low.get_mut(r.clone()),
                self.wraps.get_mut(r.clone()),
                other.wraps.get_mut(r),
            )
        {
            for (((a, b), wa), wb) in a.iter_mut().zip(b).zip(wa).zip(wb) {
                let sum = u32::from(*a) + u32::from(std::mem::take(b));
                *a = sum as u8;
                *wa += std::mem::take(wb) + (sum >> 8);
            }
        }
        if !other.spill.is_empty() {
            if self.spill.is_empty() {
                self.spill = std::mem::take(&mut other.spill);
            } else {
                for (a, b) in self.spill.iter_mut().zip(&other.spill) {
                    *a += b;
                }
            }
        }
        self.since += other.since;
        other.since = 0;
        self.touched = union(&self.touched, &other.touched);
        self
    }

    /// The buckets of `touched` that hold counts, in order. Runs of empty
    /// buckets (most of the range of values around zero: the tiny
    /// magnitudes) are skipped a group at a time.
    fn occupied(&self) -> Vec<u32> {
        const GROUP: usize = 32;
        let r = self.touched.clone();
        let mut out = Vec::new();
        let (Some(low), Some(wraps)) = (self.low.get(r.clone()), self.wraps.get(r.clone())) else {
            return out;
        };
        let spill = self.spill.get(r.clone());
        for (g, (l, w)) in low.chunks(GROUP).zip(wraps.chunks(GROUP)).enumerate() {
            let s = spill
                .and_then(|s| s.get(g * GROUP..))
                .map(|s| s.get(..l.len()).unwrap_or(s));
            let any = l.iter().fold(0, |a, &b| a | b) != 0
                || w.iter().fold(0, |a, &b| a | b) != 0
                || s.is_some_and(|s| s.iter().any(|&x| x != 0));
            if !any {
                continue;
            }
            for (i, (&l, &w)) in l.iter().zip(w).enumerate() {
                let spilled = s.and_then(|s| s.get(i)).is_some_and(|&x| x != 0);
                if l != 0 || w != 0 || spilled {
                    out.push((r.start + g * GROUP + i) as u32);
                }
            }
        }
        out
    }

    /// The count of bucket `p` in the tables, clearing it there.
    fn take_tables(&mut self, p: usize) -> u64 {
        let low = self.low.get_mut(p).map_or(0, std::mem::take);
        let wraps = self.wraps.get_mut(p).map_or(0, std::mem::take);
        u64::from(wraps) << 8 | u64::from(low)
    }

    /// The count of bucket `p`, clearing it.
    fn take(&mut self, p: usize) -> u64 {
        self.take_tables(p) + self.spill.get(p).copied().unwrap_or(0)
    }
}

/// The smallest range holding both (an empty one holds nothing).
fn union(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> std::ops::Range<usize> {
    if a.is_empty() {
        b.clone()
    } else if b.is_empty() {
        a.clone()
    } else {
        a.start.min(b.start)..a.end.max(b.end)
    }
}

impl Drop for Counts {
    fn drop(&mut self) {
        // Counts read to the end with `take` are already clear.
        if self.since > 0
            && let (Some(low), Some(wraps)) = (
                self.low.get_mut(self.touched.clone()),
                self.wraps.get_mut(self.touched.clone()),
            )
        {
            low.fill(0);
            wraps.fill(0);
        }
        if self.low.len() == BUCKETS
            && self.wraps.len() == BUCKETS
            && let Ok(mut kept) = TABLES.lock()
            && kept.len() < KEPT_TABLES
        {
            kept.push((
                std::mem::take(&mut self.low),
                std::mem::take(&mut self.wraps),
            ));
        }
    }
}

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
            if let Some((Wide::F32, raw)) = view.raw(range.clone()) {
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
            if let Some((Wide::F32, raw)) = view.raw(range.clone()) {
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

/// The buckets pass 2 looks at, and what it does with their values.
struct Marked {
    /// One bit per bucket.
    words: Vec<u64>,
    /// Marked buckets before each word (for the rank of a bucket).
    before: Vec<u32>,
    /// One entry per marked bucket, in bucket order.
    entries: Vec<MarkedBucket>,
}

/// What pass 2 does with the values of one marked bucket.
#[derive(Debug, Clone, Copy)]
struct MarkedBucket {
    /// Whether the bucket holds a bin edge: its values are binned here.
    straddles: bool,
    /// Whether `base` and `steps` give the bin (at most two edges inside).
    steps_known: bool,
    /// The bin of the bucket's lowest values.
    base: usize,
    /// The keys from which the bin is one, then two, above `base`
    /// (`u64::MAX`: no such step).
    steps: [u64; 2],
    /// Index of the kept list of a quantile's bucket (`u32::MAX`: none).
    kept: u32,
    /// Whether a 6σ threshold cuts the bucket: its values are tested here.
    cut: bool,
}

impl Marked {
    /// `straddling`, `kept` and `cut` are sorted bucket indices.
    fn new<T: FloatLane>(
        straddling: &[u32],
        kept: &[u32],
        cut: &[u32],
        bins: &FloatBins,
        min: f64,
        max: f64,
    ) -> Self {
        let low = low_bits::<T>();
        let mut all: Vec<u32> = straddling.iter().chain(kept).chain(cut).copied().collect();
        all.sort_unstable();
        all.dedup();
        let mut words = vec![0u64; MARK_WORDS];
        for &p in &all {
            if let Some(w) = words.get_mut((p >> 6) as usize) {
                *w |= 1 << (p & 63);
            }
        }
        let mut before = Vec::with_capacity(MARK_WORDS);
        let mut total = 0u32;
        for w in &words {
            before.push(total);
            total += w.count_ones();
        }
        let bin_at = |key: u64| bins.bin_of(T::from_key(key).to_f64().clamp(min, max));
        let entries = all
            .iter()
            .map(|&p| {
                let first = u64::from(p) << low;
                let last = first | ((1u64 << low) - 1);
                let base = bin_at(first);
                let top = bin_at(last);
                let mut steps = [u64::MAX; 2];
                let steps_known = top - base <= 2;
                if steps_known {
                    for (j, step) in steps.iter_mut().enumerate().take(top - base) {
                        // The first key whose bin is base + j + 1.
                        let (mut lo, mut hi) = (first, last);
                        while lo < hi {
                            let mid = lo + (hi - lo) / 2;
                            if bin_at(mid) > base + j {
                                hi = mid;
                            } else {
                                lo = mid + 1;
                            }
                        }
                        *step = lo;
                    }
                }
                MarkedBucket {
                    straddles: straddling.binary_search(&p).is_ok(),
                    steps_known,
                    base,
                    steps,
                    kept: kept.binary_search(&p).map_or(u32::MAX, |i| i as u32),
                    cut: cut.binary_search(&p).is_ok(),
                }
            })
            .collect();
        Self {
            words,
            before,
            entries,
        }
    }

    /// The entry of bucket `p`, when it is marked.
    #[inline]
    fn entry(&self, p: u32) -> Option<&MarkedBucket> {
        let w = (p >> 6) as usize;
        let word = *self.words.get(w)?;
        let bit = 1u64 << (p & 63);
        if word & bit == 0 {
            return None;
        }
        let rank = self.before.get(w)? + (word & (bit - 1)).count_ones();
        self.entries.get(rank as usize)
    }
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

/// [`stats`] of a tensor of at most [`SMALL`] elements: pass 1 without
/// counters, then the finite values' keys sorted.
fn small<V: View>(
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

#[cfg(test)]
mod tests {
    use super::super::views::{C64Abs, C64Part, F32View, F64View};
    use super::*;

    /// xorshift64*.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let u = self.unit().max(1e-300);
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
        }
    }

    /// Values of many shapes: weights, a narrow range (buckets holding
    /// many edges), few distinct values (most values beside an edge),
    /// specials, the extremes of the type, a constant.
    fn cases(n: usize) -> Vec<(&'static str, Vec<f64>)> {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let weights: Vec<f64> = (0..n).map(|_| r.normal() * 0.02).collect();
        let narrow: Vec<f64> = (0..n).map(|_| 1.0 + r.unit() * 1e-4).collect();
        let few: Vec<f64> = (0..n).map(|i| f64::from((i % 5) as u8) - 2.0).collect();
        let mut specials = weights.clone();
        for (i, x) in specials.iter_mut().enumerate() {
            match i % 97 {
                0 => *x = f64::NAN,
                1 => *x = f64::INFINITY,
                2 => *x = f64::NEG_INFINITY,
                3 => *x = 0.0,
                4 => *x = -0.0,
                5 => *x = 1e-40,
                _ => {}
            }
        }
        let wide: Vec<f64> = (0..n)
            .map(|i| match i % 3 {
                0 => f64::from(f32::MAX) * r.unit(),
                1 => -f64::from(f32::MAX) * r.unit(),
                _ => r.normal(),
            })
            .collect();
        let constant = vec![0.5; n];
        let all_nan = vec![f64::NAN; n];
        vec![
            ("weights", weights),
            ("narrow", narrow),
            ("few values", few),
            ("specials", specials),
            ("wide", wide),
            ("constant", constant),
            ("all NaN", all_nan),
        ]
    }

    fn f32_bytes(vals: &[f64]) -> Vec<u8> {
        vals.iter()
            .flat_map(|&x| (x as f32).to_le_bytes())
            .collect()
    }

    fn f64_bytes(vals: &[f64]) -> Vec<u8> {
        vals.iter().flat_map(|&x| x.to_le_bytes()).collect()
    }

    /// The counted scan and the sorting one agree on every figure, bit for
    /// bit (the sorting one is the reference: it sees every value).
    fn agree<V: View>(view: &V, what: &str) {
        let options = StatsOptions::default();
        let (cancel, progress) = (CancelToken::new(), Progress::new());
        assert!(
            view.len() > SMALL,
            "{what}: large enough for the counted scan"
        );
        let counted = stats(view, &options, &cancel, &progress).expect("not cancelled");
        let sorted = small(view, &options, &cancel, &progress).expect("not cancelled");
        assert_eq!(format!("{counted:?}"), format!("{sorted:?}"), "{what}");
        // Both scans report both their passes (one, with no finite value).
        let passes = if counted.finite > 0 { 4 } else { 3 };
        assert_eq!(
            progress.done(),
            passes * view.len() * view.element_bytes(),
            "{what}"
        );
    }

    #[test]
    fn counted_scan_matches_the_sorted_values() {
        let n = SMALL as usize * 3 + 17;
        for (name, vals) in cases(n) {
            agree(&F32View(&f32_bytes(&vals)), &format!("F32 {name}"));
            agree(&F64View(&f64_bytes(&vals)), &format!("F64 {name}"));
        }
    }

    #[test]
    fn complex_parts_and_magnitudes_match() {
        let n = SMALL as usize * 2 + 3;
        let cases = cases(2 * n);
        let (_, vals) = &cases[3];
        let bytes = f32_bytes(vals);
        agree(
            &C64Part {
                bytes: &bytes,
                imag: false,
            },
            "C64 real",
        );
        agree(
            &C64Part {
                bytes: &bytes,
                imag: true,
            },
            "C64 imaginary",
        );
        agree(&C64Abs(&bytes), "C64 magnitude");
    }

    #[test]
    fn other_bin_counts_match() {
        let n = SMALL as usize + 1000;
        let (_, vals) = &cases(n)[0];
        let bytes = f32_bytes(vals);
        for bins in [1, 7, 1000, 100_000] {
            let options = StatsOptions {
                bins,
                ..StatsOptions::default()
            };
            let (cancel, progress) = (CancelToken::new(), Progress::new());
            let view = F32View(&bytes);
            let counted = stats(&view, &options, &cancel, &progress).expect("not cancelled");
            let sorted = small(&view, &options, &cancel, &progress).expect("not cancelled");
            assert_eq!(format!("{counted:?}"), format!("{sorted:?}"), "{bins} bins");
        }
    }

    #[test]
    fn quantiles_are_the_sorted_values() {
        let n = SMALL as usize * 2;
        let (_, vals) = &cases(n)[0];
        let bytes = f32_bytes(vals);
        let got = stats(
            &F32View(&bytes),
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("not cancelled");
        let mut sorted: Vec<f64> = vals.iter().map(|&x| f64::from(x as f32)).collect();
        sorted.sort_by(f64::total_cmp);
        let q = got.quantiles.expect("quantiles");
        for (got, &(_, permille)) in q.0.iter().zip(&QUANTILES) {
            let rank = nearest_rank(permille, n as u64).expect("values");
            assert_eq!(*got, Some(Scalar::float(sorted[rank as usize - 1])));
        }
        let h = got.histogram.expect("histogram");
        assert_eq!(h.counts.iter().sum::<u64>(), n as u64);
    }

    #[test]
    fn cancelled_scans_stop() {
        let bytes = vec![0u8; 4 * (SMALL as usize + 1)];
        let cancel = CancelToken::new();
        cancel.cancel();
        let view = F32View(&bytes);
        assert!(stats(&view, &StatsOptions::default(), &cancel, &Progress::new()).is_err());
    }

    #[test]
    fn occupied_buckets_are_those_with_counts() {
        let mut counts = Counts::new();
        // A count of 256 leaves the low byte zero; a spilled count leaves
        // both tables zero; the others sit beside a group's edges and in
        // the short group at the end of the range.
        let mut table = counts.tally().expect("tables");
        for _ in 0..256 {
            table.add(40);
        }
        for p in [31, 32, 63, 70, 70, 71, 90] {
            table.add(p);
        }
        counts.spill = vec![0; BUCKETS];
        counts.spill[95] = 3;
        counts.since = 263;
        counts.touched = 10..97;
        assert_eq!(counts.occupied(), [31, 32, 40, 63, 70, 71, 90, 95]);
        let taken: Vec<u64> = counts
            .occupied()
            .into_iter()
            .map(|p| counts.take(p as usize))
            .collect();
        assert_eq!(taken, [1, 1, 256, 1, 2, 1, 1, 3]);
        // The tables are clear (the spilled counts stay until dropped); a
        // bucket outside the range is not looked at (and is taken here, so
        // that the tables go back clear).
        counts.tally().expect("tables").add(5);
        assert_eq!(counts.occupied(), [95]);
        assert_eq!(counts.take(5), 1);
        counts.since = 0;
    }

    #[test]
    fn tables_come_back_clear() {
        let n = SMALL as usize + 5;
        let (_, vals) = &cases(n)[0];
        let bytes = f32_bytes(vals);
        for _ in 0..3 {
            let _ = stats(
                &F32View(&bytes),
                &StatsOptions::default(),
                &CancelToken::new(),
                &Progress::new(),
            );
        }
        let kept = TABLES.lock().expect("lock");
        assert!(kept.len() <= KEPT_TABLES);
        assert!(
            kept.iter()
                .all(|(low, wraps)| low.iter().all(|&c| c == 0) && wraps.iter().all(|&c| c == 0))
        );
    }
}
