//! Specials, range and moments of one block: the fused f32/F16/BF16 scan
//! read in place from the mapped bytes, and the f64 path with its lane
//! sums and power-of-two scaling.

use super::{BLOCK, Lane, Specials, split_finite};
use crate::stats::moments::{Moments, ldexp};

/// turns into vector registers (a lane sums at most `BLOCK / SUM_LANES`
/// terms, so the block sums stay accurate).
const SUM_LANES: usize = 16;

/// `Σ f(x)` over a block, lane-wise. One accumulator per loop: the
/// vectoriser then packs lanes, not different sums, into a register.
#[allow(clippy::inline_always)]
#[inline(always)]
fn lane_sum(vals: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0f64; SUM_LANES];
    let (chunks, rest) = vals.as_chunks::<SUM_LANES>();
    for c in chunks {
        for j in 0..SUM_LANES {
            acc[j] += f(c[j]);
        }
    }
    let mut tail = 0.0;
    for &x in rest {
        tail += f(x);
    }
    fold_lanes(acc) + tail
}

/// The lanes of a sum added pairwise (`acc[j] += acc[j + 8]`, then
/// `+ 4`, `+ 2`, `+ 1`).
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn fold_lanes(mut acc: [f64; SUM_LANES]) -> f64 {
    let mut width = SUM_LANES;
    while width > 1 {
        width /= 2;
        for j in 0..width {
            acc[j] += acc[j + width];
        }
    }
    acc[0]
}

/// What one fused pass over whole groups of eight f32 values gathers, lane
/// by lane (lane `j` sees the values `8·i + j`). [`scan_groups`] is the
/// portable version; [`crate::stats::simd`] has an AVX2 one that gives the same
/// bits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct F32Lanes {
    /// Values whose magnitude bits are below `tiny_bits` (zeros included).
    pub tiny: [u32; 8],
    /// ±0 values per lane.
    pub zero: [u32; 8],
    /// Smallest value (meaningless when NaN is present).
    pub min: [f32; 8],
    /// Largest value per lane (likewise meaningless with NaN).
    pub max: [f32; 8],
    /// Σx in f64.
    pub sum: [f64; 8],
    /// Σ|x|.
    pub abs: [f64; 8],
    /// Σ(x − x₀)².
    pub sq: [f64; 8],
}

impl F32Lanes {
    /// Nothing seen yet: ±Inf as the range so the first value replaces it.
    pub const EMPTY: F32Lanes = F32Lanes {
        tiny: [0; 8],
        zero: [0; 8],
        min: [f32::INFINITY; 8],
        max: [f32::NEG_INFINITY; 8],
        sum: [0.0; 8],
        abs: [0.0; 8],
        sq: [0.0; 8],
    };

    /// Adds one value to lane `j`. The selects are those of the x86
    /// min/max instructions (`x < m ? x : m`), so that the vector version
    /// keeps the same zero among ±0.
    #[inline]
    fn add(&mut self, j: usize, x: f32, tiny_bits: u32, x0: f64) {
        let magnitude = x.to_bits() & 0x7fff_ffff;
        self.tiny[j] += u32::from(magnitude < tiny_bits);
        self.zero[j] += u32::from(magnitude == 0);
        self.min[j] = if x < self.min[j] { x } else { self.min[j] };
        self.max[j] = if x > self.max[j] { x } else { self.max[j] };
        let wide = f64::from(x);
        self.sum[j] += wide;
        self.abs[j] += wide.abs();
        let d = wide - x0;
        self.sq[j] += d * d;
    }
}

/// Little-endian element formats that widen exactly to f32, which the
/// fused scan reads in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wide {
    /// f32 itself, read in place.
    F32,
    /// IEEE half precision, widened exactly.
    F16,
    /// bfloat16, widened exactly (a shift).
    BF16,
}

impl Wide {
    /// Bytes per element: 4 or 2.
    #[inline]
    pub fn width(self) -> usize {
        match self {
            Wide::F32 => 4,
            Wide::F16 | Wide::BF16 => 2,
        }
    }

