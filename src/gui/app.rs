//! The application: persisted state, open tabs, the commands panels send,
//! and the one place those commands run. Panels only draw and send commands.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eframe::egui;

use super::dialog::{DialogResult, FileDialog};
use super::diff_view::CompareState;
use super::model::{
    Column, Direction, DtypeTotals, NameFilter, ScanFigures, TreeRow, dtype_totals, name_ranks,
    tree_rows, visible_rows,
};
use super::picker::Picker;
use super::save_dialogs::{ExportDialog, SaveAsDialog};
use super::tensor_view::ViewState;
use crate::dtype::Dtype;
use crate::format::{Checkpoint, LoadError};
use crate::jobs::{Job, JobState};

/// How many recent files are remembered.
const MAX_RECENT: usize = 12;

/// What is persisted between runs (eframe storage).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct State {
    /// Recently opened paths, newest first.
    pub recent: Vec<PathBuf>,
    /// Show the tensor table as a tree by dotted prefix.
    pub tree_view: bool,
}

/// Something a panel asks the app to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Open a file, shard index or folder in a new tab.
    Open(PathBuf),
    /// Show the native open dialog (or the in-app picker without one).
    OpenDialog,
    /// Show the in-app file picker.
    ShowPicker,
    /// Write the demo checkpoint and open it.
    OpenDemo,
    /// Make a tab the active one.
    ActivateTab(usize),
    /// Close a tab (cancels its jobs).
    CloseTab(usize),
    /// Cancel a tab's loading.
    CancelLoad(usize),
    /// Open a tab's file again.
    Reload(usize),
    /// Forget the recent files.
    ClearRecent,
    /// Copy the selected tensor names.
    CopySelectedNames,
    /// Ask for a second file and compare the active tab with it.
    CompareDialog,
    /// Compare the active tab with this file, shard index or folder.
    Compare(PathBuf),
    /// End a tab's comparison.
    CloseCompare(usize),
    /// Show the Export dialog for the active tab's current tensor.
    ExportTensor,
    /// Show the Save-as dialog for the active tab's selection (or the
    /// tensors the filter shows, when nothing is selected).
    SaveAs,
    /// Quit.
    Quit,
}

/// A checkpoint that opened, with what the table needs precomputed.
#[derive(Debug)]
pub struct Loaded {
    /// The checkpoint.
    pub ck: Arc<Checkpoint>,
    /// Totals per dtype, and overall.
    pub totals: (Vec<(Dtype, DtypeTotals)>, DtypeTotals),
    /// Each tensor's rank in natural name order.
    pub name_rank: Vec<u32>,
}

impl Loaded {
    /// Opens `path` and precomputes what the table needs (run in a job).
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let ck = Checkpoint::open(path)?;
        let totals = dtype_totals(&ck);
        let name_rank = name_ranks(&ck);
        Ok(Self {
            ck: Arc::new(ck),
            totals,
            name_rank,
        })
    }
}

/// Where a tab's file is.
pub enum Load {
    /// Parsing in the background.
    Loading {
        /// The job.
        job: Job<Result<Loaded, LoadError>>,
        /// When it started (the spinner shows after a moment).
        started: Instant,
    },
    /// Opened.
    Ready(Loaded),
    /// Invalid or unreadable.
    Failed(LoadError),
    /// The user cancelled.
    Cancelled,
}

/// The table's view state: filter, sort, tree, selection.
#[derive(Debug)]
pub struct TableState {
    /// The filter box's text.
    pub filter_text: String,
    /// The parsed filter, or why it is bad.
    pub filter: Result<NameFilter, String>,
    /// Show only this dtype.
    pub dtype: Option<Dtype>,
    /// Sort column and direction; `None` is file order.
    pub sort: Option<(Column, Direction)>,
    /// Groups open in the tree view.
    pub expanded: BTreeSet<String>,
    /// Visible rows (indices into `ck.tensors`), filtered and sorted.
    pub rows: Vec<usize>,
    /// The tree view's lines.
    pub tree: Vec<TreeRow>,
    /// Rows must be recomputed.
    pub dirty: bool,
    /// Selected tensors (indices into `ck.tensors`).
    pub selection: BTreeSet<usize>,
    /// Where a shift-click range starts.
    pub anchor: Option<usize>,
    /// The tensor shown in the tensor view (the last clicked).
    pub cursor: Option<usize>,
    /// Scroll the table to this row position next frame.
    pub scroll_to: Option<usize>,
    /// Give the filter box focus next frame.
    pub focus_filter: bool,
}

