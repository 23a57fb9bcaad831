//! A training run through time: a series of checkpoints, and how every
//! tensor, layer and role moved from step to step.
//!
//! `steps` finds the checkpoints and their steps; `measure` reads a
//! tensor at one step, or at two consecutive steps in one pass (each
//! checkpoint's bytes are read at most twice: as the newer side of a pair,
//! then as the older); `events` aggregates layers and roles and finds the
//! events (a tensor turning NaN or Inf, frozen tensors, update spikes,
//! tensors that appear or vanish). Only two checkpoints are open at a
//! time: memory grows with the figures, not with the steps.

mod events;
mod measure;
mod steps;

use std::collections::HashMap;
use std::path::PathBuf;

use rayon::prelude::*;
use regex::Regex;
use serde::Serialize;

pub use events::{EventKind, layer_of, role_of};
pub use measure::{Figures, PairFigures};
pub use steps::{StepSource, discover, holds_checkpoint};

use crate::diff::Source;
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Cancelled, Progress};

/// Why a series cannot be measured.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    /// A PATH folder holds no checkpoint.
    #[error("no checkpoint in the folder (no model.safetensors, index or pytorch_model.bin, and no checkpoint files): {}", path.display())]
    NoCheckpoints { path: PathBuf },
    /// No step could be found for a checkpoint.
    #[error("no step for the checkpoint: no trainer_state.json with a global_step beside it, no step=N and no number in its name: {}", path.display())]
    NoStep { path: PathBuf },
    /// Two checkpoints have one step.
    #[error("two checkpoints of step {step}: {} and {}", a.display(), b.display())]
    SameStep { step: u64, a: PathBuf, b: PathBuf },
    /// A checkpoint cannot be opened or read.
    #[error("{message}: {}", path.display())]
    Open { path: PathBuf, message: String },
    /// A file beside a checkpoint, or a folder, cannot be read.
    #[error("{message}: {}", path.display())]
    Io { path: PathBuf, message: String },
    /// No checkpoint given.
    #[error("a series needs at least one checkpoint")]
    Empty,
    /// The work was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl From<Cancelled> for SeriesError {
    fn from(_: Cancelled) -> Self {
        Self::Cancelled
    }
}

impl SeriesError {
    /// The error's kind, as `--json` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoCheckpoints { .. } => "NoCheckpoints",
            Self::NoStep { .. } => "NoStep",
            Self::SameStep { .. } => "SameStep",
            Self::Open { .. } => "Unreadable",
            Self::Io { .. } => "Io",
            Self::Empty => "Usage",
            Self::Cancelled => "Cancelled",
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Self::NoCheckpoints { path }
            | Self::NoStep { path }
            | Self::Open { path, .. }
            | Self::Io { path, .. } => Some(path),
            Self::SameStep { a, .. } => Some(a),
            Self::Empty | Self::Cancelled => None,
        }
    }
}

/// One step of the series.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Step {
    pub step: u64,
    /// The checkpoint, as it was opened.
    pub path: String,
}

/// One tensor through the series: every array one entry per step, `null`
/// where the tensor is missing (and the pair figures at the first step
/// and wherever the tensor is missing or changed shape there or the step
/// before).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TensorSeries {
    pub name: String,
    pub l2_norm: Vec<Option<f64>>,
    pub std: Vec<Option<f64>>,
    pub max_abs: Vec<Option<f64>>,
    pub nonfinite: Vec<Option<u64>>,
    pub update_norm: Vec<Option<f64>>,
    pub update_ratio: Vec<Option<f64>>,
    pub cosine: Vec<Option<f64>>,
    /// The shape at each step (`null` where missing).
    #[serde(skip)]
    pub shapes: Vec<Option<Vec<u64>>>,
    /// Whether each pair's stored bytes were equal (false at the first
    /// step and where there is no pair).
    #[serde(skip)]
    pub same_bytes: Vec<bool>,
}

