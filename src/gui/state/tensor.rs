//! The tensor view's state: the background work (per-tensor statistics,
//! the whole-file scan, heatmaps) in [`TensorState`], and what the panels
//! choose to show in [`ViewState`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use eframe::egui;

use crate::dtype::decode::BitOrder;
use crate::gui::model::ScanFigures;
use crate::gui::task::Task;
use crate::stats::heatmap::{Heatmap, HeatmapError, HeatmapRequest, Pooling};
use crate::stats::{StatsError, TensorStats};

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
}

impl Default for TensorState {
    fn default() -> Self {
        Self {
            stats: Task::keeping(STATS_KEPT),
            scan: None,
            heatmap: Task::keeping(HEATMAPS_KEPT),
        }
    }
}

impl TensorState {
    /// True while one of its jobs runs.
    pub fn is_busy(&self) -> bool {
        self.stats.is_running()
            || self.heatmap.is_running()
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

/// What the panels of one tab show and how: the panels' own state, bound to
/// their widgets. Changing it never starts work or changes what the app
/// holds; the runner may reset it (a new tensor goes back to page one).
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent view toggles, each bound to one checkbox"
)]
pub struct ViewState {
    /// The side panel's page.
    pub page: SidePage,
    /// The metadata pane's search text.
    pub meta_filter: String,
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
    /// The |Δ| map's texture and the pair it shows.
    pub delta_texture: Option<(usize, egui::TextureHandle)>,
}

impl Default for ViewState {
    fn default() -> Self {
        Self {
            page: SidePage::default(),
            meta_filter: String::new(),
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
            heat_texture: None,
            values_tensor: None,
            raw_part: None,
            focus_filter: false,
            scroll_to: None,
            show_layer_chart: true,
            delta_texture: None,
        }
    }
}
