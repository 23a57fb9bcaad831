//! The pane shown instead of the table for a file that cannot be opened:
//! the reference kind, our message, the evidence, and the rule in words.

use eframe::egui;

use crate::format::{FormatError, LoadError};
use crate::gui::command::Command;
use crate::gui::safe_text;

/// The facts behind a format error, as label/value pairs.
pub fn evidence(e: &FormatError) -> Vec<(&'static str, String)> {
    let range = |r: [u64; 2]| format!("[{}, {}]", r[0], r[1]);
    match e {
        FormatError::HeaderTooSmall { file_size } => {
            vec![("File size", format!("{file_size} bytes"))]
        }
        FormatError::HeaderTooLarge { header_size, .. } => vec![
            ("Header length (bytes 0..8)", header_size.to_string()),
            ("Limit", "100000000".into()),
        ],
        FormatError::InvalidHeaderLength {
            header_size,
            file_size,
            ..
        } => vec![
            ("Header length", header_size.to_string()),
            (
                "Header bytes",
                format!("8..{}", header_size.saturating_add(8)),
            ),
            ("File size", format!("{file_size} bytes")),
        ],
        FormatError::InvalidHeader { byte_offset, .. } => {
            vec![("First invalid byte at file offset", byte_offset.to_string())]
        }
        FormatError::InvalidHeaderDeserialization {
            line,
            column,
            byte_offset,
            ..
        } => vec![
            ("File offset", byte_offset.to_string()),
            ("Header line, column", format!("{line}, {column}")),
        ],
        FormatError::InvalidOffset {
            tensor,
            data_offsets,
            expected_begin,
        } => vec![
            ("Tensor", safe_text(tensor, 300)),
            ("data_offsets", range(*data_offsets)),
            ("Expected begin", expected_begin.to_string()),
        ],
        FormatError::ValidationOverflow {
            tensor,
            dtype,
            shape,
            ..
        } => vec![
            ("Tensor", safe_text(tensor, 300)),
            ("Dtype", dtype.to_string()),
            ("Shape", safe_text(&format!("{shape:?}"), 300)),
        ],
        FormatError::MisalignedSlice {
            tensor,
            dtype,
            elements,
            bits,
        } => vec![
            ("Tensor", safe_text(tensor, 300)),
            ("Dtype", dtype.to_string()),
            ("Elements", elements.to_string()),
            ("Bits", bits.to_string()),
        ],
        FormatError::TensorInvalidInfo {
            tensor,
            dtype,
            shape,
            data_offsets,
            expected_bytes,
            found_bytes,
        } => vec![
            ("Tensor", safe_text(tensor, 300)),
            (
                "Dtype, shape",
                safe_text(&format!("{dtype} {shape:?}"), 300),
            ),
            ("data_offsets", range(*data_offsets)),
            ("Bytes needed", expected_bytes.to_string()),
            ("Bytes spanned", found_bytes.to_string()),
        ],
        FormatError::MetadataIncompleteBuffer {
            header_size,
            data_end,
            file_size,
        } => vec![
            (
                "Data should end at file offset",
                data_end
                    .checked_add(8)
                    .and_then(|v| v.checked_add(*header_size))
                    .map_or_else(|| "beyond 2^64".into(), |v| v.to_string()),
            ),
            ("File size", format!("{file_size} bytes")),
        ],
    }
}

/// Draws the error pane for tab `tab`.
pub fn error_pane_ui(ui: &mut egui::Ui, err: &LoadError, tab: usize, commands: &mut Vec<Command>) {
    egui::ScrollArea::vertical().show(ui, |ui| {
        ui.add_space(12.0);
        ui.heading("This file cannot be opened");
        ui.add_space(6.0);
        let format = err.format_error();
        if let Some(f) = format.and_then(FormatError::detected_format) {
            ui.label(egui::RichText::new(format!("It looks like {}.", f.description())).strong());
            ui.add_space(4.0);
        }
        egui::Grid::new("error_facts")
            .num_columns(2)
            .spacing([16.0, 6.0])
            .show(ui, |ui| {
                ui.weak("Error kind");
                ui.label(
                    egui::RichText::new(err.kind())
                        .monospace()
                        .color(ui.visuals().error_fg_color),
                );
                ui.end_row();
                ui.weak("Message");
                ui.add(egui::Label::new(safe_text(&err.message(), 2000)).wrap());
                ui.end_row();
                if let Some(shard) = err.shard() {
                    ui.weak("Shard");
                    ui.label(safe_text(shard, 300));
                    ui.end_row();
                }
                if let Some(f) = format {
                    if let LoadError::ShardInvalid { error, .. } = err {
                        ui.weak("Shard's error kind");
                        ui.monospace(error.kind());
                        ui.end_row();
                    }
                    for (label, value) in evidence(f) {
                        ui.weak(label);
                        ui.monospace(value);
                        ui.end_row();
                    }
                }
                ui.weak("Path");
                ui.label(safe_text(&err.path().display().to_string(), 1000));
                ui.end_row();
            });
        if let Some(f) = format {
            ui.add_space(10.0);
            ui.label(egui::RichText::new("The rule").strong());
            ui.label(f.rule());
        }
        ui.add_space(12.0);
        ui.horizontal(|ui| {
            if ui.button("Try again").clicked() {
                commands.push(Command::Reload(tab));
            }
            if ui.button("Copy error").clicked() {
                commands.push(Command::CopyText(format!("{}: {}", err.kind(), err)));
            }
            if ui.button("Close tab").clicked() {
                commands.push(Command::CloseTab(tab));
            }
            if err.is_folder_of_many()
                && ui
                    .button("Open as a training run")
                    .on_hover_text(
                        "Its checkpoints (sub-folders and files) as the steps of one run",
                    )
                    .clicked()
            {
                commands.push(Command::CloseTab(tab));
                commands.push(Command::OpenSeries(vec![err.path().to_path_buf()]));
            }
        });
    });
}
