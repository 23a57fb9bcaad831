//! Edge values: all NaN or Inf, empty and one-element tensors of every
//! dtype, subnormals and extremes, exact integers, every code of the small
//! dtypes, and booleans.

use tensorscope::Dtype;
use tensorscope::dtype::decode::{BitOrder, code_to_f64};
use tensorscope::stats::{Scalar, StatsOptions};

use super::reference::{check, check_tensor, reference_of};
use super::{Rng, f32_bytes, f64_bytes, full, stats_of};

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
