//! The prefix counts of pass 1: one thread's [`Counts`] in a [`Tally`]'s
//! tables, spilled into 64-bit counters before any could wrap, merged and
//! walked over the buckets they may hold only; the tables kept for the next
//! scans ([`TABLES`]) and given back clear.

use std::sync::Mutex;

use super::super::views::FloatLane;
use super::low_bits;
use crate::mem::written_zeros;
use crate::stats::kernel::{BUCKETS, Specials, Tally};

/// Values a table of counters takes before it is spilled: below 2^40, so
/// that no wrap count can reach 2^32 (a few thousand in the tests, so that
/// they spill).
const SPILL_AFTER: u64 = if cfg!(test) {
    1 << 14
} else {
    (u32::MAX as u64) << 8
};

/// A [`Tally`]'s tables, owned.
type Tables = (Box<[u8]>, Box<[u32]>);

/// Prefix tables kept for the next scan: clearing a table costs one pass
/// over its 5 MiB, mapping a new one a page fault per 4 KiB, which two
/// threads then take in turn.
pub(super) static TABLES: Mutex<Vec<Tables>> = Mutex::new(Vec::new());

/// Tables kept at most in [`TABLES`] (20 MiB each with two of them).
pub(super) const KEPT_TABLES: usize = 8;

/// Prefix counts of one thread's chunks, in a [`Tally`]'s tables, spilled
/// into 64-bit counters before any could wrap. The tables go back to
/// [`TABLES`], cleared, when the counts are dropped. Only the buckets in
/// `touched` can hold counts: merging, walking and clearing look at those
/// alone (a few thousand buckets for weights, of the million).
pub(super) struct Counts {
    low: Box<[u8]>,
    wraps: Box<[u32]>,
    spill: Vec<u64>,
    /// Values counted in the tables since they were last spilled (or
    /// cleared).
    pub(super) since: u64,
    /// The buckets that may hold counts (empty when `start ≥ end`).
    touched: std::ops::Range<usize>,
}

impl Counts {
    pub(super) fn new() -> Self {
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

    pub(super) fn tally(&mut self) -> Option<Tally<'_>> {
        Some(Tally {
            low: <&mut [u8; BUCKETS]>::try_from(&mut *self.low).ok()?,
            wraps: <&mut [u32; BUCKETS]>::try_from(&mut *self.wraps).ok()?,
        })
    }

    /// Records which buckets the values summed in `sp` fall in: those of
    /// its range, and every bucket when it holds NaN or ±Inf (their
    /// buckets lie at both ends).
    pub(super) fn touch<T: FloatLane>(&mut self, sp: &Specials) {
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
    pub(super) fn reserve(&mut self, n: u64) {
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
    pub(super) fn merge(mut self, mut other: Counts) -> Counts {
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
    pub(super) fn occupied(&self) -> Vec<u32> {
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
    #[inline]
    pub(super) fn take(&mut self, p: usize) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
