//! Code → value lookup tables for the real floats of 8 bits or fewer.
//!
//! Every table is computed at compile time from the dtype's bit layout
//! (sign, exponent and mantissa widths, bias, subnormals and special codes, as
//! FORMAT.md lists them), so no value is typed in by hand and nothing runs at
//! start-up. The results are checked code by code against tables that
//! `scripts/gen_dtype_tables.py` generated with `ml_dtypes`.

use crate::dtype::Dtype;

/// Which codes of a small float are special.
#[derive(Clone, Copy)]
enum Specials {
    /// Every code is a finite number (F6, F4).
    None,
    /// IEEE 754: the all-ones exponent is ±Inf with a zero mantissa, NaN otherwise.
    Ieee,
    /// "fn" formats: only the all-ones magnitude (exponent and mantissa) is NaN,
    /// with either sign; there is no infinity.
    AllOnesNan,
    /// "fnuz" formats: the code that would be −0 is the single NaN.
    NegativeZeroNan,
}

/// The bit layout of one small float format.
#[derive(Clone, Copy)]
struct Layout {
    /// Whether the top bit is a sign bit (`F8_E8M0` has none).
    signed: bool,
    exponent_bits: u32,
    mantissa_bits: u32,
    bias: i32,
    /// Whether exponent 0 encodes subnormals (`F8_E8M0` has no subnormals and no
    /// zero: code 0 is 2^−127).
    subnormals: bool,
    specials: Specials,
}

const F8_E5M2: Layout = Layout {
    signed: true,
    exponent_bits: 5,
    mantissa_bits: 2,
    bias: 15,
    subnormals: true,
    specials: Specials::Ieee,
};
const F8_E4M3: Layout = Layout {
    signed: true,
    exponent_bits: 4,
    mantissa_bits: 3,
    bias: 7,
    subnormals: true,
    specials: Specials::AllOnesNan,
};
const F8_E8M0: Layout = Layout {
    signed: false,
    exponent_bits: 8,
    mantissa_bits: 0,
    bias: 127,
    subnormals: false,
    specials: Specials::AllOnesNan,
};
const F8_E4M3FNUZ: Layout = Layout {
    signed: true,
    exponent_bits: 4,
    mantissa_bits: 3,
    bias: 8,
    subnormals: true,
    specials: Specials::NegativeZeroNan,
};
const F8_E5M2FNUZ: Layout = Layout {
    signed: true,
    exponent_bits: 5,
    mantissa_bits: 2,
    bias: 16,
    subnormals: true,
    specials: Specials::NegativeZeroNan,
};
const F6_E2M3: Layout = Layout {
    signed: true,
    exponent_bits: 2,
    mantissa_bits: 3,
    bias: 1,
    subnormals: true,
    specials: Specials::None,
};
const F6_E3M2: Layout = Layout {
    signed: true,
    exponent_bits: 3,
    mantissa_bits: 2,
    bias: 3,
    subnormals: true,
    specials: Specials::None,
};
const F4: Layout = Layout {
    signed: true,
    exponent_bits: 2,
    mantissa_bits: 1,
    bias: 1,
    subnormals: true,
    specials: Specials::None,
};

/// 2^k, exact, for the normal f64 range (−1022 ≤ k ≤ 1023); every layout above
/// stays well inside it (the extremes are 2^−127 and 2^127 of `F8_E8M0`).
const fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The value of one code under `layout`. NaN codes give a quiet NaN that
/// carries the code's sign bit, which is also what `ml_dtypes` produces.
const fn decode_code(layout: &Layout, code: u32) -> f64 {
    let magnitude_bits = layout.exponent_bits + layout.mantissa_bits;
    let magnitude_mask = (1u32 << magnitude_bits) - 1;
    let negative = layout.signed && (code >> magnitude_bits) & 1 == 1;
    let magnitude = code & magnitude_mask;
    let exponent = magnitude >> layout.mantissa_bits;
    let mantissa = magnitude & ((1u32 << layout.mantissa_bits) - 1);
    let max_exponent = (1u32 << layout.exponent_bits) - 1;

    let nan = match layout.specials {
        Specials::None => false,
        Specials::Ieee => exponent == max_exponent && mantissa != 0,
        Specials::AllOnesNan => magnitude == magnitude_mask,
        Specials::NegativeZeroNan => negative && magnitude == 0,
    };
    let value = if nan {
        f64::NAN
    } else if matches!(layout.specials, Specials::Ieee) && exponent == max_exponent {
        f64::INFINITY
    } else if exponent == 0 && layout.subnormals {
        // Subnormal: no implicit leading one, exponent fixed at 1 − bias.
        mantissa as f64 * pow2(1 - layout.bias - layout.mantissa_bits as i32)
    } else {
        let significand = (1u32 << layout.mantissa_bits) | mantissa;
        significand as f64 * pow2(exponent as i32 - layout.bias - layout.mantissa_bits as i32)
    };
    if negative { -value } else { value }
}

