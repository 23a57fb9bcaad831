//! A comparison of a tab's checkpoint (A) with a second one (B): B's
//! loading, the diff job, the rows the diff table shows, and the selected
//! pair's detail job. The rows and the per-layer chart are computed when the
//! report, filter or sort change, never per frame.

use std::path::PathBuf;

use crate::diff::{self, DeltaHistogram, DiffError, DiffReport, Status};
use crate::format::LoadError;
use crate::gui::model::natural_cmp;
use crate::gui::task::Task;
use crate::stats::TensorStats;
use crate::stats::heatmap::Heatmap;
use crate::text::safe_text;

use super::loaded::Loaded;
use super::tensor::LayerLines;

/// One line of the diff table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffRow {
    /// A matched pair (index into the report's tensors).
    Pair(usize),
    /// A name only in A (index into `only_in_a`).
    OnlyA(usize),
    /// A name only in B (index into `only_in_b`).
    OnlyB(usize),
}

/// Which rows the diff table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffFilter {
    /// Every pair and every one-side name.
    #[default]
    All,
    /// Pairs that are not identical or equal, and names on one side only.
    Changed,
    /// Names on one side only.
    OneSide,
    /// Dtype or shape changes.
    Structure,
}

/// A sortable column of the diff table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffColumn {
    /// Natural name order.
    Name,
    /// Status, in the order of [`Status`].
    Status,
    /// Largest |a − b|.
    MaxAbs,
    /// Mean |a − b|.
    MeanAbs,
    /// |a − b| / |a|.
    RelL2,
    /// Cosine similarity.
    Cosine,
    /// Elements that differ.
    Changed,
    /// NaN/Inf present on one side only.
    Mismatch,
}

impl DiffColumn {
    /// The direction a first click sorts in: names and statuses A to Z,
    /// cosine lowest first, differences largest first.
    pub fn starts_ascending(self) -> bool {
        matches!(self, Self::Name | Self::Status | Self::Cosine)
    }
}

/// The selected pair's statistics, Δ histogram and |Δ| map.
pub struct PairDetail {
    /// A's statistics.
    pub a: TensorStats,
    /// B's statistics.
    pub b: TensorStats,
    /// The linear histogram of Δ = A − B, when the pair is comparable.
    pub delta: Option<DeltaHistogram>,
    /// The map of |Δ| (rows × last axis), when the pair is comparable.
    pub map: Option<Heatmap>,
}

/// A measure of change per pair, for the diff's per-layer chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffStat {
    /// ‖a − b‖ / ‖a‖.
    #[default]
    RelL2,
    /// max |a − b|.
    MaxAbs,
    /// mean |a − b|.
    MeanAbs,
    /// 1 − cosine similarity.
    OneMinusCosine,
}

impl DiffStat {
    /// Every measure, in the menu's order.
    pub const ALL: [DiffStat; 4] = [
        DiffStat::RelL2,
        DiffStat::MaxAbs,
        DiffStat::MeanAbs,
        DiffStat::OneMinusCosine,
    ];

    /// Its name in the menu and on the axis.
    pub fn label(self) -> &'static str {
        match self {
            DiffStat::RelL2 => "relative change |a−b| / |a|",
            DiffStat::MaxAbs => "max |a−b|",
            DiffStat::MeanAbs => "mean |a−b|",
            DiffStat::OneMinusCosine => "1 − cosine",
        }
    }

    /// Its value for one pair.
    pub fn of(self, t: &diff::TensorDiff) -> Option<f64> {
        match self {
            DiffStat::RelL2 => t.rel_l2,
            DiffStat::MaxAbs => t.max_abs_diff,
            DiffStat::MeanAbs => t.mean_abs_diff,
            DiffStat::OneMinusCosine => t.cosine.map(|c| 1.0 - c),
        }
    }
}

