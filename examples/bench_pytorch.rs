//! PyTorch files: `info` against `torch.load(weights_only=True)`, and
//! `resave` to safetensors against a plain copy of the same bytes.
//!
//! ```sh
//! cargo run --release --example bench_pytorch                 # a 1 GiB .bin
//! cargo run --release --example bench_pytorch -- --gib 4 --tensors 1024
//! TENSORSCOPE_PYTHON=/path/to/venv/bin/python cargo run --release --example bench_pytorch
//! ```
//!
//! It writes a `pytorch_model.bin` of `--gib` GiB (`--tensors` F32
//! tensors, 256 by default) laid out as `torch.save` lays it out (a zip of
//! stored entries, each storage on a 64-byte boundary, a protocol-2
//! `data.pkl` of `_rebuild_tensor_v2` calls), reads it once so that it sits
//! in the page cache, then times (best of `--runs`, 5 by default):
//!
//! * **info**: what `tensorscope info` does, `Checkpoint::open` (the zip's
//!   directory and `data.pkl` only) and every tensor's facts;
//! * `torch.load(weights_only=True)` (and with `mmap=True`) in the Python
//!   given by `$TENSORSCOPE_PYTHON`, else `python3`, when it imports torch
//!   (else the run says how to install it);
//! * **resave**: the file to a safetensors file beside it, against a plain
//!   copy of the file (`std::fs::copy`, the kernel's own copy) and a copy
//!   through user space (1 MiB reads and writes).
//!
//! The files are written in a temporary folder (in `--dir` when given),
//! deleted at the end.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::resave::{ResaveOptions, resave};

