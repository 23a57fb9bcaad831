//! Self-tests of the generators: every fixture is a file the official
//! `safetensors` crate reads back; its `Expected` agrees with an
//! independent reference decoder (`refdec`); a few hand-computed words.
//! The reference decoders themselves are checked on the library-made
//! samples in `samples`.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;

use super::bnb::{INV_127, dynamic_map, fp4_map, nf4_map, py_float};
use super::gptq::{awq_word, gptq_qzeros_row};
use super::num::{e2m3_value, e4m3_nearest, e4m3_value, round_bf16, round_f16};
use super::pack::{nibbles_high_first, nibbles_low_first, pack_fp6, pack_padded, pack_stream};
use super::refdec::{self, Decoded};
use super::*;

/// The quantization config of a fixture: config.json's
/// `quantization_config`, else quantize_config.json.
fn quant_config(fx: &Fixture) -> serde_json::Value {
    let parse = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).expect("JSON");
    let cfg = fx.file("config.json").map(parse);
    match cfg.as_ref().and_then(|c| c.get("quantization_config")) {
        Some(q) => q.clone(),
        None => parse(
            fx.file("quantize_config.json")
                .expect("a quantize_config.json"),
        ),
    }
}

/// What the reference decoder finds for `e`.
fn reference(st: &SafeTensors<'_>, fx: &Fixture, e: &Expected) -> Decoded {
    let m = e.name.strip_suffix(".weight").unwrap_or(&e.name);
    let w = format!("{m}.weight");
    let group = e.group_size.map_or(0, |g| g as usize);
    let ws = format!("{m}.weight_scale");
    match e.scheme {
        "gptq" => {
            let v1 = quant_config(fx)["checkpoint_format"] == "gptq";
            refdec::gptq(st, m, e.bits, v1)
        }
        "awq" => refdec::awq(st, m, group),
        "ct-pack" => refdec::ct_pack(st, m, e.bits),
        "ct-int8" => refdec::ct_int8(st, m),
        "ct-fp8" => {
            let out = if refdec::floats(st, &ws).len() == 1 {
                "F32"
            } else {
                "BF16"
            };
            refdec::fp8_scaled(st, &w, &ws, out)
        }
        "modelopt-fp8" | "ct-mxfp8" => refdec::fp8_scaled(st, &w, &ws, "F32"),
        "fp8-block" => refdec::fp8_scaled(st, &w, &format!("{m}.weight_scale_inv"), "F32"),
        "ct-nvfp4" => refdec::ct_nvfp4(st, m),
        "modelopt-nvfp4" => refdec::modelopt_nvfp4(st, m),
        "ct-mxfp4" => {
            let s = refdec::shape(st, &format!("{m}.weight_packed"));
            refdec::mxfp4(
                &refdec::bytes(st, &format!("{m}.weight_packed")),
                &refdec::bytes(st, &ws),
                s[0],
                2 * s[1],
            )
        }
        "ct-mxfp6" => refdec::ct_mxfp6(st, m),
        "mxfp4-gptoss" => refdec::gptoss(st, m),
        "bnb-nf4" | "bnb-fp4" => refdec::bnb4(st, m),
        "bnb-int8" => refdec::bnb8(st, m),
        "mlx-affine" => refdec::mlx(st, m, "affine", group),
        "mlx-mxfp4" => refdec::mlx(st, m, "mxfp4", group),
        "mlx-nvfp4" => refdec::mlx(st, m, "nvfp4", group),
        "mlx-mxfp8" => refdec::mlx(st, m, "mxfp8", group),
        other => panic!("no reference decoder for {other}"),
    }
}

/// Writes `fx`, reads it back with the official crate, and checks the
/// tensors, the metadata, the files and every `Expected` against the
/// reference decoders. `what` names the fixture in failures.
fn check(what: &str, fx: &Fixture) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = fx.write(dir.path());
    assert_eq!(path, dir.path().join("model.safetensors"));
    let bytes = std::fs::read(&path).expect("read the checkpoint back");
    let st = SafeTensors::deserialize(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(st.len(), fx.tensors.len(), "{what}: tensor count");
    for (name, dtype, shape, data) in &fx.tensors {
        let t = st
            .tensor(name)
            .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        assert_eq!(t.dtype().to_string(), *dtype, "{what}: {name}");
        assert_eq!(t.shape(), shape.as_slice(), "{what}: {name}");
        assert_eq!(t.data(), data.as_slice(), "{what}: {name}");
    }
    let (_, header) = SafeTensors::read_metadata(&bytes).expect("a header");
    let meta = header.metadata().clone().unwrap_or_default();
    assert_eq!(meta.len(), fx.metadata.len(), "{what}: metadata");
    for (k, v) in &fx.metadata {
        assert_eq!(meta.get(k), Some(v), "{what}: metadata {k}");
    }
    for (name, content) in &fx.files {
        let on_disk = std::fs::read(dir.path().join(name)).expect("a file beside the checkpoint");
        assert_eq!(&on_disk, content, "{what}: {name}");
        let json = Path::new(name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if json && what != "hostile_config_not_json" {
            serde_json::from_slice::<serde_json::Value>(content)
                .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        }
    }
    let mut names: Vec<&str> = fx.expected.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        fx.expected.len(),
        "{what}: logical names repeat"
    );
    for e in &fx.expected {
        check_expected(what, &st, fx, e);
    }
}

