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
use crate::dtype::decode::code_table_f32;
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

/// Little-endian u32 word `i` of `bytes` (0 past the end).
fn word(bytes: &[u8], i: u64) -> u32 {
    let Ok(i) = usize::try_from(i) else { return 0 };
    match i.checked_mul(4).and_then(|s| bytes.get(s..s + 4)) {
        Some(w) => u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
        None => 0,
    }
}

/// `width` (≤ 8) bits at bit `bit` of an LSB-first bitstream of bytes.
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
/// `dtype`.
fn scalar(bytes: &[u8], dtype: Dtype, i: u64) -> f64 {
    let Ok(i) = usize::try_from(i) else {
        return 0.0;
    };
    let at = |w: usize| bytes.get(i * w..i * w + w);
    match dtype {
        Dtype::F32 => at(4).map_or(0.0, |b| {
            f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        }),
        Dtype::F16 => at(2).map_or(0.0, |b| f16::from_le_bytes([b[0], b[1]]).to_f64()),
        Dtype::BF16 => at(2).map_or(0.0, |b| bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        Dtype::I32 => at(4).map_or(0.0, |b| {
            f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        }),
        Dtype::I8 => at(1).map_or(0.0, |b| f64::from(b[0] as i8)),
        Dtype::F64 => at(8).map_or(0.0, |b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            f64::from_le_bytes(a)
        }),
        d => at(1)
            .and_then(|b| code_table_f32(d)?.get(usize::from(b[0])).copied())
            .map_or(0.0, f64::from),
    }
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
            Layout::Bnb4 { absmax, nested, .. } => match nested {
                None => Some((*absmax, Dtype::F32)),
                Some(n) => Some((n.absmax, Dtype::F32)),
            },
        }
    }

    fn bytes(&self, t: TensorRef) -> &'a [u8] {
        self.ck.bytes(t)
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

    /// Elements `k0..k0 + out.len()` of row `n`.
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per layout, each its formula"
    )]
    #[expect(
        clippy::many_single_char_names,
        reason = "the formulas' own names: row n, column k, code q, zero z, scale s"
    )]
    fn row(&self, n: u64, k0: u64, out: &mut [f32], mut codes: Option<&mut [i32]>) {
        let vd = self.lt.value_dtype;
        let len = out.len();
        let mut put = |i: usize, v: f32, c: i32| {
            out[i] = v;
            if let Some(cs) = codes.as_deref_mut() {
                cs[i] = c;
            }
        };
        match *self.layout {
            Layout::Gptq {
                qweight,
                qzeros,
                scales,
                g_idx,
                bits,
                n: cols,
                group,
                v1,
                ..
            } => {
                let (qw, qz, sc) = (self.bytes(qweight), self.bytes(qzeros), self.bytes(scales));
                let gi = g_idx.map(|t| self.bytes(t));
                let sd = self
                    .ck
                    .info(scales)
                    .map_or(Dtype::F16, crate::TensorInfo::dtype);
                let zwords = (cols * u64::from(bits)).div_ceil(32);
                let mask = (1u32 << bits) - 1;
                let zero = |g: u64| -> i64 {
                    let bit = n * u64::from(bits);
                    let z = if v1 && bits != 3 {
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
                };
                let mut last = u64::MAX;
                let (mut z, mut s) = (0i64, 0f64);
                for (i, k) in (k0..).take(len).enumerate() {
                    let g = match gi {
                        Some(b) => word(b, k) as i32 as u64,
                        None => k / group,
                    };
                    if g != last {
                        last = g;
                        z = zero(g);
                        s = scalar(sc, sd, g * cols + n);
                    }
                    let q = column_stream(qw, cols, n, k * u64::from(bits), bits);
                    put(i, round_to(vd, (i64::from(q) - z) as f64 * s), q as i32);
                }
            }
            Layout::Awq {
                qweight,
                qzeros,
                scales,
                n: cols,
                group,
                ..
            } => {
                let (qw, qz, sc) = (self.bytes(qweight), self.bytes(qzeros), self.bytes(scales));
                let sd = self
                    .ck
                    .info(scales)
                    .map_or(Dtype::F16, crate::TensorInfo::dtype);
                let words = cols / 8;
                let shift = 4 * AWQ_NIBBLE[(n % 8) as usize];
                let (c, mut last, mut z, mut s) = (n / 8, u64::MAX, 0i64, 0f64);
                for (i, k) in (k0..).take(len).enumerate() {
                    let g = k / group;
                    if g != last {
                        last = g;
                        z = i64::from((word(qz, g * words + c) >> shift) & 15);
                        s = scalar(sc, sd, g * cols + n);
                    }
                    let q = (word(qw, k * words + c) >> shift) & 15;
                    put(i, round_to(vd, (i64::from(q) - z) as f64 * s), q as i32);
                }
            }
            Layout::CtPack {
                packed,
                scale,
                zero,
                g_idx,
                bits,
                dense,
                row_bytes,
                ..
            } => {
                let (pk, sc) = (self.bytes(packed), self.bytes(scale.t));
                let gi = g_idx.map(|t| self.bytes(t));
                let half = 1i64 << (bits - 1);
                let per = u64::from(32 / bits);
                let mask = (1u32 << bits) - 1;
                let zb = zero.map(|(t, p)| {
                    (
                        self.bytes(t),
                        p,
                        self.ck.info(t).map_or(Dtype::I32, crate::TensorInfo::dtype),
                    )
                });
                let (mut last, mut z, mut s) = (u64::MAX, 0i64, 0f64);
                for (i, k) in (k0..).take(len).enumerate() {
                    let g = match gi {
                        Some(b) => word(b, k) as i32 as u64,
                        None => k / scale.grid.width,
                    };
                    if g != last {
                        last = g;
                        s = scalar(sc, scale.dtype, n * scale.grid.cols + g);
                        z = match zb {
                            None => 0,
                            Some((zbytes, true, _)) => {
                                let u = if dense {
                                    column_stream(
                                        zbytes,
                                        scale.grid.cols,
                                        g,
                                        n * u64::from(bits),
                                        bits,
                                    )
                                } else {
                                    (word(zbytes, (n / per) * scale.grid.cols + g)
                                        >> ((n % per) as u32 * bits))
                                        & mask
                                };
                                i64::from(u) - half
                            }
                            Some((zbytes, false, zd)) => {
                                scalar(zbytes, zd, n * scale.grid.cols + g) as i64
                            }
                        };
                    }
                    let u = if dense {
                        stream(pk, n * row_bytes * 8 + k * u64::from(bits), bits)
                    } else {
                        (word(pk, n * (row_bytes / 4) + k / per) >> ((k % per) as u32 * bits))
                            & mask
                    };
                    let q = i64::from(u) - half;
                    put(i, round_to(vd, (q - z) as f64 * s), q as i32);
                }
            }
            Layout::Scaled {
                weight,
                code,
                scale,
                zero,
                per_127,
                k: cols,
                ..
            } => {
                let (w, sc) = (self.bytes(weight), self.bytes(scale.t));
                let zb = zero.map(|z| (self.bytes(z.t), z.dtype));
                let table = code_table_f32(code);
                let (mut last, mut s, mut z) = (u64::MAX, 0f64, 0f64);
                for (i, k) in (k0..).take(len).enumerate() {
                    let at = scale.grid.index(n, k);
                    if at != last {
                        last = at;
                        s = scalar(sc, scale.dtype, at);
                        z = zb.map_or(0.0, |(b, d)| scalar(b, d, at));
                    }
                    let byte = usize::try_from(n * cols + k)
                        .ok()
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
                    } else {
                        round_to(vd, (c - z) * s)
                    };
                    put(i, v, code_out);
                }
            }
            Layout::Minifloat {
                packed,
                code,
                scale,
                global,
                row_bytes,
                ..
            } => {
                let (pk, sc) = (self.bytes(packed), self.bytes(scale.t));
                let table = code_table_f32(code).unwrap_or(&[]);
                let bits = code.bits();
                let g = global
                    .map(|(t, divides)| (scalar(self.bytes(t), Dtype::F32, 0) as f32, divides));
                let (mut last, mut s) = (u64::MAX, 0f32);
                for (i, k) in (k0..).take(len).enumerate() {
                    let at = scale.grid.index(n, k);
                    if at != last {
                        last = at;
                        let raw = scalar(sc, scale.dtype, at) as f32;
                        s = match g {
                            None => raw,
                            Some((gs, true)) => raw / gs,
                            Some((gs, false)) => raw * gs,
                        };
                    }
                    let c = stream(pk, n * row_bytes * 8 + k * u64::from(bits), bits);
                    let v = table.get(c as usize).copied().unwrap_or(0.0);
                    put(i, round_to(vd, f64::from(v * s)), c as i32);
                }
            }
            Layout::Bnb4 {
                weight,
                absmax,
                quant_map,
                nested,
                blocksize,
                ..
            } => {
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
                let (mut last, mut a) = (u64::MAX, 0f32);
                for (i, k) in (k0..).take(len).enumerate() {
                    let j = n * self.cols + k;
                    let b = j / blocksize;
                    if b != last {
                        last = b;
                        a = match nest {
                            None => scalar(am, Dtype::F32, b) as f32,
                            Some((na, nm, nb, off)) => {
                                let code = u64::from(am.get(b as usize).copied().unwrap_or(0));
                                scalar(nm, Dtype::F32, code) as f32
                                    * scalar(na, Dtype::F32, b / nb) as f32
                                    + off
                            }
                        };
                    }
                    let byte = w.get((j / 2) as usize).copied().unwrap_or(0);
                    let c = if j.is_multiple_of(2) {
                        byte >> 4
                    } else {
                        byte & 15
                    };
                    let v = scalar(qm, Dtype::F32, u64::from(c)) as f32 * a;
                    put(i, round_to(vd, f64::from(v)), i32::from(c));
                }
            }
            Layout::MlxAffine {
                weight,
                scales,
                biases,
                bits,
                group,
                k: cols,
                ..
            } => {
                let (w, sc, bi) = (self.bytes(weight), self.bytes(scales), self.bytes(biases));
                let sd = self
                    .ck
                    .info(scales)
                    .map_or(Dtype::BF16, crate::TensorInfo::dtype);
                let groups = cols / group;
                let row_bits = (cols * u64::from(bits)).div_ceil(32) * 32;
                let (mut last, mut s, mut b) = (u64::MAX, 0f64, 0f64);
                for (i, k) in (k0..).take(len).enumerate() {
                    let g = k / group;
                    if g != last {
                        last = g;
                        s = scalar(sc, sd, n * groups + g);
                        b = scalar(bi, sd, n * groups + g);
                    }
                    let q = stream(w, n * row_bits + k * u64::from(bits), bits);
                    let sq = f64::from(round_to(vd, s * f64::from(q)));
                    put(i, round_to(vd, sq + b), q as i32);
                }
            }
        }
    }
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
