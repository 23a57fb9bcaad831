//! The tensor table's logic, apart from drawing: natural-order comparison,
//! filtering, sorting, the dotted-prefix tree (`tree.rs`), and the
//! per-dtype footer. Plain functions over indices into a checkpoint's
//! tensor list.

mod tree;

use std::cmp::Ordering;
use std::collections::BTreeMap;

use regex::Regex;

use crate::dtype::Dtype;
use crate::format::{Checkpoint, TensorInfo};

pub use tree::{Pattern, TreeRow, tree_rows};

/// Which rows a quantized checkpoint's table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KindFilter {
    /// Every row.
    #[default]
    All,
    /// Quantized weights only.
    Quantized,
    /// Plain stored tensors only.
    Plain,
}

/// A column of the tensor table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Column {
    /// Tensor name (natural order).
    Name,
    /// Dtype (writer order).
    Dtype,
    /// Shape (lexicographic by dimension).
    Shape,
    /// Element count (the product of the shape).
    Elements,
    /// Bytes of data in the file.
    Bytes,
    /// Shard, then offset of the first byte: file order.
    Offsets,
    /// Shard file, in the index's order.
    Shard,
    /// Smallest finite value, once scanned (unscanned rows sort last).
    Min,
    /// Largest finite value, once scanned.
    Max,
    /// Scanned standard deviation.
    Std,
    /// Scanned NaN + Inf count.
    NonFinite,
    /// Scanned count of values beyond 6σ of the mean.
    Outliers,
    /// Scanned max|x| / std.
    MaxOverStd,
}

/// Which way a column sorts; ties always fall back to natural name order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Direction {
    /// Smallest (or A) first.
    Ascending,
    /// Largest (or Z) first.
    Descending,
}

/// Figures a whole-file scan adds to a row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScanFigures {
    /// Smallest finite value; `None` when no value is finite.
    pub min: Option<f64>,
    /// Largest finite value; `None` when no value is finite.
    pub max: Option<f64>,
    /// Standard deviation of finite values.
    pub std: Option<f64>,
    /// Mean of finite values.
    pub mean: Option<f64>,
    /// sqrt(Σx²) of finite values.
    pub l2_norm: Option<f64>,
    /// NaN + ±Inf count.
    pub non_finite: u64,
    /// Finite values beyond 6σ of the mean (`None` without a std).
    pub outliers: Option<u64>,
    /// max|x| / std (`None` when std is 0 or not defined).
    pub max_abs_over_std: Option<f64>,
}

/// Compares strings in natural order: digit runs compare as numbers, so
/// `layers.10` follows `layers.9`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (&a[..da], &b[..db]);
                let ta = trim_zeros(na);
                let tb = trim_zeros(nb);
                let ord = ta
                    .len()
                    .cmp(&tb.len())
                    .then_with(|| ta.cmp(tb))
                    .then_with(|| na.len().cmp(&nb.len()));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|c| **c == b'0').count();
    &digits[zeros..]
}

/// What the filter box holds: a substring, or a regex when it starts with `/`.
#[derive(Debug, Clone)]
pub enum NameFilter {
    /// Everything passes.
    All,
    /// Case-insensitive substring.
    Substring(String),
    /// A regex search (unanchored; the text after a leading `/`).
    Regex(Regex),
}

impl NameFilter {
    /// Parses the filter text; a bad regex is an error message.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self::All);
        }
        if let Some(re) = text.strip_prefix('/') {
            let re = re.strip_suffix('/').unwrap_or(re);
            return regex::RegexBuilder::new(re)
                .size_limit(1 << 20)
                .build()
                .map(Self::Regex)
                .map_err(|e| format!("bad regex: {e}"));
        }
        Ok(Self::Substring(text.to_lowercase()))
    }

    /// True when `name` passes.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Substring(s) => {
                if name.is_ascii() && s.is_ascii() {
                    name.as_bytes()
                        .windows(s.len().max(1))
                        .any(|w| w.eq_ignore_ascii_case(s.as_bytes()))
                        || s.is_empty()
                } else {
                    name.to_lowercase().contains(s.as_str())
                }
            }
            Self::Regex(re) => re.is_match(name),
        }
    }
}

/// Each tensor's position in natural name order (ties by index), computed
/// once when a file opens so that sorting by name is a sort of integers.
pub fn name_ranks(ck: &Checkpoint) -> Vec<u32> {
    let names: Vec<&str> = ck.entries().map(|(_, i)| i.name()).collect();
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| natural_cmp(names[a], names[b]));
    let mut ranks = vec![0u32; names.len()];
    for (rank, &i) in order.iter().enumerate() {
        ranks[i] = u32::try_from(rank).unwrap_or(u32::MAX);
    }
    ranks
}

