//! The K-quants Q2_K to Q6_K: 256-element blocks of 16 or 8 sub-blocks,
//! each with its own scale (and minimum) scaled by the block's f16 `d`
//! (and `dmin`).

use super::f16;

/// The eight 6-bit scales and mins of a Q4_K/Q5_K block's 12 scale bytes.
fn scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        m[j] = s[4 + j] & 0x3F;
        sc[4 + j] = (s[8 + j] & 0x0F) | ((s[j] >> 2) & 0x30);
        m[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
    }
    (sc, m)
}

/// A Q4_K (no `qh`) or Q5_K block: eight sub-blocks of 32, each
/// `(d * sc) * q - (dmin * m)`.
fn k_quant(b: &[u8], qh: Option<&[u8]>, qs: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (f16(b, 0), f16(b, 2));
    let (sc, m) = scales_mins(&b[4..16]);
    for j in 0..8 {
        let scale = d * f32::from(sc[j]);
        let min = dmin * f32::from(m[j]);
        let (chunk, shift) = (j / 2 * 32, (j % 2) * 4);
        out.extend((0..32).map(|k| {
            let low = (qs[chunk + k] >> shift) & 0x0F;
            let high = qh.map_or(0, |h| ((h[k] >> j) & 1) << 4);
            scale * f32::from(low | high) - min
        }));
    }
}

/// A Q4_K block.
pub(super) fn q4_k(b: &[u8], out: &mut Vec<f32>) {
    k_quant(b, None, &b[16..144], out);
}

/// A Q5_K block.
pub(super) fn q5_k(b: &[u8], out: &mut Vec<f32>) {
    k_quant(b, Some(&b[16..48]), &b[48..176], out);
}

/// A Q6_K block: sixteen sub-blocks of 16, each `(d * scale) * (q - 32)`.
pub(super) fn q6_k(block: &[u8], out: &mut Vec<f32>) {
    let (ql, qh, scales) = (&block[..128], &block[128..192], &block[192..208]);
    let d = f16(block, 208);
    out.extend((0..256).map(|e| {
        // Element e: half `e / 128`, within it nibble row `(e % 128) / 64`
        // of `ql` and 2-bit row `(e % 128) / 32` of `qh`.
        let (half, within) = (e / 128, e % 128);
        let low = (ql[half * 64 + e % 64] >> (4 * (within / 64))) & 0x0F;
        let high = (qh[half * 32 + e % 32] >> (2 * (within / 32))) & 0x03;
        let code = f32::from((low | (high << 4)) as i8 - 32);
        (d * f32::from(scales[e / 16] as i8)) * code
    }));
}

/// The 2-bit code of element `e` of a 256-element block's 64 `qs` bytes:
/// half `e / 128`, bit pair `(e % 128) / 32` of byte `e % 32`.
fn q2(qs: &[u8], e: usize) -> u8 {
    (qs[e / 128 * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 0x03
}

/// A Q2_K block: sixteen sub-blocks of 16, each
/// `(d * (sc & 15)) * q - (dmin * (sc >> 4))`.
pub(super) fn q2_k(block: &[u8], out: &mut Vec<f32>) {
    let (scales, qs) = (&block[..16], &block[16..80]);
    let (d, dmin) = (f16(block, 80), f16(block, 82));
    out.extend((0..256).map(|e| {
        let sc = scales[e / 16];
        (d * f32::from(sc & 0x0F)) * f32::from(q2(qs, e)) - dmin * f32::from(sc >> 4)
    }));
}

/// A Q3_K block: sixteen sub-blocks of 16, each `(d * (sc - 32)) * q`,
/// q the 2-bit code less 4 where the high mask bit is clear.
pub(super) fn q3_k(block: &[u8], out: &mut Vec<f32>) {
    let (hmask, qs, packed) = (&block[..32], &block[32..96], &block[96..108]);
    let d = f16(block, 108);
    let scale = |i: usize| {
        let low = (packed[i % 8] >> (4 * (i / 8))) & 0x0F;
        let high = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
        f32::from((low | (high << 4)) as i8 - 32)
    };
    out.extend((0..256).map(|e| {
        let missing = ((hmask[e % 32] >> (e / 32)) & 1) ^ 1;
        let code = q2(qs, e) as i8 - ((missing << 2) as i8);
        (d * scale(e / 16)) * f32::from(code)
    }));
}
