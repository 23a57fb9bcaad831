//! The copies compiled for AVX2 and AVX-512 (x86-64 only): the portable
//! kernels compiled again with the features enabled, and the registers
//! read as arrays (here); the hand-written loops in `scan.rs`,
//! `block_f64.rs` and `marked.rs`, with the fused loops' key buffers in
//! `keys.rs`.

mod block_f64;
mod keys;
mod marked;
mod pairs;
mod scan;

use std::arch::x86_64::{__m256, __m256d, __m256i};

use crate::stats::kernel::{self, MARK_WORDS, Specials};
use crate::stats::moments::Moments;

pub(super) use block_f64::{block_f64_count_512, block_f64_fused_512};
pub(super) use marked::{marked_near_f32, marked_near_f32_512, marked_near_f64_512};
pub(super) use pairs::{
    marked_codes_256, marked_codes_512, nibble_counts_256, q4_k_pairs_256, scan_count_pairs_256,
    scan_count_pairs_512, scan_pairs_256, scan_pairs_512,
};
pub(super) use scan::{
    scan_bf16, scan_count_f32, scan_count_f32_512, scan_f16, scan_f32, scan_f32_512,
};

/// Low bits of an f32 key below its prefix.
const LOW32: u32 = 32 - kernel::PREFIX_BITS;
/// Low bits of an f64 key below its prefix.
const LOW64: u32 = 64 - kernel::PREFIX_BITS;
// A key shifted right by LOW32 (LOW64) indexes the tallies (`add_keys`).
const _: () = assert!(kernel::BUCKETS == 1 << (32 - LOW32));
const _: () = assert!(kernel::BUCKETS == 1 << (64 - LOW64));

/// [`kernel::count_prefixes`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn count_prefixes_256<K: kernel::Keyed>(
    vals: &[K],
    ahead: &[K],
    idx: &mut [u32; kernel::PART],
    table: &mut kernel::Tally<'_>,
) {
    kernel::count_prefixes(vals, ahead, idx, table);
}

/// [`kernel::count_prefixes`] compiled for AVX-512.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) fn count_prefixes_512<K: kernel::Keyed>(
    vals: &[K],
    ahead: &[K],
    idx: &mut [u32; kernel::PART],
    table: &mut kernel::Tally<'_>,
) {
    kernel::count_prefixes(vals, ahead, idx, table);
}

/// [`kernel::block_f64_in`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn block_f64_256(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    kernel::block_f64_in(vals, smallest_normal)
}

/// [`kernel::block_f64_in`] compiled for AVX-512.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) fn block_f64_512(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    kernel::block_f64_in(vals, smallest_normal)
}

/// [`kernel::for_each_marked`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn for_each_marked_256<K: kernel::Keyed>(
    vals: &[K],
    marks: &[u64; MARK_WORDS],
    found: &mut kernel::Hits<'_>,
) {
    kernel::for_each_marked(vals, marks, found);
}

/// [`kernel::for_each_marked`] compiled for AVX-512.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) fn for_each_marked_512<K: kernel::Keyed>(
    vals: &[K],
    marks: &[u64; MARK_WORDS],
    found: &mut kernel::Hits<'_>,
) {
    kernel::for_each_marked(vals, marks, found);
}

/// An AVX2 register of u32 lanes as an array.
#[inline]
fn epu32(v: __m256i) -> [u32; 8] {
    // SAFETY: both are 32 bytes of plain integers; every bit pattern is
    // a valid value of either.
    unsafe { std::mem::transmute(v) }
}

/// An AVX2 register of f32 lanes as an array.
#[inline]
fn ps(v: __m256) -> [f32; 8] {
    // SAFETY: as in `epu32`: 32 bytes of f32.
    unsafe { std::mem::transmute(v) }
}

/// Two AVX2 registers of f64 lanes (lanes 0–3, then 4–7) as an array.
#[inline]
fn pd(v: [__m256d; 2]) -> [f64; 8] {
    // SAFETY: as in `epu32`: 2 × 32 bytes of f64 into [f64; 8].
    unsafe { std::mem::transmute(v) }
}
