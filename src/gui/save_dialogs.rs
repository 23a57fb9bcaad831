//! The two writing dialogs: *Export tensor* (one tensor to .npy, .csv,
//! .bin or .png) and *Save as* (a new checkpoint from the selection, with
//! renames, metadata edits and dtype conversions). Both run their write as
//! a job with progress and Cancel; the library writes atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eframe::egui;

use super::app::Command;
use super::dialog::{DialogResult, FileDialog};
use super::model::human_bytes;
use crate::dtype::Dtype;
use crate::dtype::convert::{CONVERT_TO, Overflow, is_supported};
use crate::export::{
    self, Encoding, ExportError, ExportFormat, ExportOptions, ExportReport, SizeLimit,
};
use crate::format::{Checkpoint, CheckpointKind};
use crate::jobs::{Job, JobState};
use crate::resave::{self, MetadataEdit, ResaveError, ResaveOptions, ResaveReport};

/// A file-name-safe form of a tensor name.
fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .take(120)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "tensor".into() } else { s }
}

/// The folder of a checkpoint (where outputs go by default).
fn folder_of(ck: &Checkpoint) -> PathBuf {
    ck.path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// A save dialog running in the background.
type BrowseJob = Job<DialogResult>;

/// The *File* row of a writing dialog: the native save dialog runs on a
/// thread; where there is none the user types the path.
#[derive(Default)]
struct PathBrowser {
    job: Option<BrowseJob>,
    /// The native dialog said it is unavailable.
    unavailable: bool,
}

impl PathBrowser {
    /// True while the native dialog is open.
    fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Moves a picked file into `path`.
    fn poll(&mut self, path: &mut String) {
        if let Some(j) = &mut self.job {
            match j.poll() {
                JobState::Running => {}
                JobState::Done(DialogResult::Picked(p)) => {
                    if let Some(p) = p.into_iter().next() {
                        *path = p.display().to_string();
                    }
                    self.job = None;
                }
                JobState::Done(DialogResult::Unavailable) => {
                    self.unavailable = true;
                    self.job = None;
                }
                _ => self.job = None,
            }
        }
    }

    /// Draws the path field with its *Browse…* button, and the hint when
    /// there is no native dialog.
    #[rustfmt::skip]
    fn file_row(
        &mut self,
        ui: &mut egui::Ui,
        path: &mut String,
        dialog: &Arc<dyn FileDialog>,
        repaint: impl Fn() + Send + Sync + 'static,
        width: f32,
    ) {
        let native = !self.unavailable && dialog.available();
        ui.horizontal(|ui| {
            ui.label("File:");
            ui.add(egui::TextEdit::singleline(path).desired_width(width));
            if ui.add_enabled(self.job.is_none() && native, egui::Button::new("Browse…")).clicked() {
                let dialog = Arc::clone(dialog);
                let suggested = PathBuf::from(path.trim());
                self.job = Job::spawn("save-dialog", repaint, move |_, _| dialog.save_file(&suggested)).ok();
            }
        });
        if !native {
            ui.weak("No native save dialog here: type the path.");
        }
    }
}

/// Moves a finished write job's result into `outcome`.
fn poll_outcome<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
    job: &mut Option<Job<Result<T, E>>>,
    outcome: &mut Option<Result<T, String>>,
) {
    if let Some(j) = job {
        match j.poll() {
            JobState::Running => {}
            JobState::Done(r) => {
                *outcome = Some(r.map_err(|e| e.to_string()));
                *job = None;
            }
            JobState::Panicked(m) => {
                *outcome = Some(Err(m));
                *job = None;
            }
        }
    }
}

/// The *Export tensor* dialog.
pub struct ExportDialog {
    ck: Arc<Checkpoint>,
    index: usize,
    /// The output path.
    pub path: String,
    /// Raw codes instead of values.
    pub raw: bool,
    /// Write CSV above the size limit.
    pub force: bool,
    browser: PathBrowser,
    job: Option<Job<Result<ExportReport, ExportError>>>,
    /// The outcome of the last export.
    pub outcome: Option<Result<ExportReport, String>>,
}

