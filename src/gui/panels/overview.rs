//! The overview of a checkpoint: what a model page answers first. Its size
//! in parameters and bytes, per dtype as bars; the largest tensors; the
//! scan's NaN/Inf and all-zero counts; the architecture its `config.json`
//! gives and the tensors checked against it; the metadata highlights and
//! the quantization. Every figure was computed when the file opened
//! (`Overview`) or by the scan: drawing is O(dtypes + listed tensors).

use eframe::egui;

use crate::gui::command::Command;
use crate::gui::model::DtypeTotals;
use crate::gui::safe_text;
use crate::gui::state::{SelectMode, Tab, ViewState};
use crate::text::{elide_middle, fmt_shape, human_bytes, human_count};

/// Draws the overview of the tab's checkpoint.
pub fn overview_ui(ui: &mut egui::Ui, tab: &Tab, view: &mut ViewState, out: &mut Vec<Command>) {
    let Some(loaded) = tab.loaded() else {
        return;
    };
    let ck = &loaded.ck;
    let ov = &loaded.overview;
    let (per_dtype, all) = &loaded.totals;
    egui::ScrollArea::vertical()
        .id_salt("overview")
        .auto_shrink(false)
        .show(ui, |ui| {
            // The file's name is on its tab and in the window's title.
            ui.label(
                egui::RichText::new(format!(
                    "{} parameters · {} · {} tensors",
                    human_count(ov.parameters),
                    human_bytes(all.bytes),
                    all.tensors
                ))
                .heading(),
            )
            .on_hover_text(format!("{} parameters, {} bytes", ov.parameters, all.bytes));
            ui.weak(&ov.container);
            unsafe_banner_ui(ui, &ov.unsafe_globals, &ov.findings);
            let packed = ov.parameters != all.parameters;
            if let Some(q) = loaded.quant.as_deref() {
                ui.label(format!(
                    "Quantized: {} · {} weights",
                    q.quant.method(),
                    q.quant.tensors().len()
                ));
            }
            if packed {
                ui.weak(format!(
                    "{} logical parameters; {} values stored (packed codes, scales): the bars below count stored values",
                    human_count(ov.parameters),
                    human_count(all.parameters)
                ));
            }
            ui.add_space(6.0);
            sizes_ui(ui, per_dtype, &ov.schemes, all.bytes, packed);
            section(ui, "Values");
            match tab.tensor.scan.as_ref() {
                Some(scan) => {
                    let s = &scan.summary;
                    let warn = ui.visuals().warn_fg_color;
                    ui.horizontal_wrapped(|ui| {
                        let nan = format!("{} tensors with NaN/Inf", s.non_finite_tensors);
                        if s.non_finite_tensors > 0 {
                            ui.colored_label(warn, nan);
                        } else {
                            ui.label(nan);
                        }
                        ui.label(format!("· {} all-zero", s.all_zero_tensors));
                        if scan.task.is_running() {
                            ui.weak("(scanning…)");
                        }
                    });
                    super::layers::layer_chart_ui(ui, tab, view, out);
                }
                None => {
                    ui.weak("Scan whole file (above) to count the tensors with NaN/Inf, the all-zero ones and the outliers.");
                }
            }
            section(ui, "Largest tensors");
            for &i in &ov.largest {
                let Some((_, info)) = ck.entry(i) else {
                    continue;
                };
                // A quantized weight by its logical name, shape and scheme.
                let logical = loaded.quant.as_deref().and_then(|q| q.logical_at(i));
                let (name, facts) = match logical {
                    Some(lt) => (
                        lt.name(),
                        format!(
                            "{}  {}  {}",
                            lt.label(),
                            fmt_shape(lt.shape()),
                            human_bytes(lt.stored_bytes(ck))
                        ),
                    ),
                    None => (
                        info.name(),
                        format!(
                            "{}  {}  {}",
                            info.dtype().name(),
                            fmt_shape(info.shape()),
                            human_bytes(info.nbytes())
                        ),
                    ),
                };
                ui.horizontal(|ui| {
                    let font = egui::TextStyle::Body.resolve(ui.style());
                    let room = (ui.available_width() - 10.0 - facts.len() as f32 * 7.0).max(80.0);
                    let name = safe_text(name, 300);
                    let shown = ui.ctx().fonts_mut(|f| {
                        elide_middle(&name, room, |c| f.glyph_width(&font, c)).into_owned()
                    });
                    // Read out as what it is, apart from the table's row.
                    let spoken = format!("largest: {name}");
                    let link = ui.link(shown).on_hover_text(name.clone());
                    link.widget_info(|| {
                        egui::WidgetInfo::labeled(egui::Role::Link, true, spoken.clone())
                    });
                    if link.clicked() {
                        out.push(Command::Select {
                            index: i,
                            mode: SelectMode::Replace,
                        });
                        // Chosen to be looked at: its page opens.
                        view.page = crate::gui::state::SidePage::Tensor;
                    }
                    ui.weak(facts);
                });
            }
            section(ui, arch_heading(&ov.container));
            arch_ui(ui, ov.arch.as_ref(), &ov.checks);
            section(ui, "Metadata");
            let shown: Vec<_> = loaded
                .highlights
                .iter()
                .filter_map(|&i| loaded.metadata.get(i))
                .collect();
            if loaded.metadata.is_empty() {
                ui.weak(if !ov.unsafe_globals.is_empty() {
                    "Not read: the pickle is unsafe."
                } else if ov.leaves {
                    "No values beside the tensors."
                } else {
                    "No __metadata__."
                });
            } else {
                egui::Grid::new("overview_meta")
                    .num_columns(2)
                    .spacing([12.0, 3.0])
                    .show(ui, |ui| {
                        for m in &shown {
                            ui.weak(safe_text(&m.key, 48));
                            // A grid cell does not wrap: a long value (a
                            // distributed checkpoint's parameter list) would
                            // widen the panel over the table. The Metadata
                            // page shows it whole.
                            ui.label(safe_text(&m.value, OVERVIEW_VALUE_CHARS));
                            ui.end_row();
                        }
                    });
                let others = loaded.metadata.len() - shown.len();
                if others > 0 {
                    ui.weak(format!("{others} other entries (Metadata page)"));
                }
            }
        });
}

