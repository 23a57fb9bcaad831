//! The Run view of a training run: a heat strip (rows: layers or tensors,
//! columns: steps, colour: the update ratio, the norm or the std, on a log
//! scale, with its legend), the events, and line charts of a chosen
//! tensor's figures against step. A click on a cell opens the visual diff
//! of that tensor (or, on a layer's row, of the checkpoints) between the
//! cell's step and the one before.

use eframe::egui;
use egui_plot::{Legend, Line, Plot, PlotPoints};

use super::job_row;
use crate::gui::command::{Command, JobId};
use crate::gui::state::{RunMeasure, RunRows, RunState, RunView, StripCache, Tab, ViewState};
use crate::gui::task::Failure;
use crate::series::{Event, EventKind, SeriesReport, layer_of};
use crate::stats::heatmap::colour_rgb;
use crate::text::{fmt_value, safe_text};

/// Width of the strip's row labels.
const LABEL_WIDTH: f32 = 300.0;
/// Height of a strip row.
const ROW_HEIGHT: f32 = 18.0;
/// Narrowest and widest step column (at 3 px, the 154 revisions of a
/// Pythia run fit beside the labels; more scroll sideways).
const CELL_WIDTH: (f32, f32) = (3.0, 48.0);
/// Tensors listed per event at most.
const SHOWN_PER_EVENT: usize = 6;
/// Events listed at most (the rest are counted).
const MAX_EVENTS: usize = 200;

/// One row of the strip: its label, its tensor (for a tensor row), and its
/// values per step.
struct Row<'a> {
    label: String,
    tensor: Option<usize>,
    values: &'a [Option<f64>],
    /// Steps at which the tensor holds NaN or Inf.
    nonfinite: Option<&'a [Option<u64>]>,
}

/// Row `k` (a layer or a tensor index into the report) as `rows` and
/// `measure` show it.
fn row(report: &SeriesReport, rows: RunRows, measure: RunMeasure, k: usize) -> Option<Row<'_>> {
    Some(match rows {
        RunRows::Layers => {
            let l = report.layers.get(k)?;
            Row {
                label: format!("layer {}", l.layer),
                tensor: None,
                values: match measure {
                    RunMeasure::UpdateRatio => &l.figures.update_ratio,
                    RunMeasure::L2Norm | RunMeasure::Std => &l.figures.l2_norm,
                },
                nonfinite: None,
            }
        }
        RunRows::Tensors => {
            let t = report.tensors.get(k)?;
            Row {
                label: safe_text(&t.name, 200),
                tensor: Some(k),
                values: match measure {
                    RunMeasure::UpdateRatio => &t.update_ratio,
                    RunMeasure::L2Norm => &t.l2_norm,
                    RunMeasure::Std => &t.std,
                },
                nonfinite: Some(&t.nonfinite),
            }
        }
    })
}

/// The rows the view's choices show and their colour range: kept in the
/// view until a choice or the report changes.
fn strip_cache(report: &SeriesReport, view: &mut RunView) {
    let key = (
        view.rows,
        view.measure,
        view.filter.clone(),
        report.tensors.len(),
        report.steps.len(),
    );
    if view.cache.as_ref().is_none_or(|c| c.key != key) {
        let rows: Vec<usize> = match view.rows {
            RunRows::Layers => (0..report.layers.len()).collect(),
            RunRows::Tensors => {
                let needle = view.filter.to_lowercase();
                report
                    .tensors
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| needle.is_empty() || t.name.to_lowercase().contains(&needle))
                    .map(|(i, _)| i)
                    .collect()
            }
        };
        let mut range: Option<(f64, f64)> = None;
        for &k in &rows {
            let Some(r) = row(report, view.rows, view.measure, k) else {
                continue;
            };
            for v in r.values.iter().flatten().filter(|v| **v > 0.0) {
                let l = v.log10();
                range = Some(range.map_or((l, l), |(a, b)| (a.min(l), b.max(l))));
            }
        }
        view.cache = Some(StripCache {
            key,
            rows,
            range,
            layer_nonfinite: layer_nonfinite(report),
        });
    }
}

/// Each layer's NaN and Inf count per step: the sum over its tensors
/// (`None` where none of them is at that step).
fn layer_nonfinite(report: &SeriesReport) -> Vec<Vec<Option<u64>>> {
    let at: std::collections::HashMap<u64, usize> = report
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| (l.layer, i))
        .collect();
    let mut out = vec![vec![None; report.steps.len()]; report.layers.len()];
    for t in &report.tensors {
        let Some(row) = layer_of(&t.name)
            .and_then(|l| at.get(&l))
            .and_then(|&i| out.get_mut(i))
        else {
            continue;
        };
        for (sum, n) in row.iter_mut().zip(&t.nonfinite) {
            if let Some(n) = n {
                *sum = Some(sum.unwrap_or(0) + n);
            }
        }
    }
    out
}

