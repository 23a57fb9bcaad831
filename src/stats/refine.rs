//! Exact quantiles of F32, F64, C64 and 32/64-bit integer tensors without
//! sorting (or even holding) the tensor.
//!
//! Values are mapped to order-preserving `u64` keys. After the linear
//! histogram, each quantile's rank is known to fall in one bin, i.e. in an
//! interval of keys, at a known rank inside it. Each further pass over the
//! data narrows every open interval: an interval holding few enough values
//! has them collected and selected; a larger one is split into up to
//! 2^16 buckets of keys and counted, and the bucket holding the rank becomes
//! the next interval. A 64-bit key space needs at most four such splits, so
//! the number of passes is bounded whatever the data; in practice one or
//! two passes follow the histogram. Memory stays bounded by
//! [`COLLECT_BUDGET`] keys and the bucket tables.

use std::ops::Range;

use super::bins::{QUANTILES, nearest_rank};
use super::kernel::for_each_hit;
use super::par_chunks;
use crate::jobs::{CancelToken, Cancelled};

/// Most keys held at once by the collecting intervals of one pass (kept
/// as 32-bit offsets from the interval's start: 16 MiB).
const COLLECT_BUDGET: u64 = 1 << 22;

/// Total bucket counters of the splitting intervals of one pass.
const BUCKET_BUDGET: u64 = 1 << 17;

/// Passes after which the search gives up and reports the interval's lower
/// end (it cannot happen with unchanged data: see the module docs).
const MAX_PASSES: usize = 16;

/// The keys of the values of a tensor that quantiles are taken over.
pub(crate) trait KeySource: Sync {
    /// Elements of the tensor, counted or not.
    fn len(&self) -> u64;
    /// Elements per chunk of work.
    fn chunk_elems(&self) -> u64;
    /// Significant bits of the keys (32 for f32 keys, 64 otherwise).
    fn key_bits(&self) -> u32;
    /// Calls `f` with the keys of the counted (finite) values among the
    /// elements `range`, a block at a time.
    fn for_each_block(&self, range: Range<u64>, f: &mut dyn FnMut(&[u64]));
}

/// A rank to find: the `rank`-th smallest (1-based) of the `count` values
/// whose keys lie in `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    /// Lowest key of the interval.
    pub lo: u64,
    /// Highest key of the interval.
    pub hi: u64,
    /// Rank inside the interval, 1-based.
    pub rank: u64,
    /// How many values lie inside the interval (the rank is among them).
    pub count: u64,
}

/// For each quantile of [`QUANTILES`], the bin of `counts` that holds its
/// nearest rank among the `finite` values, and the rank inside that bin.
pub(crate) fn bins_of_quantiles(counts: &[u64], finite: u64) -> [Option<(usize, u64)>; 9] {
    let mut out = [None; 9];
    for (slot, &(_, permille)) in out.iter_mut().zip(&QUANTILES) {
        let Some(rank) = nearest_rank(permille, finite) else {
            continue;
        };
        let mut below = 0u64;
        for (bin, &c) in counts.iter().enumerate() {
            if rank <= below + c {
                *slot = Some((bin, rank - below));
                break;
            }
            below += c;
        }
    }
    out
}

/// What one pass gathers for one interval.
enum Store {
    /// Offsets `key − lo` of every key in the interval.
    Offsets(Vec<u32>),
    /// Keys per bucket of `2^shift` keys.
    Counts(Vec<u64>),
}

/// How one interval is handled in a pass.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// Keep every key: the interval is small enough to sort.
    Collect,
    /// Count keys in buckets of `2^shift` keys.
    Split { shift: u32, buckets: usize },
}

