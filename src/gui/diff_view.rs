//! The diff view: the active file compared with a second checkpoint. A
//! table of every name with its status and metrics (sortable, filterable),
//! a summary, a per-layer chart, and for the selected pair both sides'
//! statistics, overlaid histograms, the Δ histogram and a map of |Δ|.

use std::path::PathBuf;
use std::sync::Arc;

use eframe::egui;
use egui_extras::{Column as TableColumn, TableBuilder};
use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints, Points};

use super::app::{Load, Loaded};
use super::model::{fmt_shape, fmt_value, natural_cmp};
use crate::diff::{
    self, DeltaHistogram, DiffError, DiffOptions, DiffReport, Pair, Status, TensorDiff,
};
use crate::format::{Checkpoint, LoadError};
use crate::jobs::{Job, JobState};
use crate::stats::heatmap::Heatmap;
use crate::stats::{self, StatsOptions, TensorStats};

/// One line of the diff table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffRow {
    /// A matched pair (index into the report's tensors).
    Pair(usize),
    /// A name only in A (index into `only_in_a`).
    OnlyA(usize),
    /// A name only in B (index into `only_in_b`).
    OnlyB(usize),
}

/// Which rows the table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffFilter {
    /// Everything.
    #[default]
    All,
    /// Pairs that are not identical or equal, and names on one side only.
    Changed,
    /// Names on one side only.
    OneSide,
    /// Dtype or shape changes.
    Structure,
}

/// A sortable column of the diff table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffColumn {
    /// Name.
    Name,
    /// Status.
    Status,
    /// max |Δ|.
    MaxAbs,
    /// mean |Δ|.
    MeanAbs,
    /// relative L2.
    RelL2,
    /// cosine.
    Cosine,
    /// changed elements.
    Changed,
    /// NaN/Inf mismatches.
    Mismatch,
}

/// Details of the selected pair.
pub struct PairDetail {
    /// A's statistics.
    pub a: Option<TensorStats>,
    /// B's statistics.
    pub b: Option<TensorStats>,
    /// The linear histogram of Δ.
    pub delta: Option<DeltaHistogram>,
    /// The map of |Δ|.
    pub map: Option<Heatmap>,
}

/// A comparison of the tab's file (A) with another (B).
pub struct CompareState {
    /// B's path.
    pub path_b: PathBuf,
    /// B's state.
    pub load_b: Load,
    /// The diff job.
    pub job: Option<Job<Result<DiffReport, DiffError>>>,
    /// The diff.
    pub report: Option<Result<DiffReport, String>>,
    /// Rows shown.
    pub rows: Vec<DiffRow>,
    /// Filter.
    pub filter: DiffFilter,
    /// Name filter text.
    pub name_filter: String,
    /// Sort.
    pub sort: (DiffColumn, bool),
    /// Rows must be recomputed.
    pub dirty: bool,
    /// Selected pair (index into the report's tensors).
    pub selected: Option<usize>,
    detail_job: Option<(usize, Job<Result<PairDetail, String>>)>,
    detail: Option<(usize, Result<PairDetail, String>)>,
    texture: Option<(usize, egui::TextureHandle)>,
    /// Show the per-layer chart.
    pub show_layers: bool,
}

impl CompareState {
    /// A comparison with `path_b`, loading in `job`.
    pub fn new(path_b: PathBuf, job: Job<Result<Loaded, LoadError>>) -> Self {
        Self {
            path_b,
            load_b: Load::Loading {
                job,
                started: std::time::Instant::now(),
            },
            job: None,
            report: None,
            rows: Vec::new(),
            filter: DiffFilter::All,
            name_filter: String::new(),
            sort: (DiffColumn::RelL2, false),
            dirty: true,
            selected: None,
            detail_job: None,
            detail: None,
            texture: None,
            show_layers: true,
        }
    }

    /// True while a job runs.
    pub fn is_busy(&self) -> bool {
        matches!(self.load_b, Load::Loading { .. })
            || self.job.is_some()
            || self.detail_job.is_some()
    }

