//! The tensor table: filter box, dtype filter, sortable columns, flat or
//! tree view, multi-selection and keyboard navigation. Virtualised with
//! `TableBody::rows`, so 100,000 rows cost what the visible ones cost.

use eframe::egui;
use egui_extras::{Column as TableColumn, TableBuilder};

use crate::dtype::Dtype;
use crate::format::Checkpoint;
use crate::gui::command::Command;
use crate::gui::model::{Column, Direction, KindFilter, Pattern, QuantRows, ScanFigures, TreeRow};
use crate::gui::safe_text;
use crate::gui::state::{SelectMode, Tab, TableState, ViewState};
use crate::text::{elide_middle, fmt_opt, fmt_shape, human_bytes, human_count};

/// Above the table: what would run code if the checkpoint were loaded (an
/// unsafe pickle's table is empty: why), and that nothing ran.
fn banner_ui(ui: &mut egui::Ui, tab: &Tab) {
    if let Some(l) = tab.load.value()
        && !(l.overview.unsafe_globals.is_empty() && l.overview.findings.is_empty())
    {
        egui::Frame::new()
            .stroke(egui::Stroke::new(1.0, ui.visuals().error_fg_color))
            .inner_margin(6.0)
            .corner_radius(4.0)
            .show(ui, |ui| {
                super::overview::unsafe_banner_ui(
                    ui,
                    &l.overview.unsafe_globals,
                    &l.overview.findings,
                );
            });
        ui.add_space(4.0);
    }
}

/// Draws the filter row and the table.
pub fn table_panel_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    tree_view: bool,
    out: &mut Vec<Command>,
) {
    if tab.loaded().is_none() {
        return;
    }
    banner_ui(ui, tab);
    filter_row_ui(ui, tab, view, tree_view, out);
    let Some(loaded) = tab.load.value() else {
        return;
    };
    let ck = &loaded.ck;
    // Clicks on a cell's text must reach the row (selection), not select text.
    ui.style_mut().interaction.selectable_labels = false;

    if !ui.ctx().egui_wants_keyboard_input() {
        let (up, down) = ui.input(|i| {
            (
                i.key_pressed(egui::Key::ArrowUp),
                i.key_pressed(egui::Key::ArrowDown),
            )
        });
        if up {
            out.push(Command::MoveCursor(-1));
        }
        if down {
            out.push(Command::MoveCursor(1));
        }
    }

    let cells = Cells {
        ck,
        quant: tab.load.value().and_then(|l| l.quant.as_deref()),
        scan: tab.tensor.scan.as_ref().map(|s| s.figures.as_slice()),
        tree_mode: tree_view,
        modifiers: ui.input(|i| i.modifiers),
    };
    let columns = columns(cells.scan.is_some(), ck.is_sharded());
    let row_height = ui.text_style_height(&egui::TextStyle::Body) + 6.0;
    let table = &tab.table;
    let scroll_to = view.scroll_to.take();
    // The Name column starts with the width the other columns leave (at
    // least 220 points); columns that do not fit scroll sideways, with a
    // bar that is always drawn.
    let label_chars = cells.quant.map_or(0, |q| q.label_chars);
    let widths: Vec<f32> = columns[1..]
        .iter()
        .map(|(c, _)| match c {
            Column::Dtype => (label_chars as f32 * 7.5 + 12.0).clamp(initial_width(*c), 200.0),
            c => initial_width(*c),
        })
        .collect();
    let spacing = ui.spacing().item_spacing.x;
    let others: f32 = widths.iter().map(|w| w + spacing).sum();
    // The Name column keeps room for the names (up to 480 points) when the
    // scan's columns appear: those scroll sideways instead.
    let longest = tab.load.value().map_or(0, |l| l.overview.longest_name);
    let readable = (longest as f32 * 7.2 + 24.0).clamp(220.0, 480.0);
    let name_width = (ui.available_width() - others - 16.0).max(readable);
    ui.spacing_mut().scroll = egui::style::ScrollStyle::solid();
    egui::ScrollArea::horizontal()
        .id_salt("table_hscroll")
        .scroll_bar_visibility(egui::scroll_area::ScrollBarVisibility::AlwaysVisible)
        .show(ui, |ui| {
            let mut builder = TableBuilder::new(ui)
                .id_salt(("tensor_table", columns.len()))
                .striped(true)
                .resizable(true)
                .sense(egui::Sense::click())
                .cell_layout(egui::Layout::left_to_right(egui::Align::Center))
                .column(TableColumn::initial(name_width).at_least(120.0).clip(true));
            // A scheme's name ("GPTQ int4 g128 act-order") can be longer
            // than a dtype's: the column fits the longest.
            for &width in &widths {
                builder = builder.column(TableColumn::initial(width).at_least(40.0).clip(true));
            }
            if let Some(row) = scroll_to {
                builder = builder.scroll_to_row(row, None);
            }
            let count = if cells.tree_mode {
                table.tree.len()
            } else {
                table.rows.len()
            };
            builder
                .header(row_height + 2.0, |header| {
                    header_ui(header, &columns, table.sort, out);
                })
                .body(|body| {
                    body.rows(row_height, count, |mut row| {
                        let pos = row.index();
                        if cells.tree_mode {
                            match table.tree.get(pos) {
                                Some(TreeRow::Tensor { index, depth }) => {
                                    cells.tensor_row_ui(&mut row, table, *index, *depth, out);
                                }
                                Some(TreeRow::Group {
                                    prefix,
                                    depth,
                                    count,
                                    bytes,
                                    expanded,
                                }) => {
                                    let group = Group {
                                        prefix,
                                        depth: *depth,
                                        count: *count,
                                        bytes: *bytes,
                                        expanded: *expanded,
                                    };
                                    group_row_ui(&mut row, &group, columns.len(), out);
                                }
                                Some(TreeRow::Pattern(p)) => {
                                    pattern_row_ui(&mut row, p, columns.len(), out);
                                }
                                Some(TreeRow::Role {
                                    role,
                                    dtype,
                                    shape,
                                    layers,
                                    example,
                                    depth,
                                }) => {
                                    let r = RoleRow {
                                        role,
                                        dtype,
                                        shape,
                                        layers: *layers,
                                        depth: *depth,
                                    };
                                    role_row_ui(&mut row, &r, columns.len());
                                    cells.select_on_click(&row, *example, out);
                                }
                                Some(TreeRow::Odd {
                                    text,
                                    tensor,
                                    depth,
                                }) => {
                                    odd_row_ui(&mut row, text, *depth, columns.len());
                                    if let Some(i) = tensor {
                                        cells.select_on_click(&row, *i, out);
                                    }
                                }
                                None => {}
                            }
                        } else if let Some(&index) = table.rows.get(pos) {
                            cells.tensor_row_ui(&mut row, table, index, 0, out);
                        }
                    });
                });
        });
}

