//! Statistics against an independent float64 reference computed here from
//! the decoders: sort-based quantiles, compensated sums in sorted order,
//! histogram bins by a linear search over the edges (DESIGN.md,
//! "Statistics semantics").

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tensorscope::dtype::decode::{
    BitOrder, code_at, code_to_f64, decode_c64, decode_f64, element_count,
};
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{
    Detail, QUANTILES, QuantileMode, Scalar, StatsError, StatsOptions, TensorStats, ValueStats,
    nearest_rank, scan, smallest_normal, tensor_stats,
};
use tensorscope::{Dtype, dtype::DtypeKind};

use crate::fixtures::{REF_DTYPES, RefTensor, reference_file, write};

/// A small deterministic generator (xorshift64*), with normal deviates.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

fn ref_dtype(d: Dtype) -> safetensors::Dtype {
    let i = Dtype::ALL.iter().position(|x| *x == d).expect("known");
    REF_DTYPES[i]
}

/// Writes one tensor with the official writer and returns its statistics.
fn stats_of(dtype: Dtype, shape: &[usize], data: Vec<u8>, options: &StatsOptions) -> TensorStats {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = reference_file(
        &[(
            "t".to_owned(),
            RefTensor {
                dtype: ref_dtype(dtype),
                shape: shape.to_vec(),
                data,
            },
        )],
        None,
    );
    let path = write(dir.path(), "t.safetensors", &file);
    let ck = Checkpoint::open(&path).expect("valid");
    let t = ck.find("t").expect("tensor");
    tensor_stats(&ck, t, options, &CancelToken::new(), &Progress::new()).expect("stats")
}

/// The reference figures of a sequence of values.
#[derive(Debug)]
struct Reference {
    count: u64,
    nan: u64,
    pos_inf: u64,
    neg_inf: u64,
    zeros: u64,
    subnormals: u64,
    /// Finite values, ascending, −0 written as +0.
    sorted: Vec<f64>,
    /// Exact integer values, ascending (integer dtypes).
    ints: Vec<i128>,
    /// Smallest normal magnitude: non-zero values below it are subnormal.
    tiny: f64,
    mean: f64,
    std: f64,
    abs_mean: f64,
    l2: f64,
}