impl ExportDialog {
    /// A dialog exporting tensor `index` of `ck`.
    pub fn new(ck: Arc<Checkpoint>, index: usize) -> Self {
        let name = ck
            .tensors
            .get(index)
            .and_then(|t| ck.info(*t))
            .map_or_else(String::new, |i| i.name.clone());
        let path = folder_of(&ck)
            .join(format!("{}.npy", file_stem(&name)))
            .display()
            .to_string();
        Self {
            ck,
            index,
            path,
            raw: false,
            force: false,
            browser: PathBrowser::default(),
            job: None,
            outcome: None,
        }
    }

    /// True while a job runs.
    pub fn is_busy(&self) -> bool {
        self.job.is_some() || self.browser.is_busy()
    }

    /// Collects finished jobs.
    pub fn poll(&mut self) {
        self.browser.poll(&mut self.path);
        poll_outcome(&mut self.job, &mut self.outcome);
    }

    /// Starts the export (the GUI's Export button).
    pub fn start(&mut self, repaint: impl Fn() + Send + Sync + 'static) {
        let Some(t) = self.ck.tensors.get(self.index).copied() else {
            return;
        };
        let ck = Arc::clone(&self.ck);
        let out = PathBuf::from(self.path.trim());
        let opts = ExportOptions {
            encoding: if self.raw {
                Encoding::RawCodes
            } else {
                Encoding::Values
            },
            size_limit: if self.force {
                SizeLimit::Ignore
            } else {
                SizeLimit::Enforce
            },
            ..ExportOptions::default()
        };
        self.outcome = None;
        self.job = Job::spawn("export-tensor", repaint, move |cancel, progress| {
            export::export_tensor(&ck, t, &out, &opts, cancel, progress)
        })
        .ok();
    }
}

/// Draws the export dialog; false when it should close.
pub fn export_ui(
    ctx: &egui::Context,
    d: &mut ExportDialog,
    dialog: &Arc<dyn FileDialog>,
    repaint: impl Fn() + Send + Sync + Clone + 'static,
) -> bool {
    let mut open = true;
    let mut close = false;
    let info =
        d.ck.tensors
            .get(d.index)
            .and_then(|t| d.ck.info(*t))
            .cloned();
    egui::Window::new("Export tensor").id(egui::Id::unique("export_dialog")).open(&mut open).collapsible(false).default_width(520.0).show(ctx, |ui| {
        let Some(info) = info else {
            ui.label("The tensor is gone.");
            return;
        };
        ui.label(egui::RichText::new(super::safe_text(&info.name, 300)).strong());
        ui.weak(format!("{} {} · {}", info.dtype, super::model::fmt_shape(&info.shape), human_bytes(info.nbytes)));
        ui.add_space(4.0);
        ui.horizontal(|ui| {
            ui.label("Format:");
            for f in ExportFormat::ALL {
                let current = ExportFormat::from_path(Path::new(d.path.trim())).ok();
                if ui.selectable_label(current == Some(f), format!(".{}", f.extension())).clicked() {
                    d.path = Path::new(d.path.trim()).with_extension(f.extension()).display().to_string();
                }
            }
        });
        d.browser.file_row(ui, &mut d.path, dialog, repaint.clone(), 340.0);
        let wide = matches!(info.dtype, Dtype::BF16 | Dtype::F8E4M3 | Dtype::F8E5M2 | Dtype::F8E8M0 | Dtype::F8E4M3Fnuz | Dtype::F8E5M2Fnuz | Dtype::F6E2M3 | Dtype::F6E3M2 | Dtype::F4);
        if wide {
            ui.checkbox(&mut d.raw, "Raw codes (BF16 as uint16, F8 as uint8, F6/F4 one code per uint8) instead of float32 values");
        }
        ui.checkbox(&mut d.force, "Write CSV even above 10 million elements");
        ui.add_space(6.0);
        if let Some(job) = &d.job {
            super::job_row(ui, job, "", 220.0);
        } else {
            ui.horizontal(|ui| {
                if ui.button("Export").clicked() {
                    d.start(repaint.clone());
                }
                if ui.button("Close").clicked() {
                    close = true;
                }
            });
        }
        match &d.outcome {
            Some(Ok(r)) => {
                ui.colored_label(egui::Color32::from_rgb(120, 190, 120), format!("Wrote {} ({} bytes).", super::safe_text(&r.path.display().to_string(), 300), r.bytes_written));
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, super::safe_text(e, 600));
            }
            None => {}
        }
    });
    open && !close
}

