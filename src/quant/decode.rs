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

use half::{bf16, f16};

use super::LogicalTensor;
use super::detect::Layout;
use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, code_table_f32, decode_one_f64};
use crate::format::{Checkpoint, TensorRef};

/// bitsandbytes' `7.874015718698502e-3` (1/127) as the f32 torch uses.
const BNB_INV_127: f32 = 7.874_015_718_698_502e-3_f64 as f32;

/// AWQ's nibble of output column `8c + j` (`AWQ_REVERSE_ORDER`).
const AWQ_NIBBLE: [u32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// Rounds an exactly computed value to the dtype a library computes in,
/// once, to nearest even. (`half`'s `from_f64` drops low bits before it
/// rounds, so it is not used: the value goes to f32 rounded to odd, which
/// keeps enough bits for the second rounding to be the correct one.)
fn round_to(dtype: Dtype, x: f64) -> f32 {
    match dtype {
        Dtype::F16 => f16::from_f32(to_f32_odd(x)).to_f32(),
        Dtype::BF16 => bf16::from_f32(to_f32_odd(x)).to_f32(),
        _ => x as f32,
    }
}

/// `x` as f32 rounded to odd: truncated toward zero, with the last bit set
/// when anything was dropped.
fn to_f32_odd(x: f64) -> f32 {
    let f = x as f32;
    if !f.is_finite() || f64::from(f) == x {
        return f;
    }
    let t = if f64::from(f).abs() > x.abs() {
        f32::from_bits(f.to_bits() - 1)
    } else {
        f
    };
    if f64::from(t) == x {
        t
    } else {
        f32::from_bits(t.to_bits() | 1)
    }
}

/// Rounds an f32 to bf16 (nearest even), as a cast of an f32 result.
#[expect(
    clippy::inline_always,
    reason = "measured: per-element helpers the optimiser left as calls (20% of a 4-bit decode)"
)]
#[inline(always)]
fn bf16_of_f32(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000)
}

/// `(q − z) · s` rounded once to `dtype`: in f32 when that is exact (a
/// code of at most 9 significant bits times a 16-bit scale), else exactly
/// in f64 first.
#[inline]
fn int_value(dtype: Dtype, q_minus_z: i64, s: f64, scale_dtype: Dtype) -> f32 {
    if matches!(scale_dtype, Dtype::F16 | Dtype::BF16) && q_minus_z.unsigned_abs() < 512 {
        cast_f32(dtype, q_minus_z as f32 * s as f32)
    } else {
        round_to(dtype, q_minus_z as f64 * s)
    }
}

/// An f32 rounded to f16 (nearest even), as its bits: bit arithmetic for
/// results in f16's normal range, `half` for the rest.
#[inline]
fn f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    if (1..=30).contains(&exp) {
        let sign = ((bits >> 16) & 0x8000) as u16;
        let mant = bits & 0x007f_ffff;
        let (m, rest) = (mant >> 13, mant & 0x1fff);
        // The sum carries into the exponent when the mantissa overflows, and
        // to Inf past the largest finite value, as rounding does.
        let mut h = ((exp as u32) << 10) | m;
        if rest > 0x1000 || (rest == 0x1000 && m & 1 == 1) {
            h += 1;
        }
        return sign | h as u16;
    }
    f16::from_f32(x).to_bits()
}

/// An f32 result cast to the value dtype, as torch's `.to(dtype)` does.
#[expect(
    clippy::inline_always,
    reason = "measured: per-element helpers the optimiser left as calls (20% of a 4-bit decode)"
)]
#[inline(always)]
fn cast_f32(dtype: Dtype, x: f32) -> f32 {
    match dtype {
        Dtype::BF16 => bf16_of_f32(x),
        Dtype::F16 => f16::from_bits(f16_bits(x)).to_f32(),
        _ => x,
    }
}

/// The values of every code of a group, computed once per group instead of
/// once per element (codes of at most 4 bits: 16 values per group of 32 or
/// more elements). With act-order the groups of a run come in any order, so
/// every group's table is kept; otherwise only the current one.
struct Luts {
    width: usize,
    table: Vec<f32>,
    filled: Vec<bool>,
    current: u64,
    every: bool,
}

