//! What the GUI shows of one pair beyond its metrics, computed on request:
//! a linear histogram of Δ = a − b and a pooled map of |Δ|. Either side is
//! a stored tensor or a quantized weight's decoded values ([`Source`]).

use super::{CHUNK_ELEMENTS, DiffOptions, Pair};
use crate::dtype::Dtype;
use crate::dtype::decode::decode_f64;
use crate::format::{Checkpoint, TensorRef};
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::quant::{Dequantizer, LogicalTensor};
use crate::stats::heatmap::Heatmap;

pub type DeltaHistogram = (Vec<f64>, Vec<u64>);

/// One side of a pair: a stored tensor, or a quantized weight's values.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A stored tensor of the checkpoint.
    Stored(TensorRef),
    /// A decoded logical tensor of the checkpoint.
    Logical(&'a LogicalTensor),
}

/// A side, opened: its dtype (a decoded weight's value dtype), shape,
/// stored bytes and bits read per element (for progress), and its values
/// (C64: the real parts, as `decode_f64` gives them).
pub(crate) struct Reader<'a> {
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<u64>,
    pub(super) bytes: u64,
    pub(crate) bits: u64,
    values: Values<'a>,
    /// A GGUF's attention Q or K met against its original: its rows read
    /// in Hugging Face's order, un-permuted for this many heads.
    unpermute: Option<u64>,
}

