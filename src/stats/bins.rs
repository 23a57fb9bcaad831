//! What a histogram bin and a quantile are: the linear bins over
//! [finite min, finite max] (one definition shared by every dtype path, so
//! the hot loops, the count-derived path and the tests agree to the last
//! element), the nearest-rank quantile ranks, and the binary exponent of a
//! value for the log2 histogram.
//!
//! Float bins are defined by their edges: `edges[0] = min`, `edges[bins] =
//! max`, `edges[i] = min + i·(max − min)/bins` in between, and a value `x`
//! lies in the last bin `i` with `edges[i] ≤ x` (the last bin also holds
//! `max`). So every value sits between the edges printed for its bin, even
//! where rounding would put `(x − min)/step` on the other side of an edge.
//!
//! Integer bins are exact: `x` is in bin `⌊(x − min)·bins/(max − min)⌋`
//! (the last bin holds `max`), computed in integer arithmetic; the printed
//! edges are those rational edges rounded to f64.

/// Default number of linear bins.
pub const DEFAULT_BINS: usize = 256;

/// Most linear bins a caller may ask for (the histogram is returned as a
/// vector, and every block of the hot loop touches it).
pub const MAX_BINS: usize = 1 << 20;

/// The quantiles reported, as exact fractions `numerator / 1000`.
pub const QUANTILES: [(&str, u64); 9] = [
    ("p0_1", 1),
    ("p1", 10),
    ("p5", 50),
    ("p25", 250),
    ("p50", 500),
    ("p75", 750),
    ("p95", 950),
    ("p99", 990),
    ("p99_9", 999),
];

/// The nearest rank (1-based) of quantile `permille / 1000` among `n`
/// sorted values: `⌈q·n⌉`, at least 1; `None` when `n = 0`.
pub fn nearest_rank(permille: u64, n: u64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let rank = (u128::from(permille) * u128::from(n)).div_ceil(1000);
    Some(u64::try_from(rank).unwrap_or(n).clamp(1, n))
}

/// Linear bins over the finite values of a float tensor.
#[derive(Debug, Clone)]
pub(crate) struct FloatBins {
    /// `bins + 1` non-decreasing edges, `edges[0] = min`, `edges[bins] = max`.
    edges: Vec<f64>,
    /// Offset subtracted before scaling in the first guess of a bin index.
    origin: f64,
    /// Factor that maps `x − origin` (or its half, see `halve`) to a bin index.
    scale: f64,
    /// Whether `max − min` overflows, so that the guess works on halves.
    halve: bool,
    /// Whether a guess whose fraction is at least [`SURE_MARGIN`] away from
    /// a whole number is certainly right (the rounding of the guess and of
    /// the edges is far smaller than the margin): false when the bins are
    /// narrow next to the values' own precision.
    fast: bool,
}

/// How far (in bins) a first guess must be from a bin boundary to be taken
/// without checking it against the edges. The guess and the edges carry a
/// few roundings each, below 1e-9 bins when `fast` holds.
pub(crate) const SURE_MARGIN: f64 = 1e-6;

impl FloatBins {
    /// Bins over `[min, max]`; one bin when `min == max`. `bins` must be at
    /// least 1 (it is clamped), `min ≤ max` and both finite.
    pub fn new(min: f64, max: f64, bins: usize) -> Self {
        let bins = if min == max {
            1
        } else {
            bins.clamp(1, MAX_BINS)
        };
        let n = bins as f64;
        let range = max - min;
        let halve = !range.is_finite();
        let mut edges = Vec::with_capacity(bins + 1);
        edges.push(min);
        if halve {
            for i in 1..bins {
                // min < 0 < max here, so neither product can overflow.
                let f = i as f64 / n;
                let e = min * (1.0 - f) + max * f;
                let previous = edges.last().copied().unwrap_or(min);
                // max/min rather than clamp: no panic whatever the inputs.
                edges.push(e.max(previous).min(max));
            }
        } else {
            // Rounding is monotone, so `min + t·step` never decreases with
            // `t` and is at least `min`: no running maximum is needed (it
            // would make each edge wait for the one before).
            let step = range / n;
            edges.extend((1..bins).map(|i| (min + i as f64 * step).min(max)));
        }
        edges.push(max);
        let scale = if halve {
            n / (max * 0.5 - min * 0.5)
        } else if range > 0.0 {
            n / range
        } else {
            0.0
        };
        let largest = min.abs().max(max.abs());
        let step = range / n;
        // An ulp of the largest value, in bins, must be far below the margin.
        let fast = !halve && step.is_finite() && step > 0.0 && scale.is_finite() && {
            let ulp = largest.next_up() - largest;
            ulp.is_finite() && ulp * 64.0 / step < SURE_MARGIN
        };
        Self {
            edges,
            origin: min,
            scale,
            halve,
            fast,
        }
    }

    /// Whether [`FloatBins::guess_block`]'s unchecked guesses can be trusted.
    pub fn fast(&self) -> bool {
        self.fast
    }

