//! The element-wise comparison of one matched pair: a streaming pass over
//! both tensors' bytes that gathers every metric of [`TensorDiff`] and
//! decides its [`Status`].

use super::{CHUNK_ELEMENTS, DeltaLog2Histogram, DiffOptions, Pair, Status, TensorDiff};
use crate::dtype::decode::{code_at, decode_c64, decode_f64};
use crate::dtype::{Dtype, DtypeKind};
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Cancelled, Progress};

/// Running sums of one comparison.
#[derive(Debug, Clone, Default)]
pub(super) struct Acc {
    n_finite: u64,
    changed: u64,
    mismatches: u64,
    max_abs: f64,
    sum_abs: f64,
    sum_sq: f64,
    sum_aa: f64,
    sum_bb: f64,
    sum_ab: f64,
    /// Counts per binary exponent e of |Δ|, at index e + [`LOG2_OFFSET`]
    /// (allocated on first use).
    log2: Vec<u64>,
    zeros: u64,
}

/// Index offset of exponent 0 in [`Acc::log2`]: f64 exponents run from
/// −1074 (smallest subnormal) to 1023.
const LOG2_OFFSET: i32 = 1074;

impl Acc {
    fn delta(&mut self, d: f64) {
        let m = d.abs();
        self.n_finite += 1;
        if m > self.max_abs {
            self.max_abs = m;
        }
        self.sum_abs += m;
        self.sum_sq += m * m;
        if m == 0.0 {
            self.zeros += 1;
        } else {
            // The exponent field gives floor(log2 m) for normal values.
            let field = ((m.to_bits() >> 52) & 0x7ff) as i32;
            let e = if field == 0 {
                m.log2().floor() as i32
            } else {
                field - 1023
            };
            if self.log2.is_empty() {
                self.log2 = vec![0; 2 * LOG2_OFFSET as usize];
            }
            if let Some(c) = self.log2.get_mut((e + LOG2_OFFSET) as usize) {
                *c += 1;
            }
        }
    }

    /// Adds one pair of real values: NaN equals NaN, ±0 are equal, and a pair
    /// within `atol + rtol·|b|` is not a change.
    pub(super) fn real(&mut self, a: f64, b: f64, atol: f64, rtol: f64) {
        if a.is_finite() && b.is_finite() {
            let d = a - b;
            self.delta(d);
            self.sum_aa += a * a;
            self.sum_bb += b * b;
            self.sum_ab += a * b;
            if d.abs() > atol + rtol * b.abs() {
                self.changed += 1;
            }
        } else {
            let same = (a.is_nan() && b.is_nan()) || a == b;
            if !same {
                self.mismatches += 1;
                self.changed += 1;
            }
        }
    }

    /// Compares complex values (re, im).
    fn complex(&mut self, a: (f64, f64), b: (f64, f64), atol: f64, rtol: f64) {
        let finite = a.0.is_finite() && a.1.is_finite() && b.0.is_finite() && b.1.is_finite();
        if finite {
            let d = (a.0 - b.0).hypot(a.1 - b.1);
            self.delta(d);
            self.sum_aa += a.0 * a.0 + a.1 * a.1;
            self.sum_bb += b.0 * b.0 + b.1 * b.1;
            self.sum_ab += a.0 * b.0 + a.1 * b.1;
            if d > atol + rtol * b.0.hypot(b.1) {
                self.changed += 1;
            }
        } else {
            let same_part = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x == y;
            if !(same_part(a.0, b.0) && same_part(a.1, b.1)) {
                self.mismatches += 1;
                self.changed += 1;
            }
        }
    }
}