fn check_expected(what: &str, st: &SafeTensors<'_>, fx: &Fixture, e: &Expected) {
    let numel: u64 = e.shape.iter().product();
    assert_eq!(e.values.len() as u64, numel, "{what}: {} values", e.name);
    assert_eq!(e.codes.len() as u64, numel, "{what}: {} codes", e.name);
    assert!(
        e.values.iter().all(|v| v.is_finite()),
        "{what}: {} has a non-finite value",
        e.name
    );
    assert!(e.bits >= 1 && e.bits <= 8, "{what}: {} bits", e.name);
    assert!(
        e.group_size.is_none_or(|g| g > 0),
        "{what}: {} group",
        e.name
    );
    // Groups along K (not bnb's flat blocks, not the 2-D FP8 blocks).
    let along_k = !e.scheme.starts_with("bnb") && !matches!(e.scheme, "fp8-block" | "ct-fp8");
    if let (Some(g), true) = (e.group_size, along_k) {
        let k = e.shape.last().copied().unwrap_or(0);
        assert!(k >= 2 * g, "{what}: {} has one group per row", e.name);
    }
    let d = reference(st, fx, e);
    let shape: Vec<u64> = d.shape.iter().map(|&s| s as u64).collect();
    assert_eq!(shape, e.shape, "{what}: {} shape", e.name);
    let bad_codes = d.codes.iter().zip(&e.codes).filter(|(a, b)| a != b).count();
    assert_eq!(
        bad_codes, 0,
        "{what}: {} codes differ from the reference decoder",
        e.name
    );
    let bad: Vec<(usize, f32, f32)> = d
        .values
        .iter()
        .zip(&e.values)
        .enumerate()
        .filter(|(_, (a, b))| a.to_bits() != b.to_bits())
        .map(|(i, (a, b))| (i, *a, *b))
        .take(5)
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: {} values differ (index, reference, expected): {bad:?}",
        e.name
    );
    // The data is not degenerate: many distinct codes, some outliers.
    let mut codes = e.codes.clone();
    codes.sort_unstable();
    codes.dedup();
    assert!(
        codes.len() >= 3.min(1 << e.bits),
        "{what}: {} uses {} codes",
        e.name,
        codes.len()
    );
}

#[test]
fn gptq_fixtures_decode() {
    for bits in [2, 3, 4, 8] {
        for (i, &(group, sym, v1, act)) in [
            (-1, true, true, false),
            (128, true, true, true),
            (32, false, true, false),
            (64, false, true, true),
            (128, false, false, true),
            (32, true, false, false),
        ]
        .iter()
        .enumerate()
        {
            let legacy = i == 3;
            let fx = gptq(bits, group, sym, v1, act, legacy);
            check(
                &format!("gptq({bits}, {group}, {sym}, {v1}, {act}, {legacy})"),
                &fx,
            );
            assert!(fx.tensor("lm_head.weight").is_some());
            assert_eq!(fx.file("quantize_config.json").is_some(), legacy);
        }
    }
}

#[test]
fn gptq_v1_sym_4bit_zeros_are_0x77777777() {
    assert_eq!(gptq_qzeros_row(&[8; 8], 4, true), [0x7777_7777]);
    assert_eq!(gptq_qzeros_row(&[2; 16], 2, true), [0x5555_5555]);
    assert_eq!(gptq_qzeros_row(&[128; 4], 8, true), [0x7F7F_7F7F]);
    let fx = gptq(4, 128, true, true, false, false);
    for (name, _, _, data) in fx.tensors.iter().filter(|t| t.0.ends_with(".qzeros")) {
        assert!(data.chunks(4).all(|w| w == [0x77; 4]), "{name}");
    }
    // v2 stores z itself: 0x88888888.
    let fx = gptq(4, 128, true, false, false, false);
    let qz = fx
        .tensor("model.layers.0.mlp.down_proj.qzeros")
        .expect("qzeros");
    assert!(qz.3.chunks(4).all(|w| w == [0x88; 4]));
}