/// All 2^bits values of `layout`, indexed by code.
const fn build<const N: usize>(layout: &Layout) -> [f64; N] {
    let mut out = [0.0; N];
    let mut code = 0;
    while code < N {
        out[code] = decode_code(layout, code as u32);
        code += 1;
    }
    out
}

/// The same table narrowed to f32; exact, since every small float value is an
/// f32 (2^−127 is an f32 subnormal).
const fn narrow<const N: usize>(table: &[f64; N]) -> [f32; N] {
    let mut out = [0.0; N];
    let mut code = 0;
    while code < N {
        out[code] = table[code] as f32;
        code += 1;
    }
    out
}

/// One table per small float dtype, in a lane type (f64 or f32). Fixed-size
/// arrays let the decoders index with a masked code without a bounds check.
pub(super) struct SmallTables<T> {
    pub(super) f4: [T; 16],
    pub(super) f6_e2m3: [T; 64],
    pub(super) f6_e3m2: [T; 64],
    pub(super) f8_e5m2: [T; 256],
    pub(super) f8_e4m3: [T; 256],
    pub(super) f8_e8m0: [T; 256],
    pub(super) f8_e4m3fnuz: [T; 256],
    pub(super) f8_e5m2fnuz: [T; 256],
}

impl<T> SmallTables<T> {
    /// The table of a byte-sized float dtype, for the plain byte → value loop.
    pub(super) fn byte_table(&self, dtype: Dtype) -> Option<&[T; 256]> {
        match dtype {
            Dtype::F8E5M2 => Some(&self.f8_e5m2),
            Dtype::F8E4M3 => Some(&self.f8_e4m3),
            Dtype::F8E8M0 => Some(&self.f8_e8m0),
            Dtype::F8E4M3Fnuz => Some(&self.f8_e4m3fnuz),
            Dtype::F8E5M2Fnuz => Some(&self.f8_e5m2fnuz),
            _ => None,
        }
    }

    /// The table of a six-bit float dtype.
    pub(super) fn f6_table(&self, dtype: Dtype) -> Option<&[T; 64]> {
        match dtype {
            Dtype::F6E2M3 => Some(&self.f6_e2m3),
            Dtype::F6E3M2 => Some(&self.f6_e3m2),
            _ => None,
        }
    }

    /// Any small float table as a slice of length 2^bits.
    fn slice(&self, dtype: Dtype) -> Option<&[T]> {
        match dtype {
            Dtype::F4 => Some(&self.f4),
            Dtype::F6E2M3 | Dtype::F6E3M2 => self.f6_table(dtype).map(<[T; 64]>::as_slice),
            _ => self.byte_table(dtype).map(<[T; 256]>::as_slice),
        }
    }
}

const F4_F64: [f64; 16] = build(&F4);
const F6_E2M3_F64: [f64; 64] = build(&F6_E2M3);
const F6_E3M2_F64: [f64; 64] = build(&F6_E3M2);
const F8_E5M2_F64: [f64; 256] = build(&F8_E5M2);
const F8_E4M3_F64: [f64; 256] = build(&F8_E4M3);
const F8_E8M0_F64: [f64; 256] = build(&F8_E8M0);
const F8_E4M3FNUZ_F64: [f64; 256] = build(&F8_E4M3FNUZ);
const F8_E5M2FNUZ_F64: [f64; 256] = build(&F8_E5M2FNUZ);

