//! Runtime dispatch of the hot loops to code compiled for AVX2.
//!
//! The kernels of [`super::kernel`] are plain Rust that the compiler
//! vectorises. Built for the baseline x86-64 target (SSE2) they use 128-bit
//! registers and miss the integer min/max instructions; built once more
//! inside a `#[target_feature(enable = "avx2")]` function they use 256-bit
//! registers. The binary keeps running on any x86-64 CPU: the AVX2 copy is
//! called only after `is_x86_feature_detected!` has said the CPU has AVX2.
//!
//! This is the one module besides the file mapping that holds `unsafe`:
//! calling a `#[target_feature]` function is unsafe because running it on a
//! CPU without the feature is undefined behaviour. Each call below is
//! guarded by the run-time check, which is the whole safety argument. Both
//! copies run the same IEEE operations in the same order (no fused
//! multiply-add is enabled), so their results are bit-identical; the tests
//! at the end check that.
#![allow(unsafe_code)]

use super::bins::FloatBins;
use super::kernel::{self, F32Group, F32Lanes, Lane, Specials};
use super::moments::Moments;

/// Whether the AVX2 copies may run (the check is cached by the standard
/// library: one atomic load).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Specials, range and moments of a block of little-endian f32 values
/// ([`kernel::block_f32`] with the fastest group scan this CPU has).
pub(crate) fn block_f32(bytes: &[u8], tiny_bits: u32) -> (Specials, Moments) {
    kernel::block_f32(bytes, tiny_bits, scan_f32_groups)
}

/// [`kernel::scan_f32_groups`], with AVX2 where the CPU has it.
fn scan_f32_groups(groups: &[F32Group], x0: f64) -> F32Lanes {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { x86::scan_f32_groups(groups, x0) };
    }
    kernel::scan_f32_groups(groups, x0)
}

/// Adds a block to a linear histogram ([`kernel::histogram_block`]).
pub(crate) fn histogram_block<T: Lane>(vals: &[T], bins: &FloatBins, tables: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn wide<T: Lane>(vals: &[T], bins: &FloatBins, tables: &mut [u32]) {
            kernel::histogram_block(vals, bins, tables);
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { wide(vals, bins, tables) };
        }
    }
    kernel::histogram_block(vals, bins, tables);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{F32Group, F32Lanes};

    /// An AVX2 register of u32 lanes as an array.
    fn epu32(v: __m256i) -> [u32; 8] {
        // SAFETY: both are 32 bytes of plain integers; every bit pattern is
        // a valid value of either.
        unsafe { std::mem::transmute(v) }
    }

    /// An AVX2 register of f32 lanes as an array.
    fn ps(v: __m256) -> [f32; 8] {
        // SAFETY: as in `epu32`: 32 bytes of f32.
        unsafe { std::mem::transmute(v) }
    }

    /// Two AVX2 registers of f64 lanes (lanes 0–3, then 4–7) as an array.
    fn pd(lo: __m256d, hi: __m256d) -> [f64; 8] {
        // SAFETY: as in `epu32`: 2 × 32 bytes of f64 into [f64; 8].
        unsafe { std::mem::transmute([lo, hi]) }
    }

    /// [`super::kernel::scan_f32_groups`] in AVX2: the same operations on
    /// the same lanes, eight values per step.
    #[target_feature(enable = "avx2")]
    pub(super) fn scan_f32_groups(groups: &[F32Group], x0: f64) -> F32Lanes {
        let magnitude = _mm256_set1_epi32(0x7fff_ffff);
        let abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fff_ffff_ffff_ffff));
        let x0v = _mm256_set1_pd(x0);
        let mut low = _mm256_set1_epi32(-1);
        let mut min = _mm256_set1_ps(f32::INFINITY);
        let mut max = _mm256_set1_ps(f32::NEG_INFINITY);
        let [mut s0, mut s1, mut a0, mut a1, mut q0, mut q1] = [_mm256_setzero_pd(); 6];
        for g in groups {
            // SAFETY: `g` is 32 readable bytes; the load has no alignment
            // requirement.
            let v = unsafe { _mm256_loadu_ps(g.as_ptr().cast::<f32>()) };
            let a = _mm256_and_si256(_mm256_castps_si256(v), magnitude);
            low = _mm256_min_epu32(low, a);
            // `x < m ? x : m`, as the scalar lanes select.
            min = _mm256_min_ps(v, min);
            max = _mm256_max_ps(v, max);
            let w0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            let w1 = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v));
            s0 = _mm256_add_pd(s0, w0);
            s1 = _mm256_add_pd(s1, w1);
            a0 = _mm256_add_pd(a0, _mm256_and_pd(w0, abs_mask));
            a1 = _mm256_add_pd(a1, _mm256_and_pd(w1, abs_mask));
            let d0 = _mm256_sub_pd(w0, x0v);
            let d1 = _mm256_sub_pd(w1, x0v);
            q0 = _mm256_add_pd(q0, _mm256_mul_pd(d0, d0));
            q1 = _mm256_add_pd(q1, _mm256_mul_pd(d1, d1));
        }
        F32Lanes {
            low: epu32(low),
            min: ps(min),
            max: ps(max),
            sum: pd(s0, s1),
            abs: pd(a0, a1),
            sq: pd(q0, q1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::kernel::BLOCK;

    /// Random f32 values of every kind: normals of several scales, zeros,
    /// subnormals, NaN and infinities.
    fn values(seed: u64, n: usize, specials: bool) -> Vec<f32> {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..n)
            .map(|_| {
                let r = next();
                match r % 64 {
                    0 if specials => f32::NAN,
                    1 if specials => f32::INFINITY,
                    2 => -0.0,
                    3 => f32::from_bits((r >> 40) as u32 & 0x7f_ffff),
                    _ => {
                        let u = (r >> 11) as f64 / (1u64 << 53) as f64;
                        ((u - 0.4) * 10f64.powi((r % 7) as i32 - 3)) as f32
                    }
                }
            })
            .collect()
    }

    #[test]
    fn both_copies_agree_bit_for_bit() {
        for (seed, n, specials) in [(1, BLOCK, false), (2, 1000, true), (3, 3 * BLOCK + 5, true)] {
            let vals = values(seed, n, specials);
            let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
            for tiny_bits in [0x0080_0000, 0x3880_0000] {
                let (sp_a, m_a) = block_f32(&bytes, tiny_bits);
                let (sp_b, m_b) = kernel::block_f32(&bytes, tiny_bits, kernel::scan_f32_groups);
                assert_eq!(sp_a, sp_b);
                assert_eq!(format!("{m_a:?}"), format!("{m_b:?}"));
            }
            let groups = bytes.as_chunks::<32>().0;
            assert_eq!(
                format!("{:?}", scan_f32_groups(groups, 0.25)),
                format!("{:?}", kernel::scan_f32_groups(groups, 0.25))
            );
            let bins = FloatBins::new(-2.0, 3.0, 256);
            let mut a = vec![0u32; 4 * 256];
            let mut b = vec![0u32; 4 * 256];
            for part in vals.chunks(BLOCK) {
                histogram_block(part, &bins, &mut a);
                kernel::histogram_block(part, &bins, &mut b);
            }
            assert_eq!(a, b);
        }
    }
}
