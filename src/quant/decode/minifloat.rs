//! FP4 and FP6 codes (NVFP4, MXFP4 and their kin): a float code from its
//! table times a group's scale, with an optional global scale; a group's
//! 4-bit codes counted by their scale byte when counting.

use super::Dequantizer;
use super::out::{Out, count_nibbles, nibbles};
use super::read::{scalar, segments, stream};
use super::round::cast_f32;
use crate::dtype::Dtype;
use crate::dtype::decode::code_table_f32;
use crate::quant::detect::Layout;

impl Dequantizer<'_> {
    pub(super) fn minifloat(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::Minifloat {
            packed,
            code,
            scale,
            global,
            row_bytes,
            ..
        } = *self.layout
        else {
            return;
        };
        let vd = self.lt.value_dtype;
        let (pk, sc) = (self.bytes(packed), self.bytes(scale.t));
        let table = code_table_f32(code).unwrap_or(&[]);
        let bits = code.bits();
        let global =
            global.map(|(t, divides)| (scalar(self.bytes(t), Dtype::F32, 0) as f32, divides));
        let grid_row = (n / scale.grid.rows) * scale.grid.cols;
        let row_bit = n * row_bytes * 8;
        // One-byte scales (E8M0, E4M3): a group's values depend on its
        // scale byte alone, so counting keys its codes' counts by that byte
        // and turns them into values once, at the end (`finish_counts`).
        let keyed = bits == 4 && row_bit.is_multiple_of(8) && scale.dtype.bits() == 8;
        let len = out.len();
        if keyed && let Some(k) = out.count.as_deref_mut() {
            if k.keyed.is_empty() {
                k.keyed = vec![[0; 16]; 256];
            }
            for (g, at, count) in segments(k0, len, scale.grid.width) {
                let key = usize::try_from(grid_row + g)
                    .ok()
                    .and_then(|i| sc.get(i))
                    .copied()
                    .unwrap_or(0);
                if let Some(slot) = k.keyed.get_mut(usize::from(key)) {
                    count_nibbles(pk, row_bit / 4 + k0 + at as u64, false, count, slot);
                }
            }
            return;
        }
        for (g, at, count) in segments(k0, out.len(), scale.grid.width) {
            let raw = scalar(sc, scale.dtype, grid_row + g) as f32;
            let s = match global {
                None => raw,
                Some((gs, true)) => raw / gs,
                Some((gs, false)) => raw * gs,
            };
            if bits == 4 && row_bit.is_multiple_of(8) {
                let mut lut = [0f32; 16];
                for (c, v) in lut.iter_mut().enumerate() {
                    // The libraries multiply in f32, then cast.
                    *v = cast_f32(vd, table.get(c).copied().unwrap_or(0.0) * s);
                }
                nibbles(
                    pk,
                    row_bit / 4 + k0 + at as u64,
                    false,
                    &lut,
                    0,
                    out,
                    at,
                    count,
                );
                continue;
            }
            for i in at..at + count {
                let c = stream(pk, row_bit + (k0 + i as u64) * u64::from(bits), bits);
                let v = table.get(c as usize).copied().unwrap_or(0.0);
                // The libraries multiply in f32, then cast.
                out.put(i, cast_f32(vd, v * s), c as i32);
            }
        }
    }
}
