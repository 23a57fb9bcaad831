//! The two writing forms: *Export tensor* (one tensor to .npy, .csv, .bin
//! or .png) and *Save as* (a new checkpoint from the selection, with
//! renames, metadata edits and dtype conversions). Their writes run in the
//! background with progress and Cancel; the library writes atomically.

use std::path::Path;

use eframe::egui;

use super::{failure_text, job_row};
use crate::dtype::Dtype;
use crate::dtype::convert::{CONVERT_TO, Overflow, is_supported};
use crate::export::ExportFormat;
use crate::gui::command::{Command, JobId};
use crate::gui::safe_text;
use crate::gui::state::{Browse, ExportDialog, ExportForm, SaveAsDialog, SaveAsForm, WriteForm};
use crate::text::{fmt_shape, human_bytes};

/// The colour of a write that succeeded.
const DONE_COLOUR: egui::Color32 = egui::Color32::from_rgb(120, 190, 120);

/// The *File* row of a writing form: the path field and its *Browse…*
/// button (the native save dialog), or a hint where there is none.
fn file_row_ui(
    ui: &mut egui::Ui,
    path: &mut String,
    browse: &Browse,
    form: WriteForm,
    width: f32,
    out: &mut Vec<Command>,
) {
    let native = !browse.unavailable;
    ui.horizontal(|ui| {
        let label = ui.label("File:");
        ui.add(egui::TextEdit::singleline(path).desired_width(width))
            .labelled_by(label.id);
        let idle = !browse.task.is_running();
        if ui
            .add_enabled(idle && native, egui::Button::new("Browse…"))
            .clicked()
        {
            out.push(Command::Browse(form));
        }
    });
    if !native {
        ui.weak("No native save dialog here: type the path.");
    }
}

/// Draws the *Export tensor* window.
pub fn export_ui(
    ctx: &egui::Context,
    d: &ExportDialog,
    form: &mut ExportForm,
    out: &mut Vec<Command>,
) {
    let mut open = true;
    egui::Window::new("Export tensor").id(egui::Id::unique("export_dialog")).open(&mut open).collapsible(false).default_width(520.0).show(ctx, |ui| {
        let info = &d.info;
        ui.label(egui::RichText::new(safe_text(info.name(), 300)).strong());
        ui.weak(format!("{} {} · {}", info.dtype(), fmt_shape(info.shape()), human_bytes(info.nbytes())));
        ui.add_space(4.0);
        ui.horizontal(|ui| {
            ui.label("Format:");
            for f in ExportFormat::ALL {
                let current = ExportFormat::from_path(Path::new(form.path.trim())).ok();
                if ui.selectable_label(current == Some(f), format!(".{}", f.extension())).clicked() {
                    form.path = Path::new(form.path.trim()).with_extension(f.extension()).display().to_string();
                }
            }
        });
        file_row_ui(ui, &mut form.path, &d.browse, WriteForm::Export, 340.0, out);
        if info.dtype().needs_ml_dtypes() {
            ui.checkbox(&mut form.raw, "Raw codes (BF16 as uint16, F8 as uint8, F6/F4 one code per uint8) instead of float32 values");
        }
        ui.checkbox(&mut form.force, "Write CSV even above 10 million elements");
        ui.add_space(6.0);
        if d.task.is_running() {
            job_row(ui, &d.task, JobId::Write(WriteForm::Export), "", 220.0, out);
        } else {
            ui.horizontal(|ui| {
                if ui.button("Export").clicked() {
                    out.push(Command::StartWrite(WriteForm::Export));
                }
                if ui.button("Close").clicked() {
                    out.push(Command::CloseForm(WriteForm::Export));
                }
            });
        }
        match d.task.latest() {
            Some(Ok(r)) => {
                ui.colored_label(DONE_COLOUR, format!("Wrote {} ({} bytes).", safe_text(&r.path.display().to_string(), 300), r.bytes_written));
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, failure_text(e, 600));
            }
            None => {}
        }
    });
    if !open {
        out.push(Command::CloseForm(WriteForm::Export));
    }
}

