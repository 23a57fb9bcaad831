//! The commands that start or stop background jobs: statistics, the scan,
//! heatmaps, the diff and its pairs, and the writing forms.

use std::path::PathBuf;
use std::sync::Arc;

use super::Runner;
use crate::diff::Pair;
use crate::export::{self, Encoding, ExportOptions, SizeLimit};
use crate::format::Checkpoint;
use crate::gui::command::JobId;
use crate::gui::state::{
    Browse, CompareState, HeatKey, SaveAsDialog, ScanProgress, ScanState, ScanSummary, StatsKey,
    WriteForm,
};
use crate::gui::task::Task;
use crate::gui::work;
use crate::series::SeriesOptions;

impl Runner<'_> {
    /// Opens a training run in a new tab and starts measuring it.
    pub(super) fn open_series(&mut self, paths: Vec<PathBuf>) {
        if paths.is_empty() {
            return;
        }
        let paths: Vec<PathBuf> = paths
            .into_iter()
            .map(crate::source::absolute_location)
            .collect();
        self.session
            .tabs
            .push(crate::gui::state::Tab::series(paths.clone()));
        self.views
            .tabs
            .push(crate::gui::state::ViewState::default());
        self.session.active = self.session.tabs.len() - 1;
        self.measure_series(self.session.active, paths);
    }

    /// Starts (again) measuring the series of run tab `i`.
    pub(super) fn measure_series(&mut self, i: usize, paths: Vec<PathBuf>) {
        let job = self.spawn("series", move |cancel, progress| {
            crate::series::series(&paths, &SeriesOptions::default(), cancel, progress).map(Arc::new)
        });
        if let Some(run) = self.session.tabs.get_mut(i).and_then(|t| t.run.as_mut()) {
            run.task.start((), job);
        }
        if let Some(v) = self.views.tabs.get_mut(i) {
            v.run = crate::gui::state::RunView::default();
        }
    }

    /// Opens step `from` of a run's tab and compares it with step `to`,
    /// the pair of `tensor` selected once the diff is done.
    pub(super) fn compare_steps(
        &mut self,
        tab: usize,
        from: usize,
        to: usize,
        tensor: Option<String>,
    ) {
        let Some(report) = self
            .session
            .tabs
            .get(tab)
            .and_then(|t| t.run.as_ref())
            .and_then(|r| r.report())
        else {
            return;
        };
        let (Some(a), Some(b)) = (report.steps.get(from), report.steps.get(to)) else {
            return;
        };
        let (a, b) = (PathBuf::from(&a.path), PathBuf::from(&b.path));
        self.open(a);
        self.compare(b);
        if let Some(c) = self.active().and_then(|t| t.compare.as_mut()) {
            c.pending_pair = tensor;
        }
    }

    /// The active tab's checkpoint, once open.
    fn active_checkpoint(&mut self) -> Option<Arc<Checkpoint>> {
        self.active()
            .and_then(|t| Some(Arc::clone(&t.loaded()?.ck)))
    }

    pub(super) fn start_stats(&mut self, key: StatsKey) {
        let Some(ck) = self.active_checkpoint() else {
            return;
        };
        let Some(tensor) = ck.tensors().get(key.index).copied() else {
            return;
        };
        let quant = self
            .active()
            .and_then(|t| t.loaded().and_then(|l| l.quant.clone()));
        let job = self.spawn("tensor-stats", move |cancel, progress| {
            work::tensor_stats(&ck, tensor, key, quant.as_deref(), cancel, progress)
        });
        if let Some(t) = self.active() {
            // Starting another key drops (cancels) the job of the previous one.
            t.tensor.stats.start(key, job);
        }
    }

    /// Fetches a byte range of a remote shard into the cache, for a view
    /// that reads the map as it draws (the value grid); one at a time.
    pub(super) fn fetch_bytes(&mut self, shard: usize, range: std::ops::Range<u64>) {
        let Some(ck) = self.active_checkpoint() else {
            return;
        };
        let key = (shard, range.start, range.end);
        if !self.active().is_some_and(|t| t.tensor.fetch.wants(&key)) {
            return;
        }
        let job = self.spawn("fetch-page", move |cancel, progress| {
            let source = ck
                .shards()
                .get(shard)
                .map(|s| s.file().source())
                .ok_or_else(|| "no such shard".to_owned())?;
            source
                .fetch(range, cancel, progress)
                .map(drop)
                .map_err(|e| e.to_string())
        });
        if let Some(t) = self.active() {
            t.tensor.fetch.start(key, job);
        }
    }

    pub(super) fn prepare_tensor(&mut self, t: crate::format::TensorRef) {
        let Some(ck) = self.active_checkpoint() else {
            return;
        };
        if !self
            .active()
            .is_some_and(|tab| tab.tensor.prepared.wants(&t))
        {
            return;
        }
        let job = self.spawn("prepare-tensor", move |cancel, progress| {
            ck.fetch_one(t, cancel, progress).map_err(|e| e.message())
        });
        if let Some(tab) = self.active() {
            tab.tensor.prepared.start(t, job);
        }
    }

    pub(super) fn start_scan(&mut self) {
        let Some(ck) = self.active_checkpoint() else {
            return;
        };
        let live = Arc::new(ScanProgress::new(ck.tensors().len()));
        let quant = self
            .active()
            .and_then(|t| t.loaded().and_then(|l| l.quant.clone()));
        let job = self.spawn("scan-file", {
            let live = Arc::clone(&live);
            move |cancel, progress| work::scan(&ck, &live, quant.as_deref(), cancel, progress)
        });
        if let Some(t) = self.active() {
            let mut task = Task::default();
            task.start((), job);
            t.tensor.scan = Some(ScanState {
                live,
                figures: Vec::new(),
                generation: 0,
                summary: ScanSummary::default(),
                task,
            });
            t.table.dirty = true;
        }
    }

    pub(super) fn start_heatmap(&mut self, key: HeatKey) {
        let Some(ck) = self.active_checkpoint() else {
            return;
        };
        let Some(tensor) = ck.tensors().get(key.0).copied() else {
            return;
        };
        let request = key.1.clone();
        let quant = if key.2 {
            self.active()
                .and_then(|t| t.loaded().and_then(|l| l.quant.clone()))
        } else {
            None
        };
        let job = self.spawn("heatmap", move |cancel, progress| {
            work::heatmap(&ck, tensor, &request, quant.as_deref(), cancel, progress)
        });
        if let Some(t) = self.active() {
            t.tensor.heatmap.start(key, job);
        }
    }

    pub(super) fn compare(&mut self, path: PathBuf) {
        let abs = crate::source::absolute_location(path);
        let job = self.load_job(&abs);
        if let Some(tab) = self.active() {
            let mut c = CompareState::new(abs.clone());
            c.load_b.start(abs, job);
            tab.compare = Some(c);
        }
        if let Some(v) = self.active_view() {
            v.delta_texture = None;
        }
        // The diff starts once both sides are open (see the app's poll).
    }

    pub(super) fn start_diff(&mut self, i: usize) {
        let Some(tab) = self.session.tabs.get(i) else {
            return;
        };
        let Some((a, b)) = work::both(tab.loaded(), tab.compare.as_ref().and_then(CompareState::b))
        else {
            return;
        };
        let job = self.spawn("diff", move |cancel, progress| {
            work::diff(&a, &b, cancel, progress)
        });
        if let Some(c) = self
            .session
            .tabs
            .get_mut(i)
            .and_then(|t| t.compare.as_mut())
        {
            c.diff.start((), job);
            c.selected = None;
            c.detail.clear();
            c.dirty = true;
        }
    }

    #[expect(
        clippy::many_single_char_names,
        reason = "a and b are the two sides of the comparison, t its pair"
    )]
    pub(super) fn select_pair(&mut self, i: usize) {
        if let Some(c) = self.active().and_then(|t| t.compare.as_mut()) {
            c.selected = Some(i);
        }
        let Some(tab) = self.session.active_tab() else {
            return;
        };
        let Some(c) = &tab.compare else {
            return;
        };
        let Some((a, b)) = work::both(tab.loaded(), c.b()) else {
            return;
        };
        let Some(t) = c.report().and_then(|r| r.tensors.get(i)) else {
            return;
        };
        let wanted = c.detail.wants(&i);
        if t.dequantized.is_some() || t.sides.is_some() {
            // Its stored parts are packed codes (or a GGUF's tensor met
            // through llama.cpp's names): the Δ figures are of the decoded
            // values, looked up by name on either side, rows un-permuted.
            let qa = tab.loaded().and_then(|l| l.quant.clone());
            let qb = c.b().and_then(|l| l.quant.clone());
            let (names, unpermute) = match &t.sides {
                Some(s) => ((s.a.clone(), s.b.clone()), s.unpermute),
                None => (
                    (
                        t.name_a.clone().unwrap_or_else(|| t.name.clone()),
                        t.name.clone(),
                    ),
                    (None, None),
                ),
            };
            let job = wanted.then(|| {
                self.spawn("diff-pair", move |cancel, progress| {
                    work::pair_detail_of(
                        (&a, qa.as_deref(), &names.0),
                        (&b, qb.as_deref(), &names.1),
                        unpermute,
                        cancel,
                        progress,
                    )
                })
            });
            if let Some(job) = job
                && let Some(c) = self.active().and_then(|t| t.compare.as_mut())
            {
                c.detail.start(i, job);
            }
            return;
        }
        let name_a = t.name_a.as_deref().unwrap_or(&t.name);
        let (Some(ta), Some(tb)) = (a.find(name_a), b.find(&t.name)) else {
            return;
        };
        let job = wanted.then(|| {
            let pair = Pair { a: ta, b: tb };
            self.spawn("diff-pair", move |cancel, progress| {
                work::pair_detail(&a, &b, pair, cancel, progress)
            })
        });
        if let Some(job) = job
            && let Some(c) = self.active().and_then(|t| t.compare.as_mut())
        {
            c.detail.start(i, job);
        }
    }

    pub(super) fn show_save_as(&mut self) {
        let target = self.session.active_tab().and_then(|t| {
            let loaded = t.loaded()?;
            let ck = Arc::clone(&loaded.ck);
            let rows: Vec<usize> = if t.table.selection.is_empty() {
                t.table.rows.clone()
            } else {
                t.table.selection.iter().copied().collect()
            };
            // A quantized weight's row stands for all of its parts.
            let mut selection = Vec::with_capacity(rows.len());
            for i in rows {
                match loaded.quant.as_ref().and_then(|q| q.logical_at(i)) {
                    Some(lt) => selection.extend(lt.parts().iter().filter_map(|(_, p)| {
                        ck.info(*p).and_then(|info| ck.position(info.name()))
                    })),
                    None => selection.push(i),
                }
            }
            selection.sort_unstable();
            selection.dedup();
            Some((ck, selection, loaded.quant.is_some()))
        });
        match target {
            Some((_, sel, _)) if sel.is_empty() => {
                self.session
                    .notify("no tensor to save: the filter shows none");
            }
            Some((ck, sel, quantized)) => {
                let (mut d, mut form) = SaveAsDialog::new(ck, sel);
                d.quantized = quantized;
                form.dequantize = false;
                d.browse.unavailable = !self.dialog.available();
                self.session.save_as = Some(d);
                self.views.save_as = form;
            }
            None => self.session.notify("open a checkpoint first"),
        }
    }

    pub(super) fn browse(&mut self, form: WriteForm) {
        if self.browse_of(form).is_none() {
            return;
        }
        let suggested = work::typed_path(match form {
            WriteForm::Export => &self.views.export.path,
            WriteForm::SaveAs => &self.views.save_as.path,
        });
        let dialog = Arc::clone(self.dialog);
        let job = self.spawn("save-dialog", move |_, _| Ok(dialog.save_file(&suggested)));
        if let Some(b) = self.browse_of(form) {
            b.task.start((), job);
        }
    }

    /// The *Browse…* state of an open form.
    fn browse_of(&mut self, form: WriteForm) -> Option<&mut Browse> {
        match form {
            WriteForm::Export => self.session.export.as_mut().map(|d| &mut d.browse),
            WriteForm::SaveAs => self.session.save_as.as_mut().map(|d| &mut d.browse),
        }
    }

    pub(super) fn start_export(&mut self) {
        let Some(d) = &self.session.export else {
            return;
        };
        let Some(tensor) = d.ck.tensors().get(d.index).copied() else {
            return;
        };
        let ck = Arc::clone(&d.ck);
        let quant = d.quant.clone();
        let index = d.index;
        let form = &self.views.export;
        let out = work::typed_path(&form.path);
        let opts = ExportOptions {
            encoding: if form.raw {
                Encoding::RawCodes
            } else {
                Encoding::Values
            },
            size_limit: if form.force {
                SizeLimit::Ignore
            } else {
                SizeLimit::Enforce
            },
            ..ExportOptions::default()
        };
        let job = self.spawn("export-tensor", move |cancel, progress| {
            // A quantized weight's row exports its values.
            match quant.as_ref().and_then(|q| q.logical_at(index)) {
                Some(lt) => export::export_logical(&ck, lt, &out, &opts, cancel, progress),
                None => export::export_tensor(&ck, tensor, &out, &opts, cancel, progress),
            }
        });
        if let Some(d) = &mut self.session.export {
            d.task.start((), job);
        }
    }

    pub(super) fn start_save_as(&mut self) {
        let Some(d) = &self.session.save_as else {
            return;
        };
        let opts = work::resave_options(d, &self.views.save_as);
        let ck = Arc::clone(&d.ck);
        let out = work::typed_path(&self.views.save_as.path);
        let job = opts.map(|opts| {
            self.spawn("save-as", move |cancel, progress| {
                crate::resave::resave(&ck, &out, &opts, cancel, progress)
            })
        });
        if let Some(d) = &mut self.session.save_as {
            d.invalid = None;
            match job {
                Ok(job) => d.task.start((), job),
                // An invalid form replaces the last outcome, as a failed
                // save would.
                Err(message) => {
                    d.task.clear();
                    d.invalid = Some(message);
                }
            }
        }
    }

    pub(super) fn cancel(&mut self, id: JobId) {
        let session = &mut *self.session;
        match id {
            JobId::Load(i) => {
                // Parsing a header does not check for cancellation, and
                // writes nothing: stop waiting for it.
                if let Some(t) = session.tabs.get_mut(i) {
                    t.load.abandon();
                }
            }
            JobId::Series(i) => {
                if let Some(r) = session.tabs.get_mut(i).and_then(|t| t.run.as_mut()) {
                    r.task.cancel();
                }
            }
            JobId::Write(WriteForm::Export) => {
                if let Some(d) = &mut session.export {
                    d.task.cancel();
                }
            }
            JobId::Write(WriteForm::SaveAs) => {
                if let Some(d) = &mut session.save_as {
                    d.task.cancel();
                }
            }
            JobId::Stats | JobId::Scan | JobId::Heatmap | JobId::Diff | JobId::PairDetail => {
                let Some(t) = session.active_tab_mut() else {
                    return;
                };
                match id {
                    JobId::Stats => t.tensor.stats.cancel(),
                    JobId::Heatmap => t.tensor.heatmap.cancel(),
                    JobId::Scan => {
                        if let Some(s) = &mut t.tensor.scan {
                            s.task.cancel();
                        }
                    }
                    JobId::Diff => {
                        if let Some(c) = &mut t.compare {
                            c.diff.cancel();
                        }
                    }
                    _ => {
                        if let Some(c) = &mut t.compare {
                            c.detail.cancel();
                        }
                    }
                }
            }
        }
    }
}
