//! MLX quantized checkpoints (QUANT.md §7): `weight` U32 (an LSB-first
//! bitstream along K), safetensors `__metadata__ {"format": "mlx"}`, and a
//! config.json with `quantization` (and the same under
//! `quantization_config`), like quant-samples/mlx_affine_4bit_g64.

use serde_json::json;

use super::fp::{Fp8Linear, e8m0_byte, quantize_fp8};
use super::mx::{BlockLinear, mxfp4_value, quantize_blocks, quantize_mxfp4};
use super::num::{
    E2M1, Rng, e2m1_nearest, e4m3_nearest, e4m3_value, e8m0_value, mx_scale, round_f32, rounding,
    weights,
};
use super::pack::{float_bytes, pack_stream, u32_bytes};
use super::{Expected, Fixture, LINEARS, push_lm_head};

/// The MLX files' metadata and config.
fn mlx_files(fx: &mut Fixture, group: u64, bits: u32, mode: &str) {
    fx.metadata.push(("format".to_owned(), "mlx".to_owned()));
    let q = json!({"group_size": group, "bits": bits, "mode": mode, "lm_head": false});
    fx.push_json(
        "config.json",
        &json!({"model_type": "tiny", "quantization": q, "quantization_config": q}),
    );
}

/// `weight` U32 [n, k*bits/32]: each row an LSB-first bitstream of codes.
fn push_weight(fx: &mut Fixture, name: &str, n: usize, k: usize, codes: &[u32], bits: u32) {
    let words: Vec<u32> = codes
        .chunks(k)
        .flat_map(|row| pack_stream(row, bits))
        .collect();
    fx.push(
        &format!("{name}.weight"),
        "U32",
        &[n, words.len() / n],
        u32_bytes(&words),
    );
}

/// MLX affine (`mx.quantize`, mode "affine"): `weight` U32
/// [N, K*bits/32], `scales` and `biases` [N, K/G] of `scale_dtype`
/// ("BF16" or "F16"). W = s*q + b computed in the scales dtype with two
/// roundings: `r(r(s*q) + b)`. `bits` 2, 3, 4, 5, 6 or 8 (3/5/6 straddle
/// words); `group` 32, 64 or 128. Codes are the unsigned q.
pub fn mlx_affine(bits: u32, group: u64, scale_dtype: &str) -> Fixture {
    assert!((1..=8).contains(&bits), "MLX bits {bits}");
    let g = usize::try_from(group).expect("a group size");
    assert!(g > 0 && 128 % g == 0, "MLX group {group}");
    let round = rounding(scale_dtype);
    let mut rng =
        Rng::new(0x4D4C_5841 ^ u64::from(bits) << 16 ^ group << 24 ^ scale_dtype.len() as u64);
    let mut fx = Fixture::default();
    let maxq = (1u32 << bits) - 1;
    for (name, n, k) in LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let mut scales = Vec::new();
        let mut biases = Vec::new();
        for block in w.chunks(g) {
            let (lo, hi) = block
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let s = round((hi - lo) / f64::from(maxq));
            scales.push(if s > 0.0 { s } else { round(1e-3) });
            biases.push(round(lo));
        }
        let codes: Vec<u32> = w
            .iter()
            .enumerate()
            .map(|(at, &v)| {
                let (s, b) = (f64::from(scales[at / g]), f64::from(biases[at / g]));
                ((v - b) / s).round().clamp(0.0, f64::from(maxq)) as u32
            })
            .collect();
        let values = codes
            .iter()
            .enumerate()
            .map(|(at, &q)| {
                let sq = round(f64::from(scales[at / g]) * f64::from(q));
                round(f64::from(sq) + f64::from(biases[at / g]))
            })
            .collect();
        push_weight(&mut fx, name, n, k, &codes, bits);
        fx.push(
            &format!("{name}.scales"),
            scale_dtype,
            &[n, k / g],
            float_bytes(scale_dtype, &scales),
        );
        fx.push(
            &format!("{name}.biases"),
            scale_dtype,
            &[n, k / g],
            float_bytes(scale_dtype, &biases),
        );
        fx.expected.push(Expected {
            name: format!("{name}.weight"),
            scheme: "mlx-affine",
            bits,
            group_size: Some(group),
            shape: vec![n as u64, k as u64],
            values,
            codes: codes.into_iter().map(i64::from).collect(),
        });
    }
    push_lm_head(&mut fx, &mut rng, scale_dtype);
    mlx_files(&mut fx, group, bits, "affine");
    fx
}

