//! Key-prefix counting and the filter of marked prefixes: the two hot
//! loops of the exact float scan (`float/exact.rs`).
//!
//! A key is the order-preserving integer of a float (`Keyed::key`);
//! its top [`PREFIX_BITS`] bits name a bucket. For f32 that is the sign,
//! the exponent and the top 11 mantissa bits, so a bucket spans a relative
//! width of at most 2^−11 and a 256-bin histogram of weights has one
//! bucket in a hundred holding a bin edge.

/// Bits of a key prefix.
pub(crate) const PREFIX_BITS: u32 = 20;
/// Buckets of keys (one counter each).
pub(crate) const BUCKETS: usize = 1 << PREFIX_BITS;
/// Words of a bitmap with one bit per bucket.
pub(crate) const MARK_WORDS: usize = BUCKETS / 64;

/// Low bits of an f32 key below its prefix.
const LOW32: u32 = 32 - PREFIX_BITS;

/// The order-preserving key of f32 bits: every bit of negatives flipped,
/// the sign bit of the others.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn key32(bits: u32) -> u32 {
    bits ^ ((((bits as i32) >> 31) as u32) | 0x8000_0000)
}

/// A value as the prefix loops read it: the little-endian bytes of an
/// f32 as stored, or an f32 or f64 value.
pub(crate) trait Keyed: Copy {
    /// The value's order-preserving key (−0 just below +0; branch-free, so
    /// that its loops vectorise).
    fn key(self) -> u64;
    /// Its key's top [`PREFIX_BITS`] bits: the bucket.
    fn prefix(self) -> u32;
}

impl Keyed for [u8; 4] {
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn key(self) -> u64 {
        u64::from(key32(u32::from_le_bytes(self)))
    }
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn prefix(self) -> u32 {
        key32(u32::from_le_bytes(self)) >> LOW32
    }
}

impl Keyed for f32 {
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn key(self) -> u64 {
        u64::from(key32(self.to_bits()))
    }
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn prefix(self) -> u32 {
        key32(self.to_bits()) >> LOW32
    }
}

impl Keyed for f64 {
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn key(self) -> u64 {
        let b = self.to_bits();
        b ^ (((b as i64) >> 63) as u64 | (1 << 63))
    }
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn prefix(self) -> u32 {
        (self.key() >> (64 - PREFIX_BITS)) as u32
    }
}

/// Counts the key prefixes of `vals` into `tally`. While it counts it asks
/// for `ahead` (the next block) a cache line at a time, so that it arrives
/// while this block is counted, without filling the CPU's queue of misses
/// at once.
// Inlined into the vector copies of [`crate::stats::simd`], which compile it
// once more for their targets.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn count_prefixes<K: Keyed>(
    vals: &[K],
    ahead: &[K],
    idx: &mut [u32; PART],
    tally: &mut Tally<'_>,
) {
    // Values per cache line, and lines per 16 values.
    let per_line = (64 / size_of::<K>()).max(1);
    let lines_per_16 = (16 / per_line).max(1);
    let mut lines = ahead.chunks(per_line);
    let mut add = |i: u32| tally.add(i);
    // The keys of a whole part first (a loop the compiler vectorises), then
    // the adds: a part long enough that the vector stores of its keys have
    // left the store buffer before the adds load them one by one (a load
    // from a store still in flight would stall on its forwarding). The
    // adds take the part's two halves in turn: two neighbours of a half
    // fall in the same bucket far more often than values a half apart, and
    // an add that waits for the one before it to reach memory stalls.
    // `idx` is the caller's, so that it is not cleared for every block.
    for part in vals.chunks(PART) {
        for (o, &c) in idx.iter_mut().zip(part) {
            *o = c.prefix();
        }
        let keys = idx.get(..part.len()).unwrap_or(&[]);
        let (a, b) = keys.split_at(keys.len() / 2);
        for (a8, b8) in a.chunks(8).zip(b.chunks(8)) {
            for _ in 0..lines_per_16 {
                if let Some(line) = lines.next() {
                    crate::stats::simd::prefetch(line);
                }
            }
            for (&x, &y) in a8.iter().zip(b8) {
                add(x);
                add(y);
            }
        }
        // The last key of an odd part.
        if b.len() > a.len()
            && let Some(&last) = b.last()
        {
            add(last);
        }
    }
}