/// What the diff view shows of a report beyond its rows, built once when
/// the report arrives: the per-layer chart's lines (one per role, for each
/// measure of change; a point's item is the pair's index) and the metadata
/// changes as text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportDigest {
    /// The lines of each [`DiffStat`], in [`DiffStat::ALL`]'s order.
    pub lines: Vec<LayerLines>,
    /// One line per metadata key added (`+`), removed (`-`) or changed
    /// (`~`), escaped.
    pub metadata_text: String,
    /// Pairs compared by decoded values (a quantized side), and the range
    /// of their SNR in dB.
    pub dequantized: (usize, Option<(f64, f64)>),
}

impl ReportDigest {
    /// The chart of a report.
    pub fn of(report: &DiffReport) -> Self {
        let pairs = &report.tensors;
        let lines = DiffStat::ALL
            .iter()
            .map(|s| {
                LayerLines::build(
                    pairs.len(),
                    |i| pairs.get(i).map_or("", |t| t.name.as_str()),
                    |i| pairs.get(i).and_then(|t| s.of(t)),
                )
            })
            .collect();
        Self {
            lines,
            metadata_text: metadata_text(report),
            dequantized: {
                let rows = report.tensors.iter().filter(|t| t.dequantized.is_some());
                let snr: Vec<f64> = rows.clone().filter_map(|t| t.snr_db).collect();
                let range = (!snr.is_empty()).then(|| {
                    (
                        snr.iter().copied().fold(f64::INFINITY, f64::min),
                        snr.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    )
                });
                (rows.count(), range)
            },
        }
    }
}

/// The metadata changes of a report, one escaped line each.
fn metadata_text(report: &DiffReport) -> String {
    let m = &report.metadata;
    let mut lines = Vec::new();
    for (k, v) in &m.added {
        lines.push(format!("+ {k} = {}", safe_text(v, 200)));
    }
    for (k, v) in &m.removed {
        lines.push(format!("- {k} = {}", safe_text(v, 200)));
    }
    for (k, v) in &m.changed {
        lines.push(format!(
            "~ {k}: {} -> {}",
            safe_text(&v.a, 100),
            safe_text(&v.b, 100)
        ));
    }
    lines.join("\n")
}

/// A comparison with a second checkpoint.
pub struct CompareState {
    /// B as asked for (absolute).
    pub path_b: PathBuf,
    /// Opening B, keyed by its path.
    pub load_b: Task<PathBuf, Loaded, LoadError>,
    /// The diff of A and B.
    pub diff: Task<(), DiffReport, DiffError>,
    /// The chart of the report, built when it arrives.
    pub digest: ReportDigest,
    /// The rows shown, filtered and sorted.
    pub rows: Vec<DiffRow>,
    /// Which rows are shown.
    pub filter: DiffFilter,
    /// Case-insensitive substring of the names shown.
    pub name_filter: String,
    /// Sort column, and true for ascending.
    pub sort: (DiffColumn, bool),
    /// The report, filter or sort changed since `rows` was built.
    pub dirty: bool,
    /// Selected pair (index into the report's tensors).
    pub selected: Option<usize>,
    /// The selected pair's detail, keyed by pair.
    pub detail: Task<usize, PairDetail, String>,
    /// A pair to select by name once the diff is done (a Run view's cell).
    pub pending_pair: Option<String>,
}

impl CompareState {
    /// A comparison with `path_b`, before anything runs.
    pub fn new(path_b: PathBuf) -> Self {
        Self {
            path_b,
            load_b: Task::default(),
            diff: Task::default(),
            digest: ReportDigest::default(),
            rows: Vec::new(),
            filter: DiffFilter::All,
            name_filter: String::new(),
            sort: (DiffColumn::RelL2, false),
            dirty: true,
            selected: None,
            detail: Task::default(),
            pending_pair: None,
        }
    }

    /// True while one of its jobs runs.
    pub fn is_busy(&self) -> bool {
        self.load_b.is_running() || self.diff.is_running() || self.detail.is_running()
    }

