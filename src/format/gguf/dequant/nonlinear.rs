//! The 4-bit non-linear types: IQ4_NL and IQ4_XS (`kvalues_iq4nl`), MXFP4
//! and NVFP4 (the doubled e2m1 values of `kvalues_mxfp4`), each value
//! `scale * kvalue`.

use super::basic::nibble_halves;
use super::grids::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::{Sink, f16, table_of};

/// The 16 values `d * kvalues[q]` of a run's codes.
#[inline]
fn scaled(d: f32, kvalues: &[i8; 16]) -> [f32; 16] {
    table_of(16, |q| d * f32::from(kvalues[usize::from(q)]))
}

/// An IQ4_NL block: f16 `d`, 16 bytes of nibbles (codes 0..15, indices
/// into `kvalues_iq4nl`).
pub(super) fn iq4_nl(b: &[u8], out: &mut impl Sink) {
    nibble_halves(out, &scaled(f16(b, 0), &KVALUES_IQ4NL), &b[2..18]);
}

/// An IQ4_XS block: f16 `d`, a u16 of the scales' high bit pairs, 4 bytes
/// of their low nibbles, 128 bytes of nibbles; sub-block `j` of 32 has the
/// 6-bit scale `s - 32` and values `(d * (s - 32)) * kvalue`.
pub(super) fn iq4_xs(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 0);
    let high = u16::from_le_bytes([b[2], b[3]]);
    let (low, qs) = (&b[4..8], &b[8..136]);
    for (j, run) in qs.chunks_exact(16).enumerate() {
        let l = (low[j / 2] >> (4 * (j % 2))) & 0x0F;
        let h = ((high >> (2 * j)) & 3) as u8;
        let dl = d * f32::from((l | (h << 4)) as i8 - 32);
        nibble_halves(out, &scaled(dl, &KVALUES_IQ4NL), run);
    }
}

/// MXFP4's e8m0 scale, halved for the doubled kvalues: 2^(e - 128), the
/// codes 0 and 1 subnormal (ggml's `ggml_e8m0_to_fp32_half`).
pub(super) fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000_u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

/// An MXFP4 block: an e8m0 scale byte, 16 bytes of nibbles (codes 0..15,
/// the e2m1 codes).
pub(super) fn mxfp4(b: &[u8], out: &mut impl Sink) {
    nibble_halves(out, &scaled(e8m0_half(b[0]), &KVALUES_MXFP4), &b[1..17]);
}

/// NVFP4's unsigned e4m3 scale (bias 7), halved for the doubled kvalues,
/// as gguf-py decodes it: the top bit ignored, the codes 0 and 0x7F give 0.
pub(super) fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let (exp, man) = (u32::from((x >> 3) & 0x0F), f32::from(x & 7));
    let raw = if exp == 0 {
        man * f32::from_bits(118 << 23) // 2^-9
    } else {
        (1.0 + man / 8.0) * f32::from_bits((exp + 120) << 23) // 2^(exp - 7)
    };
    raw * 0.5
}

/// An NVFP4 block: four ue4m3 scale bytes, then four sub-blocks of 16
/// values in 8 bytes of nibbles each (low nibbles first, then high).
pub(super) fn nvfp4(b: &[u8], out: &mut impl Sink) {
    for (s, run) in b[4..36].chunks_exact(8).enumerate() {
        nibble_halves(out, &scaled(ue4m3_half(b[s]), &KVALUES_MXFP4), run);
    }
}
