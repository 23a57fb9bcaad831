//! The results of [`super::stats_of`] and [`super::scan`], as the CLI prints
//! them with `--json` and the GUI shows them: figures that do not apply or
//! are not finite are `None` (JSON `null`), integers stay exact.

use serde::Serialize;
use serde::ser::SerializeMap;

use super::bins::QUANTILES;
use super::finite;
use super::moments::Moments;
use crate::dtype::Dtype;

/// A number in the output: a float, or an exact integer (integer dtypes'
/// min, max and quantiles, also beyond 2^53).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A float value (−0 is written as 0).
    Float(f64),
    /// A signed integer, exact (I8 … I64).
    Int(i64),
    /// An unsigned integer, exact (U8 … U64).
    UInt(u64),
}

impl Scalar {
    /// The value as f64 (integers beyond 2^53 round to nearest).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Float(x) => x,
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
        }
    }

    /// A float scalar with −0 written as +0.
    pub(crate) fn float(x: f64) -> Self {
        Scalar::Float(if x == 0.0 { 0.0 } else { x })
    }

    /// An exact integer: signed when negative, unsigned otherwise, so U64
    /// values above 2^63 stay exact.
    pub(crate) fn int(v: i128) -> Self {
        match i64::try_from(v) {
            Ok(i) => Scalar::Int(i),
            Err(_) => u64::try_from(v).map_or(Scalar::Float(v as f64), Scalar::UInt),
        }
    }

    /// The absolute value (exact for integers).
    pub(crate) fn abs(self) -> Self {
        match self {
            Scalar::Float(x) => Scalar::Float(x.abs()),
            Scalar::Int(i) => Scalar::int(i128::from(i).abs()),
            Scalar::UInt(u) => Scalar::UInt(u),
        }
    }
}

impl Serialize for Scalar {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Scalar::Float(x) if x.is_finite() => s.serialize_f64(x),
            Scalar::Float(_) => s.serialize_none(),
            Scalar::Int(i) => s.serialize_i64(i),
            Scalar::UInt(u) => s.serialize_u64(u),
        }
    }
}

/// The nine quantiles of [`QUANTILES`], in that order; `None` when there is
/// no finite value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantiles(pub [Option<Scalar>; 9]);

impl Quantiles {
    /// The quantile named as in the JSON (`"p50"`).
    pub fn get(&self, name: &str) -> Option<Scalar> {
        QUANTILES
            .iter()
            .position(|(n, _)| *n == name)
            .and_then(|i| self.0.get(i).copied().flatten())
    }
}

impl Serialize for Quantiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(QUANTILES.len()))?;
        for ((name, _), value) in QUANTILES.iter().zip(&self.0) {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// A linear histogram of the finite values: `counts[i]` values lie in
/// `[edges[i], edges[i+1])`, the last bin also holding the maximum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// `counts.len() + 1` edges (empty with no finite value).
    pub edges: Vec<f64>,
    /// Values per bin; `edges` has one more entry.
    pub counts: Vec<u64>,
}

/// How many finite, non-zero, normal values lie in `[2^e, 2^(e+1))` by
/// magnitude, for every `e` from the smallest to the largest present.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Log2Histogram {
    /// Consecutive binary exponents e, each bin holding 2^e ≤ |x| < 2^(e+1).
    pub exponents: Vec<i32>,
    /// Values per exponent, one count per entry of `exponents`.
    pub counts: Vec<u64>,
    /// ±0 values (not in the bins).
    pub zeros: u64,
    /// Subnormal values of the dtype (not in the bins).
    pub subnormals: u64,
}

/// One bin per representable finite value of an 8-bit-or-smaller float
/// (±0 merged), in ascending order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CodeHistogram {
    /// Every finite value the dtype can represent.
    pub values: Vec<f64>,
    /// How many elements hold each.
    pub counts: Vec<u64>,
}

/// Statistics of one sequence of values (a tensor, or a part of a complex
/// tensor). Figures that are not finite, or have no finite value to
/// describe, are `None` (`null` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueStats {
    /// Every element, NaN and Inf included.
    pub count: u64,
    /// Finite elements: those every figure below is over.
    pub finite: u64,
    /// NaN elements (0 for integers and BOOL).
    pub nan: u64,
    /// +Inf elements (0 for integers and BOOL).
    pub pos_inf: u64,
    /// −Inf elements (0 for integers and BOOL).
    pub neg_inf: u64,
    /// ±0 elements (also counted as finite).
    pub zeros: u64,
    /// Subnormal elements (of the dtype's own format).
    pub subnormals: u64,
    /// Smallest finite value (`None` with none; exact for integers).
    pub min: Option<Scalar>,
    /// Largest finite value (`None` with none; exact for integers).
    pub max: Option<Scalar>,
    /// Mean of the finite values.
    pub mean: Option<f64>,
    /// Population standard deviation of the finite values.
    pub std: Option<f64>,
    /// Mean of |x| over the finite values.
    pub abs_mean: Option<f64>,
    /// sqrt(Σx²) over the finite values.
    pub l2_norm: Option<f64>,
    /// Finite values with |x − mean| > 6·std (computed in f64 with the
    /// reported mean and std). `None` without a mean and std, and with
    /// [`Detail::MomentsOnly`](super::Detail::MomentsOnly), whose one pass
    /// cannot know the mean beforehand.
    pub outliers_6sigma: Option<u64>,
    /// max(|min|, |max|) / std: how far the largest magnitude lies out, in
    /// standard deviations. `None` when std is 0 or not defined.
    pub max_abs_over_std: Option<f64>,
    /// Nearest-rank quantiles (`None` with [`Detail::MomentsOnly`](super::Detail::MomentsOnly)).
    pub quantiles: Option<Quantiles>,
    /// Bound on |reported − exact| when the quantiles are not exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantile_error: Option<f64>,
    /// Linear histogram (`None` with [`Detail::MomentsOnly`](super::Detail::MomentsOnly)).
    pub histogram: Option<Histogram>,
    /// Log2-magnitude histogram (`None` with [`Detail::MomentsOnly`](super::Detail::MomentsOnly)).
    pub log2_histogram: Option<Log2Histogram>,
    /// One bin per representable value (floats of 8 bits or fewer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_histogram: Option<CodeHistogram>,
    /// BOOL: elements that are true (non-zero bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_count: Option<u64>,
}