/// Kahan–Babuška summation.
fn ksum(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for x in xs {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}

fn reference(values: &[f64], tiny: f64, ints: Vec<i128>) -> Reference {
    let mut r = Reference {
        count: values.len() as u64,
        nan: 0,
        pos_inf: 0,
        neg_inf: 0,
        zeros: 0,
        subnormals: 0,
        sorted: Vec::new(),
        ints,
        tiny,
        mean: f64::NAN,
        std: f64::NAN,
        abs_mean: f64::NAN,
        l2: f64::NAN,
    };
    for &x in values {
        if x.is_nan() {
            r.nan += 1;
        } else if x == f64::INFINITY {
            r.pos_inf += 1;
        } else if x == f64::NEG_INFINITY {
            r.neg_inf += 1;
        } else {
            if x == 0.0 {
                r.zeros += 1;
            } else if x.abs() < tiny {
                r.subnormals += 1;
            }
            r.sorted.push(if x == 0.0 { 0.0 } else { x });
        }
    }
    r.sorted.sort_by(f64::total_cmp);
    r.ints.sort_unstable();
    let n = r.sorted.len() as f64;
    if !r.sorted.is_empty() {
        // Scale by a power of two so that F64 extremes neither overflow nor
        // underflow when squared.
        let big = r.sorted[0].abs().max(r.sorted[r.sorted.len() - 1].abs());
        let scale = if big > 1e100 || (big > 0.0 && big < 1e-100) {
            // 2^−e in two factors: 2^±1024 alone is not an f64.
            let e = -(big.log2().floor() as i32);
            2f64.powi(e / 2) * 2f64.powi(e - e / 2)
        } else {
            1.0
        };
        let xs: Vec<f64> = r.sorted.iter().map(|x| x * scale).collect();
        let mean = ksum(xs.iter().copied()) / n;
        let var = ksum(xs.iter().map(|x| (x - mean) * (x - mean))) / n;
        r.mean = mean / scale;
        r.std = var.sqrt() / scale;
        r.abs_mean = ksum(xs.iter().map(|x| x.abs())) / n / scale;
        r.l2 = ksum(xs.iter().map(|x| x * x)).sqrt() / scale;
    }
    r
}

/// Reference of a tensor of a real dtype, decoded here.
fn reference_of(dtype: Dtype, bytes: &[u8], order: BitOrder) -> Reference {
    let n = element_count(dtype, bytes.len()) as usize;
    let mut values = vec![0.0; n];
    assert_eq!(decode_f64(dtype, bytes, 0, &mut values, order), n);
    let integer = matches!(
        dtype.kind(),
        DtypeKind::Bool | DtypeKind::Signed | DtypeKind::Unsigned
    );
    let ints = if integer {
        (0..n as u64)
            .map(|i| {
                let code = code_at(dtype, bytes, i, order).expect("present");
                match dtype {
                    Dtype::Bool => i128::from(code != 0),
                    Dtype::I8 => i128::from(code as u8 as i8),
                    Dtype::I16 => i128::from(code as u16 as i16),
                    Dtype::I32 => i128::from(code as u32 as i32),
                    Dtype::I64 => i128::from(code as i64),
                    _ => i128::from(code),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let tiny = match dtype {
        Dtype::F64 => f64::MIN_POSITIVE,
        Dtype::F32 | Dtype::BF16 => f64::from(f32::MIN_POSITIVE),
        Dtype::F16 | Dtype::F8E5M2 => 2f64.powi(-14),
        Dtype::F8E4M3 => 2f64.powi(-6),
        Dtype::F8E4M3Fnuz => 2f64.powi(-7),
        Dtype::F8E5M2Fnuz => 2f64.powi(-15),
        Dtype::F6E3M2 => 0.25,
        Dtype::F6E2M3 | Dtype::F4 => 1.0,
        _ => 0.0,
    };
    assert_eq!(smallest_normal(dtype).unwrap_or(0.0), tiny, "{dtype}");
    reference(&values, tiny, ints)
}

fn close(what: &str, got: Option<f64>, want: f64, tol: f64) {
    if want.is_finite() {
        let got = got.unwrap_or_else(|| panic!("{what}: null, want {want:e}"));
        assert!(
            (got - want).abs() <= tol,
            "{what}: {got:e} vs {want:e} (tolerance {tol:e})"
        );
    } else {
        assert_eq!(got, None, "{what}: want null");
    }
}

fn scalar_f64(s: Option<Scalar>) -> Option<f64> {
    s.map(Scalar::to_f64)
}

/// Checks every figure of `v` against `r`.
fn check(what: &str, vs: &ValueStats, rf: &Reference, bins: usize, exact_quantiles: bool) {
    check_moments(what, vs, rf);
    check_distribution(what, vs, rf, bins, exact_quantiles, !rf.ints.is_empty());
}

/// Counts, range and moments of `v` against `r`.
fn check_moments(what: &str, vs: &ValueStats, rf: &Reference) {
    assert_eq!(
        (
            vs.count,
            vs.nan,
            vs.pos_inf,
            vs.neg_inf,
            vs.zeros,
            vs.subnormals
        ),
        (
            rf.count,
            rf.nan,
            rf.pos_inf,
            rf.neg_inf,
            rf.zeros,
            rf.subnormals
        ),
        "{what}: counts"
    );
    assert_eq!(vs.finite, rf.sorted.len() as u64, "{what}: finite");
    let integer = !rf.ints.is_empty();
    // min / max exact.
    if integer {
        assert_eq!(vs.min.map(exact), rf.ints.first().copied(), "{what}: min");
        assert_eq!(vs.max.map(exact), rf.ints.last().copied(), "{what}: max");
    } else {
        assert_eq!(
            scalar_f64(vs.min),
            rf.sorted.first().copied(),
            "{what}: min"
        );
        assert_eq!(scalar_f64(vs.max), rf.sorted.last().copied(), "{what}: max");
    }
    // Moments: 1e-9 · mean(|x|).
    let tol = 1e-9 * rf.abs_mean.abs() + 1e-300;
    close(&format!("{what}: mean"), vs.mean, rf.mean, tol);
    close(&format!("{what}: std"), vs.std, rf.std, tol);
    close(&format!("{what}: abs_mean"), vs.abs_mean, rf.abs_mean, tol);
    close(
        &format!("{what}: l2"),
        vs.l2_norm,
        rf.l2,
        1e-12 * rf.l2.abs() + 1e-300,
    );
}

/// The quantiles and histograms of `v` against `r`.
fn check_distribution(
    what: &str,
    vs: &ValueStats,
    rf: &Reference,
    bins: usize,
    exact_quantiles: bool,
    integer: bool,
) {
    // Quantiles: the value at rank ⌈quantiles·n⌉.
    let quantiles = vs.quantiles.expect("quantiles");
    for (i, (name, permille)) in QUANTILES.iter().enumerate() {
        let want_rank = nearest_rank(*permille, rf.sorted.len() as u64);
        let got = quantiles.0[i];
        match want_rank {
            None => assert_eq!(got, None, "{what}: {name}"),
            Some(rank) => {
                let k = (rank - 1) as usize;
                if integer {
                    assert_eq!(got.map(exact), Some(rf.ints[k]), "{what}: {name}");
                } else if exact_quantiles {
                    assert_eq!(scalar_f64(got), Some(rf.sorted[k]), "{what}: {name}");
                } else {
                    let err = vs.quantile_error.expect("an error bound");
                    let g = scalar_f64(got).expect("value");
                    assert!(
                        (g - rf.sorted[k]).abs() <= err,
                        "{what}: {name} {g} vs {}",
                        rf.sorted[k]
                    );
                }
            }
        }
    }
    // Linear histogram.
    let hist = vs.histogram.as_ref().expect("histogram");
    if rf.sorted.is_empty() {
        assert!(
            hist.edges.is_empty() && hist.counts.is_empty(),
            "{what}: empty histogram"
        );
    } else {
        let (lo, hi) = (rf.sorted[0], rf.sorted[rf.sorted.len() - 1]);
        let nbins = if lo == hi { 1 } else { bins };
        assert_eq!(hist.counts.len(), nbins, "{what}: bins");
        assert_eq!(hist.edges.len(), nbins + 1, "{what}: edges");
        let mut want = vec![0u64; nbins];
        if integer {
            let (a, b) = (rf.ints[0], rf.ints[rf.ints.len() - 1]);
            for &x in &rf.ints {
                let i = if a == b {
                    0
                } else {
                    (((x - a) as u128 * nbins as u128) / (b - a) as u128).min(nbins as u128 - 1)
                        as usize
                };
                want[i] += 1;
            }
        } else {
            // Independent edges: min + i·(max − min)/bins.
            let step = (hi - lo) / nbins as f64;
            if step.is_finite() {
                for i in 1..nbins {
                    assert_eq!(
                        hist.edges[i],
                        (lo + i as f64 * step).min(hi),
                        "{what}: edge {i}"
                    );
                }
            }
            assert_eq!(
                (hist.edges[0], hist.edges[nbins]),
                (lo, hi),
                "{what}: outer edges"
            );
            for &x in &rf.sorted {
                let i = (1..nbins).take_while(|&i| hist.edges[i] <= x).count();
                want[i] += 1;
            }
        }
        assert_eq!(hist.counts, want, "{what}: histogram counts");
    }
    // Log2 histogram.
    let log2 = vs.log2_histogram.as_ref().expect("log2 histogram");
    assert_eq!(
        (log2.zeros, log2.subnormals),
        (rf.zeros, rf.subnormals),
        "{what}: log2 apart"
    );
    let mut want: HashMap<i32, u64> = HashMap::new();
    if integer {
        for &x in rf.ints.iter().filter(|x| **x != 0) {
            *want
                .entry(127 - x.unsigned_abs().leading_zeros() as i32)
                .or_default() += 1;
        }
    } else {
        for &x in rf
            .sorted
            .iter()
            .filter(|x| **x != 0.0 && x.abs() >= rf.tiny)
        {
            let e = x.abs().log2().floor() as i32;
            // log2 may round up just below a power of two.
            let e = if 2f64.powi(e) > x.abs() { e - 1 } else { e };
            *want.entry(e).or_default() += 1;
        }
    }
    let got: HashMap<i32, u64> = log2
        .exponents
        .iter()
        .zip(&log2.counts)
        .filter(|(_, c)| **c > 0)
        .map(|(e, c)| (*e, *c))
        .collect();
    assert_eq!(got, want, "{what}: log2 counts");
    if let (Some(a), Some(b)) = (log2.exponents.first(), log2.exponents.last()) {
        assert_eq!(
            log2.exponents.len() as i32,
            b - a + 1,
            "{what}: consecutive exponents"
        );
    }
}

fn exact(s: Scalar) -> i128 {
    match s {
        Scalar::Int(i) => i128::from(i),
        Scalar::UInt(u) => i128::from(u),
        Scalar::Float(f) => panic!("an integer dtype gave the float {f}"),
    }
}

fn full() -> StatsOptions {
    StatsOptions::default()
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "call sites build the bytes inline"
)]
fn check_tensor(dtype: Dtype, shape: &[usize], data: Vec<u8>) -> TensorStats {
    let s = stats_of(dtype, shape, data.clone(), &full());
    if dtype == Dtype::C64 {
        check_complex(&s, &data);
    } else {
        let r = reference_of(dtype, &data, BitOrder::LsbFirst);
        check(&format!("{dtype} {shape:?}"), &s.values, &r, 256, true);
    }
    s
}

fn check_complex(s: &TensorStats, data: &[u8]) {
    let n = data.len() / 8;
    let (mut re, mut im) = (vec![0.0; n], vec![0.0; n]);
    assert_eq!(decode_c64(data, 0, &mut re, &mut im), n);
    let tiny = f64::from(f32::MIN_POSITIVE);
    let mag: Vec<f64> = re
        .iter()
        .zip(&im)
        .map(|(&r, &i)| {
            if r.is_infinite() || i.is_infinite() {
                f64::INFINITY
            } else {
                (r * r + i * i).sqrt()
            }
        })
        .collect();
    check(
        "C64 |z|",
        &s.values,
        &reference(&mag, tiny, Vec::new()),
        256,
        true,
    );
    let real = s.real.as_ref().expect("real part");
    let imag = s.imag.as_ref().expect("imaginary part");
    check(
        "C64 real",
        real,
        &reference(&re, tiny, Vec::new()),
        256,
        true,
    );
    check(
        "C64 imag",
        imag,
        &reference(&im, tiny, Vec::new()),
        256,
        true,
    );
}

fn f32_bytes(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn f64_bytes(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values.into_iter().flat_map(f64::to_le_bytes).collect()
}

#[test]
fn random_normal_f32_over_several_chunks() {
    // 2.5 M values: more than one 8 MiB chunk, so chunks run in parallel
    // and merge.
    let mut rng = Rng(7);
    let n = 2_500_000;
    let data = f32_bytes((0..n).map(|_| (rng.normal() * 0.02 + 0.001) as f32));
    check_tensor(Dtype::F32, &[n / 500, 500], data);
}

#[test]
fn concentrated_f32_values_take_the_refining_path() {
    // 4.6 M values, 15/16 of them in one 16-bit key bucket: more than pass
    // 2 gathers (2^22), so the exact quantiles come from the refining passes.
    let mut rng = Rng(13);
    let n = 4_600_000;
    let data = f32_bytes((0..n).map(|i| {
        if i % 16 == 0 {
            rng.normal() as f32
        } else {
            1.0 + (i % 7) as f32 * 1e-7
        }
    }));
    check_tensor(Dtype::F32, &[n], data);
}

#[test]
fn random_normal_f64_f16_bf16_and_integers() {
    let mut rng = Rng(11);
    let n = 100_000;
    let normal: Vec<f64> = (0..n).map(|_| rng.normal() * 3.0 - 1.0).collect();
    check_tensor(Dtype::F64, &[n], f64_bytes(normal.iter().copied()));
    let halves: Vec<u8> = normal
        .iter()
        .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
        .collect();
    check_tensor(Dtype::F16, &[n], halves);
    let bhalves: Vec<u8> = normal
        .iter()
        .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
        .collect();
    check_tensor(Dtype::BF16, &[n], bhalves);
    // Small 16-bit tensors take the sorting path.
    let small: Vec<u8> = normal[..1000]
        .iter()
        .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
        .collect();
    check_tensor(Dtype::BF16, &[1000], small);
    let i32s: Vec<u8> = normal
        .iter()
        .flat_map(|&x| ((x * 1e6) as i32).to_le_bytes())
        .collect();
    check_tensor(Dtype::I32, &[n], i32s);
    let u32s: Vec<u8> = (0..n)
        .flat_map(|_| (rng.next_u64() as u32).to_le_bytes())
        .collect();
    check_tensor(Dtype::U32, &[n], u32s);
    let i16s: Vec<u8> = (0..n)
        .flat_map(|_| (rng.next_u64() as i16).to_le_bytes())
        .collect();
    check_tensor(Dtype::I16, &[n], i16s);
}

#[test]
fn all_nan_all_inf_and_mixed() {
    let n = 1000;
    for (name, v) in [
        ("nan", f32::NAN),
        ("inf", f32::INFINITY),
        ("-inf", f32::NEG_INFINITY),
    ] {
        let s = check_tensor(Dtype::F32, &[n], f32_bytes(std::iter::repeat_n(v, n)));
        assert_eq!(s.values.finite, 0, "{name}");
        assert!(s.values.mean.is_none() && s.values.min.is_none(), "{name}");
        let json = serde_json::to_value(&s).expect("json");
        assert!(
            json["mean"].is_null() && json["quantiles"]["p50"].is_null(),
            "{name}"
        );
        assert_eq!(json["histogram"]["counts"], serde_json::json!([]));
        check_tensor(
            Dtype::F64,
            &[n],
            f64_bytes(std::iter::repeat_n(f64::from(v), n)),
        );
        let h = half::f16::from_f32(v).to_le_bytes();
        check_tensor(Dtype::F16, &[n], h.repeat(n));
        let b = half::bf16::from_f32(v).to_le_bytes();
        check_tensor(Dtype::BF16, &[n], b.repeat(n));
    }
    // F8_E4M3 has no infinity: 0x7f and 0xff are its NaNs.
    check_tensor(Dtype::F8E4M3, &[4], vec![0x7f, 0xff, 0x7f, 0xff]);
    let mut rng = Rng(3);
    let mixed: Vec<f32> = (0..50_000)
        .map(|i| match i % 11 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => 0.0,
            4 => -0.0,
            5 => 1e-40,
            6 => -3e-39,
            _ => (rng.normal() * 100.0) as f32,
        })
        .collect();
    let s = check_tensor(Dtype::F32, &[50_000], f32_bytes(mixed.iter().copied()));
    assert!(s.values.nan > 0 && s.values.subnormals > 0);
    let f64s = f64_bytes(mixed.iter().map(|&x| f64::from(x)));
    check_tensor(Dtype::F64, &[50_000], f64s);
}

#[test]
fn empty_scalar_and_one_element_tensors_of_every_dtype() {
    for dtype in Dtype::ALL {
        // Empty.
        let s = stats_of(dtype, &[0, 3], Vec::new(), &full());
        assert_eq!(s.values.count, 0, "{dtype}");
        assert_eq!(s.values.min, None, "{dtype}");
        let json = serde_json::to_value(&s).expect("json");
        for key in ["min", "max", "mean", "std", "abs_mean", "l2_norm"] {
            assert!(json[key].is_null(), "{dtype}: {key}");
        }
        assert_eq!(json["nan"], 0, "{dtype}");
        // A scalar and a one-element tensor (sub-byte dtypes need whole
        // bytes: 2 F4 or 4 F6 elements).
        let (shape, numel): (Vec<usize>, usize) = match dtype.bits() {
            4 => (vec![2], 2),
            6 => (vec![4], 4),
            _ => (vec![], 1),
        };
        let bytes = (numel * dtype.bits() as usize).div_ceil(8);
        let data: Vec<u8> = (0..bytes).map(|i| 0x3c + i as u8).collect();
        let s = check_tensor(dtype, &shape, data.clone());
        assert_eq!(s.values.count, numel as u64);
        if dtype.bits() >= 8 {
            check_tensor(dtype, &[1], data);
        }
    }
}

#[test]
fn denormals_and_max_magnitudes() {
    let subs = [1e-45f32, -1e-45, 5.8e-39, -1.1e-38, 0.0, 1e-40];
    let s = check_tensor(Dtype::F32, &[6], f32_bytes(subs));
    assert_eq!((s.values.subnormals, s.values.zeros), (5, 1));
    let dsubs = [5e-324, -5e-324, 2.2e-308, 1e-310, 0.0];
    check_tensor(Dtype::F64, &[5], f64_bytes(dsubs));
    let hsubs: Vec<u8> = [0x0001u16, 0x8001, 0x03ff, 0x0400, 0x0000]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    let s = check_tensor(Dtype::F16, &[5], hsubs);
    assert_eq!(s.values.subnormals, 3);
    let big = [f32::MAX, -f32::MAX, f32::MAX, 1.0];
    check_tensor(Dtype::F32, &[4], f32_bytes(big));
    let dbig = [f64::MAX, -f64::MAX, f64::MAX, 1.0, f64::MAX];
    let s = check_tensor(Dtype::F64, &[5], f64_bytes(dbig));
    // The L2 norm of these does not fit f64: null, not a wrong number.
    assert!(s.values.std.is_some());
    let hmax: Vec<u8> = [0x7bffu16, 0xfbff]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    check_tensor(Dtype::F16, &[2], hmax);
}

#[test]
fn integer_extremes_are_exact() {
    let u: Vec<u8> = [u64::MAX, 0, (1 << 53) + 1, u64::MAX - 1, 7]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let s = check_tensor(Dtype::U64, &[5], u);
    let json = serde_json::to_string(&s).expect("json");
    assert!(json.contains("\"max\":18446744073709551615"), "{json}");
    assert!(json.contains("9007199254740993"), "{json}");
    let i: Vec<u8> = [i64::MIN, i64::MAX, -1, 0, i64::MIN + 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let s = check_tensor(Dtype::I64, &[5], i);
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["min"], serde_json::json!(i64::MIN));
    assert_eq!(json["max"], serde_json::json!(i64::MAX));
    assert_eq!(json["nan"], 0);
    assert_eq!(json["subnormals"], 0);
    let i32s: Vec<u8> = [i32::MIN, i32::MAX, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    check_tensor(Dtype::I32, &[3], i32s);
    let u32s: Vec<u8> = [u32::MAX, 0, 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    check_tensor(Dtype::U32, &[3], u32s);
}

#[test]
fn every_code_of_the_small_dtypes() {
    // Each code several times, in a scrambled order.
    let codes: Vec<u8> = (0..4 * 256).map(|i| ((i * 167) % 256) as u8).collect();
    for dtype in Dtype::ALL.into_iter().filter(|d| d.bits() == 8) {
        let s = check_tensor(dtype, &[codes.len()], codes.clone());
        if dtype.is_small_float() {
            let ch = s
                .values
                .code_histogram
                .as_ref()
                .expect("per-value histogram");
            assert_eq!(ch.counts.iter().sum::<u64>(), s.values.finite, "{dtype}");
            assert!(ch.values.windows(2).all(|w| w[0] < w[1]), "{dtype}");
            // One bin per representable value, ±0 merged.
            let mut distinct: Vec<f64> = (0..256u64)
                .filter_map(|c| code_to_f64(dtype, c))
                .filter(|v| v.is_finite())
                .map(|v| if v == 0.0 { 0.0 } else { v })
                .collect();
            distinct.sort_by(f64::total_cmp);
            distinct.dedup();
            assert_eq!(ch.values, distinct, "{dtype}");
        } else {
            assert!(s.values.code_histogram.is_none());
        }
    }
    // F4: all 16 codes, twice (low nibble first).
    let f4: Vec<u8> = (0..16u8).map(|i| i | ((15 - i) << 4)).collect();
    let s = check_tensor(Dtype::F4, &[32], f4);
    assert_eq!(s.values.code_histogram.expect("F4").values.len(), 15);
    // F6: all 64 codes, packed in both bit orders.
    for order in BitOrder::ALL {
        let mut bytes = Vec::new();
        for group in (0..64u32).collect::<Vec<_>>().chunks(4) {
            let w = match order {
                BitOrder::LsbFirst => group[0] | group[1] << 6 | group[2] << 12 | group[3] << 18,
                BitOrder::MsbFirst => group[0] << 18 | group[1] << 12 | group[2] << 6 | group[3],
            };
            match order {
                BitOrder::LsbFirst => bytes.extend([w as u8, (w >> 8) as u8, (w >> 16) as u8]),
                BitOrder::MsbFirst => bytes.extend([(w >> 16) as u8, (w >> 8) as u8, w as u8]),
            }
        }
        for dtype in [Dtype::F6E2M3, Dtype::F6E3M2] {
            let options = StatsOptions {
                bit_order: order,
                ..full()
            };
            let s = stats_of(dtype, &[64], bytes.clone(), &options);
            let r = reference_of(dtype, &bytes, order);
            check(&format!("{dtype} {order}"), &s.values, &r, 256, true);
            assert_eq!(s.values.code_histogram.expect("F6").values.len(), 63);
        }
    }
    // Every 16-bit code.
    let all16: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
    for dtype in [Dtype::F16, Dtype::BF16, Dtype::U16, Dtype::I16] {
        check_tensor(dtype, &[65536], all16.clone());
    }
}

#[test]
fn bool_counts_any_non_zero_byte_as_true() {
    let bytes = vec![0, 1, 2, 0xff, 0, 0x80, 1];
    let s = check_tensor(Dtype::Bool, &[7], bytes);
    assert_eq!(s.values.true_count, Some(5));
    assert_eq!(
        (s.values.min, s.values.max),
        (Some(Scalar::Int(0)), Some(Scalar::Int(1)))
    );
    assert_eq!(s.values.zeros, 2);
}

#[test]
fn complex_parts_and_magnitudes() {
    let mut rng = Rng(5);
    let mut values: Vec<f32> = (0..20_000).map(|_| rng.normal() as f32).collect();
    values[10] = f32::NAN;
    values[13] = f32::INFINITY;
    values[14] = f32::NAN; // with an infinite real part: |z| = +Inf
    values[21] = 1e-40;
    values[22] = 0.0;
    values[23] = -0.0;
    let s = check_tensor(Dtype::C64, &[10_000], f32_bytes(values));
    assert_eq!(s.values.pos_inf, 1);
    let json = serde_json::to_value(&s).expect("json");
    assert!(json["real"]["quantiles"]["p50"].is_number());
    assert!(json["imag"]["histogram"]["counts"].is_array());
}

#[test]
fn quantiles_from_the_histogram_are_within_their_bound() {
    let mut rng = Rng(9);
    let data = f32_bytes((0..30_000).map(|_| rng.normal().exp() as f32));
    let options = StatsOptions {
        quantiles: QuantileMode::FromHistogram,
        bins: 64,
        ..full()
    };
    let s = stats_of(Dtype::F32, &[30_000], data.clone(), &options);
    let r = reference_of(Dtype::F32, &data, BitOrder::LsbFirst);
    check("F32 from histogram", &s.values, &r, 64, false);
    assert!(s.values.quantile_error.is_some());
    // Exact mode says nothing about an error.
    let s = stats_of(Dtype::F32, &[30_000], data, &full());
    assert!(s.values.quantile_error.is_none());
}

#[test]
fn moments_only_skips_histograms() {
    let data = f32_bytes([1.0, 2.0, 3.0]);
    let options = StatsOptions {
        detail: Detail::MomentsOnly,
        ..full()
    };
    let s = stats_of(Dtype::F32, &[3], data, &options);
    assert_eq!(s.values.mean, Some(2.0));
    assert!(s.values.histogram.is_none() && s.values.quantiles.is_none());
    let s = stats_of(Dtype::BF16, &[2], vec![0x80, 0x3f, 0, 0x40], &options);
    assert_eq!(s.values.mean, Some(1.5));
    assert!(s.values.log2_histogram.is_none());
}

/// `values` rounded to F32, F16 and BF16, as tensor bytes.
fn wide_encodings(values: &[f64]) -> [(Dtype, Vec<u8>); 3] {
    [
        (Dtype::F32, f32_bytes(values.iter().map(|&x| x as f32))),
        (
            Dtype::F16,
            values
                .iter()
                .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
                .collect(),
        ),
        (
            Dtype::BF16,
            values
                .iter()
                .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
                .collect(),
        ),
    ]
}

/// Statistics without histograms take the fused scan for F32, F16 and BF16
/// (with its vector copy on CPUs that have one): the same counts, range and
/// moments as the reference, with NaN, infinities, zeros and subnormals
/// spread over several blocks, and in blocks of their own.
#[test]
fn moments_only_scans_match_the_reference() {
    let mut rng = Rng(21);
    let n = 3 * 2048 + 13;
    let mut values: Vec<f64> = (0..n)
        .map(|i| match rng.next_u64() % 97 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => 0.0,
            4 => -0.0,
            5 => 3e-39 * (i % 7) as f64,
            6 => 3e-6 * rng.normal(),
            _ => rng.normal() * 0.05 + 0.01,
        })
        .collect();
    // A block with no special value at all, and one of NaN only.
    values.extend((0..2048).map(|i| 1.0 + f64::from(i) / 4096.0));
    values.extend((0..2048).map(|_| f64::NAN));
    let options = StatsOptions {
        detail: Detail::MomentsOnly,
        ..full()
    };
    let len = values.len();
    let encodings = wide_encodings(&values);
    for (dtype, data) in encodings {
        let r = reference_of(dtype, &data, BitOrder::LsbFirst);
        let s = stats_of(dtype, &[len], data.clone(), &options);
        check_moments(&format!("{dtype} moments only"), &s.values, &r);
        assert!(s.values.histogram.is_none());
        // The full path agrees on every count and on the range.
        let f = stats_of(dtype, &[len], data, &full());
        assert_eq!(
            (
                s.values.zeros,
                s.values.subnormals,
                s.values.min,
                s.values.max
            ),
            (
                f.values.zeros,
                f.values.subnormals,
                f.values.min,
                f.values.max
            ),
            "{dtype}"
        );
    }
}

/// A header whose length is not a multiple of 4 puts every tensor's bytes
/// at an odd address: the in-place kernels (and their vector loads) must
/// give the same figures there.
#[test]
fn tensors_at_unaligned_addresses() {
    let mut rng = Rng(5);
    let n = 2 * 2048 + 7;
    let values: Vec<f64> = (0..n).map(|_| rng.normal() * 0.1).collect();
    let encodings = wide_encodings(&values);
    for (dtype, data) in encodings {
        let info = tensorscope::format::TensorInfo::new("t".into(), dtype, vec![n as u64], 0)
            .expect("whole bytes");
        let mut shifted = vec![0u8; data.len() + 3];
        for options in [
            full(),
            StatsOptions {
                detail: Detail::MomentsOnly,
                ..full()
            },
        ] {
            let run = |bytes: &[u8]| {
                tensorscope::stats::stats_of(
                    &info,
                    bytes,
                    &options,
                    &CancelToken::new(),
                    &Progress::new(),
                )
                .expect("not cancelled")
                .values
            };
            let aligned = run(&data);
            for offset in 1..=3 {
                shifted[offset..offset + data.len()].copy_from_slice(&data);
                let odd = run(&shifted[offset..offset + data.len()]);
                assert_eq!(
                    format!("{odd:?}"),
                    format!("{aligned:?}"),
                    "{dtype} +{offset}"
                );
            }
        }
    }
}

#[test]
fn a_scan_summarises_and_can_be_cancelled_mid_tensor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big_n = 12 << 20; // 48 MiB of F32: six chunks
    let big = RefTensor {
        dtype: safetensors::Dtype::F32,
        shape: vec![big_n],
        data: f32_bytes((0..big_n).map(|i| (i % 1000) as f32 - 500.0)),
    };
    let zeros = RefTensor {
        dtype: safetensors::Dtype::BF16,
        shape: vec![8],
        data: vec![0; 16],
    };
    let nan = RefTensor {
        dtype: safetensors::Dtype::F16,
        shape: vec![2],
        data: vec![0x00, 0x7e, 0x00, 0x3c],
    };
    let file = reference_file(
        &[
            ("big".to_owned(), big),
            ("zeros".to_owned(), zeros),
            ("nan".to_owned(), nan),
        ],
        Some(HashMap::from([("format".to_owned(), "pt".to_owned())])),
    );
    let path = write(dir.path(), "m.safetensors", &file);
    let ck = Checkpoint::open(&path).expect("valid");
    let progress = Progress::new();
    let report = scan(&ck, ck.tensors(), &full(), &CancelToken::new(), &progress).expect("scan");
    assert_eq!(report.tensors.len(), 3);
    assert_eq!(progress.done(), progress.total());
    assert_eq!(report.summary.nonfinite_tensors, ["nan"]);
    assert_eq!(report.summary.all_zero_tensors, ["zeros"]);
    assert_eq!(report.summary.max_abs, Some(Scalar::Float(500.0)));
    assert_eq!(report.summary.max_abs_tensor.as_deref(), Some("big"));

    // Cancel as soon as the first chunk of "big" is done.
    let cancel = CancelToken::new();
    let trigger = cancel.clone();
    let updates = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&updates);
    let progress = Progress::with_notify(move || {
        // The first update sets the total; the second is a finished chunk.
        if seen.fetch_add(1, Ordering::SeqCst) == 1 {
            trigger.cancel();
        }
    });
    let big = ck.find("big").expect("big");
    let result = tensor_stats(&ck, big, &full(), &cancel, &progress);
    assert!(matches!(result, Err(StatsError::Cancelled)), "{result:?}");
    assert!(
        progress.done() > 0 && progress.done() < progress.total(),
        "{progress:?}"
    );
}

#[test]
fn a_file_that_changed_since_it_was_opened_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tensor = RefTensor {
        dtype: safetensors::Dtype::F32,
        shape: vec![1024],
        data: f32_bytes((0..1024).map(|i| i as f32)),
    };
    let file = reference_file(&[("t".to_owned(), tensor)], None);
    let path = write(dir.path(), "m.safetensors", &file);
    let ck = Checkpoint::open(&path).expect("valid");
    // Truncate the mapped file: reading its pages now would raise SIGBUS.
    std::fs::write(&path, &file[..100]).expect("truncate");
    let result = scan(
        &ck,
        ck.tensors(),
        &full(),
        &CancelToken::new(),
        &Progress::new(),
    );
    match result {
        Err(StatsError::Load(e)) => assert_eq!(e.kind(), "Changed"),
        other => panic!("expected a Changed error, got {other:?}"),
    }
}

fn run_cli(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorscope"))
        .args(args)
        .output()
        .expect("run tensorscope");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn cli_json(path: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["stats".as_ref(), path.as_os_str(), "--json".as_ref()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    run_cli(&args)
}

#[test]
fn cli_stats_json_and_exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "m.safetensors", &crate::fixtures::small_model());
    let (code, doc, stderr) = cli_json(&path, &[]);
    assert_eq!(code, 0, "{stderr}");
    let tensors = doc["tensors"].as_array().expect("tensors");
    assert_eq!(tensors.len(), 6);
    let t = &tensors[0];
    for key in [
        "name",
        "dtype",
        "count",
        "nan",
        "pos_inf",
        "neg_inf",
        "zeros",
        "subnormals",
        "min",
        "max",
        "mean",
        "std",
        "abs_mean",
        "l2_norm",
        "quantiles",
        "histogram",
        "log2_histogram",
    ] {
        assert!(t.get(key).is_some(), "{key} missing: {t}");
    }
    for key in [
        "p0_1", "p1", "p5", "p25", "p50", "p75", "p95", "p99", "p99_9",
    ] {
        assert!(t["quantiles"].get(key).is_some(), "{key}");
    }
    for key in ["edges", "counts"] {
        assert!(t["histogram"][key].is_array());
    }
    for key in ["exponents", "counts", "zeros", "subnormals"] {
        assert!(t["log2_histogram"].get(key).is_some(), "{key}");
    }
    let packed = tensors.iter().find(|t| t["name"] == "packed").expect("F4");
    assert!(packed["code_histogram"]["values"].is_array());
    let empty = tensors
        .iter()
        .find(|t| t["name"] == "empty")
        .expect("empty");
    assert_eq!(empty["count"], 0);
    assert!(empty["min"].is_null());
    for key in [
        "tensor_count",
        "nonfinite_tensors",
        "all_zero_tensors",
        "max_abs",
        "max_abs_tensor",
    ] {
        assert!(doc["summary"].get(key).is_some(), "{key}");
    }

    // Selection: exact names and a regex.
    let (code, doc, _) = cli_json(
        &path,
        &[
            "--tensor",
            "scale",
            "--tensor-regex",
            "^layers\\.",
            "--bins",
            "8",
        ],
    );
    assert_eq!(code, 0);
    let names: Vec<&str> = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    // File (offset) order: the writer puts F64 first.
    assert_eq!(names, ["scale", "layers.0.attn.q", "layers.0.norm"]);
    assert!(
        doc["tensors"][0]["histogram"]["counts"]
            .as_array()
            .expect("counts")
            .len()
            <= 8
    );

    // An unknown tensor, a bad regex, an invalid file, a missing file: 2.
    let (code, doc, _) = cli_json(&path, &["--tensor", "nope"]);
    assert_eq!(
        (code, doc["error"]["kind"].as_str()),
        (2, Some("UnknownTensor"))
    );
    let (code, doc, _) = cli_json(&path, &["--tensor-regex", "("]);
    assert_eq!((code, doc["error"]["kind"].as_str()), (2, Some("Usage")));
    let bad = write(
        dir.path(),
        "bad.safetensors",
        &crate::fixtures::with_header(
            r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
            4,
        ),
    );
    let (code, doc, _) = cli_json(&bad, &[]);
    assert_eq!(
        (code, doc["error"]["kind"].as_str()),
        (2, Some("TensorInvalidInfo"))
    );
    let (code, doc, _) = cli_json(&dir.path().join("missing.safetensors"), &[]);
    assert_eq!((code, doc["error"]["kind"].as_str()), (2, Some("Io")));
    let (code, _, _) = run_cli(&[
        "stats".as_ref(),
        path.as_os_str(),
        "--bins".as_ref(),
        "0".as_ref(),
    ]);
    assert_eq!(code, 2);

    // Human output ends with the summary.
    let (code, _, _) = run_cli(&["stats".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0);
}

#[test]
fn cli_stats_on_a_sharded_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shard = |name: &str, value: f32| {
        reference_file(
            &[(
                name.to_owned(),
                RefTensor {
                    dtype: safetensors::Dtype::F32,
                    shape: vec![2],
                    data: f32_bytes([value, f32::NAN]),
                },
            )],
            None,
        )
    };
    let s1 = "model-00001-of-00002.safetensors";
    let s2 = "model-00002-of-00002.safetensors";
    write(dir.path(), s1, &shard("a", 1.0));
    write(dir.path(), s2, &shard("b", -7.0));
    let index =
        serde_json::json!({"metadata": {"total_size": 16}, "weight_map": {"a": s1, "b": s2}});
    write(
        dir.path(),
        "model.safetensors.index.json",
        index.to_string().as_bytes(),
    );
    let (code, doc, stderr) = cli_json(dir.path(), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(doc["tensors"][1]["shard"], s2);
    assert_eq!(doc["summary"]["max_abs"], 7.0);
    assert_eq!(doc["summary"]["max_abs_tensor"], "b");
    assert_eq!(
        doc["summary"]["nonfinite_tensors"],
        serde_json::json!(["a", "b"])
    );
}