    /// B, once loaded.
    pub fn b(&self) -> Option<&Arc<Checkpoint>> {
        match &self.load_b {
            Load::Ready(l) => Some(&l.ck),
            _ => None,
        }
    }

    /// Collects finished jobs and starts the diff once both sides are ready.
    pub fn poll(
        &mut self,
        a: Option<&Arc<Checkpoint>>,
        repaint: impl Fn() + Send + Sync + 'static,
    ) {
        if let Load::Loading { job, .. } = &mut self.load_b {
            match job.poll() {
                JobState::Running => {}
                JobState::Done(Ok(l)) => self.load_b = Load::Ready(l),
                JobState::Done(Err(e)) => self.load_b = Load::Failed(e),
                JobState::Panicked(m) => {
                    self.load_b = Load::Failed(LoadError::Io {
                        path: self.path_b.clone(),
                        source: std::io::Error::other(m).into(),
                    });
                }
            }
        }
        if let (Some(a), Some(b)) = (a, self.b())
            && self.report.is_none()
            && self.job.is_none()
        {
            let (a, b) = (Arc::clone(a), Arc::clone(b));
            self.job = Job::spawn("diff", repaint, move |cancel, progress| {
                crate::jobs::on_job_pool(|| {
                    diff::diff(&a, &b, &DiffOptions::default(), cancel, progress)
                })
            })
            .ok();
        }
        if let Some(job) = &mut self.job {
            match job.poll() {
                JobState::Running => {}
                JobState::Done(r) => {
                    self.report = Some(r.map_err(|e| e.to_string()));
                    self.job = None;
                    self.dirty = true;
                }
                JobState::Panicked(m) => {
                    self.report = Some(Err(m));
                    self.job = None;
                }
            }
        }
        if let Some((i, job)) = &mut self.detail_job {
            let i = *i;
            match job.poll() {
                JobState::Running => {}
                JobState::Done(r) => {
                    self.detail = Some((i, r));
                    self.detail_job = None;
                    self.texture = None;
                }
                JobState::Panicked(m) => {
                    self.detail = Some((i, Err(m)));
                    self.detail_job = None;
                }
            }
        }
        if self.dirty {
            self.refresh_rows();
        }
    }

    fn refresh_rows(&mut self) {
        self.dirty = false;
        let Some(Ok(report)) = &self.report else {
            self.rows.clear();
            return;
        };
        let needle = self.name_filter.to_lowercase();
        let name_ok = |n: &str| needle.is_empty() || n.to_lowercase().contains(&needle);
        let mut rows: Vec<DiffRow> = Vec::new();
        for (i, t) in report.tensors.iter().enumerate() {
            let keep = match self.filter {
                DiffFilter::All => true,
                DiffFilter::Changed => !t.status.is_same(),
                DiffFilter::OneSide => false,
                DiffFilter::Structure => {
                    matches!(t.status, Status::DtypeChanged | Status::ShapeChanged)
                }
            };
            if keep && name_ok(&t.name) {
                rows.push(DiffRow::Pair(i));
            }
        }
        if matches!(
            self.filter,
            DiffFilter::All | DiffFilter::Changed | DiffFilter::OneSide
        ) {
            rows.extend(
                (0..report.only_in_a.len())
                    .filter(|&i| name_ok(&report.only_in_a[i]))
                    .map(DiffRow::OnlyA),
            );
            rows.extend(
                (0..report.only_in_b.len())
                    .filter(|&i| name_ok(&report.only_in_b[i]))
                    .map(DiffRow::OnlyB),
            );
        }
        let (col, ascending) = self.sort;
        let metric = |r: &DiffRow| -> Option<f64> {
            let DiffRow::Pair(i) = r else { return None };
            let t = &report.tensors[*i];
            match col {
                DiffColumn::MaxAbs => t.max_abs_diff,
                DiffColumn::MeanAbs => t.mean_abs_diff,
                DiffColumn::RelL2 => t.rel_l2,
                DiffColumn::Cosine => t.cosine,
                DiffColumn::Changed => t.changed_elements.map(|c| c as f64),
                DiffColumn::Mismatch => t.nan_mismatches.map(|c| c as f64),
                _ => None,
            }
        };
        let name = |r: &DiffRow| -> &str {
            match r {
                DiffRow::Pair(i) => &report.tensors[*i].name,
                DiffRow::OnlyA(i) => &report.only_in_a[*i],
                DiffRow::OnlyB(i) => &report.only_in_b[*i],
            }
        };
        let status_rank = |r: &DiffRow| match r {
            DiffRow::Pair(i) => report.tensors[*i].status as u8,
            DiffRow::OnlyA(_) => 10,
            DiffRow::OnlyB(_) => 11,
        };
        rows.sort_by(|x, y| {
            let ord = match col {
                DiffColumn::Name => natural_cmp(name(x), name(y)),
                DiffColumn::Status => status_rank(x).cmp(&status_rank(y)),
                _ => match (metric(x), metric(y)) {
                    (Some(p), Some(q)) => p.total_cmp(&q),
                    // Rows without the figure sort last either way.
                    (Some(_), None) => return std::cmp::Ordering::Less,
                    (None, Some(_)) => return std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                },
            };
            let ord = if ascending { ord } else { ord.reverse() };
            ord.then_with(|| natural_cmp(name(x), name(y)))
        });
        self.rows = rows;
    }

