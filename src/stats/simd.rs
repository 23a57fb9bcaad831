//! Runtime dispatch of the hot loops to code compiled for AVX2 or AVX-512.
//!
//! The kernels of [`super::kernel`] are plain Rust that the compiler
//! vectorises. Built for the baseline x86-64 target (SSE2) they use 128-bit
//! registers and miss the integer min/max instructions; built once more
//! inside a `#[target_feature(enable = "avx2")]` function they use 256-bit
//! registers; the AVX-512 copies (F, BW, DQ, VL) use 512-bit ones. The
//! binary keeps running on any x86-64 CPU: a copy is called only after
//! `is_x86_feature_detected!` has said the CPU has its features.
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
use super::kernel::{self, F32Guess, F32Lanes, Lane, Specials, Wide};
use super::moments::Moments;

/// Whether the AVX2 copies may run (the check is cached by the standard
/// library: one atomic load).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Specials, range and moments of a block of elements
/// ([`kernel::block_wide`] with the fastest group scan this CPU has).
pub(crate) fn block_wide(kind: Wide, bytes: &[u8], tiny_bits: u32) -> (Specials, Moments) {
    kernel::block_wide(kind, bytes, tiny_bits, scan_groups)
}

/// [`kernel::scan_groups`], with AVX2 (and F16C for F16) where the CPU has
/// them.
fn scan_groups(kind: Wide, bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        match kind {
            // SAFETY: the CPU has these AVX-512 subsets, checked here.
            Wide::F32 if avx512() => return unsafe { x86::scan_f32_512(bytes, tiny_bits, x0) },
            // SAFETY (all three): the CPU has AVX2, checked just above.
            Wide::F32 => return unsafe { x86::scan_f32(bytes, tiny_bits, x0) },
            Wide::BF16 => return unsafe { x86::scan_bf16(bytes, tiny_bits, x0) },
            Wide::F16 if std::arch::is_x86_feature_detected!("f16c") => {
                // SAFETY: and F16C, checked on the line above.
                return unsafe { x86::scan_f16(bytes, tiny_bits, x0) };
            }
            Wide::F16 => {}
        }
    }
    kernel::scan_groups(kind, bytes, tiny_bits, x0)
}

/// Specials, range and moments of f64 values ([`kernel::block_f64`]), a
/// block at a time by a copy of its loops compiled for AVX-512 or AVX2
/// where the CPU has them.
pub(crate) fn block_f64(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return kernel::block_f64_with(vals, smallest_normal, |part, sn| unsafe {
                x86::block_f64_fused_512(part, sn).unwrap_or_else(|| x86::block_f64_512(part, sn))
            });
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return kernel::block_f64_with(vals, smallest_normal, |part, sn| unsafe {
                x86::block_f64_256(part, sn)
            });
        }
    }
    kernel::block_f64(vals, smallest_normal)
}

/// [`block_f64`] of f64 values, and their key prefixes counted into
/// `table` ([`count_prefixes`], which asks for `ahead` while it counts).
/// With AVX-512 both in one loop for a block of at most [`kernel::BLOCK`]
/// values ([`x86::block_f64_count_512`]), with the same results.
pub(crate) fn block_and_prefixes_f64(
    vals: &[f64],
    ahead: &[f64],
    smallest_normal: f64,
    idx: &mut [u32; kernel::PART],
    table: &mut kernel::Tally<'_>,
) -> (Specials, Moments) {
    #[cfg(target_arch = "x86_64")]
    if avx512() && vals.len() <= kernel::BLOCK {
        // SAFETY: the CPU has these AVX-512 subsets, checked just above.
        let summary = unsafe { x86::block_f64_count_512(vals, smallest_normal, ahead, table) };
        // The values are counted whatever the summary; a block it leaves
        // is summarised as `block_f64` does.
        // SAFETY: as above.
        return summary.unwrap_or_else(|| unsafe { x86::block_f64_512(vals, smallest_normal) });
    }
    let summary = block_f64(vals, smallest_normal);
    count_prefixes(vals, ahead, idx, table);
    summary
}

/// Little-endian f64 values read in place: `bytes` as `&[f64]` when they
/// start on an 8-byte boundary and this CPU is little-endian (`None`
/// otherwise: the caller decodes them into a buffer).
pub(crate) fn f64s(bytes: &[u8]) -> Option<&[f64]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: every bit pattern of 8 bytes is a valid f64, and `align_to`
    // only returns an aligned middle part of the slice it is given.
    let (head, vals, tail) = unsafe { bytes.align_to::<f64>() };
    (head.is_empty() && tail.is_empty()).then_some(vals)
}

/// Asks the CPU to bring the cache line that `line` starts in into its
/// caches while other work runs: the scans ask for their next block a line
/// at a time while they count the current one, so that the memory reads
/// overlap the counting (the hardware prefetchers stop at each 4 KiB page
/// of a mapping). A hint: it never faults, even on a page not mapped yet,
/// and does nothing off x86-64.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn prefetch<T>(line: &[T]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and never faults, whatever the
    // address; SSE, its instruction set, is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            line.as_ptr().cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
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

/// Adds a block of f32 bytes to a linear histogram
/// ([`kernel::histogram_f32`]).
pub(crate) fn histogram_f32(bytes: &[u8], bins: &FloatBins, guess: &F32Guess, tables: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn wide(bytes: &[u8], bins: &FloatBins, guess: &F32Guess, tables: &mut [u32]) {
            kernel::histogram_f32(bytes, bins, guess, tables);
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { wide(bytes, bins, guess, tables) };
        }
    }
    kernel::histogram_f32(bytes, bins, guess, tables);
}

/// Whether the AVX-512 copies may run (F, BW, DQ and VL: the subsets every
/// AVX-512 CPU since Skylake-SP has).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

/// Counts the key prefixes of `vals` ([`kernel::count_prefixes`]).
pub(crate) fn count_prefixes<K: kernel::Keyed>(
    vals: &[K],
    ahead: &[K],
    idx: &mut [u32; kernel::PART],
    table: &mut kernel::Tally<'_>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return unsafe { x86::count_prefixes_512(vals, ahead, idx, table) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::count_prefixes_256(vals, ahead, idx, table) };
        }
    }
    kernel::count_prefixes(vals, ahead, idx, table);
}

/// [`block_wide`] of a block of F32 bytes, and the key prefixes of its
/// values counted into `table` ([`count_prefixes`], which asks for `ahead`
/// while it counts). With AVX2 or AVX-512 both in one loop
/// ([`x86::scan_count_f32`], [`x86::scan_count_f32_512`]), with the same
/// results.
pub(crate) fn block_and_prefixes_f32(
    bytes: &[u8],
    ahead: &[u8],
    tiny_bits: u32,
    idx: &mut [u32; kernel::PART],
    table: &mut kernel::Tally<'_>,
) -> (Specials, Moments) {
    #[cfg(target_arch = "x86_64")]
    if avx2() && bytes.len() <= 4 * kernel::BLOCK {
        let mut counted = false;
        let summary = kernel::block_wide_by(
            Wide::F32,
            bytes,
            tiny_bits,
            |_, groups, tiny_bits, x0| {
                counted = true;
                let more = bytes.get(groups.len()..).unwrap_or(&[]);
                if avx512() {
                    // SAFETY: the CPU has these AVX-512 subsets, checked
                    // just above.
                    return unsafe {
                        x86::scan_count_f32_512(groups, more, tiny_bits, x0, ahead, table)
                    };
                }
                // SAFETY: the CPU has AVX2, checked above.
                unsafe { x86::scan_count_f32(groups, more, tiny_bits, x0, ahead, table) }
            },
            scan_groups,
        );
        // `block_wide_by` calls its first scan for every block that
        // holds a value.
        if counted || bytes.len() < 4 {
            return summary;
        }
    }
    let summary = block_wide(Wide::F32, bytes, tiny_bits);
    count_prefixes(
        bytes.as_chunks::<4>().0,
        ahead.as_chunks::<4>().0,
        idx,
        table,
    );
    summary
}

/// Calls `hits` with the keys of the values whose bucket is marked, in
/// order, a few hundred at a time ([`kernel::for_each_marked`]).
pub(crate) fn for_each_marked<K: kernel::Keyed>(
    vals: &[K],
    marks: &[u64; kernel::MARK_WORDS],
    hits: &mut dyn FnMut(&[u64]),
) {
    let mut found = kernel::Hits::new(hits);
    marked_into(vals, marks, &mut found);
    found.flush();
}

/// [`for_each_marked`] into `found`, by the fastest copy this CPU has.
fn marked_into<K: kernel::Keyed>(
    vals: &[K],
    marks: &[u64; kernel::MARK_WORDS],
    found: &mut kernel::Hits<'_>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return unsafe { x86::for_each_marked_512(vals, marks, found) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::for_each_marked_256(vals, marks, found) };
        }
    }
    kernel::for_each_marked(vals, marks, found);
}

