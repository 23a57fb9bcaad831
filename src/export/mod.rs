//! Exporting one tensor to a file other tools read: NumPy `.npy`, `.csv`,
//! raw `.bin`, or a `.png` heatmap. The format comes from the extension.
//!
//! - `.npy`: format 1.0 (2.0 when the header needs it), C order, the
//!   tensor's shape (a scalar is a 0-d array). Native numpy dtypes keep
//!   their type (BOOL as `bool` with every non-zero byte written as 1, as
//!   numpy expects a 0/1 byte); BF16, the F8s, F6s and F4 are written as
//!   float32 values (exact), or with [`Encoding::RawCodes`] as their codes:
//!   BF16 as uint16, F8 as uint8, F6 and F4 unpacked to one code per uint8.
//! - `.csv`: one row per index of the first axis, the remaining axes
//!   flattened in C order (a 1-D tensor gives one value per row, a scalar
//!   one row, a tensor with no elements an empty file); no header row. Refused above [`CSV_MAX_ELEMENTS`] elements
//!   unless [`SizeLimit::Ignore`]. [`Encoding::RawCodes`] writes the codes
//!   of BF16/F8/F6/F4 as integers.
//! - `.bin`: the tensor's bytes exactly as stored (little-endian; F4/F6
//!   packed as in the file).
//! - `.png`: the heatmap of [`crate::stats::heatmap`] with its colour map. By
//!   default an N-D tensor is flattened to (first axis) × (all other axes),
//!   as the CSV is, so every element counts; pooled into at most
//!   [`PNG_MAX_SIDE`] cells per side by max |x|; images smaller than 256
//!   pixels are enlarged by a whole factor. The GUI passes its own view's
//!   [`HeatmapRequest`] instead.
//!
//! `.npy`, `.csv` and `.bin` stream: memory use is a fixed buffer whatever
//! the tensor's size. Every file is written to a temporary file beside the
//! target, synced and renamed ([`crate::fsio::atomic_write`]).
//!
//! From the GUI (the selected tensor and the heatmap view it shows):
//!
//! ```no_run
//! use std::path::Path;
//! use std::sync::Arc;
//! use tensorscope::export::{ExportOptions, export_tensor};
//! use tensorscope::format::Checkpoint;
//! use tensorscope::jobs::Job;
//!
//! let ck = Arc::new(Checkpoint::open(Path::new("model.safetensors"))?);
//! let t = ck.tensors()[3];
//! let opts = ExportOptions::default(); // or heatmap: Some(the view's HeatmapRequest)
//! let job = Job::spawn("export", || {}, {
//!     let ck = Arc::clone(&ck);
//!     move |cancel, progress| export_tensor(&ck, t, Path::new("w.npy"), &opts, cancel, progress)
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod csv;
mod dequant;
mod heatmap_png;
pub mod npy;
pub mod png;

pub use dequant::export_logical;

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::dtype::Dtype;
use crate::dtype::decode::BitOrder;
use crate::format::{Checkpoint, LoadError, TensorRef};
use crate::fsio::{FileError, ShortWriter, atomic_write, copy_chunked, same_file};
use crate::jobs::{CancelToken, Progress};
use crate::stats::heatmap::{HeatmapError, HeatmapRequest};

/// CSV exports above this many elements are refused unless forced.
pub const CSV_MAX_ELEMENTS: u64 = 10_000_000;
/// Default largest number of heatmap cells per side of a `.png`.
pub const PNG_MAX_SIDE: usize = 1024;
/// Smaller heatmaps are enlarged by a whole factor up to this many pixels.
const PNG_MIN_PIXELS: usize = 256;
/// Elements per streamed chunk: the unit of cancellation checks and of
/// progress for the converted formats.
const CHUNK_ELEMENTS: usize = 64 * 1024;

/// A file format to export to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// NumPy `.npy`, version 1.0 (2.0 for a header over 64 KiB).
    Npy,
    /// Comma-separated values, one row per index of the first axis.
    Csv,
    /// The tensor's bytes exactly as stored (little-endian, F4/F6 packed).
    Bin,
    /// A PNG heatmap of the values (pooled, at most [`PNG_MAX_SIDE`] cells a side).
    Png,
}

impl ExportFormat {
    /// Every format, in the order the GUI offers them.
    pub const ALL: [ExportFormat; 4] = [
        ExportFormat::Npy,
        ExportFormat::Csv,
        ExportFormat::Bin,
        ExportFormat::Png,
    ];

