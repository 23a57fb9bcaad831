//! GGUF files: `stats` of a Q4_K model against the machine's own memory
//! read bandwidth, and `info` against gguf-py's `GGUFReader`.
//!
//! ```sh
//! cargo run --release --example bench_gguf                  # a 1 GiB Q4_K file
//! cargo run --release --example bench_gguf -- --gib 0.25 --runs 2
//! TENSORSCOPE_GGUF_PYTHON=/path/to/venv/bin/python cargo run --release --example bench_gguf
//! ```
//!
//! It writes into a temporary folder (in `--dir` when given; kept with
//! `--keep`):
//!
//! * `q4_k.gguf`: about `--gib` GiB of Q4_K tensors (`[14336, 4096]`, the
//!   shape of a Llama feed-forward weight) of random blocks (positive f16
//!   `d` and `dmin` of weights' size, random 6-bit scales and codes);
//! * `vocab.gguf`: a header with a 151,936-token vocabulary (tokens, token
//!   types, 151,387 merges, as Qwen's) and a few small tensors, where
//!   `info`'s time is the header's parsing.
//!
//! It reads the first once so that it sits in the page cache, then times
//! (best of `--runs`, 3 by default; the one-thread and two-thread runs
//! taken in turn), on one thread and on two:
//!
//! * a plain sum of the mapped tensor bytes as u64 words: the memory read
//!   bandwidth the other figures are compared with;
//! * the decode alone: every element through `Dequantizer::values` into a
//!   reused buffer;
//! * `stats --moments` and the default `stats` (`tensorscope stats`:
//!   `quant::detect`, then `scan_dequant_each`: exact quantiles, the codes'
//!   histogram and the scales' distribution);
//!
//! printing GB/s of stored bytes; then `info` (`Checkpoint::open`, every
//! tensor's facts, the quantization found and the metadata as `info
//! --json` writes it) on both files against `GGUFReader(path)` with its
//! tensors listed, in the Python given by `$TENSORSCOPE_GGUF_PYTHON`
//! (else `python3`) when it imports gguf (else the run says how to get
//! it). Machines of more threads run the two-thread figures on two.

use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::quant::{self, Dequantizer};
use tensorscope::stats::{Detail, StatsOptions, scan_dequant_each};

#[allow(dead_code, reason = "each benchmark uses part of what they share")]
mod common;
use common::{best_of_pools, pool, sum_mapped};

/// Q4_K: 256 elements in 144 bytes.
const Q4_K: (u32, u64, u64) = (12, 256, 144);
/// Rows and columns of each weight of the big file.
const ROWS: u64 = 14336;
const COLS: u64 = 4096;
/// Tokens of the vocabulary file, and merges.
const TOKENS: usize = 151_936;
const MERGES: usize = 151_387;

struct Args {
    gib: f64,
    runs: usize,
    dir: Option<PathBuf>,
    keep: bool,
}

