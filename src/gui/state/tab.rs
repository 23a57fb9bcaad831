//! One open file: its loading task, the table's filter, sort and
//! selection, the tensor view, and a comparison when one is open.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::compare::CompareState;
use super::loaded::Loaded;
use super::tensor::TensorState;
use crate::dtype::Dtype;
use crate::format::LoadError;
use crate::gui::model::{
    Column, Direction, KindFilter, NameFilter, TreeRow, tree_rows, visible_rows,
};
use crate::gui::task::Task;

/// File names that every checkpoint folder of a kind holds: a tab shows
/// them with their folder.
const GENERIC_NAMES: [&str; 7] = [
    "model.safetensors",
    // A distributed checkpoint's index: its folder is the checkpoint.
    ".metadata",
    "pytorch_model.bin",
    "model.pt",
    "model.ckpt",
    "weights.npz",
    "model.gguf",
];

/// How a click changes the selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectMode {
    /// A plain click: select only this.
    Replace,
    /// Ctrl-click: add or remove this.
    Toggle,
    /// Shift-click: select the range from the anchor, in the order shown.
    Range,
}

/// The table's filter, sort and selection, and the rows they give.
#[derive(Debug)]
pub struct TableState {
    /// The filter box's text, as typed.
    pub filter_text: String,
    /// The parsed filter, or why the regex is bad.
    pub filter: Result<NameFilter, String>,
    /// Show only this dtype.
    pub dtype: Option<Dtype>,
    /// Quantized weights only, plain tensors only, or both.
    pub kind: KindFilter,
    /// `None` is file order.
    pub sort: Option<(Column, Direction)>,
    /// Tree groups shown open, by full dotted prefix.
    pub expanded: BTreeSet<String>,
    /// Indices into `ck.tensors`, filtered and sorted: recomputed only when
    /// `dirty`, never per frame.
    pub rows: Vec<usize>,
    /// The tree view's lines, built from `rows`.
    pub tree: Vec<TreeRow>,
    /// The filter, sort, tree or scan figures changed since `rows` was built.
    pub dirty: bool,
    /// Selected tensors (indices into `ck.tensors`).
    pub selection: BTreeSet<usize>,
    /// Where a shift-click range starts.
    pub anchor: Option<usize>,
    /// The tensor the tensor view shows: the last clicked.
    pub cursor: Option<usize>,
}

impl Default for TableState {
    fn default() -> Self {
        Self {
            filter_text: String::new(),
            filter: Ok(NameFilter::All),
            dtype: None,
            kind: KindFilter::All,
            sort: None,
            expanded: BTreeSet::new(),
            rows: Vec::new(),
            tree: Vec::new(),
            dirty: true,
            selection: BTreeSet::new(),
            anchor: None,
            cursor: None,
        }
    }
}

impl TableState {
    /// Changes the selection as a click on tensor `index` would.
    pub fn select(&mut self, index: usize, mode: SelectMode) {
        match mode {
            SelectMode::Replace => {
                self.selection.clear();
                self.selection.insert(index);
                self.anchor = Some(index);
            }
            SelectMode::Toggle => {
                if !self.selection.remove(&index) {
                    self.selection.insert(index);
                }
                self.anchor = Some(index);
            }
            SelectMode::Range => {
                let anchor = self.anchor.unwrap_or(index);
                let pos = |i: usize| self.rows.iter().position(|&r| r == i);
                if let (Some(a), Some(b)) = (pos(anchor), pos(index)) {
                    let (lo, hi) = (a.min(b), a.max(b));
                    self.selection = self.rows[lo..=hi].iter().copied().collect();
                } else {
                    self.selection.insert(index);
                }
            }
        }
        self.cursor = Some(index);
    }

    /// Selects nothing and forgets the cursor.
    pub fn clear_selection(&mut self) {
        self.selection.clear();
        self.anchor = None;
        self.cursor = None;
    }

    /// Moves the cursor by `delta` rows in the order shown and selects only
    /// it; returns its row position (to scroll to).
    pub fn move_cursor(&mut self, delta: isize) -> Option<usize> {
        let last = self.rows.len().checked_sub(1)?;
        let pos = self
            .cursor
            .and_then(|c| self.rows.iter().position(|&r| r == c));
        let next = pos.map_or(0, |p| p.saturating_add_signed(delta).min(last));
        let index = *self.rows.get(next)?;
        self.select(index, SelectMode::Replace);
        Some(next)
    }
}

