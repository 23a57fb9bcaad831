//! The tensor view of a quantized weight: its scheme and parts, the
//! statistics and histograms of its true (dequantized) values, and a value
//! grid with each element's code beside its value. A weight that is
//! recognized but not decoded, or inconsistent, says so with the evidence
//! and shows no values: its parts hold packed codes.

use eframe::egui;

use super::stats;
use super::values::{fetch_page_ui, unravel};
use crate::format::Checkpoint;
use crate::gui::command::Command;
use crate::gui::safe_text;
use crate::gui::state::{Section, StatsKey, Tab, ViewState};
use crate::quant::{Dequantizer, LogicalTensor, Status};
use crate::stats::QuantStats;
use crate::text::{fmt_shape, fmt_value, human_bytes};
use egui_plot::{Bar, BarChart, Plot};

/// Values per page of the grid.
const PAGE: u64 = super::values::PAGE_SIZE;

/// Draws the view of logical tensor `lt`, whose row is `index`.
pub fn logical_view_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    index: usize,
    ck: &Checkpoint,
    lt: &LogicalTensor,
    out: &mut Vec<Command>,
) {
    facts_ui(ui, ck, lt, view);
    ui.separator();
    if lt.status() != Status::Decoded {
        ui.colored_label(
            ui.visuals().warn_fg_color,
            format!("{}: {}", lt.status(), safe_text(lt.message(), 2000)),
        );
        ui.weak("Its parts hold packed codes, which are not its values: none are shown.");
        return;
    }
    ui.horizontal(|ui| {
        ui.selectable_value(&mut view.section, Section::Stats, "Statistics");
        ui.selectable_value(&mut view.section, Section::Values, "Values");
        ui.selectable_value(&mut view.section, Section::Heatmap, "Heatmap");
        ui.selectable_value(&mut view.section, Section::Quant, "Codes & scales");
    });
    ui.add_space(4.0);
    match view.section {
        Section::Stats => {
            ui.weak("Statistics of the dequantized values, as the writing library computes them.");
            stats::stats_ui(ui, &tab.tensor, view, index, lt.value_dtype(), true, out);
        }
        Section::Quant => {
            let key = StatsKey {
                index,
                order: view.f6_order,
                dequant: true,
            };
            if tab.tensor.stats.wants(&key) {
                out.push(Command::StartStats(key));
            }
            match tab.tensor.stats.outcome(&key) {
                Some(Ok(t)) => {
                    if let Some(q) = &t.quant {
                        egui::ScrollArea::vertical()
                            .id_salt("quant_scroll")
                            .show(ui, |ui| quant_stats_ui(ui, q));
                    }
                }
                Some(Err(e)) => {
                    ui.colored_label(ui.visuals().error_fg_color, super::failure_text(e, 500));
                }
                None => {
                    ui.weak("Counting codes and scales…");
                }
            }
        }
        Section::Values => values_ui(ui, tab, view, ck, lt, out),
        Section::Heatmap => {
            // The map of the decoded values, over the logical shape.
            if let Some(info) = crate::format::TensorInfo::new(
                lt.name().to_owned(),
                lt.value_dtype(),
                lt.shape().to_vec(),
                0,
            ) {
                super::heatmap::heatmap_ui(ui, &tab.tensor, view, index, &info, true, out);
            }
        }
    }
}

