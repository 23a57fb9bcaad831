//! Dtype conversions for re-saving: F64/F32/F16/BF16 into each other and
//! into F8_E4M3 / F8_E5M2, rounded to nearest, ties to even, **directly
//! from the f64 value** (an F64 is never rounded through F32 first).
//!
//! Every source value is first decoded exactly to f64 (F32, F16 and BF16
//! are exact in f64), then rounded once onto the target's grid by
//! `round_to_grid`, which works on the f64 value itself with exact
//! power-of-two scaling. We do not use `half`'s `from_f64`: in half 2.7.1
//! it converts through f32 where the CPU has F16C (double rounding: the
//! F64 value 1 + 2^-11 + 2^-40 becomes 1.0 instead of 1 + 2^-10) and
//! otherwise drops the low 32 bits of the mantissa before rounding, which
//! breaks ties the same way.
//!
//! Overflow (a finite value whose rounded magnitude is above the target's
//! largest finite value): F32, F16 and BF16 go to ±Inf as IEEE 754 says;
//! the F8 targets follow [`Overflow`]. ±Inf stays ±Inf where the target has
//! it (F16, BF16, F32, F8_E5M2); F8_E4M3 has no Inf, so ±Inf follows
//! [`Overflow`] too. NaN stays NaN (sign kept, payload not).

use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, decode_f64};

/// What happens to a value too large for an F8 target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Overflow {
    /// Clamp to the largest finite value of the same sign (±448 for
    /// F8_E4M3, ±57344 for F8_E5M2).
    #[default]
    Saturate,
    /// Become NaN. ±Inf inputs stay ±Inf in F8_E5M2, which has them, and
    /// become NaN in F8_E4M3, which has none.
    Nan,
}

impl std::str::FromStr for Overflow {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "saturate" => Ok(Overflow::Saturate),
            "nan" => Ok(Overflow::Nan),
            other => Err(format!(
                "unknown overflow mode {other:?} (expected saturate or nan)"
            )),
        }
    }
}

/// The dtypes a conversion may read.
pub const CONVERT_FROM: [Dtype; 4] = [Dtype::F64, Dtype::F32, Dtype::F16, Dtype::BF16];
/// The dtypes a conversion may write.
pub const CONVERT_TO: [Dtype; 6] = [
    Dtype::F64,
    Dtype::F32,
    Dtype::F16,
    Dtype::BF16,
    Dtype::F8E4M3,
    Dtype::F8E5M2,
];

/// True when `from` can be converted to `to` (two different dtypes from
/// [`CONVERT_FROM`] and [`CONVERT_TO`]).
pub fn is_supported(from: Dtype, to: Dtype) -> bool {
    from != to && CONVERT_FROM.contains(&from) && CONVERT_TO.contains(&to)
}

/// What a conversion did to the values, beyond rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ConversionCounts {
    /// Values converted (every element of the tensor).
    pub elements: u64,
    /// Values clamped to the largest finite value ([`Overflow::Saturate`];
    /// includes ±Inf into F8_E4M3).
    pub saturated: u64,
    /// Values (finite, or ±Inf into F8_E4M3) that became NaN because they
    /// overflowed ([`Overflow::Nan`]). NaN inputs are not counted.
    pub overflow_nan: u64,
    /// Finite values that became ±Inf (IEEE overflow into F32, F16, BF16).
    pub overflow_inf: u64,
    /// Non-zero finite values that became ±0.
    pub underflow_zero: u64,
    /// NaN inputs (they stay NaN).
    pub nan: u64,
}

impl ConversionCounts {
    /// Adds another tensor's counts (for the report's totals).
    pub fn add(&mut self, other: &ConversionCounts) {
        self.elements += other.elements;
        self.saturated += other.saturated;
        self.overflow_nan += other.overflow_nan;
        self.overflow_inf += other.overflow_inf;
        self.underflow_zero += other.underflow_zero;
        self.nan += other.nan;
    }
}

/// A binary floating-point grid: `man_bits` stored mantissa bits, normal
/// numbers from 2^`emin`, and the largest finite value.
#[derive(Debug, Clone, Copy)]
struct Grid {
    man_bits: u32,
    /// Unbiased exponent of the smallest normal number.
    emin: i32,
    bias: i32,
    max_finite: f64,
}

