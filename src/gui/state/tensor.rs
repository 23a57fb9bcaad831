//! The tensor view's state: the background work (per-tensor statistics,
//! the whole-file scan, heatmaps) in [`TensorState`], and what the panels
//! choose to show in [`ViewState`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use eframe::egui;

use crate::dtype::decode::BitOrder;
use crate::gui::model::ScanFigures;
use crate::gui::task::Task;
use crate::stats::heatmap::{HeatWindow, Heatmap, HeatmapError, HeatmapRequest, Pooling};
use crate::stats::{StatsError, TensorStats};
use egui_plot::PlotPoint;

/// Per-tensor statistics kept, so going back to a tensor shows them at once.
const STATS_KEPT: usize = 64;
/// Heatmaps kept (a few settings of the tensor looked at).
const HEATMAPS_KEPT: usize = 4;

/// What a statistics result is of: the tensor (index into `ck.tensors`)
/// and the F6 bit order it was decoded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsKey {
    /// Index into the checkpoint's tensors.
    pub index: usize,
    /// Only F6 tensors depend on it.
    pub order: BitOrder,
    /// A quantized weight's row: the statistics of its decoded values (of
    /// the logical tensor the tensor is a part of), not of the part.
    pub dequant: bool,
}

/// What a heatmap is of: the tensor and the request (axes, pooling, size).
/// A quantized weight's heatmap is of its decoded values (`true`), not of
/// the part whose row stands for it.
pub type HeatKey = (usize, HeatmapRequest, bool);

/// The scan's results as they arrive: the job writes figures per tensor and
/// bumps `generation`; the UI copies them only when it changed.
#[derive(Debug, Default)]
pub struct ScanProgress {
    /// Bumped after every batch the job stores.
    pub generation: AtomicU64,
    /// Figures per tensor (index into `ck.tensors`), `None` until scanned.
    pub figures: Mutex<Vec<Option<ScanFigures>>>,
}

impl ScanProgress {
    /// Room for `tensors` figures.
    pub fn new(tensors: usize) -> Self {
        Self {
            generation: AtomicU64::new(0),
            figures: Mutex::new(vec![None; tensors]),
        }
    }

    /// The generation last stored.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The scan's summary line, computed when figures arrive, not per frame.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScanSummary {
    /// Tensors with a NaN or ±Inf.
    pub non_finite_tensors: usize,
    /// Tensors whose finite values are all zero.
    pub all_zero_tensors: usize,
    /// The tensor with the largest |x| and that value.
    pub largest: Option<(usize, f64)>,
}

impl ScanSummary {
    /// Summarises scan figures.
    pub fn of(figures: &[Option<ScanFigures>]) -> Self {
        let mut s = Self::default();
        for (i, f) in figures.iter().enumerate() {
            let Some(f) = f else { continue };
            if f.non_finite > 0 {
                s.non_finite_tensors += 1;
            }
            if f.min == Some(0.0) && f.max == Some(0.0) {
                s.all_zero_tensors += 1;
            }
            if let (Some(lo), Some(hi)) = (f.min, f.max) {
                let m = lo.abs().max(hi.abs());
                if s.largest.is_none_or(|(_, b)| m > b) {
                    s.largest = Some((i, m));
                }
            }
        }
        s
    }
}

/// A whole-file scan: its job, and the figures so far (kept after the job
/// ends or is cancelled).
#[derive(Debug)]
pub struct ScanState {
    /// Where the job stores figures.
    pub live: std::sync::Arc<ScanProgress>,
    /// The UI's copy of `live.figures`, as of `generation`.
    pub figures: Vec<Option<ScanFigures>>,
    /// The generation `figures` was copied at.
    pub generation: u64,
    /// Summary of `figures`.
    pub summary: ScanSummary,
    /// The job; its value is `()` since the figures arrive through `live`.
    pub task: Task<(), (), StatsError>,
}

impl ScanState {
    /// Copies new figures from the job; true when they changed.
    pub fn refresh(&mut self) -> bool {
        let generation = self.live.generation();
        if generation == self.generation {
            return false;
        }
        if let Ok(figures) = self.live.figures.lock() {
            self.figures.clone_from(&figures);
        }
        self.generation = generation;
        self.summary = ScanSummary::of(&self.figures);
        true
    }
}