/// [`count_prefixes`] of little-endian f32 bytes.
#[cfg(test)]
pub(crate) fn count_prefixes_f32(
    bytes: &[u8],
    ahead: &[u8],
    idx: &mut [u32; PART],
    tally: &mut Tally<'_>,
) {
    count_prefixes(
        bytes.as_chunks::<4>().0,
        ahead.as_chunks::<4>().0,
        idx,
        tally,
    );
}

/// Values whose keys [`count_prefixes`] computes before it adds them.
pub(crate) const PART: usize = 2048;

/// Counters of the [`BUCKETS`] prefixes: a byte each, and the times each
/// byte wrapped. A byte table keeps the buckets that weights fill (some
/// twenty thousand) in L1, where 32-bit counters would spread them over
/// L2; a wrap, one add in 256, costs a rarely taken branch. The count of
/// bucket `p` is `256·wraps[p] + low[p]`: wrapping adds, the caller keeps
/// every count below 2^40.
pub(crate) struct Tally<'a> {
    pub low: &'a mut [u8; BUCKETS],
    pub wraps: &'a mut [u32; BUCKETS],
}

impl Tally<'_> {
    /// Counts one value of bucket `p` (its low [`PREFIX_BITS`] bits).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(crate) fn add(&mut self, p: u32) {
        let i = p as usize & (BUCKETS - 1);
        let c = self.low[i].wrapping_add(1);
        self.low[i] = c;
        if c == 0 {
            self.wraps[i] = self.wraps[i].wrapping_add(1);
        }
    }

    /// Counts `n` values of bucket `p`.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(crate) fn add_n(&mut self, p: u32, n: u32) {
        let i = p as usize & (BUCKETS - 1);
        let (c, carry) = self.low[i].overflowing_add(n as u8);
        self.low[i] = c;
        let wraps = (n >> 8) + u32::from(carry);
        if wraps != 0 {
            self.wraps[i] = self.wraps[i].wrapping_add(wraps);
        }
    }

    /// The count of bucket `p`.
    #[cfg(test)]
    pub(crate) fn get(&self, p: usize) -> u64 {
        let i = p & (BUCKETS - 1);
        u64::from(self.wraps[i]) << 8 | u64::from(self.low[i])
    }
}

/// Whether bucket `p` is marked.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn marked(marks: &[u64; MARK_WORDS], p: u32) -> bool {
    (marks[(p >> 6) as usize & (MARK_WORDS - 1)] >> (p & 63)) & 1 != 0
}

/// Adds to `hits` the key of each value whose bucket is marked, in order.
/// Marked buckets are few: a group of sixteen is tested at once, and
/// looked at value by value only when it holds one, with no branch per
/// value (in the buckets beside a bin edge, a value of a group is as
/// likely to be marked as not).
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn for_each_marked<K: Keyed>(
    vals: &[K],
    marks: &[u64; MARK_WORDS],
    hits: &mut Hits<'_>,
) {
    for part in vals.chunks(16) {
        let mut any = 0u64;
        for &c in part {
            let p = c.prefix();
            any |= marks[(p >> 6) as usize & (MARK_WORDS - 1)] >> (p & 63);
        }
        if any & 1 != 0 {
            for &c in part {
                hits.keep(c.key(), marked(marks, c.prefix()));
            }
        }
    }
}

/// [`for_each_marked`] of little-endian f32 bytes.
// Called by the x86-64 vector copies only (and their tests).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn for_each_marked_f32(bytes: &[u8], marks: &[u64; MARK_WORDS], hits: &mut Hits<'_>) {
    for_each_marked(bytes.as_chunks::<4>().0, marks, hits);
}

/// Keys the filters found, handed to the caller's closure [`HITS`] at a
/// time (one call per few hundred keys, not one per key).
pub(crate) struct Hits<'a> {
    keys: [u64; HITS],
    n: usize,
    out: &'a mut dyn FnMut(&[u64]),
}

/// Keys a [`Hits`] holds before it hands them on.
const HITS: usize = 256;

impl<'a> Hits<'a> {
    pub(crate) fn new(out: &'a mut dyn FnMut(&[u64])) -> Self {
        Self {
            keys: [0; HITS],
            n: 0,
            out,
        }
    }