enum Values<'a> {
    Stored { dtype: Dtype, bytes: &'a [u8] },
    Logical(Dequantizer<'a>, Vec<f32>),
}

impl<'a> Reader<'a> {
    /// `None` for a reference not in `ck`, or an undecoded weight.
    pub(crate) fn open(ck: &'a Checkpoint, source: Source<'a>) -> Option<Self> {
        match source {
            Source::Stored(t) => {
                let info = ck.info(t)?;
                Some(Self {
                    dtype: info.dtype(),
                    shape: info.shape().to_vec(),
                    bytes: info.nbytes(),
                    bits: u64::from(info.dtype().bits()),
                    values: Values::Stored {
                        dtype: info.dtype(),
                        bytes: ck.bytes(t),
                    },
                    unpermute: None,
                })
            }
            Source::Logical(lt) => {
                let dq = Dequantizer::new(ck, lt)?;
                let numel = lt.numel().max(1);
                let bytes = lt.stored_bytes(ck);
                Some(Self {
                    dtype: lt.value_dtype(),
                    shape: lt.shape().to_vec(),
                    bytes,
                    bits: (bytes * 8).div_ceil(numel),
                    values: Values::Logical(dq, vec![0f32; CHUNK_ELEMENTS]),
                    unpermute: None,
                })
            }
        }
    }

    pub(crate) fn numel(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The reader with its rows un-permuted for `heads` heads (see
    /// [`crate::format::gguf::names::source_row`]).
    pub(super) fn unpermuted(mut self, heads: Option<u64>) -> Self {
        self.unpermute = heads;
        self
    }

    pub(crate) fn decode(&mut self, first: u64, out: &mut [f64], options: &DiffOptions) -> usize {
        let (Some(heads), Some(&rows)) = (self.unpermute, self.shape.first()) else {
            return self.decode_stored_order(first, out, options);
        };
        let cols = self.numel() / rows.max(1);
        let mut done = 0usize;
        while done < out.len() && cols > 0 {
            let k = first + done as u64;
            let (r, c) = (k / cols, k % cols);
            if r >= rows {
                break;
            }
            let take = usize::try_from(cols - c)
                .unwrap_or(usize::MAX)
                .min(out.len() - done);
            let src = crate::format::gguf::names::source_row(r, rows, heads) * cols + c;
            let got = self.decode_stored_order(src, &mut out[done..done + take], options);
            done += got;
            if got < take {
                break;
            }
        }
        done
    }

    fn decode_stored_order(&mut self, first: u64, out: &mut [f64], options: &DiffOptions) -> usize {
        match &mut self.values {
            Values::Stored { dtype, bytes } => {
                decode_f64(*dtype, bytes, first, out, options.bit_order)
            }
            Values::Logical(dq, scratch) => {
                let n = out.len().min(scratch.len());
                let got = dq.values(first, &mut scratch[..n]);
                for (o, v) in out.iter_mut().zip(&scratch[..got]) {
                    *o = f64::from(*v);
                }
                got
            }
        }
    }
}

/// Both sides opened, when they have one shape and neither is complex.
fn readers<'a>(
    a: &'a Checkpoint,
    sa: Source<'a>,
    b: &'a Checkpoint,
    sb: Source<'a>,
    options: &DiffOptions,
) -> Option<(Reader<'a>, Reader<'a>)> {
    let (ra, rb) = (
        Reader::open(a, sa)?.unpermuted(options.unpermute.0),
        Reader::open(b, sb)?.unpermuted(options.unpermute.1),
    );
    (ra.shape == rb.shape && ra.dtype != Dtype::C64 && rb.dtype != Dtype::C64).then_some((ra, rb))
}

/// Runs `f(k, a_k, b_k)` over every pair of values, in chunks.
pub(super) fn each_pair(
    ra: &mut Reader<'_>,
    rb: &mut Reader<'_>,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
    f: &mut dyn FnMut(u64, f64, f64),
) -> Result<(), Cancelled> {
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    let numel = ra.numel();
    let mut first = 0u64;
    while first < numel {
        cancel.check()?;
        let n = ((numel - first).min(CHUNK_ELEMENTS as u64)) as usize;
        let got =
            ra.decode(first, &mut va[..n], options)
                .min(rb.decode(first, &mut vb[..n], options));
        if got == 0 {
            break;
        }
        for k in 0..got {
            f(first + k as u64, va[k], vb[k]);
        }
        progress.add(((got as u64) * (ra.bits + rb.bits)).div_ceil(8));
        first += got as u64;
    }
    Ok(())
}

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
    delta_histogram_of(
        a,
        Source::Stored(pair.a),
        b,
        Source::Stored(pair.b),
        bins,
        options,
        cancel,
        progress,
    )
}

/// [`delta_histogram`] of any two sources.
#[expect(
    clippy::too_many_arguments,
    reason = "the two sides, the bins, and the run's context"
)]
pub fn delta_histogram_of(
    a: &Checkpoint,
    sa: Source<'_>,
    b: &Checkpoint,
    sb: Source<'_>,
    bins: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<DeltaHistogram>, Cancelled> {
    let Some((mut ra, mut rb)) = readers(a, sa, b, sb, options) else {
        return Ok(None);
    };
    let bins = bins.clamp(1, 4096);
    progress.set_total((2 * ra.numel() * (ra.bits + rb.bits)).div_ceil(8));
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    each_pair(
        &mut ra,
        &mut rb,
        options,
        cancel,
        progress,
        &mut |_, x, y| {
            let d = x - y;
            if d.is_finite() {
                lo = lo.min(d);
                hi = hi.max(d);
            }
        },
    )?;
    if lo > hi {
        return Ok(Some((Vec::new(), Vec::new())));
    }
    let nb = if hi > lo { bins } else { 1 };
    let width = (hi - lo) / nb as f64;
    let mut counts = vec![0u64; nb];
    each_pair(
        &mut ra,
        &mut rb,
        options,
        cancel,
        progress,
        &mut |_, x, y| {
            let d = x - y;
            if d.is_finite() {
                let i = if width > 0.0 {
                    (((d - lo) / width) as usize).min(nb - 1)
                } else {
                    0
                };
                counts[i] += 1;
            }
        },
    )?;
    let edges = (0..=nb)
        .map(|i| if i == nb { hi } else { lo + width * i as f64 })
        .collect();
    Ok(Some((edges, counts)))
}

/// A downsampled map of |a − b| for one pair of the same shape: the last
/// axis is the columns, all leading axes together the rows; each cell holds
/// the largest |Δ| of its block (NaN where a block has no finite pair).
pub fn abs_delta_map(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    max_side: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<Heatmap>, Cancelled> {
    abs_delta_map_of(
        a,
        Source::Stored(pair.a),
        b,
        Source::Stored(pair.b),
        max_side,
        options,
        cancel,
        progress,
    )
}

/// [`abs_delta_map`] of any two sources.
#[expect(
    clippy::too_many_arguments,
    reason = "the two sides, the map's size, and the run's context"
)]
#[expect(
    clippy::many_single_char_names,
    reason = "a and b are the two sides, x and y their values, r and c a cell"
)]
pub fn abs_delta_map_of(
    a: &Checkpoint,
    sa: Source<'_>,
    b: &Checkpoint,
    sb: Source<'_>,
    max_side: usize,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<Heatmap>, Cancelled> {
    let Some((mut ra, mut rb)) = readers(a, sa, b, sb, options) else {
        return Ok(None);
    };
    if ra.numel() == 0 {
        return Ok(None);
    }
    let cols = ra.shape.last().copied().unwrap_or(1).max(1);
    let rows = ra.numel() / cols;
    let side = max_side.max(1) as u64;
    let (height, width) = (rows.min(side) as usize, cols.min(side) as usize);
    let mut cells = vec![f64::NAN; width * height];
    let mut non_finite = vec![false; width * height];
    progress.set_total((ra.numel() * (ra.bits + rb.bits)).div_ceil(8));
    each_pair(
        &mut ra,
        &mut rb,
        options,
        cancel,
        progress,
        &mut |i, x, y| {
            let (r, c) = (i / cols, i % cols);
            let cell = (r as u128 * height as u128 / rows as u128) as usize * width
                + (c as u128 * width as u128 / cols as u128) as usize;
            let d = (x - y).abs();
            if d.is_finite() {
                if cells[cell].is_nan() || d > cells[cell] {
                    cells[cell] = d;
                }
            } else if !(x.is_nan() && y.is_nan()) && x != y {
                non_finite[cell] = true;
            }
        },
    )?;
    Ok(Some(Heatmap::from_cells(
        width, height, cells, non_finite, rows, cols,
    )))
}
