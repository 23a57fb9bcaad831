//! The loops over `(value, count)` pairs ([`kernel::pairs_block`] and
//! the rest of `kernel/weighted.rs`), with the widest copy this CPU has.

use super::super::kernel::{self, MARK_WORDS, Specials};
use super::super::moments::Moments;
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512, x86};

/// Specials, range and moments of the elements a batch of pairs stands for
/// ([`kernel::pairs_block`]).
pub(crate) fn pairs_block(vals: &[f32], counts: &[u32], tiny_bits: u32) -> (Specials, Moments) {
    kernel::pairs_block(vals, counts, tiny_bits, pair_scan())
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

/// Counts the key prefixes of a batch of pairs, each by its count
/// ([`kernel::count_pair_prefixes`]).
pub(crate) fn count_pair_prefixes(
    vals: &[f32],
    counts: &[u32],
    idx: &mut [u32],
    table: &mut kernel::Tally<'_>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has these AVX-512 subsets, checked just above.
            return unsafe { x86::count_pair_prefixes_512(vals, counts, idx, table) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { x86::count_pair_prefixes_256(vals, counts, idx, table) };
        }
    }
    kernel::count_pair_prefixes(vals, counts, idx, table);
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
