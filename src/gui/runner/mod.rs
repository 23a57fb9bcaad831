//! The command runner: executes [`Command`]s against the [`Session`], once a
//! frame, in the order they were sent. It is the only code of the explorer
//! that starts background jobs ([`Job::spawn`]); each job's work is a
//! function of [`super::work`], and its handle goes into the [`Task`] that
//! shows it. A job that cannot start becomes that task's failure (or a
//! notice), once.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eframe::egui;

use super::command::Command;
use super::dialog::FileDialog;
use super::model::Direction;
use super::state::{
    DialogPurpose, ExportDialog, Loaded, MAX_RECENT, Picker, PickerForm, Session, Tab, ViewState,
    Views, WriteForm,
};
use super::work;

mod jobs;
use crate::format::LoadError;
use crate::jobs::{CancelToken, Job, Progress};

/// Commands run per frame at most: a command may send others (a dialog
/// that falls back to the picker), never without end.
const MAX_COMMANDS_PER_FRAME: usize = 1024;

/// Runs commands against a session and the panels' views.
pub struct Runner<'a> {
    session: &'a mut Session,
    views: &'a mut Views,
    dialog: &'a Arc<dyn FileDialog>,
    ctx: &'a egui::Context,
    queue: VecDeque<Command>,
}

impl<'a> Runner<'a> {
    /// A runner over `session` and `views`; jobs wake the UI through `ctx`.
    pub fn new(
        session: &'a mut Session,
        views: &'a mut Views,
        dialog: &'a Arc<dyn FileDialog>,
        ctx: &'a egui::Context,
    ) -> Self {
        Self {
            session,
            views,
            dialog,
            ctx,
            queue: VecDeque::new(),
        }
    }

    /// Runs `commands` and every command they send, in order.
    pub fn run_all(&mut self, commands: impl IntoIterator<Item = Command>) {
        self.queue.extend(commands);
        let mut budget = MAX_COMMANDS_PER_FRAME;
        while let Some(c) = self.queue.pop_front() {
            if budget == 0 {
                self.queue.clear();
                self.session
                    .notify("too many commands in one frame; some were dropped");
                break;
            }
            budget -= 1;
            self.run(c);
        }
    }

    fn send(&mut self, command: Command) {
        self.queue.push_back(command);
    }