    /// B, once loaded.
    pub fn b(&self) -> Option<&Loaded> {
        self.load_b.value()
    }

    /// The report, once the diff finished.
    pub fn report(&self) -> Option<&DiffReport> {
        self.diff.value()
    }

    /// Rebuilds the rows after a report, filter or sort change.
    pub fn refresh_rows(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.rows = match self.diff.value() {
            Some(report) => diff_rows(report, self.filter, &self.name_filter, self.sort),
            None => Vec::new(),
        };
    }
}

/// The diff table's rows: pairs and one-side names passing the filter,
/// sorted by `sort` (column, ascending), ties by natural name order.
pub fn diff_rows(
    report: &DiffReport,
    filter: DiffFilter,
    name_filter: &str,
    sort: (DiffColumn, bool),
) -> Vec<DiffRow> {
    let needle = name_filter.to_lowercase();
    let name_ok = |n: &str| needle.is_empty() || n.to_lowercase().contains(&needle);
    let mut rows: Vec<DiffRow> = Vec::new();
    for (i, t) in report.tensors.iter().enumerate() {
        let keep = match filter {
            DiffFilter::All => true,
            DiffFilter::Changed => !t.status.is_same(),
            DiffFilter::OneSide => false,
            DiffFilter::Structure => {
                matches!(t.status, Status::DtypeChanged | Status::ShapeChanged)
            }
        };
        if keep && name_ok(&t.name) {
            rows.push(DiffRow::Pair(i));
        }
    }
    if matches!(
        filter,
        DiffFilter::All | DiffFilter::Changed | DiffFilter::OneSide
    ) {
        rows.extend(
            (0..report.only_in_a.len())
                .filter(|&i| name_ok(&report.only_in_a[i]))
                .map(DiffRow::OnlyA),
        );
        rows.extend(
            (0..report.only_in_b.len())
                .filter(|&i| name_ok(&report.only_in_b[i]))
                .map(DiffRow::OnlyB),
        );
    }
    let (col, ascending) = sort;
    let metric = |r: &DiffRow| -> Option<f64> {
        let DiffRow::Pair(i) = r else { return None };
        let t = &report.tensors[*i];
        match col {
            DiffColumn::MaxAbs => t.max_abs_diff,
            DiffColumn::MeanAbs => t.mean_abs_diff,
            DiffColumn::RelL2 => t.rel_l2,
            DiffColumn::Cosine => t.cosine,
            DiffColumn::Changed => t.changed_elements.map(|c| c as f64),
            DiffColumn::Mismatch => t.nan_mismatches.map(|c| c as f64),
            DiffColumn::Name | DiffColumn::Status => None,
        }
    };
    let name = |r: &DiffRow| -> &str {
        match r {
            DiffRow::Pair(i) => &report.tensors[*i].name,
            DiffRow::OnlyA(i) => &report.only_in_a[*i],
            DiffRow::OnlyB(i) => &report.only_in_b[*i],
        }
    };
    let status_rank = |r: &DiffRow| match r {
        DiffRow::Pair(i) => report.tensors[*i].status as u8,
        DiffRow::OnlyA(_) => 10,
        DiffRow::OnlyB(_) => 11,
    };
    rows.sort_by(|x, y| {
        let ord = match col {
            DiffColumn::Name => natural_cmp(name(x), name(y)),
            DiffColumn::Status => status_rank(x).cmp(&status_rank(y)),
            _ => match (metric(x), metric(y)) {
                (Some(p), Some(q)) => p.total_cmp(&q),
                // Rows without the figure sort last either way.
                (Some(_), None) => return std::cmp::Ordering::Less,
                (None, Some(_)) => return std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            },
        };
        let ord = if ascending { ord } else { ord.reverse() };
        ord.then_with(|| natural_cmp(name(x), name(y)))
    });
    rows
}
