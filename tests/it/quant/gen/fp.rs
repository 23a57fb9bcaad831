//! FP8 E4M3 weights with scales that multiply (QUANT.md §3
//! `float-quantized` and `mxfp8-quantized`, §5a DeepSeek block FP8, §5b
//! ModelOpt FP8). The FP4/FP6 formats are in `mx`.

use serde_json::{Value, json};

use super::ct::{CT_LINEARS, ct_config};
use super::num::{
    Rng, e4m3_nearest, e4m3_value, e8m0_value, few_bits, mx_scale, round_bf16, round_f32, weights,
};
use super::pack::{f32_bytes, float_bytes};
use super::{Expected, Fixture, push_lm_head};

/// The shapes of the block fixtures: [200, 300] leaves partial 128x128
/// blocks on both edges (grid 2x3), [96, 130] a partial column block.
const BLOCK_LINEARS: [(&str, usize, usize); 2] = [
    ("model.layers.0.self_attn.q_proj", 200, 300),
    ("model.layers.0.mlp.down_proj", 96, 130),
];

/// An FP8 E4M3 weight [n, k] with one scale per block of `bh` x `bw`
/// elements (edge blocks partial): (1, k) is per channel, (n, k) per
/// tensor, (1, 32) MX.
pub struct Fp8Linear {
    pub n: usize,
    pub k: usize,
    pub bh: usize,
    pub bw: usize,
    /// Raw E4M3 codes, row-major [n][k].
    pub codes: Vec<u8>,
    /// The scale of each block, grid [ceil(n/bh)][ceil(k/bw)].
    pub scales: Vec<f32>,
}

impl Fp8Linear {
    pub fn grid(&self) -> (usize, usize) {
        (self.n.div_ceil(self.bh), self.k.div_ceil(self.bw))
    }

    pub fn scale(&self, row: usize, col: usize) -> f32 {
        self.scales[(row / self.bh) * self.grid().1 + col / self.bw]
    }

    /// `fp8 * s` rounded once by `round` (the products are exact in f64).
    pub fn values(&self, round: fn(f64) -> f32) -> Vec<f32> {
        (0..self.n * self.k)
            .map(|at| {
                let (row, col) = (at / self.k, at % self.k);
                round(f64::from(e4m3_value(self.codes[at])) * f64::from(self.scale(row, col)))
            })
            .collect()
    }

    fn expected(
        &self,
        name: &str,
        scheme: &'static str,
        group: Option<u64>,
        values: Vec<f32>,
    ) -> Expected {
        Expected {
            name: format!("{name}.weight"),
            scheme,
            bits: 8,
            group_size: group,
            shape: vec![self.n as u64, self.k as u64],
            values,
            codes: self.codes.iter().map(|&c| i64::from(c)).collect(),
        }
    }
}

/// Quantizes `w` [n, k] to E4M3 with per-block scales `scale_of(amax)`.
pub fn quantize_fp8(
    w: &[f64],
    n: usize,
    k: usize,
    bh: usize,
    bw: usize,
    scale_of: &dyn Fn(f64) -> f32,
) -> Fp8Linear {
    let (gr, gc) = (n.div_ceil(bh), k.div_ceil(bw));
    let mut amax = vec![0f64; gr * gc];
    for (at, v) in w.iter().enumerate() {
        let b = (at / k / bh) * gc + (at % k) / bw;
        amax[b] = amax[b].max(v.abs());
    }
    let scales: Vec<f32> = amax.iter().map(|&a| scale_of(a)).collect();
    let codes = w
        .iter()
        .enumerate()
        .map(|(at, &v)| e4m3_nearest(v / f64::from(scales[(at / k / bh) * gc + (at % k) / bw])))
        .collect();
    Fp8Linear {
        n,
        k,
        bh,
        bw,
        codes,
        scales,
    }
}

/// The E8M0 byte of a power of two.
pub fn e8m0_byte(scale: f32) -> u8 {
    let e = f64::from(scale).log2();
    assert!(e.fract() == 0.0, "{scale} is not a power of two");
    (e as i32 + 127) as u8
}

/// The amax/448 scale of a block rounded by `round`, 1 for an empty block.
fn amax_scale(round: fn(f64) -> f32) -> impl Fn(f64) -> f32 {
    move |a| if a > 0.0 { round(a / 448.0) } else { 1.0 }
}

