//! IQ2_XXS, IQ2_XS and IQ2_S: 256-element blocks of groups of 8 values,
//! each group a row of an 8-wide grid (0x08, 0x19, 0x2b) with eight signs,
//! scaled by `(d * (0.5 + s)) * 0.25` for a 4-bit sub-block scale `s`.

use super::grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS};
use super::{Sink, f16, push_signed};

/// The scale of a group of an IQ2 block: `(d * (0.5 + s)) * 0.25`.
fn scale(d: f32, s: u32) -> f32 {
    d * (0.5 + s as f32) * 0.25
}

/// The 4-bit scale of group `g` (of 8 values) from an IQ2_XS/IQ2_S
/// block's 8 scale bytes: one nibble per 16 values, low nibble first.
fn nibble_scale(scales: &[u8], g: usize) -> u32 {
    u32::from((scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0F)
}

/// An IQ2_XXS block: `d`, then per sub-block of 32 two u32 words, four
/// grid indices (bytes) and four 7-bit sign indices under a 4-bit scale.
pub(super) fn iq2_xxs(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    for sub in b[2..66].chunks_exact(8) {
        let aux = u32::from_le_bytes([sub[4], sub[5], sub[6], sub[7]]);
        let db = scale(d, aux >> 28);
        for (g, &index) in sub[..4].iter().enumerate() {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * g)) & 0x7F) as usize];
            push_signed(out, db, IQ2XXS_GRID[usize::from(index)], signs);
        }
    }
}

/// An IQ2_XS block: `d`, 32 u16 (a 9-bit grid index and a 7-bit sign
/// index per group), 8 scale bytes.
pub(super) fn iq2_xs(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let scales = &b[66..74];
    for (g, q) in b[2..66].chunks_exact(2).enumerate() {
        let q = u16::from_le_bytes([q[0], q[1]]);
        let db = scale(d, nibble_scale(scales, g));
        let signs = KSIGNS_IQ2XS[usize::from(q >> 9)];
        push_signed(out, db, IQ2XS_GRID[usize::from(q & 511)], signs);
    }
}

/// An IQ2_S block: `d`, 32 low index bytes, 32 sign bytes, 8 bytes of
/// 2-bit high index parts, 8 scale bytes.
pub(super) fn iq2_s(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let (qs, signs, qh, scales) = (&b[2..34], &b[34..66], &b[66..74], &b[74..82]);
    for g in 0..32 {
        let high = (qh[g / 4] >> (2 * (g % 4))) & 0x03;
        let index = usize::from(qs[g]) | (usize::from(high) << 8);
        let db = scale(d, nibble_scale(scales, g));
        push_signed(out, db, IQ2S_GRID[index], signs[g]);
    }
}
