//! GGUF's block types: the blocks under a run of elements decoded by
//! [`crate::format::gguf::dequant::decode`] (bit-exact to gguf-py)
//! straight into the run's [`Out`], a sub-block of 4-bit codes through
//! the table of its 16 values; the codes alone, counted without their
//! values ([`Dequantizer::count_codes`]); and the scales the blocks hold
//! ([`Dequantizer::block_scales`]).
//!
//! A tensor's blocks are stored row after row and a row is whole blocks,
//! so element `i` is in block `i / block elements` of the part.

use super::Dequantizer;
use super::out::Out;
use crate::format::TensorRef;
use crate::format::gguf::dequant::{
    self, CodePlane, Sink, code_plane, code_range, scales_of, scales_per_block,
};
use crate::format::gguf::types::GgmlType;
use crate::quant::detect::Layout;

/// The values `skip..end` of those a decoder hands on, counted from the
/// first block's first element.
struct Clip {
    pos: usize,
    skip: usize,
    end: usize,
}

impl Clip {
    /// The part of the next `n` values inside the window, as (its start
    /// among those `n`, its index in the window, its length); moves past
    /// the `n`.
    #[inline]
    fn next(&mut self, n: usize) -> Option<(usize, usize, usize)> {
        let (pos, stop) = (self.pos, self.pos + n);
        self.pos = stop;
        let (a, b) = (pos.max(self.skip), stop.min(self.end));
        (a < b).then(|| (a - pos, a - self.skip, b - a))
    }
}

/// The code of byte `b` of a run.
#[inline]
fn code_of(b: u8, shift: u32, mask: u8) -> usize {
    usize::from((b >> shift) & mask & 15)
}

/// A run's values (and codes) into an [`Out`], or counted there.
struct IntoOut<'o, 'b> {
    out: &'o mut Out<'b>,
    clip: Clip,
}

impl Sink for IntoOut<'_, '_> {
    #[inline]
    fn one(&mut self, v: f32, code: i32) {
        if let Some((_, at, _)) = self.clip.next(1) {
            self.out.put(at, v, code);
        }
    }

    #[inline]
    fn table(&mut self, t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, offset: i32) {
        let Some((from, at, count)) = self.clip.next(bytes.len()) else {
            return;
        };
        let src = &bytes[from..from + count];
        if let Some(k) = self.out.count.as_deref_mut() {
            for &b in src {
                k.group[code_of(b, shift, mask)] += 1;
            }
            k.flush(t, offset);
            return;
        }
        let (vals, codes) = self.out.run(at, count);
        for (v, &b) in vals.iter_mut().zip(src) {
            *v = t[code_of(b, shift, mask)];
        }
        if let Some(codes) = codes {
            for (c, &b) in codes.iter_mut().zip(src) {
                *c = code_of(b, shift, mask) as i32 + offset;
            }
        }
    }

    /// Both runs in one pass when the window holds them whole (the hot
    /// loop of the 4-bit types: a byte read once, two values written).
    #[inline]
    fn nibbles(&mut self, low: &[f32; 16], high: &[f32; 16], bytes: &[u8]) {
        let n = bytes.len();
        let whole = self.clip.pos >= self.clip.skip && self.clip.pos + 2 * n <= self.clip.end;
        if !whole || self.out.count.is_some() {
            self.table(low, bytes, 0, 0x0F, 0);
            self.table(high, bytes, 4, 0x0F, 0);
            return;
        }
        let at = self.clip.pos - self.clip.skip;
        self.clip.pos += 2 * n;
        let (vals, codes) = self.out.run(at, 2 * n);
        if vals.len() == 2 * n {
            let (a, b) = vals.split_at_mut(n);
            for ((x, y), &q) in a.iter_mut().zip(b.iter_mut()).zip(bytes) {
                *x = low[usize::from(q & 15)];
                *y = high[usize::from(q >> 4)];
            }
        }
        if let Some(codes) = codes.filter(|c| c.len() == 2 * n) {
            let (a, b) = codes.split_at_mut(n);
            for ((x, y), &q) in a.iter_mut().zip(b.iter_mut()).zip(bytes) {
                *x = i32::from(q & 15);
                *y = i32::from(q >> 4);
            }
        }
    }
}