impl Luts {
    /// Tables for codes of `bits`, or `None` above 4 bits (computing each
    /// value is then cheaper than a table).
    fn new(bits: u32, groups: u64, every: bool) -> Option<Self> {
        if bits > 4 {
            return None;
        }
        let width = 1usize << bits;
        let slots = if every {
            usize::try_from(groups).ok()?.min(1 << 16)
        } else {
            1
        };
        Some(Self {
            width,
            table: vec![0.0; slots * width],
            filled: vec![false; slots],
            current: u64::MAX,
            every,
        })
    }

    /// The value of code `q` in group `g`; `fill(q)` computes a value the
    /// first time group `g` is met.
    fn value(&mut self, g: u64, q: u32, fill: impl Fn(u32) -> f32) -> f32 {
        let slot = if self.every {
            usize::try_from(g).unwrap_or(usize::MAX)
        } else {
            0
        };
        let fresh = if self.every {
            !self.filled.get(slot).copied().unwrap_or(true)
        } else {
            self.current != g
        };
        if fresh {
            self.current = g;
            if let Some(f) = self.filled.get_mut(slot) {
                *f = true;
            }
            if let Some(t) = self
                .table
                .get_mut(slot * self.width..(slot + 1) * self.width)
            {
                for (c, v) in t.iter_mut().enumerate() {
                    *v = fill(c as u32);
                }
            } else {
                return fill(q);
            }
        }
        self.table
            .get(slot * self.width + q as usize)
            .copied()
            .unwrap_or_else(|| fill(q))
    }
}

/// Little-endian u32 word `i` of `bytes` (0 past the end).
#[inline]
fn word(bytes: &[u8], i: u64) -> u32 {
    let Ok(i) = usize::try_from(i) else { return 0 };
    match i.checked_mul(4).and_then(|s| bytes.get(s..s + 4)) {
        Some(w) => u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
        None => 0,
    }
}

