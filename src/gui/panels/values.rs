//! The paged value grid of a stored tensor (index, raw code, value), and
//! what the quantized weight's grid shares with it: the page size, flat and
//! multi-indices, and the fetch of a remote page into the cache.

use eframe::egui;

use crate::dtype::decode::{BitOrder, code_at, decode_c64, decode_one_f64, format_code_hex};
use crate::dtype::{Dtype, DtypeKind};
use crate::format::{Checkpoint, TensorInfo};
use crate::gui::command::Command;
use crate::gui::state::ViewState;
use crate::text::{fmt_shape, fmt_value};

/// Values per page of the value grid.
pub const PAGE_SIZE: u64 = 256;

/// Splits a flat index into a multi-index of `shape`.
pub(super) fn unravel(mut flat: u64, shape: &[u64]) -> Vec<u64> {
    let mut out = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            out[i] = flat % d;
            flat /= d;
        }
    }
    out
}

/// Parses "123" (flat) or "3, 5" / "[3,5]" (multi-index) into a flat index.
fn parse_index(text: &str, shape: &[u64]) -> Option<u64> {
    let t = text.trim().trim_start_matches('[').trim_end_matches(']');
    let parts: Vec<&str> = t
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() == 1 {
        return parts[0].parse().ok();
    }
    if parts.len() != shape.len() {
        return None;
    }
    let mut flat = 0u64;
    for (p, &d) in parts.iter().zip(shape) {
        let i: u64 = p.parse().ok()?;
        if i >= d {
            return None;
        }
        flat = flat.checked_mul(d)?.checked_add(i)?;
    }
    Some(flat)
}

fn value_text(dtype: Dtype, bytes: &[u8], i: u64, order: BitOrder) -> String {
    match dtype.kind() {
        DtypeKind::Unsigned => {
            code_at(dtype, bytes, i, order).map_or_else(|| "—".into(), |c| c.to_string())
        }
        DtypeKind::Signed => code_at(dtype, bytes, i, order).map_or_else(
            || "—".into(),
            |c| {
                let bits = dtype.bits();
                let v = ((c << (64 - bits)) as i64) >> (64 - bits);
                v.to_string()
            },
        ),
        DtypeKind::Bool => code_at(dtype, bytes, i, order).map_or_else(
            || "—".into(),
            |c| {
                if c != 0 {
                    "true".into()
                } else {
                    "false".into()
                }
            },
        ),
        DtypeKind::Complex => {
            let (mut re, mut im) = ([0f64], [0f64]);
            if decode_c64(bytes, i, &mut re, &mut im) == 1 {
                let sign = if im[0].is_sign_negative() { "-" } else { "+" };
                format!("{} {sign} {}i", fmt_value(re[0]), fmt_value(im[0].abs()))
            } else {
                "—".into()
            }
        }
        DtypeKind::Float => {
            decode_one_f64(dtype, bytes, i, order).map_or_else(|| "—".into(), fmt_value)
        }
    }
}

/// The elements the value grid's page shows.
pub(super) fn page_of(view: &ViewState, n: u64) -> std::ops::Range<u64> {
    let start = view.value_start.min(n.saturating_sub(1));
    start..start.saturating_add(PAGE_SIZE).min(n)
}

/// The shard and the byte range in it of elements `page` of a tensor.
pub(super) fn page_bytes(
    ck: &Checkpoint,
    tref: crate::format::TensorRef,
    info: &TensorInfo,
    page: std::ops::Range<u64>,
) -> Option<(usize, std::ops::Range<u64>)> {
    let shard = ck.shards().get(tref.shard())?;
    let base = shard.file().tensor_range(info).start;
    let bits = u64::from(info.dtype().bits());
    let (b, e) = (
        page.start.checked_mul(bits)? / 8,
        page.end.checked_mul(bits)?.div_ceil(8),
    );
    Some((tref.shard(), base.checked_add(b)?..base.checked_add(e)?))
}

/// A tensor not stored in C order, little-endian, as is (byte-swapped,
/// strided, deflated) is read into scratch space before its grid shows:
/// asks for that once, and shows it running (or why it failed).
pub(super) fn prepare_ui(
    ui: &mut egui::Ui,
    tensor: &crate::gui::state::TensorState,
    t: crate::format::TensorRef,
    out: &mut Vec<Command>,
) {
    if tensor.prepared.wants(&t) {
        out.push(Command::PrepareTensor(t));
    }
    if let Some(Err(f)) = tensor.prepared.outcome(&t) {
        ui.colored_label(ui.visuals().error_fg_color, super::failure_text(f, 400));
        return;
    }
    ui.horizontal(|ui| {
        ui.spinner();
        ui.label(
            "Reading this tensor in C order (it is stored byte-swapped, strided or compressed)…",
        );
    });
    if let Some(f) = tensor
        .prepared
        .progress()
        .filter(|_| tensor.prepared.running_key() == Some(&t))
        .and_then(crate::jobs::Progress::fraction)
    {
        ui.add(
            egui::ProgressBar::new(f)
                .desired_width(220.0)
                .show_percentage(),
        );
    }
}

