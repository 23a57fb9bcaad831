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
//! (`tests/`) check that. The copies themselves are in `x86/`.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
mod x86;

mod pairs;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use pairs::{marked_codes, nibble_counts};
pub(crate) use pairs::{marked_tables, pair_kernels, pairs_block, pairs_block_counting};

use super::bins::FloatBins;
use super::kernel::{self, F32Guess, F32Lanes, Lane, Specials, Wide};
use super::moments::Moments;

/// The vector instruction sets this CPU gives the statistics kernels, as
/// chosen at run time (`--version` prints them): the widest first, or
/// `portable` when none is there (or off x86-64).
pub fn chosen_sets() -> Vec<&'static str> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            out.push("AVX-512 (F, BW, DQ, VL)");
        }
        if avx2() {
            out.push("AVX2");
        }
        if std::arch::is_x86_feature_detected!("f16c") {
            out.push("F16C");
        }
    }
    if out.is_empty() {
        out.push("portable");
    }
    out
}

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