/// The tensor view's background work.
pub struct TensorState {
    /// Statistics of the tensors looked at, the last 64 kept.
    pub stats: Task<StatsKey, TensorStats, StatsError>,
    /// The whole-file scan, once started.
    pub scan: Option<ScanState>,
    /// The heatmap shown (the previous one stays while a new one runs).
    pub heatmap: Task<HeatKey, Heatmap, HeatmapError>,
    /// Bytes of a remote file brought into the cache for the value grid:
    /// (shard, start, end).
    pub fetch: Task<(usize, u64, u64), (), String>,
    /// Tensors read into scratch space in C order for the value grid; the
    /// outcome keeps their bytes (dropping it gives the space back).
    pub prepared: Task<crate::format::TensorRef, crate::source::Fetched, String>,
}

impl Default for TensorState {
    fn default() -> Self {
        Self {
            stats: Task::keeping(STATS_KEPT),
            scan: None,
            heatmap: Task::keeping(HEATMAPS_KEPT),
            fetch: Task::keeping(8),
            prepared: Task::keeping(4),
        }
    }
}

impl TensorState {
    /// True while one of its jobs runs.
    pub fn is_busy(&self) -> bool {
        self.stats.is_running()
            || self.heatmap.is_running()
            || self.fetch.is_running()
            || self.prepared.is_running()
            || self.scan.as_ref().is_some_and(|s| s.task.is_running())
    }
}

/// Which page the side panel shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SidePage {
    /// The selected tensor (the overview while none is).
    #[default]
    Tensor,
    /// The checkpoint's overview.
    Overview,
    /// File facts and warnings.
    File,
    /// `__metadata__`.
    Metadata,
}

/// A statistic of the scan, per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LayerStat {
    /// Standard deviation.
    #[default]
    Std,
    /// max |x|.
    MaxAbs,
    /// L2 norm.
    L2,
    /// Mean.
    Mean,
    /// NaN + Inf count.
    NonFinite,
    /// Values beyond 6σ.
    Outliers,
}

impl LayerStat {
    /// Every statistic, in the menu's order.
    pub const ALL: [LayerStat; 6] = [
        LayerStat::Std,
        LayerStat::MaxAbs,
        LayerStat::L2,
        LayerStat::Mean,
        LayerStat::NonFinite,
        LayerStat::Outliers,
    ];

    /// Its name in the menu and on the axis.
    pub fn label(self) -> &'static str {
        match self {
            LayerStat::Std => "std",
            LayerStat::MaxAbs => "max |x|",
            LayerStat::L2 => "L2 norm",
            LayerStat::Mean => "mean",
            LayerStat::NonFinite => "NaN + Inf",
            LayerStat::Outliers => "beyond 6σ",
        }
    }

    /// Its value in a tensor's scan figures.
    pub fn of(self, f: &ScanFigures) -> Option<f64> {
        match self {
            LayerStat::Std => f.std,
            LayerStat::MaxAbs => match (f.min, f.max) {
                (Some(lo), Some(hi)) => Some(lo.abs().max(hi.abs())),
                _ => None,
            },
            LayerStat::L2 => f.l2_norm,
            LayerStat::Mean => f.mean,
            LayerStat::NonFinite => Some(f.non_finite as f64),
            LayerStat::Outliers => f.outliers.map(|o| o as f64),
        }
    }
}

/// The per-layer chart's lines: one per role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerLines {
    /// `(role, points [layer, value], the tensor of each point)`, roles in
    /// name order.
    pub lines: Vec<(String, Vec<PlotPoint>, Vec<usize>)>,
    /// Roles left out beyond [`MAX_LAYER_LINES`].
    pub dropped: usize,
}

/// Lines the per-layer chart draws at most (the roles with most points).
pub const MAX_LAYER_LINES: usize = 24;