impl Default for TableState {
    fn default() -> Self {
        Self {
            filter_text: String::new(),
            filter: Ok(NameFilter::All),
            dtype: None,
            sort: None,
            expanded: BTreeSet::new(),
            rows: Vec::new(),
            tree: Vec::new(),
            dirty: true,
            selection: BTreeSet::new(),
            anchor: None,
            cursor: None,
            scroll_to: None,
            focus_filter: false,
        }
    }
}

/// One open file.
pub struct Tab {
    /// What was opened.
    pub path: PathBuf,
    /// Its state.
    pub load: Load,
    /// The table's view state.
    pub table: TableState,
    /// The tensor view's state and caches.
    pub view: ViewState,
    /// A comparison with a second checkpoint, when one is open.
    pub compare: Option<CompareState>,
}

impl Tab {
    /// A short title for the tab bar.
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

    /// The opened checkpoint, if ready.
    pub fn loaded(&self) -> Option<&Loaded> {
        match &self.load {
            Load::Ready(l) => Some(l),
            _ => None,
        }
    }

    /// Recomputes the visible rows after a filter, sort or scan change.
    pub fn refresh_rows(&mut self, tree_view: bool) {
        let Load::Ready(loaded) = &self.load else {
            return;
        };
        if !self.table.dirty {
            return;
        }
        self.table.dirty = false;
        let filter = self.table.filter.clone().unwrap_or(NameFilter::All);
        let scan = self.view.scan_figures();
        let lookup = |i: usize| scan.and_then(|s| s.get(i).copied().flatten());
        self.table.rows = visible_rows(
            &loaded.ck,
            &loaded.name_rank,
            &filter,
            self.table.dtype,
            self.table.sort,
            &lookup,
        );
        self.table.tree = if tree_view {
            tree_rows(&loaded.ck, &self.table.rows, &self.table.expanded)
        } else {
            Vec::new()
        };
    }
}

/// A short message shown for a few seconds.
pub struct Notice {
    /// The text.
    pub text: String,
    /// When it was posted.
    pub at: Instant,
}

/// The Tensorscope application.
pub struct TensorscopeApp {
    /// Persisted state.
    pub state: State,
    /// Open files.
    pub tabs: Vec<Tab>,
    /// The active tab.
    pub active: usize,
    /// Commands sent this frame, run at its end.
    pub commands: Vec<Command>,
    /// The open dialog (native or injected).
    pub dialog: Arc<dyn FileDialog>,
    /// A native dialog running in the background, and what it is for.
    pub dialog_job: Option<(DialogPurpose, Job<DialogResult>)>,
    /// The in-app file picker, when shown.
    pub picker: Option<Picker>,
    /// What the picker is for.
    pub picker_purpose: DialogPurpose,
    /// The Export dialog, when shown.
    pub export_dialog: Option<ExportDialog>,
    /// The Save-as dialog, when shown.
    pub save_as: Option<SaveAsDialog>,
    /// Short messages.
    pub notices: Vec<Notice>,
    /// The window title last sent.
    title: String,
    /// Used by jobs to wake the UI.
    ctx: Option<egui::Context>,
}

impl TensorscopeApp {
    /// A new app with the given persisted state and open dialog.
    pub fn new(state: State, dialog: Arc<dyn FileDialog>) -> Self {
        Self {
            state,
            tabs: Vec::new(),
            active: 0,
            commands: Vec::new(),
            dialog,
            dialog_job: None,
            picker: None,
            picker_purpose: DialogPurpose::Open,
            export_dialog: None,
            save_as: None,
            notices: Vec::new(),
            title: String::new(),
            ctx: None,
        }
    }

