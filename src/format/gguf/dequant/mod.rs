//! The block types' values (GGUF.md, "Bit-exact decoding"), block by
//! block, each product and sum one float32 operation in gguf-py's order
//! (Rust contracts no multiply-add): the 32-element types (`basic`), the
//! K-quants (`kquants`), the grid types IQ2 (`iq2`), IQ3 (`iq3`) and
//! IQ1 (`iq1`), the 4-bit non-linear types (`nonlinear`) and the
//! ternary types (`ternary`). The lookup tables (`grids`,
//! `grids_iq1s`) are generated from ggml's source by
//! `scripts/gen_gguf_grids.py`.
//!
//! A decoder hands its values to a [`Sink`] in element order, each with
//! its integer code where the type has one (`codes`); a run of codes of
//! at most 4 bits under one scale goes as the run's table of values and
//! its packed codes, so that a value is computed once per code, not once
//! per element, with the same float32 operations (the same bits).

mod basic;
mod codes;
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
#[cfg(test)]
mod tests_codes;

pub use codes::{CodePlane, code_plane, code_range, code_values, scales_of, scales_per_block};
pub use kquants::q4_k_tables;

use super::types::GgmlType;

/// Where the values of whole blocks go, in element order.
pub trait Sink {
    /// The next value, of integer code `code` (0 for the grid types, whose
    /// elements have none).
    fn one(&mut self, v: f32, code: i32);

    /// The next `bytes.len()` values: byte `b` holds the code
    /// `q = (b >> shift) & mask` (`mask` at most 15), of value `t[q]`,
    /// reported as the code `q + offset`.
    fn table(&mut self, t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, offset: i32);

    /// The next `2 * bytes.len()` values: the low nibbles of `bytes`
    /// through `low`, then their high nibbles through `high` (codes
    /// 0..15): two runs of one stretch of bytes, which a sink may write in
    /// one pass.
    #[inline]
    fn nibbles(&mut self, low: &[f32; 16], high: &[f32; 16], bytes: &[u8]) {
        self.table(low, bytes, 0, 0x0F, 0);
        self.table(high, bytes, 4, 0x0F, 0);
    }
}

/// The values alone, appended.
impl Sink for Vec<f32> {
    #[inline]
    fn one(&mut self, v: f32, _code: i32) {
        self.push(v);
    }

    #[inline]
    fn table(&mut self, t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, _offset: i32) {
        self.extend(
            bytes
                .iter()
                .map(|&b| t[usize::from((b >> shift) & mask & 15)]),
        );
    }
}

/// The 16 values `value(q)` of the codes `0..n` of a run (the rest 0).
#[inline]
fn table_of(n: usize, value: impl Fn(u8) -> f32) -> [f32; 16] {
    let mut t = [0f32; 16];
    for (q, v) in t.iter_mut().enumerate().take(n) {
        *v = value(q as u8);
    }
    t
}

/// The f16 at byte `at` of a block, widened (exactly) to f32.
#[inline]
fn f16(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Eight values `(db * grid) * sign` of an 8-wide grid row (byte `k` of
/// `row`, unsigned, is element `k`), sign -1 where bit `k` of `signs` is
/// set. The product by -1 is written as a negation that keeps a NaN as it
/// is, as the multiplication in gguf-py does (a compiler may turn `x * -1.0`
/// into a sign flip, which would flip a NaN's sign bit too).
fn push_signed(out: &mut impl Sink, db: f32, row: u64, signs: u8) {
    for k in 0..8 {
        let v = db * f32::from((row >> (8 * k)) as u8);
        let v = if signs & grids::KMASK_IQ2XS[k] != 0 && !v.is_nan() {
            -v
        } else {
            v
        };
        out.one(v, 0);
    }
}

/// Decodes `blocks` (whole blocks of `size` bytes) by `block`, one call
/// per block.
#[inline]
fn each<S: Sink>(blocks: &[u8], size: usize, out: &mut S, block: impl Fn(&[u8], &mut S)) {
    for b in blocks.chunks_exact(size) {
        block(b, out);
    }
}

/// Hands the values of `blocks` (whole blocks of type `t`) to `out`, in
/// element order. An error names a stored type, a type gguf-py cannot
/// decode (Q8_1, Q8_K, Q1_0), or bytes that are not whole blocks; nothing
/// is handed on then.
pub fn decode<S: Sink>(t: GgmlType, blocks: &[u8], out: &mut S) -> Result<(), String> {
    let (_, size) = t.block();
    let size = size as usize;
    if t.is_stored() {
        return Err(format!(
            "{} is stored as plain elements, not in blocks",
            t.name()
        ));
    }
    if !blocks.len().is_multiple_of(size) {
        return Err(format!(
            "{} blocks are {size} bytes each; {} bytes given",
            t.name(),
            blocks.len()
        ));
    }
    // The type is matched once; each arm decodes every block.
    match t.id() {
        2 => each(blocks, size, out, basic::q4_0),
        3 => each(blocks, size, out, basic::q4_1),
        6 => each(blocks, size, out, basic::q5_0),
        7 => each(blocks, size, out, basic::q5_1),
        8 => each(blocks, size, out, basic::q8_0),
        10 => each(blocks, size, out, kquants::q2_k),
        11 => each(blocks, size, out, kquants::q3_k),
        12 => each(blocks, size, out, kquants::q4_k),
        13 => each(blocks, size, out, kquants::q5_k),
        14 => each(blocks, size, out, kquants::q6_k),
        16 => each(blocks, size, out, iq2::iq2_xxs),
        17 => each(blocks, size, out, iq2::iq2_xs),
        18 => each(blocks, size, out, iq3::iq3_xxs),
        19 => each(blocks, size, out, iq1::iq1_s),
        20 => each(blocks, size, out, nonlinear::iq4_nl),
        21 => each(blocks, size, out, iq3::iq3_s),
        22 => each(blocks, size, out, iq2::iq2_s),
        23 => each(blocks, size, out, nonlinear::iq4_xs),
        29 => each(blocks, size, out, iq1::iq1_m),
        34 => each(blocks, size, out, ternary::tq1_0),
        35 => each(blocks, size, out, ternary::tq2_0),
        39 => each(blocks, size, out, nonlinear::mxfp4),
        40 => each(blocks, size, out, nonlinear::nvfp4),
        _ => {
            return Err(format!(
                "{} cannot be decoded (gguf-py has no decoder for it)",
                t.name()
            ));
        }
    }
    Ok(())
}

/// Appends the values of `blocks` (whole blocks of type `t`) to `out`
/// (see [`decode`]).
pub fn dequantize(t: GgmlType, blocks: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
    let (n, size) = t.block();
    out.reserve(blocks.len() / (size as usize).max(1) * n as usize);
    decode(t, blocks, out)
}
