//! The group scans of F32, F16 and BF16 blocks (specials, range and the
//! f64 sums, eight lanes at a time: [`Acc`], and the AVX-512 sums,
//! [`Sums512`]), and the F32 scans that count the block's key prefixes in
//! the same loop.

use std::arch::x86_64::{
    __m128i, __m256, __m256d, __m256i, __m512d, _mm_loadu_si128, _mm256_add_pd, _mm256_and_pd,
    _mm256_and_si256, _mm256_castps_si256, _mm256_castps256_ps128, _mm256_castsi256_pd,
    _mm256_castsi256_ps, _mm256_cmpeq_epi32, _mm256_cmpgt_epi32, _mm256_cvtepu16_epi32,
    _mm256_cvtph_ps, _mm256_cvtps_pd, _mm256_extractf128_ps, _mm256_loadu_ps, _mm256_max_ps,
    _mm256_min_epu32, _mm256_min_ps, _mm256_mul_pd, _mm256_or_si256, _mm256_set1_epi32,
    _mm256_set1_epi64x, _mm256_set1_pd, _mm256_set1_ps, _mm256_setzero_pd, _mm256_setzero_si256,
    _mm256_slli_epi32, _mm256_srai_epi32, _mm256_srli_epi32, _mm256_storeu_si256, _mm256_sub_epi32,
    _mm256_sub_pd, _mm256_xor_si256, _mm512_add_pd, _mm512_and_pd, _mm512_castsi512_pd,
    _mm512_cvtps_pd, _mm512_loadu_si512, _mm512_mul_pd, _mm512_or_si512, _mm512_set1_epi32,
    _mm512_set1_epi64, _mm512_set1_pd, _mm512_setzero_pd, _mm512_srai_epi32, _mm512_srli_epi32,
    _mm512_storeu_si512, _mm512_sub_pd, _mm512_xor_si512,
};

use super::keys::{add_keys, count_rest, prefetch_lines, turn};
use super::{LOW32, epu32, pd, ps};
use crate::stats::kernel::{self, F32Lanes};

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

/// [`kernel::scan_groups`] of F32 in AVX2.
#[target_feature(enable = "avx2")]
pub(in crate::stats::simd) fn scan_f32(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
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

/// [`kernel::scan_groups`] of F32 in AVX-512 ([`Sums512`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(in crate::stats::simd) fn scan_f32_512(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
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
pub(in crate::stats::simd) fn scan_count_f32_512(
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
                let key = _mm512_xor_si512(v, _mm512_or_si512(_mm512_srai_epi32::<31>(v), sign));
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
pub(in crate::stats::simd) fn scan_count_f32(
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
            let key = _mm256_xor_si256(bits, _mm256_or_si256(_mm256_srai_epi32::<31>(bits), sign));
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

/// [`kernel::scan_groups`] of F16 in AVX2, widened by F16C's
/// exact conversion.
#[target_feature(enable = "avx2,f16c")]
pub(in crate::stats::simd) fn scan_f16(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
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

/// [`kernel::scan_groups`] of BF16 in AVX2 (a BF16 value is the
/// top half of an f32).
#[target_feature(enable = "avx2")]
pub(in crate::stats::simd) fn scan_bf16(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
    let mut acc = Acc::new(tiny_bits, x0);
    // BF16 has f32's range, and its subnormals are as rare.
    scan_rarely_small(&mut acc, bytes.as_chunks::<16>().0, |g| {
        let wide = _mm256_cvtepu16_epi32(load_u16x8(g));
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
    });
    acc.lanes()
}