/// The characters of a metadata value the overview shows.
const OVERVIEW_VALUE_CHARS: usize = 72;

fn section(ui: &mut egui::Ui, title: &str) {
    ui.add_space(8.0);
    ui.label(egui::RichText::new(title).strong());
    ui.separator();
}

/// The bytes per dtype and, for a quantized model, per quantized type.
fn sizes_ui(
    ui: &mut egui::Ui,
    per_dtype: &[(crate::dtype::Dtype, DtypeTotals)],
    schemes: &[(String, DtypeTotals)],
    total_bytes: u64,
    packed: bool,
) {
    section(ui, "Per dtype");
    // Packed codes count one value a stored element, not a parameter.
    let unit = if packed { "stored" } else { "params" };
    let dtypes: Vec<(&str, DtypeTotals)> = per_dtype.iter().map(|(d, t)| (d.name(), *t)).collect();
    bars_ui(ui, "overview_dtypes", &dtypes, total_bytes, unit);
    if !schemes.is_empty() {
        // What the stored dtypes above do not say: each quantized type's
        // weights, by their logical parameters.
        section(ui, "Per quantized type");
        let schemes: Vec<(&str, DtypeTotals)> =
            schemes.iter().map(|(l, t)| (l.as_str(), *t)).collect();
        bars_ui(ui, "overview_schemes", &schemes, total_bytes, "params");
    }
}

/// One bar per dtype (or quantized type), its length the share of the
/// bytes; the parameters and bytes beside it, exact on hover.
fn bars_ui(
    ui: &mut egui::Ui,
    id: &str,
    per_dtype: &[(&str, DtypeTotals)],
    total_bytes: u64,
    unit: &str,
) {
    let largest = per_dtype
        .iter()
        .map(|(_, t)| t.bytes)
        .max()
        .unwrap_or(0)
        .max(1);
    let bar_color = ui.visuals().selection.bg_fill;
    egui::Grid::new(id)
        .num_columns(3)
        .spacing([10.0, 3.0])
        .show(ui, |ui| {
            for (name, t) in per_dtype {
                ui.monospace(*name);
                let width = 140.0;
                let (rect, response) =
                    ui.allocate_exact_size(egui::vec2(width, 12.0), egui::Sense::hover());
                let share = t.bytes as f32 / largest as f32;
                let mut bar = rect;
                bar.set_width((width * share).max(1.0));
                ui.painter().rect_filled(bar, 2.0, bar_color);
                let pct = if total_bytes == 0 {
                    0.0
                } else {
                    t.bytes as f64 * 100.0 / total_bytes as f64
                };
                response.on_hover_text(format!(
                    "{name}: {} tensors, {} {unit} values, {} bytes ({pct:.1}%)",
                    t.tensors, t.parameters, t.bytes
                ));
                ui.label(format!(
                    "{} {unit} · {} · {pct:.1}%",
                    human_count(t.parameters),
                    human_bytes(t.bytes)
                ));
                ui.end_row();
            }
        });
}