/// Draws the *Save as* window.
pub fn save_as_ui(
    ctx: &egui::Context,
    d: &SaveAsDialog,
    form: &mut SaveAsForm,
    out: &mut Vec<Command>,
) {
    let mut open = true;
    egui::Window::new("Save as").id(egui::Id::unique("save_as_dialog")).open(&mut open).collapsible(false).default_width(620.0).default_height(560.0).show(ctx, |ui| {
        egui::ScrollArea::vertical().max_height(ctx.content_rect().height() * 0.7).show(ui, |ui| {
            let bytes = d.selection_bytes;
            egui::CollapsingHeader::new(format!(
                "{} tensor{} selected · {}",
                d.selection.len(),
                if d.selection.len() == 1 { "" } else { "s" },
                human_bytes(bytes)
            )).id_salt("save_sel").show(ui, |ui| {
                for &i in d.selection.iter().take(500) {
                    if let Some((_, info)) = d.ck.entry(i) {
                        ui.label(format!("{}  {}", safe_text(info.name(), 200), info.dtype()));
                    }
                }
                if d.selection.len() > 500 {
                    ui.weak(format!("… and {} more", d.selection.len() - 500));
                }
            });
            ui.add_space(4.0);
            ui.strong("Renames (one FROM=TO per line)");
            ui.add(egui::TextEdit::multiline(&mut form.renames).desired_rows(2).desired_width(f32::INFINITY).hint_text("model.embed.weight=embed.weight"));
            ui.add_space(4.0);
            ui.strong("Metadata (untick to remove)");
            egui::Grid::new("save_meta").num_columns(3).show(ui, |ui| {
                for (k, v, keep) in &mut form.metadata {
                    ui.checkbox(keep, safe_text(k, 80));
                    ui.add_enabled_ui(*keep, |ui| {
                        ui.add_sized([380.0, 20.0], egui::TextEdit::singleline(v));
                    });
                    ui.end_row();
                }
            });
            ui.horizontal(|ui| {
                ui.add(egui::TextEdit::singleline(&mut form.new_key).hint_text("new key").desired_width(140.0));
                ui.add(egui::TextEdit::singleline(&mut form.new_value).hint_text("value").desired_width(260.0));
                if ui.add_enabled(!form.new_key.trim().is_empty(), egui::Button::new("Add")).clicked() {
                    let key = form.new_key.trim().to_owned();
                    form.metadata.retain(|(k, _, _)| *k != key);
                    form.metadata.push((key, std::mem::take(&mut form.new_value), true));
                    form.new_key.clear();
                }
            });
            if !form.conversions.is_empty() {
                ui.add_space(4.0);
                ui.strong("Convert dtypes");
                for c in &mut form.conversions {
                    ui.horizontal(|ui| {
                        let from = ui.monospace(c.from.name());
                        ui.label("->");
                        let label = c.to.map_or("keep", Dtype::name);
                        egui::ComboBox::from_id_salt(("conv", c.from.name())).selected_text(label).show_ui(ui, |ui| {
                            ui.selectable_value(&mut c.to, None, "keep");
                            for t in CONVERT_TO {
                                if is_supported(c.from, t) {
                                    ui.selectable_value(&mut c.to, Some(t), t.name());
                                }
                            }
                        }).response.labelled_by(from.id);
                    });
                }
                if form.conversions.iter().any(|c| c.to.is_some_and(Dtype::is_small_float)) {
                    ui.horizontal(|ui| {
                        ui.label("Values too large for F8:");
                        ui.selectable_value(&mut form.overflow, Overflow::Saturate, "saturate");
                        ui.selectable_value(&mut form.overflow, Overflow::Nan, "become NaN");
                    });
                }
            }
            ui.add_space(4.0);
            if d.quantized {
                ui.checkbox(
                    &mut form.dequantize,
                    "Dequantize: write quantized weights as plain tensors of their true values",
                )
                .on_hover_text(
                    "Each decoded quantized weight is written under its logical name, in the dtype its library computes in (convert it above), in place of its packed parts",
                );
            }
            ui.horizontal(|ui| {
                ui.label("Shard at most");
                ui.add(egui::TextEdit::singleline(&mut form.max_shard).hint_text("e.g. 5GB (empty: one file)").desired_width(160.0));
            });
            file_row_ui(ui, &mut form.path, &d.browse, WriteForm::SaveAs, 420.0, out);
        });
        ui.separator();
        if d.task.is_running() {
            job_row(ui, &d.task, JobId::Write(WriteForm::SaveAs), "", 260.0, out);
        } else {
            ui.horizontal(|ui| {
                if ui.button("Save").clicked() {
                    out.push(Command::StartWrite(WriteForm::SaveAs));
                }
                if ui.button("Close").clicked() {
                    out.push(Command::CloseForm(WriteForm::SaveAs));
                }
            });
        }
        if let Some(e) = &d.invalid {
            ui.colored_label(ui.visuals().error_fg_color, safe_text(e, 600));
        }
        match d.task.latest() {
            Some(Ok(r)) => {
                let target = r.index.clone().or_else(|| r.files.first().map(|f| f.path.clone()));
                ui.colored_label(
                    DONE_COLOUR,
                    format!("Saved {} tensors in {} file(s), {} bytes.", r.tensors.len(), r.files.len(), r.bytes_written),
                );
                let t = r.conversion_totals;
                if t.elements > 0 {
                    ui.label(format!("Converted {} values: {} saturated, {} became NaN, {} became ±Inf, {} underflowed to 0.", t.elements, t.saturated, t.overflow_nan, t.overflow_inf, t.underflow_zero));
                }
                for w in &r.warnings {
                    ui.colored_label(ui.visuals().warn_fg_color, safe_text(w, 300));
                }
                if let Some(p) = target
                    && ui.button("Open the result").clicked()
                {
                    out.push(Command::Open(p));
                    out.push(Command::CloseForm(WriteForm::SaveAs));
                }
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, failure_text(e, 600));
            }
            None => {}
        }
    });
    if !open {
        out.push(Command::CloseForm(WriteForm::SaveAs));
    }
}

