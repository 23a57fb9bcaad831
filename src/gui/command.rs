//! [`Command`]: everything a user (or a finished job) can ask the explorer
//! to do. Panels and input handling push commands; the runner executes
//! them once a frame, in order. Commands without a tab index act on the
//! active tab.

use std::path::PathBuf;

use super::model::Column;
use super::state::{
    DialogPurpose, DiffColumn, DiffFilter, HeatKey, SelectMode, StatsKey, WriteForm,
};
use crate::dtype::Dtype;

impl Command {
    /// The command that opens `path` for what a dialog was shown for.
    pub fn opening(purpose: DialogPurpose, path: PathBuf) -> Self {
        match purpose {
            DialogPurpose::Open => Self::Open(path),
            DialogPurpose::Compare => Self::Compare(path),
            DialogPurpose::Series => Self::OpenSeries(vec![path]),
        }
    }
}

/// A background job a Cancel button stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobId {
    /// Opening the file of tab `n`.
    Load(usize),
    /// The statistics of the selected tensor.
    Stats,
    /// The whole-file scan.
    Scan,
    /// The heatmap of the selected tensor.
    Heatmap,
    /// The diff of the comparison.
    Diff,
    /// The selected pair's detail in the comparison.
    PairDetail,
    /// A writing form's job.
    Write(WriteForm),
    /// The series of tab `n`'s run.
    Series(usize),
}

/// An action for the runner; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Open a file, shard index or folder in a new tab (or show its tab).
    Open(PathBuf),
    /// Open a training run in a new tab: these checkpoints, or folders of
    /// them, as one series.
    OpenSeries(Vec<PathBuf>),
    /// Compare one tensor between two steps of tab `tab`'s run (indices
    /// into its steps): A is step `from`'s checkpoint, B step `to`'s, in a
    /// new tab, with the tensor's pair selected once the diff is done.
    CompareSteps {
        /// The run's tab.
        tab: usize,
        /// The older step.
        from: usize,
        /// The newer step.
        to: usize,
        /// The tensor to select (none: the whole diff).
        tensor: Option<String>,
    },
    /// Ask for a file: the native dialog, or the in-app picker without one.
    OpenDialog(DialogPurpose),
    /// Show the in-app picker.
    ShowPicker(DialogPurpose),
    /// The picker goes to this path: lists a folder, opens a file.
    PickerGo(PathBuf),
    /// Close the picker.
    ClosePicker,
    /// Write the demo checkpoint and open it.
    OpenDemo,
    /// Show tab `n`.
    ActivateTab(usize),
    /// Close tab `n` (its jobs are cancelled).
    CloseTab(usize),
    /// Show the tab this many places right (left when negative), wrapping.
    CycleTab(isize),
    /// Use this colour theme.
    SetTheme(crate::gui::state::ThemeChoice),
    /// Open tab `n`'s file again.
    Reload(usize),
    /// Forget the recent files.
    ClearRecent,
    /// Show the table as a tree of dotted prefixes, or as a list.
    SetTreeView(bool),
    /// The filter box's new text.
    SetFilter(String),
    /// Show only one dtype, or all.
    SetDtypeFilter(Option<Dtype>),
    /// Show quantized weights only, plain tensors only, or both.
    SetKindFilter(crate::gui::model::KindFilter),
    /// Sort by a column; again on the same column reverses.
    SortBy(Column),
    /// Back to file order.
    FileOrder,
    /// Open or close a tree group (by full dotted prefix).
    ToggleGroup(String),
    /// A click on tensor `index` (into `ck.tensors`).
    Select {
        /// Index into `ck.tensors`.
        index: usize,
        /// Whether Ctrl or Shift was held.
        mode: SelectMode,
    },
    /// Move the cursor by this many rows (arrow keys).
    MoveCursor(isize),
    /// Select nothing: the side panel shows the overview again.
    ClearSelection,
    /// Give the filter box focus (Ctrl+F).
    FocusFilter,
    /// Copy the selected tensor names to the clipboard.
    CopySelectedNames,
    /// Put this text on the clipboard (a metadata value, an error).
    CopyText(String),
    /// Compute the statistics of a tensor (the view shows it, none is kept).
    StartStats(StatsKey),
    /// Scan every tensor of the active tab.
    StartScan,
    /// Fetch these bytes of a remote file of the active tab into the cache
    /// (the value grid's page): shard, byte range.
    FetchBytes(usize, std::ops::Range<u64>),
    /// Read a tensor of the active tab that is not stored in C order,
    /// little-endian, as is (byte-swapped, strided, deflated) into scratch
    /// space, for the value grid.
    PrepareTensor(crate::format::TensorRef),
    /// Show the *Open URL* window.
    ShowOpenUrl,
    /// Close it.
    CloseOpenUrl,
    /// Compute a heatmap.
    StartHeatmap(HeatKey),
    /// Compare the active tab with this file, shard index or folder.
    Compare(PathBuf),
    /// Run (or run again) the diff of tab `n`'s comparison.
    StartDiff(usize),
    /// Which rows the diff table shows.
    SetDiffFilter(DiffFilter),
    /// The diff table's name filter text.
    SetDiffNameFilter(String),
    /// Sort the diff table; again on the same column reverses.
    SortDiff(DiffColumn),
    /// Select a pair of the diff (index into the report's tensors).
    SelectPair(usize),
    /// End tab `n`'s comparison.
    CloseCompare(usize),
    /// Show the *Export tensor* form for the active tab's cursor tensor.
    ExportTensor,
    /// Show the *Save as* form for the selection (or, with none, the
    /// tensors the filter shows).
    SaveAs,
    /// Show the native save dialog for a form's path.
    Browse(WriteForm),
    /// Run a form's write.
    StartWrite(WriteForm),
    /// Close a form; a write still running is cancelled (dropping its job).
    CloseForm(WriteForm),
    /// Stop a job: its task ends as cancelled at once.
    Cancel(JobId),
    /// Close the window.
    Quit,
}
