//! Dequantization: the values of a decoded logical tensor, any run of them,
//! read where the parts are mapped.
//!
//! Every layout is separable by output row, so a run of elements is cut
//! into row segments, and each segment reads its codes, scales and zero
//! points straight from the parts' bytes (a scale is decoded again only
//! when the element moves into another group). Nothing is allocated per
//! run; memory does not grow with the tensor.
//!
//! Shapes were checked when the tensor was detected; the readers still
//! never index out of bounds (a byte past a part reads as 0), so a file
//! that changed underneath gives wrong numbers that the caller discards
//! (`Checkpoint::check_unchanged`), never a panic.
//!
//! Each layout's formula is a method in the file of its family (`gptq.rs`
//! for GPTQ and AWQ, `ct.rs`, `scaled.rs`, `minifloat.rs`, `bnb.rs`,
//! `mlx.rs`); `read.rs` reads the parts' bytes, `round.rs` rounds as the
//! libraries do, `luts.rs` and `out.rs` carry a group's values to the
//! output, and `counts.rs` holds what counting gathers instead.

mod bnb;
mod counts;
mod ct;
#[cfg(test)]
pub(crate) use gguf::tests::file as gguf_test_file;
mod gguf;
mod gptq;
mod luts;
mod minifloat;
mod mlx;
mod out;
mod read;
mod round;
mod scaled;

use super::LogicalTensor;
use super::detect::Layout;
use crate::dtype::Dtype;
use crate::dtype::decode::code_table_f32;
use crate::format::{Checkpoint, TensorRef};
use gptq::AWQ_NIBBLE;
use out::Out;
use read::{column_stream, scalar, word};

pub use counts::Counts;
pub use gguf::{BlockPairs, Keep, NibbleCounts, PAIR_BATCH, PairKernels, q4_k_pairs};
#[cfg(test)]
pub(crate) use round::code16;

/// Reads the decoded values of one logical tensor.
pub struct Dequantizer<'a> {
    lt: &'a LogicalTensor,
    layout: &'a Layout,
    ck: &'a Checkpoint,
    /// Elements per row of the flattened `[rows, cols]` view.
    cols: u64,
    len: u64,
}

impl<'a> Dequantizer<'a> {
    /// A reader of `lt`'s values; `None` unless it is decoded.
    pub fn new(ck: &'a Checkpoint, lt: &'a LogicalTensor) -> Option<Self> {
        let layout = lt.layout.as_ref()?;
        let cols = *lt.shape.last()?;
        Some(Self {
            lt,
            layout,
            ck,
            cols: cols.max(1),
            len: lt.numel(),
        })
    }

    /// Elements of the logical tensor.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a tensor of no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The logical tensor read.
    pub fn tensor(&self) -> &LogicalTensor {
        self.lt
    }

    /// The stored tensors read, to check they did not change.
    pub fn parts(&self) -> Vec<TensorRef> {
        self.lt.parts.iter().map(|(_, t)| *t).collect()
    }

    /// Decodes the values of elements `first..` (row-major in the logical
    /// shape) into `out`; returns how many (fewer at the end).
    pub fn values(&self, first: u64, out: &mut [f32]) -> usize {
        self.decode(first, out, None)
    }

    /// [`Dequantizer::values`], with each element's integer code beside
    /// its value (see [`Dequantizer::code_range`]).
    pub fn values_and_codes(&self, first: u64, out: &mut [f32], codes: &mut [i32]) -> usize {
        let n = out.len().min(codes.len());
        let (Some(out), Some(codes)) = (out.get_mut(..n), codes.get_mut(..n)) else {
            return 0;
        };
        self.decode(first, out, Some(codes))
    }