/// A quantized checkpoint's logical tensors, seen from the table: the row
/// of a logical tensor's first part stands for it, its other parts are
/// folded beneath (not listed).
#[derive(Debug)]
pub struct QuantRows {
    /// What was detected.
    pub quant: crate::quant::Quantization,
    /// Per table row (position in `ck.tensors`): the logical tensor it is a
    /// part of, and whether it is the part whose row stands for it.
    of: Vec<Option<(u32, bool)>>,
    /// The longest scheme label, in characters (the Dtype column's width).
    pub label_chars: usize,
}

impl QuantRows {
    /// The rows of a checkpoint's quantization.
    pub fn new(ck: &Checkpoint, quant: crate::quant::Quantization) -> Self {
        let mut of = vec![None; ck.tensors().len()];
        let mut has_lead = vec![false; quant.tensors().len()];
        for (i, t) in ck.tensors().iter().enumerate() {
            if let Some(l) = quant.owner_index(*t) {
                let lead = !has_lead[l];
                has_lead[l] = true;
                of[i] = Some((u32::try_from(l).unwrap_or(u32::MAX), lead));
            }
        }
        let label_chars = quant
            .tensors()
            .iter()
            .map(|t| t.label().chars().count())
            .max()
            .unwrap_or(0);
        Self {
            quant,
            of,
            label_chars,
        }
    }

    /// The logical tensor row `index` stands for.
    pub fn logical_at(&self, index: usize) -> Option<&crate::quant::LogicalTensor> {
        match self.of.get(index).copied().flatten() {
            Some((l, true)) => self.quant.tensors().get(l as usize),
            _ => None,
        }
    }

    /// True for a part folded under its logical tensor's row.
    pub fn folded(&self, index: usize) -> bool {
        matches!(self.of.get(index).copied().flatten(), Some((_, false)))
    }

    /// The name row `index` shows: its logical tensor's, or its own.
    pub fn name<'a>(&'a self, index: usize, stored: &'a str) -> &'a str {
        self.logical_at(index)
            .map_or(stored, crate::quant::LogicalTensor::name)
    }
}

/// The rows shown: indices into `ck.tensors`, filtered and sorted.
/// `name_rank` comes from [`name_ranks`].
#[expect(
    clippy::too_many_arguments,
    reason = "the checkpoint, its ranks and quantization, then each of the table's filters and its sort"
)]
pub fn visible_rows(
    ck: &Checkpoint,
    name_rank: &[u32],
    filter: &NameFilter,
    dtype: Option<Dtype>,
    sort: Option<(Column, Direction)>,
    scan: &dyn Fn(usize) -> Option<ScanFigures>,
    quant: Option<&QuantRows>,
    kind: KindFilter,
) -> Vec<usize> {
    let infos: Vec<&TensorInfo> = ck.entries().map(|(_, i)| i).collect();
    let mut rows: Vec<usize> = (0..infos.len())
        .filter(|&i| {
            let info = infos[i];
            let name = quant.map_or(info.name(), |q| q.name(i, info.name()));
            let logical = quant.and_then(|q| q.logical_at(i));
            let wanted = match kind {
                KindFilter::All => true,
                KindFilter::Quantized => logical.is_some(),
                KindFilter::Plain => logical.is_none(),
            };
            wanted
                && !quant.is_some_and(|q| q.folded(i))
                // A quantized weight has a scheme, not a stored dtype.
                && dtype.is_none_or(|d| logical.is_none() && info.dtype() == d)
                && filter.matches(name)
        })
        .collect();
    let Some((column, direction)) = sort else {
        return rows;
    };
    let key_f64 = |v: Option<f64>| v.unwrap_or(f64::NAN);
    let rank = |i: usize| name_rank.get(i).copied().unwrap_or(u32::MAX);
    // A quantized weight's row sorts by its logical facts.
    let logical = |i: usize| quant.and_then(|q| q.logical_at(i));
    let shape = |i: usize| logical(i).map_or(infos[i].shape(), crate::quant::LogicalTensor::shape);
    let numel = |i: usize| logical(i).map_or(infos[i].numel(), crate::quant::LogicalTensor::numel);
    let bytes = |i: usize| logical(i).map_or(infos[i].nbytes(), |lt| lt.stored_bytes(ck));
    // Quantized weights sort after every stored dtype, by scheme.
    let dtype_key = |i: usize| match logical(i) {
        Some(lt) => (1, lt.label().to_owned()),
        None => (0, format!("{:03}", 999 - infos[i].dtype().writer_rank())),
    };
    let cmp = |&a: &usize, &b: &usize| -> Ordering {
        let ord = match column {
            Column::Name => rank(a).cmp(&rank(b)),
            Column::Dtype => dtype_key(a).cmp(&dtype_key(b)),
            Column::Shape => shape(a).cmp(shape(b)),
            Column::Elements => numel(a).cmp(&numel(b)),
            Column::Bytes => bytes(a).cmp(&bytes(b)),
            Column::Offsets => (ck.tensors()[a].shard(), infos[a].data_offsets())
                .cmp(&(ck.tensors()[b].shard(), infos[b].data_offsets())),
            Column::Shard => ck.tensors()[a].shard().cmp(&ck.tensors()[b].shard()),
            Column::Min
            | Column::Max
            | Column::Std
            | Column::NonFinite
            | Column::Outliers
            | Column::MaxOverStd => {
                let pick = |i: usize| {
                    scan(i).map(|s| match column {
                        Column::Min => key_f64(s.min),
                        Column::Max => key_f64(s.max),
                        Column::Std => key_f64(s.std),
                        Column::Outliers => s.outliers.map_or(f64::NAN, |o| o as f64),
                        Column::MaxOverStd => key_f64(s.max_abs_over_std),
                        _ => s.non_finite as f64,
                    })
                };
                // Unscanned and NaN sort last in either direction.
                match (pick(a), pick(b)) {
                    (Some(p), Some(q)) if !p.is_nan() && !q.is_nan() => p.total_cmp(&q),
                    (Some(p), _) if !p.is_nan() => return Ordering::Less,
                    (_, Some(q)) if !q.is_nan() => return Ordering::Greater,
                    _ => Ordering::Equal,
                }
            }
        };
        let ord = ord.then_with(|| rank(a).cmp(&rank(b)));
        match direction {
            Direction::Ascending => ord,
            Direction::Descending => ord.reverse(),
        }
    };
    rows.sort_by(cmp);
    rows
}

