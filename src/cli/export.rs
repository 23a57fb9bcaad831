//! `tensorscope export FILE TENSOR -o OUT`: one tensor to `.npy`, `.csv`,
//! `.bin` or a `.png` heatmap (the format from OUT's extension).
//!
//! Exit codes: 0 when the file was written, 2 otherwise (the checkpoint
//! cannot be opened, no such tensor, an unknown extension, a CSV over the
//! limit without `--force`, an I/O error).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::output::{
    ErrorDoc, Output, display_name, fail, group_digits, path_string, report_error,
    with_progress_bar,
};
use super::{Common, EXIT_OK};
use crate::export::{
    Encoding, ExportError, ExportFormat, ExportOptions, ExportReport, PngReport, SizeLimit,
    export_logical, export_tensor,
};
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Progress};

/// `tensorscope export FILE TENSOR -o OUT`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A checkpoint: a .safetensors, .npy/.npz, PyTorch or GGUF file, a shard
    /// index, a folder holding one, or an https:// or hf:// location.
    pub file: PathBuf,
    /// The tensor's exact name.
    pub tensor: String,
    /// The output file; its extension picks the format: .npy, .csv, .bin
    /// or .png.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// Write raw codes instead of values (.npy, .csv): BF16 as uint16, F8
    /// as uint8, F6 and F4 as one code per uint8.
    #[arg(long)]
    pub raw: bool,
    /// Write a CSV even above the size limit (10,000,000 elements).
    #[arg(long)]
    pub force: bool,
    /// TENSOR is a quantized weight's logical name (`<module>.weight`):
    /// write its true values as F32 (.npy or .bin). A plain tensor's name
    /// exports it as without this flag.
    #[arg(long, conflicts_with = "raw")]
    pub dequant: bool,
    #[command(flatten)]
    pub f6: super::F6Order,
    #[command(flatten)]
    pub common: Common,
}

/// The `export --json` document: what was written, and from what.
#[derive(Debug, Serialize)]
pub struct ExportDoc {
    /// The checkpoint read (a file or a shard index), as given.
    pub path: String,
    /// The tensor's name, as in the header (not escaped: JSON escapes it).
    pub tensor: String,
    /// The tensor's dtype as the header names it (`F8_E4M3`, not the file's
    /// encoding in the output).
    pub dtype: &'static str,
    /// The tensor's shape, exact (JSON integers, also above 2^53).
    pub shape: Vec<u64>,
    /// The file written, after its atomic rename into place.
    pub output: String,
    /// `npy`, `csv`, `bin` or `png`.
    pub format: ExportFormat,
    /// `values` or `raw-codes` (the codes of the dtypes NumPy has no type for).
    pub encoding: Encoding,
    /// The `.npy` data type, such as `<f4`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npy_descr: Option<&'static str>,
    /// The `.npy` format version, `1.0` or `2.0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npy_version: Option<String>,
    /// The `.png` heatmap's size and range; absent for the other formats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub png: Option<PngReport>,
    /// Elements of the tensor, all written (an export never samples).
    pub elements: u64,
    /// Bytes of the output file, headers included.
    pub bytes_written: u64,
    /// The scheme of a dequantized logical tensor (`--dequant`), else
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<&'static str>,
}

impl ExportDoc {
    fn new(ck: &Checkpoint, r: &ExportReport) -> Self {
        Self {
            path: path_string(ck.path()),
            tensor: r.tensor.clone(),
            dtype: r.dtype.name(),
            shape: r.shape.clone(),
            output: path_string(&r.path),
            format: r.format,
            encoding: r.encoding,
            npy_descr: r.npy_descr,
            npy_version: r.npy_version.map(|(a, b)| format!("{a}.{b}")),
            png: r.png.clone(),
            elements: r.elements,
            bytes_written: r.bytes_written,
            scheme: None,
        }
    }
}

/// The error document of an export error.
pub fn export_error_doc(e: &ExportError) -> ErrorDoc {
    ErrorDoc {
        kind: e.kind().to_owned(),
        message: e.to_string(),
        path: e.path().map(path_string),
        globals: Vec::new(),
    }
}

/// Runs `export` and returns its exit code (0 written, 2 otherwise: the
/// target is then unchanged).
pub fn run(args: &ExportArgs, out: &mut Output, cancel: &CancelToken) -> i32 {
    let json = args.common.json;
    // An unknown extension is a usage error: say so before opening anything.
    if let Err(e) = ExportFormat::from_path(&args.output) {
        return fail(out, json, &export_error_doc(&e));
    }
    let ck = match Checkpoint::open_readable(&args.file) {
        Ok(ck) => ck,
        Err(e) => return report_error(out, json, &e),
    };
    // A GGUF block type's name is its values, unless --raw asks for its
    // stored bytes (or a .bin file, which is a tensor's stored bytes).
    let stored_bytes =
        args.raw || matches!(ExportFormat::from_path(&args.output), Ok(ExportFormat::Bin));
    let quant = if stored_bytes && !args.dequant {
        None
    } else {
        crate::quant::for_values(&ck, args.dequant)
    };
    let logical = quant.as_ref().and_then(|q| q.find(&args.tensor));
    let stored = ck.find(&args.tensor);
    let Some(t) = stored.or(logical.and_then(|l| l.parts().first().map(|p| p.1))) else {
        let doc = ErrorDoc {
            kind: "UnknownTensor".into(),
            message: format!("no tensor named {}", display_name(&args.tensor)),
            path: Some(path_string(ck.path())),
            globals: Vec::new(),
        };
        return fail(out, json, &doc);
    };
    let opts = ExportOptions {
        encoding: if args.raw {
            Encoding::RawCodes
        } else {
            Encoding::Values
        },
        size_limit: if args.force {
            SizeLimit::Ignore
        } else {
            SizeLimit::Enforce
        },
        bit_order: args.f6.bit_order(),
        ..ExportOptions::default()
    };
    let progress = Progress::new();
    let started = Instant::now();
    let result = with_progress_bar(&progress, started, || match logical {
        Some(lt) => export_logical(&ck, lt, &args.output, &opts, cancel, &progress),
        None => export_tensor(&ck, t, &args.output, &opts, cancel, &progress),
    });
    match result {
        Ok(report) => {
            if json {
                let mut doc = ExportDoc::new(&ck, &report);
                doc.scheme = logical.map(|l| l.scheme().id());
                out.json(&doc);
            } else {
                let detail = match (report.npy_descr, &report.png) {
                    (Some(d), _) => format!(" as {d}"),
                    (_, Some(p)) => format!(
                        ", {}x{} px for {}x{} cells",
                        p.width, p.height, p.cells_wide, p.cells_high
                    ),
                    _ => String::new(),
                };
                out.text(&format!(
                    "wrote {} ({}{detail}): {} elements of {}, {} bytes\n",
                    path_string(&report.path),
                    report.format.extension(),
                    group_digits(report.elements),
                    display_name(&report.tensor),
                    group_digits(report.bytes_written)
                ));
            }
            EXIT_OK
        }
        Err(e) => fail(out, json, &export_error_doc(&e)),
    }
}
