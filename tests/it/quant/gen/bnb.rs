//! bitsandbytes in safetensors (QUANT.md §6): 4-bit NF4/FP4 with the
//! quant_state JSON blob, optionally double-quantized, and LLM.int8.

use serde_json::json;

use super::num::{Rng, round_f32, rounding, weights};
use super::pack::{f32_bytes, nibbles_high_first};
use super::{Expected, Fixture, push_lm_head};

/// bitsandbytes' NF4 table (`get_4bit_type("nf4")`), as the float32 bits
/// of the constants -1.0, -0.6961928009986877, ..., 0.7229568362236023,
/// 1.0 (the quant_map of quant-samples/bnb_nf4, bit for bit).
pub const NF4_BITS: [u32; 16] = [
    0xBF80_0000,
    0xBF32_39B1,
    0xBF06_6B30,
    0xBECA_32A0,
    0xBE91_A24D,
    0xBE3D_353F,
    0xBDBA_7871,
    0x0000_0000,
    0x3DA2_FAFF,
    0x3E24_CAE3,
    0x3E7C_04DD,
    0x3EAD_033A,
    0x3EE1_A4B8,
    0x3F10_07AB,
    0x3F39_13B3,
    0x3F80_0000,
];

/// bitsandbytes' FP4 table: `[0, 0.0625, 8, 12, 4, 6, 2, 3, -0, -0.0625,
/// -8, -12, -4, -6, -2, -3]`, divided in float32 by its absolute maximum
/// 12 (`data.div_(data.abs().max())`).
pub fn fp4_map() -> [f32; 16] {
    let raw = [0.0f32, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0];
    std::array::from_fn(|i| {
        let v = raw[i % 8] / 12.0;
        if i < 8 { v } else { -v }
    })
}

pub fn nf4_map() -> [f32; 16] {
    NF4_BITS.map(f32::from_bits)
}

/// A 256-entry, strictly increasing map in [-1, 1] shaped like
/// bitsandbytes' `create_dynamic_map(signed=True)` (the nested
/// quant_map): for i in 0..7, the midpoints of `linspace(0.1, 1, 2^i+1)`
/// times ±10^(i-6), plus 0 and 1. It is computed here in f64 and rounded
/// to f32, so it may differ from bitsandbytes' own table in the last bits:
/// decoders must use the stored `nested_quant_map`, never a built-in one.
pub fn dynamic_map() -> Vec<f32> {
    let mut data = vec![0f64, 1.0];
    for i in 0..7 {
        let items = (1usize << i) + 1;
        let step = 0.9 / (items - 1) as f64;
        let scale = 10f64.powi(i - 6);
        for j in 0..items - 1 {
            let mean = (0.1 + step * j as f64 + 0.1 + step * (j + 1) as f64) / 2.0;
            data.push(scale * mean);
            data.push(-scale * mean);
        }
    }
    let mut map: Vec<f32> = data.into_iter().map(|v| v as f32).collect();
    map.sort_by(f32::total_cmp);
    assert_eq!(map.len(), 256);
    map
}

/// The index of the entry of `map` nearest to `x`.
fn nearest_index(map: &[f32], x: f64) -> usize {
    let mut best = 0;
    for (i, &m) in map.iter().enumerate() {
        if (f64::from(m) - x).abs() < (f64::from(map[best]) - x).abs() {
            best = i;
        }
    }
    best
}

/// A float as Python's `repr` writes it (what `json.dumps` puts in the
/// blob), for magnitudes where it uses no exponent.
pub fn py_float(x: f64) -> String {
    assert!(
        x == 0.0 || (1e-4..1e16).contains(&x.abs()),
        "{x} would take an exponent in Python"
    );
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// The linear modules of the bnb fixtures: [64, 320] has 320 blocks of 64
/// (two nested blocks, the second partial); [48, 100] leaves a partial
/// last block for blocksizes 128 and above.
const BNB_LINEARS: [(&str, usize, usize); 2] = [
    ("model.layers.0.self_attn.q_proj", 64, 320),
    ("model.layers.0.mlp.down_proj", 48, 100),
];

/// The safetensors dtype of a bnb blob dtype name.
fn blob_st_dtype(blob_dtype: &str) -> &'static str {
    match blob_dtype {
        "bfloat16" => "BF16",
        "float16" => "F16",
        "float32" => "F32",
        other => panic!("no bnb dtype {other}"),
    }
}

