//! F32, F64 and C64 tensors: views that decode blocks of values straight
//! from the mapped bytes, and the passes over them.
//!
//! Pass 1 counts NaN, ±Inf, zeros and subnormals, finds the finite range
//! and accumulates the moments (and, for [`Detail::Full`](super::Detail),
//! counts exponent fields for the log2 histogram). Pass 2 fills the linear
//! histogram, whose range pass 1 found. Exact quantiles then take the
//! refinement passes of [`super::refine`].
//!
//! The views and the value types they decode into are in `views`.

use std::ops::Range;

mod views;

pub(crate) use views::{C64Abs, C64Part, F32View, F64View, FloatLane, HalfView, View};

use super::bins::{FloatBins, QUANTILES};
use super::kernel::{self, Wide};
use super::kernel::{BLOCK, Lane, Specials, exponents_f32};
use super::moments::Moments;
use super::refine::{KeySource, Target, bins_of_quantiles, refine};
use super::simd::{block_wide, histogram_block, histogram_f32};
use super::{
    CHUNK_BYTES, Histogram, QuantileMode, Quantiles, Scalar, StatsOptions, ValueStats,
    empty_histogram, log2_histogram, par_chunks,
};
use crate::jobs::{CancelToken, Cancelled, Progress};
/// The magnitude bits of f32 values below `smallest_normal` (and not zero)
/// are those below this.
fn tiny_bits(smallest_normal: f64) -> u32 {
    (smallest_normal as f32).to_bits()
}

/// Decodes the elements `range` of a view block by block.
fn for_each_block<V: View>(view: &V, range: Range<u64>, f: impl FnMut(&[V::T])) {
    kernel::for_each_block(range, |first, out| view.decode(first, out), f);
}

/// What pass 1 gathers over a chunk: counts, range, moments, and (full
/// detail) exponent counts and key prefixes for the quantiles.
struct Pass1 {
    specials: Specials,
    moments: Moments,
    /// Exponent-field counts (f64 lanes).
    exponents: Vec<u64>,
    /// Counts per 16-bit key prefix (f32 lanes): sign, exponent and the
    /// top 7 mantissa bits, as bf16 would round down.
    prefixes: Vec<u64>,
}

/// Members (low 16 key bits) of the prefix buckets that hold a quantile,
/// gathered in pass 2 when they fit [`PREFIX_BUDGET`].
const PREFIX_BUDGET: u64 = 1 << 22;

/// Where a quantile's rank falls among the prefix buckets of f32 keys.
#[derive(Debug, Clone, Copy)]
struct PrefixTarget {
    prefix: u16,
    rank: u64,
    count: u64,
}

/// Exponent field of the f32 values whose keys start with `prefix`.
fn prefix_field(prefix: u16) -> usize {
    let high = if prefix & 0x8000 == 0 {
        !prefix
    } else {
        prefix
    };
    usize::from((high >> 7) & 0xff)
}

/// For each quantile, the prefix bucket (in value order) holding its rank.
fn prefix_targets(prefixes: &[u64], finite: u64) -> [Option<PrefixTarget>; 9] {
    let mut out = [None; 9];
    for (slot, &(_, permille)) in out.iter_mut().zip(&QUANTILES) {
        let Some(rank) = super::bins::nearest_rank(permille, finite) else {
            continue;
        };
        let mut below = 0u64;
        for (p, &c) in prefixes.iter().enumerate() {
            let prefix = p as u16;
            if c == 0 || prefix_field(prefix) == 255 {
                continue;
            }
            if rank <= below + c {
                *slot = Some(PrefixTarget {
                    prefix,
                    rank: rank - below,
                    count: c,
                });
                break;
            }
            below += c;
        }
    }
    out
}