impl LayerLines {
    /// The lines over items `0..count` named `name(i)` whose figure is
    /// `value(i)` (a tensor's scan statistic, a pair's change). An item's
    /// layer is the first number in its name and its role the rest after
    /// it; further numbers (experts) become `*` and such a role keeps its
    /// largest value per layer.
    pub fn build<'a>(
        count: usize,
        name: impl Fn(usize) -> &'a str,
        value: impl Fn(usize) -> Option<f64>,
    ) -> Self {
        use std::collections::BTreeMap;
        let mut roles: BTreeMap<String, BTreeMap<u64, (f64, usize)>> = BTreeMap::new();
        for i in 0..count {
            let Some(value) = value(i).filter(|v| v.is_finite()) else {
                continue;
            };
            let n = name(i);
            let parts: Vec<&str> = n.split('.').collect();
            let number = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
            let Some(k) = parts.iter().position(|p| number(p)) else {
                continue;
            };
            let Some(layer) = parts.get(k).and_then(|p| p.parse::<u64>().ok()) else {
                continue;
            };
            let rest: Vec<&str> = parts
                .iter()
                .skip(k + 1)
                .map(|p| if number(p) { "*" } else { p })
                .collect();
            let role = if rest.is_empty() {
                "(layer)".to_owned()
            } else {
                rest.join(".")
            };
            let slot = roles
                .entry(role)
                .or_default()
                .entry(layer)
                .or_insert((value, i));
            if value > slot.0 {
                *slot = (value, i);
            }
        }
        let mut lines: Vec<(String, Vec<PlotPoint>, Vec<usize>)> = roles
            .into_iter()
            .map(|(role, layers)| {
                let points = layers
                    .iter()
                    .map(|(l, (v, _))| PlotPoint::new(*l as f64, *v))
                    .collect();
                let tensors = layers.values().map(|(_, i)| *i).collect();
                (role, points, tensors)
            })
            .collect();
        let mut dropped = 0;
        if lines.len() > MAX_LAYER_LINES {
            lines.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
            dropped = lines.len() - MAX_LAYER_LINES;
            lines.truncate(MAX_LAYER_LINES);
            lines.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Self { lines, dropped }
    }

    /// The tensor of the point nearest to `at` (in screen points, through
    /// `to_screen`), when one lies within `radius`.
    pub fn nearest(
        &self,
        at: [f32; 2],
        radius: f32,
        to_screen: impl Fn(&PlotPoint) -> [f32; 2],
    ) -> Option<usize> {
        let mut best: Option<(f32, usize)> = None;
        for (_, points, tensors) in &self.lines {
            for (p, &t) in points.iter().zip(tensors) {
                let s = to_screen(p);
                let d = (s[0] - at[0]).hypot(s[1] - at[1]);
                if d <= radius && best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, t));
                }
            }
        }
        best.map(|(_, t)| t)
    }
}

/// Which part of the tensor view is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Section {
    /// Statistics and histograms.
    #[default]
    Stats,
    /// The paged value grid.
    Values,
    /// The heatmap of two chosen axes.
    Heatmap,
    /// A quantized weight's codes and scales (stored tensors show their
    /// statistics instead).
    Quant,
}

/// Which histogram the statistics show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistKind {
    /// Linear bins over [min, max].
    #[default]
    Linear,
    /// Count per power of two of |x|.
    Log2,
    /// One bar per representable value (≤ 8-bit floats).
    Codes,
}

/// The page of a long GGUF array the metadata pane shows.
#[derive(Debug, Clone, Default)]
pub struct ArrayPage {
    /// The page shown (`None` before one is read).
    pub page: Option<u64>,
    /// Its rows, as shown.
    pub rows: Vec<String>,
    /// Where each page read so far starts in the file (page 0 at the
    /// array's first element): paging on reads one page, not those before.
    pub starts: Vec<u64>,
}

/// What the panels of one tab show and how: the panels' own state, bound to
/// their widgets. Changing it never starts work or changes what the app
/// holds; the runner may reset it (a new tensor goes back to page one).
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent view toggles, each bound to one checkbox"
)]
pub struct ViewState {
    /// A run tab's Run view choices.
    pub run: super::RunView,
    /// The side panel's page.
    pub page: SidePage,
    /// The metadata pane's search text.
    pub meta_filter: String,
    /// A long GGUF array's page shown, by key.
    pub meta_pages: std::collections::HashMap<String, ArrayPage>,
    /// The tensor view's open section.
    pub section: Section,
    /// First element shown in the value grid (a multiple of the page size).
    pub value_start: u64,
    /// The "jump to index" box: a flat index or `i, j, …`.
    pub jump_text: String,
    /// How F6 elements are unpacked (the format fixes no order).
    pub f6_order: BitOrder,
    /// The histogram shown.
    pub hist: HistKind,
    /// Counts on a log scale.
    pub log_counts: bool,
    /// Show the real and imaginary parts of a complex tensor too.
    pub show_parts: bool,
    /// The heatmap's row axis.
    pub heat_rows: usize,
    /// The heatmap's column axis.
    pub heat_cols: usize,
    /// The index chosen on every other axis (ignored on the two shown).
    pub heat_fixed: Vec<u64>,
    /// How a block of elements becomes one cell.
    pub heat_pooling: Pooling,
    /// The tensor the heatmap axes were chosen for (new axes for another).
    pub heat_tensor: Option<usize>,
    /// The region of the two axes the heatmap zooms into (`None`: all),
    /// with the axes and fixed indices it was chosen for.
    pub heat_window: Option<(HeatWindow, usize, usize, Vec<u64>)>,
    /// The rectangle being dragged over the heatmap (screen points).
    pub heat_drag: Option<(egui::Pos2, egui::Pos2)>,
    /// The heatmap's texture and the key it was drawn from.
    pub heat_texture: Option<(HeatKey, egui::TextureHandle)>,
    /// The tensor the value grid's page belongs to (page one for another).
    pub values_tensor: Option<usize>,
    /// A stored part of the selected quantized weight, opened from its
    /// parts list: the view shows it as stored, not the weight's values.
    pub raw_part: Option<usize>,
    /// Give the filter box focus next frame (Ctrl+F).
    pub focus_filter: bool,
    /// Scroll the table to this row position next frame.
    pub scroll_to: Option<usize>,
    /// Draw the per-layer chart above the diff table.
    pub show_layer_chart: bool,
    /// The statistic the overview's per-layer chart plots.
    pub layer_stat: LayerStat,
    /// The measure of change the diff's per-layer chart plots.
    pub diff_stat: super::DiffStat,
    /// Its lines, for the scan generation and statistic they were built
    /// for (rebuilt only when either changes), and when.
    pub layer_lines: Option<(u64, LayerStat, LayerLines, std::time::Instant)>,
    /// The |Δ| map's texture and the pair it shows.
    pub delta_texture: Option<(usize, egui::TextureHandle)>,
}

