//! Statistics of realistic data: random normal values over several chunks
//! and in every wide dtype, concentrated values, complex numbers, and
//! quantiles estimated from the histogram within their bound.

use tensorscope::Dtype;
use tensorscope::dtype::decode::BitOrder;
use tensorscope::stats::{QuantileMode, StatsOptions};

use super::reference::{check, check_tensor, reference_of};
use super::{Rng, f32_bytes, f64_bytes, full, stats_of};

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

/// The two-pass scan, F32 and F64, with quantiles read from the histogram:
/// the same histogram as the exact mode's, the quantiles the middles of the
/// bins that hold the exact ones.
#[test]
fn quantiles_from_the_histogram_of_the_two_pass_scan() {
    let mut rng = Rng(19);
    let options = StatsOptions {
        quantiles: QuantileMode::FromHistogram,
        bins: 64,
        ..full()
    };
    let values: Vec<f64> = (0..200_000).map(|_| rng.normal().exp()).collect();
    for (dtype, data) in [
        (Dtype::F32, f32_bytes(values.iter().map(|&x| x as f32))),
        (Dtype::F64, f64_bytes(values.iter().copied())),
    ] {
        let got = stats_of(dtype, &[200_000], data.clone(), &options);
        let reference = reference_of(dtype, &data, BitOrder::LsbFirst);
        check("from histogram", &got.values, &reference, 64, false);
        let exact = stats_of(
            dtype,
            &[200_000],
            data,
            &StatsOptions { bins: 64, ..full() },
        );
        let hist = got.values.histogram.as_ref().expect("histogram");
        assert_eq!(Some(hist), exact.values.histogram.as_ref(), "{dtype}");
        let error = got.values.quantile_error.expect("bounded");
        let (read, exact_q) = (
            got.values.quantiles.as_ref().expect("quantiles"),
            exact.values.quantiles.as_ref().expect("quantiles"),
        );
        for (q_read, q_exact) in read.0.iter().zip(&exact_q.0) {
            let (Some(q_read), Some(q_exact)) = (q_read, q_exact) else {
                panic!("{dtype}: a quantile is missing");
            };
            let (q_read, q_exact) = (q_read.to_f64(), q_exact.to_f64());
            assert!(
                (q_read - q_exact).abs() <= error,
                "{dtype}: {q_read} vs {q_exact}, bound {error}"
            );
            let bin = (hist
                .edges
                .partition_point(|&e| e <= q_exact)
                .saturating_sub(1))
            .min(hist.counts.len() - 1);
            let mid = hist.edges[bin] * 0.5 + hist.edges[bin + 1] * 0.5;
            assert_eq!(
                q_read, mid,
                "{dtype}: the middle of the bin holding {q_exact}"
            );
        }
    }
}

/// Heavy tails: many values beyond 6σ and a continuous density across the
/// thresholds, in every path that counts them (the counted F32 and F64
/// scans, the sorting one of small tensors, 16-bit codes, integers, the
/// histogram-quantile mode); each against the f64 reference.
#[test]
fn outliers_beyond_six_sigma_in_every_path() {
    let mut rng = Rng(21);
    let n = 300_000;
    let tails: Vec<f64> = (0..n)
        .map(|_| rng.normal() * 0.02 / rng.uniform().max(1e-4).sqrt())
        .collect();
    let f32s = f32_bytes(tails.iter().map(|&x| x as f32));
    let s = check_tensor(Dtype::F32, &[n], f32s.clone());
    let beyond = s.values.outliers_6sigma.expect("counted");
    assert!(beyond > 100, "heavy tails: {beyond} beyond 6σ");
    assert!(s.values.max_abs_over_std.is_some_and(|r| r > 6.0));
    check_tensor(Dtype::F32, &[20_000], f32s[..80_000].to_vec());
    check_tensor(Dtype::F64, &[n], f64_bytes(tails.iter().copied()));
    let halves: Vec<u8> = tails
        .iter()
        .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
        .collect();
    check_tensor(Dtype::F16, &[n], halves);
    let bhalves: Vec<u8> = tails
        .iter()
        .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
        .collect();
    check_tensor(Dtype::BF16, &[n], bhalves);
    let i32s: Vec<u8> = tails
        .iter()
        .flat_map(|&x| ((x * 1e5) as i32).to_le_bytes())
        .collect();
    check_tensor(Dtype::I32, &[n], i32s);
    let options = StatsOptions {
        quantiles: QuantileMode::FromHistogram,
        ..full()
    };
    let s = stats_of(Dtype::F32, &[n], f32s.clone(), &options);
    let r = reference_of(Dtype::F32, &f32s, BitOrder::LsbFirst);
    check("F32 from histogram", &s.values, &r, 256, false);
    // One pass cannot know the mean first: no count, the ratio stays.
    let options = StatsOptions {
        detail: tensorscope::stats::Detail::MomentsOnly,
        ..full()
    };
    let s = stats_of(Dtype::F32, &[n], f32s.clone(), &options);
    assert_eq!(s.values.outliers_6sigma, None);
    assert!(s.values.max_abs_over_std.is_some());
    // The explorer's scan: moments and the count, without histograms, the
    // same count as the full scan's in every dtype.
    let quick = StatsOptions {
        detail: tensorscope::stats::Detail::Outliers,
        ..full()
    };
    let i32s: Vec<u8> = tails
        .iter()
        .flat_map(|&x| ((x * 1e5) as i32).to_le_bytes())
        .collect();
    let f16s: Vec<u8> = tails
        .iter()
        .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
        .collect();
    let u8s: Vec<u8> = tails.iter().map(|&x| (x * 50.0 + 128.0) as u8).collect();
    for (dtype, data) in [
        (Dtype::F32, f32s),
        (Dtype::F64, f64_bytes(tails.iter().copied())),
        (Dtype::F16, f16s),
        (Dtype::I32, i32s),
        (Dtype::U8, u8s),
    ] {
        let fast = stats_of(dtype, &[n], data.clone(), &quick);
        let whole = stats_of(dtype, &[n], data, &full());
        assert!(fast.values.histogram.is_none(), "{dtype}");
        assert_eq!(
            fast.values.outliers_6sigma, whole.values.outliers_6sigma,
            "{dtype}"
        );
        assert!(
            whole.values.outliers_6sigma.is_some_and(|o| o > 0),
            "{dtype}"
        );
    }
}