impl TensorSeries {
    fn new(name: &str, steps: usize) -> Self {
        Self {
            name: name.to_owned(),
            l2_norm: vec![None; steps],
            std: vec![None; steps],
            max_abs: vec![None; steps],
            nonfinite: vec![None; steps],
            update_norm: vec![None; steps],
            update_ratio: vec![None; steps],
            cosine: vec![None; steps],
            shapes: vec![None; steps],
            same_bytes: vec![false; steps],
        }
    }

    /// The figures at step index `i`.
    fn figures(&self, i: usize) -> Option<Figures> {
        Some(Figures {
            l2_norm: *self.l2_norm.get(i)?,
            std: *self.std.get(i)?,
            max_abs: *self.max_abs.get(i)?,
            nonfinite: (*self.nonfinite.get(i)?)?,
        })
    }

    fn set(&mut self, i: usize, f: Figures) {
        self.l2_norm[i] = f.l2_norm;
        self.std[i] = f.std;
        self.max_abs[i] = f.max_abs;
        self.nonfinite[i] = Some(f.nonfinite);
    }

    fn set_pair(&mut self, i: usize, p: PairFigures) {
        self.update_norm[i] = p.update_norm;
        self.update_ratio[i] = p.update_ratio;
        self.cosine[i] = p.cosine;
        self.same_bytes[i] = p.same_bytes;
    }
}

/// A group of tensors (a layer, a role) through the series: `l2_norm` the
/// root of its tensors' squared norms, `update_ratio` the root of their
/// squared update norms over that of their previous squared norms (of the
/// tensors with a pair figure at that step).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupSeries {
    pub l2_norm: Vec<Option<f64>>,
    pub update_ratio: Vec<Option<f64>>,
}

/// A layer (the first `.layers.N.`, `.h.N.` or `.blocks.N.` in a name).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LayerSeries {
    pub layer: u64,
    #[serde(flatten)]
    pub figures: GroupSeries,
}

/// A role: `embeddings`, `attention`, `mlp`, `norms` or `other`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoleSeries {
    pub role: &'static str,
    #[serde(flatten)]
    pub figures: GroupSeries,
}

/// Something worth opening the run for, at a step, with the tensors it is
/// about (sorted).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub step: u64,
    pub tensors: Vec<String>,
}

/// A series measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SeriesReport {
    pub steps: Vec<Step>,
    pub tensors: Vec<TensorSeries>,
    pub layers: Vec<LayerSeries>,
    pub roles: Vec<RoleSeries>,
    pub events: Vec<Event>,
    /// What the user may have meant instead (not in the JSON document):
    /// a folder taken as one checkpoint that also holds a run's.
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl SeriesReport {
    /// "6 checkpoints, steps 100 … 600" (or "1 checkpoint, step 250").
    pub fn span(&self) -> String {
        let first = self.steps.first().map_or(0, |s| s.step);
        let last = self.steps.last().map_or(0, |s| s.step);
        match self.steps.len() {
            1 => format!("1 checkpoint, step {first}"),
            n => format!("{n} checkpoints, steps {first} … {last}"),
        }
    }
}

/// What to measure.
#[derive(Debug, Clone, Default)]
pub struct SeriesOptions {
    /// Only the tensors whose name this finds (an unanchored search).
    pub tensor_regex: Option<Regex>,
}

/// A checkpoint of the series, open, with its items (quantized weights as
/// their decoded values).
struct Open {
    ck: Checkpoint,
    quant: Option<crate::quant::Quantization>,
}

impl Open {
    fn new(path: &std::path::Path) -> Result<Self, SeriesError> {
        let ck = Checkpoint::open_readable(path).map_err(|e| SeriesError::Open {
            path: path.to_owned(),
            message: format!("{e:#}"),
        })?;
        let quant = crate::quant::detect(&ck);
        Ok(Self { ck, quant })
    }

    fn items(&self, options: &SeriesOptions) -> Vec<(String, Source<'_>)> {
        let mut items = crate::diff::items(&self.ck, self.quant.as_ref());
        if let Some(re) = &options.tensor_regex {
            items.retain(|(name, _)| re.is_match(name));
        }
        items
    }
}

/// What one tensor gave at one step.
struct Measured {
    tensor: usize,
    shape: Option<Vec<u64>>,
    figures: Option<Figures>,
    pair: Option<PairFigures>,
}

