//! The cost of a checkpoint of many tiny tensors: the statistics engine
//! against the header parser, and the CLI's `stats --json` against its
//! `info --json`, in time and peak memory.
//!
//! ```sh
//! cargo build --release && cargo run --release --example bench_many
//! cargo run --release --example bench_many -- --tensors 100000,1000000
//! ```
//!
//! For each count it writes a file of that many two-element F32 tensors
//! into a temporary folder and times, best of three: opening it (parsing
//! and validating the header), and the library's default scan of every
//! tensor (results dropped as they stream). When `target/release/tensorscope`
//! exists it also runs `info --json` and `stats --json` (output to
//! /dev/null) and samples each one's peak resident memory.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{StatsOptions, scan_each};

#[allow(dead_code, reason = "each benchmark uses part of what they share")]
mod common;
use common::best_of;

fn write_file(path: &Path, n: usize) {
    let mut header = String::from("{");
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            "\"t{i}\":{{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[{},{}]}}",
            8 * i,
            8 * i + 8
        );
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = Vec::with_capacity(8 + header.len() + 8 * n);
    bytes.extend((header.len() as u64).to_le_bytes());
    bytes.extend(header.as_bytes());
    for _ in 0..n {
        bytes.extend(1f32.to_le_bytes());
        bytes.extend((-1f32).to_le_bytes());
    }
    std::fs::write(path, bytes).expect("write the bench file");
}

/// Runs the CLI, output to /dev/null: wall time and peak resident memory
/// (VmHWM, sampled every 5 ms until it exits).
fn run_cli(bin: &Path, args: &[&str]) -> (Duration, u64) {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run tensorscope");
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status)
            && let Some(kb) = s
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        {
            peak = peak.max(kb * 1024);
        }
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (t.elapsed(), peak)
}

fn main() {
    let mut counts = vec![100_000usize, 1_000_000];
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tensors" => {
                counts = it
                    .next()
                    .map(|v| v.split(',').filter_map(|c| c.parse().ok()).collect())
                    .unwrap_or(counts);
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/tensorscope");
    println!(
        "| tensors | open (header) s | library scan s | µs per tensor | info --json s | stats --json s | ratio | info peak MB | stats peak MB | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for n in counts {
        let path = dir.path().join(format!("many-{n}.safetensors"));
        write_file(&path, n);
        let open = best_of(3, || {
            std::hint::black_box(Checkpoint::open(&path).expect("valid"));
        });
        let ck = Checkpoint::open(&path).expect("valid");
        let scan = best_of(3, || {
            let mut seen = 0usize;
            scan_each(
                &ck,
                ck.tensors(),
                &StatsOptions::default(),
                &CancelToken::new(),
                &Progress::new(),
                &mut |t| {
                    seen += usize::from(t.values.count > 0);
                },
            )
            .expect("scan");
            assert_eq!(seen, n);
        });
        let file = path.to_string_lossy().into_owned();
        let cli = bin.exists().then(|| {
            let info = run_cli(&bin, &["info", "--json", &file]);
            let stats = run_cli(&bin, &["stats", "--json", &file]);
            (info, stats)
        });
        let cells = cli.map_or_else(
            || "- | - | - | - | - | -".to_owned(),
            |((ti, mi), (ts, ms))| {
                format!(
                    "{:.2} | {:.2} | {:.1}× | {:.0} | {:.0} | {:.2}×",
                    ti.as_secs_f64(),
                    ts.as_secs_f64(),
                    ts.as_secs_f64() / ti.as_secs_f64(),
                    mi as f64 / 1e6,
                    ms as f64 / 1e6,
                    ms as f64 / mi.max(1) as f64
                )
            },
        );
        println!(
            "| {n} | {:.2} | {:.2} | {:.2} | {cells} |",
            open.as_secs_f64(),
            scan.as_secs_f64(),
            scan.as_secs_f64() * 1e6 / n as f64
        );
    }
}
