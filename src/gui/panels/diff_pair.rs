//! The side panel of a comparison: the selected pair's statistics side by
//! side, both histograms overlaid, the histogram of Δ and a map of |Δ|,
//! computed in the background when the pair is selected.

use eframe::egui;
use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};

use super::diff_table::status_colour;
use super::stats::scalar;
use super::{bar_width, bins, failure_text, job_row};
use crate::gui::command::{Command, JobId};
use crate::gui::safe_text;
use crate::gui::state::{Tab, ViewState};
use crate::text::{fmt_opt, fmt_shape, fmt_value};

/// The side panel of a comparison: the selected pair.
#[allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of the comparison"
)]
pub fn pair_ui(ui: &mut egui::Ui, tab: &Tab, view: &mut ViewState, out: &mut Vec<Command>) {
    let Some(c) = &tab.compare else {
        return;
    };
    let Some(i) = c.selected else {
        ui.add_space(20.0);
        ui.vertical_centered(|ui| ui.weak("Select a pair in the table to compare its values."));
        return;
    };
    let Some(report) = c.report() else { return };
    let Some(t) = report.tensors.get(i) else {
        return;
    };
    ui.add(
        egui::Label::new(
            egui::RichText::new(safe_text(&t.name, 400))
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
    if c.detail.is_running_for(&i) {
        job_row(ui, &c.detail, JobId::PairDetail, "", 160.0, out);
    }
    let detail = match c.detail.outcome(&i) {
        None => return,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().warn_fg_color, failure_text(e, 300));
            return;
        }
    };
    let delta_texture = &mut view.delta_texture;
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            {
                let (a, b) = (&detail.a, &detail.b);
                stats_grid_ui(ui, a, b);
                ui.add_space(6.0);
                ui.strong("Histograms of A and B");
                let line = |h: &Option<crate::stats::Histogram>| -> Vec<[f64; 2]> {
                    h.as_ref()
                        .map(|h| {
                            bins(&h.edges, &h.counts)
                                .map(|(lo, hi, c)| [f64::midpoint(lo, hi), c as f64])
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
                    let bars: Vec<Bar> = bins(edges, counts)
                        .map(|(lo, hi, n)| {
                            Bar::new(f64::midpoint(lo, hi), n as f64)
                                .width(bar_width(lo, hi))
                                .name(format!("Δ in [{}, {}): {n}", fmt_value(lo), fmt_value(hi)))
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
                let tex = match delta_texture {
                    Some((k, t)) if *k == i => t.clone(),
                    _ => {
                        let img =
                            egui::ColorImage::from_rgb([map.width, map.height], &map.to_rgb());
                        let t =
                            ui.ctx()
                                .load_texture("delta_map", img, egui::TextureOptions::NEAREST);
                        *delta_texture = Some((i, t.clone()));
                        t
                    }
                };
                let w = ui.available_width().min(420.0);
                let h = (w * map.height as f32 / map.width.max(1) as f32).clamp(8.0, 420.0);
                let r = ui.add(
                    egui::Image::new((tex.id(), egui::vec2(w, h))).sense(egui::Sense::hover()),
                );
                // The block under the cursor and its largest |Δ|.
                if let Some(pos) = r.hover_pos() {
                    let (cy, cx) = super::heatmap::cell_under(map, r.rect, pos);
                    if let Some(&v) = map.cells.get(cy * map.width + cx) {
                        r.on_hover_text(format!(
                            "{}: max |Δ| {}",
                            super::heatmap::place_text(map, cy, cx),
                            fmt_value(v)
                        ));
                    }
                }
                ui.weak(format!(
                    "|Δ| from {} (dark) to {} (bright)",
                    fmt_opt(map.min),
                    fmt_opt(map.max)
                ));
            }
        });
}

/// The two sides' figures, one row per statistic.
#[allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of the comparison"
)]
fn stats_grid_ui(ui: &mut egui::Ui, a: &crate::stats::TensorStats, b: &crate::stats::TensorStats) {
    egui::Grid::new("pair_stats")
        .num_columns(3)
        .striped(true)
        .spacing([14.0, 3.0])
        .show(ui, |ui| {
            ui.weak("");
            ui.strong("A");
            ui.strong("B");
            ui.end_row();
            let f = fmt_opt;
            let s = scalar;
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
}
