//! Throughput of the statistics engine against the machine's own memory
//! read bandwidth, and against the Python stack a user would use.
//!
//! ```sh
//! cargo run --release --example bench_stats            # 1 GiB per dtype
//! cargo run --release --example bench_stats -- --gib 2 --rss-gib 4
//! cargo run --release --example bench_stats -- --only F32,F4 --no-python
//! ```
//!
//! For each of F32, F64, F16, BF16, F8_E4M3 and F4 it writes a safetensors file
//! of `--gib` GiB (8 tensors of random normal values) into a temporary
//! folder, reads it once so that it sits in the page cache, then times, on
//! one thread and on all threads (best of `--runs`, 5 by default, the
//! one-thread and all-thread runs taken in turn):
//!
//! * a plain sum of the mapped bytes as u64 words: the memory read
//!   bandwidth the other figures are compared with;
//! * `stats` without histograms (counts, range and moments);
//! * `stats` with the linear and log2 histograms, quantiles read from the
//!   histogram (F32) or exact (every dtype of 16 bits or fewer);
//! * the full default scan (`tensorscope stats`: exact quantiles).
//!
//! It then runs `bench/python_baseline.py` (numpy; torch when installed;
//! the Python is `$TENSORSCOPE_PYTHON`, else the first of `python3` and
//! `python` that imports numpy, else the run says how to install it)
//! on the same file and prints the ratios, measures the peak anonymous
//! memory of a full scan of a `--rss-gib` GiB file, and deletes its files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tensorscope::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{Detail, QuantileMode, StatsOptions, scan};

#[allow(dead_code, reason = "each benchmark uses part of what they share")]
mod common;
use common::{best_of_pools, pool, sum_mapped};

const DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F64,
    Dtype::F16,
    Dtype::BF16,
    Dtype::F8E4M3,
    Dtype::F4,
];
const TENSORS: u64 = 8;

struct Args {
    gib: f64,
    rss_gib: f64,
    runs: usize,
    python: bool,
    /// Only these dtypes (`--only F32,F4`); all of [`DTYPES`] when empty.
    only: Vec<Dtype>,
}

