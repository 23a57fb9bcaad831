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

/// Counts the key prefixes of f32 bytes ([`kernel::count_prefixes_f32`]).
pub(crate) fn count_prefixes_f32(bytes: &[u8], table: &mut [u32; kernel::BUCKETS]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return unsafe { x86::count_prefixes_f32_512(bytes, table) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::count_prefixes_f32(bytes, table) };
        }
    }
    kernel::count_prefixes_f32(bytes, table);
}

/// Calls `hit` with the keys of the f32 values whose bucket is marked
/// ([`kernel::for_each_marked_f32`]).
pub(crate) fn for_each_marked_f32(
    bytes: &[u8],
    marks: &[u64; kernel::MARK_WORDS],
    hit: &mut dyn FnMut(u64),
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return unsafe { x86::for_each_marked_f32_512(bytes, marks, hit) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::for_each_marked_f32(bytes, marks, hit) };
        }
    }
    kernel::for_each_marked_f32(bytes, marks, hit);
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

    use super::F32Lanes;
    use crate::stats::kernel::{self, BUCKETS, MARK_WORDS};

    /// [`kernel::count_prefixes_f32`] compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn count_prefixes_f32(bytes: &[u8], table: &mut [u32; BUCKETS]) {
        kernel::count_prefixes_f32(bytes, table);
    }

    /// [`kernel::count_prefixes_f32`] compiled for AVX-512.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn count_prefixes_f32_512(bytes: &[u8], table: &mut [u32; BUCKETS]) {
        kernel::count_prefixes_f32(bytes, table);
    }

    /// [`kernel::for_each_marked_f32`] compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn for_each_marked_f32(
        bytes: &[u8],
        marks: &[u64; MARK_WORDS],
        hit: &mut dyn FnMut(u64),
    ) {
        kernel::for_each_marked_f32(bytes, marks, hit);
    }

    /// [`kernel::for_each_marked_f32`] compiled for AVX-512.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn for_each_marked_f32_512(
        bytes: &[u8],
        marks: &[u64; MARK_WORDS],
        hit: &mut dyn FnMut(u64),
    ) {
        kernel::for_each_marked_f32(bytes, marks, hit);
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

    /// [`super::kernel::scan_groups`] of F32 in AVX-512: lane j of the
    /// sums is one f64 lane of a 512-bit register, where the AVX2 copy
    /// keeps lanes 0–3 and 4–7 in two registers; each lane sees the same
    /// operations in the same order, so the sums are the same.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) fn scan_f32_512(bytes: &[u8], tiny_bits: u32, x0: f64) -> F32Lanes {
        let mut acc = Acc::new(tiny_bits, x0);
        let abs_mask = _mm512_castsi512_pd(_mm512_set1_epi64(0x7fff_ffff_ffff_ffff));
        let origin = _mm512_set1_pd(x0);
        let (mut sum, mut abs, mut sq) = (
            _mm512_setzero_pd(),
            _mm512_setzero_pd(),
            _mm512_setzero_pd(),
        );
        let groups = bytes.as_chunks::<32>().0;
        let mut low = _mm256_set1_epi32(-1);
        for g in groups {
            let v = load_f32x8(g);
            low = acc.track_low(low, v);
            acc.min = _mm256_min_ps(v, acc.min);
            acc.max = _mm256_max_ps(v, acc.max);
            let w = _mm512_cvtps_pd(v);
            sum = _mm512_add_pd(sum, w);
            abs = _mm512_add_pd(abs, _mm512_and_pd(w, abs_mask));
            let d = _mm512_sub_pd(w, origin);
            sq = _mm512_add_pd(sq, _mm512_mul_pd(d, d));
        }
        if acc.any_small(low) {
            for g in groups {
                acc.count_small(load_f32x8(g));
            }
        }
        let lanes = |v: __m512d| -> [f64; 8] {
            // SAFETY: 64 bytes of f64 into [f64; 8].
            unsafe { std::mem::transmute(v) }
        };
        F32Lanes {
            sum: lanes(sum),
            abs: lanes(abs),
            sq: lanes(sq),
            ..acc.lanes()
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

    type CountCopy = fn(&[u8], &mut [u32; kernel::BUCKETS]);
    type FilterCopy = fn(&[u8], &[u64; kernel::MARK_WORDS], &mut dyn FnMut(u64));

    /// The dispatching counter and every vector copy this CPU can run.
    fn copies_of_count() -> Vec<CountCopy> {
        let mut out: Vec<CountCopy> = vec![count_prefixes_f32];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                out.push(|b, t| unsafe { x86::count_prefixes_f32(b, t) });
            }
            if avx512() {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                out.push(|b, t| unsafe { x86::count_prefixes_f32_512(b, t) });
            }
        }
        out
    }

    /// The dispatching filter and every vector copy this CPU can run.
    fn copies_of_filter() -> Vec<FilterCopy> {
        let mut out: Vec<FilterCopy> = vec![for_each_marked_f32];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                out.push(|b, m, h| unsafe { x86::for_each_marked_f32(b, m, h) });
            }
            if avx512() {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                out.push(|b, m, h| unsafe { x86::for_each_marked_f32_512(b, m, h) });
            }
        }
        out
    }

    #[test]
    fn every_copy_of_the_prefix_loops_agrees() {
        use kernel::{BUCKETS, MARK_WORDS};
        // Every kind of value, at every offset from an aligned address.
        let vals = values(7, 3 * BLOCK + 11, true);
        let mut bytes = vec![0u8; 3];
        bytes.extend(vals.iter().flat_map(|x| x.to_le_bytes()));
        for shift in 0..4 {
            let part = &bytes[shift..bytes.len() - (3 - shift)];
            let counted = |copy: CountCopy| {
                let mut t = vec![0u32; BUCKETS];
                if let Ok(table) = <&mut [u32; BUCKETS]>::try_from(t.as_mut_slice()) {
                    copy(part, table);
                }
                t
            };
            let a = counted(kernel::count_prefixes_f32);
            assert_eq!(
                a.iter().map(|&c| u64::from(c)).sum::<u64>(),
                vals.len() as u64
            );
            for copy in copies_of_count() {
                assert!(counted(copy) == a, "offset {shift}");
            }
            // Marks on about one bucket in three that hold values.
            let mut marks = vec![0u64; MARK_WORDS];
            for (p, &c) in a.iter().enumerate() {
                if c > 0 && p % 3 == 0 {
                    marks[p / 64] |= 1 << (p % 64);
                }
            }
            let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
            let mut portable = Vec::new();
            kernel::for_each_marked_f32(part, marks, &mut |k| portable.push(k));
            assert!(!portable.is_empty());
            for copy in copies_of_filter() {
                let mut hits = Vec::new();
                copy(part, marks, &mut |k| hits.push(k));
                assert_eq!(hits, portable, "offset {shift}");
            }
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
