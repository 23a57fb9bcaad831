//! bitsandbytes 4-bit (NF4, FP4): a code's value from the stored map
//! times its block's absmax (itself dequantized with double
//! quantization), high nibble first.

use super::Dequantizer;
use super::out::{Out, nibbles};
use super::read::{scalar, segments};
use super::round::cast_f32;
use crate::dtype::Dtype;
use crate::quant::detect::Layout;

impl Dequantizer<'_> {
    pub(super) fn bnb4(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::Bnb4 {
            weight,
            absmax,
            quant_map,
            nested,
            blocksize,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (w, am, qm) = (
            self.bytes(weight),
            self.bytes(absmax),
            self.bytes(quant_map),
        );
        let nest = nested.map(|x| {
            (
                self.bytes(x.absmax),
                self.bytes(x.map),
                x.blocksize,
                x.offset,
            )
        });
        let first = n * self.cols + k0;
        let mut map = [0f32; 16];
        for (c, m) in map.iter_mut().enumerate() {
            *m = scalar(qm, Dtype::F32, c as u64) as f32;
        }
        for (b, at, count) in segments(first, out.len(), blocksize) {
            let a = match nest {
                None => scalar(am, Dtype::F32, b) as f32,
                Some((na, nm, nb, off)) => {
                    // The absmax itself dequantized: map[code] × its own
                    // block's absmax + offset, in f32.
                    let code = u64::from(am.get(b as usize).copied().unwrap_or(0));
                    scalar(nm, Dtype::F32, code) as f32 * scalar(na, Dtype::F32, b / nb) as f32
                        + off
                }
            };
            // f32 product, then the cast to the blob's dtype.
            let mut lut = [0f32; 16];
            for (c, v) in lut.iter_mut().enumerate() {
                *v = cast_f32(vd, map[c] * a);
            }
            // High nibble first.
            nibbles(w, first + at as u64, true, &lut, 0, out, at, count);
        }
    }
}
