//! compressed-tensors integer formats (QUANT.md §3): `pack-quantized` and
//! `naive-quantized` INT8. The library returns the scale dtype: each value
//! is `(q - zp) * s` rounded once to BF16.

use serde_json::{Value, json};

use super::intq::{IntLinear, group_index, quantize};
use super::num::{Rng, round_bf16, weights};
use super::pack::{bf16_bytes, i32_bytes, i64_bytes, pack_padded, pack_stream};
use super::{Expected, Fixture, push_lm_head};

/// The linear modules of the compressed-tensors fixtures: N = 80 makes
/// the zero points of 3-, 5-, 6- and 7-bit end inside a word; K as in
/// `LINEARS`, at least two groups of 128.
pub const CT_LINEARS: [(&str, usize, usize); 2] = [
    ("model.layers.0.self_attn.q_proj", 64, 256),
    ("model.layers.0.mlp.down_proj", 80, 384),
];

/// A `quantization_config` of compressed-tensors with one config group
/// targeting Linear, `ignore: ["lm_head"]`, shaped like
/// quant-samples/ct_*/config.json.
pub fn ct_config(format: &str, weights: &Value, input_activations: &Value, version: &str) -> Value {
    json!({
        "architectures": ["TinyForTest"],
        "model_type": "tiny",
        "quantization_config": {
            "config_groups": {
                "group_0": {
                    "format": format,
                    "input_activations": input_activations,
                    "output_activations": null,
                    "targets": ["Linear"],
                    "weights": weights
                }
            },
            "format": format,
            "global_compression_ratio": null,
            "ignore": ["lm_head"],
            "kv_cache_scheme": null,
            "moe_sparsity_config": null,
            "quant_method": "compressed-tensors",
            "quantization_status": "compressed",
            "sparsity_config": {},
            "transform_config": {},
            "version": version
        }
    })
}

/// One row of codes packed the way compressed-tensors `pack_to_int32` does
/// it: densely (>= 0.17) or `floor(32/b)` per word (< 0.17).
fn ct_pack_row(codes: &[u32], bits: u32, dense: bool) -> Vec<u32> {
    if dense {
        pack_stream(codes, bits)
    } else {
        pack_padded(codes, bits)
    }
}

fn expected_ct(name: &str, scheme: &'static str, q: &IntLinear, group: Option<u64>) -> Expected {
    Expected {
        name: format!("{name}.weight"),
        scheme,
        bits: q.bits,
        group_size: group,
        shape: vec![q.n as u64, q.k as u64],
        values: q.values(round_bf16),
        codes: q.codes.iter().map(|&c| i64::from(c) - q.offset()).collect(),
    }
}

