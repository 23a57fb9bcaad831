//! The quantization layer against checkpoints made by the real libraries
//! (`tests/data/quant-samples/`, copied from the project's shared samples;
//! each folder's MANIFEST.json says how it was made): every logical tensor
//! is found with its scheme and parameters, and decodes to the library's
//! own dequantized result (`oracle.safetensors`).

use std::path::PathBuf;

use tensorscope::Checkpoint;
use tensorscope::dtype::Dtype;
use tensorscope::quant::{self, Dequantizer, Status};

pub fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/quant-samples")
        .join(name)
}

pub const SAMPLES: [&str; 9] = [
    "awq_gemm_w4_g128",
    "bnb_nf4",
    "ct_fp8_channel_dynamic",
    "ct_nvfp4a16",
    "ct_w4a16_group128_sym",
    "fp8_block128_deepseek",
    "gptq_w4_g128_sym_actorder_v1",
    "mlx_affine_4bit_g64",
    "mxfp4_gptoss",
];

/// The oracle's F32 values of `name`.
pub fn oracle_values(ck: &Checkpoint, name: &str) -> Option<Vec<f32>> {
    let t = ck.find(name)?;
    assert_eq!(ck.info(t)?.dtype(), Dtype::F32);
    Some(
        ck.bytes(t)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// One unit in the last place of `dtype` at `x`.
pub fn ulp(dtype: Dtype, x: f32) -> f32 {
    let bits = match dtype {
        Dtype::F16 => 10,
        Dtype::BF16 => 7,
        _ => 23,
    };
    let e = if x == 0.0 {
        -14
    } else {
        x.abs().log2().floor() as i32
    };
    2f32.powi(e.max(-24) - bits)
}

fn check_sample(name: &str) -> (usize, f32) {
    let dir = sample(name);
    let ck = Checkpoint::open(&dir.join("model.safetensors")).expect("open sample");
    let oracle = Checkpoint::open(&dir.join("oracle.safetensors")).expect("open oracle");
    let q = quant::detect(&ck).unwrap_or_else(|| panic!("{name}: no quantization found"));
    assert!(!q.tensors().is_empty(), "{name}: no logical tensor");
    let mut worst = 0f32;
    let mut decoded = 0;
    for lt in q.tensors() {
        assert_eq!(
            lt.status(),
            Status::Decoded,
            "{name} {}: {}",
            lt.name(),
            lt.message()
        );
        let key = if lt.name().ends_with("_proj")
            && oracle
                .find(&format!("{}.as_linear_EOI", lt.name()))
                .is_some()
        {
            format!("{}.as_linear_EOI", lt.name())
        } else {
            lt.name().to_string()
        };
        let want =
            oracle_values(&oracle, &key).unwrap_or_else(|| panic!("{name}: no oracle {key}"));
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        assert_eq!(
            dq.len() as usize,
            want.len(),
            "{name} {}: shape {:?}",
            lt.name(),
            lt.shape()
        );
        let mut got = vec![0f32; want.len()];
        // In uneven runs, to cross rows and groups at odd places.
        let mut at = 0;
        for run in [1usize, 7, 300, 1000].iter().cycle() {
            if at >= got.len() {
                break;
            }
            let end = (at + run).min(got.len());
            assert_eq!(dq.values(at as u64, &mut got[at..end]), end - at);
            at = end;
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let err = (g - w).abs();
            let units = err / ulp(lt.value_dtype(), *w);
            worst = worst.max(units);
            assert!(
                units <= 1.0,
                "{name} {} [{i}]: got {g}, the library gives {w} ({units} ulp of {})",
                lt.name(),
                lt.value_dtype().name()
            );
        }
        decoded += 1;
    }
    (decoded, worst)
}

#[test]
fn every_sample_decodes_to_its_oracle() {
    let mut report = Vec::new();
    for name in SAMPLES {
        let (n, worst) = check_sample(name);
        // Every sample is bit-exact: the library's roundings are reproduced.
        assert!(
            worst == 0.0,
            "{name}: {worst} ulp from the library's result"
        );
        report.push(format!("{name}: {n} tensors, bit-exact"));
    }
    eprintln!("{}", report.join("\n"));
}

/// The scale the value grid shows beside each element is the one its
/// value was made with: for the samples whose values are exact products
/// (gpt-oss MXFP4, DeepSeek FP8 block), value = code value × scale.
#[test]
fn the_scale_of_each_element_makes_its_value() {
    for name in ["mxfp4_gptoss", "fp8_block128_deepseek"] {
        let ck = Checkpoint::open(&sample(name).join("model.safetensors")).expect("open");
        let q = quant::detect(&ck).expect("quantized");
        for lt in q.tensors() {
            let dq = Dequantizer::new(&ck, lt).expect("decoded");
            let table = dq.code_values().expect("float codes");
            let n = dq.len() as usize;
            let mut vals = vec![0f32; n];
            let mut codes = vec![0i32; n];
            dq.values_and_codes(0, &mut vals, &mut codes);
            for i in (0..n).step_by(97) {
                let s = dq.scale_at(i as u64).expect("in range") as f32;
                let want = table[codes[i] as usize] as f32 * s;
                assert_eq!(
                    vals[i].to_bits(),
                    want.to_bits(),
                    "{name} {} [{i}]",
                    lt.name()
                );
            }
            assert!(dq.scale_at(dq.len()).is_none());
        }
    }
}

/// The zero points' distribution: the symmetric GPTQ sample stores 8 for
/// every group and column (v1: 7, read back as 8); AWQ's are asymmetric.
#[test]
fn zero_points_are_counted_per_group_and_column() {
    use tensorscope::jobs::{CancelToken, Progress};
    use tensorscope::stats::{StatsOptions, logical_stats};
    for (name, symmetric) in [
        ("gptq_w4_g128_sym_actorder_v1", true),
        ("awq_gemm_w4_g128", false),
    ] {
        let ck = Checkpoint::open(&sample(name).join("model.safetensors")).expect("open");
        let q = quant::detect(&ck).expect("quantized");
        for lt in q.tensors() {
            let s = logical_stats(
                &ck,
                lt,
                &StatsOptions::default(),
                &CancelToken::new(),
                &Progress::new(),
            )
            .expect("stats")
            .expect("decoded");
            let z = s.quant.zeros.expect("zero points");
            let groups = lt.shape()[1].div_ceil(128);
            assert_eq!(
                z.counts.iter().sum::<u64>(),
                groups * lt.shape()[0],
                "{name}"
            );
            if symmetric {
                assert_eq!(z.values, [8], "{name} {}", lt.name());
            } else {
                assert!(z.values.len() > 1, "{name} {}: {:?}", lt.name(), z.values);
                assert!(z.values.iter().all(|v| (0..16).contains(v)));
            }
        }
    }
}