    /// Keeps `key` when `keep` holds: written either way, counted only
    /// then, so that the caller's loop has no branch on it.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(crate) fn keep(&mut self, key: u64, keep: bool) {
        if self.n == HITS {
            self.flush();
        }
        if let Some(slot) = self.keys.get_mut(self.n) {
            *slot = key;
        }
        self.n += usize::from(keep);
    }

    /// Hands the kept keys on.
    pub(crate) fn flush(&mut self) {
        if self.n > 0 {
            (self.out)(self.keys.get(..self.n).unwrap_or(&[]));
            self.n = 0;
        }
    }
}

/// Bits of [`Prefilter::bloom`].
pub(crate) const BLOOM_BITS: u32 = 1024;

/// The bloom bit of the values of bucket `p`: the low bits of their raw
/// bits' prefix (the vector copies test the raw bits, with no key made),
/// which for a negative value are the key's flipped.
fn bloom_index(p: u32) -> u32 {
    let positive = p >> (PREFIX_BITS - 1) & 1 == 1;
    let low = p % BLOOM_BITS;
    if positive { low } else { BLOOM_BITS - 1 - low }
}

/// What the vector copies of the filter test before the bitmap, so that
/// they look up the bitmap only for the few values that may be marked (a
/// gather per value is what the filter cost, and on some CPUs gathers are
/// slow).
///
/// Two tests, either enough to make a value a candidate:
///
/// * *near an edge*: `t = (x − origin)·scale` is the value in bins from
///   the first edge, computed in f32; `|t − round(t)| ≤ |x|·slope + margin`.
///   Every value of a bucket that holds an inner edge passes it: the
///   bucket is narrower than `|x|·2^−11` (or `2^−137` below the normal
///   range), and `margin` covers the f32 roundings of `t`, the f64
///   roundings of the edges and those of the test itself (see
///   [`Prefilter::new`]).
/// * *in the bloom*: bit `(bits >> 12) mod 1024`, of the value's raw
///   bits, is set for each marked bucket that the first test is not known
///   to catch (a quantile's bucket, one a 6σ threshold cuts).
///
/// A candidate is then kept only if its bucket is marked, so every copy
/// calls `hit` with exactly the keys the portable filter does.
// Its fields are read by the x86-64 vector copies only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefilter {
    pub origin: f32,
    pub scale: f32,
    pub slope: f32,
    pub margin: f32,
    pub bloom: [u32; 32],
}

impl Prefilter {
    /// A prefilter for the marked buckets `others` (sorted or not) and,
    /// when `edges` is given, every bucket holding an inner edge of those
    /// bins over `[min, max]`, the range of the values. `None` when the
    /// near test cannot be made sound in f32 arithmetic (a range beyond
    /// f32, bins narrow next to f32's precision): the caller filters by the
    /// bitmap alone.
    pub(crate) fn new(edges: Option<(&[f64], f64, f64)>, others: &[u32]) -> Option<Self> {
        let bloom = bloom_of(others);
        let Some((edges, min, max)) = edges else {
            // No near test: |t − round(t)| ≥ 0 > −1, and NaN fails.
            return Some(Self {
                origin: 0.0,
                scale: 0.0,
                slope: 0.0,
                margin: -1.0,
                bloom,
            });
        };
        let bins = edges.len().checked_sub(1).filter(|&b| b > 0)? as f64;
        let range = max - min;
        // The value's f32 rounding of `x − origin` must not overflow, and
        // `origin` is the exact minimum.
        if !(range > 0.0 && range <= f64::from(f32::MAX) && f64::from(min as f32) == min) {
            return None;
        }
        let exact_scale = bins / range;
        let scale = exact_scale as f32;
        let edge_error = edge_error(edges, min, exact_scale);
        // |t − t*| ≤ 4·2^−24·|t*| and |t*| ≤ bins for values in range;
        // a bucket below the normal range is narrower than 2^−137.
        let rest = bins * 2f64.powi(-22) + exact_scale * 2f64.powi(-137) + edge_error;
        let margin = (2.0 * rest + 2f64.powi(-140)) as f32;
        // The slope rounded up with room for the two f32 roundings of
        // `|x|·slope + margin`.
        let slope = (exact_scale * 2f64.powi(-11) * (1.0 + 2f64.powi(-18))) as f32;
        let slope = f32::from_bits(slope.to_bits() + 1);
        let sound = scale.is_finite()
            && scale > 0.0
            && slope.is_finite()
            && margin.is_finite()
            && f64::from(margin) < 0.25;
        sound.then_some(Self {
            origin: min as f32,
            scale,
            slope,
            margin,
            bloom,
        })
    }

