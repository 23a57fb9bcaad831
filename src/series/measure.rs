//! The figures of one tensor at one step, and of a pair of consecutive
//! steps, in one streaming pass: a tensor alone (its first step, or a
//! step after it was missing or changed shape), or both sides of a pair,
//! where the newer side's own figures come out of the same pass. A pair
//! whose stored bytes are equal is not decoded: its newer side's figures
//! are the older side's.

use super::SeriesError;
use crate::diff::{DiffOptions, Reader, Source, bytes_equal};
use crate::format::{Checkpoint, TensorRef};
use crate::jobs::{CancelToken, Cancelled, Progress};
use crate::quant::Dequantizer;
use crate::stats::moments::{Moments, Sum};

/// Values decoded at a time.
const CHUNK: usize = 1 << 14;

/// One tensor's figures at one step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// sqrt(Σx²) over the finite values.
    pub l2_norm: Option<f64>,
    /// Population standard deviation of the finite values.
    pub std: Option<f64>,
    /// Largest |x| of the finite values.
    pub max_abs: Option<f64>,
    /// NaN and ±Inf elements.
    pub nonfinite: u64,
}

/// The figures of a pair of consecutive steps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PairFigures {
    /// ‖W_t − W_{t−1}‖.
    pub update_norm: Option<f64>,
    /// ‖W_t − W_{t−1}‖ / ‖W_{t−1}‖.
    pub update_ratio: Option<f64>,
    /// Cosine between W_t and W_{t−1}.
    pub cosine: Option<f64>,
    /// Same dtype, shape and stored bytes.
    pub same_bytes: bool,
}

/// A finite figure, else none.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// The running figures of one side.
#[derive(Default)]
struct Side {
    moments: Moments,
    max_abs: f64,
    nonfinite: u64,
}

/// Lanes of the sums of a chunk: independent chains the compiler keeps in
/// vector registers.
const LANES: usize = 8;

/// The lane-wise sums of a chunk of values (and, for a pair, of the
/// older side beside them): Σy, Σ|y|, Σ(y − shift)², max |y|, Σ(y − x)²,
/// Σx·y.
#[derive(Default)]
struct ChunkSums {
    sum: [f64; LANES],
    abs: [f64; LANES],
    sq: [f64; LANES],
    max: [f64; LANES],
    delta: [f64; LANES],
    dot: [f64; LANES],
}

impl ChunkSums {
    #[inline]
    fn add(&mut self, lane: usize, older: f64, newer: f64, shift: f64) {
        self.sum[lane] += newer;
        self.abs[lane] += newer.abs();
        let from_shift = newer - shift;
        self.sq[lane] += from_shift * from_shift;
        self.max[lane] = if newer.abs() > self.max[lane] {
            newer.abs()
        } else {
            self.max[lane]
        };
        let step = newer - older;
        self.delta[lane] += step * step;
        self.dot[lane] += older * newer;
    }

    /// Sums of `ys` (with `xs` beside them, or zeros).
    #[allow(
        clippy::needless_range_loop,
        reason = "lane j of both chunks: indexed, the loop is vectorised"
    )]
    fn of(xs: Option<&[f64]>, ys: &[f64], shift: f64) -> Self {
        let mut s = Self::default();
        let (yc, yr) = ys.as_chunks::<LANES>();
        if let Some(xs) = xs {
            let (xc, xr) = xs.as_chunks::<LANES>();
            for (x, y) in xc.iter().zip(yc) {
                for j in 0..LANES {
                    s.add(j, x[j], y[j], shift);
                }
            }
            for (&x, &y) in xr.iter().zip(yr) {
                s.add(0, x, y, shift);
            }
        } else {
            for y in yc {
                for j in 0..LANES {
                    s.add(j, 0.0, y[j], shift);
                }
            }
            for &y in yr {
                s.add(0, 0.0, y, shift);
            }
        }
        s
    }
}

/// The lanes of a sum added.
fn total(lanes: [f64; LANES]) -> f64 {
    lanes.iter().sum()
}

