//! The reference decoders of `refdec` against the libraries' own
//! dequantization of the nine quant-samples (`oracle.safetensors`): the
//! conventions the generators follow are the libraries'. Skipped when the
//! samples are not at hand.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;

use super::bnb::nf4_map;
use super::refdec::{self, Decoded};

/// Where the library-made samples are: $TENSORSCOPE_QUANT_SAMPLES, else
/// tests/data/quant-samples, else /work/shared/quant-samples.
fn samples_dir() -> Option<PathBuf> {
    let env = std::env::var_os("TENSORSCOPE_QUANT_SAMPLES").map(PathBuf::from);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/quant-samples");
    env.into_iter()
        .chain([repo, PathBuf::from("/work/shared/quant-samples")])
        .find(|d| d.join("bnb_nf4").is_dir())
}

type Dec = fn(&SafeTensors<'_>, &str) -> Decoded;

/// The reference decoders against the libraries' own dequantization: the
/// conventions the generators follow are the libraries'. Skipped when the
/// samples are not at hand.
#[test]
fn reference_decoders_reproduce_the_sample_oracles() {
    let Some(dir) = samples_dir() else {
        eprintln!("quant-samples not found: skipped");
        return;
    };
    let q = "model.layers.0.self_attn.q_proj";
    let d = "model.layers.0.mlp.down_proj";
    let cases: [(&str, Dec); 8] = [
        ("gptq_w4_g128_sym_actorder_v1", |st, m| {
            refdec::gptq(st, m, 4, true)
        }),
        ("awq_gemm_w4_g128", |st, m| refdec::awq(st, m, 128)),
        ("ct_w4a16_group128_sym", |st, m| refdec::ct_pack(st, m, 4)),
        ("ct_fp8_channel_dynamic", |st, m| {
            refdec::fp8_scaled(
                st,
                &format!("{m}.weight"),
                &format!("{m}.weight_scale"),
                "BF16",
            )
        }),
        ("ct_nvfp4a16", refdec::ct_nvfp4),
        ("fp8_block128_deepseek", |st, m| {
            refdec::fp8_scaled(
                st,
                &format!("{m}.weight"),
                &format!("{m}.weight_scale_inv"),
                "F32",
            )
        }),
        ("bnb_nf4", refdec::bnb4),
        ("mlx_affine_4bit_g64", |st, m| {
            refdec::mlx(st, m, "affine", 64)
        }),
    ];
    for (sample, dec) in cases {
        for m in [q, d] {
            compare_to_oracle(&dir, sample, m, &format!("{m}.weight"), dec);
        }
    }
    let p = "model.layers.0.mlp.experts";
    for proj in ["gate_up_proj", "down_proj"] {
        let name = format!("{p}.{proj}");
        compare_to_oracle(
            &dir,
            "mxfp4_gptoss",
            &name,
            &format!("{name}.as_linear_EOI"),
            refdec::gptoss,
        );
    }
    // bnb's stored NF4 map is the table of the generators, bit for bit.
    let bytes = std::fs::read(dir.join("bnb_nf4/model.safetensors")).expect("the sample");
    let st = SafeTensors::deserialize(&bytes).expect("the sample");
    let stored = refdec::floats(&st, &format!("{d}.weight.quant_map"));
    assert_eq!(
        stored.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        nf4_map().map(f32::to_bits)
    );
}

fn compare_to_oracle(
    dir: &Path,
    sample: &str,
    module: &str,
    oracle_name: &str,
    dec: fn(&SafeTensors<'_>, &str) -> Decoded,
) {
    let model = std::fs::read(dir.join(sample).join("model.safetensors")).expect("the sample");
    let oracle = std::fs::read(dir.join(sample).join("oracle.safetensors")).expect("the oracle");
    let st = SafeTensors::deserialize(&model).expect("the sample");
    let ot = SafeTensors::deserialize(&oracle).expect("the oracle");
    let got = dec(&st, module);
    let want = refdec::floats(&ot, oracle_name);
    assert_eq!(got.values.len(), want.len(), "{sample} {module}");
    let bad = got.values.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(
        bad,
        0,
        "{sample} {module}: {bad} of {} values differ from the oracle",
        want.len()
    );
}
