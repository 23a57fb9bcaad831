//! The built-in demo checkpoint: every dtype of the format, with realistic
//! names, shapes and value distributions, so a newcomer with no file at hand
//! sees every feature at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::dtype::Dtype;
use crate::dtype::decode::code_table;
use crate::format::write::{WriteError, sources_of, write_file};
use crate::fsio::FileError;
use crate::jobs::{CancelToken, Progress};

/// File name of the demo checkpoint.
pub const DEMO_FILE_NAME: &str = "tensorscope-demo.safetensors";

/// A small deterministic generator (xorshift64*), so the demo is the same
/// on every run without a dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(f64::MIN_POSITIVE);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The code of `dtype` (≤ 8-bit float) whose value is nearest to `x`.
fn nearest_code(table: &[f64], x: f64) -> u8 {
    let mut best = 0usize;
    let mut best_err = f64::INFINITY;
    for (code, &v) in table.iter().enumerate() {
        let err = (v - x).abs();
        if err < best_err {
            best = code;
            best_err = err;
        }
    }
    best as u8
}

/// Encodes values into the small float `dtype`, packing sub-byte codes
/// (F4 low nibble first, F6 as the little-endian bit stream).
fn encode_small(dtype: Dtype, values: &[f64]) -> Vec<u8> {
    let Some(table) = code_table(dtype) else {
        return Vec::new();
    };
    let codes: Vec<u8> = values.iter().map(|&x| nearest_code(table, x)).collect();
    match dtype.bits() {
        4 => codes
            .chunks(2)
            .map(|p| p[0] | (p.get(1).copied().unwrap_or(0) << 4))
            .collect(),
        6 => {
            let mut out = vec![0u8; codes.len() * 6 / 8];
            for (k, &c) in codes.iter().enumerate() {
                for bit in 0..6 {
                    if c >> bit & 1 == 1 {
                        let pos = k * 6 + bit;
                        if let Some(b) = out.get_mut(pos / 8) {
                            *b |= 1 << (pos % 8);
                        }
                    }
                }
            }
            out
        }
        _ => codes,
    }
}

fn normals(rng: &mut Rng, n: usize, std: f64) -> Vec<f64> {
    (0..n).map(|_| rng.normal() * std).collect()
}

fn f32_bytes(v: impl IntoIterator<Item = f64>) -> Vec<u8> {
    v.into_iter()
        .flat_map(|x| (x as f32).to_le_bytes())
        .collect()
}

