//! One byte times a scale: FP8 and int8 codes (with an optional zero
//! point), MXFP8, and LLM.int8's rows scaled by 1/127.

use super::Dequantizer;
use super::out::Out;
use super::read::{scalar, segments};
use super::round::{cast_f32, round_to};
use crate::dtype::Dtype;
use crate::dtype::decode::code_table_f32;
use crate::quant::detect::Layout;

/// bitsandbytes' `7.874015718698502e-3` (1/127) as the f32 torch uses.
const BNB_INV_127: f32 = 7.874_015_718_698_502e-3_f64 as f32;

impl Dequantizer<'_> {
    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    pub(super) fn scaled(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::Scaled {
            weight,
            code,
            scale,
            zero,
            per_127,
            k: cols,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (w, sc) = (self.bytes(weight), self.bytes(scale.t));
        let zb = zero.map(|z| (self.bytes(z.t), z.dtype));
        let table = code_table_f32(code);
        let base = usize::try_from(n * cols).unwrap_or(usize::MAX);
        let grid_row = (n / scale.grid.rows) * scale.grid.cols;
        for (g, at, count) in segments(k0, out.len(), scale.grid.width) {
            let s = scalar(sc, scale.dtype, grid_row + g);
            let z = zb.map_or(0.0, |(b, d)| scalar(b, d, grid_row + g));
            // The common case, written out: float codes times an f32-exact
            // scale, values written (not counted), over the run's bytes.
            let start = base
                .checked_add(usize::try_from(k0).unwrap_or(usize::MAX))
                .and_then(|j| j.checked_add(at));
            if let (Some(t), false, false, None, Some(start)) =
                (table, per_127, scale.dtype == Dtype::F64, zb, start)
                && out.count.is_none()
                && let Some(src) = w.get(start..start + count)
            {
                let (s32, t) = (s as f32, t);
                let (vals, codes) = out.run(at, count);
                for (v, &b) in vals.iter_mut().zip(src) {
                    *v = cast_f32(vd, t[usize::from(b)] * s32);
                }
                if let Some(codes) = codes {
                    for (c, &b) in codes.iter_mut().zip(src) {
                        *c = i32::from(b);
                    }
                }
                continue;
            }
            for i in at..at + count {
                let byte = base
                    .checked_add(usize::try_from(k0).unwrap_or(usize::MAX))
                    .and_then(|j| j.checked_add(i))
                    .and_then(|j| w.get(j))
                    .copied()
                    .unwrap_or(0);
                let (c, code_out) = match table {
                    Some(t) => (
                        f64::from(t.get(usize::from(byte)).copied().unwrap_or(0.0)),
                        i32::from(byte),
                    ),
                    None => (f64::from(byte as i8), i32::from(byte as i8)),
                };
                let v = if per_127 {
                    // bitsandbytes int8_vectorwise_dequant, in f32:
                    // A * SCB * 7.874015718698502e-3.
                    (c as f32 * s as f32) * BNB_INV_127
                } else if scale.dtype == Dtype::F64 {
                    round_to(vd, (c - z) * s)
                } else {
                    // An 8-bit code (less a zero point) times a scale of at
                    // most 24 significant bits rounds once in f32, as in f64.
                    cast_f32(vd, (c - z) as f32 * s as f32)
                };
                out.put(i, v, code_out);
            }
        }
    }
}
