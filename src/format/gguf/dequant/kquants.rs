//! The K-quants Q2_K to Q6_K: 256-element blocks of 16 or 8 sub-blocks,
//! each with its own scale (and minimum) scaled by the block's f16 `d`
//! (and `dmin`). Q4_K's and Q2_K's sub-blocks go as runs of codes through
//! the sub-block's table.

use super::{Sink, f16, table_of};

/// The eight 6-bit scales and mins of a Q4_K/Q5_K block's 12 scale bytes.
#[inline]
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

/// A Q4_K block: eight sub-blocks of 32, each `(d * sc) * q - (dmin * m)`,
/// code q (0..15); sub-blocks `2i` and `2i + 1` in the low and high
/// nibbles of the 32 bytes `i` of `qs`.
pub(super) fn q4_k(b: &[u8], out: &mut impl Sink) {
    let t = q4_k_tables(b);
    for (pair, qs) in b[16..144].chunks_exact(32).enumerate() {
        out.nibbles(&t[2 * pair], &t[2 * pair + 1], qs);
    }
}

/// The tables of a Q4_K block's eight sub-blocks (`b` is the block's 144
/// bytes): value `q` of sub-block `j` at `[j][q]`. Inlined, so that a
/// caller compiled for wider vectors computes them with those.
#[allow(clippy::inline_always)]
#[inline(always)]
pub fn q4_k_tables(b: &[u8]) -> [[f32; 16]; 8] {
    let (d, dmin) = (f16(b, 0), f16(b, 2));
    let (sc, m) = scales_mins(&b[4..16]);
    std::array::from_fn(|j| {
        let scale = d * f32::from(sc[j]);
        let min = dmin * f32::from(m[j]);
        table_of(16, |q| scale * f32::from(q) - min)
    })
}

/// A Q5_K block: as Q4_K, with a fifth bit per code from `qh` (codes
/// 0..31).
pub(super) fn q5_k(b: &[u8], out: &mut impl Sink) {
    let (d, dmin) = (f16(b, 0), f16(b, 2));
    let (sc, m) = scales_mins(&b[4..16]);
    let (qh, qs) = (&b[16..48], &b[48..176]);
    for j in 0..8 {
        let scale = d * f32::from(sc[j]);
        let min = dmin * f32::from(m[j]);
        let (chunk, shift) = (j / 2 * 32, (j % 2) * 4);
        for k in 0..32 {
            let q = ((qs[chunk + k] >> shift) & 0x0F) | (((qh[k] >> j) & 1) << 4);
            out.one(scale * f32::from(q) - min, i32::from(q));
        }
    }
}

/// A Q6_K block: sixteen sub-blocks of 16, each `(d * scale) * (q - 32)`,
/// code `q - 32` (-32..31).
pub(super) fn q6_k(block: &[u8], out: &mut impl Sink) {
    let (ql, qh, scales) = (&block[..128], &block[128..192], &block[192..208]);
    let d = f16(block, 208);
    for e in 0..256 {
        // Element e: half `e / 128`, within it nibble row `(e % 128) / 64`
        // of `ql` and 2-bit row `(e % 128) / 32` of `qh`.
        let (half, within) = (e / 128, e % 128);
        let low = (ql[half * 64 + e % 64] >> (4 * (within / 64))) & 0x0F;
        let high = (qh[half * 32 + e % 32] >> (2 * (within / 32))) & 0x03;
        let code = (low | (high << 4)) as i8 - 32;
        out.one(
            (d * f32::from(scales[e / 16] as i8)) * f32::from(code),
            i32::from(code),
        );
    }
}

/// The 16 bytes of a 256-element block's 64 `qs` bytes that hold the 2-bit
/// codes of sub-block `s` of 16, and the codes' shift: element `e` is in
/// half `e / 128`, bit pair `(e % 128) / 32` of byte `e % 32`.
fn q2_run(qs: &[u8], s: usize) -> (&[u8], u32) {
    let at = s / 8 * 32 + 16 * (s % 2);
    (&qs[at..at + 16], 2 * ((s % 8) / 2) as u32)
}

/// A Q2_K block: sixteen sub-blocks of 16, each
/// `(d * (sc & 15)) * q - (dmin * (sc >> 4))`, code q (0..3).
pub(super) fn q2_k(block: &[u8], out: &mut impl Sink) {
    let (scales, qs) = (&block[..16], &block[16..80]);
    let (d, dmin) = (f16(block, 80), f16(block, 82));
    for (s, &sc) in scales.iter().enumerate() {
        let t = table_of(4, |q| {
            (d * f32::from(sc & 0x0F)) * f32::from(q) - dmin * f32::from(sc >> 4)
        });
        let (run, shift) = q2_run(qs, s);
        out.table(&t, run, shift, 0x03, 0);
    }
}

/// A Q3_K block: sixteen sub-blocks of 16, each `(d * (sc - 32)) * q`,
/// q (the code, -4..3) the 2-bit code less 4 where the high mask bit is
/// clear.
pub(super) fn q3_k(block: &[u8], out: &mut impl Sink) {
    let (hmask, qs, packed) = (&block[..32], &block[32..96], &block[96..108]);
    let d = f16(block, 108);
    for s in 0..16 {
        let low = (packed[s % 8] >> (4 * (s / 8))) & 0x0F;
        let high = (packed[8 + s % 4] >> (2 * (s / 4))) & 0x03;
        let scale = d * f32::from((low | (high << 4)) as i8 - 32);
        let (run, shift) = q2_run(qs, s);
        for (i, &x) in run.iter().enumerate() {
            let e = 16 * s + i;
            let missing = ((hmask[e % 32] >> (e / 32)) & 1) ^ 1;
            let code = ((x >> shift) & 3) as i8 - ((missing << 2) as i8);
            out.one(scale * f32::from(code), i32::from(code));
        }
    }
}
