//! The hot loops: one block of a few thousand values at a time, read in
//! place from the mapped bytes (F32, F16, BF16) or decoded into a stack
//! buffer that stays in L1, or raw bytes for code counting.
//!
//! Written as simple loops over fixed-width lanes so that the compiler
//! vectorises them for the baseline x86-64 target without `unsafe`;
//! [`super::simd`] runs the hottest ones as AVX2 code where the CPU has it,
//! with the same results. Every loop takes any input: NaN and Inf are split
//! off before the arithmetic, and nothing indexes out of bounds.

use std::ops::Range;

use super::bins::{FloatBins, SURE_MARGIN};
use super::moments::{Moments, ldexp};

/// Values per block: the decode buffer and the lanes' partial sums stay in
/// L1, and a block's lane sums stay accurate (≤ 512 terms per lane).
pub(crate) const BLOCK: usize = 2048;

/// Calls `f` with the elements `range`, decoded a block at a time by
/// `decode(first, out)`, which fills `out` from element `first` on and
/// returns how many it wrote (0 ends the walk early).
pub(crate) fn for_each_block<T: Copy + Default>(
    range: Range<u64>,
    mut decode: impl FnMut(u64, &mut [T]) -> usize,
    mut f: impl FnMut(&[T]),
) {
    let mut buffer = [T::default(); BLOCK];
    let mut first = range.start;
    while first < range.end {
        let want = usize::try_from(range.end - first)
            .unwrap_or(BLOCK)
            .min(BLOCK);
        let Some(out) = buffer.get_mut(..want) else {
            break;
        };
        let got = decode(first, out);
        if got == 0 {
            break;
        }
        f(out.get(..got).unwrap_or(&[]));
        first += got as u64;
    }
}

/// Counts of the special values in a block, and its finite range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Specials {
    /// NaN values.
    pub nan: u64,
    /// +Inf values.
    pub pos_inf: u64,
    /// −Inf values.
    pub neg_inf: u64,
    /// ±0 values.
    pub zeros: u64,
    /// Non-zero values below the smallest normal number of the value type.
    pub subnormals: u64,
    /// Smallest finite value (+Inf when there is none).
    pub min: f64,
    /// Largest finite value (−Inf when there is none).
    pub max: f64,
}

impl Default for Specials {
    fn default() -> Self {
        Self {
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
            zeros: 0,
            subnormals: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Specials {
    /// Adds another block's counts and range.
    pub fn merge(&mut self, o: &Specials) {
        self.nan += o.nan;
        self.pos_inf += o.pos_inf;
        self.neg_inf += o.neg_inf;
        self.zeros += o.zeros;
        self.subnormals += o.subnormals;
        // −0 and +0 are equal; keep the first seen (callers print +0).
        if o.min < self.min {
            self.min = o.min;
        }
        if o.max > self.max {
            self.max = o.max;
        }
    }
}

/// A value type the float kernels work on.
pub(crate) trait Lane: Copy + Default + PartialOrd + Send + Sync + 'static {
    /// Widens exactly to f64.
    fn to_f64(self) -> f64;
    /// Whether the value is finite.
    fn finite(self) -> bool;
}

impl Lane for f32 {
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline]
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Lane for f64 {
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline]
    fn finite(self) -> bool {
        self.is_finite()
    }
}

/// Moves the finite values of `vals` to the front of `out` and counts the
/// others; returns how many finite values there are.
fn split_finite<T: Lane>(vals: &[T], out: &mut [T], sp: &mut Specials) -> usize {
    let mut n = 0;
    for &x in vals {
        if x.finite() {
            if let Some(slot) = out.get_mut(n) {
                *slot = x;
                n += 1;
            }
        } else {
            let v = x.to_f64();
            if v.is_nan() {
                sp.nan += 1;
            } else if v > 0.0 {
                sp.pos_inf += 1;
            } else {
                sp.neg_inf += 1;
            }
        }
    }
    n
}

/// Lanes of the floating-point sums: independent chains that the compiler
/// turns into vector registers (a lane sums at most `BLOCK / SUM_LANES`
/// terms, so the block sums stay accurate).
const SUM_LANES: usize = 16;

/// `Σ f(x)` over a block, lane-wise. One accumulator per loop: the
/// vectoriser then packs lanes, not different sums, into a register.
#[inline]
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
    // Pairwise over the lanes.
    let mut width = SUM_LANES;
    while width > 1 {
        width /= 2;
        for j in 0..width {
            acc[j] += acc[j + width];
        }
    }
    acc[0] + tail
}

