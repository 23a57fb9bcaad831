//! Counting codes: bytes (8-bit dtypes), u16 codes (16-bit dtypes),
//! packed six-bit codes, and keys falling in a few intervals (the
//! quantile refinement).

use crate::dtype::decode::BitOrder;

/// Counts byte values into four interleaved tables.
pub(crate) fn count_bytes(bytes: &[u8], tables: &mut [[u32; 256]; 4]) {
    let (chunks, rest) = bytes.as_chunks::<4>();
    for c in chunks {
        for (t, &b) in tables.iter_mut().zip(c) {
            t[usize::from(b)] += 1;
        }
    }
    for &b in rest {
        tables[0][usize::from(b)] += 1;
    }
}

/// Counts little-endian u16 codes into one table of 65536 counters.
pub(crate) fn count_u16(bytes: &[u8], table: &mut [u32]) {
    let (codes, _) = bytes.as_chunks::<2>();
    if table.len() < 1 << 16 {
        return;
    }
    for c in codes {
        if let Some(slot) = table.get_mut(usize::from(u16::from_le_bytes(*c))) {
            *slot += 1;
        }
    }
}

/// Counts packed six-bit codes, four per three bytes, into four tables of 64.
/// `order` is the bit stream's, as in [`crate::dtype::decode::code_at`].
/// Trailing bytes that do not make a whole group are left to the caller.
pub(crate) fn count_f6(bytes: &[u8], order: BitOrder, tables: &mut [[u32; 64]; 4]) {
    let (groups, _) = bytes.as_chunks::<3>();
    for &[b0, b1, b2] in groups {
        let (b0, b1, b2) = (u32::from(b0), u32::from(b1), u32::from(b2));
        let codes = match order {
            BitOrder::MsbFirst => {
                let w = (b0 << 16) | (b1 << 8) | b2;
                [w >> 18, w >> 12, w >> 6, w]
            }
            BitOrder::LsbFirst => {
                let w = b0 | (b1 << 8) | (b2 << 16);
                [w, w >> 6, w >> 12, w >> 18]
            }
        };
        for (t, c) in tables.iter_mut().zip(codes) {
            t[(c & 63) as usize] += 1;
        }
    }
}

/// Counts how many of `keys` fall in each of a few inclusive intervals
/// `[lo, lo + span]`: `sink(interval, key)` is called for each hit.
#[inline]
pub(crate) fn for_each_hit(
    keys: &[u64],
    intervals: &[(u64, u64)],
    mut sink: impl FnMut(usize, u64),
) {
    for &k in keys {
        for (i, &(lo, span)) in intervals.iter().enumerate() {
            if k.wrapping_sub(lo) <= span {
                sink(i, k);
            }
        }
    }
}