    /// Number of bins (at least 1: a range of one value has one bin).
    pub fn len(&self) -> usize {
        self.edges.len().saturating_sub(1)
    }

    /// The `len() + 1` edges.
    pub fn edges(&self) -> &[f64] {
        &self.edges
    }

    /// The edges, for a histogram's report.
    pub fn into_edges(self) -> Vec<f64> {
        self.edges
    }

    /// The bin of a finite value in `[min, max]`: the last `i` with
    /// `edges[i] ≤ x`, at most `len() − 1`. Values outside the range go to
    /// the first or last bin.
    #[inline]
    pub fn bin_of(&self, x: f64) -> usize {
        let i = self.guess_one(x);
        if self.holds(i, x) { i } else { self.search(x) }
    }

    /// The parameters of the first guess `(x − origin)·scale` (halved
    /// operands when `halve`).
    pub fn guess_params(&self) -> (f64, f64, bool) {
        (self.origin, self.scale, self.halve)
    }

    /// A first guess of the bin of `x`, to be checked.
    #[inline]
    pub fn guess_one(&self, x: f64) -> usize {
        let last = self.len().saturating_sub(1);
        let guess = if self.halve {
            (x * 0.5 - self.origin * 0.5) * self.scale
        } else {
            (x - self.origin) * self.scale
        };
        // `as` saturates: negative and NaN guesses give 0.
        (guess as usize).min(last)
    }

    /// Whether bin `i` holds `x`.
    #[inline]
    pub fn holds(&self, i: usize, x: f64) -> bool {
        let last = self.len().saturating_sub(1);
        match (self.edges.get(i), self.edges.get(i + 1)) {
            (Some(&lo), Some(&hi)) => lo <= x && (i == last || x < hi),
            _ => false,
        }
    }

    /// The bin of `x` by binary search over the inner edges.
    pub fn search(&self, x: f64) -> usize {
        let last = self.len().saturating_sub(1);
        self.edges
            .get(1..=last)
            .map_or(0, |inner| inner.partition_point(|&e| e <= x))
    }
}

/// Exact linear bins over the values of an integer tensor.
#[derive(Debug, Clone)]
pub(crate) struct IntBins {
    min: i128,
    range: u128,
    bins: u128,
    /// `inner[i − 1]` = smallest offset `x − min` that falls in bin `i`.
    inner: Vec<u128>,
}

impl IntBins {
    /// Bins over `[min, max]`; one bin when `min == max`.
    pub fn new(min: i128, max: i128, bins: usize) -> Self {
        let range = u128::try_from(max.saturating_sub(min)).unwrap_or(0);
        let bins = if range == 0 {
            1
        } else {
            bins.clamp(1, MAX_BINS) as u128
        };
        // Smallest offset d with ⌊d·bins/range⌋ ≥ i is ⌈i·range/bins⌉.
        // range < 2^65 and bins ≤ 2^20, so the product fits u128.
        let inner = (1..bins)
            .map(|i| (i * range).div_ceil(bins.max(1)))
            .collect();
        Self {
            min,
            range,
            bins,
            inner,
        }
    }

    /// Number of bins (at least 1).
    pub fn len(&self) -> usize {
        self.bins as usize
    }

    /// The bin of `x` (values are clamped into the range).
    #[inline]
    pub fn bin_of(&self, x: i128) -> usize {
        let offset = u128::try_from(x.saturating_sub(self.min))
            .unwrap_or(0)
            .min(self.range);
        self.bin_of_offset(offset)
    }

    /// The bin of an offset `x − min` in `0..=range`.
    #[inline]
    pub fn bin_of_offset(&self, offset: u128) -> usize {
        let last = self.len().saturating_sub(1);
        if self.range == 0 {
            return 0;
        }
        // A first guess in f64, corrected against the exact edges.
        let guess = ((offset as f64) * (self.bins as f64) / (self.range as f64)) as usize;
        let i = guess.min(last);
        let lo_ok = i == 0 || self.inner.get(i - 1).is_some_and(|&e| e <= offset);
        let hi_ok = i == last || self.inner.get(i).is_some_and(|&e| offset < e);
        if lo_ok && hi_ok {
            i
        } else {
            self.inner.partition_point(|&e| e <= offset)
        }
    }

    /// The offset range `[lo, hi]` (inclusive) of bin `i`.
    pub fn offsets_of(&self, i: usize) -> (u128, u128) {
        let lo = if i == 0 {
            0
        } else {
            self.inner.get(i - 1).copied().unwrap_or(self.range)
        };
        let hi = if i + 1 >= self.len() {
            self.range
        } else {
            self.inner
                .get(i)
                .copied()
                .unwrap_or(self.range)
                .saturating_sub(1)
        };
        (lo, hi)
    }

