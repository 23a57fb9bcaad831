//! Statistics in the tensor view (a job per tensor, cached), the
//! histograms (egui_plot), and the whole-file scan that adds min, max, std
//! and NaN/Inf columns to the table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use eframe::egui;
use egui_plot::{Bar, BarChart, Plot};

use super::model::{ScanFigures, fmt_value};
use crate::dtype::decode::BitOrder;
use crate::format::{Checkpoint, TensorRef};
use crate::jobs::{Job, JobState};
use crate::stats::{self, Detail, Scalar, StatsError, StatsOptions, TensorStats, ValueStats};

/// Tensors scanned per batch, so the table fills in as the scan goes.
const SCAN_BATCH_BYTES: u64 = 256 << 20;

/// Which histogram is drawn.
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

type StatsResult = Result<TensorStats, StatsError>;

struct ScanState {
    figures: Arc<Mutex<Vec<Option<ScanFigures>>>>,
    snapshot: Vec<Option<ScanFigures>>,
    job: Option<Job<Result<(), StatsError>>>,
    outcome: Option<Result<(), String>>,
}

/// Statistics jobs, cache and scan for one tab.
#[derive(Default)]
pub struct StatsState {
    cache: HashMap<(usize, BitOrder), Arc<StatsResult>>,
    pending: Option<((usize, BitOrder), Job<StatsResult>)>,
    /// The histogram shown.
    pub hist: HistKind,
    /// Counts on a log scale.
    pub log_counts: bool,
    /// Show the real and imaginary parts of a complex tensor.
    pub show_parts: bool,
    scan: Option<ScanState>,
}

impl StatsState {
    /// True while a job runs.
    pub fn is_busy(&self) -> bool {
        self.pending.is_some() || self.scan.as_ref().is_some_and(|s| s.job.is_some())
    }

    /// Scan figures per tensor, once a scan has started.
    pub fn scan_figures(&self) -> Option<&[Option<ScanFigures>]> {
        self.scan.as_ref().map(|s| s.snapshot.as_slice())
    }

    /// The cached statistics of a tensor, if computed.
    pub fn cached(&self, index: usize, order: BitOrder) -> Option<&StatsResult> {
        self.cache.get(&(index, order)).map(AsRef::as_ref)
    }

    /// Collects finished jobs; true when scan figures changed.
    pub fn poll(&mut self, _ck: &Arc<Checkpoint>) -> bool {
        if let Some((key, job)) = &mut self.pending {
            let key = *key;
            match job.poll() {
                JobState::Running => {}
                JobState::Done(r) => {
                    // A cancelled run is not cached: selecting again restarts it.
                    if !matches!(r, Err(StatsError::Cancelled)) {
                        self.cache.insert(key, Arc::new(r));
                    }
                    self.pending = None;
                }
                JobState::Panicked(m) => {
                    self.cache.insert(
                        key,
                        Arc::new(Err(StatsError::Load(crate::format::LoadError::Io {
                            path: std::path::PathBuf::new(),
                            source: std::io::Error::other(format!("internal error: {m}")).into(),
                        }))),
                    );
                    self.pending = None;
                }
            }
        }
        let mut changed = false;
        if let Some(scan) = &mut self.scan {
            if let Ok(figs) = scan.figures.lock()
                && *figs != scan.snapshot
            {
                scan.snapshot.clone_from(&figs);
                changed = true;
            }
            if let Some(job) = &mut scan.job {
                match job.poll() {
                    JobState::Running => {}
                    JobState::Done(r) => {
                        scan.outcome = Some(r.map_err(|e| e.to_string()));
                        scan.job = None;
                        changed = true;
                    }
                    JobState::Panicked(m) => {
                        scan.outcome = Some(Err(m));
                        scan.job = None;
                    }
                }
            }
        }
        changed
    }

    fn start(
        &mut self,
        ck: &Arc<Checkpoint>,
        index: usize,
        order: BitOrder,
        repaint: impl Fn() + Send + Sync + 'static,
    ) {
        let Some(tref) = ck.tensors.get(index).copied() else {
            return;
        };
        let ck = Arc::clone(ck);
        let options = StatsOptions {
            bit_order: order,
            ..StatsOptions::default()
        };
        if let Ok(job) = Job::spawn("tensor-stats", repaint, move |cancel, progress| {
            crate::jobs::on_job_pool(|| stats::tensor_stats(&ck, tref, &options, cancel, progress))
        }) {
            // Replacing the pending job drops (cancels) the previous one.
            self.pending = Some(((index, order), job));
        }
    }

