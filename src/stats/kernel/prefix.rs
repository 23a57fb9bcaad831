//! Key-prefix counting and the filter of marked prefixes: the two hot
//! loops of the exact float scan (`float/exact.rs`).
//!
//! A key is the order-preserving integer of a float (`FloatLane::key`);
//! its top [`PREFIX_BITS`] bits name a bucket. For f32 that is the sign,
//! the exponent and the top 11 mantissa bits, so a bucket spans a relative
//! width of at most 2^−11 and a 256-bin histogram of weights has one
//! bucket in a hundred holding a bin edge.

/// Bits of a key prefix.
pub(crate) const PREFIX_BITS: u32 = 20;
/// Buckets of keys (one counter each).
pub(crate) const BUCKETS: usize = 1 << PREFIX_BITS;
/// Words of a bitmap with one bit per bucket.
pub(crate) const MARK_WORDS: usize = BUCKETS / 64;

/// Low bits of an f32 key below its prefix.
const LOW32: u32 = 32 - PREFIX_BITS;

/// The order-preserving key of f32 bits: every bit of negatives flipped,
/// the sign bit of the others.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn key32(bits: u32) -> u32 {
    bits ^ ((((bits as i32) >> 31) as u32) | 0x8000_0000)
}

/// Counts the key prefixes of little-endian f32 values. Wrapping adds:
/// the caller keeps every counter below 2^32.
// Inlined into the vector copies of [`crate::stats::simd`], which compile it
// once more for their targets.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn count_prefixes_f32(bytes: &[u8], table: &mut [u32; BUCKETS]) {
    let (vals, _) = bytes.as_chunks::<4>();
    // The keys of a whole part first (a loop the compiler vectorises), then
    // the adds: a part long enough that the vector stores of its keys have
    // left the store buffer before the adds load them one by one (a load
    // from a store still in flight would stall on its forwarding).
    let mut idx = [0u32; 1024];
    for part in vals.chunks(1024) {
        for (o, c) in idx.iter_mut().zip(part) {
            *o = key32(u32::from_le_bytes(*c)) >> LOW32;
        }
        for &i in idx.iter().take(part.len()) {
            let c = &mut table[i as usize & (BUCKETS - 1)];
            *c = c.wrapping_add(1);
        }
    }
}

/// Counts the prefixes of keys of `key_bits` significant bits.
pub(crate) fn count_prefixes_keys(keys: &[u64], key_bits: u32, table: &mut [u32; BUCKETS]) {
    let shift = key_bits.saturating_sub(PREFIX_BITS);
    for &k in keys {
        let c = &mut table[(k >> shift) as usize & (BUCKETS - 1)];
        *c = c.wrapping_add(1);
    }
}

/// Whether bucket `p` is marked.
#[allow(clippy::inline_always)]
#[inline(always)]
fn marked(marks: &[u64; MARK_WORDS], p: u32) -> bool {
    (marks[(p >> 6) as usize & (MARK_WORDS - 1)] >> (p & 63)) & 1 != 0
}

/// Calls `hit` with the key of each little-endian f32 value whose bucket
/// is marked, in order. Marked buckets are few: a group of sixteen is
/// tested at once, and looked at value by value only when it holds one.
#[allow(clippy::inline_always)]
#[inline(always)]
pub(crate) fn for_each_marked_f32(
    bytes: &[u8],
    marks: &[u64; MARK_WORDS],
    hit: &mut dyn FnMut(u64),
) {
    let (vals, _) = bytes.as_chunks::<4>();
    for part in vals.chunks(16) {
        let mut any = 0u64;
        for c in part {
            let p = key32(u32::from_le_bytes(*c)) >> LOW32;
            any |= marks[(p >> 6) as usize & (MARK_WORDS - 1)] >> (p & 63);
        }
        if any & 1 != 0 {
            for c in part {
                let k = key32(u32::from_le_bytes(*c));
                if marked(marks, k >> LOW32) {
                    hit(u64::from(k));
                }
            }
        }
    }
}

/// [`for_each_marked_f32`] of keys of `key_bits` significant bits.
pub(crate) fn for_each_marked_key(
    keys: &[u64],
    key_bits: u32,
    marks: &[u64; MARK_WORDS],
    hit: &mut dyn FnMut(u64),
) {
    let shift = key_bits.saturating_sub(PREFIX_BITS);
    for &k in keys {
        if marked(marks, (k >> shift) as u32) {
            hit(k);
        }
    }
}