/// The f64 tables, built at compile time from the bit layouts.
pub(super) static TABLES_F64: SmallTables<f64> = SmallTables {
    f4: F4_F64,
    f6_e2m3: F6_E2M3_F64,
    f6_e3m2: F6_E3M2_F64,
    f8_e5m2: F8_E5M2_F64,
    f8_e4m3: F8_E4M3_F64,
    f8_e8m0: F8_E8M0_F64,
    f8_e4m3fnuz: F8_E4M3FNUZ_F64,
    f8_e5m2fnuz: F8_E5M2FNUZ_F64,
};

/// The f32 tables, narrowed from the f64 ones so the two can never disagree.
pub(super) static TABLES_F32: SmallTables<f32> = SmallTables {
    f4: narrow(&F4_F64),
    f6_e2m3: narrow(&F6_E2M3_F64),
    f6_e3m2: narrow(&F6_E3M2_F64),
    f8_e5m2: narrow(&F8_E5M2_F64),
    f8_e4m3: narrow(&F8_E4M3_F64),
    f8_e8m0: narrow(&F8_E8M0_F64),
    f8_e4m3fnuz: narrow(&F8_E4M3FNUZ_F64),
    f8_e5m2fnuz: narrow(&F8_E5M2FNUZ_F64),
};

/// The value of every code of a real float dtype of 8 bits or fewer, indexed
/// by code (length 2^bits), or `None` for any other dtype.
///
/// NaN codes hold a quiet NaN with the code's sign; `F8_E8M0` has no zero
/// (code 0 is 2^−127).
pub fn code_table(dtype: Dtype) -> Option<&'static [f64]> {
    TABLES_F64.slice(dtype)
}

/// [`code_table`] in f32; every entry equals the f64 one exactly.
pub fn code_table_f32(dtype: Dtype) -> Option<&'static [f32]> {
    TABLES_F32.slice(dtype)
}

/// The reference tables written by `scripts/gen_dtype_tables.py`, parsed into
/// (code, value bits) pairs; shared with the decoder tests.
#[cfg(test)]
pub(super) mod reference {
    use crate::dtype::Dtype;

