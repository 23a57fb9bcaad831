//! The in-app file picker, used where no native dialog is available: a
//! folder listing read in the background.

use std::path::PathBuf;

use eframe::egui;

use super::failure_text;
use crate::gui::command::Command;
use crate::gui::safe_text;
use crate::gui::state::{DialogPurpose, Entry, Listing, Picker, PickerForm};
use crate::text::human_bytes;

fn is_checkpoint(name: &str) -> bool {
    crate::format::is_checkpoint_name(name)
}

/// Draws the picker window.
pub fn picker_ui(
    ctx: &egui::Context,
    picker: &Picker,
    form: &mut PickerForm,
    out: &mut Vec<Command>,
) {
    let mut open = true;
    let mut go_to: Option<PathBuf> = None;
    let purpose = picker.purpose;
    let mut choose: Option<PathBuf> = None;
    egui::Window::new("Open checkpoint")
        .id(egui::Id::unique("in_app_picker"))
        .open(&mut open)
        .default_size([560.0, 420.0])
        .collapsible(false)
        .show(ctx, |ui| {
            ui.label("No native file dialog is available here (no desktop portal or zenity); pick a file below.");
            ui.horizontal(|ui| {
                if ui.button("Up").clicked()
                    && let Some(parent) = picker.folder.parent()
                {
                    go_to = Some(parent.to_path_buf());
                }
                let r = ui.add(egui::TextEdit::singleline(&mut form.path_text).desired_width(360.0));
                if (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter))) || ui.button("Go").clicked() {
                    // The listing job finds out whether it is a folder or a file.
                    go_to = Some(PathBuf::from(form.path_text.trim()));
                }
            });
            ui.horizontal(|ui| {
                ui.checkbox(&mut form.show_all, "Show all files");
                let (text, hover) = if purpose == DialogPurpose::Series {
                    (
                        "Open this folder as a series",
                        "Each checkpoint sub-folder and checkpoint file in this folder is one step of the run",
                    )
                } else {
                    (
                        "Open this folder as a model",
                        "Opens the shard index or the single .safetensors file in this folder",
                    )
                };
                if ui.button(text).on_hover_text(hover).clicked() {
                    choose = Some(picker.folder.clone());
                }
            });
            ui.separator();
            if picker.listing.is_running() {
                ui.spinner();
            }
            match picker.listing.latest() {
                None | Some(Ok(Listing::File(_))) => {}
                Some(Err(e)) => {
                    ui.colored_label(ui.visuals().error_fg_color, failure_text(e, 500));
                }
                Some(Ok(Listing::Folder(entries))) => {
                    let shown: Vec<&Entry> = entries
                        .iter()
                        .filter(|e| e.is_dir || form.show_all || is_checkpoint(&e.name))
                        .collect();
                    let row_h = ui.text_style_height(&egui::TextStyle::Body) + 4.0;
                    egui::ScrollArea::vertical().auto_shrink(false).show_rows(ui, row_h, shown.len(), |ui, range| {
                        for e in &shown[range] {
                            let label = if e.is_dir {
                                format!("[folder] {}", safe_text(&e.name, 120))
                            } else {
                                format!("{}    {}", safe_text(&e.name, 120), human_bytes(e.size))
                            };
                            let r = ui.selectable_label(false, label);
                            if r.clicked() {
                                if e.is_dir {
                                    go_to = Some(e.path.clone());
                                } else {
                                    choose = Some(e.path.clone());
                                }
                            }
                        }
                    });
                }
            }
        });
    if let Some(p) = go_to {
        out.push(Command::PickerGo(p));
    }
    if let Some(p) = choose {
        out.push(Command::opening(purpose, p));
        out.push(Command::ClosePicker);
    } else if !open {
        out.push(Command::ClosePicker);
    }
}
