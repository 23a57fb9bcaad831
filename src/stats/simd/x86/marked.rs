//! The prefiltered filters of marked buckets: every value tested
//! arithmetically first (near a bin edge, or in the bloom of the other
//! marked buckets), the bitmap looked up only for the candidates; f32 in
//! AVX2 and AVX-512, f64 in AVX-512.

use std::arch::x86_64::{
    __m256i, __m512, __m512i, _CMP_LE_OQ, _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT,
    _mm256_add_ps, _mm256_and_si256, _mm256_blendv_ps, _mm256_castps_si256, _mm256_castsi256_ps,
    _mm256_cmp_ps, _mm256_cmpeq_epi32, _mm256_loadu_ps, _mm256_movemask_ps, _mm256_mul_ps,
    _mm256_or_si256, _mm256_permutevar8x32_epi32, _mm256_round_ps, _mm256_set1_epi32,
    _mm256_set1_ps, _mm256_slli_epi32, _mm256_srai_epi32, _mm256_srli_epi32, _mm256_srlv_epi32,
    _mm256_sub_ps, _mm256_xor_si256, _mm512_and_si512, _mm512_castpd_si512, _mm512_castps_si512,
    _mm512_castsi512_pd, _mm512_castsi512_ps, _mm512_cmp_pd_mask, _mm512_cmp_ps_mask,
    _mm512_fmadd_pd, _mm512_fmadd_ps, _mm512_loadu_pd, _mm512_loadu_ps,
    _mm512_maskz_compress_epi32, _mm512_maskz_compress_epi64, _mm512_mul_pd, _mm512_mul_ps,
    _mm512_permutex2var_epi32, _mm512_permutex2var_epi64, _mm512_reduce_pd, _mm512_reduce_ps,
    _mm512_rorv_epi32, _mm512_rorv_epi64, _mm512_set1_epi32, _mm512_set1_epi64, _mm512_set1_pd,
    _mm512_set1_ps, _mm512_srli_epi32, _mm512_srli_epi64, _mm512_storeu_si512, _mm512_sub_pd,
    _mm512_sub_ps, _mm512_test_epi32_mask, _mm512_test_epi64_mask,
};

use super::{LOW32, epu32};
use crate::stats::kernel::{self, BLOOM_BITS, MARK_WORDS, Prefilter, Prefilter64};
use crate::stats::simd::prefetch;

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

/// [`crate::stats::simd::for_each_marked_f32`] with a prefilter in AVX-512: the
/// candidates of a block are compressed into a buffer (no branch per
/// group), then looked up in the bitmap in order.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn marked_near_f32_512(
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
                prefetch(line.as_flattened());
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

/// [`crate::stats::simd::for_each_marked_f64`] with a prefilter in AVX-512: eight
/// values at a time, the candidates of a block compressed into a
/// buffer, then looked up in the bitmap in order.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn marked_near_f64_512(
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
                prefetch(line);
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
            let word = _mm512_permutex2var_epi64(bloom[0], _mm512_srli_epi64::<50>(bits), bloom[1]);
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

/// [`crate::stats::simd::for_each_marked_f32`] with a prefilter in AVX2 (and no
/// FMA: a multiply and an add, which round twice, as the prefilter's
/// margin allows): eight values at a time, the bloom's 1024 bits in
/// four registers.
#[target_feature(enable = "avx2")]
pub(in crate::stats::simd) fn marked_near_f32(
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