    /// Whether the portable form of the two tests passes `x` (what the
    /// vector copies compute, lane by lane; the tests check it).
    #[cfg(test)]
    pub(crate) fn passes(&self, x: f32) -> bool {
        let t = (x - self.origin) * self.scale;
        let near = (t - t.round_ties_even()).abs() <= x.abs() * self.slope + self.margin;
        let i = (x.to_bits() >> LOW32) % BLOOM_BITS;
        near || (self.bloom[(i / 32) as usize] >> (i % 32)) & 1 != 0
    }
}

/// The bloom of [`Prefilter`] and [`Prefilter64`] for the buckets `others`.
fn bloom_of(others: &[u32]) -> [u32; 32] {
    let mut bloom = [0u32; 32];
    for &p in others {
        let i = bloom_index(p);
        if let Some(w) = bloom.get_mut((i / 32) as usize) {
            *w |= 1 << (i % 32);
        }
    }
    bloom
}

/// How far the edges are from their ideal places `min + i/scale`, in bins
/// (measured, plus the rounding of the measure).
fn edge_error(edges: &[f64], min: f64, exact_scale: f64) -> f64 {
    edges
        .iter()
        .enumerate()
        .map(|(i, &e)| ((e - min) * exact_scale - i as f64).abs())
        .fold(0.0f64, f64::max)
        + edges.len() as f64 * 2f64.powi(-50)
}

/// [`Prefilter`] for f64 values, its near test in f64 arithmetic: a bucket
/// of f64 keys spans a relative width of at most 2^−8 (2^−1030 below the
/// normal range), and `margin` covers the roundings of `t` (at most
/// `bins·2^−51`), those of the edges and those of the test itself. The
/// bloom bit of a value is `(bits >> 44) mod 1024`.
// Its fields are read by the x86-64 vector copies only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefilter64 {
    pub origin: f64,
    pub scale: f64,
    pub slope: f64,
    pub margin: f64,
    pub bloom: [u32; 32],
}

impl Prefilter64 {
    /// As [`Prefilter::new`], for f64 values.
    pub(crate) fn new(edges: Option<(&[f64], f64, f64)>, others: &[u32]) -> Option<Self> {
        let bloom = bloom_of(others);
        let Some((edges, min, max)) = edges else {
            return Some(Self {
                origin: 0.0,
                scale: 0.0,
                slope: 0.0,
                margin: -1.0,
                bloom,
            });
        };
        let bins = edges.len().checked_sub(1).filter(|&b| b > 0)? as f64;
        let range = max - min;
        if !(range > 0.0 && range.is_finite()) {
            return None;
        }
        let exact_scale = bins / range;
        let rest = bins * 2f64.powi(-50)
            + exact_scale * 2f64.powi(-1030)
            + edge_error(edges, min, exact_scale);
        let margin = 2.0 * rest + 2f64.powi(-1000);
        // The slope rounded up with room for the rounding of
        // `|x|·slope + margin`.
        let slope = exact_scale * 2f64.powi(-8) * (1.0 + 2f64.powi(-40));
        // A subnormal slope would lose the relative precision its rounding
        // up counts on.
        let sound = exact_scale.is_finite()
            && exact_scale > 0.0
            && slope.is_finite()
            && slope >= f64::MIN_POSITIVE
            && margin.is_finite()
            && margin < 0.25;
        sound.then_some(Self {
            origin: min,
            scale: exact_scale,
            slope,
            margin,
            bloom,
        })
    }

    /// Whether the portable form of the two tests passes `x` (what the
    /// vector copy computes, lane by lane; the tests check it).
    #[cfg(test)]
    pub(crate) fn passes(&self, x: f64) -> bool {
        let t = (x - self.origin) * self.scale;
        let near = (t - t.round_ties_even()).abs() <= x.abs().mul_add(self.slope, self.margin);
        let i = ((x.to_bits() >> (64 - PREFIX_BITS)) % u64::from(BLOOM_BITS)) as u32;
        near || (self.bloom[(i / 32) as usize] >> (i % 32)) & 1 != 0
    }
}