/// What one fused pass over whole groups of eight f32 values gathers, lane
/// by lane (lane `j` sees the values `8·i + j`). [`scan_groups`] is the
/// portable version; [`super::simd`] has an AVX2 one that gives the same
/// bits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct F32Lanes {
    /// Values whose magnitude bits are below `tiny_bits` (zeros included).
    pub tiny: [u32; 8],
    /// ±0 values.
    pub zero: [u32; 8],
    /// Smallest value (meaningless when NaN is present).
    pub min: [f32; 8],
    /// Largest value (likewise).
    pub max: [f32; 8],
    /// Σx in f64.
    pub sum: [f64; 8],
    /// Σ|x|.
    pub abs: [f64; 8],
    /// Σ(x − x₀)².
    pub sq: [f64; 8],
}

impl F32Lanes {
    /// Nothing seen yet.
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
    /// f32 itself.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
}

impl Wide {
    /// Bytes per element.
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
fn lane_total(acc: [f64; 8]) -> f64 {
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
    let mut l = scan(kind, groups, tiny_bits, x0);
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
    let pick = |lanes: [f32; 8], better: fn(f32, f32) -> bool| {
        lanes
            .into_iter()
            .fold(lanes[0], |m, x| if better(x, m) { x } else { m })
    };
    let (lo, hi) = (pick(l.min, |x, m| x < m), pick(l.max, |x, m| x > m));
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

/// The smallest and largest of a block with no NaN.
#[inline]
fn range_of<T: Lane>(vals: &[T], lowest: T, highest: T) -> (T, T) {
    // Four lanes: one SSE register of f32 (eight make worse code).
    let mut mn = [highest; 4];
    let mut mx = [lowest; 4];
    let (chunks, rest) = vals.as_chunks::<4>();
    for c in chunks {
        for j in 0..4 {
            mn[j] = if c[j] < mn[j] { c[j] } else { mn[j] };
            mx[j] = if c[j] > mx[j] { c[j] } else { mx[j] };
        }
    }
    for &x in rest {
        mn[0] = if x < mn[0] { x } else { mn[0] };
        mx[0] = if x > mx[0] { x } else { mx[0] };
    }
    let mut lo = highest;
    let mut hi = lowest;
    for j in 0..4 {
        lo = if mn[j] < lo { mn[j] } else { lo };
        hi = if mx[j] > hi { mx[j] } else { hi };
    }
    (lo, hi)
}

/// Summarises a block of f64 values. Squares of values beyond 2^±400 would
/// overflow or underflow, so such blocks are scaled by a power of two.
/// `smallest_normal` decides what counts as subnormal (f64's own for F64
/// tensors, f32's for complex magnitudes).
pub(crate) fn block_f64(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    if vals.len() > BLOCK {
        let mut sp = Specials::default();
        let mut m = Moments::default();
        for part in vals.chunks(BLOCK) {
            let (s, pm) = block_f64(part, smallest_normal);
            sp.merge(&s);
            m.merge(&pm);
        }
        return (sp, m);
    }
    let mut all_finite = true;
    for &x in vals {
        all_finite &= x.is_finite();
    }
    if !all_finite {
        let mut sp = Specials::default();
        let mut finite = [0f64; BLOCK];
        let n = split_finite(vals, &mut finite, &mut sp);
        let (s, m) = block_f64(finite.get(..n).unwrap_or(&[]), smallest_normal);
        sp.merge(&s);
        return (sp, m);
    }
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
        super::bins::exponent_f64(largest).max(-1023)
    } else {
        0
    };
    let scale = ldexp(1.0, -exp);
    let mut buffer = [0f64; BLOCK];
    let wide = buffer.get_mut(..vals.len()).unwrap_or(&mut []);
    for (o, &x) in wide.iter_mut().zip(vals) {
        *o = x * scale;
    }
    let wide: &[f64] = wide;
    let shift = first * scale;
    let moments = Moments::from_block(
        vals.len() as u64,
        exp,
        shift,
        [
            lane_sum(wide, |x| x),
            lane_sum(wide, f64::abs),
            // f64 values: Σ(x − x₀) is summed, not derived (n·x₀ rounds).
            lane_sum(wide, |x| x - shift),
            lane_sum(wide, |x| (x - shift) * (x - shift)),
        ],
    );
    (sp, moments)
}

/// Counts the exponent fields of little-endian f32 values
/// (`bits >> 23 & 0xff`) into four interleaved tables of 256 counters
/// (`table.len()` ≥ 1024).
pub(crate) fn exponents_f32(bytes: &[u8], table: &mut [u32]) {
    let field = |c: &[u8; 4]| ((u32::from_le_bytes(*c) >> 23) & 0xff) as usize;
    if let [t0, t1, t2, t3, ..] = table.as_chunks_mut::<256>().0 {
        let (chunks, rest) = bytes.as_chunks::<16>();
        for c in chunks {
            let v = c.as_chunks::<4>().0;
            t0[field(&v[0])] += 1;
            t1[field(&v[1])] += 1;
            t2[field(&v[2])] += 1;
            t3[field(&v[3])] += 1;
        }
        for c in rest.as_chunks::<4>().0 {
            t0[field(c)] += 1;
        }
    }
}

/// Counts the exponent fields of f64 values (`table[bits >> 52 & 0x7ff]`).
pub(crate) fn exponents_f64(vals: &[f64], table: &mut [u32]) {
    for x in vals {
        if let Some(slot) = table.get_mut(((x.to_bits() >> 52) & 0x7ff) as usize) {
            *slot += 1;
        }
    }
}

/// Adds the finite values of a block to a linear histogram kept as four
/// tables of `bins.len()` counters each, one after the other
/// (`tables.len()` must be `4 · bins.len()`).
// Inlined into the AVX2 copy of [`super::simd`], which compiles it
// once more for that target.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn histogram_block<T: Lane>(vals: &[T], bins: &FloatBins, tables: &mut [u32]) {
    let mut all_finite = true;
    for &x in vals {
        all_finite &= x.finite();
    }
    if !all_finite || vals.len() > BLOCK {
        histogram_split(vals, bins, tables);
        return;
    }
    let len = bins.len();
    let bounds = bins.bounds();
    let mut guess = [0u32; BLOCK];
    bins.guess_block(vals, &mut guess);
    let bin = |g: u32, x: f64| {
        if g != UNSURE {
            return g as usize;
        }
        let g = bins.guess_one(x);
        match bounds.get(g) {
            Some(&[lo, hi]) if lo <= x && x < hi => g,
            _ => bins.search(x),
        }
    };
    let Some((t0, rest)) = tables.split_at_mut_checked(len) else {
        return;
    };
    let Some((t1, rest)) = rest.split_at_mut_checked(len) else {
        return;
    };
    let Some((t2, t3)) = rest.split_at_mut_checked(len) else {
        return;
    };
    let guess = guess.get(..vals.len()).unwrap_or(&[]);
    let (gs, g_rest) = guess.as_chunks::<4>();
    let (xs, x_rest) = vals.as_chunks::<4>();
    for (g, x) in gs.iter().zip(xs) {
        let i0 = bin(g[0], x[0].to_f64());
        let i1 = bin(g[1], x[1].to_f64());
        let i2 = bin(g[2], x[2].to_f64());
        let i3 = bin(g[3], x[3].to_f64());
        if let Some(c) = t0.get_mut(i0) {
            *c += 1;
        }
        if let Some(c) = t1.get_mut(i1) {
            *c += 1;
        }
        if let Some(c) = t2.get_mut(i2) {
            *c += 1;
        }
        if let Some(c) = t3.get_mut(i3) {
            *c += 1;
        }
    }
    for (&g, &x) in g_rest.iter().zip(x_rest) {
        if let Some(c) = t0.get_mut(bin(g, x.to_f64())) {
            *c += 1;
        }
    }
}

