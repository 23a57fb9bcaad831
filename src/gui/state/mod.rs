//! Everything the explorer holds between frames, as plain data, in two
//! parts. The [`Session`] (the persisted [`State`], the open tabs, their
//! jobs, the dialogs, the notices) is what the app holds: panels get it
//! shared, so the compiler keeps them from changing it; the runner changes
//! it. The [`Views`] (what each tab's panels show, the forms' inputs) belong
//! to the panels, bound to their widgets. These types import nothing from
//! the panels or the app.

mod compare;
mod dialogs;
mod loaded;
mod run;
mod tab;
mod tensor;

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Instant;

pub use compare::{
    CompareState, DiffColumn, DiffFilter, DiffRow, DiffStat, PairDetail, ReportDigest,
};
pub use dialogs::{
    Browse, ConversionChoice, Entry, ExportDialog, ExportForm, Listing, Picker, PickerForm,
    SaveAsDialog, SaveAsForm, WriteForm,
};
pub use loaded::{Loaded, MetaArray, MetaEntry};
pub use run::{RunMeasure, RunRows, RunState, RunView, StripCache};
pub use tab::{SelectMode, Tab, TableState};
pub use tensor::{
    HeatKey, HistKind, LayerLines, LayerStat, MAX_LAYER_LINES, ScanProgress, ScanState,
    ScanSummary, Section, SidePage, StatsKey, TensorState, ViewState,
};

use super::dialog::DialogResult;
use super::task::Task;

/// How many recent files are remembered.
pub const MAX_RECENT: usize = 12;

/// What is persisted between runs (eframe storage). Only settings a user
/// chose; jobs and caches are rebuilt.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct State {
    /// Recently opened paths, newest first, absolute.
    pub recent: Vec<PathBuf>,
    /// Show the tensor table as a tree of dotted prefixes instead of a list.
    pub tree_view: bool,
    /// Light, dark, or as the system says.
    pub theme: ThemeChoice,
}

/// The colour theme a user chose (View ▸ Theme).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ThemeChoice {
    /// Follow the system's light or dark setting.
    #[default]
    System,
    /// Always light.
    Light,
    /// Always dark.
    Dark,
}

/// What the open dialog (native or in-app) is choosing a file for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogPurpose {
    /// Open in new tabs.
    Open,
    /// Compare the active tab with the chosen file.
    Compare,
    /// Open a folder of checkpoints as a training run.
    Series,
}

/// A short message in the corner, gone after a few seconds.
#[derive(Debug, Clone)]
pub struct Notice {
    /// Untrusted parts are escaped when drawn.
    pub text: String,
    /// When it was posted (it expires from then).
    pub at: Instant,
}

/// What the panels own: one [`ViewState`] per tab (same order as
/// [`Session::tabs`]) and the inputs of the picker and the writing forms.
/// The runner keeps `tabs` in step with the session's tabs and sets a form
/// up when it opens one.
#[derive(Default)]
pub struct Views {
    /// One per open tab, in tab order.
    pub tabs: Vec<ViewState>,
    /// The in-app picker's inputs.
    pub picker: PickerForm,
    /// The *Export tensor* form's inputs.
    pub export: ExportForm,
    /// The *Save as* form's inputs.
    pub save_as: SaveAsForm,
    /// The *Open URL* window's text.
    pub url_text: String,
}

/// Everything open in this run of the window.
#[derive(Default)]
pub struct Session {
    /// Settings kept between runs.
    pub state: State,
    /// Open files, in tab-bar order.
    pub tabs: Vec<Tab>,
    /// Index into `tabs` of the tab shown (0 when there is none).
    pub active: usize,
    /// The native open dialog while it is shown (it blocks a thread).
    pub open_dialog: Task<DialogPurpose, DialogResult, Infallible>,
    /// The in-app file picker, where no native dialog exists.
    pub picker: Option<Picker>,
    /// The *Export tensor* window.
    pub export: Option<ExportDialog>,
    /// The *Save as* window.
    pub save_as: Option<SaveAsDialog>,
    /// The *Open URL* window is shown.
    pub open_url: bool,
    /// Messages on show, oldest first.
    pub notices: Vec<Notice>,
}

impl Session {
    /// A window with the given persisted settings and nothing open.
    pub fn new(state: State) -> Self {
        Self {
            state,
            ..Self::default()
        }
    }

    /// The tab shown, if any is open.
    pub fn active_tab(&self) -> Option<&Tab> {
        self.tabs.get(self.active)
    }

    /// The tab shown, to change it.
    pub fn active_tab_mut(&mut self) -> Option<&mut Tab> {
        self.tabs.get_mut(self.active)
    }

    /// True while any background job runs.
    pub fn is_busy(&self) -> bool {
        self.open_dialog.is_running()
            || self.picker.as_ref().is_some_and(|p| p.listing.is_running())
            || self.export.as_ref().is_some_and(ExportDialog::is_busy)
            || self.save_as.as_ref().is_some_and(SaveAsDialog::is_busy)
            || self.tabs.iter().any(Tab::is_busy)
    }

    /// Posts a notice; it expires on its own.
    pub fn notify(&mut self, text: impl Into<String>) {
        self.notices.push(Notice {
            text: text.into(),
            at: Instant::now(),
        });
    }
}