/// Statistics of one tensor.
impl ValueStats {
    /// `count` elements, all finite, whose moments are `moments`; no
    /// special value, no range and no histogram yet: the callers fill in
    /// what they found.
    pub(crate) fn from_moments(count: u64, moments: &Moments) -> Self {
        let figures = moments.figures();
        Self {
            count,
            finite: count,
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
            zeros: 0,
            subnormals: 0,
            min: None,
            max: None,
            mean: figures.and_then(|f| finite(f.mean)),
            std: figures.and_then(|f| finite(f.std)),
            abs_mean: figures.and_then(|f| finite(f.abs_mean)),
            l2_norm: figures.and_then(|f| finite(f.l2_norm)),
            outliers_6sigma: None,
            max_abs_over_std: None,
            quantiles: None,
            quantile_error: None,
            histogram: None,
            log2_histogram: None,
            code_histogram: None,
            true_count: None,
        }
    }

    /// Sets [`ValueStats::max_abs_over_std`] from the range and std.
    pub(crate) fn with_ratio(mut self) -> Self {
        self.max_abs_over_std = match (self.min, self.max, self.std) {
            (Some(lo), Some(hi), Some(std)) if std > 0.0 => {
                finite(lo.to_f64().abs().max(hi.to_f64().abs()) / std)
            }
            _ => None,
        };
        self
    }
}

/// The test of [`ValueStats::outliers_6sigma`]: |x − mean| > 6·std.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sigma6 {
    mean: f64,
    limit: f64,
}

impl Sigma6 {
    /// The test for the mean and std of `v`, when it has both.
    pub(crate) fn of(v: &ValueStats) -> Option<Self> {
        Some(Self {
            mean: v.mean?,
            limit: 6.0 * v.std?,
        })
    }

    /// Whether `x` lies beyond 6 standard deviations of the mean.
    #[inline]
    pub(crate) fn beyond(self, x: f64) -> bool {
        (x - self.mean).abs() > self.limit
    }

    /// For values that all lie in `[lo, hi]`: `Some(true)` when every one is
    /// beyond, `Some(false)` when none is, `None` when only a test of each
    /// tells. (`x − mean` rounds monotonically, so |x − mean| never
    /// decreases away from the mean on either side.)
    pub(crate) fn span(self, lo: f64, hi: f64) -> Option<bool> {
        let (a, b) = (self.beyond(lo), self.beyond(hi));
        let same_side = (lo < self.mean) == (hi < self.mean);
        match (a, b) {
            (false, false) => Some(false),
            (true, true) if same_side => Some(true),
            _ => None,
        }
    }

    /// How many of the `(value, count)` pairs lie beyond.
    pub(crate) fn count(self, values: impl IntoIterator<Item = (f64, u64)>) -> u64 {
        values
            .into_iter()
            .filter(|&(x, _)| self.beyond(x))
            .map(|(_, c)| c)
            .sum()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorStats {
    /// Tensor name, as in the header.
    pub name: String,
    /// Dtype, which decides which fields apply.
    pub dtype: Dtype,
    /// Shape, as in the header.
    pub shape: Vec<u64>,
    /// The shard file holding it (sharded models only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// The figures; for C64 they describe the magnitude |z|.
    #[serde(flatten)]
    pub values: ValueStats,
    /// C64: the real parts, as a tensor of their own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real: Option<Box<ValueStats>>,
    /// C64: the imaginary parts, as a tensor of their own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imag: Option<Box<ValueStats>>,
    /// A quantized weight's codes and scales (the explorer's view; JSON
    /// has them in [`super::LogicalStats`]).
    #[serde(skip)]
    pub quant: Option<Box<super::QuantStats>>,
}

/// What a whole scan found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Tensors scanned (those the selection named).
    pub tensor_count: usize,
    /// Elements over the tensors scanned.
    pub element_count: u64,
    /// Bytes of data over the tensors scanned.
    pub data_bytes: u64,
    /// Elements that are NaN, over every tensor.
    pub nan_count: u64,
    /// Elements that are ±Inf, over every tensor.
    pub inf_count: u64,
    /// Tensors holding any NaN or Inf (C64: in either part).
    pub nonfinite_tensors: Vec<String>,
    /// Tensors with at least one element, every one zero.
    pub all_zero_tensors: Vec<String>,
    /// The largest finite |value| over every tensor (C64: |z|).
    pub max_abs: Option<Scalar>,
    /// The tensor holding the largest |x|.
    pub max_abs_tensor: Option<String>,
}

/// Statistics of the tensors of a checkpoint, and a summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScanReport {
    /// One entry per tensor scanned, in the order asked for.
    pub tensors: Vec<TensorStats>,
    /// What stands out over the tensors (largest |x|, NaN counts).
    pub summary: Summary,
}
