//! The block types' values (GGUF.md, "Bit-exact decoding"), block by
//! block, each product and sum one float32 operation in gguf-py's order
//! (Rust contracts no multiply-add). The first decoders: the 32-element
//! types Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, and the K-quants Q2_K to Q6_K;
//! the IQ types, the ternary and FP4 types come next.

use super::types::GgmlType;

fn f16(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// The 5-bit code of element `i` of a Q5 block: its low nibble from `qs`
/// (elements 16.. in the high nibbles), its fifth bit from `qh`.
fn q5(qs: &[u8], qh: u32, i: usize) -> u8 {
    let low = if i < 16 {
        qs[i] & 0x0F
    } else {
        qs[i - 16] >> 4
    };
    low | ((((qh >> i) & 1) as u8) << 4)
}

/// The low nibble of element `i` of a 32-element 4-bit block.
fn q4(qs: &[u8], i: usize) -> u8 {
    if i < 16 {
        qs[i] & 0x0F
    } else {
        qs[i - 16] >> 4
    }
}

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

/// A Q6_K block: sixteen sub-blocks of 16, each `(d * scale) * (q - 32)`.
fn q6_k(block: &[u8], out: &mut Vec<f32>) {
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
fn q2_k(block: &[u8], out: &mut Vec<f32>) {
    let (scales, qs) = (&block[..16], &block[16..80]);
    let (d, dmin) = (f16(block, 80), f16(block, 82));
    out.extend((0..256).map(|e| {
        let sc = scales[e / 16];
        (d * f32::from(sc & 0x0F)) * f32::from(q2(qs, e)) - dmin * f32::from(sc >> 4)
    }));
}

/// A Q3_K block: sixteen sub-blocks of 16, each `(d * (sc - 32)) * q`,
/// q the 2-bit code less 4 where the high mask bit is clear.
fn q3_k(block: &[u8], out: &mut Vec<f32>) {
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

/// Appends the values of `blocks` (whole blocks of type `t`) to `out`.
/// An error names a type with no decoder yet, or bytes that are not whole
/// blocks.
pub fn dequantize(t: GgmlType, blocks: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
    let (n, size) = t.block();
    let size = size as usize;
    if t.is_stored() || !blocks.len().is_multiple_of(size) {
        return Err(format!(
            "{} blocks are {size} bytes each; {} bytes given",
            t.name(),
            blocks.len()
        ));
    }
    out.reserve(blocks.len() / size * n as usize);
    for b in blocks.chunks_exact(size) {
        match t.name() {
            "Q4_0" => {
                let d = f16(b, 0);
                out.extend((0..32).map(|i| d * f32::from(i16::from(q4(&b[2..], i)) as i8 - 8)));
            }
            "Q4_1" => {
                let (d, m) = (f16(b, 0), f16(b, 2));
                out.extend((0..32).map(|i| d * f32::from(q4(&b[4..], i)) + m));
            }
            "Q5_0" => {
                let d = f16(b, 0);
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                out.extend((0..32).map(|i| d * f32::from(q5(&b[6..], qh, i) as i8 - 16)));
            }
            "Q5_1" => {
                let (d, m) = (f16(b, 0), f16(b, 2));
                let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
                out.extend((0..32).map(|i| d * f32::from(q5(&b[8..], qh, i)) + m));
            }
            "Q8_0" => {
                let d = f16(b, 0);
                out.extend(b[2..34].iter().map(|&x| f32::from(x as i8) * d));
            }
            "Q2_K" => q2_k(b, out),
            "Q3_K" => q3_k(b, out),
            "Q4_K" => k_quant(b, None, &b[16..144], out),
            "Q5_K" => k_quant(b, Some(&b[16..48]), &b[48..176], out),
            "Q6_K" => q6_k(b, out),
            other => return Err(format!("{other} is not decoded yet")),
        }
    }
    Ok(())
}
