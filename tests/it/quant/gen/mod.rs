//! Generators of small quantized safetensors checkpoints, one per scheme of
//! QUANT.md (/work/shared/QUANT.md), each with the exact values the library
//! that writes the scheme would dequantize to.
//!
//! Every generator is deterministic: its pseudo-random stream (splitmix64)
//! is seeded from its parameters. The weights are drawn first (a normal
//! distribution, a per-row spread and a few outliers), then quantized the
//! way the writing library does it, roughly: the quantizer's choices matter
//! little, because `Expected` is computed from the stored codes and scales
//! with the formulas and the roundings of QUANT.md §9, never from the
//! weights before quantization.
//!
//! The modules: `num` (dtypes, roundings, the FP4/FP6/FP8 tables, the
//! generator), `pack` (bit packing, bytes), `intq` (integer group
//! quantization shared by GPTQ, AWQ, compressed-tensors), then one file per
//! family (`gptq` with AWQ, `ct`, `fp` for FP8, `mx` for FP4/FP6, `bnb`,
//! `mlx`), and `hostile` (inconsistent checkpoints). The self-tests: `tests`
//! checks every generator against `refdec`, reference decoders written
//! apart from the generators, and `samples` checks `refdec` against the
//! libraries' own output on quant-samples when they are at hand.
//!
//! Reach the module as `crate::quant::r#gen` (`gen` is a reserved keyword
//! in edition 2024).

mod bnb;
mod ct;
mod fp;
mod gptq;
mod hostile;
mod intq;
mod mlx;
mod mx;
pub mod num;
pub mod pack;
#[cfg(test)]
mod refdec;
#[cfg(test)]
mod samples;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::fixtures::{REF_DTYPES, RefTensor, reference_file};

pub use bnb::{bnb4, bnb8};
pub use ct::{ct_int8, ct_pack};
pub use fp::{ct_fp8, ct_mxfp8, fp8_block, modelopt_fp8};
pub use gptq::{awq_gemm, gptq};
pub use hostile::{
    hostile_bits_mismatch, hostile_config_huge, hostile_config_not_json,
    hostile_config_other_method, hostile_gidx_out_of_range, hostile_missing_part,
    hostile_scales_wrong_shape,
};
pub use mlx::{mlx_affine, mlx_mxfp4, mlx_mxfp8, mlx_nvfp4};
pub use mx::{ct_mxfp4, ct_mxfp6, ct_nvfp4, gptoss_mxfp4, modelopt_nvfp4};

/// The size of the `config.json` that `Fixture::write` generates when
/// `Fixture::huge_config` is set: 100 MiB.
pub const HUGE_CONFIG_BYTES: u64 = 100 * 1024 * 1024;

/// A quantized checkpoint: its tensors, its metadata, the files beside it,
/// and what a correct decoder must find in it.
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    /// Stored tensors: (name, dtype as safetensors string e.g. "I32",
    /// "F8_E4M3", "U8", "F16", "BF16", "F32", "I64", "U32", "I8", "F8_E8M0"),
    /// shape, little-endian bytes.
    pub tensors: Vec<(String, String, Vec<usize>, Vec<u8>)>,
    /// The __metadata__ of the file (e.g. {"format":"mlx"}), may be empty.
    pub metadata: Vec<(String, String)>,
    /// Extra files beside model.safetensors: (file name, content), e.g.
    /// ("config.json", ...), ("quantize_config.json", ...),
    /// ("hf_quant_config.json", ...).
    pub files: Vec<(String, Vec<u8>)>,
    /// What a correct decoder must find, one per logical tensor. Empty for
    /// the hostile fixtures.
    pub expected: Vec<Expected>,
    /// When set, `write` also writes a `config.json` of exactly
    /// `HUGE_CONFIG_BYTES` bytes, generated in chunks so that the 100 MB
    /// never sit in memory. It is valid JSON: `{"model_type":"tiny",`, a
    /// run of spaces, then a GPTQ `quantization_config` and `}`. It takes
    /// the place of any `config.json` in `files`. Only
    /// `hostile_config_huge` sets it.
    pub huge_config: bool,
}

/// One logical tensor as a correct decoder must find it.
#[derive(Debug, Clone)]
pub struct Expected {
    /// Logical name, e.g. "model.layers.0.mlp.down_proj.weight"; gpt-oss:
    /// "model.layers.0.mlp.experts.down_proj".
    pub name: String,
    /// A short family id: "gptq", "awq", "ct-pack", "ct-int8", "ct-fp8",
    /// "ct-nvfp4", "ct-mxfp4", "ct-mxfp8", "ct-mxfp6", "modelopt-nvfp4",
    /// "modelopt-fp8", "fp8-block", "mxfp4-gptoss", "bnb-nf4", "bnb-fp4",
    /// "bnb-int8", "mlx-affine", "mlx-mxfp4", "mlx-nvfp4", "mlx-mxfp8".
    pub scheme: &'static str,
    pub bits: u32,
    /// None for per-channel and per-tensor scales. The elements per scale
    /// along K otherwise (16 or 32 for the FP4/MX schemes, the bnb
    /// blocksize, which runs over the flattened tensor). For 2-D blocks
    /// (FP8 block) the block side, 128.
    pub group_size: Option<u64>,
    /// Logical shape: nn.Linear [out=N, in=K]; gpt-oss experts [E, out, in].
    pub shape: Vec<u64>,
    /// Row-major values in the logical shape, as the writing library would
    /// dequantize them (with the roundings of QUANT.md §9).
    pub values: Vec<f32>,
    /// The integer code of each element (GPTQ/AWQ/MLX unsigned q; CT pack
    /// and CT int8: signed q; FP4/FP6/FP8 schemes: the raw code bits; bnb
    /// 4-bit: the 4-bit index; bnb int8: the i8 value), same order.
    pub codes: Vec<i64>,
}