fn args() -> Args {
    let mut a = Args {
        gib: 1.0,
        runs: 3,
        dir: None,
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue;
        }
        if flag == "--keep" {
            a.keep = true;
            continue;
        }
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--gib" => a.gib = value.parse().expect("--gib N"),
            "--runs" => a.runs = value.parse().expect("--runs N"),
            "--dir" => a.dir = Some(PathBuf::from(value)),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A metadata value of the files written here.
enum Kv {
    U32(u32),
    Str(String),
    Strings(Vec<String>),
    I32s(Vec<i32>),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// The header of a GGUF v3 file: `kv`, then one tensor info per tensor
/// (name, row-major shape, ggml type, stored bytes), padded to 32; and
/// each tensor's stored bytes.
fn header(kv: &[(&str, Kv)], tensors: &[(String, Vec<u64>, u32, u64)]) -> Vec<u8> {
    let mut h = b"GGUF".to_vec();
    h.extend(3u32.to_le_bytes());
    h.extend((tensors.len() as u64).to_le_bytes());
    h.extend((kv.len() as u64).to_le_bytes());
    for (key, value) in kv {
        put_str(&mut h, key);
        match value {
            Kv::U32(v) => {
                h.extend(4u32.to_le_bytes());
                h.extend(v.to_le_bytes());
            }
            Kv::Str(s) => {
                h.extend(8u32.to_le_bytes());
                put_str(&mut h, s);
            }
            Kv::Strings(items) => {
                h.extend(9u32.to_le_bytes());
                h.extend(8u32.to_le_bytes());
                h.extend((items.len() as u64).to_le_bytes());
                for s in items {
                    put_str(&mut h, s);
                }
            }
            Kv::I32s(items) => {
                h.extend(9u32.to_le_bytes());
                h.extend(5u32.to_le_bytes());
                h.extend((items.len() as u64).to_le_bytes());
                for v in items {
                    h.extend(v.to_le_bytes());
                }
            }
        }
    }
    let mut offset = 0u64;
    for (name, shape, ty, bytes) in tensors {
        put_str(&mut h, name);
        h.extend((shape.len() as u32).to_le_bytes());
        for d in shape.iter().rev() {
            h.extend(d.to_le_bytes());
        }
        h.extend(ty.to_le_bytes());
        h.extend(offset.to_le_bytes());
        offset += bytes.div_ceil(32) * 32;
    }
    h.resize(h.len().div_ceil(32) * 32, 0);
    h
}

/// `n` random Q4_K blocks: `d` and `dmin` positive f16 of weights' size,
/// random scale bytes and codes.
fn q4_k_blocks(n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * Q4_K.2 as usize);
    for _ in 0..n {
        for _ in 0..2 {
            let x = 1e-4 + (rng.next() % 10_000) as f32 * 3e-7;
            out.extend(half::f16::from_f32(x).to_le_bytes());
        }
        // The 12 scale bytes and 128 bytes of codes.
        for _ in 0..(Q4_K.2 - 4) / 4 {
            out.extend((rng.next() as u32).to_le_bytes());
        }
    }
    out
}

/// Writes `count` Q4_K weights of `[ROWS, COLS]` (random blocks, 64 MiB of
/// them repeated) with a small llama header; returns the tensor bytes.
fn write_q4_k(path: &Path, count: u64) -> u64 {
    let per = ROWS * COLS / Q4_K.1 * Q4_K.2;
    let tensors: Vec<(String, Vec<u64>, u32, u64)> = (0..count)
        .map(|i| {
            (
                format!(
                    "blk.{}.ffn_{}.weight",
                    i / 3,
                    ["gate", "up", "down"][(i % 3) as usize]
                ),
                vec![ROWS, COLS],
                Q4_K.0,
                per,
            )
        })
        .collect();
    let kv = [
        ("general.architecture", Kv::Str("llama".into())),
        ("general.name", Kv::Str("bench".into())),
        ("llama.block_count", Kv::U32((count / 3).max(1) as u32)),
        ("general.file_type", Kv::U32(15)),
    ];
    let mut w = BufWriter::with_capacity(8 << 20, std::fs::File::create(path).expect("create"));
    w.write_all(&header(&kv, &tensors)).expect("write");
    let mut rng = Rng(0x5eed);
    let blocks = q4_k_blocks((64 << 20) / Q4_K.2 as usize, &mut rng);
    for _ in 0..count {
        let mut left = per as usize;
        while left > 0 {
            let take = left.min(blocks.len());
            w.write_all(&blocks[..take]).expect("write");
            left -= take;
        }
    }
    w.flush().expect("flush");
    per * count
}

/// Writes a header with a Qwen-sized vocabulary and three small tensors.
fn write_vocab(path: &Path) {
    let mut rng = Rng(7);
    let mut word = |i: usize| {
        let len = 2 + (rng.next() % 8) as usize;
        let mut s: String = (0..len)
            .map(|_| char::from(b'a' + (rng.next() % 26) as u8))
            .collect();
        if i.is_multiple_of(5) {
            s.insert(0, 'Ġ');
        }
        s
    };
    let tokens: Vec<String> = (0..TOKENS).map(&mut word).collect();
    let merges: Vec<String> = (0..MERGES)
        .map(|i| format!("{} {}", word(i), word(i + 1)))
        .collect();
    let types: Vec<i32> = (0..TOKENS)
        .map(|i| if i < 151_643 { 1 } else { 3 })
        .collect();
    let kv = [
        ("general.architecture", Kv::Str("qwen2".into())),
        ("general.name", Kv::Str("bench".into())),
        ("qwen2.block_count", Kv::U32(1)),
        ("tokenizer.ggml.model", Kv::Str("gpt2".into())),
        ("tokenizer.ggml.tokens", Kv::Strings(tokens)),
        ("tokenizer.ggml.token_type", Kv::I32s(types)),
        ("tokenizer.ggml.merges", Kv::Strings(merges)),
    ];
    let tensors = vec![
        ("output_norm.weight".to_owned(), vec![1024], 0, 4096),
        ("blk.0.attn_norm.weight".to_owned(), vec![1024], 0, 4096),
        (
            "blk.0.attn_q.weight".to_owned(),
            vec![1024, 1024],
            Q4_K.0,
            1024 * 4 * Q4_K.2,
        ),
    ];
    let mut w = BufWriter::new(std::fs::File::create(path).expect("create"));
    w.write_all(&header(&kv, &tensors)).expect("write");
    for (_, _, _, bytes) in &tensors {
        w.write_all(&vec![0x3C; bytes.div_ceil(32) as usize * 32])
            .expect("write");
    }
    w.flush().expect("flush");
}

/// Every element of every logical tensor through `Dequantizer::values`.
fn decode_all(ck: &Checkpoint, q: &quant::Quantization) -> f32 {
    use rayon::prelude::*;
    q.tensors()
        .iter()
        .filter_map(|lt| Dequantizer::new(ck, lt))
        .map(|dq| {
            let chunks = dq.len().div_ceil(1 << 20);
            (0..chunks)
                .into_par_iter()
                .map(|c| {
                    let mut buf = vec![0f32; 4096];
                    let (mut at, end) = (c << 20, ((c + 1) << 20).min(dq.len()));
                    let mut acc = 0f32;
                    while at < end {
                        let want = ((end - at) as usize).min(buf.len());
                        let got = dq.values(at, &mut buf[..want]);
                        acc += buf[got / 2];
                        at += got as u64;
                    }
                    acc
                })
                .sum::<f32>()
        })
        .sum()
}

/// `stats` as the command line runs it on a GGUF file.
fn run_stats(ck: &Checkpoint, q: &quant::Quantization, options: &StatsOptions) {
    let mut n = 0usize;
    scan_dequant_each(
        ck,
        q,
        ck.tensors(),
        options,
        &CancelToken::new(),
        &Progress::new(),
        &mut |e| {
            std::hint::black_box(e);
            n += 1;
        },
    )
    .expect("stats");
    assert_eq!(n, ck.tensors().len());
}

/// What `info --json` does with a file: open it, every tensor's facts, the
/// quantization, the metadata as JSON text.
fn info(path: &Path) -> usize {
    let ck = Checkpoint::open(path).expect("opens");
    let facts: usize = ck
        .tensors()
        .iter()
        .map(|&r| ck.stored_facts(r).container.len())
        .sum();
    let q = quant::detect(&ck).map_or(0, |q| q.tensors().len());
    let meta = ck
        .shards()
        .first()
        .and_then(|s| s.file().gguf())
        .map(|g| serde_json::Value::Object(g.metadata_json()).to_string())
        .unwrap_or_default();
    facts + q + meta.len()
}

/// Seconds of `GGUFReader(path)` with its tensors listed, best of `runs`;
/// `None` (and how to get one) when the Python does not import gguf.
fn gguf_py(path: &Path, runs: usize) -> Option<f64> {
    let python = std::env::var("TENSORSCOPE_GGUF_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!(
        "import time, gguf\nbest = 1e9\nfor _ in range({runs}):\n    t = time.perf_counter()\n    r = gguf.GGUFReader({path:?})\n    n = sum(int(x.n_elements) for x in r.tensors) + len(r.fields)\n    best = min(best, time.perf_counter() - t)\n    del r\nprint(best)\n",
        path = path.display().to_string(),
    );
    match Command::new(&python).args(["-c", &script]).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().parse().ok(),
        _ => {
            eprintln!(
                "gguf-py baseline skipped: {python} does not import gguf. Install it into a \
                 virtual environment (`python3 -m venv /tmp/gguf && /tmp/gguf/bin/pip install \
                 gguf==0.19.0`), then TENSORSCOPE_GGUF_PYTHON=/tmp/gguf/bin/python."
            );
            None
        }
    }
}