/// Calls `hits` with the keys of the f64 values whose bucket is marked
/// ([`for_each_marked`]), with a `prefilter` as [`for_each_marked_f32`]
/// takes one (the AVX-512 copy tests it; the others filter by the bitmap
/// alone). The keys are the same.
pub(crate) fn for_each_marked_f64(
    vals: &[f64],
    marks: &[u64; kernel::MARK_WORDS],
    prefilter: Option<&kernel::Prefilter64>,
    hits: &mut dyn FnMut(&[u64]),
) {
    let mut found = kernel::Hits::new(hits);
    #[cfg(target_arch = "x86_64")]
    if let Some(pre) = prefilter
        && avx512()
    {
        // SAFETY: the CPU has these AVX-512 subsets, checked just above.
        unsafe { x86::marked_near_f64_512(vals, marks, pre, &mut found) };
        found.flush();
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = prefilter;
    marked_into(vals, marks, &mut found);
    found.flush();
}

/// Calls `hits` with the keys of the f32 values whose bucket is marked
/// ([`for_each_marked`]). With a `prefilter` the vector copies test every
/// value arithmetically first and look up the bitmap only for the
/// candidates; the keys are the same.
pub(crate) fn for_each_marked_f32(
    bytes: &[u8],
    marks: &[u64; kernel::MARK_WORDS],
    prefilter: Option<&kernel::Prefilter>,
    hits: &mut dyn FnMut(&[u64]),
) {
    let mut found = kernel::Hits::new(hits);
    #[cfg(target_arch = "x86_64")]
    if let Some(pre) = prefilter {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            unsafe { x86::marked_near_f32_512(bytes, marks, pre, &mut found) };
            found.flush();
            return;
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { x86::marked_near_f32(bytes, marks, pre, &mut found) };
            found.flush();
            return;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = prefilter;
    marked_into(bytes.as_chunks::<4>().0, marks, &mut found);
    found.flush();
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m256, __m256d, __m256i, __m512d, _mm_loadu_si128, _mm256_add_pd, _mm256_and_pd,
        _mm256_and_si256, _mm256_castps_si256, _mm256_castps256_ps128, _mm256_castsi256_pd,
        _mm256_castsi256_ps, _mm256_cmpeq_epi32, _mm256_cmpgt_epi32, _mm256_cvtepu16_epi32,
        _mm256_cvtph_ps, _mm256_cvtps_pd, _mm256_extractf128_ps, _mm256_loadu_ps, _mm256_max_ps,
        _mm256_min_epu32, _mm256_min_ps, _mm256_mul_pd, _mm256_set1_epi32, _mm256_set1_epi64x,
        _mm256_set1_pd, _mm256_set1_ps, _mm256_setzero_pd, _mm256_setzero_si256, _mm256_slli_epi32,
        _mm256_sub_epi32, _mm256_sub_pd, _mm512_add_pd, _mm512_and_pd, _mm512_castsi512_pd,
        _mm512_cvtps_pd, _mm512_mul_pd, _mm512_set1_epi64, _mm512_set1_pd, _mm512_setzero_pd,
        _mm512_sub_pd,
    };
    use std::arch::x86_64::{
        __m512, __m512i, _CMP_LE_OQ, _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT, _mm256_add_ps,
        _mm256_blendv_ps, _mm256_cmp_ps, _mm256_movemask_ps, _mm256_mul_ps, _mm256_or_si256,
        _mm256_permutevar8x32_epi32, _mm256_round_ps, _mm256_srai_epi32, _mm256_srli_epi32,
        _mm256_srlv_epi32, _mm256_sub_ps, _mm256_xor_si256, _mm512_and_si512, _mm512_castps_si512,
        _mm512_castsi512_ps, _mm512_cmp_ps_mask, _mm512_fmadd_ps, _mm512_loadu_ps,
        _mm512_maskz_compress_epi32, _mm512_mul_ps, _mm512_permutex2var_epi32, _mm512_reduce_ps,
        _mm512_rorv_epi32, _mm512_set1_epi32, _mm512_set1_ps, _mm512_srli_epi32,
        _mm512_storeu_si512, _mm512_sub_ps, _mm512_test_epi32_mask,
    };
    use std::arch::x86_64::{
        _mm256_storeu_si256, _mm512_cvtepi64_epi32, _mm512_loadu_si512, _mm512_or_si512,
        _mm512_srai_epi32, _mm512_srai_epi64, _mm512_xor_si512,
    };

    use super::{F32Lanes, Moments, Specials};
    use crate::stats::kernel::{self, BLOOM_BITS, MARK_WORDS, Prefilter, Prefilter64};
    use std::arch::x86_64::{
        _CMP_EQ_OQ, _CMP_LT_OQ, _mm512_max_pd, _mm512_min_pd, _mm512_storeu_pd,
    };
    use std::arch::x86_64::{
        _mm512_castpd_si512, _mm512_cmp_pd_mask, _mm512_fmadd_pd, _mm512_loadu_pd,
        _mm512_maskz_compress_epi64, _mm512_permutex2var_epi64, _mm512_reduce_pd,
        _mm512_rorv_epi64, _mm512_srli_epi64, _mm512_test_epi64_mask,
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

    /// [`kernel::block_f64_in`] of a block of finite values that needs no
    /// scaling (nearly every block), in one pass: the same operations, lane
    /// by lane, as the portable passes (eight lanes of minima and maxima,
    /// sixteen of each sum, the tail summed in order, the lanes folded
    /// alike), so the same bits. `None` for any other block, which the
    /// caller summarises as the portable code does.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn block_f64_fused_512(
        vals: &[f64],
        smallest_normal: f64,
    ) -> Option<(Specials, Moments)> {
        summarise_f64_512(vals, smallest_normal, |_| {})
    }

    /// [`block_f64_fused_512`] that calls `beside(i)` after the sums of
    /// each whole group `i` of sixteen values (every group, whatever it
    /// returns), for work of its own on those values.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    #[inline]
    fn summarise_f64_512(
        vals: &[f64],
        smallest_normal: f64,
        mut beside: impl FnMut(usize),
    ) -> Option<(Specials, Moments)> {
        let &first = vals.first()?;
        let abs_mask = _mm512_castsi512_pd(_mm512_set1_epi64(0x7fff_ffff_ffff_ffff));
        let shift = _mm512_set1_pd(first);
        let tiny_limit = _mm512_set1_pd(smallest_normal);
        let infinity = _mm512_set1_pd(f64::INFINITY);
        let zero = _mm512_setzero_pd();
        let mut mn = _mm512_set1_pd(f64::INFINITY);
        let mut mx = _mm512_set1_pd(f64::NEG_INFINITY);
        let (mut sum, mut abs, mut sum_d, mut sum_d2) =
            ([zero; 2], [zero; 2], [zero; 2], [zero; 2]);
        let (mut tiny, mut zeros, mut finite) = (0u32, 0u32, 0xffu8);
        let (chunks, rest) = vals.as_chunks::<16>();
        for (i, c) in chunks.iter().enumerate() {
            for h in 0..2 {
                let lanes = c.get(8 * h..8 * h + 8).unwrap_or(&[0.0; 8]);
                // SAFETY: `lanes` is eight readable f64.
                let v = unsafe { _mm512_loadu_pd(lanes.as_ptr()) };
                let a = _mm512_and_pd(v, abs_mask);
                // NaN compares false: not finite.
                finite &= _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a, infinity);
                tiny += _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a, tiny_limit).count_ones();
                zeros += _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(v, zero).count_ones();
                // `x < m ? x : m`, as the portable lanes select.
                mn = _mm512_min_pd(v, mn);
                mx = _mm512_max_pd(v, mx);
                sum[h] = _mm512_add_pd(sum[h], v);
                abs[h] = _mm512_add_pd(abs[h], a);
                let d = _mm512_sub_pd(v, shift);
                sum_d[h] = _mm512_add_pd(sum_d[h], d);
                sum_d2[h] = _mm512_add_pd(sum_d2[h], _mm512_mul_pd(d, d));
            }
            beside(i);
        }
        if finite != 0xff || rest.iter().any(|x| !x.is_finite()) {
            return None;
        }
        // The range's lanes take a last whole group of eight, then lane 0
        // the last values one by one.
        let (groups, last) = rest.as_chunks::<8>();
        for g in groups {
            // SAFETY: `g` is eight readable f64.
            let v = unsafe { _mm512_loadu_pd(g.as_ptr()) };
            mn = _mm512_min_pd(v, mn);
            mx = _mm512_max_pd(v, mx);
        }
        let mut lo = [0f64; 8];
        let mut hi = [0f64; 8];
        // SAFETY: each array is 64 writable bytes.
        unsafe {
            _mm512_storeu_pd(lo.as_mut_ptr(), mn);
            _mm512_storeu_pd(hi.as_mut_ptr(), mx);
        }
        for &x in last {
            if x < lo[0] {
                lo[0] = x;
            }
            if x > hi[0] {
                hi[0] = x;
            }
        }
        for &x in rest {
            tiny += u32::from(x.abs() < smallest_normal);
            zeros += u32::from(x == 0.0);
        }
        let (lo, hi) = kernel::fold_range(lo, hi);
        // Blocks beyond 2^±400 are scaled: the portable code's.
        let largest = lo.abs().max(hi.abs());
        let (big, small) = (
            f64::from_bits((1023 + 400) << 52),
            f64::from_bits((1023 - 400) << 52),
        );
        if largest > big || (largest > 0.0 && largest < small) {
            return None;
        }
        let total = |acc: [__m512d; 2], f: &dyn Fn(f64) -> f64| {
            let mut lanes = [0f64; 16];
            // SAFETY: `lanes` is 128 writable bytes.
            unsafe {
                _mm512_storeu_pd(lanes.as_mut_ptr(), acc[0]);
                _mm512_storeu_pd(lanes.as_mut_ptr().add(8), acc[1]);
            }
            let mut tail = 0.0;
            for &x in rest {
                tail += f(x);
            }
            kernel::fold_lanes(lanes) + tail
        };
        let sums = [
            total(sum, &|x| x),
            total(abs, &f64::abs),
            total(sum_d, &|x| x - first),
            total(sum_d2, &|x| (x - first) * (x - first)),
        ];
        let sp = Specials {
            zeros: u64::from(zeros),
            subnormals: u64::from(tiny.saturating_sub(zeros)),
            min: lo,
            max: hi,
            ..Specials::default()
        };
        Some((sp, Moments::from_block(vals.len() as u64, 0, first, sums)))
    }

    /// [`block_f64_fused_512`] of at most a block of values, and the key
    /// prefixes of every value counted into `tally` (whatever the summary
    /// returns) in the same loop: the keys of 64 values are made while the
    /// adds of the 64 before them run, as in [`scan_count_f32_512`], and
    /// `ahead` (the next block) is asked for a line per eight values.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn block_f64_count_512(
        vals: &[f64],
        smallest_normal: f64,
        ahead: &[f64],
        tally: &mut kernel::Tally<'_>,
    ) -> Option<(Specials, Moments)> {
        let (chunks, rest) = vals.as_chunks::<16>();
        let sign = _mm512_set1_epi64(i64::MIN);
        let mut keys = [[0u32; 64]; 2];
        let mut lines = ahead.chunks(8);
        let summary = summarise_f64_512(vals, smallest_normal, |i| {
            for _ in 0..2 {
                if let Some(line) = lines.next() {
                    super::prefetch(line);
                }
            }
            let Some(c) = chunks.get(i) else {
                return;
            };
            let (fill, done) = turn(&mut keys, i / 4);
            let at = 16 * (i % 4);
            for h in 0..2 {
                let (Some(part), Some(out)) = (
                    c.get(8 * h..8 * h + 8),
                    fill.get_mut(at + 8 * h..at + 8 * h + 8),
                ) else {
                    continue;
                };
                // SAFETY: `part` is 64 readable bytes and `out` 32 writable
                // ones; neither access needs alignment.
                unsafe {
                    let b = _mm512_loadu_si512(part.as_ptr().cast());
                    let key =
                        _mm512_xor_si512(b, _mm512_or_si512(_mm512_srai_epi64::<63>(b), sign));
                    let prefix = _mm512_cvtepi64_epi32(_mm512_srli_epi64::<LOW64>(key));
                    _mm256_storeu_si256(out.as_mut_ptr().cast(), prefix);
                }
            }
            // A group of four chunks is whole: count the one before.
            if i % 4 == 3 && i >= 7 {
                add_keys(done, tally);
            }
        });
        // The last whole group, the chunks after it, then the last values.
        let groups = chunks.len() / 4;
        if let Some(last) = groups.checked_sub(1) {
            add_keys(&keys[last % 2], tally);
        }
        for &p in keys[groups % 2]
            .get(..16 * (chunks.len() % 4))
            .unwrap_or(&[])
        {
            tally.add(p);
        }
        for &x in rest {
            tally.add(kernel::Keyed::prefix(x));
        }
        summary
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

    /// Candidates of one block of the prefiltered filter.
    const CANDIDATES: usize = 1024;

    /// The bits of 16 values, and the mask of those that pass the
    /// prefilter's tests.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    #[inline]
    fn pass_512(v: __m512, pre: &Prefilter512) -> (__m512i, u16) {
        let bits = _mm512_castps_si512(v);
        // Near an edge: |t − round(t)| ≤ |x|·slope + margin.
        let t = _mm512_mul_ps(_mm512_sub_ps(v, pre.origin), pre.scale);
        let frac = _mm512_and_si512(
            _mm512_castps_si512(_mm512_reduce_ps::<{ _MM_FROUND_TO_NEAREST_INT }>(t)),
            pre.magnitude,
        );
        let abs = _mm512_castsi512_ps(_mm512_and_si512(bits, pre.magnitude));
        let limit = _mm512_fmadd_ps(abs, pre.slope, pre.margin);
        let near = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(_mm512_castsi512_ps(frac), limit);
        // In the bloom: bit `(bits >> 12) mod 1024` of 32 words in two
        // registers (the permute reads the low 5 bits of its index, the
        // rotation its count mod 32).
        let word = _mm512_permutex2var_epi32(
            pre.bloom[0],
            _mm512_srli_epi32::<{ LOW32 + 5 }>(bits),
            pre.bloom[1],
        );
        let bit = _mm512_rorv_epi32(word, _mm512_srli_epi32::<LOW32>(bits));
        let bloom = _mm512_test_epi32_mask(bit, pre.one);
        (bits, near | bloom)
    }

    /// A [`Prefilter`] in AVX-512 registers.
    struct Prefilter512 {
        origin: __m512,
        scale: __m512,
        slope: __m512,
        margin: __m512,
        bloom: [__m512i; 2],
        magnitude: __m512i,
        one: __m512i,
    }

    /// A prefilter's bloom in two 512-bit registers (bits 0–511, 512–1023).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    #[inline]
    fn bloom_512(bloom: &[u32; 32]) -> [__m512i; 2] {
        let half = |i: usize| -> __m512i {
            let mut w = [0u32; 16];
            w.copy_from_slice(&bloom[16 * i..16 * i + 16]);
            // SAFETY: 64 bytes of u32 into a 512-bit register.
            unsafe { std::mem::transmute(w) }
        };
        [half(0), half(1)]
    }

    /// [`super::for_each_marked_f32`] with a prefilter in AVX-512: the
    /// candidates of a block are compressed into a buffer (no branch per
    /// group), then looked up in the bitmap in order.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn marked_near_f32_512(
        bytes: &[u8],
        marks: &[u64; MARK_WORDS],
        pre: &Prefilter,
        found: &mut kernel::Hits<'_>,
    ) {
        let regs = Prefilter512 {
            origin: _mm512_set1_ps(pre.origin),
            scale: _mm512_set1_ps(pre.scale),
            slope: _mm512_set1_ps(pre.slope),
            margin: _mm512_set1_ps(pre.margin),
            bloom: bloom_512(&pre.bloom),
            magnitude: _mm512_set1_epi32(0x7fff_ffff),
            one: _mm512_set1_epi32(1),
        };
        let mut candidates = [0u32; CANDIDATES + 16];
        let (vals, _) = bytes.as_chunks::<4>();
        let whole = vals.len() / 16 * 16;
        let (groups, _) = vals.get(..whole).unwrap_or(&[]).as_chunks::<16>();
        let step = CANDIDATES / 16;
        for (b, block) in groups.chunks(step).enumerate() {
            let next = groups.get((b + 1) * step..).unwrap_or(&[]);
            let mut n = 0usize;
            for (j, g) in block.iter().enumerate() {
                // The next block, a line per group.
                if let Some(line) = next.get(j) {
                    super::prefetch(line.as_flattened());
                }
                // SAFETY: `g` is 64 readable bytes; the load has no
                // alignment requirement.
                #[allow(clippy::cast_ptr_alignment)]
                let v = unsafe { _mm512_loadu_ps(g.as_ptr().cast::<f32>()) };
                let (bits, mask) = pass_512(v, &regs);
                let packed = _mm512_maskz_compress_epi32(mask, bits);
                // At most CANDIDATES − 16 were stored before this group, so
                // the 16 lanes fit.
                if let Some(slot) = candidates.get_mut(n..n + 16) {
                    // SAFETY: `slot` is 64 writable bytes.
                    unsafe { _mm512_storeu_si512(slot.as_mut_ptr().cast(), packed) };
                }
                n += mask.count_ones() as usize;
            }
            for &b in candidates.get(..n).unwrap_or(&[]) {
                let k = kernel::key32(b);
                found.keep(u64::from(k), kernel::marked(marks, k >> LOW32));
            }
        }
        // The last values (fewer than 16), as the portable filter does.
        kernel::for_each_marked_f32(bytes.get(4 * whole..).unwrap_or(&[]), marks, found);
    }

    /// [`super::for_each_marked_f64`] with a prefilter in AVX-512: eight
    /// values at a time, the candidates of a block compressed into a
    /// buffer, then looked up in the bitmap in order.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn marked_near_f64_512(
        vals: &[f64],
        marks: &[u64; MARK_WORDS],
        pre: &Prefilter64,
        found: &mut kernel::Hits<'_>,
    ) {
        // The bloom's 1024 bits as sixteen u64 words (word `i / 64`, bit
        // `i mod 64`, as in the u32 words).
        let bloom = bloom_512(&pre.bloom);
        let origin = _mm512_set1_pd(pre.origin);
        let scale = _mm512_set1_pd(pre.scale);
        let slope = _mm512_set1_pd(pre.slope);
        let margin = _mm512_set1_pd(pre.margin);
        let magnitude = _mm512_set1_epi64(0x7fff_ffff_ffff_ffff);
        let one = _mm512_set1_epi64(1);
        let mut candidates = [0u64; CANDIDATES + 8];
        let whole = vals.len() / 8 * 8;
        let (groups, _) = vals.get(..whole).unwrap_or(&[]).as_chunks::<8>();
        let step = CANDIDATES / 8;
        for (b, block) in groups.chunks(step).enumerate() {
            let next = groups.get((b + 1) * step..).unwrap_or(&[]);
            let mut n = 0usize;
            for (j, g) in block.iter().enumerate() {
                // The next block, a line per group.
                if let Some(line) = next.get(j) {
                    super::prefetch(line);
                }
                // SAFETY: `g` is 64 readable bytes; the load has no
                // alignment requirement.
                let v = unsafe { _mm512_loadu_pd(g.as_ptr()) };
                let bits = _mm512_castpd_si512(v);
                // Near an edge: |t − round(t)| ≤ |x|·slope + margin.
                let t = _mm512_mul_pd(_mm512_sub_pd(v, origin), scale);
                let frac = _mm512_and_si512(
                    _mm512_castpd_si512(_mm512_reduce_pd::<{ _MM_FROUND_TO_NEAREST_INT }>(t)),
                    magnitude,
                );
                let abs = _mm512_castsi512_pd(_mm512_and_si512(bits, magnitude));
                let limit = _mm512_fmadd_pd(abs, slope, margin);
                let near = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(_mm512_castsi512_pd(frac), limit);
                // In the bloom: the permute reads the low 4 bits of its
                // index, the rotation its count mod 64.
                let word =
                    _mm512_permutex2var_epi64(bloom[0], _mm512_srli_epi64::<50>(bits), bloom[1]);
                let bit = _mm512_rorv_epi64(word, _mm512_srli_epi64::<44>(bits));
                let mask = near | _mm512_test_epi64_mask(bit, one);
                let packed = _mm512_maskz_compress_epi64(mask, bits);
                // At most CANDIDATES − 8 were stored before this group, so
                // the 8 lanes fit.
                if let Some(slot) = candidates.get_mut(n..n + 8) {
                    // SAFETY: `slot` is 64 writable bytes.
                    unsafe { _mm512_storeu_si512(slot.as_mut_ptr().cast(), packed) };
                }
                n += mask.count_ones() as usize;
            }
            for &b in candidates.get(..n).unwrap_or(&[]) {
                let k = kernel::Keyed::key(f64::from_bits(b));
                found.keep(k, kernel::marked(marks, (k >> 44) as u32));
            }
        }
        // The last values (fewer than 8), as the portable filter does.
        kernel::for_each_marked(vals.get(whole..).unwrap_or(&[]), marks, found);
    }

    /// [`super::for_each_marked_f32`] with a prefilter in AVX2 (and no
    /// FMA: a multiply and an add, which round twice, as the prefilter's
    /// margin allows): eight values at a time, the bloom's 1024 bits in
    /// four registers.
    #[target_feature(enable = "avx2")]
    pub(super) fn marked_near_f32(
        bytes: &[u8],
        marks: &[u64; MARK_WORDS],
        pre: &Prefilter,
        found: &mut kernel::Hits<'_>,
    ) {
        let quarter = |i: usize| -> __m256i {
            let mut w = [0u32; 8];
            w.copy_from_slice(&pre.bloom[8 * i..8 * i + 8]);
            // SAFETY: 32 bytes of u32 into a 256-bit register.
            unsafe { std::mem::transmute(w) }
        };
        let bloom = [quarter(0), quarter(1), quarter(2), quarter(3)];
        let origin = _mm256_set1_ps(pre.origin);
        let scale = _mm256_set1_ps(pre.scale);
        let slope = _mm256_set1_ps(pre.slope);
        let margin = _mm256_set1_ps(pre.margin);
        let sign = _mm256_set1_epi32(i32::MIN);
        let magnitude = _mm256_set1_epi32(0x7fff_ffff);
        let index_mask = _mm256_set1_epi32(BLOOM_BITS as i32 - 1);
        let bit_mask = _mm256_set1_epi32(31);
        let one = _mm256_set1_epi32(1);
        let (vals, _) = bytes.as_chunks::<4>();
        let whole = vals.len() / 8 * 8;
        let (groups, _) = vals.get(..whole).unwrap_or(&[]).as_chunks::<8>();
        for g in groups {
            // SAFETY: `g` is 32 readable bytes; the load has no alignment
            // requirement.
            #[allow(clippy::cast_ptr_alignment)]
            let v = unsafe { _mm256_loadu_ps(g.as_ptr().cast::<f32>()) };
            let bits = _mm256_castps_si256(v);
            let key = _mm256_xor_si256(bits, _mm256_or_si256(_mm256_srai_epi32::<31>(bits), sign));
            let t = _mm256_mul_ps(_mm256_sub_ps(v, origin), scale);
            let round = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
            let frac = _mm256_and_si256(_mm256_castps_si256(_mm256_sub_ps(t, round)), magnitude);
            let abs = _mm256_castsi256_ps(_mm256_and_si256(bits, magnitude));
            let limit = _mm256_add_ps(_mm256_mul_ps(abs, slope), margin);
            let near = _mm256_cmp_ps::<_CMP_LE_OQ>(_mm256_castsi256_ps(frac), limit);
            let index = _mm256_and_si256(_mm256_srli_epi32::<{ LOW32 as i32 }>(bits), index_mask);
            let word_index = _mm256_srli_epi32::<5>(index);
            // Bits 8 and 9 of the index pick the register: blends by sign.
            let pick = |a: __m256i, b: __m256i, shift: __m256i| {
                _mm256_castps_si256(_mm256_blendv_ps(
                    _mm256_castsi256_ps(a),
                    _mm256_castsi256_ps(b),
                    _mm256_castsi256_ps(shift),
                ))
            };
            let by8 = _mm256_slli_epi32::<23>(index);
            let by9 = _mm256_slli_epi32::<22>(index);
            let low = pick(
                _mm256_permutevar8x32_epi32(bloom[0], word_index),
                _mm256_permutevar8x32_epi32(bloom[1], word_index),
                by8,
            );
            let high = pick(
                _mm256_permutevar8x32_epi32(bloom[2], word_index),
                _mm256_permutevar8x32_epi32(bloom[3], word_index),
                by8,
            );
            let word = pick(low, high, by9);
            let bit = _mm256_and_si256(
                _mm256_srlv_epi32(word, _mm256_and_si256(index, bit_mask)),
                one,
            );
            let in_bloom = _mm256_cmpeq_epi32(bit, one);
            let pass = _mm256_or_si256(_mm256_castps_si256(near), in_bloom);
            let mut mask = _mm256_movemask_ps(_mm256_castsi256_ps(pass)) as u32;
            if mask != 0 {
                let keys = epu32(key);
                while mask != 0 {
                    let lane = mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    let k = keys.get(lane).copied().unwrap_or(0);
                    found.keep(u64::from(k), kernel::marked(marks, k >> LOW32));
                }
            }
        }
        kernel::for_each_marked_f32(bytes.get(4 * whole..).unwrap_or(&[]), marks, found);
    }

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
    fn pd(v: [__m256d; 2]) -> [f64; 8] {
        // SAFETY: as in `epu32`: 2 × 32 bytes of f64 into [f64; 8].
        unsafe { std::mem::transmute(v) }
    }

    /// The running lanes of the AVX2 scan: the operations of
    /// `F32Lanes::add`, eight lanes at a time.
    struct Acc {
        magnitude: __m256i,
        tiny_bits: __m256i,
        abs_mask: __m256d,
        x0: __m256d,
        tiny: __m256i,
        zero: __m256i,
        min: __m256,
        max: __m256,
        sum: [__m256d; 2],
        abs: [__m256d; 2],
        sq: [__m256d; 2],
    }

    impl Acc {
        #[target_feature(enable = "avx2")]
        #[inline]
        fn new(tiny_bits: u32, x0: f64) -> Acc {
            Acc {
                magnitude: _mm256_set1_epi32(0x7fff_ffff),
                // Magnitude bits and `tiny_bits` are both below 2^31, so
                // the signed comparison is the unsigned one.
                tiny_bits: _mm256_set1_epi32(tiny_bits.min(0x7fff_ffff) as i32),
                abs_mask: _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fff_ffff_ffff_ffff)),
                x0: _mm256_set1_pd(x0),
                tiny: _mm256_setzero_si256(),
                zero: _mm256_setzero_si256(),
                min: _mm256_set1_ps(f32::INFINITY),
                max: _mm256_set1_ps(f32::NEG_INFINITY),
                sum: [_mm256_setzero_pd(); 2],
                abs: [_mm256_setzero_pd(); 2],
                sq: [_mm256_setzero_pd(); 2],
            }
        }

        /// Adds eight values: lanes 0–3 to the first f64 registers, 4–7 to
        /// the second. The tiny and zero counts are [`Acc::count_small`]'s.
        #[target_feature(enable = "avx2")]
        #[inline]
        fn add(&mut self, v: __m256) {
            // `x < m ? x : m`, as the scalar lanes select.
            self.min = _mm256_min_ps(v, self.min);
            self.max = _mm256_max_ps(v, self.max);
            let halves = [
                _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)),
            ];
            for (i, w) in halves.into_iter().enumerate() {
                self.sum[i] = _mm256_add_pd(self.sum[i], w);
                self.abs[i] = _mm256_add_pd(self.abs[i], _mm256_and_pd(w, self.abs_mask));
                let d = _mm256_sub_pd(w, self.x0);
                self.sq[i] = _mm256_add_pd(self.sq[i], _mm256_mul_pd(d, d));
            }
        }

        /// The magnitude bits of eight values.
        #[target_feature(enable = "avx2")]
        #[inline]
        fn magnitude(&self, v: __m256) -> __m256i {
            _mm256_and_si256(_mm256_castps_si256(v), self.magnitude)
        }

        /// Counts the tiny values and the zeros among eight values.
        #[target_feature(enable = "avx2")]
        #[inline]
        fn count_small(&mut self, v: __m256) {
            let a = self.magnitude(v);
            // Comparisons give −1 where true.
            self.tiny = _mm256_sub_epi32(self.tiny, _mm256_cmpgt_epi32(self.tiny_bits, a));
            let is_zero = _mm256_cmpeq_epi32(a, _mm256_setzero_si256());
            self.zero = _mm256_sub_epi32(self.zero, is_zero);
        }

        /// Keeps the smallest magnitude bits seen, in `low`.
        #[target_feature(enable = "avx2")]
        #[inline]
        fn track_low(&self, low: __m256i, v: __m256) -> __m256i {
            _mm256_min_epu32(low, self.magnitude(v))
        }

        /// Whether any magnitude in `low` is tiny (or zero).
        fn any_small(&self, low: __m256i) -> bool {
            let tiny_bits = epu32(self.tiny_bits)[0];
            epu32(low).iter().any(|&a| a < tiny_bits)
        }

        fn lanes(&self) -> F32Lanes {
            F32Lanes {
                tiny: epu32(self.tiny),
                zero: epu32(self.zero),
                min: ps(self.min),
                max: ps(self.max),
                sum: pd(self.sum),
                abs: pd(self.abs),
                sq: pd(self.sq),
            }
        }
    }

    /// Loads eight little-endian f32 values (unaligned).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn load_f32x8(g: &[u8; 32]) -> __m256 {
        // SAFETY: `g` is 32 readable bytes; the load has no alignment
        // requirement (hence the allowed cast to a stricter pointer).
        #[allow(clippy::cast_ptr_alignment)]
        unsafe {
            _mm256_loadu_ps(g.as_ptr().cast::<f32>())
        }
    }

    /// Scans groups of eight values that `load` widens to f32, for formats
    /// where zeros and subnormals are rare (F32, BF16): the main loop only
    /// keeps the smallest magnitude, and a second loop counts them in the
    /// blocks that hold any.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn scan_rarely_small<const N: usize>(
        acc: &mut Acc,
        groups: &[[u8; N]],
        load: impl Fn(&[u8; N]) -> __m256,
    ) {
        let mut low = _mm256_set1_epi32(-1);
        for g in groups {
            let v = load(g);
            low = acc.track_low(low, v);
            acc.add(v);
        }
        if acc.any_small(low) {
            for g in groups {
                acc.count_small(load(g));
            }
        }
    }

    /// [`super::kernel::scan_groups`] of F32 in AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn scan_f32(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        // A `#[target_feature]` function is no `Fn`: the closure wraps it.
        #[allow(clippy::redundant_closure)]
        scan_rarely_small(&mut acc, bytes.as_chunks::<32>().0, |g| load_f32x8(g));
        acc.lanes()
    }

    /// The f64 sums of the AVX-512 F32 scan: lane j of each is one f64 lane
    /// of a 512-bit register, where the AVX2 copy keeps lanes 0–3 and 4–7
    /// in two registers; each lane sees the same operations in the same
    /// order, so the sums are the same.
    struct Sums512 {
        abs_mask: __m512d,
        origin: __m512d,
        sum: __m512d,
        abs: __m512d,
        sq: __m512d,
        /// The smallest magnitude bits seen ([`Acc::track_low`]).
        low: __m256i,
    }

    impl Sums512 {
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
        #[inline]
        fn new(x0: f64) -> Sums512 {
            Sums512 {
                abs_mask: _mm512_castsi512_pd(_mm512_set1_epi64(0x7fff_ffff_ffff_ffff)),
                origin: _mm512_set1_pd(x0),
                sum: _mm512_setzero_pd(),
                abs: _mm512_setzero_pd(),
                sq: _mm512_setzero_pd(),
                low: _mm256_set1_epi32(-1),
            }
        }

        /// Adds the group of eight values `v`.
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
        #[inline]
        fn add(&mut self, acc: &mut Acc, v: __m256) {
            self.low = acc.track_low(self.low, v);
            acc.min = _mm256_min_ps(v, acc.min);
            acc.max = _mm256_max_ps(v, acc.max);
            let w = _mm512_cvtps_pd(v);
            self.sum = _mm512_add_pd(self.sum, w);
            self.abs = _mm512_add_pd(self.abs, _mm512_and_pd(w, self.abs_mask));
            let d = _mm512_sub_pd(w, self.origin);
            self.sq = _mm512_add_pd(self.sq, _mm512_mul_pd(d, d));
        }

        /// The lanes of the scan of `groups` (every group [`Sums512::add`]
        /// saw), with the tiny and zero counts when a group holds one.
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
        fn lanes(&self, mut acc: Acc, groups: &[[u8; 32]]) -> F32Lanes {
            if acc.any_small(self.low) {
                for g in groups {
                    acc.count_small(load_f32x8(g));
                }
            }
            let lanes = |v: __m512d| -> [f64; 8] {
                // SAFETY: 64 bytes of f64 into [f64; 8].
                unsafe { std::mem::transmute(v) }
            };
            F32Lanes {
                sum: lanes(self.sum),
                abs: lanes(self.abs),
                sq: lanes(self.sq),
                ..acc.lanes()
            }
        }
    }

    /// [`super::kernel::scan_groups`] of F32 in AVX-512 ([`Sums512`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn scan_f32_512(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        let mut sums = Sums512::new(x0);
        let groups = bytes.as_chunks::<32>().0;
        for g in groups {
            sums.add(&mut acc, load_f32x8(g));
        }
        sums.lanes(acc, groups)
    }

    /// [`scan_count_f32`] with the sums of [`scan_f32_512`], and the keys
    /// made from 512-bit loads: on the Xeon measured, this left the scalar
    /// adds more room than the 256-bit sums and keys did.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn scan_count_f32_512(
        bytes: &[u8],
        more: &[u8],
        tiny_bits: u32,
        x0: f64,
        ahead: &[u8],
        tally: &mut kernel::Tally<'_>,
    ) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        let mut sums = Sums512::new(x0);
        let sign = _mm512_set1_epi32(i32::MIN);
        let mut keys = [[0u32; 64]; 2];
        let (supers, tail) = bytes.as_chunks::<256>();
        let mut lines = ahead.chunks(64);
        for (i, s) in supers.iter().enumerate() {
            prefetch_lines(&mut lines);
            for g in s.as_chunks::<32>().0 {
                sums.add(&mut acc, load_f32x8(g));
            }
            let (fill, done) = turn(&mut keys, i);
            // The keys from 512-bit loads: half the stores of 256-bit
            // ones, and stores are what the adds are short of.
            for (g, out) in s
                .as_chunks::<64>()
                .0
                .iter()
                .zip(fill.as_chunks_mut::<16>().0)
            {
                // SAFETY: `g` is 64 readable bytes and `out` 64 writable
                // ones; neither access needs alignment.
                unsafe {
                    let v = _mm512_loadu_si512(g.as_ptr().cast());
                    let key =
                        _mm512_xor_si512(v, _mm512_or_si512(_mm512_srai_epi32::<31>(v), sign));
                    _mm512_storeu_si512(out.as_mut_ptr().cast(), _mm512_srli_epi32::<LOW32>(key));
                }
            }
            if i > 0 {
                add_keys(done, tally);
            }
        }
        for g in tail.as_chunks::<32>().0 {
            sums.add(&mut acc, load_f32x8(g));
        }
        count_rest(&keys, supers.len(), tail, more, tally);
        sums.lanes(acc, bytes.as_chunks::<32>().0)
    }

    /// [`scan_f32`] of `bytes` (whole groups of eight values) and
    /// [`kernel::count_prefixes`] of `bytes` then `more` (the block's last
    /// values) in one loop: the keys of 64 values are made while the adds
    /// of the 64 before them run, so that the vector sums and the scalar
    /// adds share the core (one after the other, the sums wait for memory
    /// and the adds for the store port). `ahead` (the next block) is asked
    /// for a line per 16 values. The sums see the operations of
    /// [`scan_f32`] in its order, so they are its bits (and those of the
    /// AVX-512 scan).
    #[target_feature(enable = "avx2")]
    pub(super) fn scan_count_f32(
        bytes: &[u8],
        more: &[u8],
        tiny_bits: u32,
        x0: f64,
        ahead: &[u8],
        tally: &mut kernel::Tally<'_>,
    ) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        let mut low = _mm256_set1_epi32(-1);
        let sign = _mm256_set1_epi32(i32::MIN);
        let mut keys = [[0u32; 64]; 2];
        let (supers, tail) = bytes.as_chunks::<256>();
        let mut lines = ahead.chunks(64);
        for (i, s) in supers.iter().enumerate() {
            prefetch_lines(&mut lines);
            let (fill, done) = turn(&mut keys, i);
            for (g, out) in s
                .as_chunks::<32>()
                .0
                .iter()
                .zip(fill.as_chunks_mut::<8>().0)
            {
                let v = load_f32x8(g);
                low = acc.track_low(low, v);
                acc.add(v);
                let bits = _mm256_castps_si256(v);
                let key =
                    _mm256_xor_si256(bits, _mm256_or_si256(_mm256_srai_epi32::<31>(bits), sign));
                // SAFETY: `out` is 32 writable bytes; the store has no
                // alignment requirement.
                unsafe {
                    _mm256_storeu_si256(
                        out.as_mut_ptr().cast(),
                        _mm256_srli_epi32::<{ LOW32 as i32 }>(key),
                    );
                }
            }
            if i > 0 {
                add_keys(done, tally);
            }
        }
        for g in tail.as_chunks::<32>().0 {
            let v = load_f32x8(g);
            low = acc.track_low(low, v);
            acc.add(v);
        }
        count_rest(&keys, supers.len(), tail, more, tally);
        if acc.any_small(low) {
            for g in bytes.as_chunks::<32>().0 {
                acc.count_small(load_f32x8(g));
            }
        }
        acc.lanes()
    }

    /// Asks for the next four lines (64 f32 values) of `lines`.
    #[inline]
    fn prefetch_lines(lines: &mut std::slice::Chunks<'_, u8>) {
        for _ in 0..4 {
            if let Some(line) = lines.next() {
                super::prefetch(line);
            }
        }
    }

    /// The key buffers of group `i` of the fused loops: the one to fill,
    /// and the one filled by group `i − 1`.
    #[inline]
    fn turn(keys: &mut [[u32; 64]; 2], i: usize) -> (&mut [u32; 64], &[u32; 64]) {
        let [even, odd] = keys;
        if i.is_multiple_of(2) {
            (even, odd)
        } else {
            (odd, even)
        }
    }

    /// Counts 64 keys, the two halves in turn (as `kernel::count_prefixes`
    /// takes them).
    #[inline]
    fn add_keys(keys: &[u32; 64], tally: &mut kernel::Tally<'_>) {
        let mut add = |p: u32| {
            let i = p as usize;
            // SAFETY: the fused loops fill `keys` with the top PREFIX_BITS
            // bits of keys (32-bit ones shifted right by LOW32, 64-bit ones
            // by LOW64), so below BUCKETS = 2^PREFIX_BITS: in bounds of
            // both tables.
            unsafe {
                let c = tally.low.get_unchecked_mut(i);
                *c = c.wrapping_add(1);
                if *c == 0 {
                    let w = tally.wraps.get_unchecked_mut(i);
                    *w = w.wrapping_add(1);
                }
            }
        };
        for j in 0..32 {
            add(keys[j]);
            add(keys[j + 32]);
        }
    }

    /// Counts what the fused loops leave: the keys of their last group of
    /// 64 (of `groups` groups), then those of `tail` and `more`.
    #[inline]
    fn count_rest(
        keys: &[[u32; 64]; 2],
        groups: usize,
        tail: &[u8],
        more: &[u8],
        tally: &mut kernel::Tally<'_>,
    ) {
        if let Some(last) = groups.checked_sub(1) {
            for &p in &keys[last % 2] {
                tally.add(p);
            }
        }
        for c in tail
            .as_chunks::<4>()
            .0
            .iter()
            .chain(more.as_chunks::<4>().0)
        {
            tally.add(kernel::key32(u32::from_le_bytes(*c)) >> LOW32);
        }
    }

    /// Loads eight little-endian 16-bit elements (unaligned).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn load_u16x8(g: &[u8; 16]) -> __m128i {
        // SAFETY: `g` is 16 readable bytes; the load has no alignment
        // requirement (hence the allowed cast to a stricter pointer).
        #[allow(clippy::cast_ptr_alignment)]
        unsafe {
            _mm_loadu_si128(g.as_ptr().cast::<__m128i>())
        }
    }

    /// [`super::kernel::scan_groups`] of F16 in AVX2, widened by F16C's
    /// exact conversion.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn scan_f16(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        // F16 tensors often hold values below 2^−14 in every block: count
        // them in the one loop.
        for g in bytes.as_chunks::<16>().0 {
            let v = _mm256_cvtph_ps(load_u16x8(g));
            acc.count_small(v);
            acc.add(v);
        }
        acc.lanes()
    }

    /// [`super::kernel::scan_groups`] of BF16 in AVX2 (a BF16 value is the
    /// top half of an f32).
    #[target_feature(enable = "avx2")]
    pub(super) fn scan_bf16(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        // BF16 has f32's range, and its subnormals are as rare.
        scan_rarely_small(&mut acc, bytes.as_chunks::<16>().0, |g| {
            let wide = _mm256_cvtepu16_epi32(load_u16x8(g));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
        });
        acc.lanes()
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

    /// The bytes of `vals` in a format: f32 as is, F16 and BF16 rounded
    /// (random 16-bit codes where `raw`, NaN and Inf among them).
    fn encode(kind: Wide, vals: &[f32], raw: bool) -> Vec<u8> {
        vals.iter()
            .enumerate()
            .flat_map(|(i, &x)| match kind {
                Wide::F32 => x.to_le_bytes().to_vec(),
                _ if raw => ((x.to_bits() ^ (i as u32).wrapping_mul(0x9e37_79b9)) as u16)
                    .to_le_bytes()
                    .to_vec(),
                Wide::F16 => half::f16::from_f32(x).to_le_bytes().to_vec(),
                Wide::BF16 => half::bf16::from_f32(x).to_le_bytes().to_vec(),
            })
            .collect()
    }

    /// A fused F32 scan and count ([`x86::scan_count_f32`]).
    #[cfg(target_arch = "x86_64")]
    type FusedCopy = fn(&[u8], &[u8], u32, f64, &[u8], &mut kernel::Tally<'_>) -> F32Lanes;

    /// The fused copies this CPU has the features of.
    #[cfg(target_arch = "x86_64")]
    fn fused_copies() -> Vec<FusedCopy> {
        let mut copies: Vec<FusedCopy> = Vec::new();
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            copies.push(|b, m, tb, x0, a, t| unsafe { x86::scan_count_f32(b, m, tb, x0, a, t) });
        }
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            copies
                .push(|b, m, tb, x0, a, t| unsafe { x86::scan_count_f32_512(b, m, tb, x0, a, t) });
        }
        copies
    }

    #[test]
    fn the_block_and_its_prefixes_in_one_loop_agree_bit_for_bit() {
        let mut idx = [0u32; kernel::PART];
        let lengths = [
            1,
            3,
            7,
            8,
            9,
            63,
            64,
            65,
            127,
            128,
            300,
            2047,
            BLOCK,
            BLOCK + 9,
        ];
        for (seed, &n) in lengths.iter().enumerate() {
            for specials in [false, true] {
                let mut vals = values(seed as u64 + 11, n + 3, specials);
                // Half the blocks with no zero or subnormal (the scan's
                // second loop is skipped there).
                if seed % 2 == 0 {
                    for x in &mut vals {
                        if x.abs() < f32::MIN_POSITIVE {
                            *x = 1.5;
                        }
                    }
                }
                let all = encode(Wide::F32, &vals, false);
                // Unaligned starts, and an `ahead` that is the next bytes.
                for offset in 0..4 {
                    let bytes = &all[4 * (offset % 3)..][..4 * n];
                    let ahead = all.get(4 * n + offset..).unwrap_or(&[]);
                    let ahead = ahead.get(..ahead.len() / 4 * 4).unwrap_or(&[]);
                    for tiny_bits in [0x0080_0000, 0x3880_0000] {
                        let mut one = (Specials::default(), Moments::default());
                        let a = tally_of(|t| {
                            one = block_and_prefixes_f32(bytes, ahead, tiny_bits, &mut idx, t);
                        });
                        // Every fused copy this CPU can run, called as the
                        // dispatch calls them (for a block: a longer run is
                        // split, and counted apart).
                        #[cfg(target_arch = "x86_64")]
                        for copy in fused_copies().into_iter().filter(|_| n <= BLOCK) {
                            let mut own = (Specials::default(), Moments::default());
                            let c = tally_of(|t| {
                                own = kernel::block_wide_by(
                                    Wide::F32,
                                    bytes,
                                    tiny_bits,
                                    |_, groups, tiny_bits, x0| {
                                        let more = bytes.get(groups.len()..).unwrap_or(&[]);
                                        copy(groups, more, tiny_bits, x0, ahead, t)
                                    },
                                    kernel::scan_groups,
                                );
                            });
                            assert_eq!(own.0, one.0);
                            assert_eq!(format!("{:?}", own.1), format!("{:?}", one.1));
                            assert!(c == a, "a fused copy's counts differ (n {n})");
                        }
                        let mut two = (Specials::default(), Moments::default());
                        let b = tally_of(|t| {
                            two = kernel::block_wide(
                                Wide::F32,
                                bytes,
                                tiny_bits,
                                kernel::scan_groups,
                            );
                            kernel::count_prefixes_f32(bytes, &[], &mut idx, t);
                        });
                        let what = format!("n {n}, specials {specials}, offset {offset}");
                        assert_eq!(one.0, two.0, "{what}");
                        assert_eq!(format!("{:?}", one.1), format!("{:?}", two.1), "{what}");
                        assert!(a == b, "counts differ: {what}");
                        assert_eq!(a.iter().sum::<u64>(), n as u64, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn both_copies_agree_bit_for_bit() {
        let cases = [
            (1, BLOCK, false),
            (2, 1000, true),
            (3, 3 * BLOCK + 5, true),
            (4, 13, false),
        ];
        for (seed, n, specials) in cases {
            let vals = values(seed, n, specials);
            for kind in [Wide::F32, Wide::F16, Wide::BF16] {
                for raw in [false, true] {
                    let bytes = encode(kind, &vals, raw);
                    for tiny_bits in [0x0080_0000, 0x3880_0000] {
                        let (sp_a, m_a) = block_wide(kind, &bytes, tiny_bits);
                        let (sp_b, m_b) =
                            kernel::block_wide(kind, &bytes, tiny_bits, kernel::scan_groups);
                        assert_eq!(sp_a, sp_b, "{kind:?} {seed}");
                        assert_eq!(format!("{m_a:?}"), format!("{m_b:?}"));
                    }
                    let whole = bytes.len() / (8 * kind.width()) * 8 * kind.width();
                    let groups = bytes
                        .get(..whole.min(8 * kind.width() * 256))
                        .unwrap_or(&[]);
                    assert_eq!(
                        format!("{:?}", scan_groups(kind, groups, 0x0080_0000, 0.25)),
                        format!("{:?}", kernel::scan_groups(kind, groups, 0x0080_0000, 0.25)),
                        "{kind:?} {seed}"
                    );
                }
            }
            let bins = FloatBins::new(-2.0, 3.0, 256);
            let mut a = vec![0u32; 4 * 256];
            let mut b = vec![0u32; 4 * 256];
            for part in vals.chunks(BLOCK) {
                histogram_block(part, &bins, &mut a);
                kernel::histogram_block(part, &bins, &mut b);
            }
            assert_eq!(a, b);
            let guess = bins.f32_guess().expect("f32 guesses for these bins");
            let mut a = vec![0u32; 4 * 257];
            let mut b = vec![0u32; 4 * 257];
            let bytes = encode(Wide::F32, &vals, false);
            for part in bytes.chunks(4 * BLOCK) {
                histogram_f32(part, &bins, &guess, &mut a);
                kernel::histogram_f32(part, &bins, &guess, &mut b);
            }
            // The scratch counters differ by design; the bins may not.
            for t in 0..4 {
                assert_eq!(a[t * 257..t * 257 + 256], b[t * 257..t * 257 + 256]);
            }
        }
    }

    type CountCopy = fn(&[u8], &[u8], &mut [u32; kernel::PART], &mut kernel::Tally<'_>);
    type FilterCopy = fn(&[u8], &[u64; kernel::MARK_WORDS], &mut dyn FnMut(&[u64]));
    type NearCopy =
        fn(&[u8], &[u64; kernel::MARK_WORDS], &kernel::Prefilter, &mut dyn FnMut(&[u64]));

    /// Runs a filter that keeps its keys in a [`kernel::Hits`] and hands
    /// them to `out`.
    fn into_hits(out: &mut dyn FnMut(&[u64]), run: impl FnOnce(&mut kernel::Hits<'_>)) {
        let mut found = kernel::Hits::new(out);
        run(&mut found);
        found.flush();
    }

    /// The keys a filter that keeps them in a [`kernel::Hits`] finds.
    fn hits_of(run: impl FnOnce(&mut kernel::Hits<'_>)) -> Vec<u64> {
        let mut out = Vec::new();
        into_hits(&mut |ks| out.extend_from_slice(ks), run);
        out
    }

    /// The keys the portable filter finds in f32 bytes.
    fn portable_hits(bytes: &[u8], marks: &[u64; kernel::MARK_WORDS]) -> Vec<u64> {
        hits_of(|found| kernel::for_each_marked_f32(bytes, marks, found))
    }

    /// The count of every bucket after `run` has counted into a clear
    /// [`kernel::Tally`].
    fn tally_of(run: impl FnOnce(&mut kernel::Tally<'_>)) -> Vec<u64> {
        use kernel::BUCKETS;
        let mut low = vec![0u8; BUCKETS];
        let mut wraps = vec![0u32; BUCKETS];
        let (Ok(low), Ok(wraps)) = (
            <&mut [u8; BUCKETS]>::try_from(low.as_mut_slice()),
            <&mut [u32; BUCKETS]>::try_from(wraps.as_mut_slice()),
        ) else {
            return Vec::new();
        };
        let mut tally = kernel::Tally { low, wraps };
        run(&mut tally);
        (0..BUCKETS).map(|p| tally.get(p)).collect()
    }

    /// A bitmap marking every third bucket of `counts` that holds values.
    fn every_third(counts: &[u64]) -> Vec<u64> {
        let mut marks = vec![0u64; kernel::MARK_WORDS];
        for (p, &c) in counts.iter().enumerate() {
            if c > 0 && p % 3 == 0 {
                marks[p / 64] |= 1 << (p % 64);
            }
        }
        marks
    }

    /// Little-endian f32 values as the prefix loops read them.
    fn f32s(bytes: &[u8]) -> &[[u8; 4]] {
        bytes.as_chunks::<4>().0
    }

    /// The dispatching counter and every vector copy this CPU can run.
    fn copies_of_count() -> Vec<CountCopy> {
        let mut out: Vec<CountCopy> = vec![|b, a, i, t| count_prefixes(f32s(b), f32s(a), i, t)];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                out.push(|b, a, i, t| unsafe { x86::count_prefixes_256(f32s(b), f32s(a), i, t) });
            }
            if avx512() {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                out.push(|b, a, i, t| unsafe { x86::count_prefixes_512(f32s(b), f32s(a), i, t) });
            }
        }
        out
    }

    /// The dispatching filter and every vector copy this CPU can run.
    fn copies_of_filter() -> Vec<FilterCopy> {
        let mut out: Vec<FilterCopy> = vec![|b, m, h| for_each_marked_f32(b, m, None, h)];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                out.push(|b, m, h| {
                    // SAFETY: as above.
                    into_hits(h, |found| unsafe {
                        x86::for_each_marked_256(f32s(b), m, found);
                    });
                });
            }
            if avx512() {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                out.push(|b, m, h| {
                    // SAFETY: as above.
                    into_hits(h, |found| unsafe {
                        x86::for_each_marked_512(f32s(b), m, found);
                    });
                });
            }
        }
        out
    }

    /// The vector copies of the prefiltered filter this CPU can run.
    fn copies_of_near() -> Vec<NearCopy> {
        let mut out: Vec<NearCopy> = vec![|b, m, p, h| for_each_marked_f32(b, m, Some(p), h)];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                out.push(|b, m, p, h| {
                    // SAFETY: as above.
                    into_hits(h, |found| unsafe { x86::marked_near_f32(b, m, p, found) });
                });
            }
            if avx512() {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                out.push(|b, m, p, h| {
                    // SAFETY: as above.
                    into_hits(h, |found| unsafe {
                        x86::marked_near_f32_512(b, m, p, found);
                    });
                });
            }
        }
        out
    }

    /// The buckets holding values of `vals` that hold an inner edge of
    /// `bins` (as the exact scan finds them), sorted.
    fn straddling<T: crate::stats::float::FloatLane>(
        vals: &[T],
        bins: &FloatBins,
        min: f64,
        max: f64,
    ) -> Vec<u32> {
        let low = T::KEY_BITS - kernel::PREFIX_BITS;
        let mut buckets: Vec<u32> = vals
            .iter()
            .filter(|x| x.finite())
            .map(|&x| x.prefix())
            .collect();
        buckets.sort_unstable();
        buckets.dedup();
        buckets.retain(|&p| {
            let first = u64::from(p) << low;
            let lo = T::from_key(first).to_f64().max(min);
            let hi = T::from_key(first | ((1 << low) - 1)).to_f64().min(max);
            bins.bin_of(lo) != bins.bin_of(hi)
        });
        buckets
    }

    /// Values of many ranges: the mixed ones of [`values`], weights, a
    /// narrow range far from zero, subnormals only, a range beside f32's
    /// largest values, a few distinct values.
    fn ranges() -> Vec<Vec<f32>> {
        let mixed = values(21, 2 * BLOCK + 7, true);
        let unit = |i: usize| {
            let r = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
            r as f64 / (1u64 << 53) as f64
        };
        let weights = (0..3 * BLOCK)
            .map(|i| ((unit(i) - 0.5) * 0.1 * (unit(i + 7) - 0.5).signum()) as f32)
            .collect();
        let narrow = (0..BLOCK).map(|i| (1.0 + unit(i) * 1e-3) as f32).collect();
        let subnormal = (0..BLOCK)
            .map(|i| f32::from_bits((unit(i) * f64::from(0x7f_ffff)) as u32))
            .collect();
        let huge = (0..BLOCK)
            .map(|i| ((unit(i) - 0.5) * f64::from(f32::MAX)) as f32)
            .collect();
        let few = (0..BLOCK).map(|i| (i % 5) as f32 - 2.0).collect();
        vec![mixed, weights, narrow, subnormal, huge, few]
    }

    #[test]
    fn the_prefilter_passes_every_value_of_a_marked_bucket() {
        for vals in ranges() {
            let finite: Vec<f32> = vals.iter().copied().filter(|x| x.is_finite()).collect();
            let min = finite.iter().copied().fold(f32::INFINITY, f32::min);
            let max = finite.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let (min, max) = (f64::from(min), f64::from(max));
            let low = 32 - kernel::PREFIX_BITS;
            for bins in [1, 7, 256, 1000, 65_536] {
                let bins = FloatBins::new(min, max, bins);
                let edges = straddling(&vals, &bins, min, max);
                // A few other marked buckets (quantiles' and the like).
                let others: Vec<u32> = finite
                    .iter()
                    .step_by(301)
                    .map(|x| kernel::key32(x.to_bits()) >> low)
                    .collect();
                let Some(pre) = kernel::Prefilter::new(Some((bins.edges(), min, max)), &others)
                else {
                    // Only where the near test cannot be sound in f32.
                    assert!(max - min < 1e-30 || bins.len() > 256, "{min} {max}");
                    continue;
                };
                for x in &finite {
                    let p = kernel::key32(x.to_bits()) >> low;
                    if edges.binary_search(&p).is_ok() || others.contains(&p) {
                        assert!(
                            pre.passes(*x),
                            "{x} in marked bucket {p}, {} bins",
                            bins.len()
                        );
                    }
                }
                // The filter is worth it: few values pass for weights.
                let passed = finite.iter().filter(|x| pre.passes(**x)).count();
                if bins.len() == 256 && max - min < 1.0 && max - min > 0.01 {
                    assert!(passed * 10 < finite.len(), "{passed} of {}", finite.len());
                }
            }
        }
        // A range beyond f32 has no sound near test; no range at all needs none.
        let wide = [-3e38, 3e38];
        let bins = FloatBins::new(wide[0], wide[1], 256);
        assert!(kernel::Prefilter::new(Some((bins.edges(), wide[0], wide[1])), &[]).is_none());
        assert!(kernel::Prefilter::new(None, &[1, 2]).is_some());
    }

    #[test]
    fn every_copy_of_the_prefiltered_filter_agrees() {
        use kernel::MARK_WORDS;
        let low = 32 - kernel::PREFIX_BITS;
        for vals in ranges() {
            let finite: Vec<f32> = vals.iter().copied().filter(|x| x.is_finite()).collect();
            let min = f64::from(finite.iter().copied().fold(f32::INFINITY, f32::min));
            let max = f64::from(finite.iter().copied().fold(f32::NEG_INFINITY, f32::max));
            let bins = FloatBins::new(min, max, 256);
            let edges = straddling(&vals, &bins, min, max);
            let others: Vec<u32> = finite
                .iter()
                .step_by(97)
                .map(|x| kernel::key32(x.to_bits()) >> low)
                .collect();
            let mut marks = vec![0u64; MARK_WORDS];
            for &p in edges.iter().chain(&others) {
                marks[p as usize / 64] |= 1 << (p % 64);
            }
            let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
            let mut bytes = vec![0u8; 3];
            bytes.extend(vals.iter().flat_map(|x| x.to_le_bytes()));
            for with_edges in [true, false] {
                let near = with_edges.then(|| (bins.edges(), min, max));
                let Some(pre) = kernel::Prefilter::new(near, &others) else {
                    continue;
                };
                // Without the near test, only the others are marked.
                let marks_here = if with_edges {
                    marks.to_vec()
                } else {
                    let mut m = vec![0u64; MARK_WORDS];
                    for &p in &others {
                        m[p as usize / 64] |= 1 << (p % 64);
                    }
                    m
                };
                let marks_here =
                    <&[u64; MARK_WORDS]>::try_from(marks_here.as_slice()).expect("marks");
                for shift in 0..4 {
                    let part = &bytes[shift..bytes.len() - (3 - shift)];
                    let portable = portable_hits(part, marks_here);
                    for copy in copies_of_near() {
                        let mut hits = Vec::new();
                        copy(part, marks_here, &pre, &mut |ks| hits.extend_from_slice(ks));
                        assert_eq!(hits, portable, "offset {shift}, edges {with_edges}");
                    }
                }
            }
        }
    }

    /// [`ranges`] of f64 values: mixed ones with every special code,
    /// weights, a narrow range far from zero, subnormals only, a range
    /// beside f64's largest values, a few distinct values.
    fn ranges64() -> Vec<Vec<f64>> {
        let unit = |i: usize| {
            let r = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
            r as f64 / (1u64 << 53) as f64
        };
        let mixed = values_f64(23, 2 * BLOCK + 7, true, 0);
        let weights = (0..3 * BLOCK)
            .map(|i| (unit(i) - 0.5) * 0.1 * (unit(i + 7) - 0.5).signum())
            .collect();
        let narrow = (0..BLOCK).map(|i| 1.0 + unit(i) * 1e-9).collect();
        let subnormal = (0..BLOCK)
            .map(|i| f64::from_bits((unit(i) * 0xf_ffff_ffff_ffff_u64 as f64) as u64))
            .collect();
        let huge = (0..BLOCK).map(|i| (unit(i) - 0.5) * f64::MAX).collect();
        let few = (0..BLOCK).map(|i| (i % 5) as f64 - 2.0).collect();
        vec![mixed, weights, narrow, subnormal, huge, few]
    }

    /// The smallest and largest finite value.
    fn range64(vals: &[f64]) -> (f64, f64) {
        let finite = vals.iter().copied().filter(|x| x.is_finite());
        let min = finite.clone().fold(f64::INFINITY, f64::min);
        (min, finite.fold(f64::NEG_INFINITY, f64::max))
    }

    #[test]
    fn the_f64_prefilter_passes_every_value_of_a_marked_bucket() {
        for vals in ranges64() {
            let (min, max) = range64(&vals);
            for bins in [1, 7, 256, 1000, 65_536] {
                let bins = FloatBins::new(min, max, bins);
                let edges = straddling(&vals, &bins, min, max);
                let others: Vec<u32> = vals
                    .iter()
                    .step_by(301)
                    .map(|&x| kernel::Keyed::prefix(x))
                    .collect();
                let Some(pre) = kernel::Prefilter64::new(Some((bins.edges(), min, max)), &others)
                else {
                    // Only where the range is near f64's largest, or so
                    // narrow that bins per unit overflow.
                    assert!(max - min > 1e300 || max - min < 1e-290, "{min} {max}");
                    continue;
                };
                for &x in vals.iter().filter(|x| x.is_finite()) {
                    let p = kernel::Keyed::prefix(x);
                    if edges.binary_search(&p).is_ok() || others.contains(&p) {
                        assert!(
                            pre.passes(x),
                            "{x} in marked bucket {p}, {} bins",
                            bins.len()
                        );
                    }
                }
                // Values far from every edge fail it. An f64 bucket is
                // eight times as wide as an f32 one: for these weights
                // (uniform, not normal) about half of them pass.
                let passed = vals.iter().filter(|x| pre.passes(**x)).count();
                if bins.len() == 256 && max - min < 1.0 && max - min > 0.01 {
                    assert!(passed * 3 < vals.len() * 2, "{passed} of {}", vals.len());
                }
            }
        }
        let bins = FloatBins::new(-f64::MAX, f64::MAX, 256);
        assert!(kernel::Prefilter64::new(Some((bins.edges(), -f64::MAX, f64::MAX)), &[]).is_none());
        assert!(kernel::Prefilter64::new(None, &[1, 2]).is_some());
    }

    #[test]
    fn every_copy_of_the_f64_prefiltered_filter_agrees() {
        use kernel::MARK_WORDS;
        type Near64 = fn(&[f64], &[u64; MARK_WORDS], &kernel::Prefilter64, &mut dyn FnMut(&[u64]));
        let mut copies: Vec<Near64> = vec![|v, m, p, h| for_each_marked_f64(v, m, Some(p), h)];
        #[cfg(target_arch = "x86_64")]
        if avx512() {
            copies.push(|v, m, p, h| {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                into_hits(h, |found| unsafe {
                    x86::marked_near_f64_512(v, m, p, found);
                });
            });
        }
        for vals in ranges64() {
            let (min, max) = range64(&vals);
            let bins = FloatBins::new(min, max, 256);
            let edges = straddling(&vals, &bins, min, max);
            let others: Vec<u32> = vals
                .iter()
                .step_by(97)
                .map(|&x| kernel::Keyed::prefix(x))
                .collect();
            for with_edges in [true, false] {
                let near = with_edges.then(|| (bins.edges(), min, max));
                let Some(pre) = kernel::Prefilter64::new(near, &others) else {
                    continue;
                };
                // Without the near test, only the others are marked.
                let mut marks = vec![0u64; MARK_WORDS];
                let marked: &[u32] = if with_edges { &edges } else { &[] };
                for &p in marked.iter().chain(&others) {
                    marks[p as usize / 64] |= 1 << (p % 64);
                }
                let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
                // Every length from a whole number of blocks to a few
                // values, so that the tails are taken too.
                for len in [vals.len(), vals.len() - 5, 1027, 13, 0] {
                    let part = &vals[vals.len() - len..];
                    let portable = hits_of(|found| kernel::for_each_marked(part, marks, found));
                    for copy in &copies {
                        let mut hits = Vec::new();
                        copy(part, marks, &pre, &mut |ks| hits.extend_from_slice(ks));
                        assert_eq!(hits, portable, "{len} values, edges {with_edges}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_copy_of_the_prefix_loops_agrees() {
        use kernel::MARK_WORDS;
        // Every kind of value, at every offset from an aligned address, and
        // a run in one bucket long enough to wrap its byte twice.
        let mut vals = values(7, 3 * BLOCK + 11, true);
        vals.splice(1000..1000, [1.5f32; 700]);
        let mut bytes = vec![0u8; 3];
        bytes.extend(vals.iter().flat_map(|x| x.to_le_bytes()));
        for shift in 0..4 {
            let part = &bytes[shift..bytes.len() - (3 - shift)];
            let counted = |copy: CountCopy| {
                let mut idx = [0u32; kernel::PART];
                tally_of(|tally| {
                    // In blocks of every length, odd ones among them.
                    for (i, block) in part.chunks(4 * 777).enumerate() {
                        let ahead = part.get((i + 1) * 4 * 777..).unwrap_or(&[]);
                        copy(block, ahead, &mut idx, tally);
                    }
                })
            };
            let a = counted(kernel::count_prefixes_f32);
            assert_eq!(a.iter().sum::<u64>(), vals.len() as u64);
            // Some bucket wrapped its byte.
            assert!(a.iter().any(|&c| c > 256));
            for copy in copies_of_count() {
                assert!(counted(copy) == a, "offset {shift}");
            }
            // Marks on about one bucket in three that hold values.
            let marks = every_third(&a);
            let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
            let portable = portable_hits(part, marks);
            assert!(!portable.is_empty());
            for copy in copies_of_filter() {
                let mut hits = Vec::new();
                copy(part, marks, &mut |ks| hits.extend_from_slice(ks));
                assert_eq!(hits, portable, "offset {shift}");
            }
        }
    }

    /// f64 values of every kind: normal ones of many magnitudes, and with
    /// `specials` NaN of several payloads, ±Inf, ±0 and subnormals.
    fn values_f64(seed: u64, n: usize, specials: bool, magnitude: i32) -> Vec<f64> {
        let mut state = seed | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let r = state;
                match r % 64 {
                    0 if specials => f64::from_bits(0x7ff8_0000_0000_0000 | (r >> 20)),
                    1 if specials => f64::INFINITY,
                    2 if specials => f64::NEG_INFINITY,
                    3 => -0.0,
                    4 => 0.0,
                    5 => f64::from_bits((r >> 12) & 0x000f_ffff_ffff_ffff),
                    _ => {
                        let u = (r >> 11) as f64 / (1u64 << 53) as f64;
                        (u - 0.4) * 2f64.powi(magnitude + (r % 9) as i32 - 4)
                    }
                }
            })
            .collect()
    }

    #[test]
    fn every_copy_of_the_f64_block_agrees() {
        type Copy64 = fn(&[f64], f64) -> (Specials, Moments);
        let mut copies: Vec<(&str, Copy64)> = vec![("dispatch", block_f64)];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                copies.push(("avx2", |v, sn| {
                    // SAFETY: only called on this CPU, which has AVX2 (checked).
                    kernel::block_f64_with(v, sn, |p, s| unsafe { x86::block_f64_256(p, s) })
                }));
            }
            if avx512() {
                copies.push(("avx512", |v, sn| {
                    // SAFETY: only called on this CPU, which has AVX-512 (checked).
                    kernel::block_f64_with(v, sn, |p, s| unsafe { x86::block_f64_512(p, s) })
                }));
                copies.push(("avx512 in one pass", |v, sn| {
                    kernel::block_f64_with(v, sn, |p, s| {
                        // SAFETY: as above.
                        unsafe { x86::block_f64_fused_512(p, s) }
                            .unwrap_or_else(|| kernel::block_f64(p, s))
                    })
                }));
                // The one pass takes the blocks it should.
                let vals = values_f64(1, BLOCK, false, 0);
                // SAFETY: as above.
                assert!(unsafe { x86::block_f64_fused_512(&vals, f64::MIN_POSITIVE) }.is_some());
                let mut with_nan = vals.clone();
                with_nan[BLOCK - 3] = f64::NAN;
                // SAFETY: as above.
                assert!(unsafe { x86::block_f64_fused_512(&with_nan, 1e-300) }.is_none());
            }
        }
        let mut seed = 3;
        // Magnitudes that need no scaling, and ones beyond 2^±400 that do.
        for magnitude in [0, -20, 700, -700, -1060] {
            for specials in [false, true] {
                for n in [0, 1, 7, 8, 9, 15, 16, 17, 2047, 2048, 2049, 3 * BLOCK + 5] {
                    seed += 2;
                    let vals = values_f64(seed, n, specials, magnitude);
                    for sn in [f64::MIN_POSITIVE, f64::from(f32::MIN_POSITIVE)] {
                        let portable = format!("{:?}", kernel::block_f64(&vals, sn));
                        for (name, copy) in &copies {
                            let got = format!("{:?}", copy(&vals, sn));
                            assert_eq!(got, portable, "{name}, {n} values of 2^{magnitude}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_f64_block_and_its_prefixes_in_one_loop_agree_bit_for_bit() {
        let mut idx = [0u32; kernel::PART];
        let mut seed = 5;
        for magnitude in [0, 700, -1060] {
            for specials in [false, true] {
                for n in [
                    0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 2047, BLOCK,
                ] {
                    seed += 2;
                    let all = values_f64(seed, n + 40, specials, magnitude);
                    let (vals, ahead) = all.split_at(n);
                    let sn = f64::MIN_POSITIVE;
                    let mut one = (Specials::default(), Moments::default());
                    let a = tally_of(|t| {
                        one = block_and_prefixes_f64(vals, ahead, sn, &mut idx, t);
                    });
                    let mut two = (Specials::default(), Moments::default());
                    let b = tally_of(|t| {
                        two = kernel::block_f64(vals, sn);
                        kernel::count_prefixes(vals, &[], &mut idx, t);
                    });
                    let what = format!("{n} values of 2^{magnitude}, specials {specials}");
                    assert_eq!(format!("{one:?}"), format!("{two:?}"), "{what}");
                    assert!(a == b, "counts differ: {what}");
                    assert_eq!(a.iter().sum::<u64>(), n as u64, "{what}");
                }
            }
        }
    }

    #[test]
    fn every_copy_of_the_f64_prefix_loops_agrees() {
        use kernel::{BUCKETS, MARK_WORDS};
        type Count64 = fn(&[f64], &[f64], &mut [u32; kernel::PART], &mut kernel::Tally<'_>);
        type Filter64 = fn(&[f64], &[u64; MARK_WORDS], &mut dyn FnMut(&[u64]));
        let mut counts: Vec<Count64> = vec![count_prefixes];
        let mut filters: Vec<Filter64> = vec![for_each_marked];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                counts.push(|v, a, i, t| unsafe { x86::count_prefixes_256(v, a, i, t) });
                // SAFETY: as above.
                filters.push(|v, m, h| {
                    // SAFETY: as above.
                    into_hits(h, |found| unsafe { x86::for_each_marked_256(v, m, found) });
                });
            }
            if avx512() {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                counts.push(|v, a, i, t| unsafe { x86::count_prefixes_512(v, a, i, t) });
                // SAFETY: as above.
                filters.push(|v, m, h| {
                    // SAFETY: as above.
                    into_hits(h, |found| unsafe { x86::for_each_marked_512(v, m, found) });
                });
            }
        }
        // Every kind of value, of magnitudes that spread over many
        // exponents, and a run in one bucket that wraps its byte twice.
        let mut vals = values_f64(9, 3 * BLOCK + 11, true, 0);
        vals.extend(values_f64(10, 999, true, -700));
        vals.splice(1000..1000, [1.5f64; 700]);
        let counted = |copy: Count64| {
            let mut idx = [0u32; kernel::PART];
            tally_of(|tally| {
                for (i, block) in vals.chunks(777).enumerate() {
                    let ahead = vals.get((i + 1) * 777..).unwrap_or(&[]);
                    copy(block, ahead, &mut idx, tally);
                }
            })
        };
        // The portable count, against keys made one by one.
        let a = counted(kernel::count_prefixes);
        let key = |x: f64| {
            let b = x.to_bits();
            if b >> 63 == 1 { !b } else { b | 1 << 63 }
        };
        let bucket = |k: u64| (k >> (64 - kernel::PREFIX_BITS)) as usize;
        let mut expected = vec![0u64; BUCKETS];
        for &x in &vals {
            expected[bucket(key(x))] += 1;
        }
        assert!(a == expected);
        assert!(a.iter().any(|&c| c > 512));
        for copy in counts {
            assert!(counted(copy) == a);
        }
        let marks = every_third(&a);
        let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
        let portable = hits_of(|found| kernel::for_each_marked(&vals, marks, found));
        let want: Vec<u64> = vals
            .iter()
            .map(|&x| key(x))
            .filter(|&k| kernel::marked(marks, bucket(k) as u32))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(portable, want);
        for copy in filters {
            let mut hits = Vec::new();
            copy(&vals, marks, &mut |ks| hits.extend_from_slice(ks));
            assert_eq!(hits, portable);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn each_vector_copy_of_the_f32_scan_agrees() {
        let vals = values(11, 4 * BLOCK, true);
        for specials in [false, true] {
            let vals: Vec<f32> = if specials {
                vals.clone()
            } else {
                vals.iter().copied().filter(|x| x.is_finite()).collect()
            };
            let bytes = encode(Wide::F32, &vals, false);
            let whole = bytes.len() / 32 * 32;
            let groups = &bytes[..whole];
            for tiny in [0x0080_0000, 0x3880_0000] {
                let portable = format!("{:?}", kernel::scan_groups(Wide::F32, groups, tiny, 0.25));
                if avx2() {
                    // SAFETY: the CPU has AVX2, checked on the line above.
                    let v = unsafe { x86::scan_f32(groups, tiny, 0.25) };
                    assert_eq!(format!("{v:?}"), portable);
                }
                if avx512() {
                    // SAFETY: the CPU has these AVX-512 subsets, checked above.
                    let v = unsafe { x86::scan_f32_512(groups, tiny, 0.25) };
                    assert_eq!(format!("{v:?}"), portable);
                }
            }
        }
    }
}
