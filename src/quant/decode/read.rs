//! Reading the parts' bytes, never out of bounds (a byte past a part reads
//! as 0): u32 words, LSB-first bit streams (along a row, or down a column
//! of words), one element of a scale, and the runs of a row that stay in
//! one group.

use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, decode_one_f64};

/// Little-endian u32 word `i` of `bytes` (0 past the end).
#[inline]
pub(super) fn word(bytes: &[u8], i: u64) -> u32 {
    let Ok(i) = usize::try_from(i) else { return 0 };
    match i.checked_mul(4).and_then(|s| bytes.get(s..s + 4)) {
        Some(w) => u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
        None => 0,
    }
}

/// `width` (≤ 8) bits at bit `bit` of an LSB-first bitstream of bytes.
#[inline]
pub(super) fn stream(bytes: &[u8], bit: u64, width: u32) -> u32 {
    let Ok(at) = usize::try_from(bit / 8) else {
        return 0;
    };
    let lo = u32::from(bytes.get(at).copied().unwrap_or(0));
    let hi = u32::from(bytes.get(at + 1).copied().unwrap_or(0));
    ((lo | hi << 8) >> (bit % 8)) & ((1 << width) - 1)
}

/// `width` bits at bit `bit` of the stream down column `col` of a matrix
/// of u32 words with `cols` columns (GPTQ's qweight, compressed-tensors'
/// zero points): bit `b` of the stream is bit `b % 32` of word `b / 32`.
#[inline]
pub(super) fn column_stream(bytes: &[u8], cols: u64, col: u64, bit: u64, width: u32) -> u32 {
    let (w, off) = (bit / 32, (bit % 32) as u32);
    let lo = u64::from(word(bytes, w * cols + col));
    let both = if off + width > 32 {
        lo | u64::from(word(bytes, (w + 1) * cols + col)) << 32
    } else {
        lo
    };
    ((both >> off) & ((1 << width) - 1)) as u32
}

/// The value of element `i` of a scale (or zero-point) tensor, read as
/// `dtype` (0 past the end): the dtype layer's decoder, for one element.
#[inline]
pub(super) fn scalar(bytes: &[u8], dtype: Dtype, i: u64) -> f64 {
    decode_one_f64(dtype, bytes, i, BitOrder::LsbFirst).unwrap_or(0.0)
}

/// `width` bits at bit `bit` of row `row` of a matrix of u32 words with
/// `words` per row, read as one LSB-first bitstream along the row.
#[inline]
pub(super) fn column_stream_row(bytes: &[u8], words: u64, row: u64, bit: u64, width: u32) -> u32 {
    let base = row * words * 4;
    let Ok(base) = usize::try_from(base) else {
        return 0;
    };
    stream(bytes.get(base..).unwrap_or(&[]), bit, width)
}

/// The runs of `k0..k0 + len` that stay in one group of `width` columns:
/// (group, offset in the run, length).
#[inline]
pub(super) fn segments(
    k0: u64,
    len: usize,
    width: u64,
) -> impl Iterator<Item = (u64, usize, usize)> {
    let width = width.max(1);
    let end = k0.saturating_add(len as u64);
    let mut k = k0;
    std::iter::from_fn(move || {
        if k >= end {
            return None;
        }
        let g = k / width;
        let stop = g.saturating_add(1).saturating_mul(width).min(end);
        let item = (g, (k - k0) as usize, (stop - k) as usize);
        k = stop;
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_cross_words() {
        // 3-bit codes 0..=9 and the straddling 10th code.
        let mut bits: u128 = 0;
        for i in 0..32u128 {
            bits |= (i % 8) << (3 * i);
        }
        let bytes = bits.to_le_bytes();
        for i in 0..32u64 {
            assert_eq!(stream(&bytes, 3 * i, 3), (i % 8) as u32, "code {i}");
        }
        // The same stream as three words down one column of a 1-column matrix.
        for i in 0..32u64 {
            assert_eq!(column_stream(&bytes, 1, 0, 3 * i, 3), (i % 8) as u32);
        }
    }
}