    /// The file extension (without the dot).
    pub const fn extension(self) -> &'static str {
        match self {
            ExportFormat::Npy => "npy",
            ExportFormat::Csv => "csv",
            ExportFormat::Bin => "bin",
            ExportFormat::Png => "png",
        }
    }

    /// The format named by `path`'s extension (case-insensitive).
    pub fn from_path(path: &Path) -> Result<Self, ExportError> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        Self::ALL
            .into_iter()
            .find(|f| f.extension() == ext)
            .ok_or_else(|| ExportError::UnknownFormat {
                path: path.to_path_buf(),
                extension: ext,
            })
    }
}

/// Values or raw codes, for the dtypes numpy has no type for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// Decoded values (float32 for BF16, F8, F6, F4).
    #[default]
    Values,
    /// Raw codes: BF16 as uint16, F8 as uint8, F6/F4 one code per uint8.
    RawCodes,
}

/// Whether the CSV size limit applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SizeLimit {
    /// Refuse CSV exports above the limit.
    #[default]
    Enforce,
    /// Write them anyway (`--force`), however large the file gets.
    Ignore,
}

/// How to export; `Default` takes the format from the extension and writes
/// values.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The format; `None` takes it from the output's extension.
    pub format: Option<ExportFormat>,
    /// Values or raw codes (`.npy`, `.csv`).
    pub encoding: Encoding,
    /// Whether `csv_max_elements` applies (the other formats have no limit).
    pub size_limit: SizeLimit,
    /// The CSV size limit in elements.
    pub csv_max_elements: u64,
    /// Bit order of packed F6 elements.
    pub bit_order: BitOrder,
    /// The `.png` view; `None` flattens to (first axis) × (the rest),
    /// pooled by max |x| into at most [`PNG_MAX_SIDE`] cells per side.
    pub heatmap: Option<HeatmapRequest>,
    /// Failure injection (tests, and the GUI's tests of its error path):
    /// the output reports a short write, as a full disk would, after this
    /// many bytes. `None` in normal use.
    pub fail_after_bytes: Option<u64>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            format: None,
            encoding: Encoding::Values,
            size_limit: SizeLimit::Enforce,
            csv_max_elements: CSV_MAX_ELEMENTS,
            bit_order: BitOrder::LsbFirst,
            heatmap: None,
            fail_after_bytes: None,
        }
    }
}

/// A tensor to export: its header facts and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// Name (for the report and the PNG's title).
    pub name: &'a str,
    /// Element type, which decides the `.npy` descr and the decoding.
    pub dtype: Dtype,
    /// Shape: `.csv` rows follow its first axis, `.npy` keeps it.
    pub shape: &'a [u64],
    /// The bytes, `numel × bits / 8` of them.
    pub bytes: &'a [u8],
}

/// The heatmap a `.png` shows.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PngReport {
    /// Image width in pixels.
    pub width: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Heatmap cells per row (at most the request's `max_side`).
    pub cells_wide: usize,
    /// Heatmap rows of cells.
    pub cells_high: usize,
    /// Pixels per cell side: small maps are enlarged by this whole factor.
    pub scale: usize,
    /// Tensor rows shown (along the vertical axis).
    pub rows: u64,
    /// Tensor columns shown (all axes after the first, unless a view was
    /// given).
    pub cols: u64,
    /// Smallest finite cell value (the colour map's low end).
    pub min: Option<f64>,
    /// Largest finite cell value (the colour map's high end).
    pub max: Option<f64>,
}

/// What was exported: what the CLI reports and the GUI shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportReport {
    /// The written file, after its rename into place.
    pub path: PathBuf,
    /// The format written (from the options or the extension).
    pub format: ExportFormat,
    /// The tensor's name (for the report; not escaped).
    pub tensor: String,
    /// The tensor's dtype in the checkpoint (not the output's `.npy` type).
    pub dtype: Dtype,
    /// The tensor's shape in the checkpoint.
    pub shape: Vec<u64>,
    /// Elements written (every element: exports never sample).
    pub elements: u64,
    /// Values or raw codes, as asked (see [`Encoding`]).
    pub encoding: Encoding,
    /// The `.npy` data type (`<f4`, `|u1`, …).
    pub npy_descr: Option<&'static str>,
    /// The `.npy` format version written: (1, 0), or (2, 0) for a large header.
    pub npy_version: Option<(u8, u8)>,
    /// The `.png` heatmap's geometry and range; `None` for other formats.
    pub png: Option<PngReport>,
    /// Bytes of the output file, headers included.
    pub bytes_written: u64,
}

