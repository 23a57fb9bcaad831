//! A training run opened as a series of checkpoints (*Open series…*): the
//! series job and its report, shown by the Run view instead of a table.

use std::path::PathBuf;
use std::sync::Arc;

use crate::gui::task::Task;
use crate::series::{SeriesError, SeriesReport};

/// What the heat strip's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunRows {
    /// One row per layer (the aggregate of its tensors).
    #[default]
    Layers,
    /// One row per tensor.
    Tensors,
}

/// What the heat strip's colour shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunMeasure {
    /// ‖W_t − W_{t−1}‖ / ‖W_{t−1}‖.
    #[default]
    UpdateRatio,
    /// ‖W_t‖.
    L2Norm,
    /// The standard deviation of W_t (tensors; layers show the norm).
    Std,
}

impl RunMeasure {
    /// Every measure, in the menu's order.
    pub const ALL: [RunMeasure; 3] = [Self::UpdateRatio, Self::L2Norm, Self::Std];

    /// Its name in the menu and the legend.
    pub fn label(self) -> &'static str {
        match self {
            Self::UpdateRatio => "update ratio |ΔW| / |W|",
            Self::L2Norm => "L2 norm",
            Self::Std => "std",
        }
    }
}

/// A series of checkpoints being measured, or measured.
pub struct RunState {
    /// The checkpoints (or folders of them) as given.
    pub paths: Vec<PathBuf>,
    /// The series job: its report once done.
    pub task: Task<(), Arc<SeriesReport>, SeriesError>,
}

impl RunState {
    /// A run of `paths`, not yet started.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        Self {
            paths,
            task: Task::default(),
        }
    }

    /// The report, once measured.
    pub fn report(&self) -> Option<&SeriesReport> {
        self.task.value().map(AsRef::as_ref)
    }
}

/// The strip's rows and colour range, kept until what they were made
/// from changes (not rebuilt per frame: a run may have 100,000 tensors).
#[derive(Debug, Clone, PartialEq)]
pub struct StripCache {
    /// What the rows were made for: rows, measure, filter, and the
    /// report's tensor and step counts.
    pub key: (RunRows, RunMeasure, String, usize, usize),
    /// The rows: layer or tensor indices into the report.
    pub rows: Vec<usize>,
    /// log10 of the smallest and largest positive value shown.
    pub range: Option<(f64, f64)>,
    /// Each layer's NaN and Inf count per step (its tensors' sum).
    pub layer_nonfinite: Vec<Vec<Option<u64>>>,
}

/// The Run view's own choices (bound to its widgets).
#[derive(Debug, Clone, Default)]
pub struct RunView {
    /// The strip's rows and scale, for the current choices.
    pub cache: Option<StripCache>,
    /// Layers or tensors as rows.
    pub rows: RunRows,
    /// The colour's measure.
    pub measure: RunMeasure,
    /// The tensor whose figures the line charts show (index into the
    /// report's tensors).
    pub chosen: Option<usize>,
    /// The tensor rows' name filter.
    pub filter: String,
}
