//! A group's code values computed once: the 16 values of a group's codes
//! of at most 4 bits ([`table`]), and with act-order, whose groups come in
//! any order, every group's table kept ([`Luts`]).

/// The values of every code of a group, computed once per group instead of
/// once per element (codes of at most 4 bits: 16 values per group of 32 or
/// more elements). With act-order the groups of a run come in any order, so
/// every group's table is kept; otherwise only the current one.
pub(super) struct Luts {
    width: usize,
    table: Vec<f32>,
    filled: Vec<bool>,
    current: u64,
    every: bool,
}

impl Luts {
    /// Tables for codes of `bits`, or `None` above 4 bits (computing each
    /// value is then cheaper than a table).
    #[inline]
    pub(super) fn new(bits: u32, groups: u64, every: bool) -> Option<Self> {
        if bits > 4 {
            return None;
        }
        let width = 1usize << bits;
        let slots = if every {
            usize::try_from(groups).ok()?.min(1 << 16)
        } else {
            1
        };
        Some(Self {
            width,
            table: vec![0.0; slots * width],
            filled: vec![false; slots],
            current: u64::MAX,
            every,
        })
    }

    /// The value of code `q` in group `g`; `fill(q)` computes a value the
    /// first time group `g` is met.
    pub(super) fn value(&mut self, g: u64, q: u32, fill: impl Fn(u32) -> f32) -> f32 {
        let slot = if self.every {
            usize::try_from(g).unwrap_or(usize::MAX)
        } else {
            0
        };
        let fresh = if self.every {
            !self.filled.get(slot).copied().unwrap_or(true)
        } else {
            self.current != g
        };
        if fresh {
            self.current = g;
            if let Some(f) = self.filled.get_mut(slot) {
                *f = true;
            }
            if let Some(t) = self
                .table
                .get_mut(slot * self.width..(slot + 1) * self.width)
            {
                for (c, v) in t.iter_mut().enumerate() {
                    *v = fill(c as u32);
                }
            } else {
                return fill(q);
            }
        }
        self.table
            .get(slot * self.width + q as usize)
            .copied()
            .unwrap_or_else(|| fill(q))
    }
}

/// The 16 values of a group's codes, when codes have at most 4 bits.
pub(super) fn table(bits: u32, value: impl Fn(u32) -> f32) -> Option<[f32; 16]> {
    (bits <= 4).then(|| {
        let mut t = [0f32; 16];
        for (q, v) in t.iter_mut().enumerate().take(1 << bits) {
            *v = value(q as u32);
        }
        t
    })
}
