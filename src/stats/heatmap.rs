//! Downsampled 2-D views of tensors for the heatmap: choose two axes of an
//! N-D tensor, fix the others, and pool blocks of elements into at most
//! `max_side × max_side` cells by max-|x| or mean.

use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, decode_c64, decode_f64};
use crate::jobs::{CancelToken, Cancelled, Progress};

/// How a block of elements becomes one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pooling {
    /// The element of largest magnitude (keeps outliers visible).
    #[default]
    MaxAbs,
    /// The mean of the finite elements.
    Mean,
}

/// What to draw: two axes of the tensor, a fixed index on every other
/// axis, and how cells pool the elements they cover.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeatmapRequest {
    /// Axis shown vertically (rows of cells).
    pub row_axis: usize,
    /// Axis shown horizontally (columns of cells).
    pub col_axis: usize,
    /// Index of every other axis (entries for the two shown axes are ignored).
    pub fixed: Vec<u64>,
    /// How a cell summarises the elements it covers.
    pub pooling: Pooling,
    /// Largest number of cells per side.
    pub max_side: usize,
    /// Bit order of F6 elements (ignored for every other dtype).
    pub order: BitOrder,
    /// Only this region of the two axes shown (a zoom); `None` is all of it.
    pub window: Option<HeatWindow>,
}

/// A region of the two axes a heatmap shows: rows `row0..row1` and
/// columns `col0..col1` (clamped to the axes; an empty one is all of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeatWindow {
    /// First row.
    pub row0: u64,
    /// One past the last row.
    pub row1: u64,
    /// First column.
    pub col0: u64,
    /// One past the last column.
    pub col1: u64,
}

/// A computed heatmap: cell values and the colour range, with the tensor
/// rows and columns they cover.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// Cells per row (at most the request's `max_side`).
    pub width: usize,
    /// Rows of cells (at most the request's `max_side`).
    pub height: usize,
    /// Row-major cell values; NaN where a cell holds no finite value.
    pub cells: Vec<f64>,
    /// Cells holding a NaN or Inf element.
    pub non_finite: Vec<bool>,
    /// Smallest finite cell value (the colour map's low end).
    pub min: Option<f64>,
    /// Largest finite cell value (the colour map's high end).
    pub max: Option<f64>,
    /// Tensor rows (along `row_axis`) covered.
    pub rows: u64,
    /// Tensor columns (along `col_axis`) covered.
    pub cols: u64,
    /// The first row covered (not 0 in a zoom).
    pub row0: u64,
    /// The first column covered.
    pub col0: u64,
}

impl Heatmap {
    /// A `width` × `height` heatmap of `cells` (row-major, NaN where a cell
    /// holds no finite value) over `rows` × `cols` tensor elements; the
    /// colour range is taken from the finite cells.
    pub fn from_cells(
        width: usize,
        height: usize,
        cells: Vec<f64>,
        non_finite: Vec<bool>,
        rows: u64,
        cols: u64,
    ) -> Self {
        let finite = cells.iter().copied().filter(|v| v.is_finite());
        let min = finite.clone().reduce(f64::min);
        let max = finite.reduce(f64::max);
        Self {
            width,
            height,
            cells,
            non_finite,
            min,
            max,
            row0: 0,
            col0: 0,
            rows,
            cols,
        }
    }
}

/// Why a heatmap cannot be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeatmapError {
    /// The request names an axis the tensor does not have.
    #[error("axis {0} is out of range for a {1}-D tensor")]
    BadAxis(usize, usize),
    /// A fixed index is out of range.
    #[error("index {index} is out of range for axis {axis} of size {size}")]
    BadIndex {
        /// The axis whose index is out of range.
        axis: usize,
        /// The index given.
        index: u64,
        /// The axis size (valid indices are below it).
        size: u64,
    },
    /// The tensor has no elements.
    #[error("the tensor has no elements")]
    Empty,
    /// Cancelled through the token; not an error to show.
    #[error("cancelled")]
    Cancelled,
    /// The file changed or cannot be read since it was opened.
    #[error("{0}")]
    Unreadable(String),
}

impl From<Cancelled> for HeatmapError {
    fn from(_: Cancelled) -> Self {
        HeatmapError::Cancelled
    }
}