/// The columns shown: the scan's only after a scan, Shard only when sharded.
fn columns(scanned: bool, sharded: bool) -> Vec<(Column, &'static str)> {
    let mut columns = vec![
        (Column::Name, "Name"),
        (Column::Dtype, "Dtype"),
        (Column::Shape, "Shape"),
        (Column::Elements, "Elements"),
        (Column::Bytes, "Bytes"),
    ];
    if scanned {
        columns.extend([
            (Column::Min, "Min"),
            (Column::Max, "Max"),
            (Column::Std, "Std"),
            (Column::NonFinite, "NaN/Inf"),
            (Column::Outliers, ">6σ"),
            (Column::MaxOverStd, "max|x|/σ"),
        ]);
    }
    columns.push((Column::Offsets, "Offsets"));
    if sharded {
        columns.push((Column::Shard, "Shard"));
    }
    columns
}

/// A column's width before the user resizes it, in points.
fn initial_width(column: Column) -> f32 {
    match column {
        Column::Dtype | Column::Shape => 90.0,
        Column::Elements => 76.0,
        Column::Bytes => 72.0,
        Column::Offsets => 130.0,
        Column::Shard => 180.0,
        _ => 74.0,
    }
}

/// The header: a sort button per column, with the arrow of the sort.
fn header_ui(
    mut header: egui_extras::TableRow<'_, '_>,
    columns: &[(Column, &str)],
    sort: Option<(Column, Direction)>,
    out: &mut Vec<Command>,
) {
    for (c, title) in columns {
        header.col(|ui| {
            let marker = match sort {
                Some((s, Direction::Ascending)) if s == *c => " ⏶",
                Some((s, Direction::Descending)) if s == *c => " ⏷",
                _ => "",
            };
            let r = ui.add(
                egui::Button::new(egui::RichText::new(format!("{title}{marker}")).strong())
                    .frame(false),
            );
            if r.on_hover_text("Sort by this column; click again to reverse")
                .clicked()
            {
                out.push(Command::SortBy(*c));
            }
        });
    }
}

