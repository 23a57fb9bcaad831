//! Criterion figures for the statistics engine on in-memory tensors of
//! 64 MiB (F32, BF16, F8_E4M3, F4), one thread, with and without histograms.
//! The full comparison with memory bandwidth and the Python stack is
//! `cargo run --release --example bench_stats`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use tensorscope::Dtype;
use tensorscope::format::TensorInfo;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{Detail, QuantileMode, StatsOptions, stats_of};

const BYTES: usize = 64 << 20;

/// Random bytes shaped like weights: σ = 0.02 normals for F32 and BF16,
/// random codes for the small floats.
fn data(dtype: Dtype) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut normal = move || {
        // Sum of uniforms: close enough to a normal for a speed test.
        let s: f64 = (0..4)
            .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64)
            .sum();
        (s - 2.0) * 0.035
    };
    let mut out = Vec::with_capacity(BYTES);
    while out.len() < BYTES {
        match dtype {
            Dtype::F32 => out.extend((normal() as f32).to_le_bytes()),
            Dtype::BF16 => out.extend(half::bf16::from_f64(normal()).to_le_bytes()),
            _ => out.push(((normal() * 1000.0) as i64 & 0x7f) as u8 ^ 0x30),
        }
    }
    out.truncate(BYTES);
    out
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    for dtype in [Dtype::F32, Dtype::BF16, Dtype::F8E4M3, Dtype::F4] {
        let bytes = data(dtype);
        let numel = bytes.len() as u64 * 8 / u64::from(dtype.bits());
        let info = TensorInfo::new("t".into(), dtype, vec![numel], 0).expect("whole bytes");
        let mut g = c.benchmark_group(format!("stats_{}", dtype.name()));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        for (name, options) in [
            (
                "moments",
                StatsOptions {
                    detail: Detail::MomentsOnly,
                    ..StatsOptions::default()
                },
            ),
            (
                "histograms",
                StatsOptions {
                    quantiles: QuantileMode::FromHistogram,
                    ..StatsOptions::default()
                },
            ),
            ("full", StatsOptions::default()),
        ] {
            g.bench_function(name, |b| {
                b.iter(|| {
                    pool.install(|| {
                        stats_of(
                            &info,
                            black_box(&bytes),
                            &options,
                            &CancelToken::new(),
                            &Progress::new(),
                        )
                        .expect("not cancelled")
                    })
                });
            });
        }
        g.finish();
    }
    c.final_summary();
}
