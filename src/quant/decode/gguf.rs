//! GGUF's block types: the blocks of a run's logical row decoded by
//! [`crate::format::gguf::dequant`] (bit-exact to gguf-py), whole blocks
//! at a time into a buffer kept per thread, and the run's part handed on.

use std::cell::RefCell;

use super::Dequantizer;
use super::out::Out;
use crate::format::gguf::dequant::dequantize;
use crate::quant::detect::Layout;

thread_local! {
    /// A run's decoded blocks (at most a row's, or a run's, values).
    static DECODED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl Dequantizer<'_> {
    /// Elements `k0..k0 + out.len()` of row `n` of a GGUF block type.
    pub(super) fn gguf(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let Layout::Gguf { blocks, ty, k } = *self.layout else {
            return;
        };
        let (per, size) = ty.block();
        let len = out.len() as u64;
        let (first, last) = (k0 / per, (k0 + len).div_ceil(per));
        let row = n.saturating_mul(k / per * size);
        let range = usize::try_from(row + first * size)
            .ok()
            .zip(usize::try_from(row + last * size).ok());
        let bytes = range.and_then(|(b, e)| self.bytes(blocks).get(b..e));
        let skip = (k0 - first * per) as usize;
        DECODED.with(|cell| {
            let mut v = cell.borrow_mut();
            v.clear();
            // A file that changed underneath reads short: zeros, which the
            // caller discards (`Checkpoint::check_unchanged`).
            if bytes.is_none_or(|b| dequantize(ty, b, &mut v).is_err()) {
                v.clear();
            }
            v.resize(skip + len as usize, 0.0);
            let got = &v[skip..];
            if out.count.is_some() {
                for (i, &x) in got.iter().enumerate() {
                    out.put(i, x, 0);
                }
                return;
            }
            let (vals, codes) = out.run(0, got.len());
            vals.copy_from_slice(&got[..vals.len()]);
            if let Some(c) = codes {
                c.fill(0);
            }
        });
    }
}
