//! The Windows build against the Linux build on the same file: `tensorscope
//! stats` of a 1 GiB F32 checkpoint by the Linux binary and by the Windows
//! `.exe` under wine (the issue's expectation: the same within 20%), beside
//! a plain sum of the file's mapped bytes (the machine's own bandwidth).
//!
//! ```sh
//! cargo build --release && scripts/build-windows
//! cargo run --release --example bench_windows            # 1 GiB, best of 3
//! cargo run --release --example bench_windows -- --mib 256 --runs 2 \
//!     --exe target/x86_64-pc-windows-gnu/dist/tensorscope.exe
//! ```
//!
//! It writes the file (F32 `[1024, 4096]` weights, xorshift values in
//! ±0.02) into a temporary folder, reads it once so that it sits in the
//! page cache, and times whole runs of `stats FILE --json > /dev/null` (best
//! of `--runs`): `target/release/tensorscope` (or `--linux PATH`), and the
//! `.exe` under `wine` with the wine server kept running
//! (`$WINEPREFIX`, else `target/wine` as scripts/test-windows makes it).
//! Wine's own start (a `--version` run, timed too) is part of the `.exe`'s
//! figure, as a user would meet it.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tensorscope::format::Checkpoint;

#[allow(dead_code, reason = "each benchmark uses part of what they share")]
mod common;
use common::{best_of, sum_mapped, weights, write_f32_file};

const ROWS: usize = 1024;
const COLS: usize = 4096;

struct Args {
    mib: usize,
    runs: usize,
    linux: PathBuf,
    exe: PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        mib: 1024,
        runs: 3,
        linux: PathBuf::from("target/release/tensorscope"),
        exe: PathBuf::from("target/x86_64-pc-windows-gnu/dist/tensorscope.exe"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue;
        }
        let value = it.next().unwrap_or_else(|| panic!("{flag} takes a value"));
        let number = || {
            value
                .parse::<usize>()
                .unwrap_or_else(|_| panic!("{flag} takes a number"))
        };
        match flag.as_str() {
            "--mib" => a.mib = number().max(16),
            "--runs" => a.runs = number().max(1),
            "--linux" => a.linux = PathBuf::from(&value),
            "--exe" => a.exe = PathBuf::from(&value),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The best wall time of `program ARGS` over `runs` runs (with `env`);
/// panics when it fails.
fn time_command(
    runs: usize,
    program: &[&OsStr],
    args: &[&OsStr],
    env: &[(&str, &OsStr)],
) -> Duration {
    best_of(runs, || {
        let out = Command::new(program[0])
            .args(&program[1..])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{program:?} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    })
}

fn main() {
    let a = args();
    for p in [&a.linux, &a.exe] {
        assert!(
            p.is_file(),
            "{} is missing (see the header of this example)",
            p.display()
        );
    }
    let prefix = std::env::var_os("WINEPREFIX").map_or_else(
        || {
            std::fs::canonicalize("target")
                .expect("target")
                .join("wine")
        },
        PathBuf::from,
    );
    let wine_env: [(&str, &OsStr); 2] = [
        ("WINEPREFIX", prefix.as_os_str()),
        ("WINEDEBUG", "-all".as_ref()),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.safetensors");
    let count = (a.mib << 20) / (4 * ROWS * COLS);
    let tensors: Vec<(String, Vec<f32>)> = (0..count.max(1))
        .map(|i| {
            (
                format!("model.layers.{i}.mlp.up_proj.weight"),
                weights(i as u64 + 1, ROWS * COLS),
            )
        })
        .collect();
    write_f32_file(&path, &tensors, [ROWS, COLS]);
    drop(tensors);
    let ck = Checkpoint::open(&path).expect("open");
    let size = std::fs::metadata(&path).expect("meta").len();
    let bytes = ck
        .tensors()
        .iter()
        .map(|t| ck.bytes(*t).len() as u64)
        .sum::<u64>();
    // Once to bring the file into the page cache.
    std::hint::black_box(sum_mapped(&ck));
    let sum = best_of(a.runs, || {
        std::hint::black_box(sum_mapped(&ck));
    });
    drop(ck);

    let file = path.as_os_str();
    let stats_args: [&OsStr; 3] = ["stats".as_ref(), file, "--json".as_ref()];
    let linux = time_command(a.runs, &[a.linux.as_os_str()], &stats_args, &[]);
    let _ = Command::new("wineserver")
        .arg("-p")
        .envs(wine_env.iter().copied())
        .status();
    let wine: [&OsStr; 2] = ["wine".as_ref(), a.exe.as_os_str()];
    let start = time_command(a.runs, &wine, &["--version".as_ref()], &wine_env);
    let windows = time_command(a.runs, &wine, &stats_args, &wine_env);
    let _ = Command::new("wineserver")
        .arg("-k")
        .envs(wine_env.iter().copied())
        .status();

    let gbs = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    println!(
        "tensorscope stats on {:.2} GiB of F32 ({} tensors, file {size} bytes), best of {}, page cache warm",
        bytes as f64 / f64::from(1u32 << 30),
        count,
        a.runs
    );
    println!("{:<44} {:>9} {:>9}", "", "seconds", "GB/s");
    println!(
        "{:<44} {:>9.3} {:>9.2}",
        "plain sum of the mapped bytes (all threads)",
        sum.as_secs_f64(),
        gbs(sum)
    );
    println!(
        "{:<44} {:>9.3} {:>9.2}",
        "Linux binary: stats",
        linux.as_secs_f64(),
        gbs(linux)
    );
    println!(
        "{:<44} {:>9.3} {:>9}",
        "Windows .exe under wine: --version (start)",
        start.as_secs_f64(),
        "-"
    );
    println!(
        "{:<44} {:>9.3} {:>9.2}",
        "Windows .exe under wine: stats",
        windows.as_secs_f64(),
        gbs(windows)
    );
    println!(
        "Windows / Linux: {:.2}× the time ({:.2}× without wine's start)",
        windows.as_secs_f64() / linux.as_secs_f64(),
        (windows.saturating_sub(start)).as_secs_f64() / linux.as_secs_f64()
    );
}