/// One open file, shown as one tab.
pub struct Tab {
    /// What was opened (absolute; the checkpoint's own path once loaded).
    pub path: PathBuf,
    /// Opening and parsing the header, keyed by path.
    pub load: Task<PathBuf, Loaded, LoadError>,
    /// When the load started: progress shows only when it takes a moment.
    pub load_started: Instant,
    /// Filter, sort, selection and the rows shown.
    pub table: TableState,
    /// The tensor view's background work.
    pub tensor: TensorState,
    /// A comparison with a second checkpoint, when one is open.
    pub compare: Option<CompareState>,
    /// A training run: the tab shows a series of checkpoints, not one.
    pub run: Option<super::RunState>,
}

impl Tab {
    /// A tab for `path`, not yet loading.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            load: Task::default(),
            load_started: Instant::now(),
            table: TableState::default(),
            tensor: TensorState::default(),
            compare: None,
            run: None,
        }
    }

    /// A tab for the series of checkpoints `paths` (its job not started).
    pub fn series(paths: Vec<PathBuf>) -> Self {
        let mut tab = Self::new(paths.first().cloned().unwrap_or_default());
        tab.run = Some(super::RunState::new(paths));
        tab
    }

    /// The tab bar's title: the file name, or the folder of a shard index.
    pub fn title(&self) -> String {
        if self.run.is_some() {
            let name = self.path.file_name().map_or_else(
                || self.path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            return format!("Run: {name}");
        }
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let parent = self.path.parent().and_then(Path::file_name);
        if name.ends_with(".index.json")
            && let Some(parent) = parent
        {
            return format!("{} (sharded)", parent.to_string_lossy());
        }
        // The names every checkpoint folder holds say nothing alone (a
        // run's steps are all `model.safetensors`): their folder leads.
        if GENERIC_NAMES.contains(&name.as_str())
            && let Some(parent) = parent
        {
            return format!("{}/{name}", parent.to_string_lossy());
        }
        name
    }

    /// The opened checkpoint, once ready.
    pub fn loaded(&self) -> Option<&Loaded> {
        self.load.value()
    }

    /// True while one of the tab's jobs runs.
    pub fn is_busy(&self) -> bool {
        self.load.is_running()
            || self.tensor.is_busy()
            || self.compare.as_ref().is_some_and(CompareState::is_busy)
            || self.run.as_ref().is_some_and(|r| r.task.is_running())
    }

    /// Rebuilds the rows shown after a filter, sort, tree or scan change.
    pub fn refresh_rows(&mut self, tree_view: bool) {
        if !self.table.dirty {
            return;
        }
        let Some(loaded) = self.load.value() else {
            return;
        };
        self.table.dirty = false;
        let filter = self.table.filter.clone().unwrap_or(NameFilter::All);
        let scan = self.tensor.scan.as_ref().map(|s| s.figures.as_slice());
        let lookup = |i: usize| scan.and_then(|s| s.get(i).copied().flatten());
        self.table.rows = visible_rows(
            &loaded.ck,
            &loaded.name_rank,
            &filter,
            self.table.dtype,
            self.table.sort,
            &lookup,
            loaded.quant.as_deref(),
            self.table.kind,
        );
        self.table.tree = if tree_view {
            tree_rows(
                &loaded.ck,
                &self.table.rows,
                &self.table.expanded,
                loaded.quant.as_deref(),
            )
        } else {
            Vec::new()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_name_the_file_and_the_folder_of_generic_names() {
        let t = |p: &str| Tab::new(PathBuf::from(p)).title();
        assert_eq!(t("/m/llama.safetensors"), "llama.safetensors");
        assert_eq!(
            t("/run/checkpoint-500/model.safetensors"),
            "checkpoint-500/model.safetensors"
        );
        assert_eq!(
            t("/snap/llama/model.safetensors.index.json"),
            "llama (sharded)"
        );
        assert_eq!(t("model.safetensors"), "model.safetensors");
        assert_eq!(
            Tab::series(vec![PathBuf::from("/x/run20")]).title(),
            "Run: run20"
        );
    }
}