    /// The element at the start of `c` (which holds at least one).
    #[inline]
    pub fn value(self, c: &[u8]) -> f32 {
        let byte = |i: usize| c.get(i).copied().unwrap_or(0);
        match self {
            Wide::F32 => f32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]),
            Wide::F16 => half::f16::from_bits(u16::from_le_bytes([byte(0), byte(1)])).to_f32(),
            Wide::BF16 => f32::from_bits(u32::from(u16::from_le_bytes([byte(0), byte(1)])) << 16),
        }
    }
}

/// A group scan: [`scan_groups`] or a vector version of it. Takes whole
/// groups of eight elements.
pub(crate) type GroupScan = fn(Wide, &[u8], u32, f64) -> F32Lanes;

/// The portable [`F32Lanes`] pass over whole groups of eight elements.
pub(crate) fn scan_groups(kind: Wide, bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
    let w = kind.width();
    let mut l = F32Lanes::EMPTY;
    for g in bytes.chunks_exact(8 * w) {
        for (j, c) in g.chunks_exact(w).enumerate() {
            l.add(j, kind.value(c), tiny_bits, x0);
        }
    }
    l
}

/// The sum of eight lanes in the order the AVX2 pass uses: the two halves
/// first, then pairwise.
#[inline]
pub(crate) fn lane_total(acc: [f64; 8]) -> f64 {
    let h = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    (h[0] + h[2]) + (h[1] + h[3])
}

/// Summarises a block of elements (`bytes`, a whole number of `kind`
/// elements): specials, range and moments. Values whose magnitude bits as
/// f32 are below `tiny_bits` count as subnormal (or zero): `0x0080_0000`
/// for f32 and BF16, those of 2^−14 for F16.
///
/// One fused pass over the bytes (bits and f64 sums at once) by `scan`; the
/// sums are thrown away when the block turns out to hold NaN or Inf. The
/// bytes are read in place (a slice of the mapped file): no copy first, so
/// that the loads from memory overlap the arithmetic.
pub(crate) fn block_wide(
    kind: Wide,
    bytes: &[u8],
    tiny_bits: u32,
    scan: GroupScan,
) -> (Specials, Moments) {
    block_wide_by(kind, bytes, tiny_bits, scan, scan)
}

/// [`block_wide`] whose first scan of the block's whole groups is
/// `first_scan`
/// (which may do more work on the side: it is called at most once, and
/// only for a block of at most [`BLOCK`] elements that holds one); the
/// sums of a block that holds NaN or Inf are made again by `scan`.
pub(crate) fn block_wide_by(
    kind: Wide,
    bytes: &[u8],
    tiny_bits: u32,
    first_scan: impl FnOnce(Wide, &[u8], u32, f64) -> F32Lanes,
    scan: GroupScan,
) -> (Specials, Moments) {
    let w = kind.width();
    if bytes.len() > w * BLOCK {
        return block_split(kind, bytes, tiny_bits, scan);
    }
    let n = bytes.len() / w;
    let Some(first) = bytes.get(..w) else {
        return (Specials::default(), Moments::default());
    };
    let x0 = f64::from(kind.value(first));
    let whole = n / 8 * 8 * w;
    let (groups, rest) = bytes.split_at(whole);
    let mut l = first_scan(kind, groups, tiny_bits, x0);
    for c in rest.chunks_exact(w) {
        l.add(0, kind.value(c), tiny_bits, x0);
    }
    let (sum, abs_sum, sum_d2) = (lane_total(l.sum), lane_total(l.abs), lane_total(l.sq));
    // Values that widen to f32 cannot overflow an f64 sum of a block: a
    // sum that is not finite means a NaN or an infinity is in the block.
    if !sum.is_finite() {
        return block_split(kind, bytes, tiny_bits, scan);
    }
    let tiny: u32 = l.tiny.iter().sum();
    let zero: u32 = l.zero.iter().sum();
    let (lo, hi) = fold_range(l.min, l.max);
    let sp = Specials {
        zeros: u64::from(zero),
        subnormals: u64::from(tiny - zero),
        min: f64::from(lo),
        max: f64::from(hi),
        ..Specials::default()
    };
    // Σ(x − x₀) = Σx − n·x₀: with f32 values in f64 lanes this carries only
    // a few roundings, far below what the variance needs (see moments.rs).
    let sum_d = sum - n as f64 * x0;
    (
        sp,
        Moments::from_block(n as u64, 0, x0, [sum, abs_sum, sum_d, sum_d2]),
    )
}

