//! The tensor view: facts about the selected tensor, its statistics and
//! histograms (computed by a job, cached per tensor), a paged value grid
//! with raw codes, and a heatmap of two chosen axes.

use std::collections::HashMap;
use std::sync::Arc;

use eframe::egui;

use super::app::{Command, Tab};
use super::model::{ScanFigures, fmt_shape, fmt_value, human_bytes};
use super::stats_view::{self, StatsState};
use crate::dtype::decode::{BitOrder, code_at, decode_c64, decode_one_f64, format_code_hex};
use crate::dtype::{Dtype, DtypeKind};
use crate::format::{Checkpoint, TensorInfo};
use crate::jobs::{Job, JobState};
use crate::stats::heatmap::{self, Heatmap, HeatmapError, HeatmapRequest, Pooling};

/// Which page the side panel shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SidePage {
    /// The selected tensor.
    #[default]
    Tensor,
    /// File facts and warnings.
    File,
    /// `__metadata__`.
    Metadata,
}

/// Which part of the tensor view is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Section {
    /// Statistics and histograms.
    #[default]
    Stats,
    /// The paged value grid.
    Values,
    /// The heatmap.
    Heatmap,
}

/// Values per page of the value grid.
pub const PAGE_SIZE: u64 = 256;

struct HeatmapState {
    key: (usize, HeatmapRequest),
    job: Option<Job<Result<Heatmap, HeatmapError>>>,
    result: Option<Result<Heatmap, HeatmapError>>,
    texture: Option<egui::TextureHandle>,
}

/// The tensor view's state and caches for one tab.
#[derive(Default)]
pub struct ViewState {
    /// The side panel's page.
    pub page: SidePage,
    /// The metadata search text.
    pub meta_filter: String,
    /// The open section.
    pub section: Section,
    /// First element shown in the value grid.
    pub value_start: u64,
    /// The "jump to index" box.
    pub jump_text: String,
    /// F6 bit order.
    pub f6_order: BitOrder,
    /// Heatmap axes and pooling.
    pub heat_rows: usize,
    /// Heatmap column axis.
    pub heat_cols: usize,
    /// Heatmap fixed indices of the other axes.
    pub heat_fixed: Vec<u64>,
    /// Heatmap pooling.
    pub heat_pooling: Pooling,
    /// The tensor the heatmap settings belong to.
    heat_tensor: Option<usize>,
    heat: Option<HeatmapState>,
    /// Statistics jobs, cache and whole-file scan.
    pub stats: StatsState,
    last_tensor: Option<usize>,
}

impl ViewState {
    /// True while a job of this view runs.
    pub fn is_busy(&self) -> bool {
        self.heat.as_ref().is_some_and(|h| h.job.is_some()) || self.stats.is_busy()
    }

    /// Scan figures per tensor, once a scan has started.
    pub fn scan_figures(&self) -> Option<&[Option<ScanFigures>]> {
        self.stats.scan_figures()
    }

    /// Collects finished jobs; true when scan figures changed.
    pub fn poll(&mut self, ck: &Arc<Checkpoint>) -> bool {
        if let Some(h) = &mut self.heat
            && let Some(job) = &mut h.job
        {
            match job.poll() {
                JobState::Running => {}
                JobState::Done(r) => {
                    h.result = Some(r);
                    h.job = None;
                    h.texture = None;
                }
                JobState::Panicked(m) => {
                    h.result = Some(Err(HeatmapError::Unreadable(format!(
                        "internal error: {m}"
                    ))));
                    h.job = None;
                }
            }
        }
        self.stats.poll(ck)
    }
}

