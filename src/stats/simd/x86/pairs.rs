//! The loops over `(value, count)` pairs compiled for AVX2 and AVX-512:
//! the weighted scan and the prefixes' counts (the portable loops of
//! `kernel/weighted.rs`, compiled again), the nibbles of a run counted
//! from their bit planes, and a table's values looked up in the bitmap of
//! marked buckets with one gather.

use std::arch::x86_64::{
    __m256i, _mm_loadu_si128, _mm_movemask_epi8, _mm_slli_epi16, _mm256_add_epi32, _mm256_add_pd,
    _mm256_and_pd, _mm256_and_si256, _mm256_blendv_ps, _mm256_castps_si256, _mm256_castps256_ps128,
    _mm256_castsi256_pd, _mm256_castsi256_ps, _mm256_castsi256_si128, _mm256_cmpeq_epi32,
    _mm256_cmpgt_epi32, _mm256_cvtepi32_pd, _mm256_cvtps_pd, _mm256_extractf128_ps,
    _mm256_extracti128_si256, _mm256_i32gather_epi32, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_max_ps, _mm256_min_ps, _mm256_movemask_epi8, _mm256_movemask_ps, _mm256_mul_pd,
    _mm256_or_si256, _mm256_set1_epi32, _mm256_set1_epi64x, _mm256_set1_pd, _mm256_set1_ps,
    _mm256_setzero_pd, _mm256_setzero_si256, _mm256_slli_epi16, _mm256_slli_epi32,
    _mm256_srai_epi32, _mm256_srli_epi32, _mm256_srlv_epi32, _mm256_sub_pd, _mm256_xor_si256,
    _mm512_and_si512, _mm512_i32gather_epi32, _mm512_loadu_si512, _mm512_or_si512,
    _mm512_set1_epi32, _mm512_srai_epi32, _mm512_srli_epi32, _mm512_srlv_epi32,
    _mm512_test_epi32_mask, _mm512_xor_si512,
};

use super::{LOW32, epu32, pd, ps};
use crate::stats::kernel::{self, Keyed, MARK_WORDS};

/// [`kernel::scan_pairs`] written for AVX2 ([`scan_256`] with nothing
/// counted).
#[target_feature(enable = "avx2")]
pub(in crate::stats::simd) fn scan_pairs_256(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    x0: f32,
) -> kernel::PairLanes {
    scan_256(vals, counts, tiny_bits, x0, |_| {})
}

/// [`kernel::scan_count_pairs`] written for AVX2: the keys' prefixes first
/// (a loop the compiler vectorises), then [`scan_256`], which counts each
/// group's eight prefixes as it sums the group, so that the scalar adds
/// into the table overlap the vector work; the pairs after the last whole
/// group last.
#[target_feature(enable = "avx2")]
pub(in crate::stats::simd) fn scan_count_pairs_256(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    x0: f32,
    idx: &mut [u32],
    tally: &mut kernel::Tally<'_>,
) -> kernel::PairLanes {
    let len = vals.len().min(counts.len()).min(idx.len());
    let (vals, counts, idx) = (&vals[..len], &counts[..len], &mut idx[..len]);
    for (o, &v) in idx.iter_mut().zip(vals) {
        *o = v.prefix();
    }
    let (groups, tail) = idx.as_chunks::<8>();
    let (cs, tail_counts) = counts.as_chunks::<8>();
    let lanes = scan_256(vals, counts, tiny_bits, x0, |g| {
        if let (Some(p), Some(c)) = (groups.get(g), cs.get(g)) {
            for j in 0..8 {
                tally.add_n(p[j], c[j]);
            }
        }
    });
    for (&p, &c) in tail.iter().zip(tail_counts) {
        tally.add_n(p, c);
    }
    lanes
}