struct Args {
    gib: f64,
    tensors: usize,
    runs: usize,
    dir: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        gib: 1.0,
        tensors: 256,
        runs: 5,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--gib" => a.gib = value.parse().expect("--gib N"),
            "--tensors" => a.tensors = value.parse().expect("--tensors N"),
            "--runs" => a.runs = value.parse().expect("--runs N"),
            "--dir" => a.dir = Some(PathBuf::from(value)),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// `BINUNICODE s`, as protocol 2 writes a string.
fn su(s: &str) -> Vec<u8> {
    let mut v = vec![b'X'];
    v.extend_from_slice(&u32::try_from(s.len()).expect("short").to_le_bytes());
    v.extend_from_slice(s.as_bytes());
    v
}

/// `BININT n`.
fn int(n: u64) -> Vec<u8> {
    let mut v = vec![b'J'];
    v.extend_from_slice(&i32::try_from(n).expect("fits").to_le_bytes());
    v
}

/// The protocol-2 pickle `torch.save` writes for a state dict of
/// `tensors` F32 rows of `numel` elements each, storage `i` each.
fn pickle(tensors: usize, rows: u64, cols: u64) -> Vec<u8> {
    let mut p = b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(".to_vec();
    for i in 0..tensors {
        p.extend(su(&format!("model.layers.{i}.mlp.weight")));
        p.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        p.extend(su("storage"));
        p.extend_from_slice(b"ctorch\nFloatStorage\n");
        p.extend(su(&i.to_string()));
        p.extend(su("cpu"));
        p.extend(int(rows * cols));
        p.extend_from_slice(b"tQ");
        p.extend(int(0));
        p.push(b'(');
        p.extend(int(rows));
        p.extend(int(cols));
        p.extend_from_slice(b"t(");
        p.extend(int(cols));
        p.extend(int(1));
        p.extend_from_slice(b"t\x89ccollections\nOrderedDict\n)RtR");
    }
    p.extend_from_slice(b"u.");
    p
}

/// Writes the file and returns its size.
fn write_model(path: &Path, gib: f64, tensors: usize) -> u64 {
    let total = (gib * f64::from(1u32 << 30)) as u64;
    let cols = 1024u64;
    let rows = (total / tensors as u64 / 4 / cols).max(1);
    let f = std::fs::File::create(path).expect("create");
    let mut z = zip::ZipWriter::new(std::io::BufWriter::with_capacity(8 << 20, f));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true)
        .with_alignment(64);
    z.start_file("pytorch_model/data.pkl", options)
        .expect("entry");
    z.write_all(&pickle(tensors, rows, cols)).expect("pickle");
    let mut row = vec![0u8; (cols * 4) as usize];
    for i in 0..tensors {
        z.start_file(format!("pytorch_model/data/{i}"), options)
            .expect("entry");
        for r in 0..rows {
            for (c, v) in row.chunks_exact_mut(4).enumerate() {
                let x = ((i as u64 * 131 + r * 7 + c as u64) % 1000) as f32 / 500.0 - 1.0;
                v.copy_from_slice(&x.to_le_bytes());
            }
            z.write_all(&row).expect("storage");
        }
    }
    z.start_file("pytorch_model/version", options)
        .expect("entry");
    z.write_all(b"3\n").expect("version");
    z.finish().expect("finish").flush().expect("flush");
    std::fs::metadata(path).expect("size").len()
}

fn best(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs.max(1)).map(|_| f()).min().unwrap_or_default()
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

/// Seconds of `torch.load` of `path` in the Python that imports torch,
/// best of `runs`; `None` (and how to get one) when none does.
fn torch_load(path: &Path, runs: usize, mmap: bool) -> Option<f64> {
    let python = std::env::var("TENSORSCOPE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!(
        "import time, torch\nbest = 1e9\nfor _ in range({runs}):\n    t = time.perf_counter()\n    sd = torch.load({path:?}, weights_only=True, mmap={mmap})\n    n = sum(v.numel() for v in sd.values())\n    best = min(best, time.perf_counter() - t)\n    del sd\nprint(best)\n",
        path = path.display().to_string(),
        mmap = if mmap { "True" } else { "False" },
    );
    let out = Command::new(&python).args(["-c", &script]).output().ok();
    match out {
        Some(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().parse().ok(),
        Some(o) if !String::from_utf8_lossy(&o.stderr).contains("No module named") => {
            let err = String::from_utf8_lossy(&o.stderr);
            eprintln!(
                "torch.load failed: {}",
                err.lines().rev().take(6).collect::<Vec<_>>().join(" | ")
            );
            None
        }
        _ => {
            eprintln!(
                "torch baseline skipped: {python} does not import torch. Install it into a \
                 virtual environment (`python3 -m venv /tmp/torch && /tmp/torch/bin/pip install \
                 torch`), then TENSORSCOPE_PYTHON=/tmp/torch/bin/python."
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
    let dir = holder.path();
    let model = dir.join("pytorch_model.bin");
    let size = write_model(&model, a.gib, a.tensors);
    // Into the page cache.
    let mut sink = vec![0u8; 1 << 20];
    let mut f = std::fs::File::open(&model).expect("open");
    while f.read(&mut sink).expect("read") > 0 {}
    println!(
        "pytorch_model.bin: {:.2} GB, {} F32 tensors, {} threads",
        size as f64 / 1e9,
        a.tensors,
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    );

    let info = best(a.runs, || {
        let t = Instant::now();
        let ck = Checkpoint::open(&model).expect("opens");
        let facts: usize = ck
            .tensors()
            .iter()
            .map(|&r| ck.stored_facts(r).container.len())
            .sum();
        assert_eq!(ck.tensors().len(), a.tensors, "{facts}");
        t.elapsed()
    });
    println!("\n| info | seconds | × ours |\n|---|---|---|");
    println!("| tensorscope info | {:.4} | 1 |", info.as_secs_f64());
    for mmap in [false, true] {
        if let Some(s) = torch_load(&model, a.runs.min(3), mmap) {
            println!(
                "| torch.load(weights_only=True{}) | {s:.4} | {:.0} |",
                if mmap { ", mmap=True" } else { "" },
                s / info.as_secs_f64()
            );
        }
    }

    let out = dir.join("model.safetensors");
    let ck = Checkpoint::open(&model).expect("opens");
    let opts = ResaveOptions::default();
    let resaved = best(a.runs.min(3), || {
        let _ = std::fs::remove_file(&out);
        let t = Instant::now();
        resave(&ck, &out, &opts, &CancelToken::new(), &Progress::new()).expect("resave");
        t.elapsed()
    });
    let copy = dir.join("copy.bin");
    let kernel = best(a.runs.min(3), || {
        let _ = std::fs::remove_file(&copy);
        let t = Instant::now();
        std::fs::copy(&model, &copy).expect("copy");
        let f = std::fs::File::open(&copy).expect("open");
        f.sync_all().expect("sync");
        t.elapsed()
    });
    let user = best(a.runs.min(3), || {
        let _ = std::fs::remove_file(&copy);
        let t = Instant::now();
        let mut from = std::fs::File::open(&model).expect("open");
        let mut to = std::fs::File::create(&copy).expect("create");
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = from.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            to.write_all(&buf[..n]).expect("write");
        }
        to.sync_all().expect("sync");
        t.elapsed()
    });
    println!(
        "\n| write {:.2} GB | seconds | GB/s | resave's rate, % of it |\n|---|---|---|---|",
        size as f64 / 1e9
    );
    println!(
        "| tensorscope resave (fsync'd) | {:.3} | {:.2} | 1 |",
        resaved.as_secs_f64(),
        gbps(size, resaved)
    );
    for (what, d) in [
        ("std::fs::copy + fsync", kernel),
        ("1 MiB read/write copy + fsync", user),
    ] {
        println!(
            "| {what} | {:.3} | {:.2} | {:.0}% |",
            d.as_secs_f64(),
            gbps(size, d),
            100.0 * d.as_secs_f64() / resaved.as_secs_f64()
        );
    }
}
