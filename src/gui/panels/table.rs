//! The tensor table: filter box, dtype filter, sortable columns, flat or
//! tree view, multi-selection and keyboard navigation. Virtualised with
//! `TableBody::rows`, so 100,000 rows cost what the visible ones cost.

use eframe::egui;
use egui_extras::{Column as TableColumn, TableBuilder};

use crate::dtype::Dtype;
use crate::gui::command::Command;
use crate::gui::model::{Column, Direction, TreeRow};
use crate::gui::safe_text;
use crate::gui::state::{SelectMode, Tab};
use crate::text::{fmt_shape, fmt_value, human_bytes};

/// Draws the filter row and the table.
pub fn table_panel_ui(ui: &mut egui::Ui, tab: &mut Tab, tree_view: bool, out: &mut Vec<Command>) {
    if tab.loaded().is_none() {
        return;
    }
    filter_row_ui(ui, tab, tree_view, out);
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

    let modifiers = ui.input(|i| i.modifiers);
    let sharded = ck.is_sharded();
    let scan = tab.tensor.scan.as_ref().map(|s| s.figures.as_slice());
    let scanned = scan.is_some();
    let row_height = ui.text_style_height(&egui::TextStyle::Body) + 6.0;
    let mut columns: Vec<(Column, &str)> = vec![
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
        ]);
    }
    columns.push((Column::Offsets, "Offsets"));
    if sharded {
        columns.push((Column::Shard, "Shard"));
    }
    let mut clicked_header: Option<Column> = None;
    let mut clicked: Option<(usize, SelectMode)> = None;
    let mut toggle_group: Option<String> = None;
    egui::ScrollArea::horizontal()
        .id_salt("table_hscroll")
        .show(ui, |ui| {
            let mut builder = TableBuilder::new(ui)
                .id_salt("tensor_table")
                .striped(true)
                .resizable(true)
                .sense(egui::Sense::click())
                .cell_layout(egui::Layout::left_to_right(egui::Align::Center))
                .column(TableColumn::initial(220.0).at_least(120.0).clip(true));
            for (c, _) in &columns[1..] {
                let w = match c {
                    Column::Dtype | Column::Shape => 90.0,
                    Column::Elements => 76.0,
                    Column::Bytes => 72.0,
                    Column::Offsets => 130.0,
                    Column::Shard => 180.0,
                    _ => 74.0,
                };
                builder = builder.column(TableColumn::initial(w).at_least(40.0).clip(true));
            }
            if let Some(row) = tab.view.scroll_to.take() {
                builder = builder.scroll_to_row(row, None);
            }
            let sort = tab.table.sort;
            let table = builder.header(row_height + 2.0, |mut header| {
                for (c, title) in &columns {
                    header.col(|ui| {
                        let marker = match sort {
                            Some((s, Direction::Ascending)) if s == *c => " ⏶",
                            Some((s, Direction::Descending)) if s == *c => " ⏷",
                            _ => "",
                        };
                        let r = ui.add(
                            egui::Button::new(
                                egui::RichText::new(format!("{title}{marker}")).strong(),
                            )
                            .frame(false),
                        );
                        if r.on_hover_text("Sort by this column; click again to reverse")
                            .clicked()
                        {
                            clicked_header = Some(*c);
                        }
                    });
                }
            });

            let tree_mode = tree_view;
            let count = if tree_mode {
                tab.table.tree.len()
            } else {
                tab.table.rows.len()
            };
            table.body(|body| {
                body.rows(row_height, count, |mut row| {
                    let pos = row.index();
                    let (index, depth, group) = if tree_mode {
                        match tab.table.tree.get(pos) {
                            Some(TreeRow::Tensor { index, depth }) => (Some(*index), *depth, None),
                            Some(TreeRow::Group {
                                prefix,
                                depth,
                                count,
                                bytes,
                                expanded,
                            }) => (
                                None,
                                *depth,
                                Some((prefix.clone(), *count, *bytes, *expanded)),
                            ),
                            None => return,
                        }
                    } else {
                        (tab.table.rows.get(pos).copied(), 0, None)
                    };
                    if let Some((prefix, count, bytes, expanded)) = group {
                        row.col(|ui| {
                            ui.add_space(depth as f32 * 14.0);
                            let arrow = if expanded { "⏷" } else { "⏵" };
                            let last = prefix.rsplit('.').next().unwrap_or(&prefix);
                            ui.label(
                                egui::RichText::new(format!("{arrow} {}", safe_text(last, 200)))
                                    .strong(),
                            );
                            ui.weak(format!("({count})"));
                        });
                        row.col(|_| {});
                        row.col(|_| {});
                        row.col(|_| {});
                        row.col(|ui| {
                            ui.label(human_bytes(bytes));
                        });
                        for _ in 5..columns.len() {
                            row.col(|_| {});
                        }
                        if row.response().clicked() {
                            toggle_group = Some(prefix);
                        }
                        return;
                    }
                    let Some(index) = index else {
                        return;
                    };
                    let Some(info) = ck.tensors.get(index).and_then(|t| ck.info(*t)) else {
                        return;
                    };
                    row.set_selected(tab.table.selection.contains(&index));
                    let scan = scan.and_then(|s| s.get(index).copied().flatten());
                    row.col(|ui| {
                        ui.add_space(depth as f32 * 14.0);
                        let shown = if tree_mode {
                            info.name.rsplit('.').next().unwrap_or(&info.name)
                        } else {
                            &info.name
                        };
                        ui.add(
                            egui::Label::new(safe_text(shown, 300))
                                .truncate()
                                .selectable(false),
                        )
                        .on_hover_text(safe_text(&info.name, 2000));
                    });
                    row.col(|ui| {
                        ui.monospace(info.dtype.name());
                    });
                    row.col(|ui| {
                        ui.add(
                            egui::Label::new(fmt_shape(&info.shape))
                                .truncate()
                                .selectable(false),
                        );
                    });
                    row.col(|ui| {
                        ui.label(info.numel.to_string());
                    });
                    row.col(|ui| {
                        ui.label(human_bytes(info.nbytes))
                            .on_hover_text(format!("{} bytes", info.nbytes));
                    });
                    if scanned {
                        let opt = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), fmt_value);
                        let s = scan.unwrap_or_default();
                        row.col(|ui| {
                            ui.label(if scan.is_some() {
                                opt(s.min)
                            } else {
                                "…".into()
                            });
                        });
                        row.col(|ui| {
                            ui.label(if scan.is_some() {
                                opt(s.max)
                            } else {
                                "…".into()
                            });
                        });
                        row.col(|ui| {
                            ui.label(if scan.is_some() {
                                opt(s.std)
                            } else {
                                "…".into()
                            });
                        });
                        row.col(|ui| {
                            if s.non_finite > 0 {
                                ui.colored_label(
                                    ui.visuals().warn_fg_color,
                                    s.non_finite.to_string(),
                                );
                            } else {
                                ui.label(if scan.is_some() { "0" } else { "…" });
                            }
                        });
                    }
                    row.col(|ui| {
                        ui.label(format!(
                            "{}..{}",
                            info.data_offsets[0], info.data_offsets[1]
                        ));
                    });
                    if sharded {
                        row.col(|ui| {
                            let shard = ck
                                .tensors
                                .get(index)
                                .and_then(|t| ck.shards.get(t.shard))
                                .map_or("", |s| s.name.as_str());
                            ui.add(
                                egui::Label::new(safe_text(shard, 200))
                                    .truncate()
                                    .selectable(false),
                            );
                        });
                    }
                    if row.response().clicked() {
                        let mode = if modifiers.shift {
                            SelectMode::Range
                        } else if modifiers.command {
                            SelectMode::Toggle
                        } else {
                            SelectMode::Replace
                        };
                        clicked = Some((index, mode));
                    }
                });
            });
        });

    if let Some(c) = clicked_header {
        out.push(Command::SortBy(c));
    }
    if let Some((index, mode)) = clicked {
        out.push(Command::Select { index, mode });
    }
    if let Some(prefix) = toggle_group {
        out.push(Command::ToggleGroup(prefix));
    }
}

fn filter_row_ui(ui: &mut egui::Ui, tab: &mut Tab, tree_view: bool, out: &mut Vec<Command>) {
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
        if std::mem::take(&mut tab.view.focus_filter) {
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