    /// The codes an element can have, lowest and highest: unsigned `0..2^b`
    /// for GPTQ, AWQ, MLX and bitsandbytes 4-bit, signed for
    /// compressed-tensors and I8, the raw bits of float codes, GGUF's as
    /// its decoders hand them on (`format::gguf::dequant::code_range`).
    pub fn code_range(&self) -> (i32, i32) {
        match self.layout {
            Layout::Gptq { bits, .. } | Layout::MlxAffine { bits, .. } => (0, (1 << bits) - 1),
            Layout::Awq { .. } | Layout::Bnb4 { .. } => (0, 15),
            Layout::CtPack { bits, .. } => (-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
            Layout::Scaled {
                code: Dtype::I8,
                per_127: true,
                ..
            } => (-127, 127),
            Layout::Scaled {
                code: Dtype::I8, ..
            } => (-128, 127),
            Layout::Scaled { .. } => (0, 255),
            Layout::Minifloat { code, .. } => (0, (1 << code.bits()) - 1),
            Layout::Gguf { .. } => self.gguf_code_range().unwrap_or((0, 0)),
        }
    }

    /// False for a layout whose elements have no one integer code to
    /// count (GGUF's grid types: their codes index rows of a grid); its
    /// statistics then have no code histogram.
    pub fn has_codes(&self) -> bool {
        !matches!(self.layout, Layout::Gguf { .. }) || self.gguf_code_range().is_some()
    }

    /// What each code stands for before scaling, for codes that stand for
    /// values (float codes, bitsandbytes' stored 4-bit map, GGUF's IQ4 and
    /// FP4 tables); `None` for integer codes.
    pub fn code_values(&self) -> Option<Vec<f64>> {
        if let Layout::Gguf { ty, .. } = self.layout {
            let table = crate::format::gguf::dequant::code_values(*ty)?;
            return Some(table.iter().map(|&v| f64::from(v)).collect());
        }
        if let Layout::Bnb4 { quant_map, .. } = self.layout {
            let map = self.bytes(*quant_map);
            return Some((0..16).map(|i| scalar(map, Dtype::F32, i)).collect());
        }
        let table = code_table_f32(self.code_dtype()?)?;
        let (lo, hi) = self.code_range();
        Some(
            (lo..=hi)
                .map(|c| f64::from(table.get(c as usize).copied().unwrap_or(f32::NAN)))
                .collect(),
        )
    }

    /// For float codes, the dtype whose table gives a code's value.
    pub fn code_dtype(&self) -> Option<Dtype> {
        match self.layout {
            Layout::Scaled { code, .. } if *code != Dtype::I8 => Some(*code),
            Layout::Minifloat { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The scale element `i` is multiplied by (the effective one: with the
    /// global scale, the nested absmax, LLM.int8's 1/127; for GGUF its
    /// block's `d`, see [`Dequantizer::block_scales`]), for the value grid;
    /// `None` past the end.
    #[expect(
        clippy::many_single_char_names,
        reason = "element i in row n, column k, group g, scale s"
    )]
    pub fn scale_at(&self, i: u64) -> Option<f64> {
        if i >= self.len {
            return None;
        }
        let (n, k) = (i / self.cols, i % self.cols);
        let group_of = |g_idx: Option<TensorRef>, width: u64| match g_idx {
            Some(t) => u64::from(word(self.bytes(t), k)),
            None => k / width.max(1),
        };
        Some(match *self.layout {
            Layout::Gptq {
                scales,
                g_idx,
                n: cols,
                group,
                act_order,
                ..
            } => {
                let g = group_of(g_idx.filter(|_| act_order), group);
                scalar(
                    self.bytes(scales),
                    self.dtype_of(scales, Dtype::F16),
                    g * cols + n,
                )
            }
            Layout::Awq {
                scales,
                n: cols,
                group,
                ..
            } => scalar(
                self.bytes(scales),
                self.dtype_of(scales, Dtype::F16),
                (k / group) * cols + n,
            ),
            Layout::CtPack { scale, g_idx, .. } => {
                let g = group_of(g_idx, scale.grid.width);
                let row = (n / scale.grid.rows.max(1)) * scale.grid.cols;
                scalar(self.bytes(scale.t), scale.dtype, row + g)
            }
            Layout::Scaled { scale, per_127, .. } => {
                let at = (n / scale.grid.rows) * scale.grid.cols + k / scale.grid.width.max(1);
                let s = scalar(self.bytes(scale.t), scale.dtype, at);
                if per_127 { s / 127.0 } else { s }
            }
            Layout::Minifloat { scale, global, .. } => {
                let at = (n / scale.grid.rows) * scale.grid.cols + k / scale.grid.width.max(1);
                let raw = scalar(self.bytes(scale.t), scale.dtype, at) as f32;
                f64::from(match global {
                    None => raw,
                    Some((t, true)) => raw / scalar(self.bytes(t), Dtype::F32, 0) as f32,
                    Some((t, false)) => raw * scalar(self.bytes(t), Dtype::F32, 0) as f32,
                })
            }
            Layout::Bnb4 {
                absmax,
                nested,
                blocksize,
                ..
            } => {
                let b = i / blocksize.max(1);
                let am = self.bytes(absmax);
                f64::from(match nested {
                    None => scalar(am, Dtype::F32, b) as f32,
                    Some(x) => {
                        let code =
                            u64::from(am.get(usize::try_from(b).ok()?).copied().unwrap_or(0));
                        scalar(self.bytes(x.map), Dtype::F32, code) as f32
                            * scalar(self.bytes(x.absmax), Dtype::F32, b / x.blocksize.max(1))
                                as f32
                            + x.offset
                    }
                })
            }
            Layout::MlxAffine {
                scales,
                group,
                k: cols,
                ..
            } => scalar(
                self.bytes(scales),
                self.dtype_of(scales, Dtype::BF16),
                n * (cols / group.max(1)) + k / group.max(1),
            ),
            Layout::Gguf { .. } => return self.gguf_scale_at(i),
        })
    }

    /// How many (group, column) pairs hold each zero point, for the
    /// layouts that store one (GPTQ, AWQ, compressed-tensors INT with a
    /// zero point): `(zero, count)` ascending; `None` otherwise.
    pub fn zero_counts(&self) -> Option<Vec<(i64, u64)>> {
        let (groups, cols): (u64, u64) = match *self.layout {
            Layout::Gptq { groups, n, .. } => (groups, n),
            Layout::Awq { k, group, n, .. } => (k.div_ceil(group.max(1)), n),
            Layout::CtPack {
                scale,
                zero: Some(_),
                n,
                ..
            } => (scale.grid.cols, n),
            _ => return None,
        };
        // The zero points are at most a few million (one per group and
        // column): a map of the few values they take.
        let mut counts: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
        for g in 0..groups {
            for n in 0..cols {
                *counts.entry(self.zero_of(g, n)).or_insert(0) += 1;
            }
        }
        Some(counts.into_iter().collect())
    }

    /// The zero point of group `g` in output column `n` (0 without one).
    fn zero_of(&self, g: u64, n: u64) -> i64 {
        match *self.layout {
            Layout::Gptq { .. } => self.gptq_zero(g, n),
            Layout::Awq {
                qzeros, n: cols, ..
            } => {
                let shift = 4 * AWQ_NIBBLE[(n % 8) as usize];
                i64::from((word(self.bytes(qzeros), g * (cols / 8) + n / 8) >> shift) & 15)
            }
            Layout::CtPack {
                scale,
                zero: Some((t, packed)),
                bits,
                dense,
                ..
            } => {
                let zbytes = self.bytes(t);
                let cols = scale.grid.cols;
                if packed {
                    let half = 1i64 << (bits - 1);
                    let per = u64::from(32 / bits);
                    let u = if dense {
                        column_stream(zbytes, cols, g, n * u64::from(bits), bits)
                    } else {
                        (word(zbytes, (n / per) * cols + g) >> ((n % per) as u32 * bits))
                            & ((1u32 << bits) - 1)
                    };
                    i64::from(u) - half
                } else {
                    scalar(zbytes, self.dtype_of(t, Dtype::I32), n * cols + g) as i64
                }
            }
            _ => 0,
        }
    }

    /// For bitsandbytes with double quantization, whose stored absmax are
    /// codes: how many blocks, and the elements per block (each block's
    /// absmax is [`Dequantizer::scale_at`] its first element).
    pub fn nested_blocks(&self) -> Option<(u64, u64)> {
        match *self.layout {
            Layout::Bnb4 {
                nested: Some(_),
                numel,
                blocksize,
                ..
            } => Some((numel.div_ceil(blocksize.max(1)), blocksize.max(1))),
            _ => None,
        }
    }

    /// The scale tensor, and the dtype its bytes are read as.
    pub fn scale_part(&self) -> Option<(TensorRef, Dtype)> {
        match self.layout {
            Layout::Gptq { scales, .. }
            | Layout::Awq { scales, .. }
            | Layout::MlxAffine { scales, .. } => {
                let d = self.ck.info(*scales)?.dtype();
                Some((*scales, d))
            }
            Layout::CtPack { scale, .. }
            | Layout::Scaled { scale, .. }
            | Layout::Minifloat { scale, .. } => Some((scale.t, scale.dtype)),
            Layout::Bnb4 { absmax, .. } => Some((*absmax, Dtype::F32)),
            Layout::Gguf { .. } => None,
        }
    }

    #[inline]
    fn bytes(&self, t: TensorRef) -> &'a [u8] {
        self.ck.bytes(t)
    }

    /// Rows of a scale tensor (GPTQ's groups).
    fn groups_of(&self, scales: TensorRef) -> u64 {
        self.ck
            .info(scales)
            .and_then(|i| i.shape().first().copied())
            .unwrap_or(1)
    }

    fn decode(&self, first: u64, out: &mut [f32], mut codes: Option<&mut [i32]>) -> usize {
        if first >= self.len {
            return 0;
        }
        let total = usize::try_from(self.len - first)
            .unwrap_or(usize::MAX)
            .min(out.len());
        let mut done = 0usize;
        while done < total {
            let at = first + done as u64;
            let (row, col) = (at / self.cols, at % self.cols);
            let take = usize::try_from(self.cols - col)
                .unwrap_or(usize::MAX)
                .min(total - done);
            let vals = &mut out[done..done + take];
            let cs = codes.as_deref_mut().map(|c| &mut c[done..done + take]);
            self.row(row, col, vals, cs);
            done += take;
        }
        total
    }

    /// Counts elements `first..first + len` into `counts` (see [`Counts`]):
    /// the values' 16-bit codes and the integer codes, as
    /// [`Dequantizer::values_and_codes`] would give them, without writing
    /// them out (a group of codes of at most 4 bits costs one increment per
    /// element and 16 at its end).
    pub fn count16(&self, first: u64, len: u64, counts: &mut Counts) {
        let end = first.saturating_add(len).min(self.len);
        let mut at = first;
        while at < end && !counts.failed {
            let (row, col) = (at / self.cols, at % self.cols);
            let take = (self.cols - col).min(end - at);
            let mut out = Out {
                len: usize::try_from(take).unwrap_or(0),
                vals: &mut [],
                codes: None,
                count: Some(counts),
            };
            self.row_into(row, col, &mut out);
            at += take;
        }
    }

    /// Elements `k0..k0 + out.len()` of row `n`: one method per layout,
    /// each its formula. Runs are cut into groups, so that nothing is
    /// divided per element; codes of at most 4 bits go through a table of
    /// the group's 16 values.
    fn row(&self, n: u64, k0: u64, vals: &mut [f32], codes: Option<&mut [i32]>) {
        let mut out = Out {
            len: vals.len(),
            vals,
            codes,
            count: None,
        };
        self.row_into(n, k0, &mut out);
    }

    fn row_into(&self, n: u64, k0: u64, out: &mut Out<'_>) {
        match *self.layout {
            Layout::Gptq { .. } => self.gptq(n, k0, out),
            Layout::Awq { .. } => self.awq(n, k0, out),
            Layout::CtPack { .. } => self.ct_pack(n, k0, out),
            Layout::Scaled { .. } => self.scaled(n, k0, out),
            Layout::Minifloat { .. } => self.minifloat(n, k0, out),
            Layout::Bnb4 { .. } => self.bnb4(n, k0, out),
            Layout::MlxAffine { .. } => self.mlx(n, k0, out),
            Layout::Gguf { .. } => self.gguf(n, k0, out),
        }
    }

    /// The dtype of a part (`or` when it is gone).
    #[inline]
    fn dtype_of(&self, t: TensorRef, or: Dtype) -> Dtype {
        self.ck.info(t).map_or(or, crate::TensorInfo::dtype)
    }
}
