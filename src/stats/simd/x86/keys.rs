//! The key buffers of the fused loops, which make the keys of 64 values
//! while the scalar adds of the 64 before count them: which buffer to fill,
//! the adds into the tallies, what the loops leave, and the next block
//! asked for a line at a time.

use super::LOW32;
use crate::stats::kernel;
use crate::stats::simd::prefetch;

/// Asks for the next four lines (64 f32 values) of `lines`.
#[inline]
pub(super) fn prefetch_lines(lines: &mut std::slice::Chunks<'_, u8>) {
    for _ in 0..4 {
        if let Some(line) = lines.next() {
            prefetch(line);
        }
    }
}

/// The key buffers of group `i` of the fused loops: the one to fill,
/// and the one filled by group `i − 1`.
#[inline]
pub(super) fn turn(keys: &mut [[u32; 64]; 2], i: usize) -> (&mut [u32; 64], &[u32; 64]) {
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
pub(super) fn add_keys(keys: &[u32; 64], tally: &mut kernel::Tally<'_>) {
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
pub(super) fn count_rest(
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