#[test]
fn gptq_v1_zero_point_0_borrows_across_fields() {
    // v2 word 0x88888850 (field 0 = 0, field 1 = 5); minus 0x11111111 the
    // borrow of field 0 takes field 1 from 4 to 3.
    let zeros = [0, 5, 8, 8, 8, 8, 8, 8];
    assert_eq!(pack_stream(&zeros, 4), [0x8888_8850]);
    assert_eq!(gptq_qzeros_row(&zeros, 4, true), [0x7777_773F]);
    // 3-bit v1 is per field: (0 - 1) & 7 = 7, no borrow.
    let mut z3 = [4u32; 32];
    z3[0] = 0;
    let words = gptq_qzeros_row(&z3, 3, true);
    assert_eq!(words[0] & 0x3F, 0b011_111);
}

#[test]
fn three_bit_codes_straddle_words() {
    let mut codes = [0u32; 32];
    codes[10] = 0b111;
    assert_eq!(pack_stream(&codes, 3), [0xC000_0000, 0x0000_0001, 0]);
    let mut codes = [0u32; 32];
    codes[21] = 0b111;
    assert_eq!(pack_stream(&codes, 3), [0, 0x8000_0000, 0x3]);
    // Rows 0-9 of word 0 then row 10 across: the 96-bit stream of 0..32 & 7.
    let codes: Vec<u32> = (0..32).map(|i| i & 7).collect();
    let words = pack_stream(&codes, 3);
    assert_eq!(words.len(), 3);
    assert_eq!(
        words[0] & 0x3FFF_FFFF,
        0b001_000_111_110_101_100_011_010_001_000
    );
    // compressed-tensors < 0.17: 10 codes per word, 2 bits wasted.
    assert_eq!(pack_padded(&[7; 11], 3), [0x3FFF_FFFF, 0x7]);
}

#[test]
fn awq_order_interleaves_columns() {
    assert_eq!(awq_word(&[0, 1, 2, 3, 4, 5, 6, 7]), 0x7531_6420);
    assert_eq!(awq_word(&[1, 0, 0, 0, 0, 0, 0, 0]), 0x0000_0001);
    assert_eq!(awq_word(&[0, 1, 0, 0, 0, 0, 0, 0]), 0x0001_0000);
    for group in [32, 64, 128] {
        check(&format!("awq_gemm({group})"), &awq_gemm(group, 7));
    }
    assert_ne!(
        awq_gemm(64, 1).tensors[0].3,
        awq_gemm(64, 2).tensors[0].3,
        "the seed matters"
    );
}

#[test]
fn ct_pack_fixtures_decode() {
    for bits in 1..=8 {
        let cases = [
            (None, true, true, false),
            (Some(32), false, true, true),
            (Some(128), false, true, false),
            (Some(64), true, false, true),
            (Some(128), false, false, false),
            (None, false, false, false),
        ];
        for (group, sym, dense, g_idx) in cases {
            if !dense && (5..=7).contains(&bits) {
                continue;
            }
            let fx = ct_pack(bits, group, sym, dense, g_idx);
            check(
                &format!("ct_pack({bits}, {group:?}, {sym}, {dense}, {g_idx})"),
                &fx,
            );
            let version = &quant_config(&fx)["version"];
            assert_eq!(version == "0.16.0", !dense);
        }
    }
    // The version trap: K = 256, b = 3 is 24 words dense and 26 padded.
    let cols = |fx: &Fixture| {
        fx.tensor("model.layers.0.self_attn.q_proj.weight_packed")
            .expect("packed")
            .2[1]
    };
    assert_eq!(cols(&ct_pack(3, Some(128), true, true, false)), 24);
    assert_eq!(cols(&ct_pack(3, Some(128), true, false, false)), 26);
    // Zero points packed down N = 80: 3-bit is ceil(240/32) = 8 rows.
    let fx = ct_pack(3, Some(32), false, true, false);
    let zp = fx
        .tensor("model.layers.0.mlp.down_proj.weight_zero_point")
        .expect("zp");
    assert_eq!(zp.2, [8, 12]);
    let e = &fx.expected[0];
    assert!(
        e.codes.iter().all(|&c| (-4..=3).contains(&c)),
        "signed codes"
    );
}

