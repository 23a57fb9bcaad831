//! The `.png` export: a tensor's heatmap (pooled by [`crate::stats::heatmap`])
//! turned into pixels, a whole number of pixels per cell, and encoded by
//! [`super::png`] with a comment that says what the image shows.

use super::png;
use super::{ExportError, ExportOptions, PNG_MAX_SIDE, PNG_MIN_PIXELS, PngReport, TensorView};
use crate::jobs::{CancelToken, Progress};
use crate::stats::heatmap::{self, HeatmapError, HeatmapRequest, Pooling};

/// The `.png` file of a tensor's heatmap, enlarged to at least
/// `PNG_MIN_PIXELS` a side, with its description as text chunks.
pub(super) fn png_bytes(
    view: TensorView<'_>,
    opts: &ExportOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<(Vec<u8>, PngReport), ExportError> {
    let (shape, request) = if let Some(req) = &opts.heatmap {
        (view.shape.to_vec(), req.clone())
    } else {
        let shape = match view.shape {
            [] | [_] => view.shape.to_vec(),
            // Saturating: a shape such as [0, 2^40, 2^40] is valid (no
            // elements) and has nothing to draw either way.
            [first, rest @ ..] => vec![*first, rest.iter().fold(1u64, |a, &d| a.saturating_mul(d))],
        };
        let req = HeatmapRequest {
            row_axis: 0,
            col_axis: 1,
            fixed: Vec::new(),
            pooling: Pooling::MaxAbs,
            max_side: PNG_MAX_SIDE,
            order: opts.bit_order,
            window: None,
        };
        (shape, req)
    };
    let map = heatmap::compute(view.dtype, &shape, view.bytes, &request, cancel, progress)?;
    let scale = (PNG_MIN_PIXELS / map.width.max(map.height).max(1)).max(1);
    let cells = map.to_rgb();
    let (width, height) = (map.width * scale, map.height * scale);
    let mut rgb = Vec::with_capacity(width * height * 3);
    for row in cells.chunks(map.width * 3) {
        let mut line = Vec::with_capacity(width * 3);
        for px in row.chunks(3) {
            for _ in 0..scale {
                line.extend_from_slice(px);
            }
        }
        for _ in 0..scale {
            rgb.extend_from_slice(&line);
        }
    }
    let shape_text: Vec<String> = view.shape.iter().map(u64::to_string).collect();
    let range = match (map.min, map.max) {
        (Some(lo), Some(hi)) => format!("{lo:?} .. {hi:?}"),
        _ => "no finite value".into(),
    };
    let comment = format!(
        "{} [{}]; {} x {} elements in {} x {} cells ({} pooling); range {range}; grey = no finite value",
        view.dtype,
        shape_text.join(", "),
        map.rows,
        map.cols,
        map.height,
        map.width,
        match request.pooling {
            Pooling::MaxAbs => "max |x|",
            Pooling::Mean => "mean",
        },
    );
    let png = png::encode_rgb(
        width,
        height,
        &rgb,
        &[
            ("Software", "Tensorscope"),
            ("Title", view.name),
            ("Comment", &comment),
        ],
    )
    .ok_or(ExportError::Heatmap(HeatmapError::Empty))?;
    let report = PngReport {
        width,
        height,
        cells_wide: map.width,
        cells_high: map.height,
        scale,
        rows: map.rows,
        cols: map.cols,
        min: map.min,
        max: map.max,
    };
    Ok((png, report))
}