    /// Starts the whole-file scan on all cores but one.
    pub fn start_scan(&mut self, ck: &Arc<Checkpoint>, repaint: impl Fn() + Send + Sync + 'static) {
        let figures = Arc::new(Mutex::new(vec![None; ck.tensors.len()]));
        let shared = Arc::clone(&figures);
        let ck = Arc::clone(ck);
        let job = Job::spawn("scan-file", repaint, move |cancel, progress| {
            let options = StatsOptions {
                detail: Detail::MomentsOnly,
                ..StatsOptions::default()
            };
            let total: u64 = ck
                .tensors
                .iter()
                .filter_map(|t| ck.info(*t))
                .map(|i| stats::planned_work(i.dtype, i.nbytes, &options))
                .fold(0, u64::saturating_add);
            progress.set_total(total);
            let mut batch: Vec<(usize, TensorRef)> = Vec::new();
            let mut batch_bytes = 0u64;
            let run = |batch: &[(usize, TensorRef)]| -> Result<(), StatsError> {
                let refs: Vec<TensorRef> = batch.iter().map(|(_, t)| *t).collect();
                let inner = crate::jobs::Progress::new();
                let report =
                    crate::jobs::on_job_pool(|| stats::scan(&ck, &refs, &options, cancel, &inner))?;
                progress.add(inner.done());
                if let Ok(mut figs) = shared.lock() {
                    for ((i, _), t) in batch.iter().zip(&report.tensors) {
                        if let Some(slot) = figs.get_mut(*i) {
                            *slot = Some(figures_of(&t.values));
                        }
                    }
                }
                Ok(())
            };
            for (i, t) in ck.tensors.iter().enumerate() {
                batch.push((i, *t));
                batch_bytes += ck.info(*t).map_or(0, |i| i.nbytes);
                if batch_bytes >= SCAN_BATCH_BYTES || batch.len() >= 4096 {
                    run(&batch)?;
                    batch.clear();
                    batch_bytes = 0;
                }
            }
            if !batch.is_empty() {
                run(&batch)?;
            }
            Ok(())
        });
        match job {
            Ok(job) => {
                self.scan = Some(ScanState {
                    figures,
                    snapshot: Vec::new(),
                    job: Some(job),
                    outcome: None,
                });
            }
            Err(e) => {
                self.scan = Some(ScanState {
                    figures,
                    snapshot: Vec::new(),
                    job: None,
                    outcome: Some(Err(e.to_string())),
                });
            }
        }
    }
}

fn figures_of(v: &ValueStats) -> ScanFigures {
    ScanFigures {
        min: v.min.map(Scalar::to_f64),
        max: v.max.map(Scalar::to_f64),
        std: v.std,
        non_finite: v.nan + v.pos_inf + v.neg_inf,
    }
}

/// The scan bar above the tensor view: start, progress, cancel, summary.
pub fn scan_bar_ui(
    ui: &mut egui::Ui,
    s: &mut StatsState,
    ck: &Arc<Checkpoint>,
    repaint: impl Fn() + Send + Sync + 'static,
) {
    ui.horizontal_wrapped(|ui| {
        let running = s.scan.as_ref().is_some_and(|x| x.job.is_some());
        if running {
            if let Some(job) = s.scan.as_ref().and_then(|x| x.job.as_ref()) {
                ui.spinner();
                if let Some(f) = job.progress().fraction() {
                    ui.add(
                        egui::ProgressBar::new(f)
                            .desired_width(160.0)
                            .show_percentage(),
                    );
                }
                if ui.button("Cancel scan").clicked() {
                    job.cancel();
                }
            }
            return;
        }
        if ui
            .button(if s.scan.is_some() {
                "Scan again"
            } else {
                "Scan whole file"
            })
            .on_hover_text(
                "Statistics of every tensor: adds Min, Max, Std and NaN/Inf columns to the table",
            )
            .clicked()
        {
            s.start_scan(ck, repaint);
            return;
        }
        if let Some(scan) = &s.scan {
            match &scan.outcome {
                Some(Err(e)) if e == "cancelled" => {
                    ui.weak("Scan cancelled; the columns show what was done.");
                }
                Some(Err(e)) => {
                    ui.colored_label(ui.visuals().error_fg_color, super::safe_text(e, 300));
                }
                _ => {
                    let figs = &scan.snapshot;
                    let bad = figs.iter().flatten().filter(|f| f.non_finite > 0).count();
                    let zero = figs
                        .iter()
                        .flatten()
                        .filter(|f| f.min == Some(0.0) && f.max == Some(0.0))
                        .count();
                    let largest = figs
                        .iter()
                        .enumerate()
                        .filter_map(|(i, f)| {
                            let f = (*f)?;
                            let m = f.min?.abs().max(f.max?.abs());
                            Some((i, m))
                        })
                        .max_by(|a, b| a.1.total_cmp(&b.1));
                    let warn = ui.visuals().warn_fg_color;
                    if bad > 0 {
                        ui.colored_label(warn, format!("{bad} tensors with NaN/Inf"));
                    } else {
                        ui.label("no NaN/Inf");
                    }
                    ui.label(format!("· {zero} all-zero"));
                    if let Some((i, m)) = largest {
                        let name = ck
                            .tensors
                            .get(i)
                            .and_then(|t| ck.info(*t))
                            .map_or("", |x| x.name.as_str());
                        ui.label(format!(
                            "· largest |x| {} in {}",
                            fmt_value(m),
                            super::safe_text(name, 60)
                        ));
                    }
                }
            }
        }
    });
}