/// Statistics of a float view.
#[expect(
    clippy::too_many_lines,
    reason = "the passes of one scan share their state; split, each part would take a dozen arguments"
)]
pub(crate) fn stats<V: View>(
    view: &V,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ValueStats, Cancelled> {
    let n = view.len();
    let chunk = (CHUNK_BYTES / view.element_bytes()).max(1);
    let full = options.full();
    // f32 lanes count 16-bit key prefixes instead of exponent fields: the
    // log2 histogram follows from them, and so does the bucket of every
    // quantile, whose members pass 2 then gathers: exact quantiles in two
    // passes.
    let by_prefix = full && V::T::KEY_BITS == 32 && options.quantiles == QuantileMode::Exact;
    let fields = if full { V::T::MAX_FIELD + 1 } else { 0 };
    let prefix_len = if by_prefix { 1 << 16 } else { 0 };
    let p1 = par_chunks(
        n,
        chunk,
        cancel,
        || Pass1 {
            specials: Specials::default(),
            moments: Moments::default(),
            exponents: vec![0; if by_prefix { 0 } else { fields }],
            prefixes: vec![0; prefix_len],
        },
        |acc, range| {
            let bytes = (range.end - range.start) * view.element_bytes();
            let mut table = vec![
                0u32;
                if full && !by_prefix {
                    V::T::EXPONENT_TABLE
                } else {
                    0
                }
            ];
            let mut prefixes = vec![0u32; prefix_len];
            if let Some((kind, raw)) = view.raw(range.clone()) {
                let tiny = tiny_bits(view.smallest_normal());
                for block in raw.chunks(kind.width() * BLOCK) {
                    let (sp, m) = block_wide(kind, block, tiny);
                    acc.specials.merge(&sp);
                    acc.moments.merge(&m);
                    // Only F32 views run pass 1 with histograms.
                    if kind == Wide::F32 && by_prefix {
                        let values = block.as_chunks::<4>().0.iter();
                        count_prefixes(values.map(|c| f32::from_le_bytes(*c).key()), &mut prefixes);
                    } else if kind == Wide::F32 && full {
                        exponents_f32(block, &mut table);
                    }
                }
            } else {
                for_each_block(view, range, |vals| {
                    let (sp, m) = V::T::summarize(vals, view.smallest_normal());
                    acc.specials.merge(&sp);
                    acc.moments.merge(&m);
                    if by_prefix {
                        count_prefixes(vals.iter().map(|x| x.key()), &mut prefixes);
                    } else if full {
                        V::T::count_exponents(vals, &mut table);
                    }
                });
            }
            V::T::fold_exponents(&table, &mut acc.exponents);
            for (x, &c) in acc.prefixes.iter_mut().zip(&prefixes) {
                *x += u64::from(c);
            }
            progress.add(bytes);
        },
        |mut a, b| {
            a.specials.merge(&b.specials);
            a.moments.merge(&b.moments);
            for (x, y) in a.exponents.iter_mut().zip(&b.exponents) {
                *x += y;
            }
            for (x, y) in a.prefixes.iter_mut().zip(&b.prefixes) {
                *x += y;
            }
            a
        },
    )?;
    let sp = p1.specials;
    let finite_count = n - sp.nan - sp.pos_inf - sp.neg_inf;
    let has_values = finite_count > 0;
    let mut stats = ValueStats {
        finite: finite_count,
        nan: sp.nan,
        pos_inf: sp.pos_inf,
        neg_inf: sp.neg_inf,
        zeros: sp.zeros,
        subnormals: sp.subnormals,
        min: has_values.then(|| Scalar::float(sp.min)),
        max: has_values.then(|| Scalar::float(sp.max)),
        ..ValueStats::from_moments(n, &p1.moments)
    };
    if !full {
        return Ok(stats);
    }
    let mut exponent_counts = p1.exponents;
    if by_prefix {
        exponent_counts = vec![0; fields];
        for (p, &c) in p1.prefixes.iter().enumerate() {
            if let Some(slot) = exponent_counts.get_mut(prefix_field(p as u16)) {
                *slot += c;
            }
        }
    }
    let tiny = view.smallest_normal();
    let exponents = exponent_counts
        .iter()
        .enumerate()
        .filter_map(|(field, &c)| {
            let e = field as i32 - V::T::BIAS;
            (field > 0 && field < V::T::MAX_FIELD && super::moments::ldexp(1.0, e) >= tiny)
                .then_some((e, c))
        });
    stats.log2_histogram = Some(log2_histogram(exponents, sp.zeros, sp.subnormals));
    if !has_values {
        stats.histogram = Some(empty_histogram());
        stats.quantiles = Some(Quantiles([None; 9]));
        return Ok(stats);
    }
    let exact = options.quantiles == QuantileMode::Exact;
    // The prefix buckets to gather in pass 2 (each distinct one once).
    let located = if by_prefix && exact {
        prefix_targets(&p1.prefixes, finite_count)
    } else {
        [None; 9]
    };
    let mut gather: Vec<u16> = located.iter().flatten().map(|t| t.prefix).collect();
    gather.sort_unstable();
    gather.dedup();
    let gathered: u64 = gather
        .iter()
        .filter_map(|&p| p1.prefixes.get(usize::from(p)))
        .sum();
    if gathered > PREFIX_BUDGET {
        gather.clear();
    }
    let mut slot_of = vec![u8::MAX; if gather.is_empty() { 0 } else { 1 << 16 }];
    for (i, &p) in gather.iter().enumerate() {
        if let Some(s) = slot_of.get_mut(usize::from(p)) {
            *s = i as u8;
        }
    }
    let bins = FloatBins::new(sp.min, sp.max, options.bins());
    let f32_guess = bins.f32_guess();
    let len = bins.len();
    let slots = gather.len();
    let (counts, mut members) = par_chunks(
        n,
        chunk,
        cancel,
        || (vec![0u64; len], vec![Vec::<u16>::new(); slots]),
        |(acc, members), range| {
            let bytes = (range.end - range.start) * view.element_bytes();
            if let (Some((Wide::F32, raw)), Some(guess)) = (view.raw(range.clone()), f32_guess) {
                // Four tables of len + 1 counters (the last is scratch).
                let mut tables = vec![0u32; 4 * (len + 1)];
                for block in raw.chunks(4 * BLOCK) {
                    histogram_f32(block, &bins, &guess, &mut tables);
                    if slots > 0 {
                        let values = block.as_chunks::<4>().0.iter();
                        gather_keys(
                            values.map(|c| f32::from_le_bytes(*c).key()),
                            &slot_of,
                            members,
                        );
                    }
                }
                fold_tables(&tables, len + 1, acc);
            } else {
                let mut tables = vec![0u32; 4 * len];
                for_each_block(view, range, |vals| {
                    histogram_block(vals, &bins, &mut tables);
                    if slots > 0 {
                        gather_members(vals, &slot_of, members);
                    }
                });
                fold_tables(&tables, len, acc);
            }
            progress.add(bytes);
        },
        |(mut a, mut ma), (b, mb)| {
            for (x, y) in a.iter_mut().zip(&b) {
                *x += y;
            }
            for (x, y) in ma.iter_mut().zip(mb) {
                x.extend(y);
            }
            (a, ma)
        },
    )?;
    let edges = bins.edges();
    let mut q = [None; 9];
    if !exact {
        let mut error = 0f64;
        for (slot, loc) in q.iter_mut().zip(&bins_of_quantiles(&counts, finite_count)) {
            if let Some((bin, _)) = *loc
                && let (Some(&lo), Some(&hi)) = (edges.get(bin), edges.get(bin + 1))
            {
                let mid = lo * 0.5 + hi * 0.5;
                error = error.max(hi * 0.5 - lo * 0.5);
                *slot = Some(Scalar::float(mid));
            }
        }
        stats.quantile_error = Some(error);
    } else if slots > 0 {
        // Every rank's bucket was gathered: select within it.
        for (slot, target) in q.iter_mut().zip(&located) {
            let Some(t) = target else { continue };
            let Some(list) = gather
                .iter()
                .position(|&p| p == t.prefix)
                .and_then(|i| members.get_mut(i))
            else {
                continue;
            };
            let index = usize::try_from(t.rank.saturating_sub(1))
                .unwrap_or(usize::MAX)
                .min(list.len().saturating_sub(1));
            if list.is_empty() {
                continue;
            }
            let (_, &mut low, _) = list.select_nth_unstable(index);
            let key = (u64::from(t.prefix) << 16) | u64::from(low);
            *slot = Some(Scalar::float(V::T::from_key(key).to_f64()));
        }
    } else {
        // Refine from the prefix buckets (f32) or the linear bins (f64).
        let mut targets = Vec::new();
        let mut slots_of_targets = Vec::new();
        if by_prefix {
            for (i, t) in located.iter().enumerate() {
                let Some(t) = t else { continue };
                let lo = u64::from(t.prefix) << 16;
                targets.push(Target {
                    lo,
                    hi: lo | 0xffff,
                    rank: t.rank,
                    count: t.count,
                });
                slots_of_targets.push(i);
            }
        } else {
            for (i, loc) in bins_of_quantiles(&counts, finite_count).iter().enumerate() {
                let Some((bin, rank)) = *loc else { continue };
                let (Some(&lo), Some(&hi)) = (edges.get(bin), edges.get(bin + 1)) else {
                    continue;
                };
                let lo_key = if bin == 0 {
                    V::T::at_or_above(sp.min).key()
                } else {
                    V::T::at_or_above(lo).key()
                };
                let hi_key = if bin + 1 == len {
                    // The last bin holds the maximum; +0 sits above −0.
                    let max = if sp.max == 0.0 { 0.0 } else { sp.max };
                    V::T::from_f64(max).key()
                } else {
                    V::T::below(hi).key()
                };
                targets.push(Target {
                    lo: lo_key,
                    hi: hi_key.max(lo_key),
                    rank,
                    count: counts.get(bin).copied().unwrap_or(0),
                });
                slots_of_targets.push(i);
            }
        }
        let keys = refine(&Keys { view, chunk }, &targets, cancel)?;
        for (i, k) in slots_of_targets.into_iter().zip(keys) {
            if let Some(slot) = q.get_mut(i) {
                *slot = Some(Scalar::float(V::T::from_key(k).to_f64()));
            }
        }
    }
    members.clear();
    debug_assert_eq!(q.len(), QUANTILES.len());
    stats.quantiles = Some(Quantiles(q));
    stats.histogram = Some(Histogram {
        edges: edges.to_vec(),
        counts,
    });
    Ok(stats)
}

/// Counts the 16-bit prefixes of f32 keys (`table.len()` = 65,536).
fn count_prefixes(keys: impl Iterator<Item = u64>, table: &mut [u32]) {
    for key in keys {
        if let Some(c) = table.get_mut((key >> 16) as usize) {
            *c += 1;
        }
    }
}

/// Adds the first `acc.len()` counters of each table of `stride` counters.
fn fold_tables(tables: &[u32], stride: usize, acc: &mut [u64]) {
    for t in tables.chunks(stride.max(1)) {
        for (x, &c) in acc.iter_mut().zip(t) {
            *x += u64::from(c);
        }
    }
}

/// Appends the low 16 key bits of each value whose prefix has a slot.
fn gather_members<T: FloatLane>(vals: &[T], slot_of: &[u8], members: &mut [Vec<u16>]) {
    let mut keys = [0u64; BLOCK];
    for (k, &x) in keys.iter_mut().zip(vals) {
        *k = x.key();
    }
    gather_keys(keys.iter().take(vals.len()).copied(), slot_of, members);
}

/// [`gather_members`] of values given by their keys.
fn gather_keys(keys: impl Iterator<Item = u64>, slot_of: &[u8], members: &mut [Vec<u16>]) {
    for k in keys {
        let slot = slot_of.get((k >> 16) as usize).copied().unwrap_or(u8::MAX);
        if slot != u8::MAX
            && let Some(list) = members.get_mut(usize::from(slot))
        {
            list.push(k as u16);
        }
    }
}

/// The keys of the finite values of a view.
struct Keys<'a, V> {
    view: &'a V,
    chunk: u64,
}