/// The key at each target's rank.
#[expect(
    clippy::too_many_lines,
    reason = "one narrowing loop over the buckets; its steps share the candidate state"
)]
pub(crate) fn refine(
    src: &dyn KeySource,
    targets: &[Target],
    cancel: &CancelToken,
) -> Result<Vec<u64>, Cancelled> {
    let mut open: Vec<Target> = targets.to_vec();
    let mut found: Vec<Option<u64>> = open
        .iter()
        .map(|t| (t.lo >= t.hi).then_some(t.lo))
        .collect();
    for _ in 0..MAX_PASSES {
        // The distinct open intervals, smallest first.
        let mut intervals: Vec<(u64, u64, u64)> = open
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(t, _)| (t.lo, t.hi, t.count))
            .collect();
        intervals.sort_unstable_by_key(|&(lo, hi, count)| (count, lo, hi));
        intervals.dedup();
        if intervals.is_empty() {
            break;
        }
        // Intervals are taken smallest first into the collecting budget;
        // an interval wider than 2^32 keys is always split (its keys would
        // not fit the 32-bit offsets that collecting keeps).
        let mut budget_used = 0u64;
        let collect: Vec<bool> = intervals
            .iter()
            .map(|&(lo, hi, count)| {
                let fits = u32::try_from(hi - lo).is_ok()
                    && budget_used.saturating_add(count) <= COLLECT_BUDGET;
                if fits {
                    budget_used += count;
                }
                fits
            })
            .collect();
        let splitting = collect.iter().filter(|c| !**c).count().max(1) as u64;
        let bucket_bits = (BUCKET_BUDGET / splitting).max(256).ilog2().min(16);
        let plans: Vec<Plan> = intervals
            .iter()
            .zip(&collect)
            .map(|(&(lo, hi, _), &c)| {
                if c {
                    Plan::Collect
                } else {
                    let span_bits = 64 - (hi - lo).leading_zeros();
                    let shift = span_bits.saturating_sub(bucket_bits);
                    Plan::Split {
                        shift,
                        buckets: (((hi - lo) >> shift) + 1) as usize,
                    }
                }
            })
            .collect();
        let spans: Vec<(u64, u64)> = intervals.iter().map(|&(lo, hi, _)| (lo, hi - lo)).collect();
        // A cheap first test: which of the 65,536 groups of keys (by their
        // top 16 bits) meet an open interval at all.
        let shift = src.key_bits().clamp(16, 64) - 16;
        let mut wanted = vec![false; 1 << 16];
        for &(lo, hi, _) in &intervals {
            let (a, b) = ((lo >> shift) as usize, (hi >> shift) as usize);
            for w in wanted.iter_mut().take(b.saturating_add(1)).skip(a) {
                *w = true;
            }
        }
        let identity = || -> Vec<Store> {
            plans
                .iter()
                .map(|p| match p {
                    Plan::Collect => Store::Offsets(Vec::new()),
                    Plan::Split { buckets, .. } => Store::Counts(vec![0; *buckets]),
                })
                .collect()
        };
        let acc = par_chunks(
            src.len(),
            src.chunk_elems(),
            cancel,
            identity,
            |acc, range| {
                let mut hits = [0u64; super::kernel::BLOCK];
                // A fixed-size table: the index needs no bounds check.
                let wanted: &[bool; 1 << 16] = match wanted.as_slice().try_into() {
                    Ok(w) => w,
                    Err(_) => return,
                };
                src.for_each_block(range, &mut |keys| {
                    let mut n = 0;
                    for &k in keys {
                        if wanted[((k >> shift) & 0xffff) as usize]
                            && let Some(slot) = hits.get_mut(n)
                        {
                            *slot = k;
                            n += 1;
                        }
                    }
                    for_each_hit(hits.get(..n).unwrap_or(&[]), &spans, |i, k| {
                        let (Some(plan), Some(store), Some(&(lo, _))) =
                            (plans.get(i), acc.get_mut(i), spans.get(i))
                        else {
                            return;
                        };
                        match (*plan, store) {
                            (Plan::Collect, Store::Offsets(v)) => v.push((k - lo) as u32),
                            (Plan::Split { shift, .. }, Store::Counts(c)) => {
                                if let Some(slot) = c.get_mut(((k - lo) >> shift) as usize) {
                                    *slot += 1;
                                }
                            }
                            _ => {}
                        }
                    });
                });
            },
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    match (x, y) {
                        (Store::Offsets(x), Store::Offsets(y)) => x.extend(y),
                        (Store::Counts(x), Store::Counts(y)) => {
                            for (p, q) in x.iter_mut().zip(y) {
                                *p += q;
                            }
                        }
                        _ => {}
                    }
                }
                a
            },
        )?;
        let mut acc = acc;
        for (i, &(lo, hi, _)) in intervals.iter().enumerate() {
            let Some(store) = acc.get_mut(i) else {
                continue;
            };
            if let Store::Offsets(v) = store {
                v.sort_unstable();
            }
            for (t, f) in open.iter_mut().zip(found.iter_mut()) {
                if f.is_some() || t.lo != lo || t.hi != hi {
                    continue;
                }
                match (&*store, plans.get(i)) {
                    (Store::Offsets(v), _) => {
                        let index = usize::try_from(t.rank.saturating_sub(1)).unwrap_or(usize::MAX);
                        let offset = v.get(index).or(v.last()).copied().unwrap_or(0);
                        *f = Some(lo + u64::from(offset));
                    }
                    (Store::Counts(c), Some(&Plan::Split { shift, .. })) => {
                        narrow(t, c, shift);
                        if t.lo >= t.hi {
                            *f = Some(t.lo);
                        }
                    }
                    _ => *f = Some(lo),
                }
            }
        }
    }
    Ok(open
        .iter()
        .zip(found)
        .map(|(t, f)| f.unwrap_or(t.lo))
        .collect())
}