/// [`histogram_block`] of more than a block, or of a block holding NaN or
/// Inf: the finite values are binned block-wise.
#[inline(never)]
fn histogram_split<T: Lane>(vals: &[T], bins: &FloatBins, tables: &mut [u32]) {
    let mut finite = [T::default(); BLOCK];
    for part in vals.chunks(BLOCK) {
        let n = split_finite(part, &mut finite, &mut Specials::default());
        histogram_block(finite.get(..n).unwrap_or(&[]), bins, tables);
    }
}

/// The first guess of the bin of an f32 value worked in f32 arithmetic,
/// eight lanes to an AVX2 register: `⌊(x − origin) · scale⌋`, taken when its
/// fraction is `margin` away from a whole number, checked otherwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct F32Guess {
    origin: f32,
    scale: f32,
    /// Number of bins, as f32: the guess of the maximum itself.
    count: f32,
    margin: f32,
}

impl FloatBins {
    /// The f32 guess for these bins, when it can be trusted: `origin` (the
    /// minimum) is an f32 value, `x − origin` cannot overflow f32, the scale
    /// is a normal f32, and the bins are few enough that the guess's three
    /// roundings (at most `n · 3 · 2^−24` bins) stay well inside the margin.
    pub(crate) fn f32_guess(&self) -> Option<F32Guess> {
        let (origin, scale, halve) = self.guess_params();
        let n = self.len();
        let max = self.edges().last().copied()?;
        let origin32 = origin as f32;
        let scale32 = scale as f32;
        let ok = self.fast()
            && !halve
            && n <= 1 << 16
            && f64::from(origin32) == origin
            && max - origin < f64::from(f32::MAX) / 2.0
            && scale32.is_normal();
        ok.then(|| F32Guess {
            origin: origin32,
            scale: scale32,
            count: n as f32,
            margin: (SURE_MARGIN + n as f64 * (1.0 / (1u64 << 22) as f64)) as f32,
        })
    }
}