    fn select(
        &mut self,
        i: usize,
        a: &Arc<Checkpoint>,
        repaint: impl Fn() + Send + Sync + 'static,
    ) {
        self.selected = Some(i);
        if self.detail.as_ref().is_some_and(|(d, _)| *d == i)
            || self.detail_job.as_ref().is_some_and(|(d, _)| *d == i)
        {
            return;
        }
        let (Some(b), Some(Ok(report))) = (self.b(), &self.report) else {
            return;
        };
        let Some(t) = report.tensors.get(i) else {
            return;
        };
        let name_a = t.name_a.clone().unwrap_or_else(|| t.name.clone());
        let (Some(ta), Some(tb)) = (a.find(&name_a), b.find(&t.name)) else {
            return;
        };
        let (a, b) = (Arc::clone(a), Arc::clone(b));
        let pair = Pair { a: ta, b: tb };
        let job = Job::spawn("diff-pair", repaint, move |cancel, progress| {
            let options = StatsOptions::default();
            let sa = stats::tensor_stats(&a, ta, &options, cancel, progress)
                .map_err(|e| e.to_string())?;
            let sb = stats::tensor_stats(&b, tb, &options, cancel, progress)
                .map_err(|e| e.to_string())?;
            let opts = DiffOptions::default();
            let delta = diff::delta_histogram(&a, &b, pair, 128, &opts, cancel, progress)
                .map_err(|e| e.to_string())?;
            let map = diff::abs_delta_map(&a, &b, pair, 256, &opts, cancel, progress)
                .map_err(|e| e.to_string())?;
            Ok(PairDetail {
                a: Some(sa),
                b: Some(sb),
                delta,
                map,
            })
        });
        if let Ok(job) = job {
            self.detail_job = Some((i, job));
        }
    }
}

fn status_colour(ui: &egui::Ui, s: Option<Status>) -> egui::Color32 {
    let dark = ui.visuals().dark_mode;
    match s {
        Some(Status::Identical) => ui.visuals().weak_text_color(),
        Some(Status::Equal) => {
            if dark {
                egui::Color32::from_rgb(120, 190, 120)
            } else {
                egui::Color32::from_rgb(40, 120, 40)
            }
        }
        Some(Status::Changed) => {
            if dark {
                egui::Color32::from_rgb(255, 170, 60)
            } else {
                egui::Color32::from_rgb(170, 90, 0)
            }
        }
        Some(Status::DtypeChanged | Status::ShapeChanged) => {
            if dark {
                egui::Color32::from_rgb(120, 170, 255)
            } else {
                egui::Color32::from_rgb(30, 80, 180)
            }
        }
        None => ui.visuals().error_fg_color,
    }
}