    macro_rules! table_file {
        ($name:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/data/dtype_tables/",
                $name,
                ".txt"
            ))
        };
    }

    /// The ten dtypes that have a reference table.
    pub(crate) const DTYPES: [Dtype; 10] = [
        Dtype::F8E5M2,
        Dtype::F8E4M3,
        Dtype::F8E8M0,
        Dtype::F8E4M3Fnuz,
        Dtype::F8E5M2Fnuz,
        Dtype::F6E2M3,
        Dtype::F6E3M2,
        Dtype::F4,
        Dtype::F16,
        Dtype::BF16,
    ];

    fn text(dtype: Dtype) -> &'static str {
        match dtype {
            Dtype::F8E5M2 => table_file!("F8_E5M2"),
            Dtype::F8E4M3 => table_file!("F8_E4M3"),
            Dtype::F8E8M0 => table_file!("F8_E8M0"),
            Dtype::F8E4M3Fnuz => table_file!("F8_E4M3FNUZ"),
            Dtype::F8E5M2Fnuz => table_file!("F8_E5M2FNUZ"),
            Dtype::F6E2M3 => table_file!("F6_E2M3"),
            Dtype::F6E3M2 => table_file!("F6_E3M2"),
            Dtype::F4 => table_file!("F4"),
            Dtype::F16 => table_file!("F16"),
            Dtype::BF16 => table_file!("BF16"),
            other => panic!("no reference table for {other}"),
        }
    }

    /// The reference value of every code, as f64 (F16 and BF16 are stored as
    /// f32 bits and widened here, which is exact).
    pub(crate) fn values(dtype: Dtype) -> Vec<f64> {
        let text = text(dtype);
        let mut out = Vec::new();
        for (line_no, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let mut fields = line.split_whitespace();
            let code =
                u64::from_str_radix(fields.next().expect("code column"), 16).expect("hex code");
            let bits = fields.next().expect("value column");
            assert_eq!(
                code,
                out.len() as u64,
                "{dtype} line {line_no}: codes in order"
            );
            let value = match bits.len() {
                16 => f64::from_bits(u64::from_str_radix(bits, 16).expect("hex f64 bits")),
                8 => f64::from(f32::from_bits(
                    u32::from_str_radix(bits, 16).expect("hex f32 bits"),
                )),
                n => panic!("{dtype} line {line_no}: {n} hex digits"),
            };
            out.push(value);
        }
        assert_eq!(out.len(), 1 << dtype.bits(), "{dtype}: one line per code");
        out
    }

    /// Bit-exact equality, except that any NaN equals any NaN (FORMAT.md:
    /// payloads are not compared).
    pub(crate) fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::reference::{DTYPES, same, values};
    use super::*;

    #[test]
    fn tables_match_ml_dtypes_bit_for_bit() {
        for dtype in DTYPES.into_iter().filter(|d| d.bits() <= 8) {
            let expected = values(dtype);
            let table = code_table(dtype).expect("small float has a table");
            let table_f32 = code_table_f32(dtype).expect("small float has an f32 table");
            assert_eq!(table.len(), expected.len(), "{dtype}");
            assert_eq!(table_f32.len(), expected.len(), "{dtype}");
            for (code, &want) in expected.iter().enumerate() {
                let got = table[code];
                assert!(
                    same(got, want),
                    "{dtype} code {code:#x}: got {got:e} ({:#018x}), ml_dtypes {want:e} ({:#018x})",
                    got.to_bits(),
                    want.to_bits()
                );
                let got32 = f64::from(table_f32[code]);
                assert!(
                    same(got32, want),
                    "{dtype} f32 code {code:#x}: {got32:e} vs {want:e}"
                );
            }
        }
    }

    #[test]
    fn special_codes_are_where_format_md_says() {
        let nan_codes = |dtype| -> Vec<usize> {
            let table = code_table(dtype).expect("table");
            (0..table.len()).filter(|&c| table[c].is_nan()).collect()
        };
        assert_eq!(
            nan_codes(Dtype::F8E5M2),
            [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]
        );
        assert_eq!(nan_codes(Dtype::F8E4M3), [0x7f, 0xff]);
        assert_eq!(nan_codes(Dtype::F8E8M0), [0xff]);
        assert_eq!(nan_codes(Dtype::F8E4M3Fnuz), [0x80]);
        assert_eq!(nan_codes(Dtype::F8E5M2Fnuz), [0x80]);
        for dtype in [Dtype::F6E2M3, Dtype::F6E3M2, Dtype::F4] {
            assert!(nan_codes(dtype).is_empty(), "{dtype}");
        }
        let t = code_table(Dtype::F8E5M2).expect("table");
        assert_eq!((t[0x7c], t[0xfc]), (f64::INFINITY, f64::NEG_INFINITY));

        let max_finite = |dtype| {
            code_table(dtype)
                .expect("table")
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(f64::NEG_INFINITY, f64::max)
        };
        assert_eq!(max_finite(Dtype::F8E5M2), 57344.0);
        assert_eq!(max_finite(Dtype::F8E4M3), 448.0);
        assert_eq!(max_finite(Dtype::F8E4M3Fnuz), 240.0);
        assert_eq!(max_finite(Dtype::F8E5M2Fnuz), 57344.0);
        assert_eq!(max_finite(Dtype::F8E8M0), 2f64.powi(127));
        assert_eq!(max_finite(Dtype::F6E2M3), 7.5);
        assert_eq!(max_finite(Dtype::F6E3M2), 28.0);
        assert_eq!(max_finite(Dtype::F4), 6.0);
        assert_eq!(
            code_table(Dtype::F4).expect("table"),
            [
                0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0,
                -6.0
            ]
        );
        assert_eq!(
            code_table(Dtype::F8E8M0).expect("table")[0],
            2f64.powi(-127)
        );
    }

    #[test]
    fn only_small_floats_have_tables() {
        for dtype in Dtype::ALL {
            assert_eq!(
                code_table(dtype).is_some(),
                dtype.is_small_float(),
                "{dtype}"
            );
            assert_eq!(
                code_table_f32(dtype).is_some(),
                dtype.is_small_float(),
                "{dtype}"
            );
            if let Some(t) = code_table(dtype) {
                assert_eq!(t.len(), 1 << dtype.bits(), "{dtype}");
            }
        }
    }
}