    /// Starts `work` on a named thread that wakes the UI on progress and at
    /// its end. The one place the explorer spawns. A thread that cannot be
    /// started is told in a notice, here, once; the caller keeps the error
    /// in its task so nothing retries it every frame.
    fn spawn<T: Send + 'static>(
        &mut self,
        name: &str,
        work: impl FnOnce(&CancelToken, &Progress) -> T + Send + 'static,
    ) -> std::io::Result<Job<T>> {
        let ctx = self.ctx.clone();
        let job = Job::spawn(name, move || ctx.request_repaint(), work);
        if let Err(e) = &job {
            self.session
                .notify(format!("cannot start a background job: {e}"));
        }
        job
    }

    fn active(&mut self) -> Option<&mut Tab> {
        self.session.active_tab_mut()
    }

    /// The panels' view of the active tab.
    fn active_view(&mut self) -> Option<&mut ViewState> {
        self.views.tabs.get_mut(self.session.active)
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one arm per command; each arm is short or calls a method"
    )]
    fn run(&mut self, command: Command) {
        match command {
            Command::Open(path) => self.open(path),
            Command::OpenSeries(paths) => self.open_series(paths),
            Command::CompareSteps {
                tab,
                from,
                to,
                tensor,
            } => self.compare_steps(tab, from, to, tensor),
            Command::OpenDialog(purpose) => self.open_dialog(purpose),
            Command::ShowPicker(purpose) => {
                let start = self
                    .session
                    .active_tab()
                    .filter(|t| !crate::source::is_remote_location(&t.path))
                    .and_then(|t| t.path.parent().map(Path::to_path_buf))
                    .or_else(|| std::env::current_dir().ok())
                    .unwrap_or_else(|| PathBuf::from("/"));
                self.session.picker = Some(Picker::new(purpose, start.clone()));
                self.views.picker = PickerForm::default();
                self.send(Command::PickerGo(start));
            }
            Command::PickerGo(path) => {
                if self.session.picker.is_none() {
                    return;
                }
                let job = self.spawn("list-folder", {
                    let path = path.clone();
                    move |_, _| work::list_folder(&path)
                });
                self.views.picker.path_text = path.display().to_string();
                if let Some(p) = &mut self.session.picker {
                    p.listing.start(path, job);
                }
            }
            Command::ClosePicker => self.session.picker = None,
            Command::OpenDemo => {
                let path = super::demo::demo_folder().join(super::demo::DEMO_FILE_NAME);
                let job = self.spawn("open-demo", |_, _| work::open_demo());
                self.push_tab(path, job);
            }
            Command::ActivateTab(i) => {
                if i < self.session.tabs.len() {
                    self.session.active = i;
                    self.session.tabs[i].table.dirty = true;
                }
            }
            Command::CloseTab(i) => {
                if i < self.session.tabs.len() {
                    // Dropping the tab drops its tasks, which cancels their jobs.
                    self.session.tabs.remove(i);
                    if i < self.views.tabs.len() {
                        self.views.tabs.remove(i);
                    }
                    // The tab shown stays shown when one left of it closes.
                    if i < self.session.active {
                        self.session.active -= 1;
                    }
                    let last = self.session.tabs.len().saturating_sub(1);
                    self.session.active = self.session.active.min(last);
                    if let Some(t) = self.active() {
                        t.table.dirty = true;
                    }
                }
            }
            Command::Reload(i) => self.reload(i),
            Command::CycleTab(step) => {
                let n = self.session.tabs.len();
                if n > 0 {
                    let next = (self.session.active as isize + step).rem_euclid(n as isize);
                    self.session.active = next as usize;
                    self.session.tabs[self.session.active].table.dirty = true;
                }
            }
            Command::SetTheme(theme) => self.session.state.theme = theme,
            Command::ClearRecent => self.session.state.recent.clear(),
            Command::SetTreeView(on) => {
                self.session.state.tree_view = on;
                for t in &mut self.session.tabs {
                    t.table.dirty = true;
                }
            }
            Command::SetFilter(text) => {
                if let Some(t) = self.active() {
                    t.table.filter = super::model::NameFilter::parse(&text);
                    t.table.filter_text = text;
                    t.table.dirty = true;
                }
            }
            Command::SetDtypeFilter(dtype) => {
                if let Some(t) = self.active() {
                    t.table.dtype = dtype;
                    t.table.dirty = true;
                }
            }
            Command::SetKindFilter(kind) => {
                if let Some(t) = self.active() {
                    t.table.kind = kind;
                    t.table.dirty = true;
                }
            }
            Command::SortBy(column) => {
                if let Some(t) = self.active() {
                    t.table.sort = match t.table.sort {
                        Some((c, Direction::Ascending)) if c == column => {
                            Some((column, Direction::Descending))
                        }
                        _ => Some((column, Direction::Ascending)),
                    };
                    t.table.dirty = true;
                }
            }
            Command::FileOrder => {
                if let Some(t) = self.active() {
                    t.table.sort = None;
                    t.table.dirty = true;
                }
            }
            Command::ToggleGroup(prefix) => {
                if let Some(t) = self.active() {
                    if !t.table.expanded.remove(&prefix) {
                        t.table.expanded.insert(prefix);
                    }
                    t.table.dirty = true;
                }
            }
            Command::Select { index, mode } => {
                if let Some(t) = self.active() {
                    t.table.select(index, mode);
                }
            }
            Command::MoveCursor(delta) => {
                let row = self.active().and_then(|t| t.table.move_cursor(delta));
                if let Some(v) = self.active_view() {
                    v.scroll_to = row;
                }
            }
            Command::ClearSelection => {
                if let Some(t) = self.active() {
                    t.table.clear_selection();
                }
            }
            Command::FocusFilter => {
                if let Some(v) = self.active_view() {
                    v.focus_filter = true;
                }
            }
            Command::CopySelectedNames => self.copy_selected_names(),
            Command::CopyText(text) => self.ctx.copy_text(text),
            Command::StartStats(key) => self.start_stats(key),
            Command::StartScan => self.start_scan(),
            Command::FetchBytes(shard, range) => self.fetch_bytes(shard, range),
            Command::PrepareTensor(t) => self.prepare_tensor(t),
            Command::ShowOpenUrl => self.session.open_url = true,
            Command::CloseOpenUrl => self.session.open_url = false,
            Command::StartHeatmap(key) => self.start_heatmap(key),
            Command::Compare(path) => self.compare(path),
            Command::StartDiff(i) => self.start_diff(i),
            Command::SetDiffFilter(filter) => {
                if let Some(c) = self.active().and_then(|t| t.compare.as_mut()) {
                    c.filter = filter;
                    c.dirty = true;
                }
            }
            Command::SetDiffNameFilter(text) => {
                if let Some(c) = self.active().and_then(|t| t.compare.as_mut()) {
                    c.name_filter = text;
                    c.dirty = true;
                }
            }
            Command::SortDiff(column) => {
                if let Some(c) = self.active().and_then(|t| t.compare.as_mut()) {
                    c.sort = if c.sort.0 == column {
                        (column, !c.sort.1)
                    } else {
                        (column, column.starts_ascending())
                    };
                    c.dirty = true;
                }
            }
            Command::SelectPair(i) => self.select_pair(i),
            Command::CloseCompare(i) => {
                if let Some(tab) = self.session.tabs.get_mut(i) {
                    tab.compare = None;
                }
            }
            Command::ExportTensor => {
                // A quantized weight's part opened as stored exports as
                // stored; the weight's row exports its values.
                let raw = self.active_view().and_then(|v| v.raw_part);
                let form = self.session.active_tab().and_then(|t| {
                    let loaded = t.loaded()?;
                    ExportDialog::new(
                        Arc::clone(&loaded.ck),
                        raw.or(t.table.cursor)?,
                        if raw.is_some() {
                            None
                        } else {
                            loaded.quant.clone()
                        },
                    )
                });
                match form {
                    Some((mut d, form)) => {
                        d.browse.unavailable = !self.dialog.available();
                        self.session.export = Some(d);
                        self.views.export = form;
                    }
                    None => self.session.notify("select a tensor to export"),
                }
            }
            Command::SaveAs => self.show_save_as(),
            Command::Browse(form) => self.browse(form),
            Command::StartWrite(WriteForm::Export) => self.start_export(),
            Command::StartWrite(WriteForm::SaveAs) => self.start_save_as(),
            Command::CloseForm(WriteForm::Export) => self.session.export = None,
            Command::CloseForm(WriteForm::SaveAs) => self.session.save_as = None,
            Command::Cancel(id) => self.cancel(id),
            Command::Quit => self.ctx.send_viewport_cmd(egui::ViewportCommand::Close),
        }
    }

    fn load_job(&mut self, path: &Path) -> std::io::Result<Job<Result<Loaded, LoadError>>> {
        let path = path.to_path_buf();
        self.spawn("open-checkpoint", move |_, _| work::open(&path))
    }

    /// A new tab loading `path`; none when the job could not start (the
    /// notice says so).
    fn push_tab(&mut self, path: PathBuf, job: std::io::Result<Job<Result<Loaded, LoadError>>>) {
        if job.is_err() {
            return;
        }
        let mut tab = Tab::new(path.clone());
        tab.load.start(path, job);
        self.session.tabs.push(tab);
        self.views.tabs.push(ViewState::default());
        self.session.active = self.session.tabs.len() - 1;
    }

    /// Opens tab `i`'s file again: a fresh table and view, and the
    /// comparison (if any) diffed again once the file is back.
    fn reload(&mut self, i: usize) {
        if let Some(paths) = self
            .session
            .tabs
            .get(i)
            .and_then(|t| t.run.as_ref())
            .map(|r| r.paths.clone())
        {
            self.measure_series(i, paths);
            return;
        }
        let Some(path) = self.session.tabs.get(i).map(|t| t.path.clone()) else {
            return;
        };
        let job = self.load_job(&path);
        if job.is_err() {
            return;
        }
        let tab = &mut self.session.tabs[i];
        let compare = tab.compare.take().map(|mut c| {
            c.diff.clear();
            c.detail.clear();
            c.selected = None;
            c.dirty = true;
            c
        });
        *tab = Tab::new(path.clone());
        tab.compare = compare;
        tab.load.start(path, job);
        if let Some(v) = self.views.tabs.get_mut(i) {
            *v = ViewState::default();
        }
    }

    fn open(&mut self, path: PathBuf) {
        let abs = crate::source::absolute_location(path);
        // A file open (or opening) already is shown, not opened twice; one
        // that failed or was cancelled opens again in a new tab.
        if let Some(i) = self
            .session
            .tabs
            .iter()
            .position(|t| t.path == abs && (t.load.is_running() || t.loaded().is_some()))
        {
            self.session.active = i;
            self.session.tabs[i].table.dirty = true;
            return;
        }
        let job = self.load_job(&abs);
        self.push_tab(abs, job);
    }

    fn open_dialog(&mut self, purpose: DialogPurpose) {
        if self.session.open_dialog.is_running() {
            return;
        }
        if !self.dialog.available() {
            self.send(Command::ShowPicker(purpose));
            return;
        }
        let dialog = Arc::clone(self.dialog);
        let series = purpose == DialogPurpose::Series;
        let pick = move |_: &CancelToken, _: &Progress| {
            Ok(if series {
                dialog.pick_folders()
            } else {
                dialog.pick_files()
            })
        };
        match self.spawn("open-dialog", pick) {
            Ok(job) => self.session.open_dialog.start(purpose, Ok(job)),
            Err(_) => self.send(Command::ShowPicker(purpose)),
        }
    }

    fn copy_selected_names(&mut self) {
        let Some(tab) = self.session.active_tab() else {
            return;
        };
        let Some(loaded) = tab.loaded() else {
            return;
        };
        let names: Vec<String> = tab
            .table
            .selection
            .iter()
            .filter_map(|&i| {
                let (_, info) = loaded.ck.entry(i)?;
                let q = loaded.quant.as_deref();
                Some(q.map_or(info.name(), |q| q.name(i, info.name())).to_owned())
            })
            .collect();
        if !names.is_empty() {
            let n = names.len();
            self.ctx.copy_text(names.join("\n"));
            self.session
                .notify(format!("copied {n} name{}", if n == 1 { "" } else { "s" }));
        }
    }
}

/// Puts `path` first in the recent files.
pub fn remember(recent: &mut Vec<PathBuf>, path: &Path) {
    let path = crate::source::absolute_location(path.to_path_buf());
    recent.retain(|p| p != &path);
    recent.insert(0, path);
    recent.truncate(MAX_RECENT);
}
