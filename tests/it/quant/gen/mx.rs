//! FP4 (E2M1) and FP6 (E2M3) weights with block scales (QUANT.md §3
//! nvfp4/mxfp4/mxfp6, ModelOpt NVFP4, §4 gpt-oss MXFP4).

use serde_json::{Value, json};

use super::ct::{CT_LINEARS, ct_config};
use super::fp::modelopt_quant_config;
use super::num::{
    E2M1, Rng, e2m1_nearest, e2m3_nearest, e2m3_value, e4m3_nearest, e4m3_value, e8m0_value,
    few_bits, mx_scale, round_bf16, weights,
};
use super::pack::{bf16_bytes, f32_bytes, nibbles_low_first, pack_fp6};
use super::{Expected, Fixture, push_lm_head};

/// A weight [n, k] of small float codes with one raw scale byte per
/// `group` elements along k.
pub struct BlockLinear {
    pub n: usize,
    pub k: usize,
    pub group: usize,
    /// Raw element codes, row-major [n][k].
    pub codes: Vec<u8>,
    /// Raw scale bytes (E4M3 or E8M0), [n][k/group].
    pub scales: Vec<u8>,
}

impl BlockLinear {
    pub fn scale(&self, row: usize, col: usize) -> u8 {
        self.scales[row * (self.k / self.group) + col / self.group]
    }

    /// `value(code, scale byte)` for every element.
    pub fn values(&self, value: &dyn Fn(u8, u8) -> f32) -> Vec<f32> {
        (0..self.n * self.k)
            .map(|at| value(self.codes[at], self.scale(at / self.k, at % self.k)))
            .collect()
    }

    fn expected(
        &self,
        name: String,
        scheme: &'static str,
        bits: u32,
        values: Vec<f32>,
    ) -> Expected {
        Expected {
            name,
            scheme,
            bits,
            group_size: Some(self.group as u64),
            shape: vec![self.n as u64, self.k as u64],
            values,
            codes: self.codes.iter().map(|&c| i64::from(c)).collect(),
        }
    }
}

/// Block quantization: the scale byte of a block is `scale_code(amax)`,
/// its value `scale_value(byte)`, each element `nearest(w / scale)`.
pub fn quantize_blocks(
    w: &[f64],
    n: usize,
    k: usize,
    group: usize,
    scale_code: &dyn Fn(f64) -> u8,
    scale_value: &dyn Fn(u8) -> f64,
    nearest: fn(f64) -> u8,
) -> BlockLinear {
    assert!(k.is_multiple_of(group), "group {group} must divide {k}");
    let scales: Vec<u8> = w
        .chunks(group)
        .map(|b| scale_code(b.iter().fold(0f64, |m, v| m.max(v.abs()))))
        .collect();
    let codes = w
        .iter()
        .enumerate()
        .map(|(at, &v)| {
            let s = scale_value(scales[at / group]);
            if s > 0.0 { nearest(v / s) } else { 0 }
        })
        .collect();
    BlockLinear {
        n,
        k,
        group,
        codes,
        scales,
    }
}

/// The raw bytes of E2M1 codes, row-major, two per byte, low nibble first.
fn fp4_bytes(q: &BlockLinear) -> Vec<u8> {
    nibbles_low_first(&q.codes)
}

/// compressed-tensors `nvfp4-pack-quantized` (preset NVFP4A16, like
/// quant-samples/ct_nvfp4a16): `weight_packed` U8 [N, K/2] (low nibble =
/// even column), `weight_scale` F8_E4M3 [N, K/16], `weight_global_scale`
/// F32 [1] = 448*6/amax, a DIVISOR. Values as `_dequantize` computes them:
/// `s = f32(fp8) / global` in F32, then `f32(e2m1 * s)`, then cast to BF16.
pub fn ct_nvfp4() -> Fixture {
    let mut rng = Rng::new(0x4354_4E34);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let amax = w.iter().fold(0f64, |m, v| m.max(v.abs()));
        let global = (448.0 * 6.0 / amax) as f32;
        let g = f64::from(global);
        let q = quantize_blocks(
            &w,
            n,
            k,
            16,
            &|a| e4m3_nearest(a / 6.0 * g),
            &|s| f64::from(e4m3_value(s)) / g,
            e2m1_nearest,
        );
        fx.push(
            &format!("{name}.weight_packed"),
            "U8",
            &[n, k / 2],
            fp4_bytes(&q),
        );
        fx.push(
            &format!("{name}.weight_scale"),
            "F8_E4M3",
            &[n, k / 16],
            q.scales.clone(),
        );
        fx.push(
            &format!("{name}.weight_global_scale"),
            "F32",
            &[1],
            f32_bytes(&[global]),
        );
        let values = q.values(&|c, s| {
            let scale = e4m3_value(s) / global;
            round_bf16(f64::from(E2M1[c as usize] * scale))
        });
        fx.expected
            .push(q.expected(format!("{name}.weight"), "ct-nvfp4", 4, values));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let weights = json!({
        "dynamic": false, "group_size": 16, "num_bits": 4, "scale_dtype": "torch.float8_e4m3fn",
        "strategy": "tensor_group", "symmetric": true, "type": "float"
    });
    fx.push_json(
        "config.json",
        &ct_config("nvfp4-pack-quantized", &weights, &Value::Null, "0.20.1"),
    );
    fx
}