/// bitsandbytes 4-bit, as `Linear4bit._save_to_state_dict` writes it:
/// `<m>.weight` U8 [ceil(N*K/2), 1] (element 2j in the HIGH nibble),
/// `.weight.absmax` F32 [nblocks] (U8 when `nested`), `.weight.quant_map`
/// F32 [16], when nested `.weight.nested_absmax` F32 [ceil(nblocks/256)]
/// and `.weight.nested_quant_map` F32 [256] (`dynamic_map`), and
/// `.weight.quant_state.bitsandbytes__<nf4|fp4>` U8: the JSON of
/// `QuantState.as_dict(packed=True)`, keys in its order (quant_type,
/// blocksize, dtype, shape, then nested_blocksize, nested_dtype,
/// nested_offset), written by `json.dumps` (", " and ": ").
///
/// Values: nested absmax `f32(f32(nested_map[c] * nested_absmax) +
/// offset)`; then `f32(quant_map[code] * absmax)` cast to `blob_dtype`
/// ("bfloat16", "float16" or "float32"). Codes are the 4-bit indices.
pub fn bnb4(quant_type: &str, nested: bool, blocksize: u64, blob_dtype: &str) -> Fixture {
    let (qmap, scheme) = match quant_type {
        "nf4" => (nf4_map(), "bnb-nf4"),
        "fp4" => (fp4_map(), "bnb-fp4"),
        other => panic!("no bnb 4-bit type {other}"),
    };
    let bs = usize::try_from(blocksize).expect("a blocksize");
    assert!(bs >= 2 && bs.is_power_of_two(), "bnb blocksize {blocksize}");
    let st_dtype = blob_st_dtype(blob_dtype);
    let out_round = rounding(st_dtype);
    let seed = 0x424E_4234
        ^ u64::from(nested)
        ^ blocksize << 8
        ^ (quant_type.as_bytes()[0] as u64) << 24
        ^ (blob_dtype.len() as u64) << 32;
    let mut rng = Rng::new(seed);
    let mut fx = Fixture::default();
    let dmap = dynamic_map();
    for (name, n, k) in BNB_LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let numel = n * k;
        let nblocks = numel.div_ceil(bs);
        let true_absmax: Vec<f32> = w
            .chunks(bs)
            .map(|b| b.iter().fold(0f64, |m, v| m.max(v.abs())) as f32)
            .collect();
        let prefix = format!("{name}.weight");
        let mut blob = format!(
            r#"{{"quant_type": "{quant_type}", "blocksize": {bs}, "dtype": "{blob_dtype}", "shape": [{n}, {k}]"#
        );
        let absmax: Vec<f32> = if nested {
            let mean = true_absmax.iter().map(|&a| f64::from(a)).sum::<f64>() / nblocks as f64;
            let offset = mean as f32;
            let centered: Vec<f64> = true_absmax
                .iter()
                .map(|&a| f64::from(a) - f64::from(offset))
                .collect();
            let nested_absmax: Vec<f32> = centered
                .chunks(256)
                .map(|b| {
                    let m = b.iter().fold(0f64, |m, v| m.max(v.abs())) as f32;
                    if m > 0.0 { m } else { 1.0 }
                })
                .collect();
            let codes: Vec<u8> = centered
                .iter()
                .enumerate()
                .map(|(i, &x)| nearest_index(&dmap, x / f64::from(nested_absmax[i / 256])) as u8)
                .collect();
            fx.push(&format!("{prefix}.absmax"), "U8", &[nblocks], codes.clone());
            fx.push(
                &format!("{prefix}.nested_absmax"),
                "F32",
                &[nested_absmax.len()],
                f32_bytes(&nested_absmax),
            );
            fx.push(
                &format!("{prefix}.nested_quant_map"),
                "F32",
                &[256],
                f32_bytes(&dmap),
            );
            blob += r#", "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": "#;
            blob += &py_float(f64::from(offset));
            codes
                .iter()
                .enumerate()
                .map(|(i, &c)| dmap[c as usize] * nested_absmax[i / 256] + offset)
                .collect()
        } else {
            fx.push(
                &format!("{prefix}.absmax"),
                "F32",
                &[nblocks],
                f32_bytes(&true_absmax),
            );
            true_absmax
        };
        blob.push('}');
        let codes: Vec<u8> = w
            .iter()
            .enumerate()
            .map(|(at, &v)| {
                let a = f64::from(absmax[at / bs]);
                let x = if a > 0.0 { v / a } else { 0.0 };
                nearest_index(&qmap, x) as u8
            })
            .collect();
        let values: Vec<f32> = codes
            .iter()
            .enumerate()
            .map(|(at, &c)| out_round(f64::from(qmap[c as usize] * absmax[at / bs])))
            .collect();
        fx.push(
            &prefix,
            "U8",
            &[numel.div_ceil(2), 1],
            nibbles_high_first(&codes),
        );
        fx.push(
            &format!("{prefix}.quant_map"),
            "F32",
            &[16],
            f32_bytes(&qmap),
        );
        let blob = blob.into_bytes();
        fx.push(
            &format!("{prefix}.quant_state.bitsandbytes__{quant_type}"),
            "U8",
            &[blob.len()],
            blob,
        );
        fx.expected.push(Expected {
            name: prefix,
            scheme,
            bits: 4,
            group_size: Some(blocksize),
            shape: vec![n as u64, k as u64],
            values,
            codes: codes.into_iter().map(i64::from).collect(),
        });
    }
    push_lm_head(&mut fx, &mut rng, st_dtype);
    let qc = json!({
        "quant_method": "bitsandbytes",
        "_load_in_8bit": false,
        "_load_in_4bit": true,
        "llm_int8_threshold": 6.0,
        "llm_int8_skip_modules": ["lm_head"],
        "llm_int8_enable_fp32_cpu_offload": false,
        "llm_int8_has_fp16_weight": false,
        "bnb_4bit_quant_type": quant_type,
        "bnb_4bit_use_double_quant": nested,
        "bnb_4bit_compute_dtype": blob_dtype,
        "bnb_4bit_quant_storage": "uint8",
        "load_in_4bit": true,
        "load_in_8bit": false
    });
    fx.push_json(
        "config.json",
        &json!({"architectures": ["TinyForTest"], "model_type": "tiny", "torch_dtype": blob_dtype, "quantization_config": qc}),
    );
    fx
}

