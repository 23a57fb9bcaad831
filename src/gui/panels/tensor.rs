//! The tensor view: facts about the selected tensor, its statistics and
//! histograms (computed by a job, cached per tensor), a paged value grid
//! with raw codes (`values.rs`), and a heatmap of two chosen axes.

use eframe::egui;

use super::values::{fetch_page_ui, page_bytes, page_of, prepare_ui, values_ui};
use super::{heatmap, stats};
use crate::dtype::Dtype;
use crate::dtype::decode::BitOrder;
use crate::format::{Checkpoint, TensorInfo};
use crate::gui::command::Command;
use crate::gui::safe_text;
use crate::gui::state::{Section, Tab, ViewState};
use crate::text::{fmt_shape, human_bytes};

/// Draws the tensor view for the tab's cursor tensor.
pub fn tensor_view_ui(ui: &mut egui::Ui, tab: &Tab, view: &mut ViewState, out: &mut Vec<Command>) {
    let Some(loaded) = tab.load.value() else {
        return;
    };
    let ck = &loaded.ck;
    stats::scan_bar_ui(
        ui,
        ck,
        loaded.quant.as_deref(),
        tab.tensor.scan.as_ref(),
        out,
    );
    ui.separator();
    let Some(index) = tab.table.cursor else {
        ui.weak("Select a tensor in the table to see its values and statistics.");
        super::overview::overview_ui(ui, tab, view, out);
        return;
    };
    let Some((tref, info)) = ck.entry(index) else {
        return;
    };
    if view.values_tensor != Some(index) {
        view.values_tensor = Some(index);
        view.value_start = 0;
        view.jump_text.clear();
        view.raw_part = None;
    }
    let lead = loaded.quant.as_ref().and_then(|q| q.logical_at(index));
    if let (Some(lt), None) = (lead, view.raw_part) {
        super::quant::logical_view_ui(ui, tab, view, index, ck, lt, out);
        return;
    }
    // A part of a quantized weight, opened from its parts list.
    let (index, tref, info) = match view.raw_part.and_then(|p| ck.entry(p).map(|e| (p, e))) {
        Some((p, (t, i))) => {
            if ui
                .button("⏴ Back to the quantized weight")
                .on_hover_text(safe_text(lead.map_or("", |l| l.name()), 500))
                .clicked()
            {
                view.raw_part = None;
            }
            ui.weak(
                "A stored part of a quantized weight: its packed codes, not the weight's values.",
            );
            (p, t, i)
        }
        None => (index, tref, info),
    };
    facts_ui(ui, ck, index, info);
    ui.separator();
    section_row_ui(ui, view, info.dtype());
    ui.add_space(4.0);
    match view.section {
        Section::Stats | Section::Quant => {
            stats::stats_ui(ui, &tab.tensor, view, index, info.dtype(), false, out);
        }
        Section::Values => {
            // The grid reads the map as it draws: a file cut short reads as
            // zeros there, which must not pass for its values.
            if ck
                .shards()
                .get(tref.shard())
                .is_some_and(|s| s.file().changed_while_read())
            {
                ui.colored_label(
                    ui.visuals().error_fg_color,
                    "The file changed while being read: these values are not its values. Reopen it with File > Reload.",
                );
            } else if !ck.is_prepared(tref) {
                prepare_ui(ui, &tab.tensor, tref, out);
            } else {
                let page = page_of(view, info.numel());
                let range = page_bytes(ck, tref, info, page.clone());
                let here = range.as_ref().is_none_or(|(s, r)| {
                    ck.shards()
                        .get(*s)
                        .is_some_and(|sh| sh.file().source().is_present(r.clone()))
                });
                let bytes = if here { Some(ck.bytes(tref)) } else { None };
                values_ui(ui, view, info, bytes, |ui| {
                    if let Some((shard, r)) = range {
                        fetch_page_ui(ui, &tab.tensor, shard, r, out);
                    }
                });
            }
        }
        Section::Heatmap => heatmap::heatmap_ui(ui, &tab.tensor, view, index, info, false, out),
    }
}

/// The section switch, and the F6 bit order for F6 tensors.
fn section_row_ui(ui: &mut egui::Ui, view: &mut ViewState, dtype: Dtype) {
    ui.horizontal(|ui| {
        ui.selectable_value(&mut view.section, Section::Stats, "Statistics");
        ui.selectable_value(&mut view.section, Section::Values, "Values");
        ui.selectable_value(&mut view.section, Section::Heatmap, "Heatmap");
        if matches!(dtype, Dtype::F6E2M3 | Dtype::F6E3M2) {
            ui.separator();
            egui::ComboBox::from_id_salt("f6_order")
                .selected_text(match view.f6_order {
                    BitOrder::LsbFirst => "F6 bits: LSB-first",
                    BitOrder::MsbFirst => "F6 bits: MSB-first",
                })
                .show_ui(ui, |ui| {
                    ui.selectable_value(
                        &mut view.f6_order,
                        BitOrder::LsbFirst,
                        "LSB-first (little-endian bit stream, default)",
                    );
                    ui.selectable_value(
                        &mut view.f6_order,
                        BitOrder::MsbFirst,
                        "MSB-first (big-endian bit stream)",
                    );
                })
                .response
                .on_hover_text(
                    "The format fixes no bit order for F6; Tensorscope reads the little-endian bit stream by default.",
                );
        }
    });
}

