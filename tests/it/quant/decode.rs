//! The quantization layer on checkpoints generated from QUANT.md's
//! formulas (`r#gen`): every variant of every family is found with its
//! scheme, bits, group and logical shape, and decodes bit-exactly to the
//! values and codes the writing library gives; hostile checkpoints give
//! `inconsistent` with evidence, never a panic.

use tensorscope::Checkpoint;
use tensorscope::quant::{self, Dequantizer, Status};

use super::r#gen::{self as g, Fixture};

/// Our scheme id for the generator's family id.
fn scheme_id(family: &str) -> &'static str {
    match family {
        "gptq" => "gptq",
        "awq" => "awq-gemm",
        "ct-pack" => "ct-pack-quantized",
        "ct-int8" => "ct-int-quantized",
        "ct-fp8" | "modelopt-fp8" | "fp8-block" => "fp8",
        "ct-nvfp4" | "modelopt-nvfp4" | "mlx-nvfp4" => "nvfp4",
        "ct-mxfp4" | "mlx-mxfp4" => "mxfp4",
        "ct-mxfp8" | "mlx-mxfp8" => "mxfp8",
        "ct-mxfp6" => "mxfp6",
        "mxfp4-gptoss" => "mxfp4-gpt-oss",
        "bnb-nf4" | "bnb-fp4" => "bnb-4bit",
        "bnb-int8" => "bnb-int8",
        "mlx-affine" => "mlx-affine",
        other => panic!("unknown family {other}"),
    }
}

/// Every generated variant, named.
pub fn variants() -> Vec<(String, Fixture)> {
    let mut v: Vec<(String, Fixture)> = Vec::new();
    for bits in [2, 3, 4, 8] {
        for group in [-1i64, 32, 128] {
            for (sym, v1) in [(true, true), (false, true), (false, false), (true, false)] {
                for act in [false, true] {
                    if group == -1 && act {
                        continue;
                    }
                    let legacy = bits == 4 && group == 128 && act;
                    v.push((
                        format!("gptq b{bits} g{group} sym={sym} v1={v1} act={act}"),
                        g::gptq(bits, group, sym, v1, act, legacy),
                    ));
                }
            }
        }
    }
    for group in [32, 64, 128] {
        v.push((format!("awq g{group}"), g::awq_gemm(group, group)));
    }
    for bits in 1..=8u32 {
        for group in [None, Some(32), Some(128)] {
            for sym in [true, false] {
                for dense in [true, false] {
                    if !dense && (5..=7).contains(&bits) {
                        continue;
                    }
                    v.push((
                        format!("ct-pack b{bits} g{group:?} sym={sym} dense={dense}"),
                        g::ct_pack(bits, group, sym, dense, false),
                    ));
                }
            }
        }
    }
    v.push((
        "ct-pack b4 g_idx".into(),
        g::ct_pack(4, Some(32), true, true, true),
    ));
    v.push((
        "ct-pack b3 g_idx asym".into(),
        g::ct_pack(3, Some(32), false, true, true),
    ));
    for sym in [true, false] {
        v.push((format!("ct-int8 sym={sym}"), g::ct_int8(sym)));
    }
    for s in ["tensor", "channel", "block"] {
        v.push((format!("ct-fp8 {s}"), g::ct_fp8(s)));
    }
    v.push(("ct-nvfp4".into(), g::ct_nvfp4()));
    v.push(("ct-mxfp4".into(), g::ct_mxfp4()));
    v.push(("ct-mxfp8".into(), g::ct_mxfp8()));
    v.push(("ct-mxfp6".into(), g::ct_mxfp6()));
    v.push(("modelopt-nvfp4".into(), g::modelopt_nvfp4()));
    v.push(("modelopt-fp8".into(), g::modelopt_fp8()));
    v.push(("fp8-block f32".into(), g::fp8_block(false)));
    v.push(("fp8-block ue8m0".into(), g::fp8_block(true)));
    for e in [1, 3] {
        v.push((format!("gpt-oss E={e}"), g::gptoss_mxfp4(e)));
    }
    for qt in ["nf4", "fp4"] {
        for nested in [false, true] {
            for (bs, dt) in [(64, "bfloat16"), (128, "float16"), (32, "float32")] {
                v.push((
                    format!("bnb4 {qt} nested={nested} b{bs} {dt}"),
                    g::bnb4(qt, nested, bs, dt),
                ));
            }
        }
    }
    v.push(("bnb8".into(), g::bnb8()));
    for bits in [2, 3, 4, 5, 6, 8] {
        for group in [32, 64, 128] {
            let dt = if bits % 2 == 0 { "BF16" } else { "F16" };
            v.push((
                format!("mlx b{bits} g{group} {dt}"),
                g::mlx_affine(bits, group, dt),
            ));
        }
    }
    v.push(("mlx-mxfp4".into(), g::mlx_mxfp4()));
    v.push(("mlx-nvfp4".into(), g::mlx_nvfp4()));
    v.push(("mlx-mxfp8".into(), g::mlx_mxfp8()));
    v
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a == 0.0 && b == 0.0)
}

