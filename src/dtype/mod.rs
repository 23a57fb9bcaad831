//! Element types of the safetensors format: their names, sizes in bits, the
//! writer's order, and (in [`decode`]) bit-exact decoders to `f64`/`f32`.

pub mod convert;
pub mod decode;

use std::fmt;

/// One element type of the safetensors format.
///
/// The variants are declared in the reference crate's order; [`Dtype::name`]
/// gives the exact, case-sensitive header string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    /// Boolean, one byte; non-zero is true.
    Bool,
    /// 4-bit float, 1-2-1 (`float4_e2m1fn`), two per byte, low nibble first.
    F4,
    /// 6-bit float, 1-2-3, bias 1.
    F6E2M3,
    /// 6-bit float, 1-3-2, bias 3.
    F6E3M2,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// 8-bit float, 1-5-2, bias 15, with infinities.
    F8E5M2,
    /// 8-bit float, 1-4-3, bias 7, no infinities (`float8_e4m3fn`).
    F8E4M3,
    /// 8-bit power of two, unsigned exponent, bias 127 (`float8_e8m0fnu`).
    F8E8M0,
    /// 8-bit float, 1-4-3, bias 8, single NaN at 0x80, no negative zero.
    F8E4M3Fnuz,
    /// 8-bit float, 1-5-2, bias 16, single NaN at 0x80, no negative zero.
    F8E5M2Fnuz,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// IEEE 754 half precision.
    F16,
    /// bfloat16: sign, 8 exponent bits, 7 mantissa bits (f32's top half).
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE 754 single precision.
    F32,
    /// Complex number: two F32, real then imaginary.
    C64,
    /// IEEE 754 double precision.
    F64,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
}

/// The broad family a dtype belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DtypeKind {
    /// Boolean: one byte per element, true when non-zero.
    Bool,
    /// Unsigned integer: U8, U16, U32, U64.
    Unsigned,
    /// Signed integer (two's complement): I8, I16, I32, I64.
    Signed,
    /// Real floating point (including the sub-byte and 8-bit formats).
    Float,
    /// Complex floating point: C64, two f32 (real, then imaginary).
    Complex,
}

impl Dtype {
    /// Every dtype, in the reference crate's declaration order.
    pub const ALL: [Dtype; 22] = [
        Dtype::Bool,
        Dtype::F4,
        Dtype::F6E2M3,
        Dtype::F6E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8E5M2,
        Dtype::F8E4M3,
        Dtype::F8E8M0,
        Dtype::F8E4M3Fnuz,
        Dtype::F8E5M2Fnuz,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];

    /// The order in which the reference writer lays tensors out: the reverse
    /// of the declaration order (largest alignment first).
    pub const WRITER_ORDER: [Dtype; 22] = {
        let mut out = Self::ALL;
        let mut i = 0;
        while i < out.len() {
            out[i] = Self::ALL[Self::ALL.len() - 1 - i];
            i += 1;
        }
        out
    };

    /// The exact header string of this dtype, such as `"F8_E4M3"`.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::F4 => "F4",
            Dtype::F6E2M3 => "F6_E2M3",
            Dtype::F6E3M2 => "F6_E3M2",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8E5M2 => "F8_E5M2",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E8M0 => "F8_E8M0",
            Dtype::F8E4M3Fnuz => "F8_E4M3FNUZ",
            Dtype::F8E5M2Fnuz => "F8_E5M2FNUZ",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::C64 => "C64",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
        }
    }

    /// Parses an exact, case-sensitive header string.
    pub fn from_name(name: &str) -> Option<Dtype> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Size of one element in bits.
    pub const fn bits(self) -> u32 {
        match self {
            Dtype::F4 => 4,
            Dtype::F6E2M3 | Dtype::F6E3M2 => 6,
            Dtype::Bool
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8E5M2
            | Dtype::F8E4M3
            | Dtype::F8E8M0
            | Dtype::F8E4M3Fnuz
            | Dtype::F8E5M2Fnuz => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 32,
            Dtype::C64 | Dtype::F64 | Dtype::I64 | Dtype::U64 => 64,
        }
    }

    /// Bytes of a tensor of this dtype and `shape`: `None` when the element
    /// count or the bit count overflows u64, or the bits are not a whole
    /// number of bytes.
    pub fn byte_len(self, shape: &[u64]) -> Option<u64> {
        shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))?
            .checked_mul(u64::from(self.bits()))
            .filter(|bits| bits % 8 == 0)
            .map(|bits| bits / 8)
    }

    /// The family of this dtype.
    pub const fn kind(self) -> DtypeKind {
        match self {
            Dtype::Bool => DtypeKind::Bool,
            Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => DtypeKind::Unsigned,
            Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64 => DtypeKind::Signed,
            Dtype::C64 => DtypeKind::Complex,
            _ => DtypeKind::Float,
        }
    }

    /// True for the real floating-point dtypes of 8 bits or fewer.
    pub const fn is_small_float(self) -> bool {
        matches!(self.kind(), DtypeKind::Float) && self.bits() <= 8
    }

    /// True for the dtypes NumPy has no type of its own for, only the
    /// `ml_dtypes` package: BF16, the F8s, the F6s and F4. Exports write
    /// their values as float32 or, on request, their raw integer codes
    /// (see [`crate::export::Encoding`]); every other dtype has a native
    /// NumPy type and is written as it is.
    pub const fn needs_ml_dtypes(self) -> bool {
        self.is_small_float() || matches!(self, Dtype::BF16)
    }

    /// Position in [`Dtype::WRITER_ORDER`] (0 is written first).
    pub fn writer_rank(self) -> usize {
        Self::WRITER_ORDER
            .iter()
            .position(|d| *d == self)
            .unwrap_or(usize::MAX)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Dtype {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl std::str::FromStr for Dtype {
    type Err = UnknownDtype;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dtype::from_name(s).ok_or_else(|| UnknownDtype(s.to_owned()))
    }
}

/// A dtype string that the format does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown dtype {0:?} (expected one of BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)"
)]
pub struct UnknownDtype(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ml_dtypes_only_types() {
        let only: Vec<Dtype> = Dtype::ALL
            .into_iter()
            .filter(|d| d.needs_ml_dtypes())
            .collect();
        assert_eq!(
            only,
            [
                Dtype::F4,
                Dtype::F6E2M3,
                Dtype::F6E3M2,
                Dtype::F8E5M2,
                Dtype::F8E4M3,
                Dtype::F8E8M0,
                Dtype::F8E4M3Fnuz,
                Dtype::F8E5M2Fnuz,
                Dtype::BF16,
            ]
        );
    }

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_name(d.name()), Some(d));
            assert_eq!(Dtype::from_name(&d.name().to_lowercase()), None);
        }
        assert_eq!(Dtype::from_name("F8_E4M3FN"), None);
    }

    #[test]
    fn writer_order_matches_format_md() {
        let names: Vec<&str> = Dtype::WRITER_ORDER.iter().map(|d| d.name()).collect();
        assert_eq!(
            names.join(" "),
            "U64 I64 F64 C64 F32 U32 I32 BF16 F16 U16 I16 F8_E5M2FNUZ F8_E4M3FNUZ F8_E8M0 \
             F8_E4M3 F8_E5M2 I8 U8 F6_E3M2 F6_E2M3 F4 BOOL"
        );
        assert_eq!(Dtype::U64.writer_rank(), 0);
        assert_eq!(Dtype::Bool.writer_rank(), 21);
    }
}