/// [`block_wide`] of more than a block, or of a block holding NaN or Inf:
/// the specials are counted and the finite values summarised block-wise.
fn block_split(kind: Wide, bytes: &[u8], tiny_bits: u32, scan: GroupScan) -> (Specials, Moments) {
    let mut specials = Specials::default();
    let mut moments = Moments::default();
    let mut vals = [0f32; BLOCK];
    let mut finite = [0f32; BLOCK];
    let mut again = [0u8; 4 * BLOCK];
    let width = kind.width();
    for part in bytes.chunks(width * BLOCK) {
        let mut count = 0;
        for (v, c) in vals.iter_mut().zip(part.chunks_exact(width)) {
            *v = kind.value(c);
            count += 1;
        }
        let kept = split_finite(vals.get(..count).unwrap_or(&[]), &mut finite, &mut specials);
        let finite = finite.get(..kept).unwrap_or(&[]);
        let (part_specials, part_moments) =
            block_wide(Wide::F32, f32_bytes(finite, &mut again), tiny_bits, scan);
        specials.merge(&part_specials);
        moments.merge(&part_moments);
    }
    (specials, moments)
}

/// Writes f32 values as little-endian bytes into `out` (at least four bytes
/// per value); returns the bytes written.
pub(crate) fn f32_bytes<'a>(vals: &[f32], out: &'a mut [u8]) -> &'a [u8] {
    let (slots, _) = out.as_chunks_mut::<4>();
    let n = vals.len().min(slots.len());
    for (o, x) in slots.iter_mut().zip(vals) {
        *o = x.to_le_bytes();
    }
    out.get(..4 * n).unwrap_or(&[])
}

/// The smallest and largest of a block with no NaN, in eight lanes (of
/// ±0, the first of a lane, then the lowest lane, wins).
#[allow(clippy::inline_always)]
#[inline(always)]
fn range_of<T: Lane>(vals: &[T], lowest: T, highest: T) -> (T, T) {
    let (chunks, rest) = vals.as_chunks::<8>();
    // The minima and the maxima in a pass each: in one loop, the
    // vectoriser packs both into one register and shuffles it at every
    // step, at several times the cost of the two passes.
    let mut mn = lane_best(chunks, highest, |x, m| x < m);
    let mut mx = lane_best(chunks, lowest, |x, m| x > m);
    for &x in rest {
        if x < mn[0] {
            mn[0] = x;
        }
        if x > mx[0] {
            mx[0] = x;
        }
    }
    fold_range(mn, mx)
}

/// The smallest of eight lanes of minima and the largest of eight lanes of
/// maxima (of equals, the lowest lane wins), as every copy of the range
/// folds them.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn fold_range<T: Lane>(mn: [T; 8], mx: [T; 8]) -> (T, T) {
    let pick = |lanes: [T; 8], better: fn(T, T) -> bool| {
        lanes
            .into_iter()
            .fold(lanes[0], |m, x| if better(x, m) { x } else { m })
    };
    (pick(mn, |x, m| x < m), pick(mx, |x, m| x > m))
}

/// Lane `j` of the result is the best (by `better`, the first among
/// equals) of `init` and the values `chunks[i][j]`.
#[allow(clippy::inline_always)]
#[inline(always)]
fn lane_best<T: Lane>(chunks: &[[T; 8]], init: T, better: impl Fn(T, T) -> bool) -> [T; 8] {
    let mut m = [init; 8];
    for c in chunks {
        for j in 0..8 {
            if better(c[j], m[j]) {
                m[j] = c[j];
            }
        }
    }
    m
}