/// The name row `i` shows: a quantized weight's logical name on the row
/// that stands for it, else the stored name.
pub fn row_name<'a>(ck: &'a Checkpoint, quant: Option<&'a QuantRows>, i: usize) -> &'a str {
    let stored = ck.entry(i).map_or("", |(_, info)| info.name());
    quant.map_or(stored, |q| q.name(i, stored))
}

/// Tensors, parameters and bytes of one dtype.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DtypeTotals {
    /// Tensors of this dtype.
    pub tensors: u64,
    /// Number of parameters (elements, as the Hugging Face metadata API counts them).
    pub parameters: u64,
    /// Bytes of data, saturating at `u64::MAX`.
    pub bytes: u64,
}

/// Totals per dtype, in writer order, and overall.
pub fn dtype_totals(ck: &Checkpoint) -> (Vec<(Dtype, DtypeTotals)>, DtypeTotals) {
    let mut per: BTreeMap<usize, (Dtype, DtypeTotals)> = BTreeMap::new();
    let mut all = DtypeTotals::default();
    for (_, info) in ck.entries() {
        let e = per
            .entry(info.dtype().writer_rank())
            .or_insert((info.dtype(), DtypeTotals::default()));
        for acc in [&mut e.1, &mut all] {
            acc.tensors += 1;
            acc.parameters = acc.parameters.saturating_add(info.numel());
            acc.bytes = acc.bytes.saturating_add(info.nbytes());
        }
    }
    (per.into_values().collect(), all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v = vec![
            "layers.10.w",
            "layers.9.w",
            "layers.1.w",
            "layers.01.w",
            "a",
            "layers.100",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "a",
                "layers.1.w",
                "layers.01.w",
                "layers.9.w",
                "layers.10.w",
                "layers.100"
            ]
        );
        let big = "x99999999999999999999999999";
        assert_eq!(
            natural_cmp(big, "x100000000000000000000000000"),
            Ordering::Less
        );
    }

    #[test]
    fn filters() {
        let f = NameFilter::parse("Attn").expect("ok");
        assert!(f.matches("layers.0.self_attn.q"));
        assert!(!f.matches("mlp"));
        let f = NameFilter::parse("/^layers\\.[0-9]+\\.mlp$").expect("ok");
        assert!(f.matches("layers.12.mlp"));
        assert!(!f.matches("x.layers.12.mlp"));
        assert!(NameFilter::parse("/(").is_err());
        assert!(NameFilter::parse("  ").expect("ok").matches("anything"));
        let f = NameFilter::parse("ÄB").expect("ok");
        assert!(f.matches("xäbx"));
    }
}