/// Why a tensor could not be exported.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExportError {
    /// The output's extension names no known format.
    #[error("cannot tell the format from the extension {extension:?}; use .npy, .csv, .bin or .png: {}", path.display())]
    UnknownFormat {
        /// The output path, as given.
        path: PathBuf,
        /// Its extension (lowercase; empty when none).
        extension: String,
    },
    /// A CSV over the size limit.
    #[error(
        "the tensor has {elements} elements, over the CSV limit of {limit}; force it, or export .npy"
    )]
    CsvTooLarge {
        /// Elements of the tensor.
        elements: u64,
        /// The limit in elements ([`CSV_MAX_ELEMENTS`] unless changed).
        limit: u64,
    },
    /// Raw codes asked for a format that has none.
    #[error("raw codes apply to .npy and .csv; .{} is written as {}", format.extension(), match format { ExportFormat::Bin => "stored bytes already", _ => "a heatmap of values" })]
    RawNotApplicable {
        /// The format asked for (`.bin` or `.png`).
        format: ExportFormat,
    },
    /// The bytes do not match the dtype and shape.
    #[error("tensor {name:?}: {dtype} {shape:?} needs {expected} bytes, got {found}")]
    SizeMismatch {
        /// The tensor whose bytes do not fit.
        name: String,
        /// The dtype, with the shape, that says how many bytes it needs.
        dtype: Dtype,
        /// The shape.
        shape: Vec<u64>,
        /// Bytes needed (`None` when not whole or overflowing).
        expected: String,
        /// Bytes the caller gave.
        found: usize,
    },
    /// The heatmap cannot be drawn (an empty tensor, a bad axis).
    #[error("cannot draw the heatmap: {0}")]
    Heatmap(HeatmapError),
    /// The output is a file of the source checkpoint.
    #[error("refusing to overwrite a file of the checkpoint being read ({}); export under another name: {}", source_file.display(), output.display())]
    WouldOverwriteSource {
        /// The output path, as given (a link or another name of the source).
        output: PathBuf,
        /// The source file it is.
        source_file: PathBuf,
    },
    /// The tensor reference is not in the checkpoint.
    #[error("no such tensor in the checkpoint")]
    NoSuchTensor,
    /// The source cannot be read (it changed since it was opened).
    #[error(transparent)]
    Load(LoadError),
    /// Writing failed; the target was not changed.
    #[error(transparent)]
    Write(FileError),
    /// A dimension NumPy cannot hold: its shapes are signed 64-bit
    /// (`npy_intp`), so `numpy.load` refuses a dimension of 2^63 or more
    /// ("Maximum allowed dimension exceeded"), even of a tensor with no
    /// element.
    #[error(
        "tensor {name:?}: dimension {dimension} of shape {shape:?} is {size}, beyond NumPy's limit of 2^63 - 1 (numpy.load would refuse the file); export it as .bin"
    )]
    NumpyDimensionTooLarge {
        /// The tensor.
        name: String,
        /// Its shape.
        shape: Vec<u64>,
        /// Which dimension (0-based).
        dimension: usize,
        /// Its size.
        size: u64,
    },
    /// Cancelled; the target was not changed.
    #[error("cancelled; no file was changed")]
    Cancelled,
    /// A quantized weight's values asked for in a format other than
    /// `.npy` or `.bin`.
    #[error("dequantized values are written as .npy or .bin, not .{}", format.extension())]
    DequantFormat {
        /// The format asked for.
        format: ExportFormat,
    },
    /// A logical tensor whose values are not decoded.
    #[error("{name} is {status}, not decoded: {message}")]
    NotDecoded {
        /// Its logical name.
        name: String,
        /// `recognized` or `inconsistent`.
        status: &'static str,
        /// Why, with the evidence.
        message: String,
    },
}