fn main() {
    let a = args();
    let holder = match &a.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("a temporary folder");
    let dir = holder.path().to_owned();
    if a.keep {
        // The files stay for profiling `tensorscope stats` on them.
        eprintln!("keeping {}", holder.keep().display());
    }
    let dir = dir.as_path();
    let big = dir.join("q4_k.gguf");
    let per = ROWS * COLS / Q4_K.1 * Q4_K.2;
    let count = ((a.gib * f64::from(1u32 << 30)) / per as f64)
        .round()
        .max(1.0) as u64;
    eprintln!("writing {} ({count} Q4_K weights)…", big.display());
    let bytes = write_q4_k(&big, count);
    let vocab = dir.join("vocab.gguf");
    write_vocab(&vocab);
    let ck = Checkpoint::open(&big).expect("opens");
    let q = quant::detect(&ck).expect("block types are logical tensors");
    // Into the page cache.
    std::hint::black_box(sum_mapped(&ck));
    let (one, two) = (pool(1), pool(2));
    let gbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    let mut rows: Vec<(&str, Duration, Duration)> = Vec::new();
    let (s1, s2) = best_of_pools(a.runs, &one, &two, || {
        std::hint::black_box(sum_mapped(&ck));
    });
    rows.push(("memory read (sum of the mapped bytes)", s1, s2));
    let (d1, d2) = best_of_pools(a.runs, &one, &two, || {
        std::hint::black_box(decode_all(&ck, &q));
    });
    rows.push(("decode (Dequantizer::values)", d1, d2));
    let moments = StatsOptions {
        detail: Detail::MomentsOnly,
        ..StatsOptions::default()
    };
    let (m1, m2) = best_of_pools(a.runs, &one, &two, || run_stats(&ck, &q, &moments));
    rows.push(("stats --moments", m1, m2));
    let full = StatsOptions::default();
    let (f1, f2) = best_of_pools(a.runs, &one, &two, || run_stats(&ck, &q, &full));
    rows.push(("stats (default: exact quantiles, codes, scales)", f1, f2));

    println!(
        "\nq4_k.gguf: {:.2} GB of Q4_K blocks ({count} weights of [{ROWS}, {COLS}]), best of {} runs; load {}.\n",
        bytes as f64 / 1e9,
        a.runs,
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    );
    println!("| run | 1 thread GB/s | G elem/s | 2 threads GB/s | speed-up |");
    println!("|---|---|---|---|---|");
    let elems = (bytes / Q4_K.2 * Q4_K.1) as f64;
    for (what, t1, t2) in &rows {
        println!(
            "| {what} | {:.2} | {:.2} | {:.2} | {:.2}× |",
            gbs(*t1),
            elems / t1.as_secs_f64() / 1e9,
            gbs(*t2),
            t2.as_secs_f64().recip() * t1.as_secs_f64()
        );
    }
    drop(ck);

    println!("\n| info | file | seconds | × ours |\n|---|---|---|---|");
    for (name, path) in [("q4_k.gguf", &big), ("vocab.gguf", &vocab)] {
        let ours = (0..a.runs.max(1))
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(info(path));
                t.elapsed()
            })
            .min()
            .unwrap_or_default()
            .as_secs_f64();
        println!("| tensorscope info | {name} | {ours:.5} | 1 |");
        if let Some(s) = gguf_py(path, a.runs.max(1)) {
            println!("| gguf-py GGUFReader | {name} | {s:.5} | {:.0} |", s / ours);
        }
    }
}