/// Moves a target into the bucket that holds its rank.
fn narrow(t: &mut Target, buckets: &[u64], shift: u32) {
    let mut below = 0u64;
    let mut chosen = None;
    for (j, &c) in buckets.iter().enumerate() {
        if c > 0 && t.rank <= below + c {
            chosen = Some((j, c));
            break;
        }
        below += c;
    }
    let Some((j, c)) = chosen else {
        // The data changed under us: stop at the interval's start.
        t.hi = t.lo;
        return;
    };
    let start = t.lo + ((j as u64) << shift);
    let end = start.saturating_add((1u64 << shift) - 1).min(t.hi);
    *t = Target {
        lo: start,
        hi: end,
        rank: t.rank - below,
        count: c,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Keys(Vec<u64>);

    impl KeySource for Keys {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn chunk_elems(&self) -> u64 {
            1000
        }
        fn key_bits(&self) -> u32 {
            64
        }
        fn for_each_block(&self, range: Range<u64>, f: &mut dyn FnMut(&[u64])) {
            f(&self.0[range.start as usize..range.end as usize]);
        }
    }

    #[test]
    fn finds_exact_ranks_in_wide_intervals() {
        let keys: Vec<u64> = (0..5000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let targets: Vec<Target> = [1u64, 17, 2500, 4999, 5000]
            .iter()
            .map(|&rank| Target {
                lo: 0,
                hi: u64::MAX,
                rank,
                count: 5000,
            })
            .collect();
        let found = refine(&Keys(keys.clone()), &targets, &CancelToken::new()).expect("ok");
        for (t, k) in targets.iter().zip(found) {
            assert_eq!(k, sorted[t.rank as usize - 1]);
        }
        // Split rather than collect: force it with a huge count.
        let mut t = targets[2];
        t.count = COLLECT_BUDGET + 1;
        let found = refine(&Keys(keys), &[t], &CancelToken::new()).expect("ok");
        assert_eq!(found[0], sorted[2499]);
    }

    #[test]
    fn ranks_in_bins() {
        let q = bins_of_quantiles(&[1, 0, 998, 1], 1000);
        assert_eq!(q[0], Some((0, 1)));
        assert_eq!(q[1], Some((2, 9)));
        assert_eq!(q[8], Some((2, 998)));
        assert_eq!(bins_of_quantiles(&[], 0), [None; 9]);
    }
}