const F16_GRID: Grid = Grid {
    man_bits: 10,
    emin: -14,
    bias: 15,
    max_finite: 65504.0,
};
const BF16_GRID: Grid = Grid {
    man_bits: 7,
    emin: -126,
    bias: 127,
    max_finite: 3.389_531_389_251_535_5e38,
};
const E4M3_GRID: Grid = Grid {
    man_bits: 3,
    emin: -6,
    bias: 7,
    max_finite: 448.0,
};
const E5M2_GRID: Grid = Grid {
    man_bits: 2,
    emin: -14,
    bias: 15,
    max_finite: 57344.0,
};

/// The outcome of rounding one finite value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounded {
    /// The code's magnitude bits (exponent field and mantissa, no sign).
    Code(u32),
    /// The rounded magnitude is above the largest finite value.
    Overflow,
}

/// 2^`e` for `e` in the normal f64 range.
fn pow2(e: i32) -> f64 {
    // The callers keep e within -1022..=1023, where this is exact.
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Rounds the finite magnitude `a` (≥ 0) to the nearest point of `grid`,
/// ties to even, as if the exponent range were unbounded above; returns the
/// magnitude bits of its code, or `Overflow` when the result is above the
/// largest finite value.
fn round_to_grid(a: f64, grid: Grid) -> Rounded {
    if a == 0.0 {
        return Rounded::Code(0);
    }
    // Exponent of a's leading bit. f64 subnormals are far below every
    // target's smallest subnormal (2^-133 at most), so they round to 0.
    let biased = ((a.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 {
        return Rounded::Code(0);
    }
    let e = biased - 1023;
    // The quantum (spacing of the grid) at a's binade; subnormals share
    // the smallest normal binade's quantum.
    let q_exp = e.max(grid.emin) - grid.man_bits as i32;
    if q_exp - e > 60 {
        // a is below a quarter of the smallest subnormal: rounds to 0.
        return Rounded::Code(0);
    }
    // Exact: scaling by a power of two stays in range (the result is below
    // 2^(man_bits + 1)) and loses no bits.
    let scaled = if q_exp >= 0 {
        a / pow2(q_exp)
    } else {
        a * pow2(-q_exp)
    };
    let r = scaled.round_ties_even();
    let value = if q_exp >= 0 {
        r * pow2(q_exp)
    } else {
        r / pow2(-q_exp)
    };
    if value > grid.max_finite {
        return Rounded::Overflow;
    }
    let r = r as u32;
    let one = 1u32 << grid.man_bits;
    if r < one {
        // Subnormal (or zero): exponent field 0.
        return Rounded::Code(r);
    }
    // r is in one..=2·one; 2·one is the next binade's leading 1.
    let (exp_unbiased, mant) = if r == 2 * one {
        (e.max(grid.emin) + 1, 0)
    } else {
        (e.max(grid.emin), r - one)
    };
    let field = (exp_unbiased + grid.bias) as u32;
    Rounded::Code((field << grid.man_bits) | mant)
}

/// The target side of a conversion: how one f64 becomes bytes.
#[derive(Debug, Clone, Copy)]
pub struct Converter {
    to: Dtype,
    overflow: Overflow,
}

impl Converter {
    /// A converter to `to` (one of [`CONVERT_TO`]); `None` for other dtypes.
    pub fn new(to: Dtype, overflow: Overflow) -> Option<Self> {
        CONVERT_TO.contains(&to).then_some(Self { to, overflow })
    }

    /// Bytes per output element (every target is a whole number of bytes).
    pub fn width(self) -> usize {
        (self.to.bits() / 8) as usize
    }

    /// Converts `values`, appending their encoded bytes to `out` and
    /// counting what happened in `counts`.
    pub fn convert(self, values: &[f64], out: &mut Vec<u8>, counts: &mut ConversionCounts) {
        out.reserve(values.len() * self.width());
        counts.elements += values.len() as u64;
        match self.to {
            Dtype::F64 => {
                for &v in values {
                    counts.nan += u64::from(v.is_nan());
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Dtype::F32 => {
                for &v in values {
                    // `as` rounds to nearest, ties to even, and overflows to ±Inf.
                    let f = v as f32;
                    count_ieee(v, f.is_infinite(), f == 0.0, counts);
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
            Dtype::F16 => Self::ieee16(values, F16_GRID, 0x7c00, 0x7e00, out, counts),
            Dtype::BF16 => Self::ieee16(values, BF16_GRID, 0x7f80, 0x7fc0, out, counts),
            Dtype::F8E4M3 | Dtype::F8E5M2 => {
                for &v in values {
                    out.push(self.f8(v, counts));
                }
            }
            // `new` admits only the dtypes above.
            _ => {}
        }
    }

    fn ieee16(
        values: &[f64],
        grid: Grid,
        inf: u16,
        nan: u16,
        out: &mut Vec<u8>,
        counts: &mut ConversionCounts,
    ) {
        for &v in values {
            let sign = if v.is_sign_negative() { 0x8000u16 } else { 0 };
            let bits = if v.is_nan() {
                counts.nan += 1;
                sign | nan
            } else if v.is_infinite() {
                sign | inf
            } else {
                match round_to_grid(v.abs(), grid) {
                    Rounded::Code(c) => {
                        counts.underflow_zero += u64::from(c == 0 && v != 0.0);
                        sign | c as u16
                    }
                    Rounded::Overflow => {
                        counts.overflow_inf += 1;
                        sign | inf
                    }
                }
            };
            out.extend_from_slice(&bits.to_le_bytes());
        }
    }

    fn f8(self, v: f64, counts: &mut ConversionCounts) -> u8 {
        let (grid, nan_code, inf_code) = if self.to == Dtype::F8E4M3 {
            (E4M3_GRID, 0x7fu8, None)
        } else {
            (E5M2_GRID, 0x7eu8, Some(0x7cu8))
        };
        let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
        let max_code = if self.to == Dtype::F8E4M3 {
            0x7eu8
        } else {
            0x7bu8
        };
        if v.is_nan() {
            counts.nan += 1;
            return sign | nan_code;
        }
        let overflow = |counts: &mut ConversionCounts| match self.overflow {
            Overflow::Saturate => {
                counts.saturated += 1;
                sign | max_code
            }
            Overflow::Nan => {
                counts.overflow_nan += 1;
                sign | nan_code
            }
        };
        if v.is_infinite() {
            return match inf_code {
                Some(inf) => sign | inf,
                None => overflow(counts),
            };
        }
        match round_to_grid(v.abs(), grid) {
            Rounded::Code(c) => {
                counts.underflow_zero += u64::from(c == 0 && v != 0.0);
                // Codes of finite values fit the 7 magnitude bits.
                sign | (c as u8 & 0x7f)
            }
            Rounded::Overflow => overflow(counts),
        }
    }
}

fn count_ieee(v: f64, became_inf: bool, became_zero: bool, counts: &mut ConversionCounts) {
    if v.is_nan() {
        counts.nan += 1;
    } else if v.is_finite() {
        counts.overflow_inf += u64::from(became_inf);
        counts.underflow_zero += u64::from(became_zero && v != 0.0);
    }
}

/// Elements per conversion chunk: 512 KiB of f64, whatever the tensor size.
pub const CHUNK_ELEMENTS: usize = 64 * 1024;

/// Converts a whole tensor chunk by chunk: decodes elements of `from` from
/// `bytes`, converts them, and hands each chunk of output bytes to `sink`.
/// Memory use is one chunk, whatever the tensor size.
pub fn convert_chunks<E>(
    from: Dtype,
    bytes: &[u8],
    converter: Converter,
    counts: &mut ConversionCounts,
    mut sink: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut values = vec![0f64; CHUNK_ELEMENTS];
    let mut out = Vec::with_capacity(CHUNK_ELEMENTS * converter.width());
    let mut first = 0u64;
    loop {
        let got = decode_f64(from, bytes, first, &mut values, BitOrder::LsbFirst);
        if got == 0 {
            return Ok(());
        }
        out.clear();
        converter.convert(&values[..got], &mut out, counts);
        sink(&out)?;
        first += got as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::decode::code_table;
    use half::{bf16, f16};

    fn one(to: Dtype, overflow: Overflow, v: f64) -> (Vec<u8>, ConversionCounts) {
        let mut out = Vec::new();
        let mut counts = ConversionCounts::default();
        Converter::new(to, overflow)
            .expect("target")
            .convert(&[v], &mut out, &mut counts);
        (out, counts)
    }

    fn f16_of(v: f64) -> u16 {
        let (b, _) = one(Dtype::F16, Overflow::Saturate, v);
        u16::from_le_bytes([b[0], b[1]])
    }

    fn bf16_of(v: f64) -> u16 {
        let (b, _) = one(Dtype::BF16, Overflow::Saturate, v);
        u16::from_le_bytes([b[0], b[1]])
    }

    #[test]
    fn f64_rounds_once_not_through_f32() {
        // Through f32 this is 1 + 2^-11, an exact tie that goes to 1.0.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f16_of(x), f16::from_f64(1.0 + 2f64.powi(-10)).to_bits());
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(bf16_of(x), bf16::from_f32(1.0 + 2f32.powi(-7)).to_bits());
        // An exact tie goes to even.
        assert_eq!(f16_of(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(f16_of(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
    }

    #[test]
    fn f32_values_match_half_everywhere() {
        // half's f32 conversions are correctly rounded; ours must agree on
        // a spread of bit patterns, subnormals and overflow included.
        let mut x = 0x0000_0001u32;
        while x < 0x7f80_0000 {
            for bits in [x, x | 0x8000_0000, x.wrapping_add(0x1fff)] {
                let v = f32::from_bits(bits);
                assert_eq!(
                    f16_of(f64::from(v)),
                    f16::from_f32(v).to_bits(),
                    "{bits:#x}"
                );
                assert_eq!(
                    bf16_of(f64::from(v)),
                    bf16::from_f32(v).to_bits(),
                    "{bits:#x}"
                );
            }
            x = x.wrapping_mul(3) / 2 + 0x1235;
        }
    }

    #[test]
    fn ieee_specials_and_counts() {
        assert_eq!(f16_of(f64::INFINITY), 0x7c00);
        assert_eq!(f16_of(f64::NEG_INFINITY), 0xfc00);
        assert_eq!(f16_of(-0.0), 0x8000);
        assert_eq!(f16_of(f64::NAN) & 0x7fff, 0x7e00);
        assert_eq!(f16_of(65519.99), 0x7bff);
        // 65520 is the tie between 65504 (odd) and 65536 (Inf, even).
        let (b, c) = one(Dtype::F16, Overflow::Saturate, 65520.0);
        assert_eq!(b, 0x7c00u16.to_le_bytes());
        assert_eq!(c.overflow_inf, 1);
        let (_, c) = one(Dtype::F16, Overflow::Saturate, 1e-9);
        assert_eq!(c.underflow_zero, 1);
        // Smallest subnormal, and half of it (a tie to 0).
        assert_eq!(f16_of(2f64.powi(-24)), 1);
        assert_eq!(f16_of(2f64.powi(-25)), 0);
        assert_eq!(f16_of(3.0 * 2f64.powi(-26)), 1);
        let (b, c) = one(Dtype::F32, Overflow::Saturate, 1e300);
        assert_eq!(b, f32::INFINITY.to_le_bytes());
        assert_eq!(c.overflow_inf, 1);
        assert_eq!(bf16_of(f64::MAX), 0x7f80);
        assert_eq!(bf16_of(3.389_531_389_251_535_5e38), 0x7f7f);
    }

    /// The nearest code by searching the decode table, ties to the even
    /// code, with `beyond` standing for the first value past the grid.
    fn nearest_f8(dtype: Dtype, v: f64, beyond: f64) -> Option<u8> {
        let table = code_table(dtype).expect("table");
        let a = v.abs();
        let mut best: Option<(f64, u8)> = None;
        for code in 0u8..=0x7f {
            let x = table[usize::from(code)];
            if !x.is_finite() {
                continue;
            }
            let d = (x - a).abs();
            best = match best {
                Some((bd, bc)) if bd < d || (bd == d && bc % 2 == 0) => Some((bd, bc)),
                _ => Some((d, code)),
            };
        }
        let (bd, bc) = best?;
        let db = (beyond - a).abs();
        // The virtual point past the grid has an odd code for E4M3 (0x7f
        // would be 480) and an even one for E5M2 (Inf, 0x7c).
        let beyond_even = dtype == Dtype::F8E5M2;
        if db < bd || (db == bd && beyond_even) {
            return None;
        }
        Some(bc | if v.is_sign_negative() { 0x80 } else { 0 })
    }

    #[test]
    fn f8_matches_a_table_search() {
        for (dtype, beyond) in [(Dtype::F8E4M3, 480.0), (Dtype::F8E5M2, 65536.0)] {
            let mut v = 1e-9f64;
            let mut values = vec![0.0, -0.0, 464.0, 465.0, 61440.0, 61439.0, 448.0];
            while v < 1e6 {
                values.push(v);
                values.push(-v * 1.0001);
                v *= 1.0137;
            }
            for v in values {
                let (b, counts) = one(dtype, Overflow::Saturate, v);
                if let Some(code) = nearest_f8(dtype, v, beyond) {
                    assert_eq!(b[0], code, "{dtype} {v}");
                    assert_eq!(counts.saturated, 0);
                } else {
                    assert_eq!(
                        b[0] & 0x7f,
                        if dtype == Dtype::F8E4M3 { 0x7e } else { 0x7b }
                    );
                    assert_eq!(counts.saturated, 1, "{dtype} {v}");
                    let (b, counts) = one(dtype, Overflow::Nan, v);
                    assert!(code_table(dtype).expect("t")[usize::from(b[0])].is_nan());
                    assert_eq!(counts.overflow_nan, 1);
                }
            }
        }
    }

    #[test]
    fn f8_specials() {
        let e4 = |o, v| one(Dtype::F8E4M3, o, v).0[0];
        let e5 = |o, v| one(Dtype::F8E5M2, o, v).0[0];
        assert_eq!(e4(Overflow::Saturate, f64::INFINITY), 0x7e);
        assert_eq!(e4(Overflow::Saturate, f64::NEG_INFINITY), 0xfe);
        assert_eq!(e4(Overflow::Nan, f64::INFINITY), 0x7f);
        assert_eq!(e4(Overflow::Nan, f64::NAN), 0x7f);
        assert_eq!(e4(Overflow::Saturate, -f64::NAN), 0xff);
        assert_eq!(e5(Overflow::Nan, f64::INFINITY), 0x7c);
        assert_eq!(e5(Overflow::Saturate, f64::NEG_INFINITY), 0xfc);
        assert_eq!(e5(Overflow::Saturate, f64::NAN), 0x7e);
        assert_eq!(e5(Overflow::Saturate, 1e9), 0x7b);
        assert_eq!(e5(Overflow::Nan, -1e9), 0xfe);
        // Smallest subnormals.
        assert_eq!(e4(Overflow::Saturate, 2f64.powi(-9)), 0x01);
        assert_eq!(e4(Overflow::Saturate, 2f64.powi(-10)), 0x00);
        assert_eq!(e5(Overflow::Saturate, 2f64.powi(-16)), 0x01);
        assert_eq!(e4(Overflow::Saturate, -0.0), 0x80);
    }

    #[test]
    fn chunks_cover_the_tensor() {
        let values: Vec<f32> = (0..(CHUNK_ELEMENTS * 2 + 7))
            .map(|i| i as f32 * 0.37)
            .collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = Vec::new();
        let mut counts = ConversionCounts::default();
        let conv = Converter::new(Dtype::BF16, Overflow::Saturate).expect("bf16");
        convert_chunks(Dtype::F32, &bytes, conv, &mut counts, |c| {
            out.extend_from_slice(c);
            Ok::<(), ()>(())
        })
        .expect("ok");
        assert_eq!(counts.elements, values.len() as u64);
        let expected: Vec<u8> = values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect();
        assert_eq!(out, expected);
        assert!(is_supported(Dtype::F64, Dtype::BF16));
        assert!(!is_supported(Dtype::F32, Dtype::F32));
        assert!(!is_supported(Dtype::I32, Dtype::F32));
        assert!(!is_supported(Dtype::F32, Dtype::F8E8M0));
    }
}