/// [`kernel::scan_pairs`] written for AVX2: eight pairs a step, the eight
/// lanes' counts, range and f32 selects in one register each, their f64
/// sums in two (lanes 0-3, 4-7), every lane's operations those of the
/// portable loop in its order (a multiply then an add, never fused), so
/// that the sums are the same bits. Counts are below 2^31 (a batch's are
/// at most 2^20), so that they convert as signed integers. `each` is
/// called with the index of each group as it is summed.
#[target_feature(enable = "avx2")]
#[inline]
fn scan_256(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    x0: f32,
    mut each: impl FnMut(usize),
) -> kernel::PairLanes {
    let (vs, _) = vals.as_chunks::<8>();
    let (cs, _) = counts.as_chunks::<8>();
    let zero = _mm256_setzero_si256();
    let x0s = _mm256_set1_ps(x0);
    let x0d = _mm256_set1_pd(f64::from(x0));
    let abs32 = _mm256_set1_epi32(i32::MAX);
    let abs64 = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
    let tiny = _mm256_set1_epi32(tiny_bits as i32);
    let (mut elements, mut small, mut zeros) = (zero, zero, zero);
    let mut lo = _mm256_set1_ps(f32::INFINITY);
    let mut hi = _mm256_set1_ps(f32::NEG_INFINITY);
    let mut sum = [_mm256_setzero_pd(); 2];
    let mut abs = [_mm256_setzero_pd(); 2];
    let mut sq = [_mm256_setzero_pd(); 2];
    for (g, (v, c)) in vs.iter().zip(cs).enumerate() {
        each(g);
        // SAFETY: `v` and `c` are eight readable lanes; the loads take any
        // alignment.
        let (v, c) = unsafe {
            (
                _mm256_loadu_ps(v.as_ptr()),
                _mm256_loadu_si256(c.as_ptr().cast()),
            )
        };
        // A pair of no elements counts as x0.
        let x = _mm256_blendv_ps(v, x0s, _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, zero)));
        let magnitude = _mm256_and_si256(_mm256_castps_si256(x), abs32);
        elements = _mm256_add_epi32(elements, c);
        small = _mm256_add_epi32(
            small,
            _mm256_and_si256(_mm256_cmpgt_epi32(tiny, magnitude), c),
        );
        zeros = _mm256_add_epi32(
            zeros,
            _mm256_and_si256(_mm256_cmpeq_epi32(magnitude, zero), c),
        );
        lo = _mm256_min_ps(x, lo);
        hi = _mm256_max_ps(x, hi);
        let halves = [
            (
                _mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                _mm256_cvtepi32_pd(_mm256_castsi256_si128(c)),
            ),
            (
                _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)),
                _mm256_cvtepi32_pd(_mm256_extracti128_si256::<1>(c)),
            ),
        ];
        for (h, (wide, weight)) in halves.into_iter().enumerate() {
            sum[h] = _mm256_add_pd(sum[h], _mm256_mul_pd(weight, wide));
            abs[h] = _mm256_add_pd(abs[h], _mm256_mul_pd(weight, _mm256_and_pd(wide, abs64)));
            let d = _mm256_sub_pd(wide, x0d);
            sq[h] = _mm256_add_pd(sq[h], _mm256_mul_pd(weight, _mm256_mul_pd(d, d)));
        }
    }
    kernel::PairLanes {
        n: epu32(elements),
        tiny: epu32(small),
        zero: epu32(zeros),
        min: ps(lo),
        max: ps(hi),
        sum: pd(sum),
        abs: pd(abs),
        sq: pd(sq),
    }
}

/// [`kernel::scan_pairs`] compiled for AVX-512.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn scan_pairs_512(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    x0: f32,
) -> kernel::PairLanes {
    kernel::scan_pairs(vals, counts, tiny_bits, x0)
}

/// [`kernel::scan_count_pairs`] compiled for AVX-512.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn scan_count_pairs_512(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    x0: f32,
    idx: &mut [u32],
    tally: &mut kernel::Tally<'_>,
) -> kernel::PairLanes {
    kernel::scan_count_pairs(vals, counts, tiny_bits, x0, idx, tally)
}

