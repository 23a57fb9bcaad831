//! The 4-bit non-linear types: IQ4_NL and IQ4_XS (`kvalues_iq4nl`), MXFP4
//! and NVFP4 (the doubled e2m1 values of `kvalues_mxfp4`), each value
//! `scale * kvalue`.

use super::basic::q4;
use super::f16;
use super::grids::{KVALUES_IQ4NL, KVALUES_MXFP4};

/// The values `d * kvalues[q]` of a 32-element run of nibbles (`qs`, 16
/// bytes: low nibbles first, then high).
fn push_nibbles(out: &mut Vec<f32>, d: f32, qs: &[u8], kvalues: &[i8; 16]) {
    out.extend((0..32).map(|i| d * f32::from(kvalues[usize::from(q4(qs, i))])));
}

/// An IQ4_NL block: f16 `d`, 16 bytes of nibbles.
pub(super) fn iq4_nl(b: &[u8], out: &mut Vec<f32>) {
    push_nibbles(out, f16(b, 0), &b[2..18], &KVALUES_IQ4NL);
}

/// An IQ4_XS block: f16 `d`, a u16 of the scales' high bit pairs, 4 bytes
/// of their low nibbles, 128 bytes of nibbles; sub-block `j` of 32 has the
/// 6-bit scale `s - 32` and values `(d * (s - 32)) * kvalue`.
pub(super) fn iq4_xs(b: &[u8], out: &mut Vec<f32>) {
    let d = f16(b, 0);
    let high = u16::from_le_bytes([b[2], b[3]]);
    let (low, qs) = (&b[4..8], &b[8..136]);
    for (j, run) in qs.chunks_exact(16).enumerate() {
        let l = (low[j / 2] >> (4 * (j % 2))) & 0x0F;
        let h = ((high >> (2 * j)) & 3) as u8;
        let dl = d * f32::from((l | (h << 4)) as i8 - 32);
        push_nibbles(out, dl, run, &KVALUES_IQ4NL);
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

/// An MXFP4 block: an e8m0 scale byte, 16 bytes of nibbles.
pub(super) fn mxfp4(b: &[u8], out: &mut Vec<f32>) {
    push_nibbles(out, e8m0_half(b[0]), &b[1..17], &KVALUES_MXFP4);
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
pub(super) fn nvfp4(b: &[u8], out: &mut Vec<f32>) {
    for (s, run) in b[4..36].chunks_exact(8).enumerate() {
        let d = ue4m3_half(b[s]);
        let code = |i: usize| {
            if i < 8 {
                run[i] & 0x0F
            } else {
                run[i - 8] >> 4
            }
        };
        out.extend((0..16).map(|i| d * f32::from(KVALUES_MXFP4[usize::from(code(i))])));
    }
}
