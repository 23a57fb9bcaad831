//! Where a run's values (and codes) go: written out, or counted ([`Out`]);
//! and the hot loop of every nibble-packed layout, two codes a byte to
//! their values in a group's table ([`nibbles`], [`count_nibbles`]).

use super::counts::Counts;

/// Where a run's values (and codes) go: written out, or counted.
pub(super) struct Out<'b> {
    pub(super) len: usize,
    pub(super) vals: &'b mut [f32],
    pub(super) codes: Option<&'b mut [i32]>,
    /// Counting instead of writing
    /// ([`Dequantizer::count16`](super::Dequantizer::count16)).
    pub(super) count: Option<&'b mut Counts>,
}

impl Out<'_> {
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The values (and codes) of positions `at..at + count` (empty when
    /// counting).
    #[inline]
    pub(super) fn run(&mut self, at: usize, count: usize) -> (&mut [f32], Option<&mut [i32]>) {
        let end = (at + count).min(self.vals.len());
        let at = at.min(end);
        (
            &mut self.vals[at..end],
            self.codes.as_deref_mut().map(|c| &mut c[at..end]),
        )
    }

    /// Element `i` is `v`, of code `c`.
    #[inline]
    pub(super) fn put(&mut self, i: usize, v: f32, c: i32) {
        if let Some(k) = self.count.as_deref_mut() {
            k.add(v, c);
            return;
        }
        if let Some(slot) = self.vals.get_mut(i) {
            *slot = v;
        }
        if let Some(slot) = self.codes.as_deref_mut().and_then(|cs| cs.get_mut(i)) {
            *slot = c;
        }
    }

    /// Element `i` has code `q` of a group whose values are `t` (its code
    /// reported as `q + offset`); when counting, only `q` is counted, and
    /// [`Out::end_group`] adds the group's counts.
    #[inline]
    pub(super) fn coded(&mut self, i: usize, t: &[f32; 16], q: u32, offset: i32) {
        if let Some(k) = self.count.as_deref_mut() {
            if let Some(c) = k.group.get_mut(q as usize) {
                *c += 1;
            }
            return;
        }
        let v = t.get(q as usize).copied().unwrap_or(0.0);
        if let Some(slot) = self.vals.get_mut(i) {
            *slot = v;
        }
        if let Some(slot) = self.codes.as_deref_mut().and_then(|cs| cs.get_mut(i)) {
            *slot = q as i32 + offset;
        }
    }

    /// The end of a group whose codes went through [`Out::coded`].
    #[inline]
    pub(super) fn end_group(&mut self, t: &[f32; 16], offset: i32) {
        if let Some(k) = self.count.as_deref_mut() {
            k.flush(t, offset);
        }
    }
}

/// A run of 4-bit codes packed two per byte from `first` (a code index:
/// byte `first / 2`), low nibble first or high first, to their values in
/// `lut` (codes reported as `q + offset`): the hot loop of every
/// nibble-packed layout. When counting, the codes are counted.
#[expect(
    clippy::too_many_arguments,
    reason = "the bytes and their packing, the group's table, and the run"
)]
#[inline]
pub(super) fn nibbles(
    bytes: &[u8],
    first: u64,
    high_first: bool,
    lut: &[f32; 16],
    offset: i32,
    out: &mut Out<'_>,
    at: usize,
    count: usize,
) {
    let Ok(start) = usize::try_from(first / 2) else {
        return;
    };
    let split = |b: u8| {
        if high_first {
            (b >> 4, b & 15)
        } else {
            (b & 15, b >> 4)
        }
    };
    let odd = first % 2 == 1;
    let lead = usize::from(odd).min(count);
    let pairs = (count - lead) / 2;
    let tail = count - lead - 2 * pairs;
    let first_byte = start + usize::from(odd);
    let src = bytes.get(first_byte..first_byte + pairs).unwrap_or(&[]);
    let edge = |b: usize, second: bool| {
        let (x, y) = split(bytes.get(b).copied().unwrap_or(0));
        u32::from(if second { y } else { x })
    };
    if let Some(k) = out.count.as_deref_mut() {
        count_nibbles(bytes, first, high_first, count, &mut k.group);
        k.flush(lut, offset);
        return;
    }
    if lead == 1 {
        out.coded(at, lut, edge(start, true), offset);
    }
    let (vals, codes) = out.run(at + lead, 2 * src.len());
    match codes {
        Some(codes) => {
            for ((v, c), &b) in vals
                .chunks_exact_mut(2)
                .zip(codes.chunks_exact_mut(2))
                .zip(src)
            {
                let (x, y) = split(b);
                v[0] = lut[usize::from(x)];
                v[1] = lut[usize::from(y)];
                c[0] = i32::from(x) + offset;
                c[1] = i32::from(y) + offset;
            }
        }
        None => {
            for (v, &b) in vals.chunks_exact_mut(2).zip(src) {
                let (x, y) = split(b);
                v[0] = lut[usize::from(x)];
                v[1] = lut[usize::from(y)];
            }
        }
    }
    if tail == 1 {
        out.coded(
            at + lead + 2 * pairs,
            lut,
            edge(first_byte + pairs, false),
            offset,
        );
    }
}

/// Counts `count` 4-bit codes packed two per byte from code index `first`
/// into `into`.
#[inline]
pub(super) fn count_nibbles(
    bytes: &[u8],
    first: u64,
    high_first: bool,
    count: usize,
    into: &mut [u64; 16],
) {
    let Ok(start) = usize::try_from(first / 2) else {
        return;
    };
    let split = |b: u8| {
        if high_first {
            (b >> 4, b & 15)
        } else {
            (b & 15, b >> 4)
        }
    };
    let odd = first % 2 == 1;
    let lead = usize::from(odd).min(count);
    let pairs = (count - lead) / 2;
    let first_byte = start + usize::from(odd);
    let mut twin = [[0u32; 16]; 2];
    if lead == 1 {
        twin[0][usize::from(split(bytes.get(start).copied().unwrap_or(0)).1)] += 1;
    }
    for &b in bytes.get(first_byte..first_byte + pairs).unwrap_or(&[]) {
        let (x, y) = split(b);
        twin[0][usize::from(x)] += 1;
        twin[1][usize::from(y)] += 1;
    }
    if count - lead - 2 * pairs == 1 {
        twin[1][usize::from(split(bytes.get(first_byte + pairs).copied().unwrap_or(0)).0)] += 1;
    }
    for (g, (a, b)) in into.iter_mut().zip(twin[0].iter().zip(&twin[1])) {
        *g += u64::from(*a) + u64::from(*b);
    }
}