/// compressed-tensors `pack-quantized`: `weight_packed` I32
/// [N, ceil(K*b/32)] (dense) or [N, ceil(K/floor(32/b))] (padded), codes
/// offset-binary (`q + 2^(b-1)`); `weight_scale` BF16 [N, 1] (channel) or
/// [N, K/G]; `weight_shape` I64 [2]; asymmetric: `weight_zero_point` I32,
/// `zp + 2^(b-1)` packed down N, [ceil(N*b/32), ng] (or padded); with
/// `g_idx`: `weight_g_idx` I32 [K], permuted (old `actorder: "group"`).
///
/// `bits` 1..=8; `dense: false` is the packing of compressed-tensors < 0.17
/// (`version: "0.16.0"`), which could not write 5-7 bits (panics).
/// `group: None` is per channel (then `g_idx` must be false). Versions:
/// "0.20.1" dense, "0.17.0" dense with g_idx (0.20.1 rejects
/// `actorder="group"`), "0.16.0" padded.
pub fn ct_pack(bits: u32, group: Option<u64>, sym: bool, dense: bool, g_idx: bool) -> Fixture {
    assert!((1..=8).contains(&bits), "CT pack bits {bits}");
    assert!(
        dense || !(5..=7).contains(&bits),
        "compressed-tensors < 0.17 could not pack {bits} bits"
    );
    assert!(
        group.is_some() || !g_idx,
        "weight_g_idx needs a group strategy"
    );
    let seed = 0x4354_5041
        ^ u64::from(bits) << 32
        ^ group.unwrap_or(0) << 8
        ^ u64::from(sym)
        ^ u64::from(dense) << 1
        ^ u64::from(g_idx) << 2;
    let mut rng = Rng::new(seed);
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let g = group.map_or(k, |g| usize::try_from(g).expect("a group size"));
        assert!(k % g == 0, "group {g} must divide {k}");
        let groups = group_index(&mut rng, k, g, g_idx);
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize(&w, n, k, &groups, bits, sym, round_bf16);
        let mut packed = Vec::new();
        for row in 0..n {
            let codes: Vec<u32> = (0..k).map(|i| q.code(row, i)).collect();
            packed.extend(ct_pack_row(&codes, bits, dense));
        }
        let cols = packed.len() / n;
        let packed: Vec<i32> = packed.into_iter().map(|w| w as i32).collect();
        fx.push(
            &format!("{name}.weight_packed"),
            "I32",
            &[n, cols],
            i32_bytes(&packed),
        );
        fx.push(
            &format!("{name}.weight_scale"),
            "BF16",
            &[n, q.ng],
            bf16_bytes(&q.scales),
        );
        fx.push(
            &format!("{name}.weight_shape"),
            "I64",
            &[2],
            i64_bytes(&[n as i64, k as i64]),
        );
        if !sym {
            // Packed down dim 0: column g is a bitstream over the N rows.
            let columns: Vec<Vec<u32>> = (0..q.ng)
                .map(|gi| {
                    ct_pack_row(
                        &(0..n).map(|row| q.zero(row, gi)).collect::<Vec<_>>(),
                        bits,
                        dense,
                    )
                })
                .collect();
            let rows = columns[0].len();
            let zp: Vec<i32> = (0..rows)
                .flat_map(|r| columns.iter().map(move |c| c[r] as i32))
                .collect();
            fx.push(
                &format!("{name}.weight_zero_point"),
                "I32",
                &[rows, q.ng],
                i32_bytes(&zp),
            );
        }
        if g_idx {
            let gi: Vec<i32> = q.gidx.iter().map(|&g| g as i32).collect();
            fx.push(&format!("{name}.weight_g_idx"), "I32", &[k], i32_bytes(&gi));
        }
        fx.expected.push(expected_ct(name, "ct-pack", &q, group));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let weights = json!({
        "actorder": if g_idx { json!("group") } else { Value::Null },
        "dynamic": false,
        "group_size": group,
        "num_bits": bits,
        "observer": "minmax",
        "strategy": if group.is_some() { "group" } else { "channel" },
        "symmetric": sym,
        "type": "int"
    });
    let version = match (dense, g_idx) {
        (false, _) => "0.16.0",
        (true, true) => "0.17.0",
        (true, false) => "0.20.1",
    };
    fx.push_json(
        "config.json",
        &ct_config("pack-quantized", &weights, &Value::Null, version),
    );
    fx
}

/// compressed-tensors `naive-quantized` INT8 per channel: `weight` I8
/// [N, K], `weight_scale` BF16 [N, 1], and when asymmetric
/// `weight_zero_point` I8 [N, 1] (with zero points -128, 127 and 0 on rows
/// 0, 1 and 2). Codes are the signed i8 values.
pub fn ct_int8(sym: bool) -> Fixture {
    let mut rng = Rng::new(0x4354_4938 ^ u64::from(sym));
    let mut fx = Fixture::default();
    for (name, n, k) in CT_LINEARS {
        let gidx = vec![0; k];
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize(&w, n, k, &gidx, 8, sym, round_bf16);
        let weight: Vec<u8> = q
            .codes
            .iter()
            .map(|&c| (c as i64 - 128) as i8 as u8)
            .collect();
        fx.push(&format!("{name}.weight"), "I8", &[n, k], weight);
        fx.push(
            &format!("{name}.weight_scale"),
            "BF16",
            &[n, 1],
            bf16_bytes(&q.scales),
        );
        if !sym {
            let zp: Vec<u8> = q
                .zeros
                .iter()
                .map(|&z| (z as i64 - 128) as i8 as u8)
                .collect();
            fx.push(&format!("{name}.weight_zero_point"), "I8", &[n, 1], zp);
        }
        fx.expected.push(expected_ct(name, "ct-int8", &q, None));
    }
    push_lm_head(&mut fx, &mut rng, "BF16");
    let weights = json!({
        "dynamic": false,
        "group_size": null,
        "num_bits": 8,
        "strategy": "channel",
        "symmetric": sym,
        "type": "int"
    });
    fx.push_json(
        "config.json",
        &ct_config("naive-quantized", &weights, &Value::Null, "0.20.1"),
    );
    fx
}