#[test]
fn float_fixtures_decode() {
    check("ct_int8(true)", &ct_int8(true));
    check("ct_int8(false)", &ct_int8(false));
    for s in ["tensor", "channel", "block"] {
        check(&format!("ct_fp8({s})"), &ct_fp8(s));
    }
    let fx = ct_fp8("block");
    assert_eq!(
        fx.tensor("model.layers.0.self_attn.q_proj.weight_scale")
            .expect("scale")
            .2,
        [2, 3]
    );
    check("ct_nvfp4", &ct_nvfp4());
    check("ct_mxfp4", &ct_mxfp4());
    check("ct_mxfp8", &ct_mxfp8());
    check("ct_mxfp6", &ct_mxfp6());
    check("modelopt_nvfp4", &modelopt_nvfp4());
    check("modelopt_fp8", &modelopt_fp8());
    for fx in [modelopt_nvfp4(), modelopt_fp8()] {
        let hq: serde_json::Value =
            serde_json::from_slice(fx.file("hf_quant_config.json").expect("hf_quant_config"))
                .expect("JSON");
        assert_eq!(hq["producer"]["name"], "modelopt");
        assert_eq!(hq["quantization"]["exclude_modules"][0], "lm_head");
    }
    for ue8m0 in [false, true] {
        let fx = fp8_block(ue8m0);
        check(&format!("fp8_block({ue8m0})"), &fx);
        let s = fx
            .tensor("model.layers.0.self_attn.q_proj.weight_scale_inv")
            .expect("scale_inv");
        assert_eq!(s.1, if ue8m0 { "F8_E8M0" } else { "F32" });
        assert_eq!(s.2, [2, 3]);
    }
    for e in [1, 2, 4] {
        let fx = gptoss_mxfp4(e);
        check(&format!("gptoss_mxfp4({e})"), &fx);
        assert_eq!(fx.expected[0].shape, [e as u64, 128, 64]);
        assert_eq!(
            fx.tensor("model.layers.0.mlp.experts.down_proj_blocks")
                .expect("blocks")
                .2,
            [e, 64, 2, 16]
        );
    }
}

#[test]
fn bnb_fixtures_decode() {
    for quant_type in ["nf4", "fp4"] {
        for nested in [false, true] {
            for blocksize in [32, 64, 128, 4096] {
                for dtype in ["bfloat16", "float16", "float32"] {
                    let fx = bnb4(quant_type, nested, blocksize, dtype);
                    check(
                        &format!("bnb4({quant_type}, {nested}, {blocksize}, {dtype})"),
                        &fx,
                    );
                }
            }
        }
    }
    check("bnb8", &bnb8());
    assert_eq!(INV_127, (1.0f64 / 127.0) as f32);
}