/// The elements of each code from the four bit planes of the codes (bit
/// `i` of `p[k]`: bit `k` of element `i`'s code): `m[q]` has bit `i` set
/// where element `i` holds code `q`. A tree of ANDs, the high bit first.
#[allow(clippy::inline_always)]
#[inline(always)]
fn code_masks(p: [u64; 4]) -> [u64; 16] {
    let mut m = [0u64; 16];
    m[0] = !0;
    let mut width = 1;
    for k in (0..4).rev() {
        for i in (0..width).rev() {
            let x = m[i];
            m[2 * i] = x & !p[k];
            m[2 * i + 1] = x & p[k];
        }
        width *= 2;
    }
    m
}

/// [`crate::quant::q4_k_pairs`] compiled for AVX2, its nibbles counted by
/// [`nibble_counts_256`] inlined.
#[target_feature(enable = "avx2,popcnt")]
pub(in crate::stats::simd) fn q4_k_pairs_256(
    blocks: &[u8],
    next: &[u8],
    vals: &mut [f32],
    counts: &mut [u32],
    codes: &mut [u32; 16],
) {
    crate::quant::q4_k_pairs(
        blocks,
        next,
        vals,
        counts,
        codes,
        |qs| match <&[u8; 32]>::try_from(qs) {
            Ok(qs) => nibble_counts_32(qs),
            Err(_) => nibble_counts_256(qs),
        },
        super::super::prefetch,
    );
}

/// The nibble counts of 32 bytes (a Q4_K sub-block pair) from bit planes:
/// the top bit of each byte after a shift is a plane (`movemask`); the
/// planes of the low nibbles in the low half of a word, the high nibbles'
/// in the upper half, so that one tree of ANDs serves both; the counts by
/// scalar `popcnt`. Inlined into the callers' loops.
#[target_feature(enable = "avx2,popcnt")]
#[inline]
fn nibble_counts_32(c: &[u8; 32]) -> ([u32; 16], [u32; 16]) {
    // SAFETY: `c` is 32 readable bytes; the load takes any alignment.
    let x = unsafe { _mm256_loadu_si256(c.as_ptr().cast()) };
    let plane = |low: i32, high: i32| u64::from(low as u32) | u64::from(high as u32) << 32;
    let m = code_masks([
        plane(
            _mm256_movemask_epi8(_mm256_slli_epi16::<7>(x)),
            _mm256_movemask_epi8(_mm256_slli_epi16::<3>(x)),
        ),
        plane(
            _mm256_movemask_epi8(_mm256_slli_epi16::<6>(x)),
            _mm256_movemask_epi8(_mm256_slli_epi16::<2>(x)),
        ),
        plane(
            _mm256_movemask_epi8(_mm256_slli_epi16::<5>(x)),
            _mm256_movemask_epi8(_mm256_slli_epi16::<1>(x)),
        ),
        plane(
            _mm256_movemask_epi8(_mm256_slli_epi16::<4>(x)),
            _mm256_movemask_epi8(x),
        ),
    ]);
    let mut lo = [0u32; 16];
    let mut hi = [0u32; 16];
    for q in 0..16 {
        // One popcount of the whole word less one of its high half: the
        // compiler keeps these scalar.
        let high = ((m[q] >> 32) as u32).count_ones();
        hi[q] = high;
        lo[q] = m[q].count_ones() - high;
    }
    (lo, hi)
}