/// `width` (≤ 8) bits at bit `bit` of an LSB-first bitstream of bytes.
#[inline]
fn stream(bytes: &[u8], bit: u64, width: u32) -> u32 {
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
fn column_stream(bytes: &[u8], cols: u64, col: u64, bit: u64, width: u32) -> u32 {
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
fn scalar(bytes: &[u8], dtype: Dtype, i: u64) -> f64 {
    decode_one_f64(dtype, bytes, i, BitOrder::LsbFirst).unwrap_or(0.0)
}

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
    /// compressed-tensors and I8, the raw bits of float codes.
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
        }
    }

    /// What each code stands for before scaling, for codes that stand for
    /// values (float codes, bitsandbytes' stored 4-bit map); `None` for
    /// integer codes.
    pub fn code_values(&self) -> Option<Vec<f64>> {
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
    /// global scale, the nested absmax, LLM.int8's 1/127), for the value
    /// grid; `None` past the end.
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
        }
    }

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

    /// Turns the counts keyed by scale byte (one-byte-scale FP4 layouts)
    /// into value counts; call once, after every run is counted.
    pub fn finish_counts(&self, counts: &mut Counts) {
        let Layout::Minifloat {
            code,
            scale,
            global,
            ..
        } = *self.layout
        else {
            return;
        };
        if counts.keyed.is_empty() {
            return;
        }
        let vd = self.lt.value_dtype;
        let table = code_table_f32(code).unwrap_or(&[]);
        let global =
            global.map(|(t, divides)| (scalar(self.bytes(t), Dtype::F32, 0) as f32, divides));
        let keyed = std::mem::take(&mut counts.keyed);
        for (key, group) in keyed.iter().enumerate() {
            if group.iter().all(|&c| c == 0) {
                continue;
            }
            let raw = scalar(&[key as u8], scale.dtype, 0) as f32;
            let s = match global {
                None => raw,
                Some((gs, true)) => raw / gs,
                Some((gs, false)) => raw * gs,
            };
            let mut lut = [0f32; 16];
            for (c, v) in lut.iter_mut().enumerate() {
                *v = cast_f32(vd, table.get(c).copied().unwrap_or(0.0) * s);
            }
            counts.group = *group;
            counts.flush(&lut, 0);
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
        }
    }

    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    fn gptq(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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
    fn gptq_zero(&self, g: u64, n: u64) -> i64 {
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
    fn gptq_table(&self, g: u64, n: u64) -> Option<[f32; 16]> {
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
    fn awq_table(&self, g: u64, n: u64) -> Option<[f32; 16]> {
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

    /// Units of work of [`Dequantizer::count_unit`], when the layout is
    /// faster counted in its stored order than in the logical one: the
    /// groups of GPTQ 4-bit (without act-order) and AWQ, whose codes are
    /// packed down the input dimension or across the output one.
    pub fn storage_units(&self) -> Option<u64> {
        match *self.layout {
            Layout::Gptq {
                bits: 4,
                act_order: false,
                group,
                groups,
                ..
            } if group % 8 == 0 => Some(groups),
            Layout::Awq { k, group, .. } => Some(k.div_ceil(group)),
            _ => None,
        }
    }

    /// Counts group `g` of every column into `counts`, reading the packed
    /// words in their stored order (see [`Dequantizer::storage_units`]).
    pub fn count_unit(&self, g: u64, counts: &mut Counts) {
        let (qweight, cols, k, group, awq) = match *self.layout {
            Layout::Gptq {
                qweight,
                n,
                k,
                group,
                ..
            } => (qweight, n, k, group, false),
            Layout::Awq {
                qweight,
                n,
                k,
                group,
                ..
            } => (qweight, n, k, group, true),
            _ => return,
        };
        let Ok(n_cols) = usize::try_from(cols) else {
            return;
        };
        let qw = self.bytes(qweight);
        // One set of 16 counters per output column.
        let mut per_col = vec![[0u32; 16]; n_cols];
        let (k0, k1) = (g * group, ((g + 1) * group).min(k));
        if awq {
            // Row k: N/8 words, nibble i of word c is column 8c + AWQ_ORDER[i].
            const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
            let row_bytes = n_cols / 8 * 4;
            for k in k0..k1 {
                let start = usize::try_from(k)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(row_bytes);
                let row = qw
                    .get(start..start.saturating_add(row_bytes))
                    .unwrap_or(&[]);
                for (c, w) in row.chunks_exact(4).enumerate() {
                    let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    for (i, &col) in AWQ_ORDER.iter().enumerate() {
                        if let Some(cc) = per_col.get_mut(8 * c + col) {
                            cc[((w >> (4 * i)) & 15) as usize] += 1;
                        }
                    }
                }
            }
        } else {
            // Word row w: eight input rows of every column.
            let row_bytes = n_cols * 4;
            for w in k0 / 8..k1.div_ceil(8) {
                let start = usize::try_from(w)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(row_bytes);
                let row = qw
                    .get(start..start.saturating_add(row_bytes))
                    .unwrap_or(&[]);
                for (cc, word) in per_col.iter_mut().zip(row.chunks_exact(4)) {
                    let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                    for i in 0..8 {
                        cc[((word >> (4 * i)) & 15) as usize] += 1;
                    }
                }
            }
        }
        for (n, cc) in per_col.iter().enumerate() {
            let t = if awq {
                self.awq_table(g, n as u64)
            } else {
                self.gptq_table(g, n as u64)
            };
            let Some(t) = t else { continue };
            for (slot, &c) in counts.group.iter_mut().zip(cc) {
                *slot += u64::from(c);
            }
            counts.flush(&t, 0);
        }
    }

    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    fn awq(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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

    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    fn ct_pack(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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

    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    fn scaled(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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

    fn minifloat(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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

    fn bnb4(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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

    #[expect(
        clippy::many_single_char_names,
        reason = "the formula's own names: row n, column k, code q, zero z, scale s"
    )]
    fn mlx(&self, n: u64, k0: u64, out: &mut Out<'_>) {
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

    /// The dtype of a part (`or` when it is gone).
    fn dtype_of(&self, t: TensorRef, or: Dtype) -> Dtype {
        self.ck.info(t).map_or(or, crate::TensorInfo::dtype)
    }
}

/// Where a run's values (and codes) go: written out, or counted.
struct Out<'b> {
    len: usize,
    vals: &'b mut [f32],
    codes: Option<&'b mut [i32]>,
    /// Counting instead of writing ([`Dequantizer::count16`]).
    count: Option<&'b mut Counts>,
}

impl Out<'_> {
    fn len(&self) -> usize {
        self.len
    }

    /// The values (and codes) of positions `at..at + count` (empty when
    /// counting).
    fn run(&mut self, at: usize, count: usize) -> (&mut [f32], Option<&mut [i32]>) {
        let end = (at + count).min(self.vals.len());
        let at = at.min(end);
        (
            &mut self.vals[at..end],
            self.codes.as_deref_mut().map(|c| &mut c[at..end]),
        )
    }

    /// Element `i` is `v`, of code `c`.
    #[inline]
    fn put(&mut self, i: usize, v: f32, c: i32) {
        if let Some(k) = self.count.as_deref_mut() {
            k.add(v, c);
            return;
        }
        if let Some(slot) = self.vals.get_mut(i) {
            *slot = v;
        }
        if let Some(slot) = self.codes.as_deref_mut().and_then(|cs| cs.get_mut(i)) {
            *slot = c;
        }
    }

    /// Element `i` has code `q` of a group whose values are `t` (its code
    /// reported as `q + offset`); when counting, only `q` is counted, and
    /// [`Out::end_group`] adds the group's counts.
    #[inline]
    fn coded(&mut self, i: usize, t: &[f32; 16], q: u32, offset: i32) {
        if let Some(k) = self.count.as_deref_mut() {
            if let Some(c) = k.group.get_mut(q as usize) {
                *c += 1;
            }
            return;
        }
        let v = t.get(q as usize).copied().unwrap_or(0.0);
        if let Some(slot) = self.vals.get_mut(i) {
            *slot = v;
        }
        if let Some(slot) = self.codes.as_deref_mut().and_then(|cs| cs.get_mut(i)) {
            *slot = q as i32 + offset;
        }
    }

    /// The end of a group whose codes went through [`Out::coded`].
    fn end_group(&mut self, t: &[f32; 16], offset: i32) {
        if let Some(k) = self.count.as_deref_mut() {
            k.flush(t, offset);
        }
    }
}

/// What [`Dequantizer::count16`] gathers: how many elements hold each
/// 16-bit code of the values (in `dtype`), and each integer code.
#[derive(Debug, Clone)]
pub struct Counts {
    dtype: Dtype,
    /// Elements per 16-bit code of their value.
    pub dense: Vec<u64>,
    /// Elements per integer code, from [`Dequantizer::code_range`]'s low end.
    pub codes: Vec<u64>,
    low: i32,
    /// A value was not of `dtype`: the counts are not the figures.
    pub failed: bool,
    group: [u64; 16],
    /// Codes' counts by the scale byte of their group (see
    /// [`Dequantizer::finish_counts`]); empty unless used.
    keyed: Vec<[u64; 16]>,
}

impl Counts {
    /// Empty counts for the values of `dq`, in `dtype` (F16 or BF16).
    pub fn new(dq: &Dequantizer<'_>, dtype: Dtype) -> Self {
        let (lo, hi) = dq.code_range();
        let width = usize::try_from(i64::from(hi) - i64::from(lo) + 1).unwrap_or(1);
        Self {
            dtype,
            dense: crate::mem::written_zeros(1 << 16),
            codes: vec![0; width],
            low: lo,
            failed: false,
            group: [0; 16],
            keyed: Vec::new(),
        }
    }

    /// The 16-bit dtype counted in.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    #[inline]
    fn add(&mut self, v: f32, c: i32) {
        match code16(self.dtype, v) {
            Some(x) => self.dense[usize::from(x)] += 1,
            None => self.failed = true,
        }
        if let Some(slot) = usize::try_from(i64::from(c) - i64::from(self.low))
            .ok()
            .and_then(|i| self.codes.get_mut(i))
        {
            *slot += 1;
        }
    }

    fn flush(&mut self, t: &[f32; 16], offset: i32) {
        for (q, n) in self.group.iter_mut().enumerate() {
            if *n == 0 {
                continue;
            }
            match code16(self.dtype, t[q]) {
                Some(x) => self.dense[usize::from(x)] += *n,
                None => self.failed = true,
            }
            if let Some(slot) = usize::try_from(i64::from(q as i32 + offset) - i64::from(self.low))
                .ok()
                .and_then(|i| self.codes.get_mut(i))
            {
                *slot += *n;
            }
            *n = 0;
        }
    }

    /// Adds `other`'s counts (of another run of the same tensor).
    pub fn merge(&mut self, other: &Self) {
        for (a, b) in self.dense.iter_mut().zip(&other.dense) {
            *a += b;
        }
        for (a, b) in self.codes.iter_mut().zip(&other.codes) {
            *a += b;
        }
        if self.keyed.is_empty() {
            self.keyed.clone_from(&other.keyed);
        } else {
            for (a, b) in self.keyed.iter_mut().zip(&other.keyed) {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
            }
        }
        self.failed |= other.failed;
    }
}

/// The 16-bit code of `v` in `dtype` (F16, or BF16), when `v` is a value
/// of it.
#[expect(
    clippy::inline_always,
    reason = "measured: per-element helpers the optimiser left as calls (20% of a 4-bit decode)"
)]
#[inline(always)]
pub(crate) fn code16(dtype: Dtype, v: f32) -> Option<u16> {
    let bits = v.to_bits();
    if dtype == Dtype::BF16 {
        return (bits.trailing_zeros() >= 16).then_some((bits >> 16) as u16);
    }
    // Normal f16 values: rebias the exponent, drop 13 zero bits.
    let exp = (bits >> 23) & 0xff;
    if (113..=142).contains(&exp) && bits.trailing_zeros() >= 13 {
        let sign = (bits >> 16) & 0x8000;
        return Some((sign | ((exp - 112) << 10) | ((bits >> 13) & 0x3ff)) as u16);
    }
    let h = f16::from_f32(v);
    (h.to_f32().to_bits() == bits || v.is_nan()).then_some(h.to_bits())
}

/// The runs of `k0..k0 + len` that stay in one group of `width` columns:
/// (group, offset in the run, length).
fn segments(k0: u64, len: usize, width: u64) -> impl Iterator<Item = (u64, usize, usize)> {
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

/// A run of 4-bit codes packed two per byte from `first` (a code index:
/// byte `first / 2`), low nibble first or high first, to their values in
/// `lut` (codes reported as `q + offset`): the hot loop of every
/// nibble-packed layout. When counting, the codes are counted.
#[expect(
    clippy::too_many_arguments,
    reason = "the bytes and their packing, the group's table, and the run"
)]
fn nibbles(
    bytes: &[u8],
    first: u64,
    high_first: bool,
    lut: &[f32; 16],
    offset: i32,
    out: &mut Out<'_>,
    at: usize,
    count: usize,
) {
    let Ok(start) = usize::try_from(first / 2) else {
        return;
    };
    let split = |b: u8| {
        if high_first {
            (b >> 4, b & 15)
        } else {
            (b & 15, b >> 4)
        }
    };
    let odd = first % 2 == 1;
    let lead = usize::from(odd).min(count);
    let pairs = (count - lead) / 2;
    let tail = count - lead - 2 * pairs;
    let first_byte = start + usize::from(odd);
    let src = bytes.get(first_byte..first_byte + pairs).unwrap_or(&[]);
    let edge = |b: usize, second: bool| {
        let (x, y) = split(bytes.get(b).copied().unwrap_or(0));
        u32::from(if second { y } else { x })
    };
    if let Some(k) = out.count.as_deref_mut() {
        count_nibbles(bytes, first, high_first, count, &mut k.group);
        k.flush(lut, offset);
        return;
    }
    if lead == 1 {
        out.coded(at, lut, edge(start, true), offset);
    }
    let (vals, codes) = out.run(at + lead, 2 * src.len());
    match codes {
        Some(codes) => {
            for ((v, c), &b) in vals
                .chunks_exact_mut(2)
                .zip(codes.chunks_exact_mut(2))
                .zip(src)
            {
                let (x, y) = split(b);
                v[0] = lut[usize::from(x)];
                v[1] = lut[usize::from(y)];
                c[0] = i32::from(x) + offset;
                c[1] = i32::from(y) + offset;
            }
        }
        None => {
            for (v, &b) in vals.chunks_exact_mut(2).zip(src) {
                let (x, y) = split(b);
                v[0] = lut[usize::from(x)];
                v[1] = lut[usize::from(y)];
            }
        }
    }
    if tail == 1 {
        out.coded(
            at + lead + 2 * pairs,
            lut,
            edge(first_byte + pairs, false),
            offset,
        );
    }
}

/// Counts `count` 4-bit codes packed two per byte from code index `first`
/// into `into`.
fn count_nibbles(bytes: &[u8], first: u64, high_first: bool, count: usize, into: &mut [u64; 16]) {
    let Ok(start) = usize::try_from(first / 2) else {
        return;
    };
    let split = |b: u8| {
        if high_first {
            (b >> 4, b & 15)
        } else {
            (b & 15, b >> 4)
        }
    };
    let odd = first % 2 == 1;
    let lead = usize::from(odd).min(count);
    let pairs = (count - lead) / 2;
    let first_byte = start + usize::from(odd);
    let mut twin = [[0u32; 16]; 2];
    if lead == 1 {
        twin[0][usize::from(split(bytes.get(start).copied().unwrap_or(0)).1)] += 1;
    }
    for &b in bytes.get(first_byte..first_byte + pairs).unwrap_or(&[]) {
        let (x, y) = split(b);
        twin[0][usize::from(x)] += 1;
        twin[1][usize::from(y)] += 1;
    }
    if count - lead - 2 * pairs == 1 {
        twin[1][usize::from(split(bytes.get(first_byte + pairs).copied().unwrap_or(0)).0)] += 1;
    }
    for (g, (a, b)) in into.iter_mut().zip(twin[0].iter().zip(&twin[1])) {
        *g += u64::from(*a) + u64::from(*b);
    }
}

/// The 16 values of a group's codes, when codes have at most 4 bits.
fn table(bits: u32, value: impl Fn(u32) -> f32) -> Option<[f32; 16]> {
    (bits <= 4).then(|| {
        let mut t = [0f32; 16];
        for (q, v) in t.iter_mut().enumerate().take(1 << bits) {
            *v = value(q as u32);
        }
        t
    })
}

/// `width` bits at bit `bit` of row `row` of a matrix of u32 words with
/// `words` per row, read as one LSB-first bitstream along the row.
fn column_stream_row(bytes: &[u8], words: u64, row: u64, bit: u64, width: u32) -> u32 {
    let base = row * words * 4;
    let Ok(base) = usize::try_from(base) else {
        return 0;
    };
    stream(bytes.get(base..).unwrap_or(&[]), bit, width)
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

    #[test]
    fn f16_rounding_matches_half() {
        let mut x = 0x1234_5678u32;
        for i in 0..2_000_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Every exponent near f16's range, random mantissas; and exact
            // halfway cases every so often.
            let exp = 100 + (x >> 24) % 50;
            let mut bits = (x & 0x807f_ffff) | (exp << 23);
            if i % 7 == 0 {
                bits = (bits & !0x1fff) | 0x1000;
            }
            let v = f32::from_bits(bits);
            assert_eq!(f16_bits(v), f16::from_f32(v).to_bits(), "{v:e} ({bits:#x})");
        }
        for v in [
            65504.0f32, 65519.0, 65520.0, 1e9, -65520.0, 6.1e-5, 0.0, -0.0,
        ] {
            assert_eq!(f16_bits(v), f16::from_f32(v).to_bits(), "{v:e}");
        }
    }

    #[test]
    fn rounds_once() {
        assert_eq!(round_to(Dtype::F16, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(round_to(Dtype::BF16, 3.0), 3.0);
        // Just above the midpoint: a rounding through the nearest f32 would
        // land on the midpoint and go to even (1.0).
        assert_eq!(
            round_to(Dtype::BF16, 1.0 + 2f64.powi(-8) + 2f64.powi(-30)),
            1.007_812_5
        );
        assert_eq!(
            round_to(Dtype::F16, 1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
            1.0 + 2f32.powi(-10)
        );
        assert_eq!(
            round_to(Dtype::F16, -(1.0 + 2f64.powi(-11) + 2f64.powi(-40))),
            -(1.0 + 2f32.powi(-10))
        );
        assert_eq!(round_to(Dtype::F16, 1e6), f32::INFINITY);
        assert!(round_to(Dtype::BF16, f64::NAN).is_nan());
    }
}