/// NVIDIA ModelOpt NVFP4 (`hf_quant_config.json`, `quant_algo: "NVFP4"`,
/// `group_size: 16`): `weight` U8 [N, K/2] (low nibble first),
/// `weight_scale` F8_E4M3 [N, K/16], `weight_scale_2` F32 scalar =
/// amax/(6*448) kept to 2 significant bits (see below), a MULTIPLIER, and
/// `input_scale` F32 scalar. Values `e2m1 * fp8 * weight_scale_2`.
/// config.json (torch_dtype bfloat16) carries no quantization_config.
///
/// ModelOpt's own `NVFP4QTensor.dequantize` computes
/// `bf16(f32(e2m1 * f32(fp8 * weight_scale_2)))` (per-block scale first,
/// then the cast to the model dtype), which can differ from an F32 decoder
/// in the last bits. With weight_scale_2 of 2 significant bits the product
/// has at most 2 + 4 + 2 = 8, exact in BF16 and F32, so every order of the
/// multiplications and the final cast give the same number.
pub fn modelopt_nvfp4() -> Fixture {
    let mut rng = Rng::new(0x4D4F_4E34);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let amax = w.iter().fold(0f64, |m, v| m.max(v.abs()));
        let ws2 = few_bits(amax / (6.0 * 448.0), 2);
        let s2 = f64::from(ws2);
        let q = quantize_blocks(
            &w,
            n,
            k,
            16,
            &|a| e4m3_nearest(a / 6.0 / s2),
            &|s| f64::from(e4m3_value(s)) * s2,
            e2m1_nearest,
        );
        fx.push(&format!("{name}.weight"), "U8", &[n, k / 2], fp4_bytes(&q));
        fx.push(
            &format!("{name}.weight_scale"),
            "F8_E4M3",
            &[n, k / 16],
            q.scales.clone(),
        );
        fx.push(
            &format!("{name}.weight_scale_2"),
            "F32",
            &[],
            f32_bytes(&[ws2]),
        );
        fx.push(
            &format!("{name}.input_scale"),
            "F32",
            &[],
            f32_bytes(&[0.0117]),
        );
        let values =
            q.values(&|c, s| (f64::from(E2M1[c as usize]) * f64::from(e4m3_value(s)) * s2) as f32);
        fx.expected
            .push(q.expected(format!("{name}.weight"), "modelopt-nvfp4", 4, values));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    fx.push_json(
        "config.json",
        &json!({"model_type": "tiny", "torch_dtype": "bfloat16"}),
    );
    fx.push_json(
        "hf_quant_config.json",
        &modelopt_quant_config("NVFP4", Some(16)),
    );
    fx
}

/// MXFP4 quantization of `w` [n, k]: blocks of 32, E8M0 scales
/// 2^(floor(log2(amax)) - 2).
pub fn quantize_mxfp4(w: &[f64], n: usize, k: usize) -> BlockLinear {
    quantize_blocks(
        w,
        n,
        k,
        32,
        &|a| mx_scale(a, 2),
        &|s| f64::from(e8m0_value(s)),
        e2m1_nearest,
    )
}

/// `e2m1 * 2^(s-127)`, exact in F32.
pub fn mxfp4_value(code: u8, scale: u8) -> f32 {
    E2M1[code as usize] * e8m0_value(scale)
}

/// compressed-tensors `mxfp4-pack-quantized` (preset MXFP4A16):
/// `weight_packed` U8 [N, K/2] (low nibble first), `weight_scale` U8
/// (E8M0) [N, K/32]. Values exact in F32.
pub fn ct_mxfp4() -> Fixture {
    let mut rng = Rng::new(0x4354_4D34);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize_mxfp4(&w, n, k);
        fx.push(
            &format!("{name}.weight_packed"),
            "U8",
            &[n, k / 2],
            fp4_bytes(&q),
        );
        fx.push(
            &format!("{name}.weight_scale"),
            "U8",
            &[n, k / 32],
            q.scales.clone(),
        );
        let values = q.values(&mxfp4_value);
        fx.expected
            .push(q.expected(format!("{name}.weight"), "ct-mxfp4", 4, values));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let weights = json!({
        "dynamic": false, "group_size": 32, "num_bits": 4, "scale_dtype": "torch.uint8",
        "strategy": "group", "symmetric": true, "type": "float", "zp_dtype": "torch.uint8"
    });
    fx.push_json(
        "config.json",
        &ct_config("mxfp4-pack-quantized", &weights, &Value::Null, "0.20.1"),
    );
    fx
}