/// The codes of a run counted one by one, by code less `low` (the types
/// whose codes are not one [`CodePlane`], and a block cut by the run).
struct Codes<'a> {
    into: &'a mut [u64],
    low: i32,
    clip: Clip,
}

impl Codes<'_> {
    #[inline]
    fn add(&mut self, code: i32, n: u64) {
        if let Some(slot) = usize::try_from(i64::from(code) - i64::from(self.low))
            .ok()
            .and_then(|i| self.into.get_mut(i))
        {
            *slot += n;
        }
    }
}

impl Sink for Codes<'_> {
    #[inline]
    fn one(&mut self, _v: f32, code: i32) {
        if self.clip.next(1).is_some() {
            self.add(code, 1);
        }
    }

    #[inline]
    fn table(&mut self, _t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, offset: i32) {
        if let Some((from, _, count)) = self.clip.next(bytes.len()) {
            for &b in &bytes[from..from + count] {
                self.add(code_of(b, shift, mask) as i32 + offset, 1);
            }
        }
    }
}

/// Counts the codes of whole blocks whose codes are `plane` into `into`
/// (by code less `low`): the bytes that hold them counted by value in four
/// tables, each byte's codes added once per value at the end.
fn count_plane(blocks: &[u8], size: usize, plane: CodePlane, low: i32, into: &mut [u64]) {
    let mut tables = [[0u32; 256]; 4];
    // Under 2^32 bytes a table between two folds.
    for batch in blocks.chunks(size << 20) {
        for block in batch.chunks_exact(size) {
            let (quads, rest) = block[plane.start..plane.end].as_chunks::<4>();
            for q in quads {
                for (t, &b) in tables.iter_mut().zip(q) {
                    t[usize::from(b)] += 1;
                }
            }
            for &b in rest {
                tables[0][usize::from(b)] += 1;
            }
        }
        for b in 0..=255u8 {
            let n: u64 = tables
                .iter_mut()
                .map(|t| u64::from(std::mem::take(&mut t[usize::from(b)])))
                .sum();
            if n == 0 {
                continue;
            }
            for code in plane.codes(b) {
                if let Some(slot) = usize::try_from(i64::from(code) - i64::from(low))
                    .ok()
                    .and_then(|i| into.get_mut(i))
                {
                    *slot += n;
                }
            }
        }
    }
}