/// Compares the values of two tensors of the same shape. Returns the
/// running sums; `progress` receives the bytes read from both sides.
#[allow(
    clippy::too_many_arguments,
    reason = "the two sides' dtype and bytes, plus the run's context"
)]
fn compare_values(
    dtype_a: Dtype,
    bytes_a: &[u8],
    dtype_b: Dtype,
    bytes_b: &[u8],
    numel: u64,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Acc, Cancelled> {
    let mut acc = Acc::default();
    let (atol, rtol) = (options.atol, options.rtol);
    let exact_ints = dtype_a == dtype_b
        && matches!(
            dtype_a.kind(),
            DtypeKind::Signed | DtypeKind::Unsigned | DtypeKind::Bool
        )
        && atol == 0.0
        && rtol == 0.0;
    let complex = dtype_a == Dtype::C64 && dtype_b == Dtype::C64;
    let mut va = vec![0f64; CHUNK_ELEMENTS];
    let mut vb = vec![0f64; CHUNK_ELEMENTS];
    let mut ia = if complex {
        vec![0f64; CHUNK_ELEMENTS]
    } else {
        Vec::new()
    };
    let mut ib = if complex {
        vec![0f64; CHUNK_ELEMENTS]
    } else {
        Vec::new()
    };
    let bytes_per = |d: Dtype, n: usize| (n as u64 * u64::from(d.bits())).div_ceil(8);
    let mut first = 0u64;
    while first < numel {
        cancel.check()?;
        let n = ((numel - first).min(CHUNK_ELEMENTS as u64)) as usize;
        let (ga, gb) = if complex {
            (
                decode_c64(bytes_a, first, &mut va[..n], &mut ia[..n]),
                decode_c64(bytes_b, first, &mut vb[..n], &mut ib[..n]),
            )
        } else {
            (
                decode_f64(dtype_a, bytes_a, first, &mut va[..n], options.bit_order),
                decode_f64(dtype_b, bytes_b, first, &mut vb[..n], options.bit_order),
            )
        };
        let got = ga.min(gb);
        if got == 0 {
            break;
        }
        if complex {
            for k in 0..got {
                acc.complex((va[k], ia[k]), (vb[k], ib[k]), atol, rtol);
            }
        } else if exact_ints {
            for k in 0..got {
                let i = first + k as u64;
                let same = code_at(dtype_a, bytes_a, i, options.bit_order)
                    == code_at(dtype_b, bytes_b, i, options.bit_order);
                let d = va[k] - vb[k];
                acc.delta(d);
                acc.sum_aa += va[k] * va[k];
                acc.sum_bb += vb[k] * vb[k];
                acc.sum_ab += va[k] * vb[k];
                if !same {
                    acc.changed += 1;
                }
            }
        } else {
            for k in 0..got {
                acc.real(va[k], vb[k], atol, rtol);
            }
        }
        progress.add(bytes_per(dtype_a, got) + bytes_per(dtype_b, got));
        first += got as u64;
    }
    Ok(acc)
}

/// Compares byte ranges in chunks, checking cancellation.
pub(crate) fn bytes_equal(
    a: &[u8],
    b: &[u8],
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<bool, Cancelled> {
    if a.len() != b.len() {
        return Ok(false);
    }
    for (ca, cb) in a.chunks(8 << 20).zip(b.chunks(8 << 20)) {
        cancel.check()?;
        if ca != cb {
            return Ok(false);
        }
        progress.add(2 * ca.len() as u64);
    }
    Ok(true)
}

/// A pair's report before comparison: every figure empty.
pub(super) fn identical(
    name: &str,
    name_a: Option<String>,
    (dtype_a, shape_a): (Dtype, Vec<u64>),
    (dtype_b, shape_b): (Dtype, Vec<u64>),
) -> TensorDiff {
    TensorDiff {
        name: name.to_owned(),
        name_a,
        status: Status::Identical,
        dtype_a,
        dtype_b,
        shape_a,
        shape_b,
        max_abs_diff: None,
        mean_abs_diff: None,
        rms_diff: None,
        rel_l2: None,
        cosine: None,
        changed_elements: None,
        changed_fraction: None,
        nan_mismatches: None,
        delta_log2_histogram: None,
        dequantized: None,
        snr_db: None,
        sums: None,
        sides: None,
    }
}

/// Fills the figures of `out` from the sums of a comparison of `numel`
/// elements, and decides its status.
pub(super) fn finish(out: &mut TensorDiff, acc: &Acc, numel: u64, dtypes_differ: bool) {
    let n = acc.n_finite;
    let fin = |x: f64| x.is_finite().then_some(x);
    if n > 0 {
        out.max_abs_diff = fin(acc.max_abs);
        out.mean_abs_diff = fin(acc.sum_abs / n as f64);
        out.rms_diff = fin((acc.sum_sq / n as f64).sqrt());
        let norm_a = acc.sum_aa.sqrt();
        let norm_b = acc.sum_bb.sqrt();
        out.rel_l2 = if norm_a > 0.0 {
            fin(acc.sum_sq.sqrt() / norm_a)
        } else if acc.sum_sq == 0.0 {
            Some(0.0)
        } else {
            None
        };
        out.cosine = (norm_a > 0.0 && norm_b > 0.0)
            .then(|| (acc.sum_ab / (norm_a * norm_b)).clamp(-1.0, 1.0));
        out.sums = Some([acc.sum_sq, acc.sum_aa]);
        if out.dequantized.is_some() && acc.sum_sq > 0.0 && acc.sum_aa > 0.0 {
            out.snr_db = fin(10.0 * (acc.sum_aa / acc.sum_sq).log10());
        }
    }
    out.changed_elements = Some(acc.changed);
    out.changed_fraction = (numel > 0).then(|| acc.changed as f64 / numel as f64);
    out.nan_mismatches = Some(acc.mismatches);
    out.delta_log2_histogram = Some(DeltaLog2Histogram {
        exponents: (0..acc.log2.len())
            .filter(|&i| acc.log2[i] > 0)
            .map(|i| i as i32 - LOG2_OFFSET)
            .collect(),
        counts: acc.log2.iter().copied().filter(|&c| c > 0).collect(),
        zeros: acc.zeros,
    });
    out.status = if dtypes_differ {
        Status::DtypeChanged
    } else if acc.changed == 0 {
        Status::Equal
    } else {
        Status::Changed
    };
}

/// Compares one pair, streaming both tensors' bytes in chunks; `None` when
/// a reference is not in its checkpoint.
pub fn diff_pair(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    options: &DiffOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Option<TensorDiff>, Cancelled> {
    let (Some(ia), Some(ib)) = (a.info(pair.a), b.info(pair.b)) else {
        return Ok(None);
    };
    let mut out = identical(
        ib.name(),
        (ia.name() != ib.name()).then(|| ia.name().to_owned()),
        (ia.dtype(), ia.shape().to_vec()),
        (ib.dtype(), ib.shape().to_vec()),
    );
    if ia.shape() != ib.shape() {
        out.status = Status::ShapeChanged;
        progress.add(ia.nbytes() + ib.nbytes());
        return Ok(Some(out));
    }
    let (ba, bb) = (a.bytes(pair.a), b.bytes(pair.b));
    if ia.dtype() == ib.dtype() && bytes_equal(ba, bb, cancel, progress)? {
        out.status = Status::Identical;
        out.max_abs_diff = Some(0.0);
        out.mean_abs_diff = Some(0.0);
        out.rms_diff = Some(0.0);
        out.rel_l2 = Some(0.0);
        out.changed_elements = Some(0);
        out.changed_fraction = (ia.numel() > 0).then_some(0.0);
        out.nan_mismatches = Some(0);
        return Ok(Some(out));
    }
    let comparable = (ia.dtype() == Dtype::C64) == (ib.dtype() == Dtype::C64);
    if !comparable {
        out.status = Status::DtypeChanged;
        progress.add(ia.nbytes() + ib.nbytes());
        return Ok(Some(out));
    }
    let acc = compare_values(
        ia.dtype(),
        ba,
        ib.dtype(),
        bb,
        ia.numel(),
        options,
        cancel,
        progress,
    )?;
    finish(&mut out, &acc, ia.numel(), ia.dtype() != ib.dtype());
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulator_semantics() {
        let mut acc = Acc::default();
        acc.real(f64::NAN, f64::NAN, 0.0, 0.0);
        acc.real(0.0, -0.0, 0.0, 0.0);
        acc.real(f64::INFINITY, f64::INFINITY, 0.0, 0.0);
        assert_eq!((acc.changed, acc.mismatches), (0, 0));
        acc.real(f64::NAN, 1.0, 0.0, 0.0);
        acc.real(1.0, 1.5, 0.0, 0.0);
        assert_eq!((acc.changed, acc.mismatches), (2, 1));
        assert_eq!(acc.max_abs, 0.5);
        let mut tol = Acc::default();
        tol.real(1.0, 1.05, 0.0, 0.1);
        tol.real(1.0, 1.05, 0.06, 0.0);
        assert_eq!(tol.changed, 0);
    }
}
