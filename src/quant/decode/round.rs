//! Rounding as the writing libraries round: an exactly computed value
//! rounded once to the value dtype, an f32 result cast as torch casts it
//! (bit arithmetic for f16 and bf16), and the 16-bit code of a value.

use half::{bf16, f16};

use crate::dtype::Dtype;

/// Rounds an exactly computed value to the dtype a library computes in,
/// once, to nearest even. (`half`'s `from_f64` drops low bits before it
/// rounds, so it is not used: the value goes to f32 rounded to odd, which
/// keeps enough bits for the second rounding to be the correct one.)
#[inline]
pub(super) fn round_to(dtype: Dtype, x: f64) -> f32 {
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
pub(super) fn int_value(dtype: Dtype, q_minus_z: i64, s: f64, scale_dtype: Dtype) -> f32 {
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
pub(super) fn cast_f32(dtype: Dtype, x: f32) -> f32 {
    match dtype {
        Dtype::BF16 => bf16_of_f32(x),
        Dtype::F16 => f16::from_bits(f16_bits(x)).to_f32(),
        _ => x,
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

#[cfg(test)]
mod tests {
    use super::*;

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
