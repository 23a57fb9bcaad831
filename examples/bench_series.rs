//! A training run through time: `series` on a run of checkpoints against
//! `stats` on the same files (the issue's target: at most 2.5× its time),
//! beside the machine's own memory read bandwidth.
//!
//! ```sh
//! cargo run --release --example bench_series                  # 10 steps of 256 MiB
//! cargo run --release --example bench_series -- --steps 20 --mib 64 --runs 2
//! ```
//!
//! It writes `--steps` Trainer-style folders (`checkpoint-K/` with a
//! `model.safetensors` of F32 `[1024, 4096]` weights, `--mib` MiB each, and
//! a `trainer_state.json`) into a temporary folder, each step the one
//! before plus a small update (one weight frozen), reads them once so that
//! they sit in the page cache, then times (best of `--runs`, on every
//! thread of the pool):
//!
//! * a plain sum of every file's mapped bytes, as u64 words;
//! * `stats` of every file (`stats::scan`, the default figures with exact
//!   quantiles), one file after the other, as `tensorscope stats` runs;
//! * `series` of the folder (`series::series`), which reads each file
//!   twice (as the newer side of a pair, then as the older);
//!
//! and prints the seconds, GB/s of checkpoint bytes, and `series` over
//! `stats`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::series::{SeriesOptions, series};
use tensorscope::stats::{StatsOptions, scan};

#[allow(dead_code, reason = "each benchmark uses part of what they share")]
mod common;
use common::{best_of, sum_mapped, weights, write_f32_file};

const ROWS: usize = 1024;
const COLS: usize = 4096;

struct Args {
    steps: usize,
    mib: usize,
    runs: usize,
}

fn args() -> Args {
    let mut a = Args {
        steps: 10,
        mib: 256,
        runs: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue;
        }
        let value: usize = it
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{flag} takes a number"));
        match flag.as_str() {
            "--steps" => a.steps = value.max(2),
            "--mib" => a.mib = value.max(16),
            "--runs" => a.runs = value.max(1),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The run: `steps` folders, each tensor the one before plus a small
/// update, the first one frozen.
fn write_run(root: &Path, a: &Args) -> Vec<PathBuf> {
    let per = ROWS * COLS;
    let count = (a.mib << 20) / (4 * per);
    let mut tensors: Vec<(String, Vec<f32>)> = (0..count.max(1))
        .map(|i| {
            (
                format!("model.layers.{i}.mlp.up_proj.weight"),
                weights(i as u64 + 1, per),
            )
        })
        .collect();
    let mut files = Vec::new();
    for k in 0..a.steps {
        let dir = root.join(format!("checkpoint-{}", 100 * (k + 1)));
        std::fs::create_dir_all(&dir).expect("folder");
        if k > 0 {
            for (i, (_, v)) in tensors.iter_mut().enumerate().skip(1) {
                let step = weights((k * 1000 + i) as u64, per);
                for (x, d) in v.iter_mut().zip(step) {
                    *x += d * 0.01;
                }
            }
        }
        let file = dir.join("model.safetensors");
        write_f32_file(&file, &tensors, [ROWS, COLS]);
        std::fs::write(
            dir.join("trainer_state.json"),
            format!("{{\"global_step\": {}}}", 100 * (k + 1)),
        )
        .expect("state");
        files.push(file);
    }
    files
}

fn main() {
    let a = args();
    let holder = tempfile::tempdir().expect("a temporary folder");
    eprintln!(
        "writing {} steps of {} MiB into {}…",
        a.steps,
        a.mib,
        holder.path().display()
    );
    let files = write_run(holder.path(), &a);
    let cks: Vec<Checkpoint> = files
        .iter()
        .map(|f| Checkpoint::open(f).expect("opens"))
        .collect();
    let bytes: u64 = cks.iter().map(Checkpoint::data_bytes).sum();
    std::hint::black_box(cks.iter().map(sum_mapped).fold(0, u64::wrapping_add));
    let read = best_of(a.runs, || {
        std::hint::black_box(cks.iter().map(sum_mapped).fold(0, u64::wrapping_add));
    });
    let options = StatsOptions::default();
    let stats = best_of(a.runs, || {
        for ck in &cks {
            let r = scan(
                ck,
                ck.tensors(),
                &options,
                &CancelToken::new(),
                &Progress::new(),
            );
            std::hint::black_box(r.expect("stats"));
        }
    });
    let root = vec![holder.path().to_owned()];
    let series_time = best_of(a.runs, || {
        let r = series(
            &root,
            &SeriesOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        );
        std::hint::black_box(r.expect("series"));
    });
    let gbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    println!(
        "\n{} steps, {:.2} GB of checkpoints, {} threads, best of {}:\n",
        a.steps,
        bytes as f64 / 1e9,
        rayon::current_num_threads(),
        a.runs
    );
    println!("| run | seconds | GB/s of checkpoints | × stats |");
    println!("|---|---|---|---|");
    for (name, d) in [
        ("memory read (sum of the mapped bytes)", read),
        ("stats of every file (exact quantiles)", stats),
        ("series of the run", series_time),
    ] {
        println!(
            "| {name} | {:.3} | {:.2} | {:.2} |",
            d.as_secs_f64(),
            gbs(d),
            d.as_secs_f64() / stats.as_secs_f64()
        );
    }
}
