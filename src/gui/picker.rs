//! The in-app file picker, used where no native dialog is available: a
//! folder listing read by a background job.

use std::path::{Path, PathBuf};

use eframe::egui;

use super::app::Command;
use crate::jobs::{Job, JobState};

/// One entry of a folder listing.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its path.
    pub path: PathBuf,
    /// Its file name.
    pub name: String,
    /// True for a folder.
    pub is_dir: bool,
    /// Size in bytes (files).
    pub size: u64,
}

type Listing = Result<Vec<Entry>, String>;

/// The picker's state.
pub struct Picker {
    /// The folder shown.
    pub folder: PathBuf,
    /// The path box's text.
    pub path_text: String,
    /// The listing, once read.
    pub entries: Listing,
    /// Show every file, not only checkpoints.
    pub show_all: bool,
    job: Option<Job<Listing>>,
    repaint: std::sync::Arc<dyn Fn() + Send + Sync>,
}

fn list(folder: &Path) -> Listing {
    let read = std::fs::read_dir(folder).map_err(|e| format!("{e}: {}", folder.display()))?;
    let mut out: Vec<Entry> = read
        .filter_map(Result::ok)
        .take(50_000)
        .map(|e| {
            let path = e.path();
            let meta = std::fs::metadata(&path).ok();
            Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir: meta.as_ref().is_some_and(std::fs::Metadata::is_dir),
                size: meta.map_or(0, |m| m.len()),
                path,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.is_dir
            .cmp(&a.is_dir)
            .then_with(|| super::model::natural_cmp(&a.name.to_lowercase(), &b.name.to_lowercase()))
    });
    Ok(out)
}

impl Picker {
    /// A picker showing `folder`.
    pub fn new(folder: PathBuf, repaint: impl Fn() + Send + Sync + 'static) -> Self {
        let mut p = Self {
            path_text: folder.display().to_string(),
            folder: folder.clone(),
            entries: Ok(Vec::new()),
            show_all: false,
            job: None,
            repaint: std::sync::Arc::new(repaint),
        };
        p.go(folder);
        p
    }

    /// Lists another folder.
    pub fn go(&mut self, folder: PathBuf) {
        self.path_text = folder.display().to_string();
        self.folder.clone_from(&folder);
        let repaint = std::sync::Arc::clone(&self.repaint);
        self.job = Job::spawn("list-folder", move || repaint(), move |_, _| list(&folder)).ok();
    }

    /// True while a listing is being read.
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Takes a finished listing.
    pub fn poll(&mut self) {
        if let Some(job) = &mut self.job {
            match job.poll() {
                JobState::Running => {}
                JobState::Done(listing) => {
                    self.entries = listing;
                    self.job = None;
                }
                JobState::Panicked(m) => {
                    self.entries = Err(m);
                    self.job = None;
                }
            }
        }
    }
}

fn is_checkpoint(name: &str) -> bool {
    name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")
}

/// Draws the picker window. Returns false when it should close.
pub fn picker_ui(ctx: &egui::Context, picker: &mut Picker, commands: &mut Vec<Command>) -> bool {
    let mut open = true;
    let mut go_to: Option<PathBuf> = None;
    let mut close = false;
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
                let r = ui.add(egui::TextEdit::singleline(&mut picker.path_text).desired_width(360.0));
                if (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter))) || ui.button("Go").clicked() {
                    let p = PathBuf::from(picker.path_text.trim());
                    if p.is_dir() {
                        go_to = Some(p);
                    } else {
                        commands.push(Command::Open(p));
                        close = true;
                    }
                }
            });
            ui.horizontal(|ui| {
                ui.checkbox(&mut picker.show_all, "Show all files");
                if ui
                    .button("Open this folder as a model")
                    .on_hover_text("Opens the shard index or the single .safetensors file in this folder")
                    .clicked()
                {
                    commands.push(Command::Open(picker.folder.clone()));
                    close = true;
                }
            });
            ui.separator();
            if picker.is_busy() {
                ui.spinner();
            }
            match &picker.entries {
                Err(e) => {
                    ui.colored_label(ui.visuals().error_fg_color, e);
                }
                Ok(entries) => {
                    let shown: Vec<&Entry> = entries
                        .iter()
                        .filter(|e| e.is_dir || picker.show_all || is_checkpoint(&e.name))
                        .collect();
                    let row_h = ui.text_style_height(&egui::TextStyle::Body) + 4.0;
                    egui::ScrollArea::vertical().auto_shrink(false).show_rows(ui, row_h, shown.len(), |ui, range| {
                        for e in &shown[range] {
                            let label = if e.is_dir {
                                format!("[folder] {}", super::safe_text(&e.name, 120))
                            } else {
                                format!("{}    {}", super::safe_text(&e.name, 120), super::model::human_bytes(e.size))
                            };
                            let r = ui.selectable_label(false, label);
                            if r.clicked() {
                                if e.is_dir {
                                    go_to = Some(e.path.clone());
                                } else {
                                    commands.push(Command::Open(e.path.clone()));
                                    close = true;
                                }
                            }
                        }
                    });
                }
            }
        });
    if let Some(p) = go_to {
        picker.go(p);
    }
    open && !close
}