/// compressed-tensors `mxfp6-pack-quantized` (0.20.1): `weight_packed` U8
/// [N, 3K/4] (4 E2M3 codes per 3 bytes, little-endian 24-bit word, code j
/// at bits 6j), `weight_scale` U8 (E8M0) [N, K/32], `weight_global_scale`
/// F32 [1] = 1.0 (QUANT.md: the decoder divides by it; whether
/// llm-compressor writes other values is unconfirmed, so 1.0 keeps the
/// expected values certain). Values `e2m3 * 2^(s-127)`, exact in F32.
pub fn ct_mxfp6() -> Fixture {
    let mut rng = Rng::new(0x4354_4D36);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize_blocks(
            &w,
            n,
            k,
            32,
            &|a| mx_scale(a, 2),
            &|s| f64::from(e8m0_value(s)),
            e2m3_nearest,
        );
        fx.push(
            &format!("{name}.weight_packed"),
            "U8",
            &[n, 3 * k / 4],
            pack_fp6(&q.codes),
        );
        fx.push(
            &format!("{name}.weight_scale"),
            "U8",
            &[n, k / 32],
            q.scales.clone(),
        );
        fx.push(
            &format!("{name}.weight_global_scale"),
            "F32",
            &[1],
            f32_bytes(&[1.0]),
        );
        let values = q.values(&|c, s| e2m3_value(c) * e8m0_value(s));
        fx.expected
            .push(q.expected(format!("{name}.weight"), "ct-mxfp6", 6, values));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let weights = json!({
        "dynamic": false, "group_size": 32, "num_bits": 6, "scale_dtype": "torch.uint8",
        "strategy": "group", "symmetric": true, "type": "float", "zp_dtype": "torch.uint8"
    });
    fx.push_json(
        "config.json",
        &ct_config("mxfp6-pack-quantized", &weights, &Value::Null, "0.20.1"),
    );
    fx
}

/// gpt-oss MXFP4 experts (QUANT.md §4), hidden H = 64, intermediate I = 64:
/// `model.layers.0.mlp.experts.{gate_up_proj,down_proj}_blocks` U8
/// [E, N, K/32, 16] and `_scales` U8 [E, N, K/32] (E8M0), `_bias` BF16
/// [E, N], with gate_up N = 2I, K = H and down N = H, K = I; plus a BF16
/// router. Low nibble = even element. Expected logical shape [E, N, K]
/// (out-major, the blocks' order, not transformers' [E, K, N]).
pub fn gptoss_mxfp4(experts: usize) -> Fixture {
    assert!(experts > 0);
    let (h, i) = (64, 64);
    let mut rng = Rng::new(0x4750_544F ^ experts as u64);
    let mut fx = Fixture::default();
    let prefix = "model.layers.0.mlp.experts";
    for (proj, n, k) in [("gate_up_proj", 2 * i, h), ("down_proj", h, i)] {
        let mut blocks = Vec::new();
        let mut scales = Vec::new();
        let mut values = Vec::new();
        let mut codes = Vec::new();
        for _ in 0..experts {
            let w = weights(&mut rng, n, k, 0.02);
            let q = quantize_mxfp4(&w, n, k);
            blocks.extend(fp4_bytes(&q));
            scales.extend_from_slice(&q.scales);
            values.extend(q.values(&mxfp4_value));
            codes.extend(q.codes.iter().map(|&c| i64::from(c)));
        }
        let bias: Vec<f32> = (0..experts * n)
            .map(|_| round_bf16(rng.normal() * 0.01))
            .collect();
        fx.push(
            &format!("{prefix}.{proj}_blocks"),
            "U8",
            &[experts, n, k / 32, 16],
            blocks,
        );
        fx.push(
            &format!("{prefix}.{proj}_scales"),
            "U8",
            &[experts, n, k / 32],
            scales,
        );
        fx.push(
            &format!("{prefix}.{proj}_bias"),
            "BF16",
            &[experts, n],
            bf16_bytes(&bias),
        );
        fx.expected.push(Expected {
            name: format!("{prefix}.{proj}"),
            scheme: "mxfp4-gptoss",
            bits: 4,
            group_size: Some(32),
            shape: vec![experts as u64, n as u64, k as u64],
            values,
            codes,
        });
    }
    let router: Vec<f32> = (0..experts * h)
        .map(|_| round_bf16(rng.normal() * 0.02))
        .collect();
    fx.push(
        "model.layers.0.mlp.router.weight",
        "BF16",
        &[experts, h],
        bf16_bytes(&router),
    );
    let rbias: Vec<f32> = (0..experts)
        .map(|_| round_bf16(rng.normal() * 0.01))
        .collect();
    fx.push(
        "model.layers.0.mlp.router.bias",
        "BF16",
        &[experts],
        bf16_bytes(&rbias),
    );
    fx.push_json(
        "config.json",
        &json!({
            "model_type": "gpt_oss",
            "num_local_experts": experts,
            "hidden_size": h,
            "intermediate_size": i,
            "quantization_config": {
                "quant_method": "mxfp4",
                "modules_to_not_convert": [
                    "model.layers.*.self_attn",
                    "model.layers.*.mlp.router",
                    "model.embed_tokens",
                    "lm_head"
                ]
            }
        }),
    );
    fx
}