/// The statistics section for tensor `index`.
pub fn stats_ui(
    ui: &mut egui::Ui,
    s: &mut StatsState,
    ck: &Arc<Checkpoint>,
    index: usize,
    order: BitOrder,
    repaint: impl Fn() + Send + Sync + 'static,
) {
    let key = (index, order);
    if !s.cache.contains_key(&key) && s.pending.as_ref().is_none_or(|(k, _)| *k != key) {
        s.start(ck, index, order, repaint);
    }
    if let Some((k, job)) = &s.pending
        && *k == key
    {
        super::job_row(ui, job, "Computing statistics", 180.0);
    }
    let Some(result) = s.cache.get(&key).cloned() else {
        return;
    };
    match result.as_ref() {
        Err(e) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                super::safe_text(&e.to_string(), 500),
            );
        }
        Ok(t) => {
            egui::ScrollArea::vertical()
                .auto_shrink(false)
                .show(ui, |ui| {
                    if let (Some(re), Some(im)) = (&t.real, &t.imag) {
                        ui.label("Figures of the magnitude |z|; the parts are below.");
                        figures_ui(ui, "stats_abs", &t.values);
                        histogram_ui(ui, s, &t.values, t.dtype.is_small_float(), "hist_abs");
                        ui.checkbox(&mut s.show_parts, "Show the real and imaginary parts");
                        if s.show_parts {
                            ui.strong("Real part");
                            figures_ui(ui, "stats_re", re);
                            ui.strong("Imaginary part");
                            figures_ui(ui, "stats_im", im);
                        }
                    } else {
                        figures_ui(ui, "stats_values", &t.values);
                        histogram_ui(ui, s, &t.values, t.dtype.is_small_float(), "hist_values");
                    }
                });
        }
    }
}

fn scalar(v: Option<Scalar>) -> String {
    match v {
        None => "—".into(),
        Some(Scalar::Int(i)) => i.to_string(),
        Some(Scalar::UInt(u)) => u.to_string(),
        Some(Scalar::Float(x)) => fmt_value(x),
    }
}

fn float(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), fmt_value)
}

fn figures_ui(ui: &mut egui::Ui, id: &str, v: &ValueStats) {
    egui::Grid::new(id)
        .num_columns(4)
        .spacing([14.0, 3.0])
        .striped(true)
        .show(ui, |ui| {
            let warn = ui.visuals().warn_fg_color;
            let pair = |ui: &mut egui::Ui, k: &str, val: String, alert: bool| {
                ui.weak(k);
                if alert {
                    ui.colored_label(warn, val);
                } else {
                    ui.monospace(val);
                }
            };
            pair(ui, "count", v.count.to_string(), false);
            pair(ui, "finite", v.finite.to_string(), false);
            ui.end_row();
            pair(ui, "NaN", v.nan.to_string(), v.nan > 0);
            pair(
                ui,
                "+Inf / -Inf",
                format!("{} / {}", v.pos_inf, v.neg_inf),
                v.pos_inf + v.neg_inf > 0,
            );
            ui.end_row();
            pair(ui, "zeros", v.zeros.to_string(), false);
            pair(ui, "subnormals", v.subnormals.to_string(), false);
            ui.end_row();
            pair(ui, "min", scalar(v.min), false);
            pair(ui, "max", scalar(v.max), false);
            ui.end_row();
            pair(ui, "mean", float(v.mean), false);
            pair(ui, "std", float(v.std), false);
            ui.end_row();
            pair(ui, "mean |x|", float(v.abs_mean), false);
            pair(ui, "L2 norm", float(v.l2_norm), false);
            ui.end_row();
            if let Some(t) = v.true_count {
                pair(ui, "true", t.to_string(), false);
                pair(ui, "false", v.count.saturating_sub(t).to_string(), false);
                ui.end_row();
            }
        });
    if let Some(q) = &v.quantiles {
        ui.add_space(4.0);
        egui::Grid::new((id, "q"))
            .num_columns(6)
            .spacing([14.0, 3.0])
            .striped(true)
            .show(ui, |ui| {
                for (i, ((name, _), value)) in stats::QUANTILES.iter().zip(q.0).enumerate() {
                    ui.weak(name.replace('_', "."));
                    ui.monospace(scalar(value));
                    if i % 3 == 2 {
                        ui.end_row();
                    }
                }
            });
        if let Some(err) = v.quantile_error {
            ui.weak(format!(
                "quantiles within ±{} of the exact values",
                fmt_value(err)
            ));
        }
    }
}