fn facts_ui(ui: &mut egui::Ui, ck: &Checkpoint, lt: &LogicalTensor, view: &mut ViewState) {
    ui.add(
        egui::Label::new(
            egui::RichText::new(safe_text(lt.name(), 500))
                .strong()
                .size(15.0),
        )
        .wrap(),
    );
    egui::Grid::new("quant_facts")
        .num_columns(4)
        .spacing([10.0, 2.0])
        .show(ui, |ui| {
            ui.weak("scheme");
            ui.monospace(safe_text(lt.label(), 100));
            ui.weak("status");
            ui.label(lt.status().id());
            ui.end_row();
            ui.weak("shape");
            ui.monospace(fmt_shape(lt.shape()));
            ui.weak("elements");
            ui.label(lt.numel().to_string());
            ui.end_row();
            ui.weak("bits");
            ui.label(lt.bits().to_string());
            ui.weak("group");
            ui.label(
                lt.group_size()
                    .map_or("per channel / tensor".into(), |g| g.to_string()),
            );
            ui.end_row();
            ui.weak("zero point");
            ui.label(lt.zero_point().id());
            ui.weak("values in");
            ui.monospace(lt.value_dtype().name());
            ui.end_row();
            let bytes = lt.stored_bytes(ck);
            ui.weak("stored");
            ui.label(format!("{bytes} bytes ({})", human_bytes(bytes)));
            ui.weak("bits/value");
            ui.label(if lt.numel() > 0 {
                format!("{:.2}", bytes as f64 * 8.0 / lt.numel() as f64)
            } else {
                "—".into()
            });
            ui.end_row();
        });
    if lt.status() == Status::Decoded && !lt.message().is_empty() {
        ui.colored_label(ui.visuals().warn_fg_color, safe_text(lt.message(), 2000));
    }
    egui::CollapsingHeader::new(format!("Quantization: {} parts", lt.parts().len()))
        .id_salt("quant_parts")
        .show(ui, |ui| {
            // Wrapping rows, so long names never widen the side panel.
            for (role, t) in lt.parts() {
                if let Some(info) = ck.info(*t) {
                    ui.horizontal_wrapped(|ui| {
                        if ui
                            .small_button(format!("Open {}", safe_text(role, 100)))
                            .on_hover_text("This stored part as stored: packed codes, not values")
                            .clicked()
                        {
                            view.raw_part = ck.position(info.name());
                        }
                        ui.add(
                            egui::Label::new(
                                egui::RichText::new(format!(
                                    "{}  {} {}",
                                    safe_text(info.name(), 300),
                                    info.dtype().name(),
                                    fmt_shape(info.shape())
                                ))
                                .monospace(),
                            )
                            .wrap(),
                        );
                    });
                }
            }
        });
}

/// A page of values with their codes, decoded as drawn (one page is a few
/// hundred elements).
fn values_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    ck: &Checkpoint,
    lt: &LogicalTensor,
    out: &mut Vec<Command>,
) {
    let Some(dq) = Dequantizer::new(ck, lt) else {
        return;
    };
    // A remote weight's parts come into the cache first, one by one.
    let missing = dq.parts().into_iter().find_map(|t| {
        let shard = ck.shards().get(t.shard())?;
        let range = shard.file().tensor_range(ck.info(t)?);
        (!shard.file().source().is_present(range.clone())).then_some((t.shard(), range))
    });
    if let Some((shard, range)) = missing {
        fetch_page_ui(ui, &tab.tensor, shard, range, out);
        return;
    }
    // The grid reads the map as it draws (no I/O on this thread: the flag
    // the SIGBUS guard sets says whether a file was cut short).
    let changed = dq.parts().iter().any(|t| {
        ck.shards()
            .get(t.shard())
            .is_some_and(|s| s.file().changed_while_read())
    });
    if changed {
        ui.colored_label(
            ui.visuals().error_fg_color,
            "The file changed while being read: these values are not its values. Reopen it with File > Reload.",
        );
        return;
    }
    let n = dq.len();
    if n == 0 {
        ui.weak("This tensor has no elements.");
        return;
    }
    ui.horizontal(|ui| {
        let pages = n.div_ceil(PAGE);
        let page = view.value_start / PAGE;
        if ui.add_enabled(page > 0, egui::Button::new("⏴")).clicked() {
            view.value_start = view.value_start.saturating_sub(PAGE);
        }
        ui.label(format!("page {} of {pages}", page + 1));
        if ui
            .add_enabled(page + 1 < pages, egui::Button::new("⏵"))
            .clicked()
        {
            view.value_start = view.value_start.saturating_add(PAGE);
        }
    });
    let start = view.value_start.min(n.saturating_sub(1));
    let len = usize::try_from(PAGE.min(n - start)).unwrap_or(0);
    let mut vals = vec![0f32; len];
    let mut codes = vec![0i32; len];
    let got = dq.values_and_codes(start, &mut vals, &mut codes);
    let shape = lt.shape();
    let row_h = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    egui_extras::TableBuilder::new(ui)
        .id_salt("quant_value_grid")
        .striped(true)
        .column(egui_extras::Column::initial(150.0).at_least(60.0))
        .column(egui_extras::Column::initial(60.0).at_least(40.0))
        .column(egui_extras::Column::initial(110.0).at_least(60.0))
        .column(egui_extras::Column::remainder().at_least(80.0))
        .header(row_h, |mut h| {
            h.col(|ui| {
                ui.strong("index");
            });
            h.col(|ui| {
                ui.strong("code");
            });
            h.col(|ui| {
                ui.strong("scale");
            });
            h.col(|ui| {
                ui.strong("value");
            });
        })
        .body(|body| {
            body.rows(row_h, got, |mut row| {
                let k = row.index();
                let i = start + k as u64;
                row.col(|ui| {
                    ui.monospace(fmt_shape(&unravel(i, shape)));
                });
                row.col(|ui| {
                    ui.monospace(codes.get(k).map_or(String::new(), ToString::to_string));
                });
                row.col(|ui| {
                    ui.monospace(dq.scale_at(i).map_or(String::new(), fmt_value));
                });
                row.col(|ui| {
                    ui.monospace(
                        vals.get(k)
                            .map_or(String::new(), |v| fmt_value(f64::from(*v))),
                    );
                });
            });
        });
}