impl Side {
    /// Adds a chunk of values whose lane sums are `sums` (about `shift`,
    /// the chunk's first value): when every value is finite, at once;
    /// else value by value, the NaN and Inf counted apart.
    fn add_chunk(&mut self, vals: &[f64], sums: &ChunkSums, shift: f64) {
        let (sum, abs, sq) = (total(sums.sum), total(sums.abs), total(sums.sq));
        if !(sum.is_finite() && abs.is_finite() && sq.is_finite()) {
            self.add(vals);
            return;
        }
        let n = vals.len() as u64;
        let sum_d = sum - n as f64 * shift;
        self.moments
            .merge(&Moments::from_block(n, 0, shift, [sum, abs, sum_d, sq]));
        let m = sums.max.iter().fold(0f64, |m, &x| m.max(x));
        self.max_abs = self.max_abs.max(m);
    }

    /// Adds a chunk of values one by one.
    fn add(&mut self, vals: &[f64]) {
        let Some(&shift) = vals.iter().find(|x| x.is_finite()) else {
            self.nonfinite += vals.len() as u64;
            return;
        };
        let (mut n, mut sum, mut abs, mut d1, mut d2) = (0u64, 0f64, 0f64, 0f64, 0f64);
        for &x in vals {
            if x.is_finite() {
                n += 1;
                sum += x;
                abs += x.abs();
                let d = x - shift;
                d1 += d;
                d2 += d * d;
                self.max_abs = self.max_abs.max(x.abs());
            } else {
                self.nonfinite += 1;
            }
        }
        self.moments
            .merge(&Moments::from_block(n, 0, shift, [sum, abs, d1, d2]));
    }

    fn figures(&self) -> Figures {
        let f = self.moments.figures();
        Figures {
            l2_norm: f.and_then(|f| finite(f.l2_norm)),
            std: f.and_then(|f| finite(f.std)),
            max_abs: f.and_then(|_| finite(self.max_abs)),
            nonfinite: self.nonfinite,
        }
    }
}

/// The stored tensors an item is read from.
fn parts(ck: &Checkpoint, source: Source<'_>) -> Vec<TensorRef> {
    match source {
        Source::Stored(t) => vec![t],
        Source::Logical(lt) => Dequantizer::new(ck, lt).map_or_else(Vec::new, |d| d.parts()),
    }
}

/// Brings an item's bytes into reach (remote: fetched; kept while the
/// result lives).
fn fetch(
    ck: &Checkpoint,
    source: Source<'_>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<crate::source::Fetched, SeriesError> {
    ck.fetch(&parts(ck, source), cancel, progress)
        .map_err(|e| SeriesError::Open {
            path: ck.path().to_owned(),
            message: format!("{e:#}"),
        })
}

/// The figures of one item alone; `None` when it cannot be read as values
/// (an undecoded weight).
pub fn single(
    ck: &Checkpoint,
    source: Source<'_>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<Figures>, SeriesError> {
    let _held = fetch(ck, source, cancel, progress)?;
    let Some(mut r) = Reader::open(ck, source) else {
        return Ok(None);
    };
    let options = DiffOptions::default();
    let mut side = Side::default();
    let mut buf = vec![0f64; CHUNK];
    let numel = r.numel();
    let mut first = 0u64;
    while first < numel {
        cancel.check()?;
        let want = (numel - first).min(CHUNK as u64) as usize;
        let got = r.decode(first, &mut buf[..want], &options);
        if got == 0 {
            break;
        }
        let vals = &buf[..got];
        let shift = vals.first().copied().unwrap_or(0.0);
        side.add_chunk(vals, &ChunkSums::of(None, vals, shift), shift);
        progress.add((got as u64 * r.bits).div_ceil(8));
        first += got as u64;
    }
    Ok(Some(side.figures()))
}

