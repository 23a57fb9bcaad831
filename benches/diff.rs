//! Diff throughput on two 2 GB checkpoints: one pair that differs in a few
//! tensors (most are byte-identical, found by comparing bytes) and one that
//! differs everywhere (every element decoded on both sides), in GB/s of
//! input read (both sides), next to the statistics engine's whole-file
//! scan of the same file. The files are made by the bench and removed.
//!
//! `cargo bench --bench diff`

use std::path::Path;
use std::time::Instant;

use tensorscope::diff::{DiffOptions, diff};
use tensorscope::dtype::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::format::write::{TensorSource, write_file};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{StatsOptions, scan};

const TENSORS: usize = 64;
const TENSOR_BYTES: usize = 32 << 20; // 64 × 32 MiB = 2 GiB

fn make(path: &Path, seed: u32, perturb: &dyn Fn(usize) -> bool) {
    let mut datas: Vec<Vec<u8>> = Vec::with_capacity(TENSORS);
    for t in 0..TENSORS {
        let dtype_f32 = t % 2 == 0;
        let mut v = vec![0u8; TENSOR_BYTES];
        let mut x = 0x9E37_79B9u32 ^ (t as u32).wrapping_mul(0x85EB_CA6B);
        if dtype_f32 {
            for c in v.chunks_exact_mut(4) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let f = (x as f32 / u32::MAX as f32 - 0.5) * 0.1;
                let f = if perturb(t) {
                    f + seed as f32 * 1e-4
                } else {
                    f
                };
                c.copy_from_slice(&f.to_le_bytes());
            }
        } else {
            for c in v.chunks_exact_mut(2) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let f = (x as f32 / u32::MAX as f32 - 0.5) * 0.1;
                let f = if perturb(t) {
                    f + seed as f32 * 1e-3
                } else {
                    f
                };
                c.copy_from_slice(&half::bf16::from_f32(f).to_le_bytes());
            }
        }
        datas.push(v);
    }
    let sources: Vec<TensorSource<'_>> = datas
        .iter()
        .enumerate()
        .map(|(t, d)| TensorSource {
            name: format!("model.layers.{t}.weight"),
            dtype: if t % 2 == 0 { Dtype::F32 } else { Dtype::BF16 },
            shape: vec![(d.len() / if t % 2 == 0 { 4 } else { 2 }) as u64],
            data: d,
        })
        .collect();
    write_file(path, &sources, None, &CancelToken::new(), &Progress::new())
        .expect("write bench file");
}

fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().join("base.safetensors");
    let few = dir.path().join("few.safetensors");
    let all = dir.path().join("all.safetensors");
    make(&base, 0, &|_| false);
    make(&few, 1, &|t| t % 16 == 3);
    make(&all, 1, &|_| true);
    let (a, b_few, b_all) = (
        Checkpoint::open(&base).expect("open"),
        Checkpoint::open(&few).expect("open"),
        Checkpoint::open(&all).expect("open"),
    );
    let bytes = 2.0 * a.data_bytes() as f64;
    let threads = rayon::current_num_threads();
    // Warm the page cache.
    for ck in [&a, &b_few, &b_all] {
        let _ = scan(
            ck,
            ck.tensors(),
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        );
    }
    let opts = DiffOptions::default();
    let t_few = best_of(3, || {
        let r = diff(&a, &b_few, &opts, &CancelToken::new(), &Progress::new()).expect("diff");
        assert_eq!(r.tensors.iter().filter(|t| !t.status.is_same()).count(), 4);
    });
    let t_all = best_of(2, || {
        let r = diff(&a, &b_all, &opts, &CancelToken::new(), &Progress::new()).expect("diff");
        assert!(r.tensors.iter().all(|t| !t.status.is_same()));
    });
    let moments = StatsOptions {
        detail: tensorscope::stats::Detail::MomentsOnly,
        ..StatsOptions::default()
    };
    let t_stats = best_of(2, || {
        scan(
            &a,
            a.tensors(),
            &moments,
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("scan");
    });
    let t_stats_full = best_of(2, || {
        scan(
            &a,
            a.tensors(),
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("scan");
    });
    let gb = |b: f64, t: f64| b / t / 1e9;
    println!(
        "two 2 GiB checkpoints (32 F32 + 32 BF16 tensors of 32 MiB), {threads} threads, page cache warm"
    );
    println!("| run | input read | time | throughput |");
    println!("|---|---|---|---|");
    println!(
        "| diff, 4 of 64 tensors differ | {:.2} GB | {:.3} s | {:.2} GB/s |",
        bytes / 1e9,
        t_few,
        gb(bytes, t_few)
    );
    println!(
        "| diff, every tensor differs | {:.2} GB | {:.3} s | {:.2} GB/s |",
        bytes / 1e9,
        t_all,
        gb(bytes, t_all)
    );
    let one = bytes / 2.0;
    println!(
        "| stats scan (moments only), one file | {:.2} GB | {:.3} s | {:.2} GB/s |",
        one / 1e9,
        t_stats,
        gb(one, t_stats)
    );
    println!(
        "| stats scan (full: histograms, exact quantiles), one file | {:.2} GB | {:.3} s | {:.2} GB/s |",
        one / 1e9,
        t_stats_full,
        gb(one, t_stats_full)
    );
}
