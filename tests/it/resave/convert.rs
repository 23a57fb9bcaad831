//! Dtype conversions against a reference computed here: a nearest-value
//! search over every code of F16, BF16 and the F8 formats (the committed
//! ml_dtypes tables), for files and for arbitrary f64 inputs.

use std::collections::HashMap;
use std::sync::LazyLock;

use half::{bf16, f16};
use proptest::prelude::*;
use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::dtype::convert::{ConversionCounts, Converter, Overflow};
use tensorscope::format::Checkpoint;
use tensorscope::resave::ResaveOptions;

use super::{f32_bytes, f64_bytes, official, ours, run, t};
use crate::fixtures::{reference_file, write};

/// Nearest grid point to |v| by search, ties to the even code. `grid` is
/// (value, code) for every finite non-negative code in increasing order,
/// then the first point past the grid (Inf, or E4M3's missing 480).
fn nearest(v: f64, grid: &[(f64, u32)]) -> (u32, bool) {
    let magnitude = v.abs();
    let above = grid.partition_point(|&(value, _)| value < magnitude);
    let below = above.checked_sub(1).and_then(|k| grid.get(k));
    let pick = match (below, grid.get(above)) {
        (_, Some(&(value, code))) if value == magnitude => code,
        (Some(&(low, low_code)), Some(&(high, high_code))) => {
            let (to_low, to_high) = (magnitude - low, high - magnitude);
            if to_low < to_high || (to_low == to_high && low_code % 2 == 0) {
                low_code
            } else {
                high_code
            }
        }
        (Some(&(_, code)), None) | (None, Some(&(_, code))) => code,
        (None, None) => 0,
    };
    let beyond = grid.last().map(|&(_, code)| code) == Some(pick);
    (pick, beyond)
}

fn half_grid(decode: impl Fn(u16) -> f64, max_code: u16, beyond: (f64, u32)) -> Vec<(f64, u32)> {
    let mut g: Vec<(f64, u32)> = (0..=max_code).map(|c| (decode(c), u32::from(c))).collect();
    g.push(beyond);
    g
}

static F16_GRID: LazyLock<Vec<(f64, u32)>> =
    LazyLock::new(|| half_grid(|c| f16::from_bits(c).to_f64(), 0x7bff, (65536.0, 0x7c00)));
static BF16_GRID: LazyLock<Vec<(f64, u32)>> = LazyLock::new(|| {
    half_grid(
        |c| bf16::from_bits(c).to_f64(),
        0x7f7f,
        (2f64.powi(128), 0x7f80),
    )
});

fn f16_grid() -> &'static [(f64, u32)] {
    &F16_GRID
}

fn bf16_grid() -> &'static [(f64, u32)] {
    &BF16_GRID
}

/// The ml_dtypes values of an 8-bit float, from the committed tables.
fn ml_dtypes_table(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.split_whitespace();
            let _code = cols.next();
            f64::from_bits(u64::from_str_radix(cols.next().expect("bits"), 16).expect("hex"))
        })
        .collect()
}

static E4M3_GRID: LazyLock<(Vec<(f64, u32)>, u8)> = LazyLock::new(|| build_f8_grid(Dtype::F8E4M3));
static E5M2_GRID: LazyLock<(Vec<(f64, u32)>, u8)> = LazyLock::new(|| build_f8_grid(Dtype::F8E5M2));

fn f8_grid(dtype: Dtype) -> (&'static [(f64, u32)], u8) {
    let g = if dtype == Dtype::F8E4M3 {
        &*E4M3_GRID
    } else {
        &*E5M2_GRID
    };
    (&g.0, g.1)
}

fn build_f8_grid(dtype: Dtype) -> (Vec<(f64, u32)>, u8) {
    let (text, max_code, beyond) = if dtype == Dtype::F8E4M3 {
        (
            include_str!("../../data/dtype_tables/F8_E4M3.txt"),
            0x7eu32,
            (480.0, 0x7f),
        )
    } else {
        (
            include_str!("../../data/dtype_tables/F8_E5M2.txt"),
            0x7b,
            (65536.0, 0x7c),
        )
    };
    let values = ml_dtypes_table(text);
    let mut g: Vec<(f64, u32)> = (0..=max_code).map(|c| (values[c as usize], c)).collect();
    g.push(beyond);
    (g, max_code as u8)
}

/// The reference code of one value for an IEEE 16-bit target.
fn reference_16(v: f64, grid: &[(f64, u32)], inf: u16, nan: u16) -> u16 {
    let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
    if v.is_nan() {
        return sign | nan;
    }
    if v.is_infinite() {
        return sign | inf;
    }
    let (code, _) = nearest(v, grid);
    sign | code as u16
}

