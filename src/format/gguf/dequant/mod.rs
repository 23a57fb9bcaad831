//! The block types' values (GGUF.md, "Bit-exact decoding"), block by
//! block, each product and sum one float32 operation in gguf-py's order
//! (Rust contracts no multiply-add): the 32-element types (`basic`), the
//! K-quants (`kquants`), the grid types IQ2 (`iq2`), IQ3 (`iq3`) and
//! IQ1 (`iq1`), the 4-bit non-linear types (`nonlinear`) and the
//! ternary types (`ternary`). The lookup tables (`grids`,
//! `grids_iq1s`) are generated from ggml's source by
//! `scripts/gen_gguf_grids.py`.

mod basic;
mod grids;
mod grids_iq1s;
mod iq1;
mod iq2;
mod iq3;
mod kquants;
mod nonlinear;
mod ternary;

#[cfg(test)]
mod tests;

use super::types::GgmlType;

/// The f16 at byte `at` of a block, widened (exactly) to f32.
fn f16(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Eight values `(db * grid) * sign` of an 8-wide grid row (byte `k` of
/// `row`, unsigned, is element `k`), sign -1 where bit `k` of `signs` is
/// set. The product by -1 is written as a negation that keeps a NaN as it
/// is, as the multiplication in gguf-py does (a compiler may turn `x * -1.0`
/// into a sign flip, which would flip a NaN's sign bit too).
fn push_signed(out: &mut Vec<f32>, db: f32, row: u64, signs: u8) {
    out.extend((0..8).map(|k| {
        let v = db * f32::from((row >> (8 * k)) as u8);
        if signs & grids::KMASK_IQ2XS[k] != 0 && !v.is_nan() {
            -v
        } else {
            v
        }
    }));
}

/// Appends the values of `blocks` (whole blocks of `size` bytes, `n`
/// values each) decoded by `block`, one call per block.
fn each(
    blocks: &[u8],
    (n, size): (usize, usize),
    out: &mut Vec<f32>,
    block: impl Fn(&[u8], &mut Vec<f32>),
) {
    out.reserve(blocks.len() / size * n);
    for b in blocks.chunks_exact(size) {
        block(b, out);
    }
}

/// Appends the values of `blocks` (whole blocks of type `t`) to `out`.
/// An error names a stored type, a type gguf-py cannot decode (Q8_1, Q8_K,
/// Q1_0), or bytes that are not whole blocks.
pub fn dequantize(t: GgmlType, blocks: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
    let (n, size) = t.block();
    let shape = (n as usize, size as usize);
    if t.is_stored() {
        return Err(format!(
            "{} is stored as plain elements, not in blocks",
            t.name()
        ));
    }
    if !blocks.len().is_multiple_of(shape.1) {
        return Err(format!(
            "{} blocks are {size} bytes each; {} bytes given",
            t.name(),
            blocks.len()
        ));
    }
    // The type is matched once; each arm decodes every block.
    match t.id() {
        2 => each(blocks, shape, out, basic::q4_0),
        3 => each(blocks, shape, out, basic::q4_1),
        6 => each(blocks, shape, out, basic::q5_0),
        7 => each(blocks, shape, out, basic::q5_1),
        8 => each(blocks, shape, out, basic::q8_0),
        10 => each(blocks, shape, out, kquants::q2_k),
        11 => each(blocks, shape, out, kquants::q3_k),
        12 => each(blocks, shape, out, kquants::q4_k),
        13 => each(blocks, shape, out, kquants::q5_k),
        14 => each(blocks, shape, out, kquants::q6_k),
        16 => each(blocks, shape, out, iq2::iq2_xxs),
        17 => each(blocks, shape, out, iq2::iq2_xs),
        18 => each(blocks, shape, out, iq3::iq3_xxs),
        19 => each(blocks, shape, out, iq1::iq1_s),
        20 => each(blocks, shape, out, nonlinear::iq4_nl),
        21 => each(blocks, shape, out, iq3::iq3_s),
        22 => each(blocks, shape, out, iq2::iq2_s),
        23 => each(blocks, shape, out, nonlinear::iq4_xs),
        29 => each(blocks, shape, out, iq1::iq1_m),
        34 => each(blocks, shape, out, ternary::tq1_0),
        35 => each(blocks, shape, out, ternary::tq2_0),
        39 => each(blocks, shape, out, nonlinear::mxfp4),
        40 => each(blocks, shape, out, nonlinear::nvfp4),
        _ => {
            return Err(format!(
                "{} cannot be decoded (gguf-py has no decoder for it)",
                t.name()
            ));
        }
    }
    Ok(())
}