/// Adds a block of little-endian f32 values (`bytes`, at most [`BLOCK`] of
/// them) to a linear histogram kept as four tables of `bins.len() + 1`
/// counters, one after the other (`tables.len()` must be
/// `4 · (bins.len() + 1)`; the last counter of each table is scratch). NaN
/// and ±Inf are skipped. Reads the bytes in place; `guess` comes from
/// [`FloatBins::f32_guess`].
///
/// Guesses that are not sure count in the scratch counter, and are then
/// binned exactly.
// Inlined into the AVX2 copy of [`super::simd`], which compiles it
// once more for that target.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn histogram_f32(bytes: &[u8], bins: &FloatBins, guess: &F32Guess, tables: &mut [u32]) {
    // ⌊g⌋ by the 2^23 trick, with no float-to-int conversion (whose
    // saturating semantics do not vectorise): for 0 ≤ g < 2^22, g + 2^23
    // rounds to round(g) + 2^23, whose low bits hold round(g). NaN and
    // ±Inf give a NaN fraction: never sure.
    const MAGIC: f32 = 8_388_608.0;
    let len = bins.len();
    let scratch = len as u32;
    let values = bytes.as_chunks::<4>().0;
    let values = values.get(..BLOCK).unwrap_or(values);
    let mut slots = [0u32; BLOCK];
    let mut unsure = 0u32;
    for (o, c) in slots.iter_mut().zip(values) {
        let x = f32::from_le_bytes(*c);
        let g = (x - guess.origin) * guess.scale;
        let r = g + MAGIC;
        let nearest = r - MAGIC;
        let above = nearest > g;
        let floor = if above { nearest - 1.0 } else { nearest };
        let frac = g - floor;
        let sure = frac > guess.margin && frac < 1.0 - guess.margin && g >= 0.0 && g < guess.count;
        let i = r
            .to_bits()
            .wrapping_sub(MAGIC.to_bits())
            .wrapping_sub(u32::from(above));
        *o = if sure { i } else { scratch };
        unsure += u32::from(!sure);
    }
    let stride = len + 1;
    let Some((t0, rest)) = tables.split_at_mut_checked(stride) else {
        return;
    };
    let Some((t1, rest)) = rest.split_at_mut_checked(stride) else {
        return;
    };
    let Some((t2, t3)) = rest.split_at_mut_checked(stride) else {
        return;
    };
    let slots = slots.get(..values.len()).unwrap_or(&[]);
    let bump = |t: &mut [u32], i: u32| {
        if let Some(c) = t.get_mut(i as usize) {
            *c += 1;
        }
    };
    // A value that is not sure is binned exactly where it is met: a rare,
    // well-predicted branch.
    let exact = |t: &mut [u32], g: u32, c: &[u8; 4]| {
        let x = f32::from_le_bytes(*c);
        if g == scratch && x.is_finite() {
            bump(t, bins.bin_of(f64::from(x)) as u32);
        }
    };
    let (groups, rest) = slots.as_chunks::<4>();
    let (xs, x_rest) = values.as_chunks::<4>();
    for (g, x) in groups.iter().zip(xs) {
        bump(t0, g[0]);
        bump(t1, g[1]);
        bump(t2, g[2]);
        bump(t3, g[3]);
        if unsure > 0 && g.contains(&scratch) {
            for j in 0..4 {
                exact(t0, g[j], &x[j]);
            }
        }
    }
    for (&g, x) in rest.iter().zip(x_rest) {
        bump(t0, g);
        exact(t0, g, x);
    }
}

