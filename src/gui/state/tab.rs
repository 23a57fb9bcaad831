//! One open file: its loading task, the table's filter, sort and
//! selection, the tensor view, and a comparison when one is open.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::compare::CompareState;
use super::tensor::TensorState;
use crate::dtype::Dtype;
use crate::format::{Checkpoint, LoadError};
use crate::gui::model::{
    Column, Direction, DtypeTotals, KindFilter, NameFilter, QuantRows, TreeRow, dtype_totals,
    name_ranks, tree_rows, visible_rows,
};
use crate::gui::task::Task;

/// A checkpoint that opened, with what every frame needs computed once.
#[derive(Debug)]
pub struct Loaded {
    /// Shared with the jobs that read it.
    pub ck: Arc<Checkpoint>,
    /// Tensors, parameters and bytes per dtype (writer order), and overall.
    pub totals: (Vec<(Dtype, DtypeTotals)>, DtypeTotals),
    /// Each tensor's rank in natural name order, so sorting by name sorts
    /// integers.
    pub name_rank: Vec<u32>,
    /// The `__metadata__` entries (the index's for a sharded model), sorted.
    pub metadata: Vec<MetaEntry>,
    /// The quantized weights, when the checkpoint has any.
    pub quant: Option<Arc<QuantRows>>,
    /// What the overview shows, computed with the rest.
    pub overview: Overview,
}

/// The overview's figures of a checkpoint, computed once when it opens.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    /// The values the tensors hold, a quantized weight counted by its
    /// logical shape (not its packed words).
    pub parameters: u64,
    /// The largest tensors by bytes (indices into `ck.tensors`), largest first.
    pub largest: Vec<usize>,
    /// The architecture from `config.json`: `None` without one, `Err` with
    /// why one could not be used.
    pub arch: Option<Result<crate::arch::Architecture, String>>,
    /// The tensors checked against the architecture.
    pub checks: Vec<crate::arch::Check>,
    /// The characters of the longest tensor name (at most 120): the table
    /// keeps its Name column wide enough to read them.
    pub longest_name: usize,
}

/// How many of the largest tensors the overview lists.
pub const LARGEST_SHOWN: usize = 8;

impl Overview {
    fn of(ck: &Checkpoint, quant: Option<&QuantRows>, stored_parameters: u64) -> Self {
        let parameters = quant.map_or(stored_parameters, |q| {
            let plain: u64 = ck
                .entries()
                .filter(|(t, _)| q.quant.owner(*t).is_none())
                .map(|(_, i)| i.numel())
                .fold(0, u64::saturating_add);
            q.quant
                .tensors()
                .iter()
                .map(crate::quant::LogicalTensor::numel)
                .fold(plain, u64::saturating_add)
        });
        // The k largest in O(n log k); a quantized weight once, by the
        // row that stands for it, with all its parts' bytes.
        let mut heap = std::collections::BinaryHeap::new();
        for (i, (t, info)) in ck.entries().enumerate() {
            let bytes = match quant {
                Some(q) if q.quant.owner(t).is_some() => match q.logical_at(i) {
                    Some(lt) => lt.stored_bytes(ck),
                    None => continue,
                },
                _ => info.nbytes(),
            };
            heap.push(std::cmp::Reverse((bytes, std::cmp::Reverse(i))));
            if heap.len() > LARGEST_SHOWN {
                heap.pop();
            }
        }
        let largest = heap
            .into_sorted_vec()
            .into_iter()
            .map(|std::cmp::Reverse((_, std::cmp::Reverse(i)))| i)
            .collect();
        let arch = crate::arch::read(ck.path()).transpose();
        let checks = match &arch {
            Some(Ok(a)) => crate::arch::check(a, ck, parameters),
            _ => Vec::new(),
        };
        let longest_name = ck
            .entries()
            .map(|(_, i)| i.name().chars().take(120).count())
            .max()
            .unwrap_or(0);
        Self {
            parameters,
            largest,
            arch,
            checks,
            longest_name,
        }
    }
}

impl Loaded {
    /// What the explorer shows of `ck`, computed once (in the job that
    /// opened it).
    pub fn new(ck: Checkpoint) -> Self {
        let totals = dtype_totals(&ck);
        let name_rank = name_ranks(&ck);
        let metadata = crate::diff::metadata_of(&ck)
            .into_iter()
            .map(|(key, value)| MetaEntry::new(key, value))
            .collect();
        let quant = crate::quant::detect(&ck).map(|q| Arc::new(QuantRows::new(&ck, q)));
        let overview = Overview::of(&ck, quant.as_deref(), totals.1.parameters);
        Self {
            ck: Arc::new(ck),
            totals,
            name_rank,
            metadata,
            quant,
            overview,
        }
    }
}

/// One `__metadata__` entry, with what the metadata pane shows of it.
#[derive(Debug, Clone)]
pub struct MetaEntry {
    /// The key, as the file has it.
    pub key: String,
    /// The value, as the file has it (what *copy* copies).
    pub value: String,
    /// Key and value in lower case, for the search box.
    pub search: String,
    /// The value pretty-printed and escaped, when it is a JSON object or
    /// array (configs often are), with its line count.
    pub json: Option<(String, usize)>,
}

/// Characters of a pretty-printed JSON value shown at most.
const MAX_JSON_CHARS: usize = 100_000;

impl MetaEntry {
    /// Prepares an entry for the pane.
    pub fn new(key: String, value: String) -> Self {
        let json = serde_json::from_str::<serde_json::Value>(&value)
            .ok()
            .filter(|j| j.is_object() || j.is_array())
            .and_then(|j| serde_json::to_string_pretty(&j).ok())
            .map(|pretty| {
                let lines = pretty.lines().count();
                (crate::text::safe_multiline(&pretty, MAX_JSON_CHARS), lines)
            });
        let search = format!("{}\n{}", key.to_lowercase(), value.to_lowercase());
        Self {
            key,
            value,
            search,
            json,
        }
    }
}

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
        }
    }

    /// The tab bar's title: the file name, or the folder of a shard index.
    pub fn title(&self) -> String {
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if name.ends_with(".index.json")
            && let Some(parent) = self.path.parent().and_then(Path::file_name)
        {
            return format!("{} (sharded)", parent.to_string_lossy());
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
