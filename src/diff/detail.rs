//! What the GUI shows of one pair beyond its metrics, computed on request:
//! a linear histogram of Δ = a − b and a pooled map of |Δ|.

use super::{CHUNK_ELEMENTS, DiffOptions, Pair};
use crate::dtype::Dtype;
use crate::dtype::decode::decode_f64;
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::stats::heatmap::Heatmap;

pub type DeltaHistogram = (Vec<f64>, Vec<u64>);

/// A linear histogram of Δ = a − b over finite pairs of one tensor pair
/// (two passes: range, then counts), for the GUI's pair view.
pub fn delta_histogram(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    bins: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<DeltaHistogram>, Cancelled> {
    let (Some(ia), Some(ib)) = (a.info(pair.a), b.info(pair.b)) else {
        return Ok(None);
    };
    if ia.shape() != ib.shape() || ia.dtype() == Dtype::C64 || ib.dtype() == Dtype::C64 {
        return Ok(None);
    }
    let (ba, bb) = (a.bytes(pair.a), b.bytes(pair.b));
    let bins = bins.clamp(1, 4096);
    progress.set_total(2 * (ia.nbytes() + ib.nbytes()));
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    let mut pass = |f: &mut dyn FnMut(f64)| -> Result<(), Cancelled> {
        let mut first = 0u64;
        while first < ia.numel() {
            cancel.check()?;
            let n = ((ia.numel() - first).min(CHUNK_ELEMENTS as u64)) as usize;
            let ga = decode_f64(ia.dtype(), ba, first, &mut va[..n], options.bit_order);
            let gb = decode_f64(ib.dtype(), bb, first, &mut vb[..n], options.bit_order);
            let got = ga.min(gb);
            if got == 0 {
                break;
            }
            for k in 0..got {
                let d = va[k] - vb[k];
                if d.is_finite() {
                    f(d);
                }
            }
            progress
                .add(((got as u64) * u64::from(ia.dtype().bits() + ib.dtype().bits())).div_ceil(8));
            first += got as u64;
        }
        Ok(())
    };
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    pass(&mut |d| {
        lo = lo.min(d);
        hi = hi.max(d);
    })?;
    if lo > hi {
        return Ok(Some((Vec::new(), Vec::new())));
    }
    let nb = if hi > lo { bins } else { 1 };
    let width = (hi - lo) / nb as f64;
    let mut counts = vec![0u64; nb];
    pass(&mut |d| {
        let i = if width > 0.0 {
            (((d - lo) / width) as usize).min(nb - 1)
        } else {
            0
        };
        counts[i] += 1;
    })?;
    let edges = (0..=nb)
        .map(|i| if i == nb { hi } else { lo + width * i as f64 })
        .collect();
    Ok(Some((edges, counts)))
}

/// A downsampled map of |a − b| for one pair of the same shape: the last
/// axis is the columns, all leading axes together the rows; each cell holds
/// the largest |Δ| of its block (NaN where a block has no finite pair).
#[allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of the comparison"
)]
pub fn abs_delta_map(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    max_side: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<Heatmap>, Cancelled> {
    let (Some(ia), Some(ib)) = (a.info(pair.a), b.info(pair.b)) else {
        return Ok(None);
    };
    if ia.shape() != ib.shape()
        || ia.numel() == 0
        || ia.dtype() == Dtype::C64
        || ib.dtype() == Dtype::C64
    {
        return Ok(None);
    }
    let cols = ia.shape().last().copied().unwrap_or(1).max(1);
    let rows = ia.numel() / cols;
    let side = max_side.max(1) as u64;
    let (height, width) = (rows.min(side) as usize, cols.min(side) as usize);
    let mut cells = vec![f64::NAN; width * height];
    let mut non_finite = vec![false; width * height];
    let (ba, bb) = (a.bytes(pair.a), b.bytes(pair.b));
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    progress.set_total(ia.nbytes() + ib.nbytes());
    let mut first = 0u64;
    while first < ia.numel() {
        cancel.check()?;
        let n = ((ia.numel() - first).min(CHUNK_ELEMENTS as u64)) as usize;
        let got = decode_f64(ia.dtype(), ba, first, &mut va[..n], options.bit_order).min(
            decode_f64(ib.dtype(), bb, first, &mut vb[..n], options.bit_order),
        );
        if got == 0 {
            break;
        }
        for k in 0..got {
            let i = first + k as u64;
            let (r, c) = (i / cols, i % cols);
            let cell = (r as u128 * height as u128 / rows as u128) as usize * width
                + (c as u128 * width as u128 / cols as u128) as usize;
            let d = (va[k] - vb[k]).abs();
            if d.is_finite() {
                if cells[cell].is_nan() || d > cells[cell] {
                    cells[cell] = d;
                }
            } else if !(va[k].is_nan() && vb[k].is_nan()) && va[k] != vb[k] {
                non_finite[cell] = true;
            }
        }
        progress.add(((got as u64) * u64::from(ia.dtype().bits() + ib.dtype().bits())).div_ceil(8));
        first += got as u64;
    }
    Ok(Some(Heatmap::from_cells(
        width, height, cells, non_finite, rows, cols,
    )))
}