/// Builds the demo tensors: (name, dtype, shape, bytes).
#[expect(
    clippy::too_many_lines,
    reason = "a list of tensors, one short block per dtype; splitting it hides the list"
)]
fn tensors() -> Vec<(String, Dtype, Vec<u64>, Vec<u8>)> {
    let mut rng = Rng(0x5EED_CAFE_F00D_u64);
    let mut out: Vec<(String, Dtype, Vec<u64>, Vec<u8>)> = Vec::new();
    let (vocab, hidden, ff) = (512u64, 64u64, 128u64);
    let mut add = |name: &str, dtype: Dtype, shape: &[u64], data: Vec<u8>| {
        out.push((name.to_owned(), dtype, shape.to_vec(), data));
    };
    let n = |shape: &[u64]| shape.iter().product::<u64>() as usize;

    // F32 embedding and an F64 scalar.
    let s = [vocab, hidden];
    add(
        "model.embed_tokens.weight",
        Dtype::F32,
        &s,
        f32_bytes(normals(&mut rng, n(&s), 0.02)),
    );
    add(
        "model.logit_scale",
        Dtype::F64,
        &[],
        14.285_714_f64.to_le_bytes().to_vec(),
    );
    for layer in 0..2u64 {
        let p = format!("model.layers.{layer}");
        // BF16 and F16 projections.
        let s = [hidden, hidden];
        for (proj, dtype) in [
            ("q_proj", Dtype::BF16),
            ("k_proj", Dtype::BF16),
            ("v_proj", Dtype::F16),
            ("o_proj", Dtype::F16),
        ] {
            let vals = normals(&mut rng, n(&s), 0.05);
            let bytes: Vec<u8> = if dtype == Dtype::BF16 {
                vals.iter()
                    .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
                    .collect()
            } else {
                vals.iter()
                    .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
                    .collect()
            };
            add(&format!("{p}.self_attn.{proj}.weight"), dtype, &s, bytes);
        }
        // FP8 MLP weights with per-row F32 scales.
        let s = [ff, hidden];
        add(
            &format!("{p}.mlp.up_proj.weight"),
            Dtype::F8E4M3,
            &s,
            encode_small(Dtype::F8E4M3, &normals(&mut rng, n(&s), 60.0)),
        );
        add(
            &format!("{p}.mlp.up_proj.weight_scale"),
            Dtype::F32,
            &[ff, 1],
            f32_bytes((0..ff).map(|i| 0.001 + 0.0001 * i as f64)),
        );
        let s = [hidden, ff];
        add(
            &format!("{p}.mlp.down_proj.weight"),
            Dtype::F8E5M2,
            &s,
            encode_small(Dtype::F8E5M2, &normals(&mut rng, n(&s), 2.0)),
        );
        // LayerNorm in F32, one with a NaN and an Inf so a scan finds them.
        let mut norm: Vec<f64> = (0..hidden).map(|_| 1.0 + rng.normal() * 0.01).collect();
        if layer == 1 {
            norm[3] = f64::NAN;
            norm[7] = f64::INFINITY;
        }
        add(
            &format!("{p}.input_layernorm.weight"),
            Dtype::F32,
            &[hidden],
            f32_bytes(norm),
        );
    }
    // Microscaling (MX) formats: FP4/FP6 blocks with E8M0 block scales.
    let s = [hidden, hidden];
    add(
        "model.mx.fp4_block.weight",
        Dtype::F4,
        &s,
        encode_small(Dtype::F4, &normals(&mut rng, n(&s), 2.0)),
    );
    add(
        "model.mx.fp6_e2m3.weight",
        Dtype::F6E2M3,
        &s,
        encode_small(Dtype::F6E2M3, &normals(&mut rng, n(&s), 2.5)),
    );
    add(
        "model.mx.fp6_e3m2.weight",
        Dtype::F6E3M2,
        &s,
        encode_small(Dtype::F6E3M2, &normals(&mut rng, n(&s), 6.0)),
    );
    let scales: Vec<f64> = (0..hidden * 2)
        .map(|i| 2f64.powi((i % 9) as i32 - 6))
        .collect();
    add(
        "model.mx.block_scales",
        Dtype::F8E8M0,
        &[hidden, 2],
        encode_small(Dtype::F8E8M0, &scales),
    );
    // FNUZ variants (AMD MI300 style).
    let s = [32, 32];
    add(
        "model.fnuz.e4m3.weight",
        Dtype::F8E4M3Fnuz,
        &s,
        encode_small(Dtype::F8E4M3Fnuz, &normals(&mut rng, n(&s), 30.0)),
    );
    add(
        "model.fnuz.e5m2.weight",
        Dtype::F8E5M2Fnuz,
        &s,
        encode_small(Dtype::F8E5M2Fnuz, &normals(&mut rng, n(&s), 100.0)),
    );
    // Integers: ids, quantized weights, counters.
    add(
        "model.position_ids",
        Dtype::I64,
        &[1, 256],
        (0..256i64).flat_map(i64::to_le_bytes).collect(),
    );
    add(
        "model.token_type_ids",
        Dtype::I32,
        &[1, 256],
        (0..256i32).flat_map(|i| (i / 128).to_le_bytes()).collect(),
    );
    add(
        "model.int8.weight",
        Dtype::I8,
        &[64, 64],
        (0..4096)
            .map(|_| (rng.normal() * 30.0).clamp(-127.0, 127.0) as i8 as u8)
            .collect(),
    );
    add(
        "model.int8.zero_point",
        Dtype::U8,
        &[64],
        (0..64).map(|_| 128u8).collect(),
    );
    add(
        "model.int16.weight",
        Dtype::I16,
        &[32, 32],
        (0..1024)
            .flat_map(|_| ((rng.normal() * 3000.0) as i16).to_le_bytes())
            .collect(),
    );
    add(
        "model.vocab.counts",
        Dtype::U16,
        &[vocab],
        (0..vocab)
            .flat_map(|i| ((60_000 / (i + 1)) as u16).to_le_bytes())
            .collect(),
    );
    add(
        "model.vocab.hashes",
        Dtype::U32,
        &[vocab],
        (0..vocab)
            .flat_map(|_| (rng.next_u64() as u32).to_le_bytes())
            .collect(),
    );
    add(
        "model.step",
        Dtype::U64,
        &[],
        1_234_567_u64.to_le_bytes().to_vec(),
    );
    // A causal attention mask and complex rotary frequencies.
    let mask: Vec<u8> = (0..64u64 * 64)
        .map(|i| u8::from(i % 64 <= i / 64))
        .collect();
    add("model.causal_mask", Dtype::Bool, &[1, 64, 64], mask);
    let rope: Vec<u8> = (0..64u64)
        .flat_map(|pos| {
            (0..16u64).flat_map(move |k| {
                let theta = pos as f64 * 10_000f64.powf(-(k as f64) / 16.0);
                let mut b = (theta.cos() as f32).to_le_bytes().to_vec();
                b.extend_from_slice(&(theta.sin() as f32).to_le_bytes());
                b
            })
        })
        .collect();
    add("model.rotary.freqs_cis", Dtype::C64, &[64, 16], rope);
    // Edge cases: an empty tensor and a 4-D conv kernel.
    add("model.unused.bias", Dtype::F32, &[0], Vec::new());
    let s = [8, 3, 3, 3];
    add(
        "vision.patch_embed.weight",
        Dtype::F32,
        &s,
        f32_bytes(normals(&mut rng, n(&s), 0.1)),
    );
    out
}

