//! GPTQ and AWQ: integer codes packed in u32 words (down the input
//! dimension for GPTQ, across the output one in AWQ's order), a scale and
//! a zero point per group and output column.

use super::Dequantizer;
use super::luts::{Luts, table};
use super::out::Out;
use super::read::{column_stream, column_stream_row, scalar, segments, word};
use super::round::int_value;
use crate::dtype::Dtype;
use crate::quant::detect::Layout;

/// AWQ's nibble of output column `8c + j` (`AWQ_REVERSE_ORDER`).
pub(super) const AWQ_NIBBLE: [u32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

impl Dequantizer<'_> {
    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    pub(super) fn gptq(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::Gptq {
            qweight,
            scales,
            g_idx,
            bits,
            n: cols,
            group,
            act_order,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (qw, sc) = (self.bytes(qweight), self.bytes(scales));
        let sd = self.dtype_of(scales, Dtype::F16);
        let zero = |g: u64| self.gptq_zero(g, n);
        let value = |g: u64, q: u32| {
            let s = scalar(sc, sd, g * cols + n);
            int_value(vd, i64::from(q) - zero(g), s, sd)
        };
        let group_table = |g: u64| self.gptq_table(g, n);
        let code = |k: u64| column_stream(qw, cols, n, k * u64::from(bits), bits);
        match g_idx.filter(|_| act_order) {
            Some(t) => {
                let gi = self.bytes(t);
                let mut luts = Luts::new(bits, self.groups_of(scales), true);
                for i in 0..out.len() {
                    let k = k0 + i as u64;
                    let g = word(gi, k) as i32 as u64;
                    let q = code(k);
                    let v = match luts.as_mut() {
                        Some(l) => l.value(g, q, |c| value(g, c)),
                        None => value(g, q),
                    };
                    out.put(i, v, q as i32);
                }
            }
            None => {
                for (g, at, count) in segments(k0, out.len(), group) {
                    let lut = group_table(g);
                    if let (4, Some(t)) = (bits, lut.as_ref()) {
                        // Eight codes per word down the column: one read each.
                        let (mut cached, mut w) = (u64::MAX, 0u32);
                        for i in at..at + count {
                            let k = k0 + i as u64;
                            if k / 8 != cached {
                                cached = k / 8;
                                w = word(qw, cached * cols + n);
                            }
                            let q = (w >> (4 * (k % 8))) & 15;
                            out.coded(i, t, q, 0);
                        }
                        out.end_group(t, 0);
                        continue;
                    }
                    for i in at..at + count {
                        let q = code(k0 + i as u64);
                        match lut.as_ref() {
                            Some(t) => out.coded(i, t, q, 0),
                            None => out.put(i, value(g, q), q as i32),
                        }
                    }
                    if let Some(t) = lut.as_ref() {
                        out.end_group(t, 0);
                    }
                }
            }
        }
    }

    /// GPTQ's zero point of group `g`, column `n`.
    pub(super) fn gptq_zero(&self, g: u64, n: u64) -> i64 {
        let Layout::Gptq {
            qzeros,
            bits,
            n: cols,
            v1,
            ..
        } = *self.layout
        else {
            return 0;
        };
        let qz = self.bytes(qzeros);
        let zwords = (cols * u64::from(bits)).div_ceil(32);
        let mask = (1u32 << bits) - 1;
        let bit = n * u64::from(bits);
        let z = if v1 && bits != 3 {
            // GPTQ v1 stores z − 1 with a word-level subtraction: undo it on
            // the whole word, so borrows across fields come back.
            let add = match bits {
                2 => 0x5555_5555u32,
                4 => 0x1111_1111,
                _ => 0x0101_0101,
            };
            (word(qz, g * zwords + bit / 32).wrapping_add(add) >> (bit % 32)) & mask
        } else {
            let z = column_stream_row(qz, zwords, g, bit, bits);
            if v1 { (z + 1) & mask } else { z }
        };
        i64::from(z)
    }

    /// The values of GPTQ group `g`'s codes in column `n` (≤ 4 bits).
    pub(super) fn gptq_table(&self, g: u64, n: u64) -> Option<[f32; 16]> {
        let Layout::Gptq {
            scales,
            bits,
            n: cols,
            ..
        } = *self.layout
        else {
            return None;
        };
        let sd = self.dtype_of(scales, Dtype::F16);
        let vd = self.lt.value_dtype;
        let (z, s) = (
            self.gptq_zero(g, n),
            scalar(self.bytes(scales), sd, g * cols + n),
        );
        table(bits, |q| int_value(vd, i64::from(q) - z, s, sd))
    }

    /// The values of AWQ group `g`'s codes in column `n`.
    pub(super) fn awq_table(&self, g: u64, n: u64) -> Option<[f32; 16]> {
        let Layout::Awq {
            qzeros,
            scales,
            n: cols,
            ..
        } = *self.layout
        else {
            return None;
        };
        let sd = self.dtype_of(scales, Dtype::F16);
        let vd = self.lt.value_dtype;
        let shift = 4 * AWQ_NIBBLE[(n % 8) as usize];
        let z = i64::from((word(self.bytes(qzeros), g * (cols / 8) + n / 8) >> shift) & 15);
        let s = scalar(self.bytes(scales), sd, g * cols + n);
        table(4, |q| int_value(vd, i64::from(q) - z, s, sd))
    }

    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    pub(super) fn awq(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::Awq {
            qweight,
            qzeros,
            scales,
            n: cols,
            group,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (qw, qz, sc) = (self.bytes(qweight), self.bytes(qzeros), self.bytes(scales));
        let sd = self.dtype_of(scales, Dtype::F16);
        let words = cols / 8;
        let shift = 4 * AWQ_NIBBLE[(n % 8) as usize];
        let c = n / 8;
        let value = |g: u64, q: u32| {
            let z = i64::from((word(qz, g * words + c) >> shift) & 15);
            let s = scalar(sc, sd, g * cols + n);
            int_value(vd, i64::from(q) - z, s, sd)
        };
        for (g, at, count) in segments(k0, out.len(), group) {
            let z = i64::from((word(qz, g * words + c) >> shift) & 15);
            let s = scalar(sc, sd, g * cols + n);
            let lut = table(4, |q| int_value(vd, i64::from(q) - z, s, sd));
            for i in at..at + count {
                let q = (word(qw, (k0 + i as u64) * words + c) >> shift) & 15;
                match lut.as_ref() {
                    Some(t) => out.coded(i, t, q, 0),
                    None => out.put(i, value(g, q), q as i32),
                }
            }
            if let Some(t) = lut.as_ref() {
                out.end_group(t, 0);
            }
        }
    }
}
