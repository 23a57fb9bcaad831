//! GGUF's table types as `(value, count)` pairs: a run of codes under one
//! scale (a Q4_K sub-block of 32, a Q4_0 block) stands for at most 16
//! values, which the decoder computes once; the run's codes are counted,
//! and each value goes on with how many elements hold it. The statistics
//! then handle a value once per run instead of once per element, with the
//! same bits as the decoded elements (the values are those
//! [`dequant::decode`] computes).

use super::{Clip, code_of};
use crate::format::gguf::dequant::{self, Sink};
use crate::quant::Dequantizer;

/// Pairs per batch handed on (at most).
pub const PAIR_BATCH: usize = 1024;

/// The types whose every element goes through a table of at most 16
/// values: Q4_0, Q4_1, Q2_K, Q4_K, IQ4_NL, IQ4_XS, TQ2_0, MXFP4, NVFP4.
const PAIRED: [u32; 9] = [2, 3, 10, 12, 20, 23, 35, 39, 40];

/// Which values of runs' tables a caller wants: given tables one after
/// another, 16 values each (the last may have fewer), it sets bit `q` of
/// `masks[i]` when it wants value `q` of table `i` (`u16::MAX` for all).
/// Runs of no wanted code are not counted. Many tables at once, so that
/// the caller's set-up is paid once for them.
pub type Keep<'a> = &'a dyn Fn(&[f32], &mut [u16]);

/// How many of a stretch of bytes hold each low nibble, and each high
/// nibble (the caller's fastest way to count them).
pub type NibbleCounts = fn(&[u8]) -> ([u32; 16], [u32; 16]);

/// Q4_K's id, and its blocks' elements, bytes and pairs.
const Q4_K: u32 = 12;
const Q4_K_ELEMENTS: usize = 256;
const Q4_K_BYTES: usize = 144;
/// Pairs of a Q4_K block: eight tables of 16.
const Q4_K_PAIRS: usize = 128;

/// The pairs of whole Q4_K blocks: 128 a block (eight tables of 16), value `q` of
/// its sub-block `j` at `16 j + q` with its count (the caller's fastest
/// way, [`q4_k_pairs`] compiled for its vectors), the elements of each
/// code added to the last argument. The second slice is the bytes read
/// next, which the caller may ask the memory for meanwhile.
pub type BlockPairs = fn(&[u8], &[u8], &mut [f32], &mut [u32], &mut [u32; 16]);

/// How the caller counts: the loops [`Dequantizer::value_pairs`] runs,
/// each compiled for the widest vectors the caller has.
#[derive(Clone, Copy)]
pub struct PairKernels {
    /// A run of 4-bit codes counted.
    pub nibble_counts: NibbleCounts,
    /// Whole Q4_K blocks into pairs (the most common block type, in one
    /// loop with no call per run).
    pub q4_k: BlockPairs,
}

/// The pairs of the whole Q4_K blocks `blocks` into `vals` and `counts`
/// (128 a block; as many blocks as all three hold), the codes
/// of a sub-block pair's 32 bytes counted by `nibble_counts` and added to
/// `codes` (code `q` at `q`; at most 2^32 − 1 elements); `ahead` is
/// handed a cache line of `next` a block (the lines read after these).
/// Inlined, so that a caller compiled for wider vectors compiles it with
/// them.
#[allow(clippy::inline_always)]
#[inline(always)]
pub fn q4_k_pairs(
    blocks: &[u8],
    next: &[u8],
    vals: &mut [f32],
    counts: &mut [u32],
    codes: &mut [u32; 16],
    nibble_counts: impl Fn(&[u8]) -> ([u32; 16], [u32; 16]),
    ahead: impl Fn(&[u8]),
) {
    let (vs, _) = vals.as_chunks_mut::<Q4_K_PAIRS>();
    let (cs, _) = counts.as_chunks_mut::<Q4_K_PAIRS>();
    let (bs, _) = blocks.as_chunks::<Q4_K_BYTES>();
    let mut lines = next.chunks(64);
    for ((b, v), c) in bs.iter().zip(vs).zip(cs) {
        for _ in 0..3 {
            if let Some(line) = lines.next() {
                ahead(line);
            }
        }
        v.copy_from_slice(dequant::q4_k_tables(b).as_flattened());
        for (i, qs) in b[16..].chunks_exact(32).enumerate() {
            let (lo, hi) = nibble_counts(qs);
            c[32 * i..32 * i + 16].copy_from_slice(&lo);
            c[32 * i + 16..32 * i + 32].copy_from_slice(&hi);
            for q in 0..16 {
                codes[q] += lo[q] + hi[q];
            }
        }
    }
}

