//! The side panel: the selected tensor's view, the file's facts and
//! warnings, and the `__metadata__` pane.

use eframe::egui;

use super::tensor;
use crate::format::CheckpointKind;
use crate::gui::command::Command;
use crate::gui::safe_text;
use crate::gui::state::{SidePage, Tab, ViewState};
use crate::text::{human_bytes, human_count};

/// Draws the side panel for a ready tab.
pub fn side_panel_ui(ui: &mut egui::Ui, tab: &Tab, view: &mut ViewState, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        for (page, label) in [
            (SidePage::Overview, "Overview"),
            (SidePage::Tensor, "Tensor"),
            (SidePage::File, "File info"),
            (SidePage::Metadata, "Metadata"),
        ] {
            ui.selectable_value(&mut view.page, page, label);
        }
    });
    ui.separator();
    match view.page {
        SidePage::Tensor => tensor::tensor_view_ui(ui, tab, view, out),
        SidePage::Overview => super::overview::overview_ui(ui, tab, view, out),
        SidePage::File => file_ui(ui, tab),
        SidePage::Metadata => metadata_ui(ui, tab, view, out),
    }
}

fn file_ui(ui: &mut egui::Ui, tab: &Tab) {
    let Some(loaded) = tab.loaded() else {
        return;
    };
    let ck = &loaded.ck;
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            egui::Grid::new("file_facts")
                .num_columns(2)
                .spacing([12.0, 4.0])
                .show(ui, |ui| {
                    ui.weak("Path");
                    ui.add(
                        egui::Label::new(safe_text(&ck.path().display().to_string(), 1000)).wrap(),
                    );
                    ui.end_row();
                    ui.weak("Format");
                    ui.label(&loaded.overview.container);
                    ui.end_row();
                    ui.weak("Kind");
                    ui.label(match ck.kind() {
                        CheckpointKind::Single => "single file".to_owned(),
                        CheckpointKind::Folder
                            if ck.container() == crate::format::ContainerKind::GGUF =>
                        {
                            format!("a split model, {} parts", ck.shards().len())
                        }
                        CheckpointKind::Folder => {
                            format!("a folder of {} files", ck.shards().len())
                        }
                        CheckpointKind::Sharded { .. } => {
                            format!("sharded model, {} files", ck.shards().len())
                        }
                    });
                    ui.end_row();
                    let size: u64 = ck.shards().iter().map(|s| s.file().file_size()).sum();
                    ui.weak("Size on disk");
                    ui.label(format!("{} ({size} bytes)", human_bytes(size)));
                    ui.end_row();
                    let header: u64 = ck
                        .shards()
                        .iter()
                        .map(|s| s.file().header().header_size())
                        .sum();
                    ui.weak("Header");
                    ui.label(format!("{} ({header} bytes)", human_bytes(header)));
                    ui.end_row();
                    let (_, all) = &loaded.totals;
                    ui.weak("Tensors");
                    ui.label(all.tensors.to_string());
                    ui.end_row();
                    ui.weak("Parameters");
                    ui.label(format!(
                        "{} ({})",
                        human_count(all.parameters),
                        all.parameters
                    ));
                    ui.end_row();
                    if let CheckpointKind::Sharded { total_size, .. } = &ck.kind() {
                        ui.weak("Index total_size");
                        ui.label(total_size.map_or_else(|| "absent".into(), |t| t.to_string()));
                        ui.end_row();
                    }
                    if let Some(q) = loaded.quant.as_deref() {
                        quant_rows_ui(ui, &q.quant);
                    }
                });
            if let Some(q) = loaded.quant.as_deref() {
                for p in &q.quant.config().problems {
                    ui.colored_label(
                        ui.visuals().warn_fg_color,
                        format!(
                            "{}: {}",
                            safe_text(&p.path.display().to_string(), 300),
                            safe_text(&p.message, 500)
                        ),
                    );
                }
            }
            ui.add_space(8.0);
            ui.strong("By dtype");
            egui::Grid::new("dtype_breakdown")
                .striped(true)
                .num_columns(4)
                .show(ui, |ui| {
                    ui.weak("dtype");
                    ui.weak("tensors");
                    ui.weak("parameters");
                    ui.weak("bytes");
                    ui.end_row();
                    for (d, t) in &loaded.totals.0 {
                        ui.monospace(d.name());
                        ui.label(t.tensors.to_string());
                        ui.label(t.parameters.to_string());
                        ui.label(human_bytes(t.bytes));
                        ui.end_row();
                    }
                });
            if ck.is_sharded() {
                ui.add_space(8.0);
                ui.strong(if matches!(ck.kind(), CheckpointKind::Folder) {
                    "Files"
                } else {
                    "Shards"
                });
                for s in ck.shards() {
                    ui.label(format!(
                        "{}  ·  {} tensors  ·  {}",
                        safe_text(s.name(), 200),
                        s.file().header().tensors().len(),
                        human_bytes(s.file().file_size())
                    ));
                }
            }
            ui.add_space(8.0);
            if ck.warnings().is_empty() {
                ui.weak("No warnings: the file follows the format strictly.");
            } else {
                ui.strong(format!("Warnings ({})", ck.warnings().len()));
                for w in ck.warnings().iter().take(1000) {
                    ui.horizontal_wrapped(|ui| {
                        ui.colored_label(ui.visuals().warn_fg_color, w.kind);
                        ui.label(safe_text(&w.message, 500));
                    });
                }
            }
        });
}

