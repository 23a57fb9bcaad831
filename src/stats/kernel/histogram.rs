//! Linear and exponent (log2) histograms of a block: first guesses of the
//! bin by float arithmetic that vectorises, checked against the edges only
//! where a guess lies near a bin boundary.

use super::{BLOCK, Lane, Specials, split_finite};
use crate::stats::bins::{FloatBins, SURE_MARGIN};

/// Adds the finite values of a block to a linear histogram kept as four
/// tables of `bins.len()` counters each, one after the other
/// (`tables.len()` must be `4 · bins.len()`).
// Inlined into the AVX2 copy of [`crate::stats::simd`], which compiles it
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
    let mut guess = [0u32; BLOCK];
    bins.guess_block(vals, &mut guess);
    let bin = |g: u32, x: f64| {
        if g != UNSURE {
            return g as usize;
        }
        let g = bins.guess_one(x);
        if bins.holds(g, x) { g } else { bins.search(x) }
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
// Inlined into the AVX2 copy of [`crate::stats::simd`], which compiles it
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

impl FloatBins {
    /// First guesses of the bins of a block of finite values (checked and
    /// corrected against the edges by the caller).
    // Inlined into the AVX2 copy of [`crate::stats::simd`], which compiles it
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
