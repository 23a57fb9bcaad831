//! Dtypes of 16 bits or fewer: one pass counts the raw codes (at most
//! 65,536 counters), and every figure (moments, range, histograms, exact
//! quantiles, the per-value histogram of the small floats) is derived from
//! the counts.
//!
//! The codes are visited in value order without sorting, through an
//! order-preserving key: sign-magnitude floats put the negative codes first,
//! reversed; two's complement integers flip the sign bit; unsigned integers,
//! BOOL and F8_E8M0 (no sign) are in order already.

use super::bins::{FloatBins, IntBins, QUANTILES, exponent_f64, nearest_rank};
use super::kernel::{count_bytes, count_f6, count_u16};
use super::moments::Moments;
use super::report::Sigma6;
use super::{
    CHUNK_BYTES, CodeHistogram, Detail, Histogram, Quantiles, Scalar, StatsOptions, ValueStats,
    empty_histogram, is_integer, log2_histogram, par_chunks, smallest_normal,
};
use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, code_at, code_table, code_to_f64, element_count};
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::mem::written_zeros;

/// Tensors with at most this many 16-bit elements sort their codes instead
/// of filling a 65,536-entry table.
const SMALL_16: usize = 16 * 1024;

/// How the codes of a dtype are ordered by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Code order is value order.
    Unsigned,
    /// Two's complement: I8, I16.
    Signed,
    /// Sign bit, then magnitude: every float dtype but F8_E8M0 (which has
    /// no sign bit).
    SignMagnitude,
}

fn order(dtype: Dtype) -> Order {
    match dtype {
        Dtype::Bool | Dtype::U8 | Dtype::U16 | Dtype::F8E8M0 => Order::Unsigned,
        Dtype::I8 | Dtype::I16 => Order::Signed,
        _ => Order::SignMagnitude,
    }
}

/// The position of `code` in value order (NaN codes land somewhere; they
/// are filtered out by value).
fn key_of(dtype: Dtype, code: u32) -> u32 {
    let bits = dtype.bits();
    let sign = 1u32 << (bits - 1);
    let mask = (1u32 << bits) - 1;
    match order(dtype) {
        Order::Unsigned => code,
        Order::Signed => code ^ sign,
        Order::SignMagnitude => {
            if code & sign == 0 {
                code | sign
            } else {
                !code & mask
            }
        }
    }
}

/// The inverse of [`key_of`].
fn code_of(dtype: Dtype, key: u32) -> u32 {
    let bits = dtype.bits();
    let sign = 1u32 << (bits - 1);
    let mask = (1u32 << bits) - 1;
    match order(dtype) {
        Order::Unsigned => key,
        Order::Signed => key ^ sign,
        Order::SignMagnitude => {
            if key & sign == 0 {
                !key & mask
            } else {
                key ^ sign
            }
        }
    }
}

/// The exact integer value of a code of an integer or BOOL dtype.
fn int_value(dtype: Dtype, code: u32) -> i128 {
    match dtype {
        Dtype::Bool => i128::from(code != 0),
        Dtype::I8 => i128::from(code as u8 as i8),
        Dtype::I16 => i128::from(code as u16 as i16),
        _ => i128::from(code),
    }
}