impl Dequantizer<'_> {
    /// The blocks part, the type, and the elements of one block.
    fn gguf_layout(&self) -> Option<(TensorRef, GgmlType, u64)> {
        match *self.layout {
            Layout::Gguf { blocks, ty, .. } => Some((blocks, ty, ty.block().0.max(1))),
            _ => None,
        }
    }

    /// The stored bytes of the blocks under elements `first..first + len`,
    /// and where `first` is in the first of them; `None` past the part's
    /// end (a file that changed underneath).
    fn gguf_blocks(&self, first: u64, len: u64) -> Option<(&[u8], GgmlType, usize)> {
        let (blocks, ty, per) = self.gguf_layout()?;
        let size = ty.block().1;
        let (b0, b1) = (first / per, first.checked_add(len)?.div_ceil(per));
        let start = usize::try_from(b0.checked_mul(size)?).ok()?;
        let end = usize::try_from(b1.checked_mul(size)?).ok()?;
        let bytes = self.bytes(blocks).get(start..end)?;
        Some((bytes, ty, usize::try_from(first - b0 * per).ok()?))
    }

    /// Elements `k0..k0 + out.len()` of row `n` of a GGUF block type.
    pub(super) fn gguf(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        let len = out.len();
        let first = n.saturating_mul(self.cols).saturating_add(k0);
        let decoded = self
            .gguf_blocks(first, len as u64)
            .is_some_and(|(bytes, ty, skip)| {
                let mut sink = IntoOut {
                    out: &mut *out,
                    clip: Clip {
                        pos: 0,
                        skip,
                        end: skip + len,
                    },
                };
                dequant::decode(ty, bytes, &mut sink).is_ok()
            });
        if !decoded {
            // A file that changed underneath reads short: zeros, which the
            // caller discards (`Checkpoint::check_unchanged`).
            for i in 0..len {
                out.put(i, 0.0, 0);
            }
        }
    }

    /// The codes an element of a GGUF block type can have.
    pub(super) fn gguf_code_range(&self) -> Option<(i32, i32)> {
        code_range(self.gguf_layout()?.1)
    }

    /// Counts the integer codes of elements `first..first + len` into
    /// `into` (by code less [`Dequantizer::code_range`]'s low end), without
    /// their values, where the layout can (GGUF's block types with codes);
    /// false when it cannot (nothing counted).
    pub fn count_codes(&self, first: u64, len: u64, into: &mut [u64]) -> bool {
        let Some((low, _)) = self.gguf_code_range() else {
            return false;
        };
        let len = len.min(self.len.saturating_sub(first));
        let Some((bytes, ty, skip)) = self.gguf_blocks(first, len) else {
            return true;
        };
        let (per, size) = (ty.block().0 as usize, ty.block().1 as usize);
        let n = len as usize;
        let one_by_one = |into: &mut [u64], bytes: &[u8], skip: usize, n: usize| {
            let clip = Clip {
                pos: 0,
                skip,
                end: skip + n,
            };
            let _ = dequant::decode(ty, bytes, &mut Codes { into, low, clip });
        };
        let Some(plane) = code_plane(ty) else {
            one_by_one(into, bytes, skip, n);
            return true;
        };
        // A block the run cuts, at either end, is counted one by one.
        let head = if skip > 0 { (per - skip).min(n) } else { 0 };
        if head > 0 {
            one_by_one(into, &bytes[..size], skip, head);
        }
        let whole = (n - head) / per;
        let start = usize::from(head > 0) * size;
        count_plane(&bytes[start..start + whole * size], size, plane, low, into);
        let tail = n - head - whole * per;
        if tail > 0 {
            let at = start + whole * size;
            one_by_one(into, &bytes[at..at + size], 0, tail);
        }
        true
    }

    /// For GGUF's block types, whose scales are stored inside the blocks:
    /// how many (one per block; NVFP4 four, one per sub-block of 16).
    pub fn block_scale_count(&self) -> Option<u64> {
        let (_, ty, per) = self.gguf_layout()?;
        let each = scales_per_block(ty);
        (each > 0).then(|| self.len / per * each)
    }

    /// Scales `first..` of [`Dequantizer::block_scale_count`] into `out`
    /// (see [`crate::format::gguf::dequant::scales_of`]); returns how many
    /// (fewer at the end; 0 past the part's end).
    pub fn block_scales(&self, first: u64, out: &mut [f32]) -> usize {
        let (Some((blocks, ty, _)), Some(count)) = (self.gguf_layout(), self.block_scale_count())
        else {
            return 0;
        };
        let each = scales_per_block(ty);
        let size = ty.block().1 as usize;
        let bytes = self.bytes(blocks);
        let n = usize::try_from(count.saturating_sub(first))
            .unwrap_or(usize::MAX)
            .min(out.len());
        let mut b = first / each;
        let mut within = (first % each) as usize;
        let mut done = 0;
        while done < n {
            let block = usize::try_from(b)
                .ok()
                .and_then(|b| bytes.get(b.checked_mul(size)?..)?.get(..size));
            let Some(scales) = block.and_then(|x| scales_of(ty, x)) else {
                break;
            };
            let take = (each as usize - within).min(n - done);
            out[done..done + take].copy_from_slice(&scales[within..within + take]);
            done += take;
            within = 0;
            b += 1;
        }
        done
    }

    /// The scale of element `i`'s block (NVFP4: of its sub-block of 16).
    pub(super) fn gguf_scale_at(&self, i: u64) -> Option<f64> {
        let (_, ty, per) = self.gguf_layout()?;
        let each = scales_per_block(ty);
        let at = (i / per) * each + (i % per) / (per / each.max(1)).max(1);
        let mut one = [0f32];
        (i < self.len && self.block_scales(at, &mut one) == 1).then(|| f64::from(one[0]))
    }
}

mod pairs;
#[cfg(test)]
pub(crate) mod tests;

pub use pairs::{BlockPairs, Keep, NibbleCounts, PAIR_BATCH, PairKernels, q4_k_pairs};