/// The pairs of the runs a decoder hands on, inside the window.
struct Pairs<'k, 'f, 'c> {
    clip: Clip,
    keep: Option<Keep<'k>>,
    /// Elements per code less `low`, counted when there is no `keep`.
    codes: Option<&'c mut [u64]>,
    low: i32,
    nibble_counts: NibbleCounts,
    vals: [f32; PAIR_BATCH + 16],
    counts: [u32; PAIR_BATCH + 16],
    len: usize,
    emit: &'f mut dyn FnMut(&[f32], &[u32]),
}

impl Pairs<'_, '_, '_> {
    fn flush(&mut self) {
        if self.len > 0 {
            (self.emit)(&self.vals[..self.len], &self.counts[..self.len]);
            self.len = 0;
        }
    }

    /// Room for `n` (at most 16) more pairs.
    #[inline]
    fn room(&mut self, n: usize) {
        if self.len + n > PAIR_BATCH {
            self.flush();
        }
    }

    /// Adds a table's counts to the codes' (code `q + offset` for value
    /// `q`).
    #[inline]
    fn add_codes(&mut self, counts: &[u32], offset: i32) {
        let Some(codes) = self.codes.as_deref_mut() else {
            return;
        };
        let first = i64::from(offset) - i64::from(self.low);
        for (q, &c) in counts.iter().enumerate() {
            if let Some(slot) = usize::try_from(first + q as i64)
                .ok()
                .and_then(|i| codes.get_mut(i))
            {
                *slot += u64::from(c);
            }
        }
    }

    #[inline]
    fn push(&mut self, v: f32, c: u32) {
        if let (Some(x), Some(n)) = (self.vals.get_mut(self.len), self.counts.get_mut(self.len)) {
            (*x, *n) = (v, c);
            self.len += 1;
        }
    }

    /// Whole Q4_K blocks, the pairs filled by `fill` straight into the
    /// batch (every value: no `keep`), a batch at a time.
    fn q4_k_whole(&mut self, blocks: &[u8], fill: BlockPairs) {
        self.flush();
        let step = PAIR_BATCH / Q4_K_PAIRS * Q4_K_BYTES;
        for (i, batch) in blocks.chunks(step).enumerate() {
            let pairs = batch.len() / Q4_K_BYTES * Q4_K_PAIRS;
            let next = blocks.get((i + 1) * step..).unwrap_or(&[]);
            let next = next.get(..step).unwrap_or(next);
            if let (Some(v), Some(c)) = (self.vals.get_mut(..pairs), self.counts.get_mut(..pairs)) {
                // Value `q` of each table is code `q`.
                let mut by_code = [0u32; 16];
                fill(batch, next, v, c, &mut by_code);
                self.add_codes(&by_code, 0);
                self.len = pairs;
                self.flush();
            }
            self.clip.pos += batch.len() / Q4_K_BYTES * Q4_K_ELEMENTS;
        }
    }

    /// Whole Q4_K blocks with `keep`: a block's eight tables asked about
    /// at once, and only the sub-blocks that hold a wanted value counted.
    fn q4_k_kept(&mut self, blocks: &[u8], keep: Keep<'_>) {
        let (bs, _) = blocks.as_chunks::<Q4_K_BYTES>();
        for b in bs {
            let t = dequant::q4_k_tables(b);
            let mut masks = [0u16; 8];
            keep(t.as_flattened(), &mut masks);
            for (i, qs) in b[16..].chunks_exact(32).enumerate() {
                self.push_nibbles(
                    (&t[2 * i], masks[2 * i]),
                    (&t[2 * i + 1], masks[2 * i + 1]),
                    qs,
                );
            }
            self.clip.pos += Q4_K_ELEMENTS;
        }
    }

    /// The two runs of 4-bit codes of `bytes` (low nibbles through the
    /// first table, high through the second), each with the mask of its
    /// wanted values: counted only when one of them is wanted.
    #[inline]
    fn push_nibbles(
        &mut self,
        (low, wl): (&[f32; 16], u16),
        (high, wh): (&[f32; 16], u16),
        bytes: &[u8],
    ) {
        if wl | wh == 0 {
            return;
        }
        let (cl, ch) = (self.nibble_counts)(bytes);
        self.add_codes(&cl, 0);
        self.add_codes(&ch, 0);
        self.push_table(low, &cl, wl);
        self.push_table(high, &ch, wh);
    }

    #[inline]
    fn wanted(&self, t: &[f32]) -> u16 {
        let mut mask = [u16::MAX];
        if let Some(k) = self.keep {
            k(t, &mut mask);
        }
        mask[0]
    }

    /// The wanted values of a table with their counts.
    #[inline]
    fn push_table(&mut self, t: &[f32], counts: &[u32; 16], want: u16) {
        self.room(t.len());
        if want == u16::MAX {
            let n = t.len().min(16);
            let at = self.len;
            if let (Some(v), Some(c)) = (
                self.vals.get_mut(at..at + n),
                self.counts.get_mut(at..at + n),
            ) {
                v.copy_from_slice(&t[..n]);
                c.copy_from_slice(&counts[..n]);
                self.len += n;
            }
            return;
        }
        for (q, (&v, &c)) in t.iter().zip(counts).enumerate() {
            if want >> q & 1 != 0 {
                self.push(v, c);
            }
        }
    }
}