impl Fixture {
    /// Writes model.safetensors and the extra files into `dir`; returns the
    /// path of model.safetensors.
    pub fn write(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).expect("create the fixture folder");
        let tensors: Vec<(String, RefTensor)> = self
            .tensors
            .iter()
            .map(|(name, dtype, shape, data)| {
                let tensor = RefTensor {
                    dtype: ref_dtype(dtype),
                    shape: shape.clone(),
                    data: data.clone(),
                };
                (name.clone(), tensor)
            })
            .collect();
        let metadata = (!self.metadata.is_empty()).then(|| {
            self.metadata
                .iter()
                .cloned()
                .collect::<HashMap<String, String>>()
        });
        let path = dir.join("model.safetensors");
        std::fs::write(&path, reference_file(&tensors, metadata)).expect("write the checkpoint");
        for (name, content) in &self.files {
            if self.huge_config && name == "config.json" {
                continue;
            }
            std::fs::write(dir.join(name), content).expect("write a file beside the checkpoint");
        }
        if self.huge_config {
            write_huge_config(&dir.join("config.json"));
        }
        path
    }

    /// The stored tensor called `name`, if any.
    pub fn tensor(&self, name: &str) -> Option<&(String, String, Vec<usize>, Vec<u8>)> {
        self.tensors.iter().find(|t| t.0 == name)
    }

    /// The file beside the checkpoint called `name`, if any.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|f| f.0 == name)
            .map(|f| f.1.as_slice())
    }

    fn push(&mut self, name: &str, dtype: &str, shape: &[usize], data: Vec<u8>) {
        let numel: usize = shape.iter().product();
        let bits = ref_dtype(dtype).bitsize();
        assert_eq!(
            data.len() * 8,
            numel * bits,
            "{name}: bytes for {dtype} {shape:?}"
        );
        self.tensors
            .push((name.to_owned(), dtype.to_owned(), shape.to_vec(), data));
    }

    fn push_json(&mut self, file: &str, value: &serde_json::Value) {
        let text = serde_json::to_vec_pretty(value).expect("a JSON value serializes");
        self.files.push((file.to_owned(), text));
    }
}

/// The reference crate's dtype for a safetensors dtype string.
pub fn ref_dtype(name: &str) -> safetensors::Dtype {
    *REF_DTYPES
        .iter()
        .find(|d| d.to_string() == name)
        .unwrap_or_else(|| panic!("unknown dtype {name}"))
}

/// Writes the 100 MiB config of `Fixture::huge_config` in 1 MiB chunks.
fn write_huge_config(path: &Path) {
    let head = br#"{"model_type":"tiny","#;
    let tail = br#""quantization_config":{"quant_method":"gptq","bits":4,"group_size":128,"desc_act":false,"sym":true,"checkpoint_format":"gptq"}}"#;
    let file = std::fs::File::create(path).expect("create the huge config");
    let mut out = std::io::BufWriter::new(file);
    out.write_all(head).expect("write the huge config");
    let mut left = HUGE_CONFIG_BYTES - (head.len() + tail.len()) as u64;
    let chunk = vec![b' '; 1 << 20];
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n]).expect("write the huge config");
        left -= n as u64;
    }
    out.write_all(tail).expect("write the huge config");
    out.flush().expect("write the huge config");
}

/// A plain (unquantized) `lm_head.weight` of `dtype` ("F16", "BF16" or
/// "F32"), which no `Expected` names: decoders must leave it alone.
fn push_lm_head(fx: &mut Fixture, rng: &mut num::Rng, dtype: &str) {
    let (n, k) = (32, 64);
    let values: Vec<f32> = (0..n * k).map(|_| (rng.normal() * 0.02) as f32).collect();
    let bytes = match dtype {
        "F16" => pack::f16_bytes(
            &values
                .iter()
                .map(|&v| num::round_f16(f64::from(v)))
                .collect::<Vec<_>>(),
        ),
        "BF16" => pack::bf16_bytes(
            &values
                .iter()
                .map(|&v| num::round_bf16(f64::from(v)))
                .collect::<Vec<_>>(),
        ),
        "F32" => pack::f32_bytes(&values),
        other => panic!("no lm_head of {other}"),
    };
    fx.push("lm_head.weight", dtype, &[n, k], bytes);
}

/// The linear modules of most fixtures: (prefix, N, K). Every K is at
/// least twice the largest group (128), so that no grouped fixture has a
/// single group per row, which would read as per channel.
const LINEARS: [(&str, usize, usize); 2] = [
    ("model.layers.0.self_attn.q_proj", 64, 256),
    ("model.layers.0.mlp.down_proj", 96, 384),
];