fn metadata_ui(ui: &mut egui::Ui, tab: &Tab, view: &mut ViewState, out: &mut Vec<Command>) {
    let Some(loaded) = tab.load.value() else {
        return;
    };
    let entries = &loaded.metadata;
    ui.horizontal(|ui| {
        let label = ui.label("Search:");
        ui.add(
            egui::TextEdit::singleline(&mut view.meta_filter)
                .hint_text("keys and values")
                .desired_width(200.0),
        )
        .labelled_by(label.id);
        if ui.button("Copy all as JSON").clicked() {
            let obj: serde_json::Map<String, serde_json::Value> = entries
                .iter()
                .map(|e| (e.key.clone(), serde_json::Value::String(e.value.clone())))
                .collect();
            out.push(Command::CopyText(
                serde_json::to_string_pretty(&obj).unwrap_or_default(),
            ));
        }
    });
    if entries.is_empty() {
        ui.weak(if loaded.ck.is_sharded() {
            "The index has no metadata."
        } else {
            "This file has no __metadata__."
        });
        return;
    }
    let needle = view.meta_filter.to_lowercase();
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            for e in entries {
                if !needle.is_empty() && !e.search.contains(&needle) {
                    continue;
                }
                ui.horizontal(|ui| {
                    ui.strong(safe_text(&e.key, 200));
                    if ui
                        .small_button("copy")
                        .on_hover_text("Copy the value")
                        .clicked()
                    {
                        out.push(Command::CopyText(e.value.clone()));
                    }
                });
                if let Some(a) = e.array {
                    array_pages(ui, loaded, &e.key, a, view);
                    ui.add_space(4.0);
                    continue;
                }
                match &e.json {
                    Some((pretty, lines)) => {
                        egui::CollapsingHeader::new(format!("JSON ({lines} lines)"))
                            .id_salt(("meta_json", &e.key))
                            .default_open(*lines <= 12)
                            .show(ui, |ui| {
                                ui.add(
                                    egui::Label::new(egui::RichText::new(pretty).monospace())
                                        .wrap(),
                                );
                            });
                    }
                    None => {
                        ui.add(egui::Label::new(safe_text(&e.value, 5000)).wrap());
                    }
                }
                ui.add_space(4.0);
            }
        });
}

/// `text` with each character the monospace font cannot draw written as
/// its code point (`\u{65e5}`): a vocabulary's CJK tokens, say, read as
/// escapes rather than boxes.
fn drawable(ui: &egui::Ui, text: &str) -> String {
    let font = egui::FontId::monospace(12.0);
    ui.ctx().fonts_mut(|f| {
        text.chars()
            .map(|c| {
                if c.is_ascii() || f.has_glyph(&font, c) {
                    c.to_string()
                } else {
                    format!("\\u{{{:x}}}", u32::from(c))
                }
            })
            .collect()
    })
}

/// Elements a page of a long GGUF array shows.
const ARRAY_PAGE: u64 = 100;