impl Sink for Pairs<'_, '_, '_> {
    #[inline]
    fn one(&mut self, v: f32, code: i32) {
        if self.clip.next(1).is_some() {
            self.room(1);
            self.push(v, 1);
            self.add_codes(&[1], code);
        }
    }

    #[inline]
    fn table(&mut self, t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, offset: i32) {
        let Some((from, _, count)) = self.clip.next(bytes.len()) else {
            return;
        };
        let t = &t[..=usize::from(mask & 15)];
        let want = self.wanted(t);
        if want == 0 {
            return;
        }
        let mut counts = [0u32; 16];
        for &b in &bytes[from..from + count] {
            counts[code_of(b, shift, mask)] += 1;
        }
        self.add_codes(&counts[..t.len()], offset);
        self.push_table(t, &counts, want);
    }

    #[inline]
    fn nibbles(&mut self, low: &[f32; 16], high: &[f32; 16], bytes: &[u8]) {
        let n = bytes.len();
        let whole = self.clip.pos >= self.clip.skip && self.clip.pos + 2 * n <= self.clip.end;
        if !whole {
            self.table(low, bytes, 0, 0x0F, 0);
            self.table(high, bytes, 4, 0x0F, 0);
            return;
        }
        self.clip.pos += 2 * n;
        let (wl, wh) = (self.wanted(low), self.wanted(high));
        self.push_nibbles((low, wl), (high, wh), bytes);
    }
}

impl Dequantizer<'_> {
    /// Whether [`Dequantizer::value_pairs`] gives this tensor's values.
    pub fn has_value_pairs(&self) -> bool {
        self.gguf_layout()
            .is_some_and(|(_, ty, _)| PAIRED.contains(&ty.id()))
    }

    /// The values of elements `first..first + len` as `(value, count)`
    /// pairs, handed to `emit` a batch of at most [`PAIR_BATCH`] at a time
    /// (in no particular order; a pair's count may be 0). With `keep`,
    /// only the values it picks of each run's table (the others' elements
    /// are not counted). Runs of 4-bit codes are counted by `kernels`.
    /// Without `keep`, the elements' codes are added to `codes` too (by
    /// code less [`Dequantizer::code_range`]'s low end), in the same loop.
    /// False, with nothing handed on, unless
    /// [`Dequantizer::has_value_pairs`].
    pub fn value_pairs(
        &self,
        first: u64,
        len: u64,
        keep: Option<Keep<'_>>,
        kernels: &PairKernels,
        codes: Option<&mut [u64]>,
        emit: &mut dyn FnMut(&[f32], &[u32]),
    ) -> bool {
        if !self.has_value_pairs() {
            return false;
        }
        let len = len.min(self.len.saturating_sub(first));
        let Some((bytes, ty, skip)) = self.gguf_blocks(first, len) else {
            // A file that changed underneath reads short: zeros, which the
            // caller discards (`Checkpoint::check_unchanged`).
            let mut left = len;
            while left > 0 {
                let n = left.min(1 << 20);
                emit(&[0.0], &[n as u32]);
                left -= n;
            }
            return true;
        };
        let mut sink = Pairs {
            clip: Clip {
                pos: 0,
                skip,
                end: skip + len as usize,
            },
            keep,
            codes: codes.filter(|_| keep.is_none()),
            low: self.gguf_code_range().map_or(0, |(low, _)| low),
            nibble_counts: kernels.nibble_counts,
            vals: [0.0; PAIR_BATCH + 16],
            counts: [0; PAIR_BATCH + 16],
            len: 0,
            emit,
        };
        // Whole blocks: the decoder cannot fail on them.
        if ty.id() == Q4_K {
            // The blocks the run holds whole in one loop; a block it cuts,
            // at either end, through the decoder.
            let (from, to) = (
                skip.div_ceil(Q4_K_ELEMENTS),
                (skip + len as usize) / Q4_K_ELEMENTS,
            );
            if from < to {
                let (head, rest) = bytes.split_at(from * Q4_K_BYTES);
                let (whole, tail) = rest.split_at((to - from) * Q4_K_BYTES);
                let _ = dequant::decode(ty, head, &mut sink);
                match keep {
                    None => sink.q4_k_whole(whole, kernels.q4_k),
                    Some(keep) => sink.q4_k_kept(whole, keep),
                }
                let _ = dequant::decode(ty, tail, &mut sink);
                sink.flush();
                return true;
            }
        }
        let _ = dequant::decode(ty, bytes, &mut sink);
        sink.flush();
        true
    }
}