/// How a tensor of a container other than safetensors lies in its file:
/// where, in which order and byte order, and what the container says.
fn stored_facts_ui(ui: &mut egui::Ui, facts: &crate::format::StoredFacts) {
    ui.weak("stored");
    match &facts.data_range {
        Some(r) => ui.monospace(format!("bytes {}..{}", r.start, r.end)),
        None if facts.compressed => ui.label("deflated"),
        None => ui.label("decoded by its container"),
    };
    ui.weak("order");
    let endian = match facts.byte_order {
        crate::format::stored::ByteOrder::Little => "little-endian",
        crate::format::stored::ByteOrder::Big => "big-endian",
    };
    match &facts.strides {
        Some(s) => ui.label(format!("strides {}, {endian}", fmt_shape(s))),
        None => ui.label(format!("C order, {endian}")),
    }
    .on_hover_text("Every view and verb reads it in C order, little-endian.");
    ui.end_row();
    let (chunks, others): (Vec<_>, Vec<_>) = facts
        .container
        .iter()
        .partition(|(key, _)| *key == "chunks");
    for pair in others.chunks(2) {
        for (key, value) in pair {
            ui.weak(*key);
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            ui.monospace(safe_text(&text, 200));
        }
        ui.end_row();
    }
    if let Some((_, serde_json::Value::Array(list))) = chunks.first() {
        chunks_ui(ui, list);
    }
}

/// Chunks shown at most, of a tensor of a distributed checkpoint.
const CHUNKS_SHOWN: usize = 64;

/// A distributed checkpoint's tensor: each chunk's place in the global
/// tensor and the file (the rank) that holds it.
fn chunks_ui(ui: &mut egui::Ui, list: &[serde_json::Value]) {
    let dims = |v: &serde_json::Value| -> String {
        let parts: Vec<String> = v
            .as_array()
            .map(|a| a.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        format!("[{}]", parts.join(", "))
    };
    for (i, c) in list.iter().take(CHUNKS_SHOWN).enumerate() {
        ui.weak(if i == 0 {
            format!("chunks ({})", list.len())
        } else {
            String::new()
        });
        ui.monospace(format!(
            "at {} size {}",
            dims(&c["offsets"]),
            dims(&c["sizes"])
        ));
        ui.weak("in");
        ui.monospace(safe_text(c["file"].as_str().unwrap_or("?"), 120));
        ui.end_row();
    }
    if list.len() > CHUNKS_SHOWN {
        ui.weak("");
        ui.label(format!("… and {} more chunks", list.len() - CHUNKS_SHOWN));
        ui.end_row();
    }
}

fn facts_ui(ui: &mut egui::Ui, ck: &Checkpoint, index: usize, info: &TensorInfo) {
    ui.add(
        egui::Label::new(
            egui::RichText::new(safe_text(info.name(), 500))
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
            ui.monospace(info.dtype().name());
            ui.weak("shape");
            ui.monospace(fmt_shape(info.shape()));
            ui.end_row();
            ui.weak("elements");
            ui.label(info.numel().to_string());
            ui.weak("bytes");
            ui.label(format!(
                "{} ({})",
                info.nbytes(),
                human_bytes(info.nbytes())
            ));
            ui.end_row();
            if ck.container().has_data_section() {
                ui.weak("data_offsets");
                ui.monospace(format!(
                    "[{}, {}]",
                    info.data_offsets()[0],
                    info.data_offsets()[1]
                ));
                if let Some(shard) = ck
                    .tensors()
                    .get(index)
                    .and_then(|t| ck.shards().get(t.shard()))
                {
                    let start = shard.file().header().data_start();
                    ui.weak("file offset");
                    ui.monospace(format!("{}", start.saturating_add(info.data_offsets()[0])));
                }
                ui.end_row();
            } else if let Some(&t) = ck.tensors().get(index) {
                stored_facts_ui(ui, &ck.stored_facts(t));
            }
        });
    if ck.is_sharded()
        && let Some(shard) = ck
            .tensors()
            .get(index)
            .and_then(|t| ck.shards().get(t.shard()))
    {
        ui.weak(format!("in shard {}", safe_text(shard.name(), 200)));
    }
}