impl ExportError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            ExportError::UnknownFormat { .. } => "UnknownFormat",
            ExportError::CsvTooLarge { .. } => "CsvTooLarge",
            ExportError::RawNotApplicable { .. } => "RawNotApplicable",
            ExportError::SizeMismatch { .. } => "SizeMismatch",
            ExportError::Heatmap(_) => "Heatmap",
            ExportError::WouldOverwriteSource { .. } => "WouldOverwriteSource",
            ExportError::NoSuchTensor => "UnknownTensor",
            ExportError::NumpyDimensionTooLarge { .. } => "NumpyDimensionTooLarge",
            ExportError::Load(e) => e.kind(),
            ExportError::Write(e) => e.kind(),
            ExportError::Cancelled => "Cancelled",
            ExportError::DequantFormat { .. } => "DequantFormat",
            ExportError::NotDecoded { .. } => "NotDecoded",
        }
    }

    /// The path most relevant to the error, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ExportError::UnknownFormat { path, .. }
            | ExportError::Write(FileError::Io { path, .. }) => Some(path),
            ExportError::WouldOverwriteSource { output, .. } => Some(output),
            ExportError::Load(e) => Some(e.path()),
            _ => None,
        }
    }
}

impl From<FileError> for ExportError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Cancelled => ExportError::Cancelled,
            other @ FileError::Io { .. } => ExportError::Write(other),
        }
    }
}

impl From<HeatmapError> for ExportError {
    fn from(e: HeatmapError) -> Self {
        match e {
            HeatmapError::Cancelled => ExportError::Cancelled,
            other => ExportError::Heatmap(other),
        }
    }
}

