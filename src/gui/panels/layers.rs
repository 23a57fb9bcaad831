//! The per-layer chart of a scan: a statistic of every tensor against its
//! layer number, one line per role (`self_attn.q_proj.weight`, …,
//! `input_layernorm.weight`), the value under the cursor, a click selecting
//! the tensor of the nearest point. An exploding or a dead layer shows at
//! a glance. Its lines are built once per scan generation and statistic
//! (kept in the tab's view state), never per frame.

use eframe::egui;
use egui_plot::{Line, Plot, PlotPoints, Points};

use crate::gui::command::Command;
use crate::gui::state::{LayerLines, LayerStat, SelectMode, Tab, ViewState};

/// How close (in points) a click must land to a point to select it.
const PICK_RADIUS: f32 = 12.0;

/// The legend's names: a role's last part without `.weight`
/// (`self_attn.q_proj.weight` → `q_proj`), the whole role where two would
/// share a name.
fn legend_names(lines: &LayerLines) -> Vec<String> {
    let short: Vec<&str> = lines
        .lines
        .iter()
        .map(|(role, _, _)| {
            let r = role.strip_suffix(".weight").unwrap_or(role);
            r.rsplit('.').next().unwrap_or(r)
        })
        .collect();
    short
        .iter()
        .zip(&lines.lines)
        .map(|(s, (role, _, _))| {
            if short.iter().filter(|t| *t == s).count() > 1 {
                role.clone()
            } else {
                (*s).to_owned()
            }
        })
        .collect()
}

/// One colour per role, for its line, its points and its legend entry
/// (spread round the hue circle).
fn role_colour(k: usize) -> egui::Color32 {
    let hue = (k as f32 * 0.618_034).fract();
    egui::epaint::Hsva::new(hue, 0.75, 0.85, 1.0).into()
}

/// "Per layer:" and a menu of the figures a chart can plot.
pub fn figure_choice_ui<T: Copy + PartialEq>(
    ui: &mut egui::Ui,
    id: &str,
    current: &mut T,
    all: &[T],
    label: fn(T) -> &'static str,
) {
    ui.horizontal(|ui| {
        ui.label("Per layer:");
        egui::ComboBox::from_id_salt(id)
            .selected_text(label(*current))
            .show_ui(ui, |ui| {
                for &s in all {
                    ui.selectable_value(current, s, label(s));
                }
            });
    });
}

/// Draws the chart, once a scan has figures.
pub fn layer_chart_ui(ui: &mut egui::Ui, tab: &Tab, view: &mut ViewState, out: &mut Vec<Command>) {
    let (Some(loaded), Some(scan)) = (tab.loaded(), tab.tensor.scan.as_ref()) else {
        return;
    };
    figure_choice_ui(
        ui,
        "layer_stat",
        &mut view.layer_stat,
        &LayerStat::ALL,
        LayerStat::label,
    );
    let stat = view.layer_stat;
    // While the scan runs its figures change batch by batch: the lines
    // follow at most a few times a second (each build is O(tensors)).
    let fresh = match &view.layer_lines {
        Some((g, s, _, at)) if *s == stat => {
            *g == scan.generation
                || (scan.task.is_running() && at.elapsed() < std::time::Duration::from_millis(400))
        }
        _ => false,
    };
    if scan.task.is_running() {
        ui.ctx()
            .request_repaint_after(std::time::Duration::from_millis(400));
    }
    if !fresh {
        let (ck, quant) = (&loaded.ck, loaded.quant.as_deref());
        let name = |i: usize| crate::gui::model::row_name(ck, quant, i);
        let figures = &scan.figures;
        let value = |i: usize| figures.get(i).copied().flatten().and_then(|f| stat.of(&f));
        let lines = LayerLines::build(figures.len(), name, value);
        view.layer_lines = Some((scan.generation, stat, lines, std::time::Instant::now()));
    }
    let Some((_, _, lines, _)) = &view.layer_lines else {
        return;
    };
    if lines.lines.is_empty() {
        ui.weak("No numbered layers (names such as layers.12) with this figure yet.");
        return;
    }
    if let Some(index) = lines_ui(ui, "overview_layer_chart", lines, stat.label()) {
        out.push(Command::Select {
            index,
            mode: SelectMode::Replace,
        });
    }
}

/// Draws `lines` against the layer number with `y_label`, the legend
/// below; returns the item (tensor or pair index) of the point a click
/// landed on.
pub fn lines_ui(ui: &mut egui::Ui, id: &str, lines: &LayerLines, y_label: &str) -> Option<usize> {
    let names = legend_names(lines);
    let response = Plot::new(id)
        .height(260.0)
        .allow_scroll(false)
        .x_axis_label("layer")
        .y_axis_label(y_label)
        .show(ui, |p| {
            for (k, ((_, points, _), name)) in lines.lines.iter().zip(&names).enumerate() {
                let color = role_colour(k);
                p.line(Line::new(name.clone(), PlotPoints::Borrowed(points)).color(color));
                p.points(
                    Points::new(name.clone(), PlotPoints::Borrowed(points))
                        .color(color)
                        .radius(2.5),
                );
            }
        });
    response
        .response
        .widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, "per-layer chart"));
    // The legend below the chart, where it hides no point however many
    // roles there are (the chart names the line under the cursor too).
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 10.0;
        for (k, name) in names.iter().enumerate() {
            ui.label(
                egui::RichText::new(format!("— {name}"))
                    .color(role_colour(k))
                    .small(),
            );
        }
    });
    if lines.dropped > 0 {
        ui.weak(format!(
            "{} more roles not drawn (the {} with most layers are)",
            lines.dropped,
            crate::gui::state::MAX_LAYER_LINES
        ));
    }
    if response.response.clicked()
        && let Some(pos) = response.response.interact_pointer_pos()
    {
        let transform = response.transform;
        return lines.nearest([pos.x, pos.y], PICK_RADIUS, |p| {
            let s = transform.position_from_point(p);
            [s.x, s.y]
        });
    }
    None
}