#[test]
fn every_generated_variant_decodes_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, (label, fx)) in variants().into_iter().enumerate() {
        let sub = dir.path().join(format!("v{i}"));
        let path = fx.write(&sub);
        let ck = Checkpoint::open(&path).expect("open fixture");
        let Some(q) = quant::detect(&ck) else {
            failures.push(format!("{label}: nothing detected"));
            continue;
        };
        for want in &fx.expected {
            let Some(lt) = q.find(&want.name) else {
                failures.push(format!("{label}: no logical tensor {}", want.name));
                continue;
            };
            let facts = (
                lt.scheme().id(),
                lt.bits(),
                lt.group_size(),
                lt.shape().to_vec(),
            );
            let expected = (
                scheme_id(want.scheme),
                want.bits,
                want.group_size,
                want.shape.clone(),
            );
            if facts != expected || lt.status() != Status::Decoded {
                failures.push(format!(
                    "{label} {}: found {facts:?} {} ({}), expected {expected:?}",
                    want.name,
                    lt.status(),
                    lt.message()
                ));
                continue;
            }
            let dq = Dequantizer::new(&ck, lt).expect("decoded");
            let mut vals = vec![0f32; want.values.len()];
            let mut codes = vec![0i32; want.values.len()];
            assert_eq!(
                dq.values_and_codes(0, &mut vals, &mut codes),
                vals.len(),
                "{label}"
            );
            if let Some((j, (got, w))) = vals
                .iter()
                .zip(&want.values)
                .enumerate()
                .find(|(_, (a, b))| !same(**a, **b))
            {
                failures.push(format!(
                    "{label} {} [{j}]: value {got}, expected {w}",
                    want.name
                ));
                continue;
            }
            if let Some((j, (got, w))) = codes
                .iter()
                .zip(&want.codes)
                .enumerate()
                .find(|(_, (a, b))| i64::from(**a) != **b)
            {
                failures.push(format!(
                    "{label} {} [{j}]: code {got}, expected {w}",
                    want.name
                ));
                continue;
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 300, "only {checked} logical tensors checked");
}

#[test]
fn hostile_checkpoints_are_inconsistent_with_evidence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&str, Fixture, &str); 7] = [
        (
            "scales of the wrong shape",
            g::hostile_scales_wrong_shape(),
            "scale",
        ),
        ("a missing part", g::hostile_missing_part(), ""),
        (
            "bits that do not fit the shapes",
            g::hostile_bits_mismatch(),
            "bits",
        ),
        (
            "g_idx beyond the groups",
            g::hostile_gidx_out_of_range(),
            "g_idx",
        ),
        (
            "a config naming another method",
            g::hostile_config_other_method(),
            "quant_method",
        ),
        (
            "a config that is not JSON",
            g::hostile_config_not_json(),
            "",
        ),
        ("a 100 MB config", g::hostile_config_huge(), ""),
    ];
    for (i, (what, fx, evidence)) in cases.into_iter().enumerate() {
        let path = fx.write(&dir.path().join(format!("h{i}")));
        let ck = Checkpoint::open(&path).expect("open fixture");
        let q = quant::detect(&ck);
        let text = format!("{q:#?}");
        match what {
            "a config that is not JSON" | "a 100 MB config" => {
                let q = q.unwrap_or_else(|| panic!("{what}: nothing detected"));
                assert!(
                    !q.config().problems.is_empty(),
                    "{what}: the config's problem is not reported: {text}"
                );
            }
            "a missing part" => {
                // GPTQ without qzeros is no known signature: its tensors stay
                // plain, and none is shown as decoded values.
                assert!(
                    q.as_ref()
                        .is_none_or(|q| q.tensors().iter().all(|t| t.status() != Status::Decoded)),
                    "{what}: {text}"
                );
            }
            _ => {
                let q = q.unwrap_or_else(|| panic!("{what}: nothing detected"));
                let bad: Vec<_> = q
                    .tensors()
                    .iter()
                    .filter(|t| t.status() == Status::Inconsistent)
                    .collect();
                assert!(!bad.is_empty(), "{what}: nothing inconsistent: {text}");
                assert!(
                    bad.iter()
                        .all(|t| t.message().contains(evidence)
                            && Dequantizer::new(&ck, t).is_none()),
                    "{what}: {text}"
                );
            }
        }
    }
}

