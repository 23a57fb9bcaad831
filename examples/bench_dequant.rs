//! Throughput of dequantization and of the statistics of dequantized
//! values, per quantization family, beside the machine's own memory read
//! bandwidth.
//!
//! ```sh
//! cargo run --release --example bench_dequant            # 64 Mi elements per family
//! cargo run --release --example bench_dequant -- --melems 256 --runs 5 --only MXFP4
//! ```
//!
//! For each family it writes a checkpoint of one `[N, K]` weight (random
//! codes, positive scales; K = 4096) with the config its library writes
//! into a temporary folder, reads it once so that it sits in the page
//! cache, then times, on one thread and on all threads (best of `--runs`):
//!
//! * the decode alone: every element through `Dequantizer::values` into a
//!   reused buffer;
//! * `stats --dequant` of the weight: the full default statistics of its
//!   values (exact quantiles) with its codes' histogram and its scales;
//!
//! and prints G elements/s, with the memory read bandwidth (a plain sum of
//! the mapped bytes) of the same machine for scale.

use std::collections::BTreeMap;
use std::path::Path;

use tensorscope::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::format::write::{sources_of, write_file};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::quant::{self, Dequantizer};
use tensorscope::stats::{StatsOptions, logical_stats};

#[allow(dead_code, reason = "each benchmark uses part of what they share")]
mod common;
use common::{best_of, pool};

const K: u64 = 4096;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, n: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(n as usize);
        while (v.len() as u64) < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n as usize);
        v
    }
}

fn f16s(n: u64, rng: &mut Rng) -> Vec<u8> {
    (0..n)
        .flat_map(|_| half::f16::from_f32(0.001 + (rng.next() % 1000) as f32 * 1e-5).to_le_bytes())
        .collect()
}
fn bf16s(n: u64, rng: &mut Rng) -> Vec<u8> {
    (0..n)
        .flat_map(|_| half::bf16::from_f32(0.001 + (rng.next() % 1000) as f32 * 1e-5).to_le_bytes())
        .collect()
}
fn f32s(n: u64, rng: &mut Rng) -> Vec<u8> {
    (0..n)
        .flat_map(|_| (0.001 + (rng.next() % 1000) as f32 * 1e-5).to_le_bytes())
        .collect()
}
fn i32s(v: impl Iterator<Item = i32>) -> Vec<u8> {
    v.flat_map(i32::to_le_bytes).collect()
}

/// A family's files: tensors and config.json.
struct Case {
    name: &'static str,
    tensors: Vec<(String, Dtype, Vec<u64>, Vec<u8>)>,
    config: &'static str,
    metadata: Option<(&'static str, &'static str)>,
}