/// The colour of a value on the strip's scale: grey for 0, none for a
/// missing figure.
fn cell_colour(value: Option<f64>, range: Option<(f64, f64)>) -> Option<egui::Color32> {
    let value = value?;
    let (lo, hi) = range?;
    if value <= 0.0 {
        return Some(egui::Color32::from_gray(110));
    }
    let at = if hi > lo {
        (value.log10() - lo) / (hi - lo)
    } else {
        0.5
    };
    let [red, green, blue] = colour_rgb(at, 0.0, 1.0);
    Some(egui::Color32::from_rgb(red, green, blue))
}

/// Draws a run's tab.
pub fn run_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    index: usize,
    out: &mut Vec<Command>,
) {
    let Some(run) = &tab.run else {
        return;
    };
    let report = run.report();
    if let Some(report) = report {
        egui::Panel::right("run_side_panel")
            .resizable(true)
            .default_size(ui.available_width() * 0.36)
            .size_range(280.0..=f32::INFINITY)
            .show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| {
                    events_ui(ui, report, &mut view.run);
                    ui.separator();
                    charts_ui(ui, report, &view.run);
                });
            });
    }
    egui::CentralPanel::default().show(ui, |ui| {
        header_ui(ui, run, index, out);
        if let Some(report) = report {
            controls_ui(ui, &mut view.run);
            strip_ui(ui, report, &mut view.run, index, out);
        }
    });
}

/// "1 event", "3 events".
fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn header_ui(ui: &mut egui::Ui, run: &RunState, index: usize, out: &mut Vec<Command>) {
    if let Some(r) = run.report() {
        ui.heading(format!("Training run: {}", r.span()));
        for note in &r.notes {
            ui.colored_label(ui.visuals().warn_fg_color, note);
        }
        ui.label(format!(
            "{}, {}, {}",
            counted(r.tensors.len(), "tensor"),
            counted(r.layers.len(), "layer"),
            counted(r.events.len(), "event")
        ));
    } else {
        ui.heading("Training run");
        for p in &run.paths {
            ui.label(safe_text(&p.display().to_string(), 300));
        }
    }
    job_row(
        ui,
        &run.task,
        JobId::Series(index),
        "Measuring the series…",
        240.0,
        out,
    );
    match run.task.latest() {
        Some(Err(Failure::Cancelled)) => {
            ui.label("The series was cancelled.");
        }
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().error_fg_color, safe_text(&e.to_string(), 500));
        }
        _ => {}
    }
}

fn controls_ui(ui: &mut egui::Ui, view: &mut RunView) {
    ui.horizontal(|ui| {
        ui.label("Rows:");
        ui.selectable_value(&mut view.rows, RunRows::Layers, "Layers");
        ui.selectable_value(&mut view.rows, RunRows::Tensors, "Tensors");
        ui.separator();
        ui.label("Colour:");
        egui::ComboBox::from_id_salt("run_measure")
            .selected_text(view.measure.label())
            .show_ui(ui, |ui| {
                for m in RunMeasure::ALL {
                    ui.selectable_value(&mut view.measure, m, m.label());
                }
            });
        if view.rows == RunRows::Tensors {
            ui.separator();
            ui.label("Filter:");
            ui.add(egui::TextEdit::singleline(&mut view.filter).desired_width(160.0));
        }
    });
}