/// compressed-tensors `float-quantized` FP8 (weight F8_E4M3 [N, K],
/// `weight_scale` multiplies). `strategy`:
/// * "tensor": `weight_scale` F32 [1], plus a static `input_scale` F32 [1]
///   (preset FP8); values `fp8 * s` rounded to F32;
/// * "channel": `weight_scale` BF16 [N, 1] (preset FP8_DYNAMIC, like
///   quant-samples/ct_fp8_channel_dynamic); values rounded to BF16;
/// * "block": `weight_scale` BF16 [ceil(N/128), ceil(K/128)] on [200, 300]
///   and [96, 130] (preset FP8_BLOCK); values rounded to BF16.
pub fn ct_fp8(strategy: &str) -> Fixture {
    let mut rng = Rng::new(0x4354_4638 ^ strategy.len() as u64);
    let mut fx = Fixture::default();
    let (linears, dtype) = match strategy {
        "tensor" => (CT_LINEARS, "F32"),
        "channel" => (CT_LINEARS, "BF16"),
        "block" => (BLOCK_LINEARS, "BF16"),
        other => panic!("no FP8 strategy {other}"),
    };
    let round = if dtype == "F32" {
        round_f32
    } else {
        round_bf16
    };
    for (name, n, k) in linears {
        let w = weights(&mut rng, n, k, 0.02);
        let (bh, bw) = match strategy {
            "tensor" => (n, k),
            "channel" => (1, k),
            _ => (128, 128),
        };
        let q = quantize_fp8(&w, n, k, bh, bw, &amax_scale(round));
        let (gr, gc) = q.grid();
        let scale_shape = match strategy {
            "tensor" => vec![1],
            _ => vec![gr, gc],
        };
        fx.push(
            &format!("{name}.weight"),
            "F8_E4M3",
            &[n, k],
            q.codes.clone(),
        );
        fx.push(
            &format!("{name}.weight_scale"),
            dtype,
            &scale_shape,
            float_bytes(dtype, &q.scales),
        );
        if strategy == "tensor" {
            fx.push(
                &format!("{name}.input_scale"),
                "F32",
                &[1],
                f32_bytes(&[0.0123]),
            );
        }
        let group = (strategy == "block").then_some(128);
        fx.expected
            .push(q.expected(name, "ct-fp8", group, q.values(round)));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let (weights, input) = match strategy {
        "tensor" => (
            json!({"dynamic": false, "group_size": null, "num_bits": 8, "strategy": "tensor", "symmetric": true, "type": "float"}),
            json!({"dynamic": false, "group_size": null, "num_bits": 8, "observer": "static_minmax", "strategy": "tensor", "symmetric": true, "type": "float"}),
        ),
        "channel" => (
            json!({"dynamic": false, "group_size": null, "num_bits": 8, "strategy": "channel", "symmetric": true, "type": "float"}),
            json!({"dynamic": true, "group_size": null, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "float"}),
        ),
        _ => (
            json!({"block_structure": [128, 128], "dynamic": false, "group_size": null, "num_bits": 8, "strategy": "block", "symmetric": true, "type": "float"}),
            json!({"dynamic": true, "group_size": 128, "num_bits": 8, "strategy": "group", "symmetric": true, "type": "float"}),
        ),
    };
    fx.push_json(
        "config.json",
        &ct_config("float-quantized", &weights, &input, "0.20.1"),
    );
    fx
}

/// compressed-tensors `mxfp8-quantized` (preset MXFP8A16): `weight`
/// F8_E4M3 [N, K], `weight_scale` U8 (E8M0) [N, K/32]; values
/// `fp8 * 2^(s-127)`, exact in F32.
pub fn ct_mxfp8() -> Fixture {
    let mut rng = Rng::new(0x4354_4D38);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize_fp8(&w, n, k, 1, 32, &|a| e8m0_value(mx_scale(a, 8)));
        let scales: Vec<u8> = q.scales.iter().map(|&s| e8m0_byte(s)).collect();
        fx.push(
            &format!("{name}.weight"),
            "F8_E4M3",
            &[n, k],
            q.codes.clone(),
        );
        fx.push(&format!("{name}.weight_scale"), "U8", &[n, k / 32], scales);
        fx.expected
            .push(q.expected(name, "ct-mxfp8", Some(32), q.values(round_f32)));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let weights = json!({
        "dynamic": false, "group_size": 32, "num_bits": 8, "scale_dtype": "torch.uint8",
        "strategy": "group", "symmetric": true, "type": "float", "zp_dtype": "torch.uint8"
    });
    fx.push_json(
        "config.json",
        &ct_config("mxfp8-quantized", &weights, &Value::Null, "0.20.1"),
    );
    fx
}

/// The ModelOpt `hf_quant_config.json`.
pub fn modelopt_quant_config(algo: &str, group: Option<u64>) -> Value {
    let mut q =
        json!({"quant_algo": algo, "kv_cache_quant_algo": null, "exclude_modules": ["lm_head"]});
    if let Some(g) = group {
        q["group_size"] = json!(g);
    }
    json!({"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": q})
}

/// NVIDIA ModelOpt FP8 (`quant_algo: "FP8"` in `hf_quant_config.json`):
/// `weight` F8_E4M3 [N, K], `weight_scale` F32 scalar (shape []),
/// `input_scale` F32 scalar. Values `fp8 * s`. config.json (torch_dtype
/// bfloat16) carries no quantization_config.
///
/// ModelOpt's own `FP8QTensor.dequantize` casts both to the model dtype
/// and multiplies there (`data.to(bf16) * scale.to(bf16)`), where a
/// decoder in F32 would not round at all. The scale, amax/448, is
/// therefore kept to 4 significant bits (`few_bits`): fp8 * s then has at
/// most 8 and is exact in BF16 and F32 alike, so every reading agrees.
pub fn modelopt_fp8() -> Fixture {
    let mut rng = Rng::new(0x4D4F_4638);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize_fp8(&w, n, k, n, k, &|a| few_bits(a / 448.0, 4));
        fx.push(
            &format!("{name}.weight"),
            "F8_E4M3",
            &[n, k],
            q.codes.clone(),
        );
        fx.push(
            &format!("{name}.weight_scale"),
            "F32",
            &[],
            f32_bytes(&q.scales),
        );
        fx.push(
            &format!("{name}.input_scale"),
            "F32",
            &[],
            f32_bytes(&[0.0117]),
        );
        fx.expected
            .push(q.expected(name, "modelopt-fp8", None, q.values(round_f32)));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    fx.push_json(
        "config.json",
        &json!({"model_type": "tiny", "torch_dtype": "bfloat16"}),
    );
    fx.push_json("hf_quant_config.json", &modelopt_quant_config("FP8", None));
    fx
}

/// DeepSeek-V3 block FP8 (transformers `Fp8Quantize`): `weight` F8_E4M3
/// [N, K] and `weight_scale_inv` [ceil(N/128), ceil(K/128)], which
/// multiplies, on [200, 300] and [96, 130] (partial edge blocks). F32
/// scales amax/448, or with `ue8m0` powers of two (2^ceil(log2(amax/448)))
/// stored as F8_E8M0 and `scale_fmt: "ue8m0"`. Values `fp8 * s` in F32.
pub fn fp8_block(ue8m0: bool) -> Fixture {
    let mut rng = Rng::new(0x4653_424B ^ u64::from(ue8m0));
    let mut fx = Fixture::default();
    let pow2 = |a: f64| {
        if a > 0.0 {
            2f64.powf((a / 448.0).log2().ceil()) as f32
        } else {
            1.0
        }
    };
    for (name, n, k) in BLOCK_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let q = if ue8m0 {
            quantize_fp8(&w, n, k, 128, 128, &pow2)
        } else {
            quantize_fp8(&w, n, k, 128, 128, &amax_scale(round_f32))
        };
        let (gr, gc) = q.grid();
        fx.push(
            &format!("{name}.weight"),
            "F8_E4M3",
            &[n, k],
            q.codes.clone(),
        );
        let scale_name = format!("{name}.weight_scale_inv");
        if ue8m0 {
            let bytes = q.scales.iter().map(|&s| e8m0_byte(s)).collect();
            fx.push(&scale_name, "F8_E8M0", &[gr, gc], bytes);
        } else {
            fx.push(&scale_name, "F32", &[gr, gc], f32_bytes(&q.scales));
        }
        fx.expected
            .push(q.expected(name, "fp8-block", Some(128), q.values(round_f32)));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let mut qc = json!({
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "weight_block_size": [128, 128]
    });
    if ue8m0 {
        qc["scale_fmt"] = json!("ue8m0");
    }
    fx.push_json(
        "config.json",
        &json!({"model_type": "tiny", "torch_dtype": "bfloat16", "quantization_config": qc}),
    );
    fx
}