/// The central panel of a comparison: summary, filters, chart and table.
#[allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of the comparison"
)]
pub fn diff_table_ui(
    ui: &mut egui::Ui,
    c: &mut CompareState,
    a: Option<&Arc<Checkpoint>>,
    repaint: impl Fn() + Send + Sync + Clone + 'static,
    close: &mut bool,
) {
    ui.horizontal(|ui| {
        ui.strong("Comparing with");
        ui.label(super::safe_text(&c.path_b.display().to_string(), 200));
        if ui.button("Close comparison").clicked() {
            *close = true;
        }
    });
    match &c.load_b {
        Load::Failed(e) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!(
                    "{} cannot be opened: {} ({})",
                    super::safe_text(&c.path_b.display().to_string(), 200),
                    super::safe_text(&e.message(), 500),
                    e.kind()
                ),
            );
            return;
        }
        Load::Loading { .. } => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("Opening the second checkpoint…");
            });
            return;
        }
        _ => {}
    }
    if let Some(job) = &c.job {
        super::job_row(ui, job, "Comparing…", 240.0);
        return;
    }
    let report = match &c.report {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().error_fg_color, super::safe_text(e, 500));
            if ui.button("Compare again").clicked() {
                c.report = None;
            }
            return;
        }
        None => return,
    };
    // Summary.
    ui.horizontal_wrapped(|ui| {
        for s in [
            Status::Identical,
            Status::Equal,
            Status::Changed,
            Status::DtypeChanged,
            Status::ShapeChanged,
        ] {
            let n = report.summary.counts.get(s.name()).copied().unwrap_or(0);
            if n > 0 {
                ui.colored_label(
                    status_colour(ui, Some(s)),
                    format!("{n} {}", s.name().replace('_', " ")),
                );
            }
        }
        if !report.only_in_a.is_empty() {
            ui.colored_label(
                status_colour(ui, None),
                format!("{} only in A", report.only_in_a.len()),
            );
        }
        if !report.only_in_b.is_empty() {
            ui.colored_label(
                status_colour(ui, None),
                format!("{} only in B", report.only_in_b.len()),
            );
        }
        if let Some((name, r)) = &report.summary.largest_rel_l2 {
            ui.label(format!(
                "· largest relative change {} in {}",
                fmt_value(*r),
                super::safe_text(name, 80)
            ));
        }
        let m = &report.metadata;
        if m.is_empty() {
            ui.weak("· metadata equal");
        } else {
            ui.label(format!(
                "· metadata: {} added, {} removed, {} changed",
                m.added.len(),
                m.removed.len(),
                m.changed.len()
            ))
            .on_hover_text(metadata_text(report));
        }
        if report.summary.same {
            ui.strong("· no differences");
        }
    });
    ui.horizontal(|ui| {
        for (f, label) in [
            (DiffFilter::All, "All"),
            (DiffFilter::Changed, "Changed only"),
            (DiffFilter::OneSide, "Only in A/B"),
            (DiffFilter::Structure, "Dtype/shape changes"),
        ] {
            if ui.selectable_value(&mut c.filter, f, label).changed() {
                c.dirty = true;
            }
        }
        ui.separator();
        if ui
            .add(
                egui::TextEdit::singleline(&mut c.name_filter)
                    .hint_text("Filter names")
                    .desired_width(160.0),
            )
            .changed()
        {
            c.dirty = true;
        }
        ui.checkbox(&mut c.show_layers, "Per-layer chart");
    });
    if c.show_layers {
        layer_chart_ui(ui, report);
    }
    let report = report.clone();
    let row_h = ui.text_style_height(&egui::TextStyle::Body) + 6.0;
    let columns: [(DiffColumn, &str); 8] = [
        (DiffColumn::Name, "Name"),
        (DiffColumn::Status, "Status"),
        (DiffColumn::MaxAbs, "max |Δ|"),
        (DiffColumn::MeanAbs, "mean |Δ|"),
        (DiffColumn::RelL2, "rel L2"),
        (DiffColumn::Cosine, "cosine"),
        (DiffColumn::Changed, "changed"),
        (DiffColumn::Mismatch, "NaN/Inf mism."),
    ];
    let mut clicked_col = None;
    let mut clicked_row = None;
    ui.style_mut().interaction.selectable_labels = false;
    egui::ScrollArea::horizontal()
        .id_salt("diff_hscroll")
        .show(ui, |ui| {
            let mut tb = TableBuilder::new(ui)
                .id_salt("diff_table")
                .striped(true)
                .resizable(true)
                .sense(egui::Sense::click())
                .cell_layout(egui::Layout::left_to_right(egui::Align::Center))
                .column(TableColumn::initial(240.0).at_least(100.0).clip(true))
                .column(TableColumn::initial(110.0).clip(true));
            for _ in 2..columns.len() {
                tb = tb.column(TableColumn::initial(78.0).at_least(40.0).clip(true));
            }
            tb.header(row_h + 2.0, |mut h| {
                for (col, title) in columns {
                    h.col(|ui| {
                        let marker = if c.sort.0 == col {
                            if c.sort.1 { " ⏶" } else { " ⏷" }
                        } else {
                            ""
                        };
                        if ui
                            .add(
                                egui::Button::new(
                                    egui::RichText::new(format!("{title}{marker}")).strong(),
                                )
                                .frame(false),
                            )
                            .clicked()
                        {
                            clicked_col = Some(col);
                        }
                    });
                }
            })
            .body(|body| {
                body.rows(row_h, c.rows.len(), |mut row| {
                    let Some(r) = c.rows.get(row.index()).copied() else {
                        return;
                    };
                    let (name, t): (&str, Option<&TensorDiff>) = match r {
                        DiffRow::Pair(i) => (&report.tensors[i].name, Some(&report.tensors[i])),
                        DiffRow::OnlyA(i) => (&report.only_in_a[i], None),
                        DiffRow::OnlyB(i) => (&report.only_in_b[i], None),
                    };
                    if let DiffRow::Pair(i) = r {
                        row.set_selected(c.selected == Some(i));
                    }
                    row.col(|ui| {
                        ui.add(egui::Label::new(super::safe_text(name, 300)).truncate());
                    });
                    row.col(|ui| {
                        let (text, colour) = match (r, t) {
                            (DiffRow::Pair(_), Some(t)) => (
                                t.status.name().replace('_', " "),
                                status_colour(ui, Some(t.status)),
                            ),
                            (DiffRow::OnlyA(_), _) => ("only in A".into(), status_colour(ui, None)),
                            _ => ("only in B".into(), status_colour(ui, None)),
                        };
                        ui.colored_label(colour, text);
                    });
                    let opt = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), fmt_value);
                    let t = t.cloned();
                    for value in [
                        t.as_ref().and_then(|t| t.max_abs_diff),
                        t.as_ref().and_then(|t| t.mean_abs_diff),
                        t.as_ref().and_then(|t| t.rel_l2),
                        t.as_ref().and_then(|t| t.cosine),
                    ] {
                        row.col(|ui| {
                            ui.label(opt(value));
                        });
                    }
                    row.col(|ui| {
                        ui.label(
                            t.as_ref()
                                .and_then(|t| t.changed_elements)
                                .map_or_else(|| "—".into(), |v| v.to_string()),
                        );
                    });
                    row.col(|ui| {
                        let m = t.as_ref().and_then(|t| t.nan_mismatches);
                        match m {
                            Some(m) if m > 0 => {
                                ui.colored_label(ui.visuals().warn_fg_color, m.to_string());
                            }
                            Some(m) => {
                                ui.label(m.to_string());
                            }
                            None => {
                                ui.label("—");
                            }
                        }
                    });
                    if row.response().clicked()
                        && let DiffRow::Pair(i) = r
                    {
                        clicked_row = Some(i);
                    }
                });
            });
        });
    if let Some(col) = clicked_col {
        c.sort = if c.sort.0 == col {
            (col, !c.sort.1)
        } else {
            (
                col,
                matches!(
                    col,
                    DiffColumn::Name | DiffColumn::Status | DiffColumn::Cosine
                ),
            )
        };
        c.dirty = true;
    }
    if let (Some(i), Some(a)) = (clicked_row, a) {
        c.select(i, a, repaint);
    }
}

