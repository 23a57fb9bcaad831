//! What the benchmarks share: thread pools, best-of timing, and a plain
//! read of the mapped bytes (the machine's own bandwidth beside a figure).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use tensorscope::format::Checkpoint;

/// A pool of `threads` threads.
pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

/// The best time of `f` over `runs` runs (at least one).
pub fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// The best times of `f` on the pools `one` and `all` over `runs` runs,
/// the two taken in turn: a shared machine's slow spells then fall on both
/// figures of a speed-up alike, not on all the runs of one of them.
pub fn best_of_pools(
    runs: usize,
    one: &rayon::ThreadPool,
    all: &rayon::ThreadPool,
    f: impl Fn() + Sync,
) -> (Duration, Duration) {
    let time = |pool: &rayon::ThreadPool| {
        pool.install(|| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
    };
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..runs.max(1) {
        best.0 = best.0.min(time(one));
        best.1 = best.1.min(time(all));
    }
    best
}

/// Plain sum of the mapped tensor bytes as u64 words, in parallel chunks
/// on the current pool.
pub fn sum_mapped(ck: &Checkpoint) -> u64 {
    use rayon::prelude::*;
    ck.tensors()
        .par_iter()
        .map(|t| {
            ck.bytes(*t)
                .par_chunks(8 << 20)
                .map(|c| {
                    let (words, _) = c.as_chunks::<8>();
                    let (groups, rest) = words.as_chunks::<8>();
                    let mut acc = [0u64; 8];
                    for g in groups {
                        for j in 0..8 {
                            acc[j] = acc[j].wrapping_add(u64::from_le_bytes(g[j]));
                        }
                    }
                    rest.iter().fold(
                        acc.iter().fold(0, |a: u64, &b| a.wrapping_add(b)),
                        |a, w| a.wrapping_add(u64::from_le_bytes(*w)),
                    )
                })
                .reduce(|| 0, u64::wrapping_add)
        })
        .reduce(|| 0, u64::wrapping_add)
}

/// `n` xorshift values in ±0.02 from `seed`.
pub fn weights(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.04
        })
        .collect()
}

/// A safetensors file of F32 tensors, each of `shape`.
pub fn write_f32_file(path: &Path, tensors: &[(String, Vec<f32>)], shape: [usize; 2]) {
    let [rows, cols] = shape;
    let mut header = String::from("{");
    let mut offset = 0usize;
    for (i, (name, v)) in tensors.iter().enumerate() {
        let end = offset + 4 * v.len();
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            "\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{rows},{cols}],\"data_offsets\":[{offset},{end}]}}"
        );
        offset = end;
    }
    header.push('}');
    while (8 + header.len()) % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    f.write_all(&(header.len() as u64).to_le_bytes())
        .expect("write");
    f.write_all(header.as_bytes()).expect("write");
    for (_, v) in tensors {
        for x in v {
            f.write_all(&x.to_le_bytes()).expect("write");
        }
    }
    f.flush().expect("flush");
}
