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

/// Which values of a run's table a caller wants: bit `q` for code `q`
/// (`u16::MAX` for all). Runs of no wanted code are not counted.
pub type Keep<'a> = &'a dyn Fn(&[f32]) -> u16;

/// How many of a stretch of bytes hold each low nibble, and each high
/// nibble (the caller's fastest way to count them).
pub type NibbleCounts = fn(&[u8]) -> ([u32; 16], [u32; 16]);

/// The pairs of the runs a decoder hands on, inside the window.
struct Pairs<'k, 'f> {
    clip: Clip,
    keep: Option<Keep<'k>>,
    nibble_counts: NibbleCounts,
    vals: [f32; PAIR_BATCH + 16],
    counts: [u32; PAIR_BATCH + 16],
    len: usize,
    emit: &'f mut dyn FnMut(&[f32], &[u32]),
}

impl Pairs<'_, '_> {
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

    #[inline]
    fn push(&mut self, v: f32, c: u32) {
        if let (Some(x), Some(n)) = (self.vals.get_mut(self.len), self.counts.get_mut(self.len)) {
            (*x, *n) = (v, c);
            self.len += 1;
        }
    }

    #[inline]
    fn wanted(&self, t: &[f32]) -> u16 {
        self.keep.map_or(u16::MAX, |k| k(t))
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

impl Sink for Pairs<'_, '_> {
    #[inline]
    fn one(&mut self, v: f32, _code: i32) {
        if self.clip.next(1).is_some() {
            self.room(1);
            self.push(v, 1);
        }
    }

    #[inline]
    fn table(&mut self, t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, _offset: i32) {
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
        if wl | wh == 0 {
            return;
        }
        let (cl, ch) = (self.nibble_counts)(bytes);
        self.push_table(low, &cl, wl);
        self.push_table(high, &ch, wh);
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
    /// are not counted). Runs of 4-bit codes are counted by
    /// `nibble_counts`. False, with nothing handed on, unless
    /// [`Dequantizer::has_value_pairs`].
    pub fn value_pairs(
        &self,
        first: u64,
        len: u64,
        keep: Option<Keep<'_>>,
        nibble_counts: NibbleCounts,
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
            nibble_counts,
            vals: [0.0; PAIR_BATCH + 16],
            counts: [0; PAIR_BATCH + 16],
            len: 0,
            emit,
        };
        // Whole blocks: the decoder cannot fail on them.
        let _ = dequant::decode(ty, bytes, &mut sink);
        sink.flush();
        true
    }
}