/// A long GGUF array (a vocabulary), a page at a time: its elements are
/// read from the header's bytes when the page changes (in the mapped file,
/// or, remote, in the header already fetched), kept while it is shown.
fn array_pages(
    ui: &mut egui::Ui,
    loaded: &crate::gui::state::Loaded,
    key: &str,
    a: crate::gui::state::MetaArray,
    view: &mut ViewState,
) {
    use crate::format::gguf::header::{Value, page as read_page};
    let pages = a.len.div_ceil(ARRAY_PAGE).max(1);
    let entry = view.meta_pages.entry(key.to_owned()).or_default();
    let mut page = entry.page.unwrap_or(0);
    ui.horizontal(|ui| {
        ui.weak(format!(
            "ARRAY[{}] of {} elements",
            a.elem.name(),
            crate::text::group_digits(a.len)
        ));
        if ui
            .add_enabled(page > 0, egui::Button::new("◀").small())
            .clicked()
        {
            page -= 1;
        }
        let first = page * ARRAY_PAGE;
        ui.label(format!(
            "{}–{}",
            crate::text::group_digits(first),
            crate::text::group_digits((first + ARRAY_PAGE).min(a.len).saturating_sub(1))
        ));
        // Pages are read one after the other, each from where the last
        // ended (a string array has no index).
        let known = usize::try_from(page + 1).is_ok_and(|p| p < entry.starts.len());
        if ui
            .add_enabled(page + 1 < pages && known, egui::Button::new("▶").small())
            .clicked()
        {
            page += 1;
        }
    });
    if entry.page != Some(page) {
        let file = loaded.ck.shards().first().map(crate::format::Shard::file);
        let bytes = file.map_or(&[][..], |f| f.source().bytes());
        let header = file
            .and_then(|f| f.gguf())
            .and_then(|g| usize::try_from(g.tensor_data_offset).ok())
            .unwrap_or(0)
            .min(bytes.len());
        if entry.starts.is_empty() {
            entry.starts.push(a.at);
        }
        let first = page * ARRAY_PAGE;
        let at = usize::try_from(page)
            .ok()
            .and_then(|p| entry.starts.get(p).copied())
            .unwrap_or(a.at);
        let count = ARRAY_PAGE.min(a.len.saturating_sub(first));
        entry.rows = match read_page(&bytes[..header], a.elem, at, count) {
            Ok((vals, next)) => {
                if usize::try_from(page + 1).is_ok_and(|p| p == entry.starts.len()) {
                    entry.starts.push(next);
                }
                vals.iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let text = match v {
                            Value::Str(s) => {
                                format!("{:?}", s.chars().take(200).collect::<String>())
                            }
                            other => other.to_json().to_string(),
                        };
                        let text = safe_text(&text, 200);
                        format!("{:>7}  {}", first + i as u64, drawable(ui, &text))
                    })
                    .collect()
            }
            Err(e) => vec![format!("cannot be read: {e}")],
        };
        entry.page = Some(page);
    }
    egui::ScrollArea::vertical()
        .id_salt(("meta_array", key))
        .max_height(220.0)
        .min_scrolled_height(180.0)
        .show(ui, |ui| {
            for row in &entry.rows {
                ui.monospace(row);
            }
        });
}

/// The quantization's rows of the file facts: method, config, weights.
fn quant_rows_ui(ui: &mut egui::Ui, q: &crate::quant::Quantization) {
    use crate::quant::Status;
    ui.weak("Quantization");
    ui.label(safe_text(&q.method(), 200));
    ui.end_row();
    ui.weak("Config");
    ui.add(
        egui::Label::new(safe_text(
            &q.config_path().map_or_else(
                || "none (the tensors decide)".into(),
                |p| p.display().to_string(),
            ),
            1000,
        ))
        .wrap(),
    );
    ui.end_row();
    let count = |s: Status| q.tensors().iter().filter(|t| t.status() == s).count();
    ui.weak("Quantized weights");
    ui.label(format!(
        "{} ({} decoded, {} recognized, {} inconsistent)",
        q.tensors().len(),
        count(Status::Decoded),
        count(Status::Recognized),
        count(Status::Inconsistent)
    ));
    ui.end_row();
}