/// A group line of the tree view.
struct Group<'a> {
    prefix: &'a str,
    depth: usize,
    count: usize,
    bytes: u64,
    expanded: bool,
}

/// A group line: its last name part with an arrow, its tensor count and
/// bytes; a click opens or closes it.
fn group_row_ui(
    row: &mut egui_extras::TableRow<'_, '_>,
    g: &Group<'_>,
    columns: usize,
    out: &mut Vec<Command>,
) {
    row.col(|ui| {
        ui.add_space(g.depth as f32 * 14.0);
        let arrow = if g.expanded { "⏷" } else { "⏵" };
        let last = g.prefix.rsplit('.').next().unwrap_or(g.prefix);
        ui.label(egui::RichText::new(format!("{arrow} {}", safe_text(last, 200))).strong());
        ui.weak(format!("({})", g.count));
    });
    row.col(|_| {});
    row.col(|_| {});
    row.col(|_| {});
    row.col(|ui| {
        ui.label(human_bytes(g.bytes));
    });
    for _ in 5..columns {
        row.col(|_| {});
    }
    if row.response().clicked() {
        out.push(Command::ToggleGroup(g.prefix.to_owned()));
    }
}

/// A pattern line: the numbered layers folded (`layers.[0-31]`), how many
/// tensors each has, their parameters and bytes, and how many differ; a
/// click shows the template, the odd layers and the layers.
fn pattern_row_ui(
    row: &mut egui_extras::TableRow<'_, '_>,
    p: &Pattern,
    columns: usize,
    out: &mut Vec<Command>,
) {
    row.col(|ui| {
        ui.add_space(p.depth as f32 * 14.0);
        let arrow = if p.expanded { "⏷" } else { "⏵" };
        let title = p.title();
        let last = title
            .strip_prefix(&p.prefix)
            .map_or(title.as_str(), |rest| rest.trim_start_matches('.'));
        let parent = p.prefix.rsplit('.').next().unwrap_or(&p.prefix);
        ui.label(
            egui::RichText::new(format!("{arrow} {}.{last}", safe_text(parent, 200))).strong(),
        )
        .on_hover_text(safe_text(&title, 400));
        ui.weak(format!("{} × {} tensors", p.layers, p.roles));
        if p.odd_layers > 0 {
            let text = if p.odd_layers == 1 {
                "1 layer differs".to_owned()
            } else {
                format!("{} layers differ", p.odd_layers)
            };
            ui.colored_label(ui.visuals().warn_fg_color, text);
        }
    });
    row.col(|_| {});
    row.col(|_| {});
    row.col(|ui| {
        ui.label(human_count(p.parameters)).on_hover_text(format!(
            "{} parameters in {} tensors",
            p.parameters, p.tensors
        ));
    });
    row.col(|ui| {
        ui.label(human_bytes(p.bytes));
    });
    for _ in 5..columns {
        row.col(|_| {});
    }
    if row.response().clicked() {
        out.push(Command::ToggleGroup(Pattern::key(&p.prefix)));
    }
}

/// A role of a pattern's template, as its fields.
struct RoleRow<'a> {
    role: &'a str,
    dtype: &'a str,
    shape: &'a [u64],
    layers: usize,
    depth: usize,
}

/// A role of the per-layer template: its name, dtype and shape; a click
/// selects it in the first layer.
fn role_row_ui(row: &mut egui_extras::TableRow<'_, '_>, r: &RoleRow<'_>, columns: usize) {
    row.col(|ui| {
        ui.add_space(r.depth as f32 * 14.0);
        ui.weak("template");
        ui.add(
            egui::Label::new(safe_text(r.role, 300))
                .truncate()
                .selectable(false),
        )
        .on_hover_text(format!(
            "{} (in {} layers)",
            safe_text(r.role, 300),
            r.layers
        ));
    });
    row.col(|ui| {
        ui.monospace(safe_text(r.dtype, 100));
    });
    row.col(|ui| {
        ui.label(fmt_shape(r.shape));
    });
    row.col(|ui| {
        ui.label(r.shape.iter().product::<u64>().to_string());
    });
    for _ in 4..columns {
        row.col(|_| {});
    }
}

