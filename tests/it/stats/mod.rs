//! Statistics against an independent float64 reference computed here from
//! the decoders: sort-based quantiles, compensated sums in sorted order,
//! histogram bins by a linear search over the edges (DESIGN.md,
//! "Statistics semantics").
//!
//! This file holds the shared helpers: a deterministic generator, one
//! tensor written and measured, tensor bytes from values.

mod cli;
mod edges;
mod reference;
mod scans;
mod values;

use tensorscope::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{StatsOptions, TensorStats, tensor_stats};

use crate::fixtures::{REF_DTYPES, RefTensor, reference_file, write};

/// A small deterministic generator (xorshift64*), with normal deviates.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

fn ref_dtype(d: Dtype) -> safetensors::Dtype {
    let i = Dtype::ALL.iter().position(|x| *x == d).expect("known");
    REF_DTYPES[i]
}

/// Writes one tensor with the official writer and returns its statistics.
fn stats_of(dtype: Dtype, shape: &[usize], data: Vec<u8>, options: &StatsOptions) -> TensorStats {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = reference_file(
        &[(
            "t".to_owned(),
            RefTensor {
                dtype: ref_dtype(dtype),
                shape: shape.to_vec(),
                data,
            },
        )],
        None,
    );
    let path = write(dir.path(), "t.safetensors", &file);
    let ck = Checkpoint::open(&path).expect("valid");
    let t = ck.find("t").expect("tensor");
    tensor_stats(&ck, t, options, &CancelToken::new(), &Progress::new()).expect("stats")
}

fn full() -> StatsOptions {
    StatsOptions::default()
}

fn f32_bytes(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn f64_bytes(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values.into_iter().flat_map(f64::to_le_bytes).collect()
}
