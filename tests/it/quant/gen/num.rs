//! Numbers: the pseudo-random generator, correctly rounded conversions to
//! F16/BF16, and the small float formats (E2M1, E2M3, E4M3, E8M0).

use half::{bf16, f16};

/// splitmix64: tiny, deterministic, good enough for fixtures.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x05EE_D0F7_E57F_1C5A)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// A random permutation of 0..n (Fisher-Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
}

/// Weights of an nn.Linear [n, k], row-major: normal with a per-row spread
/// (0.5x to 2x of `std`) and a few outliers (8x to 16x, both signs).
pub fn weights(rng: &mut Rng, n: usize, k: usize, std: f64) -> Vec<f64> {
    let spread: Vec<f64> = (0..n).map(|_| 0.5 + 1.5 * rng.uniform()).collect();
    let mut w: Vec<f64> = (0..n * k)
        .map(|i| rng.normal() * std * spread[i / k])
        .collect();
    for j in 0..4 {
        let at = rng.below(n * k);
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        w[at] = sign * std * (8.0 + 8.0 * rng.uniform());
    }
    w
}

/// `x` rounded to f32 to odd: exact when `x` is, else the truncation with
/// its last bit set. Rounding that to a format with at least two bits less
/// precision gives the correctly rounded result (no double rounding).
fn f32_round_odd(x: f64) -> f32 {
    let r = x as f32;
    if f64::from(r) == x || !r.is_finite() {
        return r;
    }
    let mut bits = r.to_bits();
    if f64::from(r).abs() > x.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `x` rounded once (to nearest, ties to even) to F16, as an f32.
pub fn round_f16(x: f64) -> f32 {
    f16::from_f32(f32_round_odd(x)).to_f32()
}

/// `x` rounded once (to nearest, ties to even) to BF16, as an f32.
pub fn round_bf16(x: f64) -> f32 {
    bf16::from_f32(f32_round_odd(x)).to_f32()
}

/// `x` rounded once to F32 (Rust's `as` rounds to nearest, ties to even).
pub fn round_f32(x: f64) -> f32 {
    x as f32
}

/// `x` (> 0) rounded to `bits` significant bits. The ModelOpt fixtures
/// take scales of few bits so that the products they form are exact in
/// BF16 and F32 alike: then every order of the multiplications, and
/// ModelOpt's own final cast to the model dtype, give the same number.
pub fn few_bits(x: f64, bits: i32) -> f32 {
    let e = x.log2().floor() as i32 - bits + 1;
    ((x / 2f64.powi(e)).round() * 2f64.powi(e)) as f32
}

/// The rounding of a dtype name ("F16", "BF16", "F32").
pub fn rounding(dtype: &str) -> fn(f64) -> f32 {
    match dtype {
        "F16" => round_f16,
        "BF16" => round_bf16,
        "F32" => round_f32,
        other => panic!("no rounding for {other}"),
    }
}

/// E2M1 (FP4) by 4-bit code; bit 3 is the sign.
pub const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// The code of the non-negative value nearest to `|x|` among `table`
/// (indexed by code, increasing), with the sign bit `sign` set for x < 0.
fn nearest(table: impl Fn(u8) -> f32, codes: u8, sign: u8, x: f64) -> u8 {
    let a = x.abs();
    let mut best = 0u8;
    for c in 1..codes {
        if (f64::from(table(c)) - a).abs() < (f64::from(table(best)) - a).abs() {
            best = c;
        }
    }
    if x < 0.0 && best != 0 {
        best | sign
    } else {
        best
    }
}

/// The E2M1 code nearest to `x` (saturating at ±6).
pub fn e2m1_nearest(x: f64) -> u8 {
    nearest(|c| E2M1[c as usize], 8, 0x8, x)
}

/// FP6 E2M3: sign bit 5, exponent bits 4-3 (bias 1), mantissa bits 2-0,
/// subnormal when the exponent is 0. Max 7.5.
pub fn e2m3_value(code: u8) -> f32 {
    let sign = if code & 0x20 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((code >> 3) & 0x3);
    let man = f32::from(code & 0x7);
    let mag = if exp == 0 {
        man / 8.0
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 1)
    };
    sign * mag
}

/// The E2M3 code nearest to `x` (saturating at ±7.5).
pub fn e2m3_nearest(x: f64) -> u8 {
    nearest(e2m3_value, 32, 0x20, x)
}

/// FP8 E4M3 (the "fn" variant: no infinities, 0x7F/0xFF are NaN, max 448).
pub fn e4m3_value(code: u8) -> f32 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((code >> 3) & 0xF);
    let man = code & 0x7;
    if exp == 0xF && man == 0x7 {
        return f32::NAN;
    }
    let man = f32::from(man);
    let mag = if exp == 0 {
        man / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    sign * mag
}

/// The E4M3 code nearest to `x` (saturating at ±448, never NaN).
pub fn e4m3_nearest(x: f64) -> u8 {
    nearest(e4m3_value, 0x7F, 0x80, x)
}

/// E8M0: byte `e` is 2^(e-127); 255 is NaN.
pub fn e8m0_value(e: u8) -> f32 {
    if e == 255 {
        return f32::NAN;
    }
    2f64.powi(i32::from(e) - 127) as f32
}

/// The E8M0 byte of an MX block whose absolute maximum is `amax`, for
/// elements whose largest power of two is 2^`elem_emax`:
/// 127 + floor(log2(amax)) - elem_emax (compressed-tensors
/// `compress_mx_scale` of the OCP shared exponent).
pub fn mx_scale(amax: f64, elem_emax: i32) -> u8 {
    let e = if amax > 0.0 {
        amax.log2().floor() as i32 - elem_emax
    } else {
        -127
    };
    (127 + e).clamp(0, 254) as u8
}
