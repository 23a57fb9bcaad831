//! MLX affine quantization: codes packed LSB-first in rows of u32 words,
//! a scale and a bias per group, rounded twice as MLX computes in the
//! scales' dtype.

use super::Dequantizer;
use super::luts::table;
use super::out::{Out, nibbles};
use super::read::{scalar, segments, stream};
use super::round::{cast_f32, round_to};
use crate::dtype::Dtype;
use crate::quant::detect::Layout;

impl Dequantizer<'_> {
    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    pub(super) fn mlx(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::MlxAffine {
            weight,
            scales,
            biases,
            bits,
            group,
            k: cols,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (w, sc, bi) = (self.bytes(weight), self.bytes(scales), self.bytes(biases));
        let sd = self.dtype_of(scales, Dtype::BF16);
        let groups = cols / group;
        let row_bits = (cols * u64::from(bits)).div_ceil(32) * 32;
        // Two roundings, as MLX computes in the scales' dtype.
        let value = |g: u64, q: u32| {
            let s = scalar(sc, sd, n * groups + g);
            let b = scalar(bi, sd, n * groups + g);
            let sq = f64::from(round_to(vd, s * f64::from(q)));
            round_to(vd, sq + b)
        };
        for (g, at, count) in segments(k0, out.len(), group) {
            let s = scalar(sc, sd, n * groups + g);
            let b = scalar(bi, sd, n * groups + g);
            let lut = table(bits, |q| {
                // s·q is exact in f32 (8 bits times a 16-bit scale); the sum
                // is too unless the exponents are far apart.
                let sq = if q < 256 && matches!(sd, Dtype::F16 | Dtype::BF16) {
                    cast_f32(vd, s as f32 * q as f32)
                } else {
                    round_to(vd, s * f64::from(q))
                };
                let sum = sq + b as f32;
                if f64::from(sum) == f64::from(sq) + b {
                    cast_f32(vd, sum)
                } else {
                    round_to(vd, f64::from(sq) + b)
                }
            });
            if let (4, Some(t)) = (bits, lut.as_ref()) {
                nibbles(
                    w,
                    n * row_bits / 4 + k0 + at as u64,
                    false,
                    t,
                    0,
                    out,
                    at,
                    count,
                );
                continue;
            }
            for i in at..at + count {
                let q = stream(w, n * row_bits + (k0 + i as u64) * u64::from(bits), bits);
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