/// The fixture of an MLX FP4 mode from its block quantization.
fn push_fp4(
    fx: &mut Fixture,
    name: &str,
    q: &BlockLinear,
    scheme: &'static str,
    value: &dyn Fn(u8, u8) -> f32,
) {
    let codes: Vec<u32> = q.codes.iter().map(|&c| u32::from(c)).collect();
    push_weight(fx, name, q.n, q.k, &codes, 4);
    fx.push(
        &format!("{name}.scales"),
        "U8",
        &[q.n, q.k / q.group],
        q.scales.clone(),
    );
    fx.expected.push(Expected {
        name: format!("{name}.weight"),
        scheme,
        bits: 4,
        group_size: Some(q.group as u64),
        shape: vec![q.n as u64, q.k as u64],
        values: q.values(value),
        codes: q.codes.iter().map(|&c| i64::from(c)).collect(),
    });
}

/// MLX mode "mxfp4": `weight` U32 [N, K/8] (as little-endian bytes, low
/// nibble = even element), `scales` U8 (E8M0) [N, K/32], no biases.
/// Values `e2m1 * 2^(s-127)`, exact in F32.
pub fn mlx_mxfp4() -> Fixture {
    let mut rng = Rng::new(0x4D4C_4D34);
    let mut fx = Fixture::default();
    for (name, n, k) in LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        push_fp4(
            &mut fx,
            name,
            &quantize_mxfp4(&w, n, k),
            "mlx-mxfp4",
            &mxfp4_value,
        );
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    mlx_files(&mut fx, 32, 4, "mxfp4");
    fx
}

/// MLX mode "nvfp4": `weight` U32 [N, K/8] (low nibble first), `scales` U8
/// [N, K/16] holding raw E4M3 bits, no global scale (it is optional and
/// left out). Values `e2m1 * fp8(s)`, exact in F32. Weights of order 1, so
/// that the E4M3 scales are normal numbers.
pub fn mlx_nvfp4() -> Fixture {
    let mut rng = Rng::new(0x4D4C_4E34);
    let mut fx = Fixture::default();
    for (name, n, k) in LINEARS {
        let w = weights(&mut rng, n, k, 1.0);
        let q = quantize_blocks(
            &w,
            n,
            k,
            16,
            &|a| e4m3_nearest(a / 6.0),
            &|s| f64::from(e4m3_value(s)),
            e2m1_nearest,
        );
        push_fp4(&mut fx, name, &q, "mlx-nvfp4", &|c, s| {
            E2M1[c as usize] * e4m3_value(s)
        });
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    mlx_files(&mut fx, 16, 4, "nvfp4");
    fx
}

/// MLX mode "mxfp8": `weight` U32 [N, K/4] holding E4M3 bytes (byte j of
/// the row = element j), `scales` U8 (E8M0) [N, K/32]. Values
/// `fp8 * 2^(s-127)`, exact in F32.
pub fn mlx_mxfp8() -> Fixture {
    let mut rng = Rng::new(0x4D4C_4D38);
    let mut fx = Fixture::default();
    for (name, n, k) in LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let q: Fp8Linear = quantize_fp8(&w, n, k, 1, 32, &|a| e8m0_value(mx_scale(a, 8)));
        let codes: Vec<u32> = q.codes.iter().map(|&c| u32::from(c)).collect();
        push_weight(&mut fx, name, n, k, &codes, 8);
        let scales: Vec<u8> = q.scales.iter().map(|&s| e8m0_byte(s)).collect();
        fx.push(&format!("{name}.scales"), "U8", &[n, k / 32], scales);
        fx.expected.push(Expected {
            name: format!("{name}.weight"),
            scheme: "mlx-mxfp8",
            bits: 8,
            group_size: Some(32),
            shape: vec![n as u64, k as u64],
            values: q.values(round_f32),
            codes: q.codes.iter().map(|&c| i64::from(c)).collect(),
        });
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    mlx_files(&mut fx, 32, 8, "mxfp8");
    fx
}
