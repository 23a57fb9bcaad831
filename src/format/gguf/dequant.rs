//! The block types' values (GGUF.md, "Bit-exact decoding"), block by
//! block, each product and sum one float32 operation in gguf-py's order
//! (Rust contracts no multiply-add). The first decoders: the 32-element
//! types Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0; the K-quants, the IQ types, the
//! ternary and FP4 types come next.

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
            other => return Err(format!("{other} is not decoded yet")),
        }
    }
    Ok(())
}