/// A layer that departs from the template, highlighted.
fn odd_row_ui(row: &mut egui_extras::TableRow<'_, '_>, text: &str, depth: usize, columns: usize) {
    row.col(|ui| {
        ui.add_space(depth as f32 * 14.0);
        let warn = ui.visuals().warn_fg_color;
        ui.add(
            egui::Label::new(
                egui::RichText::new(format!("⚠ {}", safe_text(text, 400))).color(warn),
            )
            .truncate()
            .selectable(false),
        )
        .on_hover_text(safe_text(text, 400));
    });
    for _ in 1..columns {
        row.col(|_| {});
    }
}

/// What every tensor row reads.
struct Cells<'a> {
    ck: &'a Checkpoint,
    /// The quantized weights: a logical tensor's row shows its facts.
    quant: Option<&'a QuantRows>,
    /// Scan figures per tensor, once a scan started.
    scan: Option<&'a [Option<ScanFigures>]>,
    /// Rows show the last part of the name under their group.
    tree_mode: bool,
    /// Held while clicking: Ctrl toggles, Shift selects a range.
    modifiers: egui::Modifiers,
}

impl Cells<'_> {
    fn tensor_row_ui(
        &self,
        row: &mut egui_extras::TableRow<'_, '_>,
        table: &TableState,
        index: usize,
        depth: usize,
        out: &mut Vec<Command>,
    ) {
        let ck = self.ck;
        let Some((tref, info)) = ck.entry(index) else {
            return;
        };
        row.set_selected(table.selection.contains(&index));
        if let Some(lt) = self.quant.and_then(|q| q.logical_at(index)) {
            self.logical_row_ui(row, index, depth, lt, out);
            return;
        }
        self.name_cell_ui(row, info.name(), depth, &safe_text(info.name(), 2000));
        row.col(|ui| {
            ui.monospace(info.dtype().name());
        });
        row.col(|ui| {
            ui.add(
                egui::Label::new(fmt_shape(info.shape()))
                    .truncate()
                    .selectable(false),
            );
        });
        row.col(|ui| {
            ui.label(info.numel().to_string());
        });
        row.col(|ui| {
            ui.label(human_bytes(info.nbytes()))
                .on_hover_text(format!("{} bytes", info.nbytes()));
        });
        if let Some(scan) = self.scan {
            scan_cells_ui(row, scan.get(index).copied().flatten());
        }
        row.col(|ui| {
            // Offsets in the data section (safetensors), else the data's
            // bytes in the file when stored as is.
            if ck.container().has_data_section() {
                ui.label(format!(
                    "{}..{}",
                    info.data_offsets()[0],
                    info.data_offsets()[1]
                ));
            } else {
                match (ck.file_range(tref), ck.other_file_of(tref)) {
                    (Some(r), Some(file)) => ui.add(
                        egui::Label::new(safe_text(
                            &format!("{file} @{}..{}", r.start, r.end),
                            200,
                        ))
                        .truncate(),
                    ),
                    (Some(r), None) => ui.label(format!("@{}..{}", r.start, r.end)),
                    (None, _) => ui.weak(ck.encoding_label(tref).unwrap_or("elsewhere")),
                };
            }
        });
        if ck.is_sharded() {
            row.col(|ui| {
                let shard = ck.shards().get(tref.shard()).map_or("", |s| s.name());
                ui.add(
                    egui::Label::new(safe_text(shard, 200))
                        .truncate()
                        .selectable(false),
                );
            });
        }
        self.select_on_click(row, index, out);
    }
}