#[test]
fn bnb_blob_and_tables_are_the_librarys() {
    let fx = bnb4("nf4", false, 64, "bfloat16");
    let blob = fx
        .tensor("model.layers.0.mlp.down_proj.weight.quant_state.bitsandbytes__nf4")
        .expect("the blob");
    assert_eq!(
        std::str::from_utf8(&blob.3).expect("UTF-8"),
        r#"{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [48, 100]}"#
    );
    let fx = bnb4("fp4", true, 64, "float16");
    let blob = fx
        .tensor("model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__fp4")
        .expect("the blob");
    let text = std::str::from_utf8(&blob.3).expect("UTF-8");
    assert!(text.starts_with(r#"{"quant_type": "fp4", "blocksize": 64, "dtype": "float16", "shape": [64, 320], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0."#), "{text}");
    // 320 blocks of 64: two nested blocks.
    assert_eq!(
        fx.tensor("model.layers.0.self_attn.q_proj.weight.nested_absmax")
            .expect("nested")
            .2,
        [2]
    );
    assert_eq!(
        fx.tensor("model.layers.0.self_attn.q_proj.weight.absmax")
            .expect("absmax")
            .1,
        "U8"
    );
    assert_eq!(nf4_map()[1], -0.696_192_8);
    assert_eq!(fp4_map()[1], 0.0625 / 12.0);
    assert_eq!(fp4_map()[8].to_bits(), (-0.0f32).to_bits());
    let dmap = dynamic_map();
    assert!(dmap.windows(2).all(|w| w[0] < w[1]) && dmap[0] >= -1.0 && dmap[255] == 1.0);
    assert_eq!(py_float(0.0123), "0.0123");
    assert_eq!(py_float(2.0), "2.0");
    assert_eq!(nibbles_high_first(&[1, 2, 3]), [0x12, 0x30]);
    assert_eq!(nibbles_low_first(&[1, 2, 3]), [0x21, 0x03]);
}

#[test]
fn mlx_fixtures_decode() {
    for bits in [2, 3, 4, 5, 6, 8] {
        for group in [32, 64, 128] {
            for dtype in ["BF16", "F16"] {
                let fx = mlx_affine(bits, group, dtype);
                check(&format!("mlx_affine({bits}, {group}, {dtype})"), &fx);
                assert_eq!(fx.metadata, [("format".to_owned(), "mlx".to_owned())]);
            }
        }
    }
    check("mlx_mxfp4", &mlx_mxfp4());
    check("mlx_nvfp4", &mlx_nvfp4());
    check("mlx_mxfp8", &mlx_mxfp8());
}

#[test]
fn small_float_formats() {
    assert_eq!(e4m3_value(0x7E), 448.0);
    assert_eq!(e4m3_value(0x38), 1.0);
    assert_eq!(e4m3_value(0x08), 2f32.powi(-6));
    assert_eq!(e4m3_value(0x01), 2f32.powi(-9));
    assert_eq!(e4m3_value(0xC0), -2.0);
    assert!(e4m3_value(0x7F).is_nan());
    assert_eq!(e4m3_nearest(1000.0), 0x7E);
    for c in 0..=255u8 {
        assert_eq!(e4m3_value(c).to_bits(), refdec::e4m3(c).to_bits(), "{c:#x}");
    }
    assert_eq!(e2m3_value(0x1F), 7.5);
    assert_eq!(e2m3_value(0x07), 0.875);
    assert_eq!(e2m3_value(0x28), -1.0);
    assert_eq!(pack_fp6(&[1, 2, 3, 4]), [0x81, 0x30, 0x10]);
    // One rounding from f64, with the sticky bits beyond f32 kept.
    assert_eq!(round_bf16(1.0 + 2f64.powi(-8)), 1.0);
    assert_eq!(
        round_bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-40)),
        1.0 + 2f32.powi(-7)
    );
    assert_eq!(
        round_f16(1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
        1.0 + 2f32.powi(-10)
    );
    assert_eq!(round_f16(-(1.0 + 2f64.powi(-11))), -1.0);
}

#[test]
fn hostile_fixtures_expect_nothing() {
    let all = [
        ("hostile_scales_wrong_shape", hostile_scales_wrong_shape()),
        ("hostile_missing_part", hostile_missing_part()),
        ("hostile_bits_mismatch", hostile_bits_mismatch()),
        ("hostile_gidx_out_of_range", hostile_gidx_out_of_range()),
        ("hostile_config_other_method", hostile_config_other_method()),
        ("hostile_config_not_json", hostile_config_not_json()),
    ];
    for (what, fx) in &all {
        assert!(fx.expected.is_empty(), "{what}");
        assert!(!fx.huge_config, "{what}");
        check(what, fx);
    }
    let scales = all[0]
        .1
        .tensor("model.layers.0.self_attn.q_proj.scales")
        .expect("scales");
    assert_eq!(scales.2, [2, 32]);
    assert!(all[1].1.tensors.iter().all(|t| !t.0.ends_with("qzeros")));
    let qc = quant_config(&all[2].1);
    assert_eq!(qc["bits"], 4);
    assert_eq!(
        all[2]
            .1
            .tensor("model.layers.0.self_attn.q_proj.qweight")
            .expect("qweight")
            .2,
        [24, 64]
    );
    assert!(
        serde_json::from_slice::<serde_json::Value>(all[5].1.file("config.json").expect("config"))
            .is_err()
    );
    assert_eq!(quant_config(&all[4].1)["quant_method"], "awq");
    assert!(
        all[4]
            .1
            .tensor("model.layers.0.mlp.down_proj.weight_packed")
            .is_some()
    );
}

#[test]
fn hostile_huge_config_is_written_lazily() {
    let fx = hostile_config_huge();
    assert!(fx.huge_config && fx.expected.is_empty() && fx.file("config.json").is_none());
    let dir = tempfile::tempdir().expect("a temporary folder");
    fx.write(dir.path());
    let config: PathBuf = dir.path().join("config.json");
    assert_eq!(
        std::fs::metadata(&config).expect("the config").len(),
        HUGE_CONFIG_BYTES
    );
    let text = std::fs::read(&config).expect("read the config");
    let value: serde_json::Value = serde_json::from_slice(&text).expect("valid JSON");
    assert_eq!(value["quantization_config"]["quant_method"], "gptq");
}