/// Exports tensor `t` of `ck` to `out`. Refuses to write over any file of
/// the checkpoint, and checks that the file did not change since it was
/// opened. Progress counts the tensor's bytes (elements for `.png`).
pub fn export_tensor(
    ck: &Checkpoint,
    t: TensorRef,
    out: &Path,
    opts: &ExportOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ExportReport, ExportError> {
    let info = ck.info(t).ok_or(ExportError::NoSuchTensor)?;
    let mut sources: Vec<&Path> = ck.shards().iter().map(|s| s.file().path()).collect();
    sources.push(ck.path());
    if let Some(source) = sources.into_iter().find(|s| same_file(out, s)) {
        return Err(ExportError::WouldOverwriteSource {
            output: out.to_path_buf(),
            source_file: source.to_path_buf(),
        });
    }
    ck.check_files(&[t]).map_err(ExportError::Load)?;
    let _fetched = ck
        .fetch(&[t], cancel, progress)
        .map_err(ExportError::Load)?;
    let source = || ck.check_unchanged(&[t]);
    let view = TensorView {
        name: info.name(),
        dtype: info.dtype(),
        shape: info.shape(),
        bytes: ck.bytes(t),
    };
    export_checked(view, out, opts, &source, cancel, progress)
}

/// Exports any tensor given as bytes (no source-file checks: see
/// [`export_tensor`]).
pub fn export_view(
    view: TensorView<'_>,
    out: &Path,
    opts: &ExportOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ExportReport, ExportError> {
    export_checked(view, out, opts, &|| Ok(()), cancel, progress)
}

/// [`export_view`], with `source` saying whether the bytes' file is still
/// as it was when mapped (checked before the result is renamed into place).
fn export_checked(
    view: TensorView<'_>,
    out: &Path,
    opts: &ExportOptions,
    source: &dyn Fn() -> Result<(), LoadError>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ExportReport, ExportError> {
    let format = match opts.format {
        Some(f) => f,
        None => ExportFormat::from_path(out)?,
    };
    let elements = check_size(&view)?;
    if opts.encoding == Encoding::RawCodes
        && matches!(format, ExportFormat::Bin | ExportFormat::Png)
    {
        return Err(ExportError::RawNotApplicable { format });
    }
    let mut report = ExportReport {
        path: out.to_path_buf(),
        format,
        tensor: view.name.to_owned(),
        dtype: view.dtype,
        shape: view.shape.to_vec(),
        elements,
        encoding: opts.encoding,
        npy_descr: None,
        npy_version: None,
        png: None,
        bytes_written: 0,
    };
    if format == ExportFormat::Npy
        && let Some((dimension, &size)) = view
            .shape
            .iter()
            .enumerate()
            .find(|&(_, &d)| i64::try_from(d).is_err())
    {
        return Err(ExportError::NumpyDimensionTooLarge {
            name: view.name.to_owned(),
            shape: view.shape.to_vec(),
            dimension,
            size,
        });
    }
    match format {
        ExportFormat::Npy => {
            let (descr, copied) = npy::descr(view.dtype, opts.encoding);
            let (header, version) = npy::header(descr, view.shape);
            report.npy_descr = Some(descr);
            report.npy_version = Some(version);
            progress.set_total(view.bytes.len() as u64);
            report.bytes_written = write_streamed(out, opts, source, |w| {
                w.write_all(&header)?;
                if copied {
                    copy_chunked(w, view.bytes, cancel, progress)
                } else {
                    npy::write_converted(w, view, opts, elements, cancel, progress)
                }
            })?;
        }
        ExportFormat::Csv => {
            if opts.size_limit == SizeLimit::Enforce && elements > opts.csv_max_elements {
                return Err(ExportError::CsvTooLarge {
                    elements,
                    limit: opts.csv_max_elements,
                });
            }
            progress.set_total(elements);
            report.bytes_written = write_streamed(out, opts, source, |w| {
                csv::write_csv(w, view, opts, elements, cancel, progress)
            })?;
        }
        ExportFormat::Bin => {
            progress.set_total(view.bytes.len() as u64);
            report.bytes_written = write_streamed(out, opts, source, |w| {
                copy_chunked(w, view.bytes, cancel, progress)
            })?;
        }
        ExportFormat::Png => {
            let (png, info) = heatmap_png::png_bytes(view, opts, cancel, progress)?;
            report.png = Some(info);
            report.bytes_written = write_streamed(out, opts, source, |w| w.write_all(&png))?;
        }
    }
    Ok(report)
}

/// Elements of the view, after checking its bytes match dtype × shape.
fn check_size(view: &TensorView<'_>) -> Result<u64, ExportError> {
    let numel = view.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let expected = view.dtype.byte_len(view.shape);
    match (numel, expected) {
        (Some(n), Some(e)) if e == view.bytes.len() as u64 => Ok(n),
        _ => Err(ExportError::SizeMismatch {
            name: view.name.to_owned(),
            dtype: view.dtype,
            shape: view.shape.to_vec(),
            expected: expected.map_or_else(|| "a whole number of".into(), |e| e.to_string()),
            found: view.bytes.len(),
        }),
    }
}

/// Counts what `body` writes, with the failure injection in between.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `out` atomically through `body`; returns the bytes written.
/// `source` says whether the mapped source is still as it was: checked once
/// the bytes are written and before the file is renamed into place, so a
/// file read while it changed under us is never left as a result (and a
/// copy that the kernel refused, for a page the source lost, is told as
/// that change rather than as a bad address).
fn write_streamed(
    out: &Path,
    opts: &ExportOptions,
    source: &dyn Fn() -> Result<(), LoadError>,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<u64, ExportError> {
    let mut written = 0;
    let mut changed: Option<LoadError> = None;
    let result = atomic_write(out, |file| {
        let mut w = Counting {
            inner: ShortWriter::new(file, opts.fail_after_bytes),
            written: 0,
        };
        let r = body(&mut w).and_then(|()| w.flush());
        if let Err(e) = source() {
            changed = Some(e);
            return Err(io::Error::other("the source changed while being read"));
        }
        r?;
        written = w.written;
        Ok(())
    });
    match (result, changed) {
        (_, Some(e)) => Err(ExportError::Load(e)),
        (Err(e), None) => Err(e.into()),
        (Ok(()), None) => Ok(written),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(
            ExportFormat::from_path(Path::new("a/b.NPY")).ok(),
            Some(ExportFormat::Npy)
        );
        assert_eq!(
            ExportFormat::from_path(Path::new("x.png")).ok(),
            Some(ExportFormat::Png)
        );
        assert!(matches!(
            ExportFormat::from_path(Path::new("x.txt")),
            Err(ExportError::UnknownFormat { extension, .. }) if extension == "txt"
        ));
        assert!(ExportFormat::from_path(Path::new("noext")).is_err());
    }

    #[test]
    fn sizes_are_checked() {
        let view = TensorView {
            name: "t",
            dtype: Dtype::F32,
            shape: &[3],
            bytes: &[0; 8],
        };
        assert!(matches!(
            check_size(&view),
            Err(ExportError::SizeMismatch { .. })
        ));
        let view = TensorView {
            dtype: Dtype::F4,
            shape: &[4],
            bytes: &[0; 2],
            ..view
        };
        assert_eq!(check_size(&view).ok(), Some(4));
    }
}