impl<V: View> KeySource for Keys<'_, V> {
    fn len(&self) -> u64 {
        self.view.len()
    }
    fn chunk_elems(&self) -> u64 {
        self.chunk
    }
    fn key_bits(&self) -> u32 {
        V::T::KEY_BITS
    }
    fn for_each_block(&self, range: Range<u64>, f: &mut dyn FnMut(&[u64])) {
        let mut keys = [0u64; BLOCK];
        for_each_block(self.view, range, |vals| {
            // NaN and ±Inf keys lie outside every interval of finite
            // values, so they need no filtering here.
            for (k, &x) in keys.iter_mut().zip(vals) {
                *k = x.key();
            }
            f(keys.get(..vals.len()).unwrap_or(&[]));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::views::magnitude;
    use super::*;

    #[test]
    fn keys_preserve_order_and_round_trip() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5,
            -1e-45,
            -0.0,
            0.0,
            1e-45,
            2.0,
            f32::MAX,
        ];
        for w in xs.windows(2) {
            assert!(w[0].key() < w[1].key(), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(f32::from_key(x.key()).to_bits(), x.to_bits());
        }
        let ys = [f64::MIN, -1.0, -0.0, 0.0, 5e-324, 1.0, f64::MAX];
        for w in ys.windows(2) {
            assert!(w[0].key() < w[1].key());
        }
        for y in ys {
            assert_eq!(f64::from_key(y.key()).to_bits(), y.to_bits());
        }
        let up = f32::at_or_above(0.1);
        assert!(f64::from(up) >= 0.1 && f64::from(up.next_down()) < 0.1);
        assert!(f64::from(f32::below(0.1)) < 0.1);
        assert_eq!(f32::at_or_above(0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(f32::below(0.0), -1e-45);
    }

    #[test]
    fn magnitudes() {
        assert_eq!(magnitude(3.0, -4.0), 5.0);
        assert_eq!(magnitude(f32::INFINITY, f32::NAN), f64::INFINITY);
        assert!(magnitude(f32::NAN, 1.0).is_nan());
    }
}
