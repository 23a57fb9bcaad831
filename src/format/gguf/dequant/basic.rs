//! The 32-element types Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: one f16 scale
//! (and, for Q4_1/Q5_1, an f16 minimum) per block. The 4-bit types go as
//! two runs of 16 codes (the low nibbles of `qs`, then the high ones)
//! through the block's table.

use super::{Sink, f16, table_of};

/// The low nibble of element `i` of a 32-element 4-bit block: elements 16..
/// in the high nibbles.
pub(super) fn q4(qs: &[u8], i: usize) -> u8 {
    if i < 16 {
        qs[i] & 0x0F
    } else {
        qs[i - 16] >> 4
    }
}

/// The 5-bit code of element `i` of a Q5 block: its low nibble from `qs`,
/// its fifth bit from `qh`.
fn q5(qs: &[u8], qh: u32, i: usize) -> u8 {
    q4(qs, i) | ((((qh >> i) & 1) as u8) << 4)
}

/// A run of nibbles `qs` whose codes stand for `t`: the low nibbles'
/// elements first, then the high ones' (a 32-element block's 16 bytes).
#[inline]
pub(super) fn nibble_halves(out: &mut impl Sink, t: &[f32; 16], qs: &[u8]) {
    out.nibbles(t, t, qs);
}

/// A Q4_0 block: `d * (q - 8)`, code q (the stored nibble).
pub(super) fn q4_0(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let t = table_of(16, |q| d * f32::from(q as i8 - 8));
    nibble_halves(out, &t, &b[2..18]);
}

/// A Q4_1 block: `d * q + m`.
pub(super) fn q4_1(b: &[u8], out: &mut impl Sink) {
    let (d, m) = (f16(b, 0), f16(b, 2));
    let t = table_of(16, |q| d * f32::from(q) + m);
    nibble_halves(out, &t, &b[4..20]);
}

/// A Q5_0 block: `d * (q - 16)`, code q (0..31).
pub(super) fn q5_0(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for i in 0..32 {
        let q = q5(&b[6..], qh, i);
        out.one(d * f32::from(q as i8 - 16), i32::from(q));
    }
}

/// A Q5_1 block: `d * q + m`.
pub(super) fn q5_1(b: &[u8], out: &mut impl Sink) {
    let (d, m) = (f16(b, 0), f16(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for i in 0..32 {
        let q = q5(&b[8..], qh, i);
        out.one(d * f32::from(q) + m, i32::from(q));
    }
}

/// A Q8_0 block: `q * d` (gguf-py's order; the product is the same), code
/// q (-128..127).
pub(super) fn q8_0(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    for &x in &b[2..34] {
        let q = x as i8;
        out.one(f32::from(q) * d, i32::from(q));
    }
}