/// Statistics of a tensor of a dtype of 16 bits or fewer.
pub(crate) fn stats(
    dtype: Dtype,
    bytes: &[u8],
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ValueStats, Cancelled> {
    let sorted = count(dtype, bytes, options.bit_order, cancel, progress)?;
    Ok(derive(dtype, &sorted, options))
}

/// Counts the codes of a tensor: `(code, count)` for every code present,
/// in ascending value order.
fn count(
    dtype: Dtype,
    bytes: &[u8],
    order: BitOrder,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Vec<(u32, u64)>, Cancelled> {
    let bits = dtype.bits();
    let n = element_count(dtype, bytes.len());
    if bits == 16 && n <= SMALL_16 as u64 {
        cancel.check()?;
        let (codes, _) = bytes.as_chunks::<2>();
        let mut keys: Vec<u32> = codes
            .iter()
            .map(|c| key_of(dtype, u32::from(u16::from_le_bytes(*c))))
            .collect();
        keys.sort_unstable();
        let mut out: Vec<(u32, u64)> = Vec::new();
        for k in keys {
            match out.last_mut() {
                Some((last, c)) if *last == k => *c += 1,
                _ => out.push((k, 1)),
            }
        }
        progress.add(bytes.len() as u64);
        return Ok(out
            .into_iter()
            .map(|(k, c)| (code_of(dtype, k), c))
            .collect());
    }
    let dense = match bits {
        16 => dense_u16(bytes, cancel, progress)?,
        8 => dense_bytes(bytes, cancel, progress)?,
        4 => {
            let pairs = dense_bytes(bytes, cancel, progress)?;
            let mut nibbles = vec![0u64; 16];
            for (b, &c) in pairs.iter().enumerate() {
                if let Some(lo) = nibbles.get_mut(b & 15) {
                    *lo += c;
                }
                if let Some(hi) = nibbles.get_mut(b >> 4) {
                    *hi += c;
                }
            }
            nibbles
        }
        6 => dense_f6(bytes, order, cancel, progress)?,
        _ => Vec::new(),
    };
    Ok((0..1u32 << bits)
        .map(|k| code_of(dtype, k))
        .filter_map(|code| {
            let c = *dense.get(code as usize)?;
            (c > 0).then_some((code, c))
        })
        .collect())
}

/// Every figure of a 16-bit dtype's values from the count of each of its
/// 65,536 codes (`dense[code]`), as [`stats`] derives them from a tensor.
pub(crate) fn stats_from_counts(dtype: Dtype, dense: &[u64], options: &StatsOptions) -> ValueStats {
    let sorted: Vec<(u32, u64)> = (0..1u32 << dtype.bits())
        .map(|k| code_of(dtype, k))
        .filter_map(|code| {
            let c = *dense.get(code as usize)?;
            (c > 0).then_some((code, c))
        })
        .collect();
    derive(dtype, &sorted, options)
}

/// Byte ranges of at most [`CHUNK_BYTES`] covering `bytes`, counted in
/// parallel into `T` tables that are flushed into u64 totals per chunk.
fn dense_u16(
    bytes: &[u8],
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Vec<u64>, Cancelled> {
    struct Acc {
        low: Vec<u8>,
        wraps: Vec<u32>,
        total: Vec<u64>,
    }
    let acc = par_chunks(
        bytes.len() as u64,
        CHUNK_BYTES,
        cancel,
        || Acc {
            low: written_zeros(1 << 16),
            wraps: written_zeros(1 << 16),
            total: written_zeros(1 << 16),
        },
        |acc, r| {
            let part = byte_range(bytes, r);
            // A chunk holds far fewer than 2^40 codes.
            count_u16(part, &mut acc.low, &mut acc.wraps);
            for ((t, l), w) in acc
                .total
                .iter_mut()
                .zip(acc.low.iter_mut())
                .zip(acc.wraps.iter_mut())
            {
                *t += u64::from(std::mem::take(w)) << 8 | u64::from(std::mem::take(l));
            }
            progress.add(part.len() as u64);
        },
        |mut a, b| {
            for (x, y) in a.total.iter_mut().zip(&b.total) {
                *x += y;
            }
            a
        },
    )?;
    Ok(acc.total)
}

/// Counts byte values in parallel.
fn dense_bytes(
    bytes: &[u8],
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Vec<u64>, Cancelled> {
    Ok(dense_tables(bytes, cancel, progress, count_bytes)?.to_vec())
}

/// Counts the codes of `bytes` in parallel chunks of at most
/// [`CHUNK_BYTES`]: `count` fills four tables of `N` counters for a chunk,
/// which are then added to u64 totals.
fn dense_tables<const N: usize>(
    bytes: &[u8],
    cancel: &CancelToken,
    progress: &Progress,
    count: impl Fn(&[u8], &mut [[u32; N]; 4]) + Sync + Send,
) -> Result<[u64; N], Cancelled> {
    par_chunks(
        bytes.len() as u64,
        CHUNK_BYTES,
        cancel,
        || [0u64; N],
        |total, r| {
            let part = byte_range(bytes, r);
            let mut tables = [[0u32; N]; 4];
            count(part, &mut tables);
            for t in &tables {
                for (x, &c) in total.iter_mut().zip(t) {
                    *x += u64::from(c);
                }
            }
            progress.add(part.len() as u64);
        },
        |mut a, b| {
            for (x, y) in a.iter_mut().zip(&b) {
                *x += y;
            }
            a
        },
    )
}

/// Counts packed six-bit codes in parallel; a trailing partial group (one
/// or two bytes) is decoded element by element.
fn dense_f6(
    bytes: &[u8],
    order: BitOrder,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Vec<u64>, Cancelled> {
    let whole = bytes.len() - bytes.len() % 3;
    let groups = bytes.get(..whole).unwrap_or(&[]);
    let mut total = dense_tables(groups, cancel, progress, |part, tables| {
        count_f6(part, order, tables);
    })?;
    let first_tail = (whole / 3 * 4) as u64;
    for index in first_tail..element_count(Dtype::F6E2M3, bytes.len()) {
        if let Some(code) = code_at(Dtype::F6E2M3, bytes, index, order)
            && let Some(slot) = total.get_mut(code as usize)
        {
            *slot += 1;
        }
    }
    progress.add((bytes.len() - whole) as u64);
    Ok(total.to_vec())
}

/// `bytes[r]`, or an empty slice when the range does not fit.
fn byte_range(bytes: &[u8], r: std::ops::Range<u64>) -> &[u8] {
    usize::try_from(r.start)
        .ok()
        .zip(usize::try_from(r.end).ok())
        .and_then(|(a, b)| bytes.get(a..b))
        .unwrap_or(&[])
}

/// One distinct finite value present in the tensor.
#[derive(Debug, Clone, Copy)]
struct Entry {
    value: f64,
    int: i128,
    count: u64,
}

/// Every figure from the `(code, count)` pairs in ascending value order.
fn derive(dtype: Dtype, sorted: &[(u32, u64)], options: &StatsOptions) -> ValueStats {
    let integer = is_integer(dtype);
    let tiny = smallest_normal(dtype).unwrap_or(0.0);
    let (mut nan, mut pos_inf, mut neg_inf, mut zeros, mut subnormals) = (0, 0, 0, 0, 0);
    let mut count = 0u64;
    let mut entries: Vec<Entry> = Vec::with_capacity(sorted.len());
    for &(code, c) in sorted {
        count += c;
        let Some(value) = code_to_f64(dtype, u64::from(code)) else {
            continue;
        };
        if value.is_nan() {
            nan += c;
        } else if value == f64::INFINITY {
            pos_inf += c;
        } else if value == f64::NEG_INFINITY {
            neg_inf += c;
        } else {
            if value == 0.0 {
                zeros += c;
            } else if value.abs() < tiny {
                subnormals += c;
            }
            let int = if integer { int_value(dtype, code) } else { 0 };
            entries.push(Entry {
                value,
                int,
                count: c,
            });
        }
    }
    let finite_count = count - nan - pos_inf - neg_inf;
    let scalar = |e: &Entry| {
        if integer {
            Scalar::int(e.int)
        } else {
            Scalar::float(e.value)
        }
    };
    let moments = Moments::from_counts(entries.iter().map(|e| (e.value, e.count)));
    let mut stats = ValueStats {
        finite: finite_count,
        nan,
        pos_inf,
        neg_inf,
        zeros,
        subnormals,
        min: entries.first().map(scalar),
        max: entries.last().map(scalar),
        true_count: (dtype == Dtype::Bool).then(|| count - zeros),
        ..ValueStats::from_moments(count, &moments)
    };
    if options.detail != Detail::MomentsOnly {
        stats.outliers_6sigma =
            Sigma6::of(&stats).map(|s| s.count(entries.iter().map(|e| (e.value, e.count))));
    }
    if !options.full() {
        return stats.with_ratio();
    }
    // Quantiles: walk the cumulative counts.
    let mut q = [None; 9];
    let mut seen = 0u64;
    let mut next = 0;
    for e in &entries {
        seen += e.count;
        while let Some(&(_, permille)) = QUANTILES.get(next) {
            match nearest_rank(permille, finite_count) {
                Some(rank) if rank <= seen => {
                    if let Some(slot) = q.get_mut(next) {
                        *slot = Some(scalar(e));
                    }
                    next += 1;
                }
                _ => break,
            }
        }
    }
    stats.quantiles = Some(Quantiles(q));
    stats.histogram = Some(match (entries.first(), entries.last()) {
        (Some(lo), Some(hi)) if integer => {
            let bins = IntBins::new(lo.int, hi.int, options.bins());
            let mut counts = vec![0u64; bins.len()];
            for e in &entries {
                if let Some(slot) = counts.get_mut(bins.bin_of(e.int)) {
                    *slot += e.count;
                }
            }
            Histogram {
                edges: bins.edges(),
                counts,
            }
        }
        (Some(lo), Some(hi)) => {
            let bins = FloatBins::new(lo.value, hi.value, options.bins());
            let mut counts = vec![0u64; bins.len()];
            for e in &entries {
                if let Some(slot) = counts.get_mut(bins.bin_of(e.value)) {
                    *slot += e.count;
                }
            }
            Histogram {
                edges: bins.into_edges(),
                counts,
            }
        }
        _ => empty_histogram(),
    });
    let exponents = entries.iter().filter_map(|e| {
        if integer {
            let magnitude = e.int.unsigned_abs();
            (magnitude != 0).then(|| (127 - magnitude.leading_zeros() as i32, e.count))
        } else {
            (e.value != 0.0 && e.value.abs() >= tiny).then(|| (exponent_f64(e.value), e.count))
        }
    });
    stats.log2_histogram = Some(log2_histogram(exponents, zeros, subnormals));
    if dtype.is_small_float()
        && let Some(table) = code_table(dtype)
    {
        stats.code_histogram = Some(code_histogram(table, &entries));
    }
    stats.with_ratio()
}

/// One bin per representable finite value (±0 merged), ascending.
fn code_histogram(table: &[f64], entries: &[Entry]) -> CodeHistogram {
    let mut values: Vec<f64> = table
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .map(|v| if v == 0.0 { 0.0 } else { v })
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let mut counts = vec![0u64; values.len()];
    for e in entries {
        let i = values.partition_point(|&v| v < e.value);
        if let Some(slot) = counts.get_mut(i) {
            *slot += e.count;
        }
    }
    CodeHistogram { values, counts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_visit_codes_in_value_order() {
        for dtype in Dtype::ALL.into_iter().filter(|d| d.bits() <= 16) {
            let n = 1u32 << dtype.bits();
            let mut previous = f64::NEG_INFINITY;
            for k in 0..n {
                let code = code_of(dtype, k);
                assert_eq!(key_of(dtype, code), k, "{dtype}");
                let v = code_to_f64(dtype, u64::from(code)).expect("in range");
                if v.is_nan() {
                    continue;
                }
                assert!(
                    v >= previous,
                    "{dtype}: key {k} code {code:#x} = {v} after {previous}"
                );
                previous = v;
            }
        }
    }

    #[test]
    fn all_codes_of_f8_e4m3() {
        let bytes: Vec<u8> = (0..=255).collect();
        let s = stats(
            Dtype::F8E4M3,
            &bytes,
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("not cancelled");
        assert_eq!((s.count, s.nan, s.pos_inf, s.neg_inf), (256, 2, 0, 0));
        assert_eq!((s.zeros, s.subnormals), (2, 14));
        assert_eq!(
            (s.min, s.max),
            (Some(Scalar::Float(-448.0)), Some(Scalar::Float(448.0)))
        );
        let ch = s.code_histogram.expect("small float");
        assert_eq!(ch.values.len(), 253);
        assert_eq!(ch.counts.iter().sum::<u64>(), 254);
        assert_eq!(s.mean, Some(0.0));
    }
}