/// Writes the demo checkpoint into `folder` and returns its path.
pub fn write_demo(folder: &Path) -> Result<PathBuf, WriteError> {
    std::fs::create_dir_all(folder).map_err(|e| FileError::from_io(folder, e))?;
    let built = tensors();
    let sources = sources_of(&built);
    let metadata = BTreeMap::from([
        ("format".to_owned(), "pt".to_owned()),
        ("model_type".to_owned(), "tensorscope-demo".to_owned()),
        (
            "quantization_config".to_owned(),
            r#"{"quant_method":"fp8","fmt":"e4m3","weight_block_size":[128,128],"modules_to_not_convert":["lm_head"]}"#.to_owned(),
        ),
        ("description".to_owned(), "A demo checkpoint with every safetensors dtype.".to_owned()),
    ]);
    let path = folder.join(DEMO_FILE_NAME);
    write_file(
        &path,
        &sources,
        Some(&metadata),
        &CancelToken::new(),
        &Progress::new(),
    )?;
    Ok(path)
}

/// The folder the demo is written to: a per-user folder in the system's
/// temporary directory (the demo is a throwaway the explorer rewrites on
/// every *Open demo*).
#[allow(
    clippy::disallowed_methods,
    reason = "the demo belongs in the system's temporary folder, and outlives the process"
)]
pub fn demo_folder() -> PathBuf {
    std::env::temp_dir().join(format!("tensorscope-demo-{}", whoami()))
}

fn whoami() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "user".into())
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Checkpoint;

    #[test]
    fn the_demo_holds_every_dtype_and_is_valid() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = write_demo(tmp.path()).expect("demo");
        let ck = Checkpoint::open(&path).expect("valid");
        for d in Dtype::ALL {
            assert!(ck.entries().any(|(_, i)| i.dtype() == d), "{d} missing");
        }
    }

    #[test]
    fn small_floats_encode_to_the_nearest_code() {
        let bytes = encode_small(Dtype::F4, &[0.5, -6.0, 1.4, 100.0]);
        // 0.5 = code 1, -6 = code 15, 1.4 -> 1.5 = code 3, 100 -> 6 = code 7.
        assert_eq!(bytes, [0xF1, 0x73]);
    }
}