#[allow(
    clippy::many_single_char_names,
    reason = "short names for plot coordinates"
)]
fn histogram_ui(
    ui: &mut egui::Ui,
    s: &mut StatsState,
    v: &ValueStats,
    small_float: bool,
    id: &str,
) {
    ui.add_space(6.0);
    ui.horizontal(|ui| {
        ui.selectable_value(&mut s.hist, HistKind::Linear, "Linear");
        ui.selectable_value(&mut s.hist, HistKind::Log2, "log2 |x|");
        if small_float || v.code_histogram.is_some() {
            ui.selectable_value(&mut s.hist, HistKind::Codes, "Per code");
        }
        ui.separator();
        ui.checkbox(&mut s.log_counts, "log counts");
    });
    let kind = if s.hist == HistKind::Codes && v.code_histogram.is_none() {
        HistKind::Linear
    } else {
        s.hist
    };
    let log = s.log_counts;
    let y = move |c: u64| {
        if log {
            if c == 0 {
                0.0
            } else {
                (c as f64).log10() + 1.0
            }
        } else {
            c as f64
        }
    };
    let (bars, x_label): (Vec<Bar>, &str) = match kind {
        HistKind::Linear => match &v.histogram {
            Some(h) if !h.counts.is_empty() => (
                h.counts
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| {
                        let (lo, hi) = (
                            h.edges[i],
                            h.edges.get(i + 1).copied().unwrap_or(h.edges[i]),
                        );
                        let width = if hi > lo { hi - lo } else { 1.0 };
                        Bar::new(f64::midpoint(lo, hi), y(c))
                            .width(width)
                            .name(format!("[{}, {}): {c}", fmt_value(lo), fmt_value(hi)))
                    })
                    .collect(),
                "value",
            ),
            _ => (Vec::new(), "value"),
        },
        HistKind::Log2 => match &v.log2_histogram {
            Some(h) => {
                let mut bars: Vec<Bar> = h
                    .exponents
                    .iter()
                    .zip(&h.counts)
                    .map(|(&e, &c)| {
                        Bar::new(f64::from(e), y(c))
                            .width(0.9)
                            .name(format!("|x| in [2^{e}, 2^{}): {c}", e + 1))
                    })
                    .collect();
                let low = h.exponents.first().copied().unwrap_or(0);
                if h.subnormals > 0 {
                    bars.push(
                        Bar::new(f64::from(low) - 2.0, y(h.subnormals))
                            .width(0.9)
                            .name(format!("subnormals: {}", h.subnormals)),
                    );
                }
                if h.zeros > 0 {
                    bars.push(
                        Bar::new(f64::from(low) - 3.0, y(h.zeros))
                            .width(0.9)
                            .name(format!("zeros: {}", h.zeros)),
                    );
                }
                (
                    bars,
                    "binary exponent of |x| (zeros and subnormals at the left)",
                )
            }
            None => (Vec::new(), "binary exponent"),
        },
        HistKind::Codes => match &v.code_histogram {
            Some(h) => {
                let vals: Vec<f64> = h.values.clone();
                let bars = vals
                    .iter()
                    .enumerate()
                    .zip(&h.counts)
                    .map(|((i, &x), &c)| {
                        let prev = if i > 0 {
                            x - vals[i - 1]
                        } else {
                            f64::INFINITY
                        };
                        let next = vals.get(i + 1).map_or(f64::INFINITY, |n| n - x);
                        let gap = prev.min(next);
                        let w = if gap.is_finite() && gap > 0.0 {
                            gap * 0.8
                        } else {
                            1.0
                        };
                        Bar::new(x, y(c))
                            .width(w)
                            .name(format!("{}: {c}", fmt_value(x)))
                    })
                    .collect();
                (bars, "representable value")
            }
            None => (Vec::new(), "value"),
        },
    };
    if bars.is_empty() {
        ui.weak("No finite values: nothing to plot.");
        return;
    }
    let colour = ui.visuals().selection.bg_fill;
    Plot::new(id)
        .height(220.0)
        .allow_scroll(false)
        .x_axis_label(x_label)
        .y_axis_label(if log { "count (log10 + 1)" } else { "count" })
        .show(ui, |plot| {
            plot.bar_chart(BarChart::new("histogram", bars).color(colour));
        });
}