/// Summarises a block of f64 values. Squares of values beyond 2^±400 would
/// overflow or underflow, so such blocks are scaled by a power of two.
/// `smallest_normal` decides what counts as subnormal (f64's own for F64
/// tensors, f32's for complex magnitudes).
pub(crate) fn block_f64(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    block_f64_with(vals, smallest_normal, block_f64_in)
}

/// [`block_f64`] with `block` summarising each part of at most [`BLOCK`]
/// values ([`block_f64_in`], or a copy of it compiled for wider vectors).
pub(crate) fn block_f64_with(
    vals: &[f64],
    smallest_normal: f64,
    block: impl Fn(&[f64], f64) -> (Specials, Moments),
) -> (Specials, Moments) {
    if vals.len() <= BLOCK {
        return block(vals, smallest_normal);
    }
    let mut sp = Specials::default();
    let mut m = Moments::default();
    for part in vals.chunks(BLOCK) {
        let (s, pm) = block(part, smallest_normal);
        sp.merge(&s);
        m.merge(&pm);
    }
    (sp, m)
}

/// [`block_f64`] of at most [`BLOCK`] values.
// Inlined into the vector copies of [`crate::stats::simd`], which compile it
// once more for their targets.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn block_f64_in(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    let mut all_finite = true;
    for &x in vals {
        all_finite &= x.is_finite();
    }
    if all_finite {
        return finite_f64(vals, smallest_normal);
    }
    let mut sp = Specials::default();
    let mut finite = [0f64; BLOCK];
    let n = split_finite(vals, &mut finite, &mut sp);
    let (s, m) = finite_f64(finite.get(..n).unwrap_or(&[]), smallest_normal);
    sp.merge(&s);
    (sp, m)
}

/// [`block_f64`] of at most [`BLOCK`] finite values.
#[allow(clippy::inline_always)]
#[inline(always)]
fn finite_f64(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    let Some(&first) = vals.first() else {
        return (Specials::default(), Moments::default());
    };
    let (mut tiny, mut zero) = (0u32, 0u32);
    for &x in vals {
        tiny += u32::from(x.abs() < smallest_normal);
        zero += u32::from(x == 0.0);
    }
    let (lo, hi) = range_of(vals, f64::NEG_INFINITY, f64::INFINITY);
    let sp = Specials {
        zeros: u64::from(zero),
        subnormals: u64::from(tiny.saturating_sub(zero)),
        min: lo,
        max: hi,
        ..Specials::default()
    };
    let largest = lo.abs().max(hi.abs());
    // 2^−exp must itself be a finite f64: exp ≥ −1023.
    let exp = if largest > ldexp(1.0, 400) || (largest > 0.0 && largest < ldexp(1.0, -400)) {
        crate::stats::bins::exponent_f64(largest).max(-1023)
    } else {
        0
    };
    let scale = ldexp(1.0, -exp);
    let shift = first * scale;
    let sums = |wide: &[f64]| {
        [
            lane_sum(wide, |x| x),
            lane_sum(wide, f64::abs),
            // f64 values: Σ(x − x₀) is summed, not derived (n·x₀ rounds).
            lane_sum(wide, |x| x - shift),
            lane_sum(wide, |x| (x - shift) * (x - shift)),
        ]
    };
    // Unscaled (nearly always), the values are summed in place: x·1 = x;
    // only a scaled block takes a buffer.
    let sums = if exp == 0 {
        sums(vals)
    } else {
        let mut buffer = [0f64; BLOCK];
        let wide = buffer.get_mut(..vals.len()).unwrap_or(&mut []);
        for (o, &x) in wide.iter_mut().zip(vals) {
            *o = x * scale;
        }
        sums(wide)
    };
    let moments = Moments::from_block(vals.len() as u64, exp, shift, sums);
    (sp, moments)
}