impl Default for ViewState {
    fn default() -> Self {
        Self {
            run: super::RunView::default(),
            page: SidePage::default(),
            meta_filter: String::new(),
            meta_pages: std::collections::HashMap::new(),
            section: Section::default(),
            value_start: 0,
            jump_text: String::new(),
            f6_order: BitOrder::default(),
            hist: HistKind::default(),
            log_counts: false,
            show_parts: false,
            heat_rows: 0,
            heat_cols: 0,
            heat_fixed: Vec::new(),
            heat_pooling: Pooling::default(),
            heat_tensor: None,
            heat_window: None,
            heat_drag: None,
            heat_texture: None,
            values_tensor: None,
            raw_part: None,
            focus_filter: false,
            scroll_to: None,
            show_layer_chart: true,
            layer_stat: LayerStat::default(),
            diff_stat: super::DiffStat::default(),
            layer_lines: None,
            delta_texture: None,
        }
    }
}

#[cfg(test)]
mod layer_tests {
    use super::*;

    fn fig(std: f64) -> ScanFigures {
        ScanFigures {
            std: Some(std),
            ..ScanFigures::default()
        }
    }

    #[test]
    fn lines_per_role_with_experts_folded_and_a_cap() {
        let names = [
            "model.layers.0.mlp.experts.0.w1",
            "model.layers.0.mlp.experts.1.w1",
            "model.layers.1.mlp.experts.0.w1",
            "model.layers.1.q.weight",
            "model.norm.weight",
            "model.layers.2",
        ];
        let figures = [
            Some(fig(1.0)),
            Some(fig(3.0)),
            Some(fig(2.0)),
            Some(fig(5.0)),
            Some(fig(9.0)),
            None,
        ];
        let std_of = |f: &[Option<ScanFigures>], i: usize| f[i].and_then(|f| f.std);
        let lines = LayerLines::build(figures.len(), |i| names[i], |i| std_of(&figures, i));
        let roles: Vec<&str> = lines.lines.iter().map(|(r, _, _)| r.as_str()).collect();
        assert_eq!(roles, ["mlp.experts.*.w1", "q.weight"]);
        // Layer 0's experts: the larger value, and its tensor.
        let (_, points, tensors) = &lines.lines[0];
        assert_eq!(
            points.iter().map(|p| (p.x, p.y)).collect::<Vec<_>>(),
            [(0.0, 3.0), (1.0, 2.0)]
        );
        assert_eq!(tensors, &[1, 2]);
        // Nearest point on screen (here the plot's own coordinates).
        let to_screen = |p: &PlotPoint| [p.x as f32 * 10.0, p.y as f32 * 10.0];
        assert_eq!(lines.nearest([10.0, 49.0], 5.0, to_screen), Some(3));
        assert_eq!(lines.nearest([100.0, 100.0], 5.0, to_screen), None);
        // More roles than the cap: those with most layers stay.
        let many: Vec<String> = (0..40)
            .map(|r| format!("layers.{}.r{r:02}", i32::from(r >= 30)))
            .chain((0..30).map(|r| format!("layers.1.r{r:02}")))
            .collect();
        let figures = vec![Some(fig(1.0)); many.len()];
        let lines = LayerLines::build(figures.len(), |i| many[i].as_str(), |i| std_of(&figures, i));
        assert_eq!(lines.lines.len(), MAX_LAYER_LINES);
        assert_eq!(lines.dropped, 40 - MAX_LAYER_LINES);
        assert!(lines.lines.iter().all(|(_, p, _)| p.len() == 2));
    }
}
