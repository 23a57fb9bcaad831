//! The heatmap section of the tensor view: two chosen axes of the tensor,
//! pooled into at most 512 × 512 cells in the background, with the value
//! under the cursor and a colour bar.

use eframe::egui;

use super::{failure_text, job_row};
use crate::format::TensorInfo;
use crate::gui::command::{Command, JobId};
use crate::gui::state::{HeatKey, TensorState, ViewState};
use crate::stats::heatmap::{self, Heatmap, HeatmapRequest, Pooling};
use crate::text::fmt_value;

/// The heatmap section for tensor `index`: axis and pooling choices, and
/// the picture once computed.
pub fn heatmap_ui(
    ui: &mut egui::Ui,
    tensor: &TensorState,
    view: &mut ViewState,
    index: usize,
    info: &TensorInfo,
    dequant: bool,
    out: &mut Vec<Command>,
) {
    if info.numel() == 0 {
        ui.weak("This tensor has no elements.");
        return;
    }
    let ndim = info.shape().len();
    if view.heat_tensor != Some(index) {
        view.heat_tensor = Some(index);
        view.heat_window = None;
        view.heat_rows = ndim.saturating_sub(2);
        view.heat_cols = ndim.saturating_sub(1);
        view.heat_fixed = vec![0; ndim];
    }
    if ndim > 2 {
        ui.horizontal(|ui| {
            ui.label("rows: axis");
            egui::ComboBox::from_id_salt("heat_rows")
                .selected_text(view.heat_rows.to_string())
                .show_ui(ui, |ui| {
                    for a in 0..ndim {
                        ui.selectable_value(
                            &mut view.heat_rows,
                            a,
                            format!("{a} (size {})", info.shape()[a]),
                        );
                    }
                });
            ui.label("columns: axis");
            egui::ComboBox::from_id_salt("heat_cols")
                .selected_text(view.heat_cols.to_string())
                .show_ui(ui, |ui| {
                    for a in 0..ndim {
                        ui.selectable_value(
                            &mut view.heat_cols,
                            a,
                            format!("{a} (size {})", info.shape()[a]),
                        );
                    }
                });
        });
        for a in 0..ndim {
            if a == view.heat_rows || a == view.heat_cols {
                continue;
            }
            let max = info.shape()[a].saturating_sub(1);
            ui.add(
                egui::Slider::new(&mut view.heat_fixed[a], 0..=max)
                    .text(format!("index on axis {a}")),
            );
        }
    }
    ui.horizontal(|ui| {
        ui.label("pooling:");
        ui.selectable_value(&mut view.heat_pooling, Pooling::MaxAbs, "max |x|");
        ui.selectable_value(&mut view.heat_pooling, Pooling::Mean, "mean");
    });
    if ndim > 2 && view.heat_rows == view.heat_cols {
        ui.colored_label(ui.visuals().warn_fg_color, "Choose two different axes.");
        return;
    }
    // A zoom holds for the axes and slice it was drawn on.
    if view.heat_window.as_ref().is_some_and(|(_, r, c, f)| {
        (*r, *c, f) != (view.heat_rows, view.heat_cols, &view.heat_fixed)
    }) {
        view.heat_window = None;
    }
    let window = view.heat_window.as_ref().map(|(w, _, _, _)| *w);
    let req = HeatmapRequest {
        row_axis: view.heat_rows,
        col_axis: view.heat_cols,
        fixed: view.heat_fixed.clone(),
        pooling: view.heat_pooling,
        max_side: 512,
        order: view.f6_order,
        window,
    };
    let key: HeatKey = (index, req, dequant);
    let task = &tensor.heatmap;
    let kept = task.outcome(&key);
    if task.wants(&key) {
        out.push(Command::StartHeatmap(key.clone()));
    } else if kept.is_some() && task.is_running() && !task.is_stopping() {
        // Back to a picture that is kept: the one being computed for the
        // other settings is not wanted any more.
        out.push(Command::Cancel(JobId::Heatmap));
    }
    job_row(ui, task, JobId::Heatmap, "", 200.0, out);
    // The picture of these settings, else the newest one (on show while
    // these are computed).
    let (shown, outcome) = match kept {
        Some(o) => (Some(&key), Some(o)),
        None => (task.latest_key(), task.latest()),
    };
    match outcome {
        None => {}
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().warn_fg_color, failure_text(e, 500));
        }
        Some(Ok(map)) => {
            let texture = match &view.heat_texture {
                Some((k, t)) if Some(k) == shown => t.clone(),
                _ => {
                    let t = ui.ctx().load_texture(
                        "heatmap",
                        heatmap_image(map),
                        egui::TextureOptions::NEAREST,
                    );
                    if let Some(k) = shown {
                        view.heat_texture = Some((k.clone(), t.clone()));
                    }
                    t
                }
            };
            ui.horizontal(|ui| {
                ui.weak(format!(
                    "{} × {} elements shown as {} × {} cells",
                    map.rows, map.cols, map.height, map.width
                ));
                if view.heat_window.is_some() {
                    ui.weak(format!("from row {}, column {}", map.row0, map.col0));
                    if ui.button("Whole tensor").clicked() {
                        view.heat_window = None;
                    }
                } else {
                    ui.weak("(drag over it to zoom)");
                }
            });
            let avail = ui.available_size() - egui::vec2(70.0, 40.0);
            let aspect = map.width as f32 / map.height.max(1) as f32;
            let mut size = egui::vec2(avail.x.max(50.0), avail.x.max(50.0) / aspect);
            if size.y > avail.y.max(50.0) {
                size = egui::vec2(avail.y.max(50.0) * aspect, avail.y.max(50.0));
            }
            ui.horizontal_top(|ui| {
                picture_ui(ui, view, map, &texture, size);
                colour_bar_ui(ui, map, size.y);
            });
        }
    }
}