/// [`kernel::nibble_counts`] from bit planes: 32 bytes at a time
/// ([`nibble_counts_32`]); 16 bytes the same way; the rest one by one.
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub(in crate::stats::simd) fn nibble_counts_256(bytes: &[u8]) -> ([u32; 16], [u32; 16]) {
    let mut lo = [0u32; 16];
    let mut hi = [0u32; 16];
    let (wide, rest) = bytes.as_chunks::<32>();
    for c in wide {
        let (l, h) = nibble_counts_32(c);
        for q in 0..16 {
            lo[q] += l[q];
            hi[q] += h[q];
        }
    }
    let (narrow, rest) = rest.as_chunks::<16>();
    for c in narrow {
        // SAFETY: `c` is 16 readable bytes; the load takes any alignment.
        let x = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        let plane = |low: i32, high: i32| u64::from(low as u16) | u64::from(high as u16) << 16;
        let m = code_masks([
            plane(
                _mm_movemask_epi8(_mm_slli_epi16::<7>(x)),
                _mm_movemask_epi8(_mm_slli_epi16::<3>(x)),
            ),
            plane(
                _mm_movemask_epi8(_mm_slli_epi16::<6>(x)),
                _mm_movemask_epi8(_mm_slli_epi16::<2>(x)),
            ),
            plane(
                _mm_movemask_epi8(_mm_slli_epi16::<5>(x)),
                _mm_movemask_epi8(_mm_slli_epi16::<1>(x)),
            ),
            plane(
                _mm_movemask_epi8(_mm_slli_epi16::<4>(x)),
                _mm_movemask_epi8(x),
            ),
        ]);
        for (q, &m) in m.iter().enumerate() {
            lo[q] += (m as u16).count_ones();
            hi[q] += ((m >> 16) as u16).count_ones();
        }
    }
    let (l, h) = kernel::nibble_counts(rest);
    for q in 0..16 {
        lo[q] += l[q];
        hi[q] += h[q];
    }
    (lo, hi)
}

/// Eight values' marks: their prefixes' bits gathered from the bitmap
/// read as u32 words (word `p >> 5`, bit `p & 31`: on this little-endian
/// CPU the bit `p & 63` of u64 word `p >> 6`), as the sign bits of a
/// float mask.
#[target_feature(enable = "avx2")]
#[inline]
fn marked8(bits: __m256i, marks: &[u64; MARK_WORDS]) -> u16 {
    let flip = _mm256_or_si256(_mm256_srai_epi32::<31>(bits), _mm256_set1_epi32(i32::MIN));
    let prefix = _mm256_srli_epi32::<{ LOW32 as i32 }>(_mm256_xor_si256(bits, flip));
    // SAFETY: a prefix is below 2^PREFIX_BITS, so its word `p >> 5` is
    // inside `marks` read as u32 words.
    let words = unsafe {
        _mm256_i32gather_epi32::<4>(marks.as_ptr().cast(), _mm256_srli_epi32::<5>(prefix))
    };
    let bit = _mm256_srlv_epi32(words, _mm256_and_si256(prefix, _mm256_set1_epi32(31)));
    _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32::<31>(bit))) as u16
}

/// [`kernel::marked_codes`] of a table of 16, with two gathers of eight.
#[target_feature(enable = "avx2")]
pub(in crate::stats::simd) fn marked_codes_256(t: &[f32; 16], marks: &[u64; MARK_WORDS]) -> u16 {
    // SAFETY: `t` is 64 readable bytes; the loads take any alignment.
    let (a, b) = unsafe {
        (
            _mm256_loadu_si256(t.as_ptr().cast()),
            _mm256_loadu_si256(t.as_ptr().add(8).cast()),
        )
    };
    marked8(a, marks) | marked8(b, marks) << 8
}

/// [`kernel::marked_codes`] of a table of 16, with one gather.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn marked_codes_512(t: &[f32; 16], marks: &[u64; MARK_WORDS]) -> u16 {
    // SAFETY: `t` is 64 readable bytes; the load takes any alignment.
    let bits = unsafe { _mm512_loadu_si512(t.as_ptr().cast()) };
    let flip = _mm512_or_si512(_mm512_srai_epi32::<31>(bits), _mm512_set1_epi32(i32::MIN));
    let prefix = _mm512_srli_epi32::<{ LOW32 }>(_mm512_xor_si512(bits, flip));
    // SAFETY: as in `marked8`.
    let words = unsafe {
        _mm512_i32gather_epi32::<4>(_mm512_srli_epi32::<5>(prefix), marks.as_ptr().cast())
    };
    let bit = _mm512_srlv_epi32(words, _mm512_and_si512(prefix, _mm512_set1_epi32(31)));
    _mm512_test_epi32_mask(bit, _mm512_set1_epi32(1))
}