/// A dtype conversion choice in the Save-as dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversionChoice {
    /// The source dtype.
    pub from: Dtype,
    /// The target, or `None` to keep.
    pub to: Option<Dtype>,
}

/// The *Save as* dialog.
pub struct SaveAsDialog {
    ck: Arc<Checkpoint>,
    /// Tensors to write (indices into `ck.tensors`).
    pub selection: Vec<usize>,
    /// The output path.
    pub path: String,
    /// `FROM=TO` lines.
    pub renames: String,
    /// Metadata rows: key, value, keep.
    pub metadata: Vec<(String, String, bool)>,
    original_metadata: BTreeMap<String, String>,
    /// New key and value being added.
    pub new_key: String,
    /// New value.
    pub new_value: String,
    /// Conversions per dtype present.
    pub conversions: Vec<ConversionChoice>,
    /// F8 overflow handling.
    pub overflow: Overflow,
    /// Re-shard at this size (empty: one file).
    pub max_shard: String,
    browser: PathBrowser,
    job: Option<Job<Result<ResaveReport, ResaveError>>>,
    /// The outcome of the last save.
    pub outcome: Option<Result<ResaveReport, String>>,
}

impl SaveAsDialog {
    /// A dialog writing `selection` (indices into `ck.tensors`).
    pub fn new(ck: Arc<Checkpoint>, selection: Vec<usize>) -> Self {
        let stem = match &ck.kind {
            CheckpointKind::Single => ck
                .path
                .file_stem()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned()),
            CheckpointKind::Sharded { .. } => "model".into(),
        };
        let path = folder_of(&ck)
            .join(format!("{stem}-resaved.safetensors"))
            .display()
            .to_string();
        let original_metadata: BTreeMap<String, String> = match &ck.kind {
            CheckpointKind::Single => ck
                .shards
                .first()
                .and_then(|s| s.file.header().metadata.clone())
                .unwrap_or_default(),
            CheckpointKind::Sharded { .. } => ck
                .shards
                .first()
                .and_then(|s| s.file.header().metadata.clone())
                .unwrap_or_default(),
        };
        let metadata = original_metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), true))
            .collect();
        let mut dtypes: Vec<Dtype> = selection
            .iter()
            .filter_map(|&i| ck.tensors.get(i).and_then(|t| ck.info(*t)))
            .map(|i| i.dtype)
            .collect();
        dtypes.sort_by_key(|d| d.writer_rank());
        dtypes.dedup();
        let conversions = dtypes
            .into_iter()
            .filter(|d| CONVERT_TO.iter().any(|t| is_supported(*d, *t)))
            .map(|from| ConversionChoice { from, to: None })
            .collect();
        Self {
            ck,
            selection,
            path,
            renames: String::new(),
            metadata,
            original_metadata,
            new_key: String::new(),
            new_value: String::new(),
            conversions,
            overflow: Overflow::Saturate,
            max_shard: String::new(),
            browser: PathBrowser::default(),
            job: None,
            outcome: None,
        }
    }

    /// True while a job runs.
    pub fn is_busy(&self) -> bool {
        self.job.is_some() || self.browser.is_busy()
    }

    /// Collects finished jobs.
    pub fn poll(&mut self) {
        self.browser.poll(&mut self.path);
        poll_outcome(&mut self.job, &mut self.outcome);
    }

    /// The options the dialog describes, or why they are invalid.
    pub fn options(&self) -> Result<ResaveOptions, String> {
        let renames = self
            .renames
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.split_once('=')
                    .map(|(a, b)| (a.trim().to_owned(), b.trim().to_owned()))
                    .ok_or_else(|| format!("a rename takes FROM=TO, got {l:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut edits = Vec::new();
        for (k, v, keep) in &self.metadata {
            match (keep, self.original_metadata.get(k)) {
                (false, Some(_)) => edits.push(MetadataEdit::Delete { key: k.clone() }),
                (true, Some(old)) if old != v => edits.push(MetadataEdit::Set {
                    key: k.clone(),
                    value: v.clone(),
                }),
                (true, None) => edits.push(MetadataEdit::Set {
                    key: k.clone(),
                    value: v.clone(),
                }),
                _ => {}
            }
        }
        let max_shard_bytes = if self.max_shard.trim().is_empty() {
            None
        } else {
            Some(resave::parse_size(&self.max_shard)?)
        };
        Ok(ResaveOptions {
            selection: Some(self.selection.clone()),
            renames,
            metadata_edits: edits,
            conversions: self
                .conversions
                .iter()
                .filter_map(|c| Some((c.from, c.to?)))
                .collect(),
            overflow: self.overflow,
            max_shard_bytes,
            ..ResaveOptions::default()
        })
    }

    /// Starts the save (the GUI's Save button).
    pub fn start(&mut self, repaint: impl Fn() + Send + Sync + 'static) {
        let opts = match self.options() {
            Ok(o) => o,
            Err(e) => {
                self.outcome = Some(Err(e));
                return;
            }
        };
        let ck = Arc::clone(&self.ck);
        let out = PathBuf::from(self.path.trim());
        self.outcome = None;
        self.job = Job::spawn("save-as", repaint, move |cancel, progress| {
            resave::resave(&ck, &out, &opts, cancel, progress)
        })
        .ok();
    }
}

/// Draws the Save-as dialog; false when it should close.
pub fn save_as_ui(
    ctx: &egui::Context,
    d: &mut SaveAsDialog,
    dialog: &Arc<dyn FileDialog>,
    repaint: impl Fn() + Send + Sync + Clone + 'static,
    commands: &mut Vec<Command>,
) -> bool {
    let mut open = true;
    let mut close = false;
    egui::Window::new("Save as").id(egui::Id::unique("save_as_dialog")).open(&mut open).collapsible(false).default_width(620.0).default_height(560.0).show(ctx, |ui| {
        egui::ScrollArea::vertical().max_height(ctx.content_rect().height() * 0.7).show(ui, |ui| {
            let bytes: u64 = d.selection.iter().filter_map(|&i| d.ck.tensors.get(i).and_then(|t| d.ck.info(*t))).map(|i| i.nbytes).sum();
            egui::CollapsingHeader::new(format!(
                "{} tensor{} selected · {}",
                d.selection.len(),
                if d.selection.len() == 1 { "" } else { "s" },
                human_bytes(bytes)
            )).id_salt("save_sel").show(ui, |ui| {
                for &i in d.selection.iter().take(500) {
                    if let Some(info) = d.ck.tensors.get(i).and_then(|t| d.ck.info(*t)) {
                        ui.label(format!("{}  {}", super::safe_text(&info.name, 200), info.dtype));
                    }
                }
                if d.selection.len() > 500 {
                    ui.weak(format!("… and {} more", d.selection.len() - 500));
                }
            });
            ui.add_space(4.0);
            ui.strong("Renames (one FROM=TO per line)");
            ui.add(egui::TextEdit::multiline(&mut d.renames).desired_rows(2).desired_width(f32::INFINITY).hint_text("model.embed.weight=embed.weight"));
            ui.add_space(4.0);
            ui.strong("Metadata (untick to remove)");
            egui::Grid::new("save_meta").num_columns(3).show(ui, |ui| {
                for (k, v, keep) in &mut d.metadata {
                    ui.checkbox(keep, super::safe_text(k, 80));
                    ui.add_enabled_ui(*keep, |ui| {
                        ui.add_sized([380.0, 20.0], egui::TextEdit::singleline(v));
                    });
                    ui.end_row();
                }
            });
            ui.horizontal(|ui| {
                ui.add(egui::TextEdit::singleline(&mut d.new_key).hint_text("new key").desired_width(140.0));
                ui.add(egui::TextEdit::singleline(&mut d.new_value).hint_text("value").desired_width(260.0));
                if ui.add_enabled(!d.new_key.trim().is_empty(), egui::Button::new("Add")).clicked() {
                    let key = d.new_key.trim().to_owned();
                    d.metadata.retain(|(k, _, _)| *k != key);
                    d.metadata.push((key, std::mem::take(&mut d.new_value), true));
                    d.new_key.clear();
                }
            });
            if !d.conversions.is_empty() {
                ui.add_space(4.0);
                ui.strong("Convert dtypes");
                for c in &mut d.conversions {
                    ui.horizontal(|ui| {
                        ui.monospace(c.from.name());
                        ui.label("->");
                        let label = c.to.map_or("keep", Dtype::name);
                        egui::ComboBox::from_id_salt(("conv", c.from.name())).selected_text(label).show_ui(ui, |ui| {
                            ui.selectable_value(&mut c.to, None, "keep");
                            for t in CONVERT_TO {
                                if is_supported(c.from, t) {
                                    ui.selectable_value(&mut c.to, Some(t), t.name());
                                }
                            }
                        });
                    });
                }
                if d.conversions.iter().any(|c| matches!(c.to, Some(Dtype::F8E4M3 | Dtype::F8E5M2))) {
                    ui.horizontal(|ui| {
                        ui.label("Values too large for F8:");
                        ui.selectable_value(&mut d.overflow, Overflow::Saturate, "saturate");
                        ui.selectable_value(&mut d.overflow, Overflow::Nan, "become NaN");
                    });
                }
            }
            ui.add_space(4.0);
            ui.horizontal(|ui| {
                ui.label("Shard at most");
                ui.add(egui::TextEdit::singleline(&mut d.max_shard).hint_text("e.g. 5GB (empty: one file)").desired_width(160.0));
            });
            d.browser.file_row(ui, &mut d.path, dialog, repaint.clone(), 420.0);
        });
        ui.separator();
        if let Some(job) = &d.job {
            super::job_row(ui, job, "", 260.0);
        } else {
            ui.horizontal(|ui| {
                if ui.button("Save").clicked() {
                    d.start(repaint.clone());
                }
                if ui.button("Close").clicked() {
                    close = true;
                }
            });
        }
        match &d.outcome {
            Some(Ok(r)) => {
                let target = r.index.clone().or_else(|| r.files.first().map(|f| f.path.clone()));
                ui.colored_label(
                    egui::Color32::from_rgb(120, 190, 120),
                    format!("Saved {} tensors in {} file(s), {} bytes.", r.tensors.len(), r.files.len(), r.bytes_written),
                );
                let t = r.conversion_totals;
                if t.elements > 0 {
                    ui.label(format!("Converted {} values: {} saturated, {} became NaN, {} became ±Inf, {} underflowed to 0.", t.elements, t.saturated, t.overflow_nan, t.overflow_inf, t.underflow_zero));
                }
                for w in &r.warnings {
                    ui.colored_label(ui.visuals().warn_fg_color, super::safe_text(w, 300));
                }
                if let Some(p) = target
                    && ui.button("Open the result").clicked()
                {
                    commands.push(Command::Open(p));
                    close = true;
                }
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, super::safe_text(e, 600));
            }
            None => {}
        }
    });
    open && !close
}
