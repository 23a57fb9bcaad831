//! IQ3_XXS and IQ3_S: 256-element blocks of groups of 4 values, each group
//! a row of a 4-wide grid, with one sign per value.

use super::grids::{IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use super::{Sink, f16, push_signed};

/// Two 4-wide grid rows as one 8-wide row (the first in the low bytes).
fn pair(grid: &[u32], a: usize, b: usize) -> u64 {
    u64::from(grid[a]) | (u64::from(grid[b]) << 32)
}

/// An IQ3_XXS block: `d`, 64 grid indices, then per sub-block of 32 a u32
/// of four 7-bit sign indices under a 4-bit scale `s`, each value
/// `((d * (0.5 + s)) * 0.5) * grid * sign`.
pub(super) fn iq3_xxs(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let (qs, words) = (&b[2..66], &b[66..98]);
    for (sub, w) in words.chunks_exact(4).enumerate() {
        let aux = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for k in 0..4 {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * k)) & 0x7F) as usize];
            let at = sub * 8 + 2 * k;
            let row = pair(&IQ3XXS_GRID, usize::from(qs[at]), usize::from(qs[at + 1]));
            push_signed(out, db, row, signs);
        }
    }
}

/// An IQ3_S block: `d`, 64 low index bytes, 8 bytes of high index bits,
/// 32 sign bytes, 4 scale bytes (a nibble per sub-block of 32), each value
/// `(d * (1 + 2s)) * grid * sign`.
pub(super) fn iq3_s(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
    let index = |i: usize| usize::from(qs[i]) | (usize::from((qh[i / 8] >> (i % 8)) & 1) << 8);
    for (sub, group_signs) in signs.chunks_exact(4).enumerate() {
        let s = (scales[sub / 2] >> (4 * (sub % 2))) & 0x0F;
        let db = d * f32::from(1 + 2 * s);
        for (k, &sign) in group_signs.iter().enumerate() {
            let g = sub * 4 + k;
            let row = pair(&IQ3S_GRID, index(2 * g), index(2 * g + 1));
            push_signed(out, db, row, sign);
        }
    }
}
