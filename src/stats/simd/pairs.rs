//! The loops over `(value, count)` pairs ([`kernel::pairs_block`] and
//! the rest of `kernel/weighted.rs`), with the widest copy this CPU has.

use super::super::kernel::{self, MARK_WORDS, Specials};
use super::super::moments::Moments;
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512, x86};
use crate::quant::{PairKernels, q4_k_pairs};

/// Specials, range and moments of the elements a batch of pairs stands for
/// ([`kernel::pairs_block`]).
pub(crate) fn pairs_block(vals: &[f32], counts: &[u32], tiny_bits: u32) -> (Specials, Moments) {
    kernel::pairs_block(vals, counts, tiny_bits, pair_scan())
}

/// Specials, range and moments of a batch of pairs, and their key
/// prefixes counted into `table` ([`kernel::pairs_block_counting`]).
pub(crate) fn pairs_block_counting(
    vals: &[f32],
    counts: &[u32],
    tiny_bits: u32,
    idx: &mut [u32],
    table: &mut kernel::Tally<'_>,
) -> (Specials, Moments) {
    kernel::pairs_block_counting(
        vals,
        counts,
        tiny_bits,
        (pair_scan(), pair_scan_count()),
        idx,
        table,
    )
}

/// [`kernel::scan_count_pairs`]: with AVX2, one loop where the prefixes'
/// adds overlap the vector sums; with AVX-512, the portable loops
/// compiled for it.
pub(super) fn pair_scan_count() -> kernel::PairScanCount {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return |v, c, t, x0, i, tally| unsafe {
                x86::scan_count_pairs_512(v, c, t, x0, i, tally)
            };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return |v, c, t, x0, i, tally| unsafe {
                x86::scan_count_pairs_256(v, c, t, x0, i, tally)
            };
        }
    }
    kernel::scan_count_pairs
}

/// [`kernel::scan_pairs`], compiled for AVX-512 or AVX2 where the CPU has
/// them.
pub(super) fn pair_scan() -> kernel::PairScan {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return |v, c, t, x0| unsafe { x86::scan_pairs_512(v, c, t, x0) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return |v, c, t, x0| unsafe { x86::scan_pairs_256(v, c, t, x0) };
        }
    }
    kernel::scan_pairs
}

/// How many bytes hold each low and each high nibble
/// ([`kernel::nibble_counts`]; with AVX2, from the bytes' bit planes).
pub(crate) fn nibble_counts(bytes: &[u8]) -> ([u32; 16], [u32; 16]) {
    #[cfg(target_arch = "x86_64")]
    if avx2() && std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has AVX2 and POPCNT, checked just above.
        return unsafe { x86::nibble_counts_256(bytes) };
    }
    kernel::nibble_counts(bytes)
}

/// The values of a table whose bucket is marked ([`kernel::marked_codes`];
/// with AVX2 or AVX-512, the bitmap's words gathered at once).
pub(crate) fn marked_codes(t: &[f32], marks: &[u64; MARK_WORDS]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if let Ok(t) = <&[f32; 16]>::try_from(t) {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return unsafe { x86::marked_codes_512(t, marks) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::marked_codes_256(t, marks) };
        }
    }
    kernel::marked_codes(t, marks)
}

/// The loops [`crate::quant::Dequantizer::value_pairs`] runs, the widest
/// copies this CPU has.
pub(crate) fn pair_kernels() -> PairKernels {
    #[cfg(target_arch = "x86_64")]
    if avx2() && std::arch::is_x86_feature_detected!("popcnt") {
        return PairKernels {
            nibble_counts,
            // SAFETY: the CPU has AVX2 and POPCNT, checked just above.
            q4_k: |b, n, v, c, codes| unsafe { x86::q4_k_pairs_256(b, n, v, c, codes) },
        };
    }
    PairKernels {
        nibble_counts,
        q4_k: q4_k_portable,
    }
}

/// [`q4_k_pairs`] with the portable nibble counts.
pub(super) fn q4_k_portable(
    blocks: &[u8],
    next: &[u8],
    vals: &mut [f32],
    counts: &mut [u32],
    codes: &mut [u32; 16],
) {
    q4_k_pairs(
        blocks,
        next,
        vals,
        counts,
        codes,
        kernel::nibble_counts,
        super::prefetch,
    );
}

/// The marked values of tables of 16 one after another (the last may
/// have fewer): `wanted[i]` for table `i`, each table's marks gathered at
/// once by [`marked_codes`].
pub(crate) fn marked_tables(vals: &[f32], marks: &[u64; MARK_WORDS], wanted: &mut [u16]) {
    for (m, t) in wanted.iter_mut().zip(vals.chunks(16)) {
        *m = marked_codes(t, marks);
    }
}
