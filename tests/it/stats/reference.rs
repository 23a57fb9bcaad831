//! The float64 reference: counts, sorted values and compensated moments of
//! decoded values, and the checks of every figure, quantile and histogram
//! bin of the library's statistics against it.

use std::collections::HashMap;

use tensorscope::dtype::decode::{BitOrder, code_at, decode_c64, decode_f64, element_count};
use tensorscope::stats::{
    QUANTILES, Scalar, TensorStats, ValueStats, nearest_rank, smallest_normal,
};
use tensorscope::{Dtype, dtype::DtypeKind};

use super::{full, stats_of};

/// The reference figures of a sequence of values.
#[derive(Debug)]
pub(super) struct Reference {
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
pub(super) fn reference_of(dtype: Dtype, bytes: &[u8], order: BitOrder) -> Reference {
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
pub(super) fn check(
    what: &str,
    vs: &ValueStats,
    rf: &Reference,
    bins: usize,
    exact_quantiles: bool,
) {
    check_moments(what, vs, rf);
    check_distribution(what, vs, rf, bins, exact_quantiles, !rf.ints.is_empty());
}

/// Counts, range and moments of `v` against `r`.
pub(super) fn check_moments(what: &str, vs: &ValueStats, rf: &Reference) {
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
    // max|x| / std.
    match (rf.sorted.first(), rf.sorted.last()) {
        (Some(lo), Some(hi)) if rf.std > 0.0 => {
            let want = lo.abs().max(hi.abs()) / rf.std;
            close(
                &format!("{what}: max_abs_over_std"),
                vs.max_abs_over_std,
                want,
                1e-9 * want,
            );
        }
        _ => assert_eq!(vs.max_abs_over_std, None, "{what}: max_abs_over_std"),
    }
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
    // Outliers: |x − mean| > 6·std, with the mean and std reported (and
    // checked above), each value tested in f64.
    let outliers = match (vs.mean, vs.std) {
        (Some(mean), Some(std)) => Some(
            rf.sorted
                .iter()
                .filter(|&&x| (x - mean).abs() > 6.0 * std)
                .count() as u64,
        ),
        _ => None,
    };
    assert_eq!(vs.outliers_6sigma, outliers, "{what}: outliers_6sigma");
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

#[allow(
    clippy::needless_pass_by_value,
    reason = "call sites build the bytes inline"
)]
pub(super) fn check_tensor(dtype: Dtype, shape: &[usize], data: Vec<u8>) -> TensorStats {
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