/// The picture: the element and value under the cursor, and a dragged
/// rectangle that becomes the zoom.
fn picture_ui(
    ui: &mut egui::Ui,
    view: &mut ViewState,
    map: &Heatmap,
    texture: &egui::TextureHandle,
    size: egui::Vec2,
) {
    let r = ui.add(egui::Image::new((texture.id(), size)).sense(egui::Sense::click_and_drag()));
    r.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, "heatmap image"));
    let cell_at = |pos: egui::Pos2| cell_under(map, r.rect, pos);
    // Drag a rectangle: the heatmap of that region, pooled
    // again at its own scale (a job, as the first one).
    if r.dragged()
        && let (Some(from), Some(to)) = (
            ui.input(|i| i.pointer.press_origin()),
            r.interact_pointer_pos(),
        )
    {
        view.heat_drag = Some((from, to));
    }
    if let Some((from, to)) = view.heat_drag {
        let band = egui::Rect::from_two_pos(from, to).intersect(r.rect);
        ui.painter().rect_stroke(
            band,
            0.0,
            egui::Stroke::new(1.5, ui.visuals().strong_text_color()),
            egui::StrokeKind::Inside,
        );
        if r.drag_stopped() || !r.dragged() {
            view.heat_drag = None;
            let (a, b) = (cell_at(band.min), cell_at(band.max));
            let (r0, _) = map.cell_rows(a.0);
            let (_, r1) = map.cell_rows(b.0);
            let (c0, _) = map.cell_cols(a.1);
            let (_, c1) = map.cell_cols(b.1);
            view.heat_window = Some((
                heatmap::HeatWindow {
                    row0: r0,
                    row1: r1,
                    col0: c0,
                    col1: c1,
                },
                view.heat_rows,
                view.heat_cols,
                view.heat_fixed.clone(),
            ));
        }
    } else if let Some(pos) = r.hover_pos() {
        let (cy, cx) = cell_at(pos);
        if let Some(&v) = map.cells.get(cy * map.width + cx) {
            r.on_hover_text(format!("{}: {}", place_text(map, cy, cx), fmt_value(v)));
        }
    }
}

/// What cell `(cy, cx)` covers: `element [r, c]`, or its rows and columns.
pub(super) fn place_text(map: &Heatmap, cy: usize, cx: usize) -> String {
    let ((r0, r1), (c0, c1)) = (map.cell_rows(cy), map.cell_cols(cx));
    if r1 - r0 == 1 && c1 - c0 == 1 {
        format!("element [{r0}, {c0}]")
    } else {
        format!("rows {r0}–{}, columns {c0}–{}", r1 - 1, c1 - 1)
    }
}

/// The cell `(row, column)` of `map` under `pos`, drawn in `rect`.
pub(super) fn cell_under(map: &Heatmap, rect: egui::Rect, pos: egui::Pos2) -> (usize, usize) {
    let rel = (pos - rect.min) / rect.size();
    let cx = ((rel.x.max(0.0) * map.width as f32) as usize).min(map.width.saturating_sub(1));
    let cy = ((rel.y.max(0.0) * map.height as f32) as usize).min(map.height.saturating_sub(1));
    (cy, cx)
}

/// The colour of a cell (the library's colour map, as an egui colour).
fn colour(v: f64, lo: f64, hi: f64) -> egui::Color32 {
    let [r, g, b] = heatmap::colour_rgb(v, lo, hi);
    egui::Color32::from_rgb(r, g, b)
}

fn heatmap_image(map: &Heatmap) -> egui::ColorImage {
    let (lo, hi) = (map.min.unwrap_or(0.0), map.max.unwrap_or(0.0));
    let pixels: Vec<egui::Color32> = map.cells.iter().map(|&v| colour(v, lo, hi)).collect();
    egui::ColorImage::new([map.width, map.height], pixels)
}

fn colour_bar_ui(ui: &mut egui::Ui, map: &Heatmap, height: f32) {
    let (lo, hi) = (map.min.unwrap_or(0.0), map.max.unwrap_or(0.0));
    let (top, bottom) = if lo < 0.0 && hi > 0.0 {
        let m = lo.abs().max(hi.abs());
        (m, -m)
    } else {
        (hi, lo)
    };
    ui.vertical(|ui| {
        ui.monospace(fmt_value(top));
        let (rect, _) = ui.allocate_exact_size(
            egui::vec2(18.0, (height - 40.0).max(20.0)),
            egui::Sense::hover(),
        );
        let steps = 64;
        for s in 0..steps {
            let t0 = s as f32 / steps as f32;
            let v = top + (bottom - top) * f64::from(t0);
            let y0 = rect.top() + rect.height() * t0;
            let y1 = rect.top() + rect.height() * (s + 1) as f32 / steps as f32;
            ui.painter().rect_filled(
                egui::Rect::from_min_max(
                    egui::pos2(rect.left(), y0),
                    egui::pos2(rect.right(), y1 + 0.5),
                ),
                0.0,
                colour(v, lo, hi),
            );
        }
        ui.monospace(fmt_value(bottom));
    });
}