/// The shape of an item.
fn shape_of(ck: &Checkpoint, source: Source<'_>) -> Option<Vec<u64>> {
    match source {
        Source::Stored(t) => ck.info(t).map(|i| i.shape().to_vec()),
        Source::Logical(lt) => Some(lt.shape().to_vec()),
    }
}

/// Measures the series of `steps` (in step order, as [`discover`] gives
/// them).
pub fn measure(
    steps: &[StepSource],
    options: &SeriesOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<SeriesReport, SeriesError> {
    if steps.is_empty() {
        return Err(SeriesError::Empty);
    }
    let n = steps.len();
    let mut tensors: Vec<TensorSeries> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut report_steps = Vec::with_capacity(n);
    let mut older: Option<Open> = None;
    for (i, s) in steps.iter().enumerate() {
        cancel.check()?;
        let newer = Open::new(&s.path)?;
        if i == 0 {
            // Every checkpoint is read about twice: the first one's size
            // stands for the others'.
            progress.set_total(newer.ck.data_bytes().saturating_mul(2 * n as u64 - 1));
        }
        // A container that is a folder (a DCP step) is named by it, not by
        // the index file inside it.
        let shown = if s.path.is_dir() && crate::format::is_container_folder(&s.path) {
            s.path.as_path()
        } else {
            newer.ck.path()
        };
        report_steps.push(Step {
            step: s.step,
            path: shown.display().to_string(),
        });
        let older_items: HashMap<String, Source<'_>> = older
            .as_ref()
            .map(|o| o.items(options).into_iter().collect())
            .unwrap_or_default();
        let items = newer.items(options);
        for (name, _) in &items {
            index.entry(name.clone()).or_insert_with(|| {
                tensors.push(TensorSeries::new(name, n));
                tensors.len() - 1
            });
        }
        // The tensors of this step in parallel, each in one pass.
        let measured: Vec<Result<Measured, SeriesError>> = items
            .par_iter()
            .map(|(name, source)| {
                let series = &tensors[index[name]];
                let shape = shape_of(&newer.ck, *source);
                let before = i
                    .checked_sub(1)
                    .and_then(|p| Some((series.shapes.get(p)?.clone()?, series.figures(p)?)));
                let paired = match (older.as_ref(), older_items.get(name), before) {
                    (Some(o), Some(&src_a), Some((shape_a, figs_a)))
                        if Some(&shape_a) == shape.as_ref() =>
                    {
                        measure::pair(
                            (&o.ck, src_a, figs_a),
                            (&newer.ck, *source),
                            cancel,
                            progress,
                        )?
                    }
                    _ => None,
                };
                let (figures, pair) = match paired {
                    Some((f, p)) => (Some(f), Some(p)),
                    None => (measure::single(&newer.ck, *source, cancel, progress)?, None),
                };
                Ok(Measured {
                    tensor: index[name],
                    shape,
                    figures,
                    pair,
                })
            })
            .collect();
        for m in measured {
            let m = m?;
            let series = &mut tensors[m.tensor];
            series.shapes[i] = m.shape;
            if let Some(f) = m.figures {
                series.set(i, f);
            }
            if let Some(p) = m.pair {
                series.set_pair(i, p);
            }
        }
        drop(older_items);
        older = Some(newer);
    }
    let steps_out: Vec<u64> = steps.iter().map(|s| s.step).collect();
    let layers = events::layers(&tensors);
    let roles = events::roles(&tensors);
    let events = events::events(&tensors, &steps_out);
    Ok(SeriesReport {
        steps: report_steps,
        tensors,
        layers,
        roles,
        events,
        notes: Vec::new(),
    })
}

/// Finds the checkpoints `paths` name and measures them.
pub fn series(
    paths: &[PathBuf],
    options: &SeriesOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<SeriesReport, SeriesError> {
    if paths.is_empty() {
        return Err(SeriesError::Empty);
    }
    let mut report = measure(&discover(paths)?, options, cancel, progress)?;
    report.notes = steps::notes(paths);
    Ok(report)
}