/// A guess that must be checked against the edges.
pub(crate) const UNSURE: u32 = u32::MAX;

/// Counts byte values into four interleaved tables.
pub(crate) fn count_bytes(bytes: &[u8], tables: &mut [[u32; 256]; 4]) {
    let (chunks, rest) = bytes.as_chunks::<4>();
    for c in chunks {
        for (t, &b) in tables.iter_mut().zip(c) {
            t[usize::from(b)] += 1;
        }
    }
    for &b in rest {
        tables[0][usize::from(b)] += 1;
    }
}

/// Counts little-endian u16 codes into one table of 65536 counters.
pub(crate) fn count_u16(bytes: &[u8], table: &mut [u32]) {
    let (codes, _) = bytes.as_chunks::<2>();
    if table.len() < 1 << 16 {
        return;
    }
    for c in codes {
        if let Some(slot) = table.get_mut(usize::from(u16::from_le_bytes(*c))) {
            *slot += 1;
        }
    }
}

/// Counts packed six-bit codes, four per three bytes, into four tables of 64.
/// `msb_first` selects the big-endian bit stream. Trailing bytes that do not
/// make a whole group are left to the caller.
pub(crate) fn count_f6(bytes: &[u8], msb_first: bool, tables: &mut [[u32; 64]; 4]) {
    let (groups, _) = bytes.as_chunks::<3>();
    for &[b0, b1, b2] in groups {
        let (b0, b1, b2) = (u32::from(b0), u32::from(b1), u32::from(b2));
        let codes = if msb_first {
            let w = (b0 << 16) | (b1 << 8) | b2;
            [w >> 18, w >> 12, w >> 6, w]
        } else {
            let w = b0 | (b1 << 8) | (b2 << 16);
            [w, w >> 6, w >> 12, w >> 18]
        };
        for (t, c) in tables.iter_mut().zip(codes) {
            t[(c & 63) as usize] += 1;
        }
    }
}

/// Counts how many of `keys` fall in each of a few inclusive intervals
/// `[lo, lo + span]`: `sink(interval, key)` is called for each hit.
#[inline]
pub(crate) fn for_each_hit(
    keys: &[u64],
    intervals: &[(u64, u64)],
    mut sink: impl FnMut(usize, u64),
) {
    for &k in keys {
        for (i, &(lo, span)) in intervals.iter().enumerate() {
            if k.wrapping_sub(lo) <= span {
                sink(i, k);
            }
        }
    }
}