/// The statistics of a logical tensor (its counting fast path, where it
/// applies) against the same values stored as an F32 tensor and scanned by
/// the float passes, and its code histogram against a direct count.
#[test]
#[expect(
    clippy::many_single_char_names,
    reason = "n elements, v and q figures, as in the other checks"
)]
fn dequantized_statistics_match_the_values_scanned_as_f32() {
    use tensorscope::TensorInfo;
    use tensorscope::jobs::{CancelToken, Progress};
    use tensorscope::stats::{StatsOptions, logical_stats, stats_of};

    let dir = tempfile::tempdir().expect("tempdir");
    let options = StatsOptions::default();
    let mut checked = 0;
    for (i, (label, fx)) in variants().into_iter().enumerate() {
        let path = fx.write(&dir.path().join(format!("s{i}")));
        let ck = Checkpoint::open(&path).expect("open fixture");
        let Some(q) = quant::detect(&ck) else {
            continue;
        };
        for lt in q.tensors().iter().filter(|t| t.status() == Status::Decoded) {
            let dq = Dequantizer::new(&ck, lt).expect("decoded");
            let n = usize::try_from(dq.len()).expect("small");
            let mut vals = vec![0f32; n];
            let mut codes = vec![0i32; n];
            dq.values_and_codes(0, &mut vals, &mut codes);
            let got = logical_stats(&ck, lt, &options, &CancelToken::new(), &Progress::new())
                .expect("stats")
                .expect("decoded");
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            let info = TensorInfo::new("v".into(), tensorscope::Dtype::F32, vec![n as u64], 0)
                .expect("info");
            let want = stats_of(
                &info,
                &bytes,
                &options,
                &CancelToken::new(),
                &Progress::new(),
            )
            .expect("f32 stats")
            .values;
            let v = &got.stats.values;
            assert_eq!(
                (v.count, v.nan, v.zeros, v.min, v.max, &v.quantiles),
                (
                    want.count,
                    want.nan,
                    want.zeros,
                    want.min,
                    want.max,
                    &want.quantiles
                ),
                "{label} {}",
                lt.name()
            );
            for (a, b, what) in [
                (v.mean, want.mean, "mean"),
                (v.std, want.std, "std"),
                (v.l2_norm, want.l2_norm, "l2"),
            ] {
                let (a, b) = (a.expect(what), b.expect(what));
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs().max(1e-30),
                    "{label} {}: {what} {a} vs {b}",
                    lt.name()
                );
            }
            let (lo, _) = dq.code_range();
            let mut direct = vec![0u64; got.quant.codes.counts.len()];
            for c in &codes {
                direct[usize::try_from(i64::from(*c) - i64::from(lo)).expect("in range")] += 1;
            }
            assert_eq!(
                got.quant.codes.counts,
                direct,
                "{label} {}: code counts",
                lt.name()
            );
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} checked");
}