/// Computes a heatmap of `bytes` (a tensor of `dtype` and `shape`). A 1-D
/// tensor is one row; a scalar one cell. Progress counts elements.
pub fn compute(
    dtype: Dtype,
    shape: &[u64],
    bytes: &[u8],
    req: &HeatmapRequest,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Heatmap, HeatmapError> {
    let mut im = vec![0f64; 4096];
    let mut decode = |first: u64, buf: &mut [f64]| {
        if dtype == Dtype::C64 {
            let n = buf.len().min(im.len());
            let got = decode_c64(bytes, first, &mut buf[..n], &mut im[..n]);
            for (re, im) in buf[..got].iter_mut().zip(&im[..got]) {
                *re = re.hypot(*im);
            }
            got
        } else {
            decode_f64(dtype, bytes, first, buf, req.order)
        }
    };
    compute_with(shape, &mut decode, req, cancel, progress)
}

/// [`compute`] over any values: `decode(first, out)` writes the values of
/// elements `first..` (row-major in `shape`) into `out` and returns how
/// many (a quantized weight's decoded values, for one).
pub fn compute_with(
    shape: &[u64],
    decode: &mut dyn FnMut(u64, &mut [f64]) -> usize,
    req: &HeatmapRequest,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Heatmap, HeatmapError> {
    // Treat scalars and vectors as 2-D.
    let (shape2, ra, ca, fixed): (Vec<u64>, usize, usize, Vec<u64>) = match shape.len() {
        0 => (vec![1, 1], 0, 1, vec![0, 0]),
        1 => (vec![1, shape[0]], 0, 1, vec![0, 0]),
        n => {
            if req.row_axis >= n || req.col_axis >= n || req.row_axis == req.col_axis {
                return Err(HeatmapError::BadAxis(req.row_axis.max(req.col_axis), n));
            }
            let mut fixed = req.fixed.clone();
            fixed.resize(n, 0);
            (shape.to_vec(), req.row_axis, req.col_axis, fixed)
        }
    };
    if shape2.contains(&0) {
        return Err(HeatmapError::Empty);
    }
    // Row-major strides; the shape was validated, so the products fit.
    let mut strides = vec![1u64; shape2.len()];
    for i in (0..shape2.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape2[i + 1]);
    }
    let mut base = 0u64;
    for (axis, (&idx, &size)) in fixed.iter().zip(&shape2).enumerate() {
        if axis == ra || axis == ca {
            continue;
        }
        if idx >= size {
            return Err(HeatmapError::BadIndex {
                axis,
                index: idx,
                size,
            });
        }
        base = base.saturating_add(idx.saturating_mul(strides[axis]));
    }
    // The region shown: the window, clamped, or the whole axes.
    let (first_row, rows, first_col, cols) = match req.window {
        Some(w) => {
            let r0 = w.row0.min(shape2[ra] - 1);
            let r1 = w.row1.clamp(r0 + 1, shape2[ra]);
            let c0 = w.col0.min(shape2[ca] - 1);
            let c1 = w.col1.clamp(c0 + 1, shape2[ca]);
            (r0, r1 - r0, c0, c1 - c0)
        }
        None => (0, shape2[ra], 0, shape2[ca]),
    };
    let side = req.max_side.max(1) as u64;
    let height = rows.min(side) as usize;
    let width = cols.min(side) as usize;
    let cells_n = width * height;
    let mut sum = vec![0f64; cells_n];
    let mut count = vec![0u32; cells_n];
    let mut best = vec![f64::NAN; cells_n];
    let mut non_finite = vec![false; cells_n];
    progress.set_total(rows.saturating_mul(cols));
    let col_bin: Vec<usize> = if cols <= 1 << 24 {
        (0..cols)
            .map(|c| (c as u128 * width as u128 / cols as u128) as usize)
            .collect()
    } else {
        Vec::new()
    };
    let bin_of_col = |c: u64| -> usize {
        col_bin
            .get(c as usize)
            .copied()
            .unwrap_or_else(|| (c as u128 * width as u128 / cols as u128) as usize)
    };
    let mut buf = vec![0f64; 4096];
    let contiguous = strides[ca] == 1;
    for r in 0..rows {
        cancel.check()?;
        let row_bin = (r as u128 * height as u128 / rows as u128) as usize;
        let row_base = base.saturating_add((first_row + r).saturating_mul(strides[ra]));
        let mut c = 0u64;
        while c < cols {
            let n = if contiguous {
                (cols - c).min(buf.len() as u64) as usize
            } else {
                1
            };
            let first = row_base.saturating_add((first_col + c).saturating_mul(strides[ca]));
            let got = decode(first, &mut buf[..n]);
            if got == 0 {
                break;
            }
            for (k, &v) in buf[..got].iter().enumerate() {
                let cell = row_bin * width + bin_of_col(c + k as u64);
                if v.is_finite() {
                    sum[cell] += v;
                    count[cell] += 1;
                    if best[cell].is_nan() || v.abs() > best[cell].abs() {
                        best[cell] = v;
                    }
                } else {
                    non_finite[cell] = true;
                }
            }
            c += got as u64;
        }
        progress.add(cols);
    }
    let cells: Vec<f64> = match req.pooling {
        Pooling::MaxAbs => best,
        Pooling::Mean => sum
            .iter()
            .zip(&count)
            .map(|(s, &n)| if n == 0 { f64::NAN } else { s / f64::from(n) })
            .collect(),
    };
    let mut map = Heatmap::from_cells(width, height, cells, non_finite, rows, cols);
    map.row0 = first_row;
    map.col0 = first_col;
    Ok(map)
}

/// The colour map of heatmaps (GUI and PNG export): diverging (blue,
/// white, red, symmetric around 0) when the data has both signs, a
/// viridis-like ramp when it has one; grey for a cell with no finite value.
pub fn colour_rgb(v: f64, lo: f64, hi: f64) -> [u8; 3] {
    const STOPS: [(f32, [f32; 3]); 5] = [
        (0.0, [68.0, 1.0, 84.0]),
        (0.25, [59.0, 82.0, 139.0]),
        (0.5, [33.0, 145.0, 140.0]),
        (0.75, [94.0, 201.0, 98.0]),
        (1.0, [253.0, 231.0, 37.0]),
    ];
    if !v.is_finite() {
        return [90, 90, 90];
    }
    let lerp = |a: f32, b: f32, t: f32| (a + (b - a) * t) as u8;
    if lo < 0.0 && hi > 0.0 {
        let m = lo.abs().max(hi.abs());
        let t = (v / m).clamp(-1.0, 1.0) as f32;
        if t < 0.0 {
            let t = -t;
            [
                lerp(245.0, 33.0, t),
                lerp(245.0, 102.0, t),
                lerp(245.0, 172.0, t),
            ]
        } else {
            [
                lerp(245.0, 178.0, t),
                lerp(245.0, 24.0, t),
                lerp(245.0, 43.0, t),
            ]
        }
    } else {
        let t = if hi > lo {
            ((v - lo) / (hi - lo)).clamp(0.0, 1.0) as f32
        } else {
            0.5
        };
        for w in STOPS.windows(2) {
            let ((t0, c0), (t1, c1)) = (w[0], w[1]);
            if t <= t1 {
                let f = (t - t0) / (t1 - t0);
                return [
                    lerp(c0[0], c1[0], f),
                    lerp(c0[1], c1[1], f),
                    lerp(c0[2], c1[2], f),
                ];
            }
        }
        [253, 231, 37]
    }
}

/// The elements `start..end` (at least one) that cell `k` of `cells`
/// covers along an axis of `n`.
fn cell_span(k: usize, cells: usize, n: u64) -> (u64, u64) {
    let at = |k: u128| (k * u128::from(n)).div_ceil(cells.max(1) as u128) as u64;
    let start = at(k as u128);
    (start, at(k as u128 + 1).max(start + 1))
}

impl Heatmap {
    /// The tensor rows `start..end` that cell row `cy` covers. Row r is in
    /// cell ⌊r·height/rows⌋ (here and in the diff's |Δ| map), so cell k
    /// starts at ⌈k·rows/height⌉.
    pub fn cell_rows(&self, cy: usize) -> (u64, u64) {
        let (start, end) = cell_span(cy, self.height, self.rows);
        (self.row0 + start, self.row0 + end)
    }

    /// The tensor columns `start..end` that cell column `cx` covers.
    pub fn cell_cols(&self, cx: usize) -> (u64, u64) {
        let (start, end) = cell_span(cx, self.width, self.cols);
        (self.col0 + start, self.col0 + end)
    }

    /// The heatmap as row-major RGB pixels, one per cell.
    pub fn to_rgb(&self) -> Vec<u8> {
        let (lo, hi) = (self.min.unwrap_or(0.0), self.max.unwrap_or(0.0));
        self.cells
            .iter()
            .flat_map(|&v| colour_rgb(v, lo, hi))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn req(
        row_axis: usize,
        col_axis: usize,
        fixed: Vec<u64>,
        pooling: Pooling,
        max_side: usize,
    ) -> HeatmapRequest {
        HeatmapRequest {
            row_axis,
            col_axis,
            fixed,
            pooling,
            max_side,
            order: BitOrder::LsbFirst,
            window: None,
        }
    }

    #[test]
    fn pools_blocks() {
        // 4x4 -> 2x2
        let v: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let h = compute(
            Dtype::F32,
            &[4, 4],
            &f32s(&v),
            &req(0, 1, vec![], Pooling::Mean, 2),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("ok");
        assert_eq!((h.width, h.height), (2, 2));
        assert_eq!(h.cells, [2.5, 4.5, 10.5, 12.5]);
        let h = compute(
            Dtype::F32,
            &[4, 4],
            &f32s(&v),
            &req(0, 1, vec![], Pooling::MaxAbs, 2),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("ok");
        assert_eq!(h.cells, [5.0, 7.0, 13.0, 15.0]);
    }

    /// A zoom: the window's elements only, pooled at their own scale; a
    /// window past the axes is clamped, an empty one widened to a cell.
    #[test]
    fn a_window_zooms_into_a_region() {
        let v: Vec<f32> = (0..48).map(|i| i as f32).collect();
        let zoom = |w: HeatWindow, side: usize| {
            let r = HeatmapRequest {
                window: Some(w),
                ..req(0, 1, vec![], Pooling::Mean, side)
            };
            compute(
                Dtype::F32,
                &[6, 8],
                &f32s(&v),
                &r,
                &CancelToken::new(),
                &Progress::new(),
            )
            .expect("ok")
        };
        let w = HeatWindow {
            row0: 2,
            row1: 4,
            col0: 3,
            col1: 7,
        };
        let h = zoom(w, 64);
        assert_eq!(
            (h.width, h.height, h.rows, h.cols, h.row0, h.col0),
            (4, 2, 2, 4, 2, 3)
        );
        assert_eq!(h.cells, [19.0, 20.0, 21.0, 22.0, 27.0, 28.0, 29.0, 30.0]);
        // Pooled again: 2 x 4 elements in 1 x 2 cells.
        let h = zoom(w, 2);
        assert_eq!((h.width, h.height), (2, 2));
        let h = zoom(
            HeatWindow {
                row0: 5,
                row1: 99,
                col0: 9,
                col1: 3,
            },
            64,
        );
        assert_eq!((h.rows, h.cols, h.row0, h.col0), (1, 1, 5, 7));
        assert_eq!(h.cells, [47.0]);
    }

    /// A cell's element range is the one `compute` pools into it.
    #[test]
    fn cells_cover_the_elements_compute_pools() {
        for (rows, height) in [(5u64, 2usize), (7, 3), (512, 512), (1000, 7), (3, 1)] {
            let map =
                Heatmap::from_cells(1, height, vec![0.0; height], vec![false; height], rows, 1);
            for r in 0..rows {
                let cell = (u128::from(r) * height as u128 / u128::from(rows)) as usize;
                let (start, end) = map.cell_rows(cell);
                assert!(
                    start <= r && r < end,
                    "{rows}/{height}: row {r} in cell {cell}"
                );
            }
            assert_eq!(map.cell_rows(height - 1).1, rows);
        }
    }

    #[test]
    fn transposed_and_fixed_axes() {
        // shape [2, 3, 2]: pick axis 2 as rows, axis 1 as cols, fix axis 0 = 1.
        let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let h = compute(
            Dtype::F32,
            &[2, 3, 2],
            &f32s(&v),
            &req(2, 1, vec![1, 0, 0], Pooling::Mean, 64),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("ok");
        assert_eq!((h.height, h.width), (2, 3));
        // element [1, c, r] = 6 + 2c + r
        assert_eq!(h.cells, [6.0, 8.0, 10.0, 7.0, 9.0, 11.0]);
        assert!(matches!(
            compute(
                Dtype::F32,
                &[2, 3, 2],
                &f32s(&v),
                &req(2, 1, vec![2, 0, 0], Pooling::Mean, 64),
                &CancelToken::new(),
                &Progress::new()
            ),
            Err(HeatmapError::BadIndex { .. })
        ));
    }

    #[test]
    fn nan_cells_and_cancel() {
        let v = [1.0f32, f32::NAN, 3.0, f32::INFINITY];
        let h = compute(
            Dtype::F32,
            &[2, 2],
            &f32s(&v),
            &req(0, 1, vec![], Pooling::Mean, 8),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("ok");
        assert!(h.cells[1].is_nan());
        assert!(h.non_finite[1] && h.non_finite[3]);
        let c = CancelToken::new();
        c.cancel();
        assert_eq!(
            compute(
                Dtype::F32,
                &[2, 2],
                &f32s(&v),
                &req(0, 1, vec![], Pooling::Mean, 8),
                &c,
                &Progress::new()
            ),
            Err(HeatmapError::Cancelled)
        );
        assert_eq!(
            compute(
                Dtype::F32,
                &[0, 2],
                &[],
                &req(0, 1, vec![], Pooling::Mean, 8),
                &CancelToken::new(),
                &Progress::new()
            ),
            Err(HeatmapError::Empty)
        );
    }
}
