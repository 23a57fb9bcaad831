//! compressed-tensors pack-quantized: signed integer codes packed in u32
//! words (or a dense bit stream), a scale per group and an optional zero
//! point, groups by column or by `g_idx`.

use super::Dequantizer;
use super::luts::{Luts, table};
use super::out::{Out, nibbles};
use super::read::{column_stream, scalar, segments, stream, word};
use super::round::int_value;
use crate::dtype::Dtype;
use crate::quant::detect::Layout;

impl Dequantizer<'_> {
    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    pub(super) fn ct_pack(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::CtPack {
            packed,
            scale,
            zero,
            g_idx,
            bits,
            dense,
            row_bytes,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (pk, sc) = (self.bytes(packed), self.bytes(scale.t));
        let half = 1i64 << (bits - 1);
        let per = u64::from(32 / bits);
        let mask = (1u32 << bits) - 1;
        let zb = zero.map(|(t, p)| (self.bytes(t), p, self.dtype_of(t, Dtype::I32)));
        let cols = scale.grid.cols;
        // Zero points are offset-binary like the codes, packed down N.
        let zero_of = |g: u64| -> i64 {
            match zb {
                None => 0,
                Some((zbytes, true, _)) => {
                    let u = if dense {
                        column_stream(zbytes, cols, g, n * u64::from(bits), bits)
                    } else {
                        (word(zbytes, (n / per) * cols + g) >> ((n % per) as u32 * bits)) & mask
                    };
                    i64::from(u) - half
                }
                Some((zbytes, false, zd)) => scalar(zbytes, zd, n * cols + g) as i64,
            }
        };
        let scale_row = (n / scale.grid.rows.max(1)) * cols;
        let value = |g: u64, u: u32| {
            let s = scalar(sc, scale.dtype, scale_row + g);
            int_value(vd, i64::from(u) - half - zero_of(g), s, scale.dtype)
        };
        let code = |k: u64| {
            if dense {
                stream(pk, n * row_bytes * 8 + k * u64::from(bits), bits)
            } else {
                (word(pk, n * (row_bytes / 4) + k / per) >> ((k % per) as u32 * bits)) & mask
            }
        };
        match g_idx {
            Some(t) => {
                let gi = self.bytes(t);
                let mut luts = Luts::new(bits, cols, true);
                for i in 0..out.len() {
                    let k = k0 + i as u64;
                    let g = word(gi, k) as i32 as u64;
                    let u = code(k);
                    let v = match luts.as_mut() {
                        Some(l) => l.value(g, u, |x| value(g, x)),
                        None => value(g, u),
                    };
                    out.put(i, v, (i64::from(u) - half) as i32);
                }
            }
            None => {
                for (g, at, count) in segments(k0, out.len(), scale.grid.width) {
                    let (z, s) = (zero_of(g), scalar(sc, scale.dtype, scale_row + g));
                    let lut = table(bits, |u| {
                        int_value(vd, i64::from(u) - half - z, s, scale.dtype)
                    });
                    if let (4, true, Some(t)) = (bits, dense, lut.as_ref()) {
                        // Values by code; the codes reported are signed.
                        nibbles(
                            pk,
                            n * row_bytes * 2 + k0 + at as u64,
                            false,
                            t,
                            -(half as i32),
                            out,
                            at,
                            count,
                        );
                        continue;
                    }
                    for i in at..at + count {
                        let u = code(k0 + i as u64);
                        match lut.as_ref() {
                            Some(t) => out.coded(i, t, u, -(half as i32)),
                            None => out.put(i, value(g, u), (i64::from(u) - half) as i32),
                        }
                    }
                    if let Some(t) = lut.as_ref() {
                        out.end_group(t, -(half as i32));
                    }
                }
            }
        }
    }
}