#[expect(
    clippy::too_many_lines,
    clippy::many_single_char_names,
    reason = "one literal per family, in the names of QUANT.md"
)]
fn cases(n: u64) -> Vec<Case> {
    let mut r = Rng(7);
    let g = 128;
    let ng = K / g;
    let m = "model.layers.0.mlp.down_proj";
    let t = |s: &str, d: Dtype, shape: Vec<u64>, b: Vec<u8>| (format!("{m}.{s}"), d, shape, b);
    vec![
        Case {
            name: "GPTQ int4 g128 (v1)",
            tensors: vec![
                t(
                    "qweight",
                    Dtype::I32,
                    vec![K / 8, n],
                    r.bytes(K / 8 * n * 4),
                ),
                t(
                    "qzeros",
                    Dtype::I32,
                    vec![ng, n / 8],
                    i32s((0..ng * n / 8).map(|_| 0x7777_7777)),
                ),
                t("scales", Dtype::F16, vec![ng, n], f16s(ng * n, &mut r)),
                t(
                    "g_idx",
                    Dtype::I32,
                    vec![K],
                    i32s((0..K).map(|i| (i / g) as i32)),
                ),
            ],
            config: r#"{"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"desc_act":false,"checkpoint_format":"gptq"}}"#,
            metadata: None,
        },
        Case {
            name: "AWQ GEMM int4 g128",
            tensors: vec![
                t(
                    "qweight",
                    Dtype::I32,
                    vec![K, n / 8],
                    r.bytes(K * n / 8 * 4),
                ),
                t(
                    "qzeros",
                    Dtype::I32,
                    vec![ng, n / 8],
                    r.bytes(ng * n / 8 * 4),
                ),
                t("scales", Dtype::F16, vec![ng, n], f16s(ng * n, &mut r)),
            ],
            config: r#"{"quantization_config":{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm","zero_point":true}}"#,
            metadata: None,
        },
        Case {
            name: "compressed-tensors int4 g128",
            tensors: vec![
                t(
                    "weight_packed",
                    Dtype::I32,
                    vec![n, K / 8],
                    r.bytes(n * K / 8 * 4),
                ),
                t(
                    "weight_scale",
                    Dtype::BF16,
                    vec![n, ng],
                    bf16s(n * ng, &mut r),
                ),
                t(
                    "weight_shape",
                    Dtype::I64,
                    vec![2],
                    [n as i64, K as i64]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                ),
            ],
            config: r#"{"quantization_config":{"quant_method":"compressed-tensors","format":"pack-quantized","version":"0.20.1","config_groups":{"group_0":{"targets":["Linear"],"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"group","group_size":128}}}}}"#,
            metadata: None,
        },
        Case {
            name: "NVFP4 (compressed-tensors)",
            tensors: vec![
                t(
                    "weight_packed",
                    Dtype::U8,
                    vec![n, K / 2],
                    r.bytes(n * K / 2),
                ),
                t(
                    "weight_scale",
                    Dtype::F8E4M3,
                    vec![n, K / 16],
                    (0..n * K / 16).map(|i| 0x30 + (i % 16) as u8).collect(),
                ),
                t(
                    "weight_global_scale",
                    Dtype::F32,
                    vec![1],
                    100f32.to_le_bytes().to_vec(),
                ),
            ],
            config: r#"{"quantization_config":{"quant_method":"compressed-tensors","format":"nvfp4-pack-quantized"}}"#,
            metadata: None,
        },
        Case {
            name: "MXFP4 (gpt-oss experts)",
            tensors: vec![
                (
                    format!("{m}_blocks"),
                    Dtype::U8,
                    vec![1, n, K / 32, 16],
                    r.bytes(n * K / 2),
                ),
                (
                    format!("{m}_scales"),
                    Dtype::U8,
                    vec![1, n, K / 32],
                    (0..n * K / 32).map(|i| 120 + (i % 8) as u8).collect(),
                ),
            ],
            config: r#"{"quantization_config":{"quant_method":"mxfp4"}}"#,
            metadata: None,
        },
        Case {
            name: "FP8 block 128 (DeepSeek)",
            tensors: vec![
                t(
                    "weight",
                    Dtype::F8E4M3,
                    vec![n, K],
                    r.bytes(n * K).iter().map(|b| b & 0x7e).collect(),
                ),
                t(
                    "weight_scale_inv",
                    Dtype::F32,
                    vec![n.div_ceil(128), K / 128],
                    f32s(n.div_ceil(128) * K / 128, &mut r),
                ),
            ],
            config: r#"{"quantization_config":{"quant_method":"fp8","fmt":"e4m3","weight_block_size":[128,128]}}"#,
            metadata: None,
        },
        Case {
            name: "bitsandbytes NF4 b64",
            tensors: {
                let numel = n * K;
                let blob = format!(
                    r#"{{"quant_type": "nf4", "absmax": [], "blocksize": 64, "quant_map": [], "dtype": "bfloat16", "shape": [{n}, {K}]}}"#
                );
                let nf4: [f32; 16] = [
                    -1.0, -0.696, -0.525, -0.395, -0.284, -0.185, -0.091, 0.0, 0.080, 0.161, 0.246,
                    0.338, 0.441, 0.563, 0.723, 1.0,
                ];
                vec![
                    t("weight", Dtype::U8, vec![numel / 2, 1], r.bytes(numel / 2)),
                    t(
                        "weight.absmax",
                        Dtype::F32,
                        vec![numel / 64],
                        f32s(numel / 64, &mut r),
                    ),
                    t(
                        "weight.quant_map",
                        Dtype::F32,
                        vec![16],
                        nf4.iter().flat_map(|v| v.to_le_bytes()).collect(),
                    ),
                    t(
                        "weight.quant_state.bitsandbytes__nf4",
                        Dtype::U8,
                        vec![blob.len() as u64],
                        blob.into_bytes(),
                    ),
                ]
            },
            config: r#"{"quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true}}"#,
            metadata: None,
        },
        Case {
            name: "MLX affine int4 g64",
            tensors: vec![
                t("weight", Dtype::U32, vec![n, K / 8], r.bytes(n * K / 8 * 4)),
                t(
                    "scales",
                    Dtype::BF16,
                    vec![n, K / 64],
                    bf16s(n * K / 64, &mut r),
                ),
                t(
                    "biases",
                    Dtype::BF16,
                    vec![n, K / 64],
                    bf16s(n * K / 64, &mut r),
                ),
            ],
            config: r#"{"quantization":{"group_size":64,"bits":4,"mode":"affine"}}"#,
            metadata: Some(("format", "mlx")),
        },
    ]
}

