//! GPTQ (QUANT.md §1) and AutoAWQ GEMM (§2). Both compute in F16: each
//! value is `(q - z) * s` rounded once to F16.

use serde_json::json;

use super::intq::{IntLinear, group_index, quantize};
use super::num::{Rng, round_f16, weights};
use super::pack::{f16_bytes, i32_bytes, pack_stream};
use super::{Expected, Fixture, LINEARS, push_lm_head};

/// The constant GPTQModel's v2→v1 writer subtracts from each whole qzeros
/// word (and the v1 reader adds back): 1 in every field.
pub fn v1_word_constant(bits: u32) -> u32 {
    match bits {
        2 => 0x5555_5555,
        4 => 0x1111_1111,
        8 => 0x0101_0101,
        other => panic!("no word constant for {other}-bit GPTQ"),
    }
}

/// GPTQ qzeros of one group row: the zero points of the N columns as an
/// LSB-first bitstream along N. v1 (`checkpoint_format: "gptq"`) stores
/// z-1: for 2/4/8 bits by subtracting `v1_word_constant` from the whole
/// packed word mod 2^32 (the borrow of a zero point 0 crosses into the next
/// field, as GPTQModel writes it); for 3 bits per field, `(z-1) & 7`.
pub fn gptq_qzeros_row(zeros: &[u32], bits: u32, v1: bool) -> Vec<u32> {
    if !v1 {
        return pack_stream(zeros, bits);
    }
    if bits == 3 {
        let stored: Vec<u32> = zeros.iter().map(|&z| z.wrapping_sub(1) & 0x7).collect();
        return pack_stream(&stored, bits);
    }
    let c = v1_word_constant(bits);
    pack_stream(zeros, bits)
        .into_iter()
        .map(|w| w.wrapping_sub(c))
        .collect()
}

/// The Expected of an integer linear whose values are rounded to F16.
fn expected_f16(name: &str, scheme: &'static str, q: &IntLinear, group: Option<u64>) -> Expected {
    Expected {
        name: format!("{name}.weight"),
        scheme,
        bits: q.bits,
        group_size: group,
        shape: vec![q.n as u64, q.k as u64],
        values: q.values(round_f16),
        codes: q.codes.iter().map(|&c| i64::from(c)).collect(),
    }
}

fn to_i32(words: Vec<u32>) -> Vec<i32> {
    words.into_iter().map(|w| w as i32).collect()
}

/// The tensors of one GPTQ Linear: qweight I32 [K*b/32, N] (packed down
/// K), qzeros I32 [ng, N*b/32], scales F16 [ng, N], g_idx I32 [K].
fn push_gptq_linear(fx: &mut Fixture, name: &str, q: &IntLinear, v1: bool) {
    let (n, k, b) = (q.n, q.k, q.bits);
    let rows = k * b as usize / 32;
    let mut qweight = vec![0i32; rows * n];
    for col in 0..n {
        let codes: Vec<u32> = (0..k).map(|i| q.code(col, i)).collect();
        for (j, w) in pack_stream(&codes, b).into_iter().enumerate() {
            qweight[j * n + col] = w as i32;
        }
    }
    let mut qzeros = Vec::new();
    let mut scales = Vec::new();
    for g in 0..q.ng {
        let zeros: Vec<u32> = (0..n).map(|col| q.zero(col, g)).collect();
        qzeros.extend(to_i32(gptq_qzeros_row(&zeros, b, v1)));
        scales.extend((0..n).map(|col| q.scale(col, g)));
    }
    let gidx: Vec<i32> = q.gidx.iter().map(|&g| g as i32).collect();
    fx.push(
        &format!("{name}.qweight"),
        "I32",
        &[rows, n],
        i32_bytes(&qweight),
    );
    fx.push(
        &format!("{name}.qzeros"),
        "I32",
        &[q.ng, n * b as usize / 32],
        i32_bytes(&qzeros),
    );
    fx.push(
        &format!("{name}.scales"),
        "F16",
        &[q.ng, n],
        f16_bytes(&scales),
    );
    fx.push(&format!("{name}.g_idx"), "I32", &[k], i32_bytes(&gidx));
}

