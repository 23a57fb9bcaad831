//! The buckets pass 2 looks at ([`Marked`]): a bitmap of them, and what
//! pass 2 does with each one's values (bin them beside an edge, keep them
//! for a quantile, test them against a 6σ threshold).

use super::super::views::FloatLane;
use super::low_bits;
use crate::stats::bins::FloatBins;
use crate::stats::kernel::MARK_WORDS;

/// The buckets pass 2 looks at, and what it does with their values.
pub(super) struct Marked {
    /// One bit per bucket.
    pub(super) words: Vec<u64>,
    /// Marked buckets before each word (for the rank of a bucket).
    before: Vec<u32>,
    /// One entry per marked bucket, in bucket order.
    entries: Vec<MarkedBucket>,
}

/// What pass 2 does with the values of one marked bucket.
#[derive(Debug, Clone, Copy)]
pub(super) struct MarkedBucket {
    /// Whether the bucket holds a bin edge: its values are binned here.
    pub(super) straddles: bool,
    /// Whether `base` and `steps` give the bin (at most two edges inside).
    pub(super) steps_known: bool,
    /// The bin of the bucket's lowest values.
    pub(super) base: usize,
    /// The keys from which the bin is one, then two, above `base`
    /// (`u64::MAX`: no such step).
    pub(super) steps: [u64; 2],
    /// Index of the kept list of a quantile's bucket (`u32::MAX`: none).
    pub(super) kept: u32,
    /// Whether a 6σ threshold cuts the bucket: its values are tested here.
    pub(super) cut: bool,
}

impl Marked {
    /// `straddling`, `kept` and `cut` are sorted bucket indices.
    pub(super) fn new<T: FloatLane>(
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
    pub(super) fn entry(&self, p: u32) -> Option<&MarkedBucket> {
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
