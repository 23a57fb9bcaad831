//! IQ1_S and IQ1_M: 256-element blocks of groups of 8 values, each group
//! an 11-bit row index of the ternary grid (-1, 0, 1) shifted by ±0.125,
//! each value `(d * (2s + 1)) * (grid + delta)` for a 3-bit scale `s`.

use super::grids_iq1s::IQ1S_GRID;
use super::{Sink, f16};

/// The shift of a group: +0.125, or -0.125 where its flag is set.
fn delta(negative: bool) -> f32 {
    if negative { -0.125 } else { 0.125 }
}

/// Eight values `dl * (grid + delta)` of grid row `index`.
fn push_row(out: &mut impl Sink, dl: f32, index: usize, delta: f32) {
    let row = IQ1S_GRID[index];
    for k in 0..8 {
        out.one(dl * (f32::from((row >> (8 * k)) as u8 as i8) + delta), 0);
    }
}

/// An IQ1_S block: `d`, 32 low index bytes, then per sub-block of 32 a
/// u16: four 3-bit high index parts, a 3-bit scale, the delta's sign.
pub(super) fn iq1_s(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let qs = &b[2..34];
    for (sub, h) in b[34..50].chunks_exact(2).enumerate() {
        let qh = u16::from_le_bytes([h[0], h[1]]);
        let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
        let delta = delta(qh & 0x8000 != 0);
        for g in 0..4 {
            let high = usize::from((qh >> (3 * g)) & 7);
            push_row(out, dl, usize::from(qs[sub * 4 + g]) | (high << 8), delta);
        }
    }
}

/// The four u16 scale words of an IQ1_M block.
fn scale_words(b: &[u8]) -> [u16; 4] {
    std::array::from_fn(|i| u16::from_le_bytes([b[48 + 2 * i], b[49 + 2 * i]]))
}

/// An IQ1_M block's f16 `d`, from the top nibbles of its scale words.
pub(super) fn iq1_m_d(b: &[u8]) -> f32 {
    let w = scale_words(b);
    let bits = (w[0] >> 12) | ((w[1] & 0xF000) >> 8) | ((w[2] & 0xF000) >> 4) | (w[3] & 0xF000);
    half::f16::from_bits(bits).to_f32()
}

/// An IQ1_M block: 32 low index bytes, 16 bytes of nibbles (a 3-bit high
/// index part and the delta's sign per group), four u16 of 3-bit scales
/// (one per 16 values) whose top nibbles make the f16 `d`.
pub(super) fn iq1_m(b: &[u8], out: &mut impl Sink) {
    let (qs, qh) = (&b[..32], &b[32..48]);
    let w = scale_words(b);
    let d = iq1_m_d(b);
    for g in 0..32 {
        let s = (w[g / 8] >> (3 * ((g / 2) % 4))) & 7;
        let dl = d * f32::from(2 * s + 1);
        let nibble = (qh[g / 2] >> (4 * (g % 2))) & 0x0F;
        let index = usize::from(qs[g]) | (usize::from(nibble & 7) << 8);
        push_row(out, dl, index, delta(nibble & 8 != 0));
    }
}