/// compressed-tensors' `strategy: tensor`: one scale for the whole weight
/// (`weight_scale` of one element), made from the per-channel fixture.
#[test]
fn a_per_tensor_pack_quantized_scale_decodes() {
    let mut fx = g::ct_pack(4, None, true, true, false);
    let s0 = half::bf16::from_f32(0.0123);
    for t in &mut fx.tensors {
        if t.0.ends_with("weight_scale") {
            t.2 = vec![1];
            t.3 = s0.to_le_bytes().to_vec();
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let ck = Checkpoint::open(&fx.write(dir.path())).expect("open");
    let q = quant::detect(&ck).expect("quantized");
    for want in &fx.expected {
        let lt = q.find(&want.name).expect("logical tensor");
        assert_eq!(lt.status(), Status::Decoded, "{}", lt.message());
        assert!(lt.label().ends_with("per-tensor"), "{}", lt.label());
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        let mut vals = vec![0f32; want.codes.len()];
        dq.values(0, &mut vals);
        for (v, &c) in vals.iter().zip(&want.codes) {
            let exact = c as f64 * s0.to_f64();
            assert_eq!(*v, half::bf16::from_f64(exact).to_f32(), "code {c}");
        }
    }
}

/// compressed-tensors config groups: one naming a module by regex wins
/// over one targeting the `Linear` class, whatever their order.
#[test]
fn a_config_group_naming_the_module_wins_over_a_class_target() {
    let mut fx = g::ct_pack(8, Some(32), true, true, false);
    for (name, bytes) in &mut fx.files {
        if name == "config.json" {
            let mut v: serde_json::Value = serde_json::from_slice(bytes).expect("json");
            let q = &mut v["quantization_config"];
            let eight = q["config_groups"]["group_0"].clone();
            let mut four = eight.clone();
            four["weights"]["num_bits"] = 4.into();
            four["targets"] = serde_json::json!(["Linear"]);
            let mut named = eight;
            named["targets"] = serde_json::json!(["re:.*down_proj$"]);
            q["config_groups"] = serde_json::json!({"group_0": four, "group_1": named});
            *bytes = serde_json::to_vec(&v).expect("json");
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let ck = Checkpoint::open(&fx.write(dir.path())).expect("open");
    let q = quant::detect(&ck).expect("quantized");
    let down = q
        .find("model.layers.0.mlp.down_proj.weight")
        .expect("down_proj");
    assert_eq!(
        (down.status(), down.bits()),
        (Status::Decoded, 8),
        "{}",
        down.message()
    );
    // q_proj falls to the Linear group's 4 bits, which its shapes deny.
    let qp = q
        .find("model.layers.0.self_attn.q_proj.weight")
        .expect("q_proj");
    assert_eq!(qp.status(), Status::Inconsistent, "{}", qp.message());
    assert!(qp.message().contains("4 bits"), "{}", qp.message());
}

/// A part with no elements can carry any other dimension (the format
/// bounds only the product), and a config can say a group of 0: neither
/// may panic, and the weight is inconsistent.
#[test]
fn empty_parts_and_zero_groups_are_inconsistent_not_a_panic() {
    use crate::fixtures::with_header;
    let huge = 1u64 << 62;
    let header = format!(
        r#"{{"m.qweight":{{"dtype":"I32","shape":[2,8],"data_offsets":[0,64]}},"m.qzeros":{{"dtype":"I32","shape":[0,{huge}],"data_offsets":[64,64]}},"m.scales":{{"dtype":"F16","shape":[1,8],"data_offsets":[64,80]}}}}"#
    );
    let mut bytes = with_header(&header, 0);
    while !(bytes.len() - 8).is_multiple_of(8) {
        bytes.insert(8 + header.len(), b' ');
    }
    let pad = bytes.len() - 8;
    bytes[..8].copy_from_slice(&(pad as u64).to_le_bytes());
    bytes.resize(bytes.len() + 80, 0x11);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.safetensors");
    std::fs::write(&path, &bytes).expect("write");
    let ck = Checkpoint::open(&path).expect("a valid file");
    let q = quant::detect(&ck).expect("a quantized module");
    let lt = q.tensors().first().expect("one");
    assert_eq!(lt.status(), Status::Inconsistent);
    assert!(lt.message().contains("no elements"), "{}", lt.message());

    let mut fx = g::mlx_affine(4, 64, "BF16");
    for (name, content) in &mut fx.files {
        if name == "config.json" {
            *content = br#"{"quantization": {"group_size": 0, "bits": 4}}"#.to_vec();
        }
    }
    let path = fx.write(&dir.path().join("mlx0"));
    let ck = Checkpoint::open(&path).expect("open");
    let q = quant::detect(&ck).expect("quantized");
    assert!(
        q.tensors()
            .iter()
            .all(|t| t.status() == Status::Inconsistent)
    );
}

/// Double-quantized bitsandbytes: the scales' distribution is of the
/// decoded per-block absmax (one per block, as the values use them), not
/// of their 8-bit codes.
#[test]
fn nested_absmax_distribution_is_of_decoded_values() {
    use tensorscope::jobs::{CancelToken, Progress};
    use tensorscope::stats::{StatsOptions, logical_stats};
    let fx = g::bnb4("nf4", true, 64, "bfloat16");
    let dir = tempfile::tempdir().expect("tempdir");
    let ck = Checkpoint::open(&fx.write(dir.path())).expect("open");
    let q = quant::detect(&ck).expect("quantized");
    for lt in q.tensors() {
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        let s = logical_stats(
            &ck,
            lt,
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("stats")
        .expect("decoded");
        let sc = s.quant.scales.expect("scales");
        let blocks = lt.numel().div_ceil(64);
        assert_eq!(sc.count, blocks);
        let absmax: Vec<f64> = (0..blocks)
            .map(|b| dq.scale_at(b * 64).expect("block"))
            .collect();
        let lo = absmax.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = absmax.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!((sc.min, sc.max), (Some(lo), Some(hi)), "{}", lt.name());
        assert!(lo > 0.0, "decoded absmax are positive: {lo}");
    }
}
