//! Header parsing speed, ours against the official `safetensors` crate on the
//! same bytes: a file with 100,000 tensors, and a sparse 10 GB file (made by
//! the bench, removed when it ends) where opening must read only the header.
//!
//! `cargo bench --bench parse` prints criterion's figures, then a table of
//! median times and the ratio reference / ours (above 1 means we are faster).

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::Criterion;
use tensorscope::format::{Checkpoint, parse};

fn many_tensors(count: u64) -> Vec<u8> {
    let mut header = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    for i in 0..count {
        let _ = write!(
            header,
            ",\"model.layers.{}.mlp.experts.{}.down_proj.weight\":{{\"dtype\":\"BF16\",\"shape\":[4,2],\"data_offsets\":[{},{}]}}",
            i / 64,
            i % 64,
            i * 16,
            i * 16 + 16
        );
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + (count * 16) as usize, 0);
    out
}

fn sparse_file(path: &Path, data_bytes: u64) {
    let header = format!(
        "{{\"weight\":{{\"dtype\":\"F16\",\"shape\":[{}],\"data_offsets\":[0,{data_bytes}]}}}}",
        data_bytes / 2
    );
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    std::fs::write(path, &bytes).expect("write bench file");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open bench file");
    f.set_len(bytes.len() as u64 + data_bytes)
        .expect("extend sparse file");
}

fn reference_open(path: &Path) -> usize {
    let file = std::fs::File::open(path).expect("open");
    #[allow(unsafe_code)]
    // SAFETY: the bench file is private to this process and not modified.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let (n, meta) = safetensors::SafeTensors::read_metadata(&map).expect("valid");
    n + meta.tensors().len()
}

fn median(mut f: impl FnMut(), runs: usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn main() {
    let bytes = many_tensors(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("sparse-10GB.safetensors");
    sparse_file(&big, 10_000_000_000);

    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    {
        let mut g = c.benchmark_group("parse_100k_tensors");
        g.throughput(criterion::Throughput::Bytes(bytes.len() as u64));
        g.bench_function("tensorscope", |b| {
            b.iter(|| parse(black_box(&bytes)).expect("valid"));
        });
        g.bench_function("safetensors_read_metadata", |b| {
            b.iter(|| safetensors::SafeTensors::read_metadata(black_box(&bytes)).expect("valid"));
        });
        g.finish();
    }
    {
        let mut g = c.benchmark_group("open_sparse_10GB");
        g.bench_function("tensorscope", |b| {
            b.iter(|| Checkpoint::open(black_box(&big)).expect("valid"));
        });
        g.bench_function("safetensors_mmap_read_metadata", |b| {
            b.iter(|| reference_open(black_box(&big)));
        });
        g.finish();
    }
    c.final_summary();

    let ours = median(|| drop(black_box(parse(&bytes).expect("valid"))), 15);
    let theirs = median(
        || {
            drop(black_box(
                safetensors::SafeTensors::read_metadata(&bytes).expect("valid"),
            ));
        },
        15,
    );
    let ours_open = median(
        || drop(black_box(Checkpoint::open(&big).expect("valid"))),
        15,
    );
    let theirs_open = median(|| _ = black_box(reference_open(&big)), 15);
    println!();
    println!("| case | tensorscope | safetensors 0.8 | ratio (reference / ours) |");
    println!("|---|---|---|---|");
    println!(
        "| parse 100,000 tensors ({:.1} MB header) | {:.2} ms | {:.2} ms | {:.2} |",
        bytes.len() as f64 / 1e6,
        ours.as_secs_f64() * 1e3,
        theirs.as_secs_f64() * 1e3,
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
    println!(
        "| open a sparse 10 GB file | {:.3} ms | {:.3} ms | {:.2} |",
        ours_open.as_secs_f64() * 1e3,
        theirs_open.as_secs_f64() * 1e3,
        theirs_open.as_secs_f64() / ours_open.as_secs_f64()
    );
}