/// Draws the tensor view for the tab's cursor tensor.
pub fn tensor_view_ui(ui: &mut egui::Ui, tab: &mut Tab, commands: &mut Vec<Command>) {
    let _ = commands;
    let Some(loaded) = tab.loaded() else {
        return;
    };
    let ck = Arc::clone(&loaded.ck);
    let repaint = {
        let ctx = ui.ctx().clone();
        move || ctx.request_repaint()
    };
    stats_view::scan_bar_ui(ui, &mut tab.view.stats, &ck, repaint.clone());
    ui.separator();
    let Some(index) = tab.table.cursor else {
        ui.add_space(20.0);
        ui.vertical_centered(|ui| {
            ui.weak("Select a tensor in the table to see its values and statistics.")
        });
        return;
    };
    let Some(tref) = ck.tensors.get(index).copied() else {
        return;
    };
    let Some(info) = ck.info(tref) else {
        return;
    };
    let view = &mut tab.view;
    if view.last_tensor != Some(index) {
        view.last_tensor = Some(index);
        view.value_start = 0;
        view.jump_text.clear();
    }
    facts_ui(ui, &ck, index, info);
    ui.separator();
    ui.horizontal(|ui| {
        ui.selectable_value(&mut view.section, Section::Stats, "Statistics");
        ui.selectable_value(&mut view.section, Section::Values, "Values");
        ui.selectable_value(&mut view.section, Section::Heatmap, "Heatmap");
        if matches!(info.dtype, Dtype::F6E2M3 | Dtype::F6E3M2) {
            ui.separator();
            egui::ComboBox::from_id_salt("f6_order")
                .selected_text(match view.f6_order {
                    BitOrder::LsbFirst => "F6 bits: LSB-first",
                    BitOrder::MsbFirst => "F6 bits: MSB-first",
                })
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut view.f6_order, BitOrder::LsbFirst, "LSB-first (little-endian bit stream, default)");
                    ui.selectable_value(&mut view.f6_order, BitOrder::MsbFirst, "MSB-first (big-endian bit stream)");
                })
                .response
                .on_hover_text("The format fixes no bit order for F6; Tensorscope reads the little-endian bit stream by default.");
        }
    });
    ui.add_space(4.0);
    let bytes = ck.bytes(tref);
    match view.section {
        Section::Stats => {
            stats_view::stats_ui(ui, &mut view.stats, &ck, index, view.f6_order, repaint);
        }
        Section::Values => values_ui(ui, view, info, bytes),
        Section::Heatmap => heatmap_ui(ui, view, &ck, index, info, repaint),
    }
}

fn facts_ui(ui: &mut egui::Ui, ck: &Checkpoint, index: usize, info: &TensorInfo) {
    ui.add(
        egui::Label::new(
            egui::RichText::new(super::safe_text(&info.name, 500))
                .strong()
                .size(15.0),
        )
        .wrap(),
    );
    egui::Grid::new("tensor_facts")
        .num_columns(4)
        .spacing([10.0, 2.0])
        .show(ui, |ui| {
            ui.weak("dtype");
            ui.monospace(info.dtype.name());
            ui.weak("shape");
            ui.monospace(fmt_shape(&info.shape));
            ui.end_row();
            ui.weak("elements");
            ui.label(info.numel.to_string());
            ui.weak("bytes");
            ui.label(format!("{} ({})", info.nbytes, human_bytes(info.nbytes)));
            ui.end_row();
            ui.weak("data_offsets");
            ui.monospace(format!(
                "[{}, {}]",
                info.data_offsets[0], info.data_offsets[1]
            ));
            if let Some(shard) = ck.tensors.get(index).and_then(|t| ck.shards.get(t.shard)) {
                let start = shard.file.header().data_start();
                ui.weak("file offset");
                ui.monospace(format!("{}", start.saturating_add(info.data_offsets[0])));
            }
            ui.end_row();
        });
    if ck.is_sharded()
        && let Some(shard) = ck.tensors.get(index).and_then(|t| ck.shards.get(t.shard))
    {
        ui.weak(format!("in shard {}", super::safe_text(&shard.name, 200)));
    }
}

/// Splits a flat index into a multi-index of `shape`.
fn unravel(mut flat: u64, shape: &[u64]) -> Vec<u64> {
    let mut out = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            out[i] = flat % d;
            flat /= d;
        }
    }
    out
}

/// Parses "123" (flat) or "3, 5" / "[3,5]" (multi-index) into a flat index.
fn parse_index(text: &str, shape: &[u64]) -> Option<u64> {
    let t = text.trim().trim_start_matches('[').trim_end_matches(']');
    let parts: Vec<&str> = t
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() == 1 {
        return parts[0].parse().ok();
    }
    if parts.len() != shape.len() {
        return None;
    }
    let mut flat = 0u64;
    for (p, &d) in parts.iter().zip(shape) {
        let i: u64 = p.parse().ok()?;
        if i >= d {
            return None;
        }
        flat = flat.checked_mul(d)?.checked_add(i)?;
    }
    Some(flat)
}

