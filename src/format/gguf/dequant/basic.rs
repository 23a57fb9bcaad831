//! The 32-element types Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: one f16 scale
//! (and, for Q4_1/Q5_1, an f16 minimum) per block.

use super::f16;

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

/// A Q4_0 block: `d * (q - 8)`.
pub(super) fn q4_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16(b, 0);
    out.extend((0..32).map(|i| d * f32::from(q4(&b[2..], i) as i8 - 8)));
}

/// A Q4_1 block: `d * q + m`.
pub(super) fn q4_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (f16(b, 0), f16(b, 2));
    out.extend((0..32).map(|i| d * f32::from(q4(&b[4..], i)) + m));
}

/// A Q5_0 block: `d * (q - 16)`.
pub(super) fn q5_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    out.extend((0..32).map(|i| d * f32::from(q5(&b[6..], qh, i) as i8 - 16)));
}

/// A Q5_1 block: `d * q + m`.
pub(super) fn q5_1(b: &[u8], out: &mut Vec<f32>) {
    let (d, m) = (f16(b, 0), f16(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    out.extend((0..32).map(|i| d * f32::from(q5(&b[8..], qh, i)) + m));
}

/// A Q8_0 block: `q * d` (gguf-py's order; the product is the same).
pub(super) fn q8_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16(b, 0);
    out.extend(b[2..34].iter().map(|&x| f32::from(x as i8) * d));
}
