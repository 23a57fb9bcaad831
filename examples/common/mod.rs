//! What the benchmarks share: thread pools, best-of timing, and a plain
//! read of the mapped bytes (the machine's own bandwidth beside a figure).

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
