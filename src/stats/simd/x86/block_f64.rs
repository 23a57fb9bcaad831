//! The f64 block summary on AVX-512 in one pass, for the blocks of finite
//! values that need no scaling (the portable passes' operations lane by
//! lane), and beside it, in the same loop, the block's key prefixes
//! counted.

use std::arch::x86_64::{
    __m512d, _CMP_EQ_OQ, _CMP_LT_OQ, _mm256_storeu_si256, _mm512_add_pd, _mm512_and_pd,
    _mm512_castsi512_pd, _mm512_cmp_pd_mask, _mm512_cvtepi64_epi32, _mm512_loadu_pd,
    _mm512_loadu_si512, _mm512_max_pd, _mm512_min_pd, _mm512_mul_pd, _mm512_or_si512,
    _mm512_set1_epi64, _mm512_set1_pd, _mm512_setzero_pd, _mm512_srai_epi64, _mm512_srli_epi64,
    _mm512_storeu_pd, _mm512_sub_pd, _mm512_xor_si512,
};

use super::LOW64;
use super::keys::{add_keys, turn};
use crate::stats::kernel::{self, Specials};
use crate::stats::moments::Moments;
use crate::stats::simd::prefetch;

/// [`kernel::block_f64_in`] of a block of finite values that needs no
/// scaling (nearly every block), in one pass: the same operations, lane
/// by lane, as the portable passes (eight lanes of minima and maxima,
/// sixteen of each sum, the tail summed in order, the lanes folded
/// alike), so the same bits. `None` for any other block, which the
/// caller summarises as the portable code does.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn block_f64_fused_512(
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
    let (mut sum, mut abs, mut sum_d, mut sum_d2) = ([zero; 2], [zero; 2], [zero; 2], [zero; 2]);
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
/// adds of the 64 before them run, as in [`super::scan::scan_count_f32_512`], and
/// `ahead` (the next block) is asked for a line per eight values.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn block_f64_count_512(
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
                prefetch(line);
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
                let key = _mm512_xor_si512(b, _mm512_or_si512(_mm512_srai_epi64::<63>(b), sign));
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