/// GPTQ: two Linear modules (`model.layers.0.self_attn.q_proj` [64, 256]
/// with an F16 bias, `model.layers.0.mlp.down_proj` [96, 384]) and an
/// unquantized F16 `lm_head.weight`. F16 scales.
///
/// `bits` 2, 3, 4 or 8; `group` -1 (per channel) or a size dividing 128;
/// `v1` = `checkpoint_format: "gptq"` (stores z-1, see
/// `gptq_qzeros_row`), else `"gptq_v2"`; `act_order` = `desc_act` with a
/// permuted g_idx; `legacy_config` = the quantization keys in
/// `quantize_config.json` (config.json has no `quantization_config`).
// Reason: the four flags are the signature the quantization tests code against.
#[allow(clippy::fn_params_excessive_bools)]
pub fn gptq(
    bits: u32,
    group: i64,
    sym: bool,
    v1: bool,
    act_order: bool,
    legacy_config: bool,
) -> Fixture {
    assert!(matches!(bits, 2 | 3 | 4 | 8), "GPTQ bits {bits}");
    assert!(
        group == -1 || (group > 0 && 128 % group == 0),
        "GPTQ group {group}"
    );
    let seed = 0x4750_5451
        ^ u64::from(bits) << 40
        ^ (group as u64) << 8
        ^ u64::from(sym) << 1
        ^ u64::from(v1) << 2
        ^ u64::from(act_order) << 3;
    let mut rng = Rng::new(seed);
    let mut fx = Fixture::default();
    for (name, n, k) in LINEARS {
        let g = if group == -1 { k } else { group as usize };
        let gidx = group_index(&mut rng, k, g, act_order);
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize(&w, n, k, &gidx, bits, sym, round_f16);
        push_gptq_linear(&mut fx, name, &q, v1);
        if name.ends_with("q_proj") {
            let b: Vec<f32> = (0..n).map(|_| round_f16(rng.normal() * 0.01)).collect();
            fx.push(&format!("{name}.bias"), "F16", &[n], f16_bytes(&b));
        }
        let group_size = (group != -1).then_some(group as u64);
        fx.expected.push(expected_f16(name, "gptq", &q, group_size));
    }
    push_lm_head(&mut fx, &mut rng, "F16");
    let qc = gptq_config(bits, group, sym, v1, act_order);
    if legacy_config {
        fx.push_json(
            "config.json",
            &json!({"model_type": "tiny", "torch_dtype": "float16"}),
        );
        fx.push_json("quantize_config.json", &qc);
    } else {
        fx.push_json(
            "config.json",
            &json!({"model_type": "tiny", "torch_dtype": "float16", "quantization_config": qc}),
        );
    }
    fx
}

/// The GPTQModel quantization config (the keys of quant-samples/gptq_*).
pub fn gptq_config(
    bits: u32,
    group: i64,
    sym: bool,
    v1: bool,
    act_order: bool,
) -> serde_json::Value {
    json!({
        "quant_method": "gptq",
        "bits": bits,
        "group_size": group,
        "desc_act": act_order,
        "sym": sym,
        "true_sequential": true,
        "static_groups": false,
        "damp_percent": 0.05,
        "lm_head": false,
        "checkpoint_format": if v1 { "gptq" } else { "gptq_v2" },
        "pack_dtype": "int32",
        "meta": {"quantizer": ["gptqmodel:7.7.0"]}
    })
}

/// AutoAWQ's interleave: nibble `i` of a packed word holds column
/// `8c + AWQ_ORDER[i]`.
pub const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// Packs 8 consecutive 4-bit codes (columns 8c..8c+8) into one AWQ word.
pub fn awq_word(codes: &[u32]) -> u32 {
    assert_eq!(codes.len(), 8);
    AWQ_ORDER
        .iter()
        .enumerate()
        .fold(0, |w, (i, &col)| w | codes[col] << (4 * i))
}

/// AutoAWQ GEMM (`version: "gemm"`), 4 bits, asymmetric zeros (stored
/// as-is), F16 scales: qweight I32 [K, N/8], qzeros I32 [K/G, N/8], scales
/// F16 [K/G, N], packed along N in the interleaved order `AWQ_ORDER`. The
/// modules of `gptq`, plus an F16 lm_head. `group` must divide 128.
pub fn awq_gemm(group: u64, seed: u64) -> Fixture {
    let g = usize::try_from(group).expect("a group size");
    assert!(g > 0 && 128 % g == 0, "AWQ group {group}");
    let mut rng = Rng::new(0x0041_5751 ^ seed << 16 ^ group);
    let mut fx = Fixture::default();
    for (name, n, k) in LINEARS {
        let gidx = group_index(&mut rng, k, g, false);
        let w = weights(&mut rng, n, k, 0.02);
        let q = quantize(&w, n, k, &gidx, 4, false, round_f16);
        let pack_rows = |rows: usize, at: &dyn Fn(usize, usize) -> u32| -> Vec<i32> {
            (0..rows)
                .flat_map(|r| {
                    (0..n / 8).map(move |c| {
                        let codes: Vec<u32> = (0..8).map(|j| at(r, 8 * c + j)).collect();
                        awq_word(&codes) as i32
                    })
                })
                .collect()
        };
        let qweight = pack_rows(k, &|i, col| q.code(col, i));
        let qzeros = pack_rows(q.ng, &|gi, col| q.zero(col, gi));
        let scales: Vec<f32> = (0..q.ng)
            .flat_map(|gi| (0..n).map(move |col| (gi, col)))
            .map(|(gi, col)| q.scale(col, gi))
            .collect();
        fx.push(
            &format!("{name}.qweight"),
            "I32",
            &[k, n / 8],
            i32_bytes(&qweight),
        );
        fx.push(
            &format!("{name}.qzeros"),
            "I32",
            &[q.ng, n / 8],
            i32_bytes(&qzeros),
        );
        fx.push(
            &format!("{name}.scales"),
            "F16",
            &[q.ng, n],
            f16_bytes(&scales),
        );
        fx.expected.push(expected_f16(name, "awq", &q, Some(group)));
    }
    push_lm_head(&mut fx, &mut rng, "F16");
    fx.push_json(
        "config.json",
        &json!({
            "model_type": "tiny",
            "torch_dtype": "float16",
            "quantization_config": {
                "quant_method": "awq",
                "zero_point": true,
                "q_group_size": group,
                "group_size": group,
                "w_bit": 4,
                "bits": 4,
                "version": "gemm",
                "modules_to_not_convert": null
            }
        }),
    );
    fx
}