    /// Gives jobs the context they wake the UI through.
    pub fn set_context(&mut self, ctx: egui::Context) {
        self.ctx = Some(ctx);
    }

    /// Queues a command to run at the end of the frame.
    pub fn send(&mut self, command: Command) {
        self.commands.push(command);
    }

    /// The active tab.
    pub fn active_tab(&self) -> Option<&Tab> {
        self.tabs.get(self.active)
    }

    /// The active tab, mutably.
    pub fn active_tab_mut(&mut self) -> Option<&mut Tab> {
        self.tabs.get_mut(self.active)
    }

    /// True while any background job runs (tests step until this is false).
    pub fn is_busy(&self) -> bool {
        self.dialog_job.is_some()
            || self.picker.as_ref().is_some_and(Picker::is_busy)
            || self
                .export_dialog
                .as_ref()
                .is_some_and(ExportDialog::is_busy)
            || self.save_as.as_ref().is_some_and(SaveAsDialog::is_busy)
            || self.tabs.iter().any(|t| {
                matches!(t.load, Load::Loading { .. })
                    || t.view.is_busy()
                    || t.compare.as_ref().is_some_and(CompareState::is_busy)
            })
    }

    pub(crate) fn repaint_fn(&self) -> impl Fn() + Send + Sync + 'static {
        let ctx = self.ctx.clone();
        move || {
            if let Some(ctx) = &ctx {
                ctx.request_repaint();
            }
        }
    }

    /// Posts a short message.
    pub fn notify(&mut self, text: impl Into<String>) {
        self.notices.push(Notice {
            text: text.into(),
            at: Instant::now(),
        });
    }

    /// Draws one frame: the whole window.
    pub fn frame_ui(&mut self, ui: &mut egui::Ui) {
        if self.ctx.is_none() {
            self.ctx = Some(ui.ctx().clone());
        }
        self.poll_jobs();
        self.handle_input(ui.ctx());
        let tree_view = self.state.tree_view;
        if let Some(tab) = self.tabs.get_mut(self.active) {
            tab.refresh_rows(tree_view);
        }
        super::panels::root_ui(ui, self);
        self.update_title(ui.ctx());
        let commands = std::mem::take(&mut self.commands);
        for c in commands {
            self.run(c, ui.ctx());
        }
        self.notices
            .retain(|n| n.at.elapsed() < Duration::from_secs(6));
        if !self.notices.is_empty() {
            ui.ctx().request_repaint_after(Duration::from_millis(500));
        }
    }

    fn handle_input(&mut self, ctx: &egui::Context) {
        let dropped: Vec<PathBuf> = ctx.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        });
        let shift = ctx.input(|i| i.modifiers.shift);
        let can_compare = self.active_tab().is_some_and(|t| t.loaded().is_some());
        for (k, p) in dropped.into_iter().enumerate() {
            // Shift-drop one file on an open checkpoint compares with it.
            if shift && can_compare && k == 0 {
                self.send(Command::Compare(p));
            } else {
                self.send(Command::Open(p));
            }
        }
        let (open, find, copy) = ctx.input_mut(|i| {
            (
                i.consume_key(egui::Modifiers::COMMAND, egui::Key::O),
                i.consume_key(egui::Modifiers::COMMAND, egui::Key::F),
                i.events.iter().any(|e| matches!(e, egui::Event::Copy)),
            )
        });
        if open {
            self.send(Command::OpenDialog);
        }
        if find && let Some(tab) = self.active_tab_mut() {
            tab.table.focus_filter = true;
        }
        if copy && !ctx.egui_wants_keyboard_input() {
            self.send(Command::CopySelectedNames);
        }
    }

    fn update_title(&mut self, ctx: &egui::Context) {
        let title = match self.active_tab() {
            Some(t) => format!("{} — Tensorscope", t.title()),
            None => "Tensorscope".to_owned(),
        };
        if title != self.title {
            ctx.send_viewport_cmd(egui::ViewportCommand::Title(title.clone()));
            self.title = title;
        }
    }

    fn poll_jobs(&mut self) {
        let repaint = Arc::new(self.repaint_fn());
        let repaint = move || repaint();
        let mut opened: Vec<PathBuf> = Vec::new();
        for tab in &mut self.tabs {
            if let Load::Loading { job, .. } = &mut tab.load {
                match job.poll() {
                    JobState::Running => {}
                    JobState::Done(Ok(loaded)) => {
                        tab.path.clone_from(&loaded.ck.path);
                        opened.push(loaded.ck.path.clone());
                        tab.load = Load::Ready(loaded);
                        tab.table.dirty = true;
                    }
                    JobState::Done(Err(e)) => tab.load = Load::Failed(e),
                    JobState::Panicked(msg) => {
                        tab.load = Load::Failed(LoadError::Io {
                            path: tab.path.clone(),
                            source: std::io::Error::other(format!("internal error: {msg}")).into(),
                        });
                    }
                }
            }
            if let Load::Ready(loaded) = &tab.load {
                let ck = Arc::clone(&loaded.ck);
                if tab.view.poll(&ck) {
                    tab.table.dirty = true;
                }
            }
            if let Some(c) = &mut tab.compare {
                let a = match &tab.load {
                    Load::Ready(l) => Some(&l.ck),
                    _ => None,
                };
                c.poll(a, repaint.clone());
            }
        }
        for p in opened {
            self.remember(&p);
        }
        if let Some((purpose, job)) = &mut self.dialog_job {
            let purpose = *purpose;
            match job.poll() {
                JobState::Running => {}
                JobState::Done(DialogResult::Picked(paths)) => {
                    self.dialog_job = None;
                    for p in paths {
                        self.send(match purpose {
                            DialogPurpose::Open => Command::Open(p),
                            DialogPurpose::Compare => Command::Compare(p),
                        });
                    }
                }
                JobState::Done(DialogResult::Cancelled) => self.dialog_job = None,
                JobState::Done(DialogResult::Unavailable) | JobState::Panicked(_) => {
                    self.dialog_job = None;
                    self.picker_purpose = purpose;
                    self.send(Command::ShowPicker);
                }
            }
        }
        if let Some(picker) = &mut self.picker {
            picker.poll();
        }
        if let Some(d) = &mut self.export_dialog {
            d.poll();
        }
        if let Some(d) = &mut self.save_as {
            d.poll();
        }
    }

    fn remember(&mut self, path: &Path) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        self.state.recent.retain(|p| p != &path);
        self.state.recent.insert(0, path);
        self.state.recent.truncate(MAX_RECENT);
    }

    /// Runs one command.
    pub fn run(&mut self, command: Command, ctx: &egui::Context) {
        match command {
            Command::Open(path) => self.open(path),
            Command::OpenDialog => self.show_dialog(DialogPurpose::Open),
            Command::CompareDialog => self.show_dialog(DialogPurpose::Compare),
            Command::Compare(path) => {
                let abs = std::path::absolute(&path).unwrap_or(path);
                match self.load_job(&abs) {
                    Ok(job) => {
                        if let Some(tab) = self.tabs.get_mut(self.active) {
                            tab.compare = Some(CompareState::new(abs, job));
                        }
                    }
                    Err(e) => self.notify(format!("cannot start a background job: {e}")),
                }
            }
            Command::ExportTensor => {
                let target = self
                    .active_tab()
                    .and_then(|t| Some((Arc::clone(&t.loaded()?.ck), t.table.cursor?)));
                match target {
                    Some((ck, index)) => self.export_dialog = Some(ExportDialog::new(ck, index)),
                    None => self.notify("select a tensor to export"),
                }
            }
            Command::SaveAs => {
                let target = self.active_tab().and_then(|t| {
                    let ck = Arc::clone(&t.loaded()?.ck);
                    let selection: Vec<usize> = if t.table.selection.is_empty() {
                        t.table.rows.clone()
                    } else {
                        t.table.selection.iter().copied().collect()
                    };
                    Some((ck, selection))
                });
                match target {
                    Some((_, sel)) if sel.is_empty() => {
                        self.notify("no tensor to save: the filter shows none");
                    }
                    Some((ck, sel)) => self.save_as = Some(SaveAsDialog::new(ck, sel)),
                    None => self.notify("open a checkpoint first"),
                }
            }
            Command::CloseCompare(i) => {
                if let Some(tab) = self.tabs.get_mut(i) {
                    tab.compare = None;
                }
            }
            Command::ShowPicker => {
                let start = self
                    .active_tab()
                    .and_then(|t| t.path.parent().map(Path::to_path_buf))
                    .or_else(|| std::env::current_dir().ok())
                    .unwrap_or_else(|| PathBuf::from("/"));
                self.picker = Some(Picker::new(start, self.repaint_fn()));
            }
            Command::OpenDemo => {
                let repaint = self.repaint_fn();
                let path = super::demo::demo_folder().join(super::demo::DEMO_FILE_NAME);
                match Job::spawn("open-demo", repaint, |_, _| {
                    let path =
                        super::demo::write_demo(&super::demo::demo_folder()).map_err(|e| {
                            LoadError::Io {
                                path: super::demo::demo_folder(),
                                source: std::io::Error::other(e.to_string()).into(),
                            }
                        })?;
                    Loaded::open(&path)
                }) {
                    Ok(job) => self.push_tab(path, job),
                    Err(e) => self.notify(format!("cannot start a background job: {e}")),
                }
            }
            Command::ActivateTab(i) => {
                if i < self.tabs.len() {
                    self.active = i;
                    if let Some(t) = self.tabs.get_mut(i) {
                        t.table.dirty = true;
                    }
                }
            }
            Command::CloseTab(i) => {
                if i < self.tabs.len() {
                    self.tabs.remove(i);
                    if self.active >= self.tabs.len() {
                        self.active = self.tabs.len().saturating_sub(1);
                    }
                    if let Some(t) = self.tabs.get_mut(self.active) {
                        t.table.dirty = true;
                    }
                }
            }
            Command::CancelLoad(i) => {
                if let Some(tab) = self.tabs.get_mut(i)
                    && matches!(tab.load, Load::Loading { .. })
                {
                    tab.load = Load::Cancelled;
                }
            }
            Command::Reload(i) => {
                if let Some(tab) = self.tabs.get(i) {
                    let path = tab.path.clone();
                    if let Ok(job) = self.load_job(&path) {
                        let tab = &mut self.tabs[i];
                        tab.load = Load::Loading {
                            job,
                            started: Instant::now(),
                        };
                        tab.table = TableState::default();
                        tab.view = ViewState::default();
                    }
                }
            }
            Command::ClearRecent => self.state.recent.clear(),
            Command::CopySelectedNames => {
                if let Some(tab) = self.active_tab()
                    && let Some(loaded) = tab.loaded()
                {
                    let names: Vec<String> = tab
                        .table
                        .selection
                        .iter()
                        .filter_map(|&i| loaded.ck.tensors.get(i).and_then(|t| loaded.ck.info(*t)))
                        .map(|info| info.name.clone())
                        .collect();
                    if !names.is_empty() {
                        let n = names.len();
                        ctx.copy_text(names.join("\n"));
                        self.notify(format!("copied {n} name{}", if n == 1 { "" } else { "s" }));
                    }
                }
            }
            Command::Quit => ctx.send_viewport_cmd(egui::ViewportCommand::Close),
        }
    }

    fn show_dialog(&mut self, purpose: DialogPurpose) {
        if self.dialog_job.is_some() {
            return;
        }
        self.picker_purpose = purpose;
        if !self.dialog.available() {
            self.send(Command::ShowPicker);
            return;
        }
        let dialog = Arc::clone(&self.dialog);
        match Job::spawn("open-dialog", self.repaint_fn(), move |_, _| {
            dialog.pick_files()
        }) {
            Ok(job) => self.dialog_job = Some((purpose, job)),
            Err(_) => self.send(Command::ShowPicker),
        }
    }

    fn load_job(&self, path: &Path) -> std::io::Result<Job<Result<Loaded, LoadError>>> {
        let path = path.to_path_buf();
        Job::spawn("open-checkpoint", self.repaint_fn(), move |_, _| {
            Loaded::open(&path)
        })
    }

    fn push_tab(&mut self, path: PathBuf, job: Job<Result<Loaded, LoadError>>) {
        self.tabs.push(Tab {
            path,
            load: Load::Loading {
                job,
                started: Instant::now(),
            },
            table: TableState::default(),
            view: ViewState::default(),
            compare: None,
        });
        self.active = self.tabs.len() - 1;
    }

    /// Opens `path` in a new tab (or activates the tab that has it).
    pub fn open(&mut self, path: PathBuf) {
        let abs = std::path::absolute(&path).unwrap_or(path);
        if let Some(i) = self
            .tabs
            .iter()
            .position(|t| t.path == abs && !matches!(t.load, Load::Failed(_) | Load::Cancelled))
        {
            self.active = i;
            return;
        }
        match self.load_job(&abs) {
            Ok(job) => self.push_tab(abs, job),
            Err(e) => self.notify(format!("cannot start a background job: {e}")),
        }
    }

    /// Selects a tensor as a click would: `mode` says whether Ctrl or
    /// Shift was held. `position` is its row in the current view.
    pub fn select(tab: &mut Tab, index: usize, mode: SelectMode) {
        let t = &mut tab.table;
        match mode {
            SelectMode::Replace => {
                t.selection.clear();
                t.selection.insert(index);
                t.anchor = Some(index);
            }
            SelectMode::Toggle => {
                if !t.selection.remove(&index) {
                    t.selection.insert(index);
                }
                t.anchor = Some(index);
            }
            SelectMode::Range => {
                let anchor = t.anchor.unwrap_or(index);
                let pos = |i: usize| t.rows.iter().position(|&r| r == i);
                if let (Some(a), Some(b)) = (pos(anchor), pos(index)) {
                    let (lo, hi) = (a.min(b), a.max(b));
                    t.selection = t.rows[lo..=hi].iter().copied().collect();
                } else {
                    t.selection.insert(index);
                }
            }
        }
        t.cursor = Some(index);
    }

    /// Moves the cursor by `delta` rows in the current view.
    pub fn move_cursor(tab: &mut Tab, delta: isize) {
        let rows = &tab.table.rows;
        if rows.is_empty() {
            return;
        }
        let pos = tab
            .table
            .cursor
            .and_then(|c| rows.iter().position(|&r| r == c));
        let next = match pos {
            Some(p) => p.saturating_add_signed(delta).min(rows.len() - 1),
            None => 0,
        };
        let index = rows[next];
        Self::select(tab, index, SelectMode::Replace);
        tab.table.scroll_to = Some(next);
    }

    /// Scan figures for a row, if a scan has run.
    pub fn scan_row(tab: &Tab, index: usize) -> Option<ScanFigures> {
        tab.view
            .scan_figures()
            .and_then(|s| s.get(index).copied().flatten())
    }
}

/// What the open dialog was shown for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogPurpose {
    /// Open in new tabs.
    Open,
    /// Compare the active tab with the chosen file.
    Compare,
}

/// How a click changes the selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectMode {
    /// A plain click: select only this.
    Replace,
    /// Ctrl-click: add or remove this.
    Toggle,
    /// Shift-click: select the range from the anchor.
    Range,
}

impl eframe::App for TensorscopeApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame_ui(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, eframe::APP_KEY, &self.state);
    }
}
