//! The central panel of a comparison: the active file (A) against a second
//! checkpoint (B). A summary, filters, a per-layer chart, and a table of
//! every name with its status and metrics (sortable, filterable; the rows
//! are built by the runner when they change, not per frame).

use eframe::egui;
use egui_extras::{Column as TableColumn, TableBuilder};

use super::{failure_text, job_row};
use crate::diff::{DiffReport, Status, TensorDiff};
use crate::gui::command::{Command, JobId};
use crate::gui::safe_text;
use crate::gui::state::{
    CompareState, DiffColumn, DiffFilter, DiffRow, DiffStat, ReportDigest, Tab, ViewState,
};
use crate::gui::task::Failure;
use crate::text::{fmt_opt, fmt_value};

pub fn status_colour(ui: &egui::Ui, s: Option<Status>) -> egui::Color32 {
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
pub fn diff_table_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    index: usize,
    out: &mut Vec<Command>,
) {
    let Some(c) = &tab.compare else {
        return;
    };
    let path_b = safe_text(&c.path_b.display().to_string(), 200);
    ui.horizontal(|ui| {
        ui.strong("Comparing with");
        ui.label(&path_b);
        if ui.button("Close comparison").clicked() {
            out.push(Command::CloseCompare(index));
        }
    });
    if c.load_b.is_running() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("Opening the second checkpoint…");
        });
        return;
    }
    match c.load_b.latest() {
        Some(Err(Failure::Error(e))) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!(
                    "{path_b} cannot be opened: {} ({})",
                    safe_text(&e.message(), 500),
                    e.kind()
                ),
            );
            return;
        }
        Some(Err(e)) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("{path_b} cannot be opened: {}", failure_text(e, 500)),
            );
            return;
        }
        Some(Ok(_)) | None => {}
    }
    if c.diff.is_running() {
        job_row(ui, &c.diff, JobId::Diff, "Comparing…", 240.0, out);
        return;
    }
    let report = match c.diff.latest() {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().error_fg_color, failure_text(e, 500));
            if ui.button("Compare again").clicked() {
                out.push(Command::StartDiff(index));
            }
            return;
        }
        None => return,
    };
    summary_ui(ui, report, &c.digest);
    ui.horizontal(|ui| {
        for (f, label) in [
            (DiffFilter::All, "All"),
            (DiffFilter::Changed, "Changed only"),
            (DiffFilter::OneSide, "Only in A/B"),
            (DiffFilter::Structure, "Dtype/shape changes"),
        ] {
            if ui.selectable_label(c.filter == f, label).clicked() && c.filter != f {
                out.push(Command::SetDiffFilter(f));
            }
        }
        ui.separator();
        let mut text = c.name_filter.clone();
        if ui
            .add(
                egui::TextEdit::singleline(&mut text)
                    .hint_text("Filter names")
                    .desired_width(160.0),
            )
            .changed()
        {
            out.push(Command::SetDiffNameFilter(text));
        }
        ui.checkbox(&mut view.show_layer_chart, "Per-layer chart");
    });
    if view.show_layer_chart {
        layer_chart_ui(ui, &c.digest, view, out);
    }
    pairs_table_ui(ui, c, report, out);
}

/// The summary line: counts per status, one-side names, the largest
/// change, and the metadata.
fn summary_ui(ui: &mut egui::Ui, report: &DiffReport, digest: &ReportDigest) {
    let metadata_text = digest.metadata_text.as_str();
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
                safe_text(name, 80)
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
            .on_hover_text(metadata_text);
        }
        // Quantized weights meet their originals by their decoded values.
        if let (n, range) = digest.dequantized
            && n > 0
        {
            let snr = range.map_or_else(String::new, |(lo, hi)| {
                format!(", SNR {lo:.1} to {hi:.1} dB")
            });
            ui.label(format!(
                "· {n} quantized weights compared by their decoded values{snr}"
            ))
            .on_hover_text(
                "Each quantized weight (its packed parts) is decoded and compared under its logical name; rel L2 and SNR take A as the reference",
            );
        }
        if report.summary.same {
            ui.strong("· no differences");
        }
    });
}

/// The table of pairs and one-side names (virtualised).
fn pairs_table_ui(
    ui: &mut egui::Ui,
    c: &CompareState,
    report: &DiffReport,
    out: &mut Vec<Command>,
) {
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
                        ui.add(egui::Label::new(safe_text(name, 300)).truncate());
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
                        let status = ui.colored_label(colour, text);
                        if let Some((side, t)) = t.and_then(|t| Some((t.dequantized?, t))) {
                            status.on_hover_text(format!(
                                "compared by decoded values (dequantized: {side}){}",
                                t.snr_db
                                    .map_or_else(String::new, |d| format!("; SNR {d:.2} dB"))
                            ));
                        }
                    });
                    let opt = fmt_opt;
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
        out.push(Command::SortDiff(col));
    }
    if let Some(i) = clicked_row {
        out.push(Command::SelectPair(i));
    }
}

fn layer_chart_ui(
    ui: &mut egui::Ui,
    chart: &ReportDigest,
    view: &mut ViewState,
    out: &mut Vec<Command>,
) {
    super::layers::figure_choice_ui(
        ui,
        "diff_stat",
        &mut view.diff_stat,
        &DiffStat::ALL,
        DiffStat::label,
    );
    let at = DiffStat::ALL
        .iter()
        .position(|s| *s == view.diff_stat)
        .unwrap_or(0);
    let Some(lines) = chart.lines.get(at).filter(|l| !l.lines.is_empty()) else {
        ui.weak("No numbered layers (names with a numeric part such as layers.12) to chart.");
        return;
    };
    if let Some(pair) =
        super::layers::lines_ui(ui, "diff_layer_chart", lines, view.diff_stat.label())
    {
        out.push(Command::SelectPair(pair));
    }
}