/// True when both items are stored alike (one dtype, shape and stored
/// bytes, part by part), compared in chunks that check `cancel` (the
/// caller counts the progress).
fn same_bytes(
    (a, sa): (&Checkpoint, Source<'_>),
    (b, sb): (&Checkpoint, Source<'_>),
    cancel: &CancelToken,
) -> Result<bool, Cancelled> {
    let (pa, pb) = (parts(a, sa), parts(b, sb));
    if pa.len() != pb.len() || pa.is_empty() {
        return Ok(false);
    }
    let uncounted = Progress::new();
    for (&x, &y) in pa.iter().zip(&pb) {
        let alike = match (a.info(x), b.info(y)) {
            (Some(ix), Some(iy)) => ix.dtype() == iy.dtype() && ix.shape() == iy.shape(),
            _ => false,
        };
        if !alike || !bytes_equal(a.bytes(x), b.bytes(y), cancel, &uncounted)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The newer side's figures and the pair's, of an item at two consecutive
/// steps of one shape; `older` is the older side's figures. `None` when
/// either side cannot be read as values.
pub fn pair(
    (a, sa, older): (&Checkpoint, Source<'_>, Figures),
    (b, sb): (&Checkpoint, Source<'_>),
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<(Figures, PairFigures)>, SeriesError> {
    let _held_a = fetch(a, sa, cancel, progress)?;
    let _held_b = fetch(b, sb, cancel, progress)?;
    let (Some(mut ra), Some(mut rb)) = (Reader::open(a, sa), Reader::open(b, sb)) else {
        return Ok(None);
    };
    if ra.shape != rb.shape {
        return Ok(None);
    }
    let norm_a = older.l2_norm;
    if same_bytes((a, sa), (b, sb), cancel)? {
        progress.add((ra.numel() * (ra.bits + rb.bits)).div_ceil(8));
        let clean = older.nonfinite == 0;
        let update = clean.then_some(0.0);
        return Ok(Some((
            older,
            PairFigures {
                update_norm: update,
                update_ratio: update.and(norm_a.filter(|&n| n > 0.0)).map(|_| 0.0),
                cosine: (clean && norm_a.is_some_and(|n| n > 0.0)).then_some(1.0),
                same_bytes: true,
            },
        )));
    }
    let options = DiffOptions::default();
    let mut side = Side::default();
    let (mut delta, mut dot) = (Sum::default(), Sum::default());
    let (mut va, mut vb) = (vec![0f64; CHUNK], vec![0f64; CHUNK]);
    let numel = ra.numel();
    let mut first = 0u64;
    while first < numel {
        cancel.check()?;
        let want = (numel - first).min(CHUNK as u64) as usize;
        let got = ra.decode(first, &mut va[..want], &options).min(rb.decode(
            first,
            &mut vb[..want],
            &options,
        ));
        if got == 0 {
            break;
        }
        let (xs, ys) = (&va[..got], &vb[..got]);
        let shift = ys.first().copied().unwrap_or(0.0);
        let sums = ChunkSums::of(Some(xs), ys, shift);
        delta.add(total(sums.delta));
        dot.add(total(sums.dot));
        side.add_chunk(ys, &sums, shift);
        progress.add((got as u64 * (ra.bits + rb.bits)).div_ceil(8));
        first += got as u64;
    }
    let newer = side.figures();
    let update = finite(delta.value().max(0.0).sqrt());
    let clean = older.nonfinite == 0 && newer.nonfinite == 0;
    let update_norm = update.filter(|_| clean);
    let update_ratio = update_norm
        .zip(norm_a.filter(|&n| n > 0.0))
        .and_then(|(u, n)| finite(u / n));
    let cosine = match (norm_a, newer.l2_norm) {
        (Some(x), Some(y)) if clean && x > 0.0 && y > 0.0 => {
            finite(dot.value() / x / y).map(|c| c.clamp(-1.0, 1.0))
        }
        _ => None,
    };
    Ok(Some((
        newer,
        PairFigures {
            update_norm,
            update_ratio,
            cosine,
            same_bytes: false,
        },
    )))
}