fn value_text(dtype: Dtype, bytes: &[u8], i: u64, order: BitOrder) -> String {
    match dtype.kind() {
        DtypeKind::Unsigned => {
            code_at(dtype, bytes, i, order).map_or_else(|| "—".into(), |c| c.to_string())
        }
        DtypeKind::Signed => code_at(dtype, bytes, i, order).map_or_else(
            || "—".into(),
            |c| {
                let bits = dtype.bits();
                let v = ((c << (64 - bits)) as i64) >> (64 - bits);
                v.to_string()
            },
        ),
        DtypeKind::Bool => code_at(dtype, bytes, i, order).map_or_else(
            || "—".into(),
            |c| {
                if c != 0 {
                    "true".into()
                } else {
                    "false".into()
                }
            },
        ),
        DtypeKind::Complex => {
            let (mut re, mut im) = ([0f64], [0f64]);
            if decode_c64(bytes, i, &mut re, &mut im) == 1 {
                let sign = if im[0].is_sign_negative() { "-" } else { "+" };
                format!("{} {sign} {}i", fmt_value(re[0]), fmt_value(im[0].abs()))
            } else {
                "—".into()
            }
        }
        DtypeKind::Float => {
            decode_one_f64(dtype, bytes, i, order).map_or_else(|| "—".into(), fmt_value)
        }
    }
}

