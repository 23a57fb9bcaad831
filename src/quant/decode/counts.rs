//! Counting instead of writing: how many elements hold each 16-bit code
//! of their value, and each integer code ([`Counts`], which the walk of
//! [`Dequantizer::count16`] fills), the counts keyed by scale byte turned
//! into values at the end, and the count in the stored order of the packed
//! words where that is faster ([`Dequantizer::count_unit`]).

use super::Dequantizer;
use super::read::scalar;
use super::round::{cast_f32, code16};
use crate::dtype::Dtype;
use crate::dtype::decode::code_table_f32;
use crate::quant::detect::Layout;

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
    pub(super) group: [u64; 16],
    /// Codes' counts by the scale byte of their group (see
    /// [`Dequantizer::finish_counts`]); empty unless used.
    pub(super) keyed: Vec<[u64; 16]>,
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
    pub(super) fn add(&mut self, v: f32, c: i32) {
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

    #[inline]
    pub(super) fn flush(&mut self, t: &[f32; 16], offset: i32) {
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

impl Dequantizer<'_> {
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
}