    /// The `len() + 1` edges as f64: `min + i·range/bins`.
    pub fn edges(&self) -> Vec<f64> {
        let min = self.min as f64;
        (0..=self.bins)
            .map(|i| {
                if i == self.bins {
                    (self.min + self.range as i128) as f64
                } else {
                    // i·range < 2^85 fits u128; the division keeps the
                    // fraction for the f64 conversion.
                    let whole = (i * self.range) / self.bins;
                    let frac = ((i * self.range) % self.bins) as f64 / self.bins as f64;
                    (self.min + whole as i128) as f64 + frac
                }
            })
            .map(|e: f64| if e.is_finite() { e } else { min })
            .collect()
    }
}

/// The binary exponent `e` of a finite, non-zero f64 with `2^e ≤ |x| < 2^(e+1)`.
pub fn exponent_f64(x: f64) -> i32 {
    let bits = x.to_bits();
    let field = ((bits >> 52) & 0x7ff) as i32;
    if field == 0 {
        // An f64 subnormal: count the mantissa's leading zeros.
        let mantissa = bits & ((1u64 << 52) - 1);
        -1023 - (mantissa.leading_zeros() as i32 - 12)
    } else {
        field - 1023
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_nearest_rank() {
        assert_eq!(nearest_rank(500, 0), None);
        assert_eq!(nearest_rank(1, 1), Some(1));
        assert_eq!(nearest_rank(999, 1), Some(1));
        assert_eq!(nearest_rank(500, 4), Some(2));
        assert_eq!(nearest_rank(500, 5), Some(3));
        assert_eq!(nearest_rank(1, 1000), Some(1));
        assert_eq!(nearest_rank(1, 1001), Some(2));
        assert_eq!(nearest_rank(999, 1000), Some(999));
        assert_eq!(nearest_rank(10, 100), Some(1));
        assert_eq!(
            nearest_rank(999, u64::MAX),
            Some(u64::MAX - u64::MAX / 1000)
        );
    }

    #[test]
    fn float_bins_agree_with_their_edges() {
        let b = FloatBins::new(-1.0, 3.0, 4);
        assert_eq!(b.edges(), [-1.0, 0.0, 1.0, 2.0, 3.0]);
        assert_eq!(b.bin_of(-1.0), 0);
        assert_eq!(b.bin_of(0.0), 1);
        assert_eq!(b.bin_of(-0.0), 1);
        assert_eq!(b.bin_of(2.999), 3);
        assert_eq!(b.bin_of(3.0), 3);
        let one = FloatBins::new(5.0, 5.0, 256);
        assert_eq!((one.len(), one.bin_of(5.0)), (1, 0));
        // Awkward ranges: every value lies between its bin's edges.
        for (min, max, bins) in [
            (0.1, 0.7, 3),
            (-1e308, 1.7e308, 256),
            (1.0, 1.0 + f64::EPSILON, 256),
            (-5e-324, 5e-324, 7),
            (-3.4e38, 3.4e38, 255),
        ] {
            let b = FloatBins::new(min, max, bins);
            assert!(b.edges().windows(2).all(|w| w[0] <= w[1]));
            let mut x = min;
            for k in 0..=1000 {
                let t = f64::from(k) / 1000.0;
                x = (min * (1.0 - t) + max * t).clamp(min, max).max(x);
                let i = b.bin_of(x);
                assert!(b.holds(i, x), "{min} {max} {bins}: {x} in {i}");
                assert_eq!(i, b.search(x));
            }
        }
    }

    #[test]
    fn int_bins_are_exact() {
        let b = IntBins::new(0, 255, 256);
        for x in 0..=255 {
            assert_eq!(b.bin_of(x), x as usize);
        }
        let b = IntBins::new(-3, 7, 4);
        for x in -3..=7i128 {
            let want = (((x + 3) * 4) / 10).min(3) as usize;
            assert_eq!(b.bin_of(x), want, "{x}");
            let (lo, hi) = b.offsets_of(want);
            assert!(lo <= (x + 3) as u128 && (x + 3) as u128 <= hi);
        }
        assert_eq!(b.edges(), [-3.0, -0.5, 2.0, 4.5, 7.0]);
        let wide = IntBins::new(i128::from(i64::MIN), i128::from(u64::MAX), 256);
        assert_eq!(wide.bin_of(i128::from(u64::MAX)), 255);
        assert_eq!(wide.bin_of(i128::from(i64::MIN)), 0);
        assert_eq!(IntBins::new(4, 4, 256).len(), 1);
    }

    #[test]
    fn exponents() {
        assert_eq!(exponent_f64(1.0), 0);
        assert_eq!(exponent_f64(-1.5), 0);
        assert_eq!(exponent_f64(0.25), -2);
        assert_eq!(exponent_f64(448.0), 8);
        assert_eq!(exponent_f64(f64::MAX), 1023);
        assert_eq!(exponent_f64(f64::MIN_POSITIVE), -1022);
        assert_eq!(exponent_f64(5e-324), -1074);
    }
}