/// The findings a banner lists; more are counted.
const FINDINGS_SHOWN: usize = 12;

/// What would run code if the checkpoint were loaded by its framework: a
/// pickle's globals outside torch's allowlist (nothing of it ran, and its
/// tensors are not read), and every other finding of `scan` (SCAN.md's
/// rules), each with its file.
pub(super) fn unsafe_banner_ui(
    ui: &mut egui::Ui,
    unsafe_globals: &[String],
    findings: &[(String, crate::scan::Finding)],
) {
    let color = ui.visuals().error_fg_color;
    if !unsafe_globals.is_empty() {
        ui.colored_label(
            color,
            safe_text(
                &format!(
                    "⚠ Unsafe pickle: it would import {} (not executed). Nothing of it was run and its tensors are not read: only torch's weights_only globals are.",
                    unsafe_globals.join(", ")
                ),
                1000,
            ),
        );
    }
    for (file, f) in findings.iter().take(FINDINGS_SHOWN) {
        ui.colored_label(
            color,
            safe_text(&format!("⚠ {file}: {} [{}]", f.message, f.rule.id()), 600),
        )
        .on_hover_text(f.rule.help());
    }
    if findings.len() > FINDINGS_SHOWN {
        ui.colored_label(
            color,
            format!(
                "… and {} more findings (tensorscope scan lists them all)",
                findings.len() - FINDINGS_SHOWN
            ),
        );
    }
}

/// Where the architecture is read from: a GGUF's metadata, else
/// `config.json`.
fn arch_heading(container: &str) -> &'static str {
    if container.starts_with("GGUF") {
        "Architecture (GGUF metadata)"
    } else {
        "Architecture (config.json)"
    }
}

/// The architecture's figures and the checks against the tensors.
fn arch_ui(
    ui: &mut egui::Ui,
    arch: Option<&Result<crate::arch::Architecture, String>>,
    checks: &[crate::arch::Check],
) {
    let a = match arch {
        None => {
            ui.weak("No config.json beside the file.");
            return;
        }
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().warn_fg_color, safe_text(e, 500));
            return;
        }
        Some(Ok(a)) => a,
    };
    let num = |v: Option<u64>| v.map_or_else(|| "—".to_owned(), |v| v.to_string());
    egui::Grid::new("overview_arch")
        .num_columns(2)
        .spacing([12.0, 3.0])
        .show(ui, |ui| {
            let mut row = |k: &str, v: String| {
                ui.weak(k);
                ui.label(safe_text(&v, 300));
                ui.end_row();
            };
            row(
                "model_type",
                a.model_type.clone().unwrap_or_else(|| "—".into()),
            );
            if !a.architectures.is_empty() {
                row("architectures", a.architectures.join(", "));
            }
            row("hidden size", num(a.hidden_size));
            row("layers", num(a.layers));
            row(
                "heads / KV heads",
                format!("{} / {}", num(a.heads), num(a.kv_heads.or(a.heads))),
            );
            if a.intermediate_size.is_some() {
                row("intermediate size", num(a.intermediate_size));
            }
            if a.experts.is_some() {
                row("experts", num(a.experts));
            }
            row("vocabulary", num(a.vocab_size));
            row("context length", num(a.context_length));
            row(
                "tie_word_embeddings",
                a.tie_word_embeddings
                    .map_or_else(|| "—".into(), |t| t.to_string()),
            );
            row(
                "torch_dtype",
                a.torch_dtype.clone().unwrap_or_else(|| "—".into()),
            );
        });
    for c in checks {
        let (mark, color) = if c.ok {
            ("✔", ui.visuals().text_color())
        } else {
            ("⚠", ui.visuals().warn_fg_color)
        };
        ui.colored_label(
            color,
            format!("{mark} {}: {}", c.what, safe_text(&c.detail, 400)),
        );
    }
}