impl Cells<'_> {
    /// The name cell: indented under its group, the last part in the tree,
    /// `hover` on hover.
    fn name_cell_ui(
        &self,
        row: &mut egui_extras::TableRow<'_, '_>,
        name: &str,
        depth: usize,
        hover: &str,
    ) {
        row.col(|ui| {
            ui.add_space(depth as f32 * 14.0);
            let shown = if self.tree_mode {
                name.rsplit('.').next().unwrap_or(name)
            } else {
                name
            };
            let full = safe_text(shown, 300);
            // Elided in the middle, so the layer number and the role both
            // stay in view; the whole name on hover.
            let font = egui::TextStyle::Body.resolve(ui.style());
            let room = ui.available_width() - 2.0;
            let text = ui
                .ctx()
                .fonts_mut(|f| elide_middle(&full, room, |c| f.glyph_width(&font, c)).into_owned());
            // Screen readers (and the UI tests) get the whole name.
            ui.add(egui::Label::new(text).truncate().selectable(false))
                .on_hover_text(hover)
                .widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, full.clone()));
        });
    }

    /// A click selects the row: Shift a range, Ctrl toggles.
    fn select_on_click(
        &self,
        row: &egui_extras::TableRow<'_, '_>,
        index: usize,
        out: &mut Vec<Command>,
    ) {
        if row.response().clicked() {
            let mode = if self.modifiers.shift {
                SelectMode::Range
            } else if self.modifiers.command {
                SelectMode::Toggle
            } else {
                SelectMode::Replace
            };
            out.push(Command::Select { index, mode });
        }
    }

    /// The row of a quantized weight: its logical name, scheme, logical
    /// shape and the bytes of its parts; the parts on hover.
    fn logical_row_ui(
        &self,
        row: &mut egui_extras::TableRow<'_, '_>,
        index: usize,
        depth: usize,
        lt: &crate::quant::LogicalTensor,
        out: &mut Vec<Command>,
    ) {
        let ck = self.ck;
        let parts = lt
            .parts()
            .iter()
            .map(|(role, t)| {
                let name = ck.info(*t).map_or("", |i| i.name());
                format!("{role}: {}", safe_text(name, 300))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let hover = format!(
            "{}\n{} parts:\n{parts}",
            safe_text(lt.name(), 2000),
            lt.parts().len()
        );
        self.name_cell_ui(row, lt.name(), depth, &hover);
        row.col(|ui| {
            let text = egui::RichText::new(safe_text(lt.label(), 100)).monospace();
            let text = match lt.status() {
                crate::quant::Status::Decoded => text.color(ui.visuals().hyperlink_color),
                _ => text.color(ui.visuals().warn_fg_color),
            };
            ui.add(egui::Label::new(text).truncate().selectable(false))
                .on_hover_text(match lt.status() {
                    crate::quant::Status::Decoded => format!("quantized: {}", lt.label()),
                    s => format!("{s}: {}", safe_text(lt.message(), 2000)),
                });
        });
        row.col(|ui| {
            ui.add(
                egui::Label::new(fmt_shape(lt.shape()))
                    .truncate()
                    .selectable(false),
            );
        });
        row.col(|ui| {
            ui.label(lt.numel().to_string());
        });
        let bytes = lt.stored_bytes(ck);
        row.col(|ui| {
            ui.label(human_bytes(bytes))
                .on_hover_text(format!("{bytes} bytes in {} parts", lt.parts().len()));
        });
        if let Some(scan) = self.scan {
            // The scan gives a decoded weight the figures of its values;
            // an undecoded one has none (its parts hold packed codes).
            if lt.status() == crate::quant::Status::Decoded {
                scan_cells_ui(row, scan.get(index).copied().flatten());
            } else {
                for _ in 0..4 {
                    row.col(|ui| {
                        ui.weak("—")
                            .on_hover_text("Not decoded: its parts hold packed codes");
                    });
                }
            }
        }
        // One part (a GGUF's blocks): its place, as a stored tensor's.
        let one = match lt.parts() {
            [(_, t)] => ck.info(*t).map(|i| (*t, i.data_offsets())),
            _ => None,
        };
        row.col(|ui| match one {
            Some((_, [b, e])) if ck.container().has_data_section() => {
                ui.label(format!("{b}..{e}"));
            }
            _ => {
                ui.weak(format!("{} parts", lt.parts().len()));
            }
        });
        if ck.is_sharded() {
            row.col(|ui| {
                if let Some(shard) = one.and_then(|(t, _)| ck.shards().get(t.shard())) {
                    ui.add(
                        egui::Label::new(safe_text(shard.name(), 200))
                            .truncate()
                            .selectable(false),
                    );
                }
            });
        }
        self.select_on_click(row, index, out);
    }
}

/// Min, Max, Std, NaN/Inf, values beyond 6σ and max|x|/σ of a row: `…`
/// until the scan reaches it.
fn scan_cells_ui(row: &mut egui_extras::TableRow<'_, '_>, figures: Option<ScanFigures>) {
    let text = |v: Option<f64>| match figures {
        None => "…".to_owned(),
        Some(_) => fmt_opt(v),
    };
    let s = figures.unwrap_or_default();
    for v in [s.min, s.max, s.std] {
        row.col(|ui| {
            ui.label(text(v));
        });
    }
    row.col(|ui| {
        if s.non_finite > 0 {
            ui.colored_label(ui.visuals().warn_fg_color, s.non_finite.to_string());
        } else {
            ui.label(if figures.is_some() { "0" } else { "…" });
        }
    });
    row.col(|ui| {
        ui.label(match (figures, s.outliers) {
            (None, _) => "…".to_owned(),
            (Some(_), Some(n)) => n.to_string(),
            (Some(_), None) => "—".to_owned(),
        });
    });
    row.col(|ui| {
        ui.label(text(s.max_abs_over_std));
    });
}

fn filter_row_ui(
    ui: &mut egui::Ui,
    tab: &Tab,
    view: &mut ViewState,
    tree_view: bool,
    out: &mut Vec<Command>,
) {
    let present = tab
        .load
        .value()
        .map(|l| l.totals.0.iter().map(|(d, _)| *d).collect::<Vec<Dtype>>())
        .unwrap_or_default();
    let table = &tab.table;
    ui.horizontal(|ui| {
        let mut text = table.filter_text.clone();
        let r = ui.add(
            egui::TextEdit::singleline(&mut text)
                .hint_text("Filter names (substring, or /regex)")
                .desired_width(280.0)
                .id(egui::Id::unique("tensor_filter")),
        );
        if std::mem::take(&mut view.focus_filter) {
            r.request_focus();
        }
        if r.changed() {
            out.push(Command::SetFilter(text));
        }
        let label = table.dtype.map_or("All dtypes", Dtype::name);
        egui::ComboBox::from_id_salt("dtype_filter")
            .selected_text(label)
            .show_ui(ui, |ui| {
                if ui
                    .selectable_label(table.dtype.is_none(), "All dtypes")
                    .clicked()
                {
                    out.push(Command::SetDtypeFilter(None));
                }
                for d in &present {
                    if ui
                        .selectable_label(table.dtype == Some(*d), d.name())
                        .clicked()
                    {
                        out.push(Command::SetDtypeFilter(Some(*d)));
                    }
                }
            });
        if tab.loaded().is_some_and(|l| l.quant.is_some()) {
            let kinds = [
                (KindFilter::All, "Quantized and plain"),
                (KindFilter::Quantized, "Quantized only"),
                (KindFilter::Plain, "Plain only"),
            ];
            let shown: &str = kinds
                .iter()
                .find(|(k, _)| *k == table.kind)
                .map_or("Quantized and plain", |(_, l)| *l);
            egui::ComboBox::from_id_salt("kind_filter")
                .selected_text(shown)
                .show_ui(ui, |ui| {
                    for (k, label) in kinds {
                        if ui.selectable_label(table.kind == k, label).clicked() {
                            out.push(Command::SetKindFilter(k));
                        }
                    }
                });
        }
        let mut tree = tree_view;
        if ui
            .checkbox(&mut tree, "Tree")
            .on_hover_text("Group names by dotted prefix")
            .changed()
        {
            out.push(Command::SetTreeView(tree));
        }
        if table.sort.is_some() && ui.button("File order").clicked() {
            out.push(Command::FileOrder);
        }
        match &table.filter {
            Err(e) => {
                ui.colored_label(ui.visuals().error_fg_color, e);
            }
            Ok(_) => {
                ui.weak(format!("{} shown", table.rows.len()));
            }
        }
    });
}