/// The heat strip, its step axis and its legend.
fn strip_ui(
    ui: &mut egui::Ui,
    report: &SeriesReport,
    view: &mut RunView,
    index: usize,
    out: &mut Vec<Command>,
) {
    let (kind, measure) = (view.rows, view.measure);
    strip_cache(report, view);
    // Out of the view while the rows are drawn (they choose into it).
    let Some(cache) = view.cache.take() else {
        return;
    };
    let range = cache.range;
    legend_ui(ui, measure, range);
    if cache.rows.is_empty() {
        ui.label(match kind {
            RunRows::Layers => {
                "No layer numbers in the names (.layers.N., .h.N., .blocks.N.): show tensors."
            }
            RunRows::Tensors => "No tensor matches the filter.",
        });
        view.cache = Some(cache);
        return;
    }
    let steps = report.steps.len();
    let cell = ((ui.available_width() - LABEL_WIDTH - 16.0) / steps.max(1) as f32)
        .clamp(CELL_WIDTH.0, CELL_WIDTH.1);
    ui.horizontal(|ui| {
        ui.add_space(LABEL_WIDTH);
        ui.label(if steps == 1 {
            format!("step {}", report.steps[0].step)
        } else {
            format!(
                "steps {} … {} (a column each)",
                report.steps[0].step,
                report.steps[steps - 1].step
            )
        });
    });
    egui::ScrollArea::both()
        .auto_shrink([false, false])
        .show_rows(ui, ROW_HEIGHT, cache.rows.len(), |ui, shown| {
            for &k in &cache.rows[shown] {
                let Some(mut row) = row(report, kind, measure, k) else {
                    continue;
                };
                if kind == RunRows::Layers {
                    row.nonfinite = cache.layer_nonfinite.get(k).map(Vec::as_slice);
                }
                ui.horizontal(|ui| {
                    let chosen = row.tensor.is_some() && row.tensor == view.chosen;
                    let label = egui::Button::selectable(chosen, row.label.as_str())
                        .truncate()
                        .min_size(egui::vec2(LABEL_WIDTH, ROW_HEIGHT));
                    let clicked = ui
                        .allocate_ui_with_layout(
                            egui::vec2(LABEL_WIDTH, ROW_HEIGHT),
                            egui::Layout::left_to_right(egui::Align::Center),
                            |ui| ui.add(label).clicked(),
                        )
                        .inner;
                    if clicked {
                        view.chosen = row.tensor;
                    }
                    cells_ui(ui, report, &row, range, cell, index, out);
                });
            }
        });
    view.cache = Some(cache);
}

/// One row's cells: hover says the step and value; a click compares.
fn cells_ui(
    ui: &mut egui::Ui,
    report: &SeriesReport,
    row: &Row<'_>,
    range: Option<(f64, f64)>,
    cell: f32,
    index: usize,
    out: &mut Vec<Command>,
) {
    let width = cell * row.values.len() as f32;
    let (rect, response) =
        ui.allocate_exact_size(egui::vec2(width, ROW_HEIGHT - 2.0), egui::Sense::click());
    response.widget_info(|| {
        egui::WidgetInfo::labeled(egui::Role::Image, true, format!("steps of {}", row.label))
    });
    let painter = ui.painter_at(rect);
    for (i, v) in row.values.iter().enumerate() {
        let r = egui::Rect::from_min_size(
            egui::pos2(rect.left() + cell * i as f32, rect.top()),
            // A gap between columns while they are wide enough to spare it.
            egui::vec2(if cell >= 6.0 { cell - 1.0 } else { cell }, rect.height()),
        );
        if let Some(c) = cell_colour(*v, range) {
            painter.rect_filled(r, 0.0, c);
        }
        if row
            .nonfinite
            .and_then(|n| n.get(i).copied().flatten())
            .is_some_and(|n| n > 0)
        {
            painter.rect_stroke(
                r.shrink(1.0),
                0.0,
                egui::Stroke::new(2.0, egui::Color32::RED),
                egui::StrokeKind::Inside,
            );
        }
    }
    let Some(pos) = response.hover_pos() else {
        return;
    };
    let i =
        (((pos.x - rect.left()) / cell).max(0.0) as usize).min(row.values.len().saturating_sub(1));
    let step = report.steps.get(i).map_or(0, |s| s.step);
    let value = row.values.get(i).copied().flatten();
    let bad = row
        .nonfinite
        .and_then(|n| n.get(i).copied().flatten())
        .filter(|n| *n > 0)
        .map_or_else(String::new, |n| format!(" ({n} NaN/Inf)"));
    let text = format!(
        "{} at step {step}: {}{bad}{}",
        row.label,
        value.map_or_else(|| "—".to_owned(), fmt_value),
        if i > 0 {
            "\nclick: compare with the step before"
        } else {
            ""
        }
    );
    response.clone().on_hover_text(text);
    if response.clicked() && i > 0 {
        out.push(Command::CompareSteps {
            tab: index,
            from: i - 1,
            to: i,
            tensor: row
                .tensor
                .and_then(|t| report.tensors.get(t))
                .map(|t| t.name.clone()),
        });
    }
}