/// Where a remote page is not in the cache yet: asks for it once, and
/// shows the fetch (or why it failed).
pub(super) fn fetch_page_ui(
    ui: &mut egui::Ui,
    tensor: &crate::gui::state::TensorState,
    shard: usize,
    range: std::ops::Range<u64>,
    out: &mut Vec<Command>,
) {
    let key = (shard, range.start, range.end);
    if tensor.fetch.wants(&key) {
        out.push(Command::FetchBytes(shard, range));
    }
    match tensor.fetch.outcome(&key) {
        Some(Err(f)) => {
            ui.colored_label(ui.visuals().error_fg_color, super::failure_text(f, 400));
        }
        Some(Ok(())) => {
            ui.weak("This page was fetched and has left the cache since (its cap is TENSORSCOPE_CACHE_MAX); reopen the tensor to fetch it again.");
        }
        None => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("Fetching this page from the server…");
            });
        }
    }
}

pub(super) fn values_ui(
    ui: &mut egui::Ui,
    view: &mut ViewState,
    info: &TensorInfo,
    bytes: Option<&[u8]>,
    fetching: impl FnOnce(&mut egui::Ui),
) {
    let n = info.numel();
    if n == 0 {
        ui.weak(format!(
            "This tensor has no elements (shape {}).",
            fmt_shape(info.shape())
        ));
        return;
    }
    let show_code = info.dtype().bits() <= 16
        && matches!(info.dtype().kind(), DtypeKind::Float | DtypeKind::Bool);
    ui.horizontal(|ui| {
        let pages = n.div_ceil(PAGE_SIZE);
        let page = view.value_start / PAGE_SIZE;
        if ui.add_enabled(page > 0, egui::Button::new("⏴")).clicked() {
            view.value_start = view.value_start.saturating_sub(PAGE_SIZE);
        }
        ui.label(format!("page {} of {pages}", page + 1));
        if ui
            .add_enabled(page + 1 < pages, egui::Button::new("⏵"))
            .clicked()
        {
            view.value_start = view.value_start.saturating_add(PAGE_SIZE);
        }
        ui.separator();
        let r = ui.add(
            egui::TextEdit::singleline(&mut view.jump_text)
                .hint_text("index or i, j, …")
                .desired_width(120.0),
        );
        let go = ui.button("Go").clicked()
            || (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
        if go {
            if let Some(i) = parse_index(&view.jump_text, info.shape()).filter(|&i| i < n) {
                view.value_start = i - i % PAGE_SIZE;
            } else {
                view.jump_text = format!("out of range (0..{n})");
            }
        }
    });
    let Some(bytes) = bytes else {
        fetching(ui);
        return;
    };
    let std::ops::Range { start, end } = page_of(view, n);
    let row_h = ui.text_style_height(&egui::TextStyle::Monospace) + 4.0;
    let highlight = parse_index(&view.jump_text, info.shape());
    egui_extras::TableBuilder::new(ui)
        .id_salt("value_grid")
        .striped(true)
        .column(egui_extras::Column::initial(150.0).at_least(60.0))
        .column(egui_extras::Column::initial(80.0).at_least(40.0))
        .column(egui_extras::Column::remainder().at_least(80.0))
        .header(row_h, |mut h| {
            h.col(|ui| {
                ui.strong("index");
            });
            h.col(|ui| {
                ui.strong(if show_code { "code" } else { "" });
            });
            h.col(|ui| {
                ui.strong("value");
            });
        })
        .body(|body| {
            body.rows(row_h, (end - start) as usize, |mut row| {
                let i = start + row.index() as u64;
                row.set_selected(highlight == Some(i));
                row.col(|ui| {
                    let idx = if info.shape().len() > 1 {
                        fmt_shape(&unravel(i, info.shape()))
                    } else {
                        i.to_string()
                    };
                    ui.monospace(idx);
                });
                row.col(|ui| {
                    if show_code && let Some(c) = code_at(info.dtype(), bytes, i, view.f6_order) {
                        ui.monospace(format_code_hex(info.dtype(), c));
                    }
                });
                row.col(|ui| {
                    ui.monospace(value_text(info.dtype(), bytes, i, view.f6_order));
                });
            });
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices() {
        assert_eq!(unravel(7, &[2, 4]), [1, 3]);
        assert_eq!(parse_index("7", &[2, 4]), Some(7));
        assert_eq!(parse_index("[1, 3]", &[2, 4]), Some(7));
        assert_eq!(parse_index("1,4", &[2, 4]), None);
        assert_eq!(parse_index("x", &[2, 4]), None);
    }

    #[test]
    fn signed_values_are_exact() {
        let b = i64::MIN.to_le_bytes();
        assert_eq!(
            value_text(Dtype::I64, &b, 0, BitOrder::LsbFirst),
            i64::MIN.to_string()
        );
        let b = [0xFFu8];
        assert_eq!(value_text(Dtype::I8, &b, 0, BitOrder::LsbFirst), "-1");
        let b = u64::MAX.to_le_bytes();
        assert_eq!(
            value_text(Dtype::U64, &b, 0, BitOrder::LsbFirst),
            u64::MAX.to_string()
        );
    }
}