/// The quantization's own figures: the histogram of codes (clipping shows
/// at the ends, unused codes as gaps), the share at the extreme codes, and
/// the scales' range and histogram.
fn quant_stats_ui(ui: &mut egui::Ui, q: &QuantStats) {
    ui.strong("Quantization");
    let used = q.codes.counts.iter().filter(|c| **c > 0).count();
    ui.label(format!(
        "{used} of {} codes used; {:.3}% of the elements at the extreme codes",
        q.codes.counts.len(),
        q.at_extremes * 100.0
    ));
    let bars: Vec<Bar> = q
        .codes
        .values
        .iter()
        .zip(&q.codes.counts)
        .enumerate()
        .map(|(i, (code, &count))| {
            let meaning = q
                .codes
                .code_values
                .as_ref()
                .and_then(|v| v.get(i))
                .map(|v| format!(" (= {})", fmt_value(*v)))
                .unwrap_or_default();
            Bar::new(*code as f64, count as f64)
                .width(0.8)
                .name(format!("code {code}{meaning}: {count}"))
        })
        .collect();
    let colour = ui.visuals().selection.bg_fill;
    Plot::new("quant_codes")
        .height(160.0)
        .allow_scroll(false)
        .x_axis_label("code")
        .y_axis_label("count")
        .show(ui, |plot| {
            plot.bar_chart(BarChart::new("codes", bars).color(colour));
        });
    if let Some(z) = &q.zeros {
        let most = z
            .values
            .iter()
            .zip(&z.counts)
            .max_by_key(|(_, c)| **c)
            .map_or_else(String::new, |(v, c)| format!("; most common {v} ({c})"));
        ui.label(format!(
            "Zero points: {} values from {} to {}{most}",
            z.values.len(),
            z.values.first().copied().unwrap_or(0),
            z.values.last().copied().unwrap_or(0)
        ));
    }
    if let Some(sc) = &q.scales {
        ui.label(format!(
            "{} scales in {} (as stored): {} .. {}",
            sc.count,
            safe_text(&sc.tensor, 200),
            sc.min.map_or("—".into(), fmt_value),
            sc.max.map_or("—".into(), fmt_value)
        ));
        if let Some(h) = sc.histogram.as_ref().filter(|h| !h.counts.is_empty()) {
            let bars: Vec<Bar> = super::bins(&h.edges, &h.counts)
                .map(|(lo, hi, c)| {
                    Bar::new(f64::midpoint(lo, hi), c as f64)
                        .width(super::bar_width(lo, hi))
                        .name(format!("[{}, {}): {c}", fmt_value(lo), fmt_value(hi)))
                })
                .collect();
            Plot::new("quant_scales")
                .height(140.0)
                .allow_scroll(false)
                .x_axis_label("scale")
                .y_axis_label("count")
                .show(ui, |plot| {
                    plot.bar_chart(BarChart::new("scales", bars).color(colour));
                });
        }
    }
}