/// The reference code of one value for an F8 target, and whether it
/// overflowed (saturated or became NaN).
fn reference_f8(v: f64, dtype: Dtype, overflow: Overflow) -> (u8, bool) {
    let (grid, max_code) = f8_grid(dtype);
    let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
    let nan = if dtype == Dtype::F8E4M3 { 0x7f } else { 0x7e };
    if v.is_nan() {
        return (sign | nan, false);
    }
    let over = |sign: u8| match overflow {
        Overflow::Saturate => (sign | max_code, true),
        Overflow::Nan => (sign | nan, true),
    };
    if v.is_infinite() {
        return if dtype == Dtype::F8E5M2 {
            (sign | 0x7c, false)
        } else {
            over(sign)
        };
    }
    let (code, beyond) = nearest(v, grid);
    if beyond {
        over(sign)
    } else {
        (sign | code as u8, false)
    }
}

fn convert(to: Dtype, overflow: Overflow, values: &[f64]) -> (Vec<u8>, ConversionCounts) {
    let mut out = Vec::new();
    let mut counts = ConversionCounts::default();
    Converter::new(to, overflow)
        .expect("target")
        .convert(values, &mut out, &mut counts);
    (out, counts)
}

/// F64 values whose correct rounding differs from rounding through f32.
fn double_rounding_f64() -> Vec<f64> {
    let p = |e: i32| 2f64.powi(e);
    vec![
        1.0 + p(-11) + p(-40),
        1.0 + p(-11) - p(-40),
        -(1.0 + p(-11) + p(-40)),
        1.0 + p(-8) + p(-40),
        3.0 * (1.0 + p(-8) + p(-35)),
        p(-24) + p(-60),
        p(-25) + p(-60),
        p(-25),
        65520.0 - p(-30),
        65520.0,
        1e300,
        -1e-300,
        f64::MIN_POSITIVE / 4.0,
        0.1,
        1.0 / 3.0,
        f64::NAN,
        f64::NEG_INFINITY,
    ]
}

#[test]
fn f64_converts_directly_to_f16_and_bf16() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut values = double_rounding_f64();
    let mut x = 1.234_567_890_123e-9_f64;
    while values.len() < 400 {
        values.push(x);
        values.push(-x * 1.000_000_1);
        x *= 1.37;
    }
    let tensors = vec![(
        "x".to_owned(),
        t(RefDtype::F64, &[values.len()], f64_bytes(&values)),
    )];
    let src = write(
        dir.path(),
        "f64.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    for (to, grid, inf, nan) in [
        (Dtype::F16, f16_grid(), 0x7c00u16, 0x7e00u16),
        (Dtype::BF16, bf16_grid(), 0x7f80, 0x7fc0),
    ] {
        let out = dir.path().join(format!("{to}.safetensors"));
        let opts = ResaveOptions {
            conversions: vec![(Dtype::F64, to)],
            ..ResaveOptions::default()
        };
        let report = run(&ck, &out, &opts).expect("resave");
        let (meta, back) = official(&std::fs::read(&out).expect("read"));
        assert_eq!(meta, None, "no metadata in, none out");
        assert_eq!(back, ours(&out));
        let got = &back["x"];
        assert_eq!(got.dtype, to.name());
        let expected: Vec<u8> = values
            .iter()
            .flat_map(|&v| reference_16(v, grid, inf, nan).to_le_bytes())
            .collect();
        assert_eq!(got.data, expected, "{to}");
        let overflowed = values
            .iter()
            .zip(expected.chunks_exact(2))
            .filter(|(v, c)| v.is_finite() && u16::from_le_bytes([c[0], c[1]]) & 0x7fff == inf)
            .count();
        assert_eq!(report.conversion_totals.overflow_inf, overflowed as u64);
        assert!(overflowed > 0);
    }
    // The first value is where rounding through f32 goes wrong: check the
    // direct result explicitly.
    let (b, _) = convert(Dtype::F16, Overflow::Saturate, &values[..1]);
    assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3c01);
    let (b, _) = convert(Dtype::BF16, Overflow::Saturate, &values[3..4]);
    assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3f81);
}