/// The colour bar of the strip's scale.
fn legend_ui(ui: &mut egui::Ui, measure: RunMeasure, range: Option<(f64, f64)>) {
    ui.horizontal(|ui| {
        ui.label(format!("{} (log scale):", measure.label()));
        let Some((lo, hi)) = range else {
            ui.label("no positive value");
            return;
        };
        ui.monospace(fmt_value(10f64.powf(lo)));
        let (rect, _) = ui.allocate_exact_size(egui::vec2(200.0, 14.0), egui::Sense::hover());
        let steps = 50;
        for s in 0..steps {
            let t = f64::from(s) / f64::from(steps - 1);
            let [r, g, b] = colour_rgb(t, 0.0, 1.0);
            let x0 = rect.left() + rect.width() * s as f32 / steps as f32;
            let x1 = rect.left() + rect.width() * (s + 1) as f32 / steps as f32;
            ui.painter().rect_filled(
                egui::Rect::from_min_max(
                    egui::pos2(x0, rect.top()),
                    egui::pos2(x1 + 0.5, rect.bottom()),
                ),
                0.0,
                egui::Color32::from_rgb(r, g, b),
            );
        }
        ui.monospace(fmt_value(10f64.powf(hi)));
        ui.label("· grey: 0 · red frame: NaN/Inf");
    });
}

/// The events, newest kinds of trouble first as the report lists them.
fn events_ui(ui: &mut egui::Ui, report: &SeriesReport, view: &mut RunView) {
    ui.heading("Events");
    if report.events.is_empty() {
        ui.label(
            "None: no NaN or Inf, no frozen tensor, no spike, no tensor appeared or vanished.",
        );
        return;
    }
    for e in report.events.iter().take(MAX_EVENTS) {
        event_ui(ui, report, e, view);
    }
    if report.events.len() > MAX_EVENTS {
        ui.label(format!(
            "and {} more events",
            report.events.len() - MAX_EVENTS
        ));
    }
}

/// One event: its step, kind and count, then its tensors as links that
/// choose the tensor for the charts.
fn event_ui(ui: &mut egui::Ui, report: &SeriesReport, e: &Event, view: &mut RunView) {
    let n = e.tensors.len();
    let colour = match e.kind {
        EventKind::Nonfinite | EventKind::Spike => ui.visuals().error_fg_color,
        _ => ui.visuals().text_color(),
    };
    ui.colored_label(
        colour,
        format!(
            "step {}: {} ({n} tensor{})",
            e.step,
            e.kind.name(),
            if n == 1 { "" } else { "s" }
        ),
    );
    ui.indent(("run_event", e.step, e.kind.name()), |ui| {
        for name in e.tensors.iter().take(SHOWN_PER_EVENT) {
            if ui.link(safe_text(name, 120)).clicked() {
                view.chosen = report.tensors.iter().position(|t| &t.name == name);
                view.rows = RunRows::Tensors;
            }
        }
        if n > SHOWN_PER_EVENT {
            ui.label(format!("and {} more", n - SHOWN_PER_EVENT));
        }
    });
}

/// Line charts of the chosen tensor's figures against step.
fn charts_ui(ui: &mut egui::Ui, report: &SeriesReport, view: &RunView) {
    let Some(t) = view.chosen.and_then(|i| report.tensors.get(i)) else {
        ui.label("Click a tensor's name for its figures against step.");
        return;
    };
    ui.heading(safe_text(&t.name, 200));
    let steps: Vec<f64> = report.steps.iter().map(|s| s.step as f64).collect();
    let points = |vals: &[Option<f64>], f: fn(f64) -> f64| -> PlotPoints<'static> {
        steps
            .iter()
            .zip(vals)
            .filter_map(|(&s, v)| Some([s, f((*v)?)]))
            .filter(|p| p[1].is_finite())
            .collect::<Vec<_>>()
            .into()
    };
    let id = |x: f64| x;
    ui.label("Norm, std and max |x|");
    Plot::new("run_figures")
        .height(180.0)
        .legend(Legend::default())
        .x_axis_label("step")
        .show(ui, |p| {
            p.line(Line::new("L2 norm", points(&t.l2_norm, id)));
            p.line(Line::new("std", points(&t.std, id)));
            p.line(Line::new("max |x|", points(&t.max_abs, id)));
        });
    ui.label("Update ratio |ΔW| / |W| (log10) and cosine");
    Plot::new("run_updates")
        .height(180.0)
        .legend(Legend::default())
        .x_axis_label("step")
        .show(ui, |p| {
            p.line(Line::new(
                "log10 update ratio",
                points(&t.update_ratio, f64::log10),
            ));
            p.line(Line::new("cosine", points(&t.cosine, id)));
        });
    let nonfinite: Vec<String> = report
        .steps
        .iter()
        .zip(&t.nonfinite)
        .filter_map(|(s, n)| {
            n.filter(|&n| n > 0)
                .map(|n| format!("{n} at step {}", s.step))
        })
        .collect();
    if !nonfinite.is_empty() {
        ui.colored_label(
            ui.visuals().error_fg_color,
            format!("NaN/Inf: {}", nonfinite.join(", ")),
        );
    }
}