fn metadata_text(report: &DiffReport) -> String {
    let m = &report.metadata;
    let mut lines = Vec::new();
    for (k, v) in &m.added {
        lines.push(format!("+ {k} = {}", super::safe_text(v, 200)));
    }
    for (k, v) in &m.removed {
        lines.push(format!("- {k} = {}", super::safe_text(v, 200)));
    }
    for (k, v) in &m.changed {
        lines.push(format!(
            "~ {k}: {} -> {}",
            super::safe_text(&v.a, 100),
            super::safe_text(&v.b, 100)
        ));
    }
    lines.join("\n")
}

fn layer_chart_ui(ui: &mut egui::Ui, report: &DiffReport) {
    let mut points: Vec<[f64; 2]> = Vec::new();
    let mut per_layer: std::collections::BTreeMap<u64, (f64, u32)> =
        std::collections::BTreeMap::new();
    for t in &report.tensors {
        if let (Some(l), Some(r)) = (diff::layer_index(&t.name), t.rel_l2) {
            points.push([l as f64, r]);
            let e = per_layer.entry(l).or_insert((0.0, 0));
            e.0 += r;
            e.1 += 1;
        }
    }
    if points.is_empty() {
        ui.weak("No numbered layers (names with a numeric part such as layers.12) to chart.");
        return;
    }
    let means: Vec<[f64; 2]> = per_layer
        .iter()
        .map(|(l, (s, n))| [*l as f64, s / f64::from(*n)])
        .collect();
    Plot::new("layer_chart")
        .height(150.0)
        .allow_scroll(false)
        .legend(Legend::default())
        .x_axis_label("layer index")
        .y_axis_label("relative change |a−b| / |a|")
        .show(ui, |p| {
            p.points(Points::new("tensors", PlotPoints::from(points)).radius(2.5));
            p.line(Line::new("layer mean", PlotPoints::from(means)));
        });
}