/// `1/127` as bitsandbytes multiplies by it: the Python float
/// 7.874015718698502e-3 applied to a float32 tensor, i.e. as float32.
pub const INV_127: f32 = f32::from_bits(0x3C01_0204);

/// bitsandbytes LLM.int8 (`Linear8bitLt`): `<m>.weight` I8 [N, K],
/// `<m>.SCB` F32 [N] (row absmax), `<m>.weight_format` U8 scalar 0.
///
/// Values as bitsandbytes' `int8_vectorwise_dequant` (default backend)
/// computes them: `A * stats.view(-1, 1) * 7.874015718698502e-3`, i.e. in
/// float32 `f32(f32(q * SCB[n]) * f32(1/127))`, which can differ in the
/// last bit from `q * SCB / 127`. Codes are the i8 values.
pub fn bnb8() -> Fixture {
    let mut rng = Rng::new(0x424E_4238);
    let mut fx = Fixture::default();
    for (name, n, k) in super::LINEARS {
        let w = weights(&mut rng, n, k, 0.02);
        let scb: Vec<f32> = w
            .chunks(k)
            .map(|r| r.iter().fold(0f64, |m, v| m.max(v.abs())) as f32)
            .collect();
        let codes: Vec<i8> = w
            .iter()
            .enumerate()
            .map(|(at, &v)| {
                (v * 127.0 / f64::from(scb[at / k]))
                    .round()
                    .clamp(-127.0, 127.0) as i8
            })
            .collect();
        let values: Vec<f32> = codes
            .iter()
            .enumerate()
            .map(|(at, &q)| round_f32(f64::from(f32::from(q) * scb[at / k])) * INV_127)
            .collect();
        fx.push(
            &format!("{name}.weight"),
            "I8",
            &[n, k],
            codes.iter().map(|&q| q as u8).collect(),
        );
        fx.push(&format!("{name}.SCB"), "F32", &[n], f32_bytes(&scb));
        fx.push(&format!("{name}.weight_format"), "U8", &[], vec![0]);
        fx.expected.push(Expected {
            name: format!("{name}.weight"),
            scheme: "bnb-int8",
            bits: 8,
            group_size: None,
            shape: vec![n as u64, k as u64],
            values,
            codes: codes.into_iter().map(i64::from).collect(),
        });
    }
    push_lm_head(&mut fx, &mut rng, "F16");
    let qc = json!({
        "quant_method": "bitsandbytes",
        "_load_in_8bit": true,
        "_load_in_4bit": false,
        "llm_int8_threshold": 6.0,
        "llm_int8_skip_modules": ["lm_head"],
        "llm_int8_enable_fp32_cpu_offload": false,
        "llm_int8_has_fp16_weight": false,
        "bnb_4bit_quant_type": "fp4",
        "bnb_4bit_use_double_quant": false,
        "bnb_4bit_compute_dtype": "float32",
        "bnb_4bit_quant_storage": "uint8",
        "load_in_4bit": false,
        "load_in_8bit": true
    });
    fx.push_json(
        "config.json",
        &json!({"architectures": ["TinyForTest"], "model_type": "tiny", "torch_dtype": "float16", "quantization_config": qc}),
    );
    fx
}