/// The *Open URL* window: a remote checkpoint by URL or Hub path, and the
/// recent remote ones.
pub fn open_url_ui(
    ctx: &egui::Context,
    recent: &[std::path::PathBuf],
    can_compare: bool,
    text: &mut String,
    out: &mut Vec<Command>,
) {
    let mut open = true;
    egui::Window::new("Open URL")
        .id(egui::Id::unique("open_url_window"))
        .open(&mut open)
        .collapsible(false)
        .anchor(egui::Align2::CENTER_TOP, [0.0, 80.0])
        .default_width(560.0)
        .show(ctx, |ui| {
            ui.label("A safetensors file or shard index on a web server, or a Hugging Face Hub repository:");
            ui.weak("https://host/path/model.safetensors · hf://ORG/REPO[@REVISION][/FILE] · https://huggingface.co/ORG/REPO · several, separated by spaces, for a training run (hf://ORG/REPO@step1000 hf://ORG/REPO@step2000 …)");
            let r = ui.add(
                egui::TextEdit::singleline(text)
                    .hint_text("hf://org/model")
                    .desired_width(f32::INFINITY),
            );
            // Typing goes to the field as the window opens.
            if text.is_empty() && ui.memory(|m| m.focused().is_none()) {
                r.request_focus();
            }
            let location = text.trim().to_owned();
            let several: Vec<&str> = location.split_whitespace().collect();
            let valid = several.len() == 1 && crate::source::remote::is_remote(&location);
            let run_valid = !several.is_empty()
                && several.iter().all(|l| crate::source::remote::is_remote(l));
            ui.horizontal(|ui| {
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                if (ui.add_enabled(valid, egui::Button::new("Open")).clicked() || (enter && valid))
                    && !location.is_empty()
                {
                    out.push(Command::Open(location.clone().into()));
                    out.push(Command::CloseOpenUrl);
                }
                if can_compare
                    && ui
                        .add_enabled(valid, egui::Button::new("Compare with the open tab"))
                        .on_hover_text("Diff the checkpoint shown against this remote one")
                        .clicked()
                {
                    out.push(Command::Compare(location.clone().into()));
                    out.push(Command::CloseOpenUrl);
                }
                if ui
                    .add_enabled(run_valid, egui::Button::new("Open as a training run"))
                    .on_hover_text("These checkpoints (or one) as the steps of a run: the Run view")
                    .clicked()
                {
                    out.push(Command::OpenSeries(
                        several.iter().map(std::path::PathBuf::from).collect(),
                    ));
                    out.push(Command::CloseOpenUrl);
                }
                if ui.button("Cancel").clicked() {
                    out.push(Command::CloseOpenUrl);
                }
                if !run_valid && !location.is_empty() {
                    ui.colored_label(ui.visuals().warn_fg_color, "starts with https://, http:// or hf://");
                } else if several.len() > 1 {
                    ui.weak("several: a training run");
                }
            });
            ui.weak("Only headers are read on opening; tensor bytes are fetched when looked at and kept in the cache (TENSORSCOPE_CACHE_DIR, at most TENSORSCOPE_CACHE_MAX). A Hub token comes from HF_TOKEN.");
            let remote: Vec<&std::path::PathBuf> = recent
                .iter()
                .filter(|p| crate::source::is_remote_location(p))
                .collect();
            if !remote.is_empty() {
                ui.separator();
                ui.label("Recent URLs");
                for p in remote {
                    let s = p.display().to_string();
                    if ui.link(safe_text(&s, 100)).clicked() {
                        out.push(Command::Open(p.clone()));
                        out.push(Command::CloseOpenUrl);
                    }
                }
            }
        });
    if !open {
        out.push(Command::CloseOpenUrl);
    }
}