fn values_ui(ui: &mut egui::Ui, view: &mut ViewState, info: &TensorInfo, bytes: &[u8]) {
    let n = info.numel;
    if n == 0 {
        ui.weak(format!(
            "This tensor has no elements (shape {}).",
            fmt_shape(&info.shape)
        ));
        return;
    }
    let show_code =
        info.dtype.bits() <= 16 && matches!(info.dtype.kind(), DtypeKind::Float | DtypeKind::Bool);
    ui.horizontal(|ui| {
        let pages = n.div_ceil(PAGE_SIZE);
        let page = view.value_start / PAGE_SIZE;
        if ui.add_enabled(page > 0, egui::Button::new("⏴")).clicked() {
            view.value_start = view.value_start.saturating_sub(PAGE_SIZE);
        }
        ui.label(format!("page {} of {pages}", page + 1));
        if ui
            .add_enabled(page + 1 < pages, egui::Button::new("⏵"))
            .clicked()
        {
            view.value_start = view.value_start.saturating_add(PAGE_SIZE);
        }
        ui.separator();
        let r = ui.add(
            egui::TextEdit::singleline(&mut view.jump_text)
                .hint_text("index or i, j, …")
                .desired_width(120.0),
        );
        let go = ui.button("Go").clicked()
            || (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
        if go {
            if let Some(i) = parse_index(&view.jump_text, &info.shape).filter(|&i| i < n) {
                view.value_start = i - i % PAGE_SIZE;
            } else {
                view.jump_text = format!("out of range (0..{n})");
            }
        }
    });
    let start = view.value_start.min(n.saturating_sub(1));
    let end = start.saturating_add(PAGE_SIZE).min(n);
    let row_h = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    let highlight = parse_index(&view.jump_text, &info.shape);
    egui_extras::TableBuilder::new(ui)
        .id_salt("value_grid")
        .striped(true)
        .column(egui_extras::Column::initial(150.0).at_least(60.0))
        .column(egui_extras::Column::initial(80.0).at_least(40.0))
        .column(egui_extras::Column::remainder().at_least(80.0))
        .header(row_h, |mut h| {
            h.col(|ui| {
                ui.strong("index");
            });
            h.col(|ui| {
                ui.strong(if show_code { "code" } else { "" });
            });
            h.col(|ui| {
                ui.strong("value");
            });
        })
        .body(|body| {
            body.rows(row_h, (end - start) as usize, |mut row| {
                let i = start + row.index() as u64;
                row.set_selected(highlight == Some(i));
                row.col(|ui| {
                    let idx = if info.shape.len() > 1 {
                        fmt_shape(&unravel(i, &info.shape))
                    } else {
                        i.to_string()
                    };
                    ui.monospace(idx);
                });
                row.col(|ui| {
                    if show_code && let Some(c) = code_at(info.dtype, bytes, i, view.f6_order) {
                        ui.monospace(format_code_hex(info.dtype, c));
                    }
                });
                row.col(|ui| {
                    ui.monospace(value_text(info.dtype, bytes, i, view.f6_order));
                });
            });
        });
}

fn heatmap_ui(
    ui: &mut egui::Ui,
    view: &mut ViewState,
    ck: &Arc<Checkpoint>,
    index: usize,
    info: &TensorInfo,
    repaint: impl Fn() + Send + Sync + 'static,
) {
    if info.numel == 0 {
        ui.weak("This tensor has no elements.");
        return;
    }
    let ndim = info.shape.len();
    if view.heat_tensor != Some(index) {
        view.heat_tensor = Some(index);
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
                            format!("{a} (size {})", info.shape[a]),
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
                            format!("{a} (size {})", info.shape[a]),
                        );
                    }
                });
        });
        for a in 0..ndim {
            if a == view.heat_rows || a == view.heat_cols {
                continue;
            }
            let max = info.shape[a].saturating_sub(1);
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
    let req = HeatmapRequest {
        row_axis: view.heat_rows,
        col_axis: view.heat_cols,
        fixed: view.heat_fixed.clone(),
        pooling: view.heat_pooling,
        max_side: 512,
        order: view.f6_order,
    };
    let key = (index, req.clone());
    if view.heat.as_ref().is_none_or(|h| h.key != key) {
        let ck2 = Arc::clone(ck);
        let (dtype, shape) = (info.dtype, info.shape.clone());
        let Some(tref) = ck.tensors.get(index).copied() else {
            return;
        };
        let job = Job::spawn("heatmap", repaint, move |cancel, progress| {
            if let Some(shard) = ck2.shards.get(tref.shard)
                && let Err(e) = shard.file.check_unchanged()
            {
                return Err(HeatmapError::Unreadable(e.message()));
            }
            heatmap::compute(dtype, &shape, ck2.bytes(tref), &req, cancel, progress)
        })
        .ok();
        // Keep the previous picture while the new one is computed.
        let (result, texture) = view
            .heat
            .take()
            .map_or((None, None), |h| (h.result, h.texture));
        view.heat = Some(HeatmapState {
            key,
            job,
            result,
            texture,
        });
    }
    let Some(h) = &mut view.heat else {
        return;
    };
    if let Some(job) = &h.job {
        super::job_row(ui, job, "", 200.0);
    }
    match &h.result {
        None => {}
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().warn_fg_color, e.to_string());
        }
        Some(Ok(map)) => {
            let texture = h.texture.get_or_insert_with(|| {
                ui.ctx()
                    .load_texture("heatmap", heatmap_image(map), egui::TextureOptions::NEAREST)
            });
            ui.weak(format!(
                "{} × {} elements shown as {} × {} cells",
                map.rows, map.cols, map.height, map.width
            ));
            let avail = ui.available_size() - egui::vec2(70.0, 40.0);
            let aspect = map.width as f32 / map.height.max(1) as f32;
            let mut size = egui::vec2(avail.x.max(50.0), avail.x.max(50.0) / aspect);
            if size.y > avail.y.max(50.0) {
                size = egui::vec2(avail.y.max(50.0) * aspect, avail.y.max(50.0));
            }
            ui.horizontal_top(|ui| {
                let r = ui.add(egui::Image::new((texture.id(), size)).sense(egui::Sense::hover()));
                if let Some(pos) = r.hover_pos() {
                    let rel = (pos - r.rect.min) / r.rect.size();
                    let cx = ((rel.x * map.width as f32) as usize).min(map.width - 1);
                    let cy = ((rel.y * map.height as f32) as usize).min(map.height - 1);
                    let v = map.cells[cy * map.width + cx];
                    let r0 = cy as u64 * map.rows / map.height as u64;
                    let c0 = cx as u64 * map.cols / map.width as u64;
                    r.on_hover_text(format!("rows {r0}…, cols {c0}…: {}", fmt_value(v)));
                }
                colour_bar_ui(ui, map, size.y);
            });
        }
    }
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

/// Cached statistics keyed by tensor index, shared with the stats view.
pub type StatsCache<T> = HashMap<usize, T>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices() {
        assert_eq!(unravel(7, &[2, 4]), [1, 3]);
        assert_eq!(parse_index("7", &[2, 4]), Some(7));
        assert_eq!(parse_index("[1, 3]", &[2, 4]), Some(7));
        assert_eq!(parse_index("1,4", &[2, 4]), None);
        assert_eq!(parse_index("x", &[2, 4]), None);
    }

    #[test]
    fn signed_values_are_exact() {
        let b = i64::MIN.to_le_bytes();
        assert_eq!(
            value_text(Dtype::I64, &b, 0, BitOrder::LsbFirst),
            i64::MIN.to_string()
        );
        let b = [0xFFu8];
        assert_eq!(value_text(Dtype::I8, &b, 0, BitOrder::LsbFirst), "-1");
        let b = u64::MAX.to_le_bytes();
        assert_eq!(
            value_text(Dtype::U64, &b, 0, BitOrder::LsbFirst),
            u64::MAX.to_string()
        );
    }
}