/// The side panel of a comparison: the selected pair.
#[allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of the comparison"
)]
pub fn pair_ui(ui: &mut egui::Ui, c: &mut CompareState) {
    let Some(i) = c.selected else {
        ui.add_space(20.0);
        ui.vertical_centered(|ui| ui.weak("Select a pair in the table to compare its values."));
        return;
    };
    let Some(Ok(report)) = &c.report else { return };
    let Some(t) = report.tensors.get(i).cloned() else {
        return;
    };
    ui.add(
        egui::Label::new(
            egui::RichText::new(super::safe_text(&t.name, 400))
                .strong()
                .size(15.0),
        )
        .wrap(),
    );
    ui.horizontal_wrapped(|ui| {
        ui.colored_label(
            status_colour(ui, Some(t.status)),
            t.status.name().replace('_', " "),
        );
        ui.label(format!("A: {} {}", t.dtype_a, fmt_shape(&t.shape_a)));
        ui.label(format!("B: {} {}", t.dtype_b, fmt_shape(&t.shape_b)));
    });
    if let Some((_, job)) = &c.detail_job {
        super::job_row(ui, job, "", 160.0);
    }
    let Some((d, detail)) = &c.detail else { return };
    if *d != i {
        return;
    }
    let detail = match detail {
        Ok(d) => d,
        Err(e) => {
            ui.colored_label(ui.visuals().warn_fg_color, super::safe_text(e, 300));
            return;
        }
    };
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            if let (Some(a), Some(b)) = (&detail.a, &detail.b) {
                egui::Grid::new("pair_stats")
                    .num_columns(3)
                    .striped(true)
                    .spacing([14.0, 3.0])
                    .show(ui, |ui| {
                        ui.weak("");
                        ui.strong("A");
                        ui.strong("B");
                        ui.end_row();
                        let f = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), fmt_value);
                        let s = |v: Option<crate::stats::Scalar>| {
                            v.map_or_else(|| "—".to_owned(), |x| fmt_value(x.to_f64()))
                        };
                        for (k, va, vb) in [
                            ("min", s(a.values.min), s(b.values.min)),
                            ("max", s(a.values.max), s(b.values.max)),
                            ("mean", f(a.values.mean), f(b.values.mean)),
                            ("std", f(a.values.std), f(b.values.std)),
                            ("L2 norm", f(a.values.l2_norm), f(b.values.l2_norm)),
                            ("NaN", a.values.nan.to_string(), b.values.nan.to_string()),
                            (
                                "±Inf",
                                (a.values.pos_inf + a.values.neg_inf).to_string(),
                                (b.values.pos_inf + b.values.neg_inf).to_string(),
                            ),
                            (
                                "zeros",
                                a.values.zeros.to_string(),
                                b.values.zeros.to_string(),
                            ),
                        ] {
                            ui.weak(k);
                            ui.monospace(va);
                            ui.monospace(vb);
                            ui.end_row();
                        }
                    });
                ui.add_space(6.0);
                ui.strong("Histograms of A and B");
                let line = |h: &Option<crate::stats::Histogram>| -> Vec<[f64; 2]> {
                    h.as_ref()
                        .map(|h| {
                            h.counts
                                .iter()
                                .enumerate()
                                .map(|(i, &c)| {
                                    [
                                        f64::midpoint(
                                            h.edges[i],
                                            h.edges.get(i + 1).copied().unwrap_or(h.edges[i]),
                                        ),
                                        c as f64,
                                    ]
                                })
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let (la, lb) = (line(&a.values.histogram), line(&b.values.histogram));
                Plot::new("pair_overlay")
                    .height(160.0)
                    .allow_scroll(false)
                    .legend(Legend::default())
                    .show(ui, |p| {
                        p.line(Line::new("A", PlotPoints::from(la)));
                        p.line(Line::new("B", PlotPoints::from(lb)));
                    });
            }
            if let Some((edges, counts)) = &detail.delta {
                ui.strong("Δ = A − B");
                if counts.is_empty() {
                    ui.weak("No finite pairs.");
                } else {
                    let bars: Vec<Bar> = counts
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| {
                            let (lo, hi) =
                                (edges[i], edges.get(i + 1).copied().unwrap_or(edges[i]));
                            Bar::new(f64::midpoint(lo, hi), n as f64).width(if hi > lo {
                                hi - lo
                            } else {
                                1.0
                            })
                        })
                        .collect();
                    Plot::new("pair_delta")
                        .height(140.0)
                        .allow_scroll(false)
                        .show(ui, |p| {
                            p.bar_chart(BarChart::new("Δ", bars));
                        });
                }
            }
            if let Some(map) = &detail.map {
                ui.strong("|Δ| map (rows × last axis, max per block)");
                let tex = match &c.texture {
                    Some((k, t)) if *k == i => t.clone(),
                    _ => {
                        let img =
                            egui::ColorImage::from_rgb([map.width, map.height], &map.to_rgb());
                        let t =
                            ui.ctx()
                                .load_texture("delta_map", img, egui::TextureOptions::NEAREST);
                        c.texture = Some((i, t.clone()));
                        t
                    }
                };
                let w = ui.available_width().min(420.0);
                let h = (w * map.height as f32 / map.width.max(1) as f32).clamp(8.0, 420.0);
                ui.add(egui::Image::new((tex.id(), egui::vec2(w, h))));
                ui.weak(format!(
                    "|Δ| from {} (dark) to {} (bright)",
                    map.min.map_or_else(|| "—".into(), fmt_value),
                    map.max.map_or_else(|| "—".into(), fmt_value)
                ));
            }
        });
}