fn parse_args() -> Args {
    let mut args = Args {
        gib: 1.0,
        rss_gib: 4.0,
        runs: 5,
        python: true,
        only: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> f64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--gib" => args.gib = value("--gib"),
            "--rss-gib" => args.rss_gib = value("--rss-gib"),
            "--runs" => args.runs = value("--runs") as usize,
            "--no-python" => args.python = false,
            "--only" => {
                let list = it.next().unwrap_or_else(|| panic!("--only needs dtypes"));
                args.only = list
                    .split(',')
                    .map(|d| Dtype::from_name(d).unwrap_or_else(|| panic!("unknown dtype {d}")))
                    .collect();
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

/// xorshift64* with Box–Muller normals.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn normal(&mut self) -> f64 {
        let u = ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let v = ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Nearest F8_E4M3 code (by searching the decoded table).
fn f8_code(x: f64, table: &[(f64, u8)]) -> u8 {
    let i = table.partition_point(|(v, _)| *v < x);
    let candidates = [i.saturating_sub(1), i.min(table.len() - 1)];
    candidates
        .iter()
        .map(|&k| table[k])
        .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
        .map_or(0, |(_, c)| c)
}

/// `bytes` bytes of random normal values of `dtype` (σ = 0.02 as in weights).
fn random_block(dtype: Dtype, bytes: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(bytes);
    let sorted_table = |d: Dtype| {
        let mut t: Vec<(f64, u8)> = (0..=255u8)
            .filter_map(|c| {
                let v = tensorscope::dtype::decode::code_to_f64(d, u64::from(c))?;
                v.is_finite().then_some((v, c))
            })
            .collect();
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        t
    };
    match dtype {
        Dtype::F32 => {
            while out.len() < bytes {
                out.extend(((rng.normal() * 0.02) as f32).to_le_bytes());
            }
        }
        Dtype::F64 => {
            while out.len() < bytes {
                out.extend((rng.normal() * 0.02).to_le_bytes());
            }
        }
        Dtype::F16 => {
            while out.len() < bytes {
                out.extend(half::f16::from_f64(rng.normal() * 0.02).to_le_bytes());
            }
        }
        Dtype::BF16 => {
            while out.len() < bytes {
                out.extend(half::bf16::from_f64(rng.normal() * 0.02).to_le_bytes());
            }
        }
        Dtype::F8E4M3 => {
            let table = sorted_table(Dtype::F8E4M3);
            while out.len() < bytes {
                out.push(f8_code(rng.normal() * 50.0, &table));
            }
        }
        _ => {
            // F4: two codes per byte, values of N(0, 2).
            let table: Vec<(f64, u8)> = {
                let mut t: Vec<(f64, u8)> = (0..16u8)
                    .filter_map(|c| {
                        let v = tensorscope::dtype::decode::code_to_f64(Dtype::F4, u64::from(c))?;
                        Some((v, c))
                    })
                    .collect();
                t.sort_by(|a, b| a.0.total_cmp(&b.0));
                t
            };
            while out.len() < bytes {
                let lo = f8_code(rng.normal() * 2.0, &table);
                let hi = f8_code(rng.normal() * 2.0, &table);
                out.push(lo | (hi << 4));
            }
        }
    }
    out.truncate(bytes);
    out
}

/// Writes a file of `TENSORS` tensors totalling about `total` bytes, each
/// made of one random 64 MiB block repeated (the content does not change
/// the speed, and writing stays fast).
fn make_file(path: &Path, dtype: Dtype, total: u64) -> u64 {
    use std::io::Write as _;
    const BLOCK: u64 = 64 << 20;
    let per_tensor = (total / TENSORS).div_ceil(BLOCK) * BLOCK;
    let elems = per_tensor * 8 / u64::from(dtype.bits());
    let mut header = String::from("{");
    for i in 0..TENSORS {
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            "\"layers.{i}.weight\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            dtype.name(),
            elems,
            i * per_tensor,
            (i + 1) * per_tensor
        );
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let file = std::fs::File::create(path).expect("create bench file");
    let mut w = std::io::BufWriter::with_capacity(8 << 20, file);
    w.write_all(&(header.len() as u64).to_le_bytes())
        .expect("write");
    w.write_all(header.as_bytes()).expect("write");
    let block = random_block(dtype, BLOCK as usize, 0x5eed ^ u64::from(dtype.bits()));
    for _ in 0..(per_tensor / BLOCK) * TENSORS {
        w.write_all(&block).expect("write");
    }
    w.flush().expect("flush");
    per_tensor * TENSORS
}

fn run_scan(ck: &Checkpoint, options: &StatsOptions) {
    let report = scan(
        ck,
        ck.tensors(),
        options,
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("scan");
    std::hint::black_box(report);
}

/// Seconds the Python baseline took per framework (`None` when absent).
fn python_baseline(python: &str, file: &Path) -> Option<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/python_baseline.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(file)
        .arg("--json")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "python baseline failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The Python the baseline runs with: `$TENSORSCOPE_PYTHON`, else the
/// first of `python3` and `python` that imports numpy. Says how to get one
/// when none does.
fn find_python() -> Option<String> {
    let candidates: Vec<String> = std::env::var("TENSORSCOPE_PYTHON")
        .ok()
        .into_iter()
        .chain(["python3".to_owned(), "python".to_owned()])
        .collect();
    let has_numpy = |py: &str| {
        Command::new(py)
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Some(py) = candidates.iter().find(|py| has_numpy(py)) {
        return Some(py.clone());
    }
    eprintln!(
        "numpy baseline skipped: none of {} imports numpy. Install it with \
         `python3 -m pip install numpy ml_dtypes safetensors` (or into a virtual \
         environment: `python3 -m venv /tmp/np && /tmp/np/bin/pip install numpy ml_dtypes \
         safetensors`, then TENSORSCOPE_PYTHON=/tmp/np/bin/python3).",
        candidates.join(", ")
    );
    None
}

/// Prints the baseline's times beside ours, and the ratios.
fn print_python(python: &[(Dtype, serde_json::Value, f64, f64)]) {
    if python.is_empty() {
        return;
    }
    println!();
    println!(
        "Ours on all threads: \"same work\" is stats + histograms (what the baseline \
         computes, plus the log2 histogram); \"default\" is `tensorscope stats` (exact \
         quantiles besides).\n"
    );
    println!(
        "| dtype | numpy s | torch s | ours s, same work | ours s, default | numpy / ours (same, default) | torch / ours (same, default) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (d, v, same, default) in python {
        let secs = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let cell = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |s| format!("{s:.2}"));
        let ratio = |x: Option<f64>| {
            x.map_or_else(
                || "-".to_owned(),
                |s| format!("{:.1}× / {:.1}×", s / same, s / default),
            )
        };
        println!(
            "| {} | {} | {} | {same:.3} | {default:.3} | {} | {} |",
            d.name(),
            cell(secs("numpy")),
            cell(secs("torch")),
            ratio(secs("numpy")),
            ratio(secs("torch"))
        );
    }
}

/// Current anonymous resident memory in bytes (Linux).
fn rss_anon() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Runs `f` while sampling the anonymous RSS; returns the peak growth.
fn peak_rss_growth(f: impl FnOnce()) -> u64 {
    let base = rss_anon();
    let peak = AtomicU64::new(base);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_anon(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        f();
        done.store(true, Ordering::Relaxed);
    });
    peak.load(Ordering::Relaxed).saturating_sub(base)
}

struct Row {
    dtype: Dtype,
    what: &'static str,
    one: f64,
    all: f64,
    elems: f64,
}

fn main() {
    let args = parse_args();
    let threads = rayon::current_num_threads();
    let dir = tempfile::tempdir().expect("tempdir");
    let moments = StatsOptions {
        detail: Detail::MomentsOnly,
        ..StatsOptions::default()
    };
    let histogram = StatsOptions {
        quantiles: QuantileMode::FromHistogram,
        ..StatsOptions::default()
    };
    let exact = StatsOptions::default();
    let mut rows = Vec::new();
    let mut sums = Vec::new();
    let mut python = Vec::new();
    let total = (args.gib * f64::from(1u32 << 30)) as u64;
    let interpreter = if args.python { find_python() } else { None };
    for dtype in DTYPES
        .into_iter()
        .filter(|d| args.only.is_empty() || args.only.contains(d))
    {
        let path: PathBuf = dir.path().join(format!("{}.safetensors", dtype.name()));
        eprintln!("writing {} ({:.2} GiB)…", path.display(), args.gib);
        let bytes = make_file(&path, dtype, total);
        let ck = Checkpoint::open(&path).expect("valid bench file");
        let elems = bytes as f64 * 8.0 / f64::from(dtype.bits());
        let gbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
        // Warm the page cache.
        std::hint::black_box(sum_mapped(&ck));
        let one = pool(1);
        let all = pool(threads);
        let (s1, sa) = best_of_pools(args.runs, &one, &all, || {
            _ = std::hint::black_box(sum_mapped(&ck));
        });
        sums.push((dtype, gbs(s1), gbs(sa)));
        // All-thread times of the run that does the baseline's work
        // (moments, counts, a 256-bin histogram) and of the default scan.
        let (mut histogram_all, mut exact_all) = (Duration::ZERO, Duration::ZERO);
        for (run, what, options) in [
            (0, "stats (no histogram)", &moments),
            (1, "stats + histograms", &histogram),
            (2, "full scan (exact quantiles)", &exact),
        ] {
            let (t1, ta) = best_of_pools(args.runs, &one, &all, || run_scan(&ck, options));
            match run {
                1 => histogram_all = ta,
                2 => exact_all = ta,
                _ => {}
            }
            rows.push(Row {
                dtype,
                what,
                one: gbs(t1),
                all: gbs(ta),
                elems: elems / t1.as_secs_f64() / 1e9,
            });
        }
        if let Some(py) = &interpreter
            && let Some(v) = python_baseline(py, &path)
        {
            python.push((
                dtype,
                v,
                histogram_all.as_secs_f64(),
                exact_all.as_secs_f64(),
            ));
        }
        drop(ck);
        let _ = std::fs::remove_file(&path);
    }

    println!(
        "\n{threads} threads available; {:.2} GiB per dtype, best of {} runs.\n",
        args.gib, args.runs
    );
    println!("| dtype | memory read (sum of mapped bytes) | 1 thread | all threads |");
    println!("|---|---|---|---|");
    for (d, s1, sa) in &sums {
        println!("| {} | GB/s | {s1:.2} | {sa:.2} |", d.name());
    }
    println!();
    println!(
        "| dtype | run | 1 thread GB/s | % of sum | G elem/s | all threads GB/s | % of sum | speed-up |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let (_, s1, sa) = sums
            .iter()
            .find(|s| s.0 == r.dtype)
            .copied()
            .unwrap_or((r.dtype, 1.0, 1.0));
        println!(
            "| {} | {} | {:.2} | {:.0}% | {:.2} | {:.2} | {:.0}% | {:.2}× |",
            r.dtype.name(),
            r.what,
            r.one,
            100.0 * r.one / s1,
            r.elems,
            r.all,
            100.0 * r.all / sa,
            r.all / r.one
        );
    }
    print_python(&python);
    if args.rss_gib > 0.0 {
        let path = dir.path().join("rss.safetensors");
        eprintln!(
            "writing {} ({:.2} GiB) for the memory figure…",
            path.display(),
            args.rss_gib
        );
        let bytes = make_file(
            &path,
            Dtype::F32,
            (args.rss_gib * f64::from(1u32 << 30)) as u64,
        );
        let ck = Checkpoint::open(&path).expect("valid");
        std::hint::black_box(sum_mapped(&ck));
        let grown = peak_rss_growth(|| run_scan(&ck, &exact));
        println!(
            "\nPeak anonymous memory of a full scan of a {:.2} GB F32 file: {:.1} MB beyond the mapped pages.",
            bytes as f64 / 1e9,
            grown as f64 / 1e6
        );
        drop(ck);
        let _ = std::fs::remove_file(&path);
    }
}