fn write_case(dir: &Path, case: &Case) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).expect("folder");
    std::fs::write(dir.join("config.json"), case.config).expect("config");
    let sources = sources_of(&case.tensors);
    let meta: Option<BTreeMap<String, String>> = case
        .metadata
        .map(|(k, v)| BTreeMap::from([(k.to_owned(), v.to_owned())]));
    let path = dir.join("model.safetensors");
    write_file(
        &path,
        &sources,
        meta.as_ref(),
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("write");
    path
}

fn decode_all(dq: &Dequantizer<'_>) -> f32 {
    use rayon::prelude::*;
    let chunk = 1u64 << 20;
    (0..dq.len().div_ceil(chunk))
        .into_par_iter()
        .map(|c| {
            let mut buf = vec![0f32; 4096];
            let mut acc = 0f32;
            let end = ((c + 1) * chunk).min(dq.len());
            let mut at = c * chunk;
            while at < end {
                let want = ((end - at) as usize).min(buf.len());
                let got = dq.values(at, &mut buf[..want]);
                acc += buf[got / 2];
                at += got as u64;
            }
            acc
        })
        .sum()
}

fn sum_bytes(ck: &Checkpoint) -> u64 {
    use rayon::prelude::*;
    ck.tensors()
        .iter()
        .map(|t| {
            ck.bytes(*t)
                .par_chunks(8 << 20)
                .map(|c| {
                    c.chunks_exact(8).fold(0u64, |a, w| {
                        a.wrapping_add(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
                    })
                })
                .reduce(|| 0, u64::wrapping_add)
        })
        .fold(0, u64::wrapping_add)
}

fn main() {
    let mut melems = 64u64;
    let mut runs = 3usize;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--melems" => melems = args.next().and_then(|v| v.parse().ok()).unwrap_or(melems),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(runs),
            "--only" => only = args.next(),
            other => panic!("unknown argument {other}"),
        }
    }
    let n = (melems << 20) / K / 128 * 128;
    let threads = rayon::current_num_threads();
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "{} elements per family ([{n}, {K}]), best of {runs}, {threads} threads",
        n * K
    );
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "family", "mem GB/s", "dec 1t", "dec all", "stats 1t", "stats all"
    );
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "(all thr.)", "G el/s", "G el/s", "G el/s", "G el/s"
    );
    for (i, case) in cases(n).iter().enumerate() {
        if only
            .as_ref()
            .is_some_and(|o| !case.name.contains(o.as_str()))
        {
            continue;
        }
        let path = write_case(&dir.path().join(format!("c{i}")), case);
        let ck = Checkpoint::open(&path).expect("open");
        let q = quant::detect(&ck).expect("quantized");
        let lt = q.tensors().first().expect("one weight");
        assert_eq!(
            lt.status(),
            quant::Status::Decoded,
            "{}: {}",
            case.name,
            lt.message()
        );
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        let elems = dq.len() as f64;
        let bytes: u64 = ck.tensors().iter().map(|t| ck.bytes(*t).len() as u64).sum();
        sum_bytes(&ck);
        let mem = best_of(runs, || {
            std::hint::black_box(sum_bytes(&ck));
        });
        let mut figures = Vec::new();
        for threads in [1, threads] {
            let p = pool(threads);
            let d = p.install(|| {
                best_of(runs, || {
                    std::hint::black_box(decode_all(&dq));
                })
            });
            figures.push(elems / d.as_secs_f64() / 1e9);
        }
        let options = StatsOptions::default();
        for threads in [1, threads] {
            let p = pool(threads);
            let d = p.install(|| {
                best_of(runs, || {
                    let s = logical_stats(&ck, lt, &options, &CancelToken::new(), &Progress::new());
                    std::hint::black_box(s.expect("stats"));
                })
            });
            figures.push(elems / d.as_secs_f64() / 1e9);
        }
        println!(
            "{:<30} {:>10.1} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            case.name,
            bytes as f64 / mem.as_secs_f64() / 1e9,
            figures[0],
            figures[1],
            figures[2],
            figures[3]
        );
    }
}