#[test]
fn every_source_dtype_converts_to_f8_like_a_table_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut base: Vec<f64> = vec![
        0.0,
        -0.0,
        448.0,
        464.0,
        465.0,
        -470.0,
        480.0,
        57344.0,
        61439.0,
        61440.0,
        1e9,
        2f64.powi(-9),
        2f64.powi(-10),
        3.0 * 2f64.powi(-11),
        2f64.powi(-16),
        2f64.powi(-17),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.3,
        1.0625,
        1.1875,
    ];
    let mut x = 1.1e-6;
    while base.len() < 300 {
        base.push(x);
        base.push(-x * 1.01);
        x *= 1.21;
    }
    // Each source dtype holds the values it can represent (rounded to it
    // first), so the reference conversion starts from the stored value.
    let f32s: Vec<f32> = base.iter().map(|&v| v as f32).collect();
    let f16s: Vec<f16> = base.iter().map(|&v| f16::from_f32(v as f32)).collect();
    let bf16s: Vec<bf16> = base.iter().map(|&v| bf16::from_f32(v as f32)).collect();
    let n = base.len();
    let tensors = vec![
        ("a64".to_owned(), t(RefDtype::F64, &[n], f64_bytes(&base))),
        ("b32".to_owned(), t(RefDtype::F32, &[n], f32_bytes(&f32s))),
        (
            "c16".to_owned(),
            t(
                RefDtype::F16,
                &[n],
                f16s.iter().flat_map(|h| h.to_le_bytes()).collect(),
            ),
        ),
        (
            "dbf".to_owned(),
            t(
                RefDtype::BF16,
                &[n],
                bf16s.iter().flat_map(|h| h.to_le_bytes()).collect(),
            ),
        ),
    ];
    let stored: HashMap<&str, Vec<f64>> = HashMap::from([
        ("a64", base.clone()),
        ("b32", f32s.iter().map(|&v| f64::from(v)).collect()),
        ("c16", f16s.iter().map(|v| v.to_f64()).collect()),
        ("dbf", bf16s.iter().map(|v| v.to_f64()).collect()),
    ]);
    let src = write(
        dir.path(),
        "src.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    for to in [Dtype::F8E4M3, Dtype::F8E5M2] {
        for overflow in [Overflow::Saturate, Overflow::Nan] {
            let out = dir.path().join(format!("{to}-{overflow:?}.safetensors"));
            let opts = ResaveOptions {
                conversions: [Dtype::F64, Dtype::F32, Dtype::F16, Dtype::BF16]
                    .into_iter()
                    .map(|from| (from, to))
                    .collect(),
                overflow,
                ..ResaveOptions::default()
            };
            let report = run(&ck, &out, &opts).expect("resave");
            let (_, back) = official(&std::fs::read(&out).expect("read"));
            assert_eq!(back, ours(&out));
            for c in &report.conversions {
                let values = &stored[c.name.as_str()];
                let mut expected = Vec::with_capacity(values.len());
                let mut overflowed = 0u64;
                for &v in values {
                    let (code, over) = reference_f8(v, to, overflow);
                    expected.push(code);
                    overflowed += u64::from(over);
                }
                assert_eq!(
                    back[&c.name].data, expected,
                    "{} to {to} {overflow:?}",
                    c.name
                );
                assert_eq!(back[&c.name].dtype, to.name());
                match overflow {
                    Overflow::Saturate => {
                        assert_eq!(c.counts.saturated, overflowed);
                        assert_eq!(c.counts.overflow_nan, 0);
                    }
                    Overflow::Nan => {
                        assert_eq!(c.counts.overflow_nan, overflowed);
                        assert_eq!(c.counts.saturated, 0);
                    }
                }
                assert!(overflowed > 0, "{}: the values include overflows", c.name);
                assert_eq!(c.counts.nan, 1);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_f64_rounds_like_the_search(bits in any::<u64>()) {
        let v = f64::from_bits(bits);
        let (b, _) = convert(Dtype::F16, Overflow::Saturate, &[v]);
        let got = u16::from_le_bytes([b[0], b[1]]);
        if v.is_nan() {
            prop_assert_eq!(got & 0x7c00, 0x7c00);
            prop_assert!(got & 0x3ff != 0);
        } else {
            prop_assert_eq!(got, reference_16(v, f16_grid(), 0x7c00, 0x7e00));
        }
        let (b, _) = convert(Dtype::BF16, Overflow::Saturate, &[v]);
        let got = u16::from_le_bytes([b[0], b[1]]);
        if !v.is_nan() {
            prop_assert_eq!(got, reference_16(v, bf16_grid(), 0x7f80, 0x7fc0));
        }
        for to in [Dtype::F8E4M3, Dtype::F8E5M2] {
            for overflow in [Overflow::Saturate, Overflow::Nan] {
                let (b, counts) = convert(to, overflow, &[v]);
                let (code, over) = reference_f8(v, to, overflow);
                prop_assert_eq!(b[0], code);
                prop_assert_eq!(counts.saturated + counts.overflow_nan, u64::from(over));
            }
        }
    }

    #[test]
    fn small_magnitudes_round_like_the_search(m in 0u64..(1 << 52), e in -30i32..20, neg in any::<bool>()) {
        // Dense coverage of the F8 and F16 ranges (random bits mostly miss them).
        let v = f64::from_bits((((e + 1023) as u64) << 52) | m) * if neg { -1.0 } else { 1.0 };
        for to in [Dtype::F8E4M3, Dtype::F8E5M2] {
            let (b, _) = convert(to, Overflow::Saturate, &[v]);
            prop_assert_eq!(b[0], reference_f8(v, to, Overflow::Saturate).0);
        }
        let (b, _) = convert(Dtype::F16, Overflow::Saturate, &[v]);
        prop_assert_eq!(u16::from_le_bytes([b[0], b[1]]), reference_16(v, f16_grid(), 0x7c00, 0x7e00));
    }
}
