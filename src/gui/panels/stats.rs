//! Statistics in the tensor view (computed per tensor in the background,
//! kept by tensor), the histograms (egui_plot), and the bar of the
//! whole-file scan that adds min, max, std and NaN/Inf columns to the table.

use eframe::egui;
use egui_plot::{Bar, BarChart, Plot};

use super::{bar_width, bins, failure_text, job_row};
use crate::dtype::Dtype;
use crate::format::Checkpoint;
use crate::gui::command::{Command, JobId};
use crate::gui::safe_text;
use crate::gui::state::{HistKind, ScanState, StatsKey, TensorState, ViewState};
use crate::gui::task::Failure;
use crate::stats::{self, Scalar, ValueStats};
use crate::text::{fmt_opt, fmt_value};

/// The scan bar above the tensor view: start, progress, cancel, summary.
pub fn scan_bar_ui(
    ui: &mut egui::Ui,
    ck: &Checkpoint,
    quant: Option<&crate::gui::model::QuantRows>,
    scan: Option<&ScanState>,
    out: &mut Vec<Command>,
) {
    ui.horizontal_wrapped(|ui| {
        if let Some(s) = scan.filter(|s| s.task.is_running()) {
            ui.spinner();
            if let Some(f) = s.task.progress().and_then(crate::jobs::Progress::fraction) {
                ui.add(
                    egui::ProgressBar::new(f)
                        .desired_width(160.0)
                        .show_percentage(),
                );
            }
            super::fetched_label(ui, s.task.progress());
            if ui.button("Cancel scan").clicked() {
                out.push(Command::Cancel(JobId::Scan));
            }
            return;
        }
        // A remote file's scan downloads what the cache lacks: asked first.
        let asking = egui::Id::unique("scan_download_asked");
        if let Some(missing) = ui.data(|d| d.get_temp::<u64>(asking)) {
            let total = ck.data_bytes();
            ui.label(format!(
                "Scanning downloads {} from the server ({} of the tensors' {} is cached).",
                crate::text::human_bytes(missing),
                crate::text::human_bytes(total.saturating_sub(missing)),
                crate::text::human_bytes(total)
            ));
            if ui.button("Download and scan").clicked() {
                ui.data_mut(|d| d.remove::<u64>(asking));
                out.push(Command::StartScan);
            }
            if ui.button("Cancel").clicked() {
                ui.data_mut(|d| d.remove::<u64>(asking));
            }
            return;
        }
        if ui
            .button(if scan.is_some() {
                "Scan again"
            } else {
                "Scan whole file"
            })
            .on_hover_text(
                "Statistics of every tensor: adds Min, Max, Std and NaN/Inf columns to the table",
            )
            .clicked()
        {
            let missing = ck.missing_bytes(ck.tensors());
            if missing > 0 {
                ui.data_mut(|d| d.insert_temp(asking, missing));
            } else {
                out.push(Command::StartScan);
            }
            return;
        }
        let Some(scan) = scan else {
            return;
        };
        match scan.task.latest() {
            Some(Err(Failure::Cancelled)) => {
                ui.weak("Scan cancelled; the columns show what was done.");
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, failure_text(e, 300));
            }
            _ => {
                let summary = &scan.summary;
                let warn = ui.visuals().warn_fg_color;
                if summary.non_finite_tensors > 0 {
                    ui.colored_label(
                        warn,
                        format!("{} tensors with NaN/Inf", summary.non_finite_tensors),
                    );
                } else {
                    ui.label("no NaN/Inf");
                }
                ui.label(format!("· {} all-zero", summary.all_zero_tensors));
                if let Some((i, m)) = summary.largest {
                    // A quantized weight's row is named by its logical name.
                    let name = ck
                        .entry(i)
                        .map_or("", |(_, x)| quant.map_or(x.name(), |q| q.name(i, x.name())));
                    ui.label(format!(
                        "· largest |x| {} in {}",
                        fmt_value(m),
                        safe_text(name, 60)
                    ));
                }
            }
        }
    });
}

/// The statistics section for tensor `index`: asks for them when none are
/// kept, shows the job while it runs, then the figures and histograms.
pub fn stats_ui(
    ui: &mut egui::Ui,
    tensor: &TensorState,
    view: &mut ViewState,
    index: usize,
    dtype: Dtype,
    dequant: bool,
    out: &mut Vec<Command>,
) {
    let key = StatsKey {
        index,
        order: view.f6_order,
        dequant,
    };
    let task = &tensor.stats;
    if task.wants(&key) {
        out.push(Command::StartStats(key));
    }
    if task.is_running_for(&key) {
        job_row(ui, task, JobId::Stats, "Computing statistics", 180.0, out);
    }
    let Some(result) = task.outcome(&key) else {
        return;
    };
    match result {
        Err(Failure::Cancelled) => {
            ui.horizontal(|ui| {
                ui.weak("Statistics cancelled.");
                if ui.button("Compute").clicked() {
                    out.push(Command::StartStats(key));
                }
            });
        }
        Err(e) => {
            ui.colored_label(ui.visuals().error_fg_color, failure_text(e, 500));
        }
        Ok(t) => {
            let small_float = dtype.is_small_float();
            egui::ScrollArea::vertical()
                .auto_shrink(false)
                .show(ui, |ui| {
                    if let (Some(re), Some(im)) = (&t.real, &t.imag) {
                        ui.label("Figures of the magnitude |z|; the parts are below.");
                        figures_ui(ui, "stats_abs", &t.values);
                        histogram_ui(ui, view, &t.values, small_float, "hist_abs");
                        ui.checkbox(&mut view.show_parts, "Show the real and imaginary parts");
                        if view.show_parts {
                            ui.strong("Real part");
                            figures_ui(ui, "stats_re", re);
                            ui.strong("Imaginary part");
                            figures_ui(ui, "stats_im", im);
                        }
                    } else {
                        figures_ui(ui, "stats_values", &t.values);
                        histogram_ui(ui, view, &t.values, small_float, "hist_values");
                    }
                });
        }
    }
}

/// A minimum, maximum or quantile: integers exact, floats by [`fmt_value`].
pub fn scalar(v: Option<Scalar>) -> String {
    match v {
        None => "—".into(),
        Some(Scalar::Int(i)) => i.to_string(),
        Some(Scalar::UInt(u)) => u.to_string(),
        Some(Scalar::Float(x)) => fmt_value(x),
    }
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
            pair(ui, "mean", fmt_opt(v.mean), false);
            pair(ui, "std", fmt_opt(v.std), false);
            ui.end_row();
            pair(ui, "mean |x|", fmt_opt(v.abs_mean), false);
            pair(ui, "L2 norm", fmt_opt(v.l2_norm), false);
            ui.end_row();
            pair(
                ui,
                "beyond 6σ",
                v.outliers_6sigma
                    .map_or_else(|| "—".to_owned(), |n| n.to_string()),
                false,
            );
            pair(ui, "max|x| / σ", fmt_opt(v.max_abs_over_std), false);
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
fn histogram_ui(ui: &mut egui::Ui, s: &mut ViewState, v: &ValueStats, small_float: bool, id: &str) {
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
                bins(&h.edges, &h.counts)
                    .map(|(lo, hi, c)| {
                        Bar::new(f64::midpoint(lo, hi), y(c))
                            .width(bar_width(lo, hi))
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