impl FloatBins {
    /// First guesses of the bins of a block of finite values (checked and
    /// corrected against the edges by the caller).
    // Inlined into the AVX2 copy of [`super::simd`], which compiles it
    // once more for that target.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub(crate) fn guess_block<T: Lane>(&self, vals: &[T], out: &mut [u32]) {
        const MAGIC: f64 = 4_503_599_627_370_496.0; // 2^52
        let (origin, scale, _) = self.guess_params();
        if !self.fast() {
            for (o, _) in out.iter_mut().zip(vals) {
                *o = UNSURE;
            }
            return;
        }
        let top = self.len().saturating_sub(1) as f64 + 0.5;
        // floor() by the 2^52 trick, with no float-to-int conversion, so
        // that the loop vectorises; guesses within SURE_MARGIN of a bin
        // boundary are marked UNSURE and checked against the edges.
        for (o, &x) in out.iter_mut().zip(vals) {
            let f = ((x.to_f64() - origin) * scale).max(0.0).min(top);
            // f + 0.5 rounded to an integer is ⌊f⌋ + 1 (ties aside, which
            // the margin rejects); it stays ≥ 2^52 so its low bits hold it.
            let r = (f + 0.5) + MAGIC;
            let frac = f - (r - MAGIC - 1.0);
            let sure = frac > SURE_MARGIN && frac < 1.0 - SURE_MARGIN;
            let i = (r.to_bits() as u32).wrapping_sub(1);
            *o = if sure { i } else { UNSURE };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_blocks_split_specials_off() {
        let vals = [
            1.0f32,
            f32::NAN,
            -2.0,
            f32::INFINITY,
            0.0,
            -0.0,
            1e-40,
            f32::NEG_INFINITY,
            3.0,
        ];
        let mut buf = [0u8; 64];
        let bytes = f32_bytes(&vals, &mut buf);
        let (sp, m) = block_wide(Wide::F32, bytes, 0x0080_0000, scan_groups);
        assert_eq!(
            (sp.nan, sp.pos_inf, sp.neg_inf, sp.zeros, sp.subnormals),
            (1, 1, 1, 2, 1)
        );
        assert_eq!((sp.min, sp.max), (-2.0, 3.0));
        assert_eq!(m.count(), 6);
        let f = m.figures().expect("values");
        let want = (1.0 - 2.0 + 3.0 + f64::from(1e-40f32)) / 6.0;
        assert!((f.mean - want).abs() < 1e-16);
        let (sp, m) = block_wide(Wide::F32, &[], 0x0080_0000, scan_groups);
        assert_eq!((sp.min, m.count()), (f64::INFINITY, 0));
    }

    #[test]
    fn f64_blocks_scale_extremes() {
        let vals = [f64::MAX, f64::MAX, -f64::MAX, 1.0];
        let (sp, m) = block_f64(&vals, f64::MIN_POSITIVE);
        assert_eq!((sp.min, sp.max), (-f64::MAX, f64::MAX));
        let f = m.figures().expect("values");
        assert!((f.mean - f64::MAX / 4.0).abs() <= f64::MAX * 1e-15);
        assert!(f.std.is_finite() && f.std > 0.8 * f64::MAX);
        assert!(f.l2_norm.is_infinite());
        let tiny = [5e-324, 1e-320, 0.0];
        let (sp, m) = block_f64(&tiny, f64::MIN_POSITIVE);
        assert_eq!((sp.zeros, sp.subnormals), (1, 2));
        let f = m.figures().expect("values");
        assert!((f.mean - (5e-324 + 1e-320) / 3.0).abs() <= 5e-324, "{f:?}");
        assert!(f.std > 0.0);
    }

    #[test]
    fn histogram_tables_are_interleaved() {
        let bins = FloatBins::new(0.0, 4.0, 4);
        let vals = [0.0f32, 1.0, 2.0, 3.0, 4.0, f32::NAN, 0.5];
        let mut tables = vec![0u32; 16];
        histogram_block(&vals, &bins, &mut tables);
        let counts: Vec<u32> = (0..4)
            .map(|i| (0..4).map(|t| tables[t * 4 + i]).sum())
            .collect();
        assert_eq!(counts, [2, 1, 1, 2]);
    }

    /// Uniform numbers in [0, 1) from a seed (xorshift64).
    fn uniform(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn sure_guesses_are_right() {
        let mut next = uniform(0x1234_5678_9abc_def0);
        for (min, max, n) in [
            (-1.0, 1.0, 256),
            (0.0, 448.0, 7),
            (1000.0, 1000.001, 256),
            (-3.4e38, 3.4e38, 255),
            (5e-324, 2.2e-308, 256),
            (-0.02, 0.5, 1 << 20),
        ] {
            let bins = FloatBins::new(min, max, n);
            let mut vals: Vec<f64> = (0..4000).map(|_| min + (max - min) * next()).collect();
            vals.extend(bins.edges().iter().copied());
            vals.extend(bins.edges().iter().map(|e| e.next_up().min(max)));
            vals.extend(bins.edges().iter().map(|e| e.next_down().max(min)));
            for part in vals.chunks(BLOCK) {
                let mut guess = [0u32; BLOCK];
                bins.guess_block(part, &mut guess);
                for (&g, &x) in guess.iter().zip(part) {
                    if g != UNSURE {
                        assert_eq!(g as usize, bins.bin_of(x), "{min} {max} {n}: {x}");
                    }
                }
            }
        }
    }

    #[test]
    fn f32_histograms_match_the_edges() {
        let mut next = uniform(0x0123_4567_89ab_cdef);
        for (min, max, n) in [
            (-1.0f32, 1.0f32, 256),
            (0.0, 448.0, 7),
            (1000.0, 1000.001, 256),
            (-0.02, 0.5, 1 << 16),
            (-3.0e38, 3.0e38, 256),
            (1e-40, 1e-38, 256),
        ] {
            let bins = FloatBins::new(f64::from(min), f64::from(max), n);
            let Some(guess) = bins.f32_guess() else {
                continue;
            };
            let mut vals: Vec<f32> = (0..6000)
                .map(|_| (f64::from(min) + f64::from(max - min) * next()) as f32)
                .map(|x| x.clamp(min, max))
                .collect();
            for &e in bins.edges() {
                let e = e as f32;
                vals.extend([e, e.next_up(), e.next_down()].map(|x| x.clamp(min, max)));
            }
            vals.extend([f32::NAN, f32::INFINITY, min, max]);
            let mut want = vec![0u32; bins.len()];
            for &x in &vals {
                if x.is_finite() {
                    want[bins.bin_of(f64::from(x))] += 1;
                }
            }
            let stride = bins.len() + 1;
            let mut tables = vec![0u32; 4 * stride];
            let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
            for part in bytes.chunks(4 * BLOCK) {
                histogram_f32(part, &bins, &guess, &mut tables);
            }
            let got: Vec<u32> = (0..bins.len())
                .map(|i| (0..4).map(|t| tables[t * stride + i]).sum())
                .collect();
            assert_eq!(got, want, "{min} {max} {n}");
        }
    }

    #[test]
    fn f6_groups() {
        let mut tables = [[0u32; 64]; 4];
        // LSB first: codes 1, 2, 3, 63.
        count_f6(&[0x81, 0x30, 0xfc], false, &mut tables);
        assert_eq!(
            (tables[0][1], tables[1][2], tables[2][3], tables[3][63]),
            (1, 1, 1, 1)
        );
        let mut tables = [[0u32; 64]; 4];
        count_f6(&[0x04, 0x20, 0xff, 0x00], true, &mut tables);
        assert_eq!(
            (tables[0][1], tables[1][2], tables[2][3], tables[3][63]),
            (1, 1, 1, 1)
        );
    }
}
