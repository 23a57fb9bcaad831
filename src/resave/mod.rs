//! Re-saving a checkpoint: a selection of its tensors (by index, as the
//! GUI's table gives it, and/or by keep/drop regexes), renamed, with edited
//! `__metadata__`, some dtypes converted, into one file or re-sharded
//! under a new `model.safetensors.index.json`.
//!
//! Two steps, so the GUI can show the outcome (names, dtypes, sizes, file
//! names, errors) before anything is written:
//! - [`plan()`] checks the request against the checkpoint and decides every
//!   output tensor and file, without touching the disk;
//! - [`execute`] writes the plan: each file to a temporary file in the
//!   target folder, streamed from the source's mapping (copied tensors) or
//!   through a converter in chunks (converted tensors), synced, re-opened
//!   and checked by our validating reader, and only then renamed over the
//!   target. [`resave`] does both.
//!
//! Safety rules:
//! - an output path that is any file of the source (the file, a shard, the
//!   index; compared by device and inode, so links count) is refused;
//! - every error, a cancel or a full disk removes the temporary files, and
//!   the targets keep their previous content;
//! - a sharded output is written entirely (every shard and the index) to
//!   temporary files first, then renamed shard by shard, the index last. If
//!   a rename fails midway (the folder's permissions changed, a target
//!   became a folder), the shards renamed so far are complete files, the
//!   remaining temporary files are removed, the index is not replaced, and
//!   [`ResaveError::Commit`] lists the files already in place.
//!
//! Here: the request, plan and report types and [`resave`]; `plan` decides,
//! `write` writes and verifies, `error` holds [`ResaveError`], `parse` the
//! text forms of options shared by the CLI and the GUI.
//!
//! From the GUI (the table's selection, a rename, a metadata edit and a
//! conversion; the plan shows the outcome, the job writes it):
//!
//! ```no_run
//! use std::path::Path;
//! use std::sync::Arc;
//! use tensorscope::Dtype;
//! use tensorscope::format::Checkpoint;
//! use tensorscope::resave::{MetadataEdit, ResaveOptions, execute, plan};
//! use tensorscope::jobs::{Job, JobState};
//!
//! let ck = Arc::new(Checkpoint::open(Path::new("model.safetensors"))?);
//! let opts = ResaveOptions {
//!     selection: Some(vec![0, 2, 5]), // indices into ck.tensors
//!     renames: vec![("lm_head.weight".into(), "output.weight".into())],
//!     metadata_edits: vec![MetadataEdit::Set { key: "note".into(), value: "bf16".into() }],
//!     conversions: vec![(Dtype::F32, Dtype::BF16)],
//!     ..ResaveOptions::default()
//! };
//! // No I/O: errors (a name collision, the source as output) show in the dialog.
//! let planned = plan(&ck, Path::new("model-bf16.safetensors"), &opts)?;
//! let job = Job::spawn("resave", || {}, {
//!     let ck = Arc::clone(&ck);
//!     move |cancel, progress| execute(&ck, &planned, cancel, progress)
//! })?;
//! // Each frame: job.progress().fraction(); job.cancel() on Cancel.
//! if let JobState::Done(Ok(report)) = job.wait() {
//!     let reopen = report.index.clone().unwrap_or_else(|| report.files[0].path.clone());
//!     let _ = Checkpoint::open(&reopen)?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::dtype::Dtype;
use crate::dtype::convert::{ConversionCounts, Overflow};
use crate::format::{Checkpoint, TensorRef};
use crate::jobs::{CancelToken, Progress};

mod error;
mod parse;
mod plan;
mod write;

pub use error::ResaveError;
pub use parse::{PairError, parse_pair, parse_size};
pub use plan::plan;
pub use write::execute;

/// One edit of `__metadata__`, applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataEdit {
    /// Add or change a key.
    Set {
        /// The key, added or replaced.
        key: String,
        /// Its new value (metadata values are strings).
        value: String,
    },
    /// Remove a key (an error when it is absent, to catch typos).
    Delete {
        /// The key, which must be present.
        key: String,
    },
}

/// What to re-save. `Default` re-saves every tensor unchanged.
#[derive(Debug, Clone, Default)]
pub struct ResaveOptions {
    /// Start from these tensors (indices into [`Checkpoint::tensors`], as
    /// the GUI's table selection gives them, in any order), or from every
    /// tensor when `None`. Output order follows the checkpoint.
    pub selection: Option<Vec<usize>>,
    /// Keep only tensors whose original name matches one of these regexes
    /// (a search: anchor with `^…$` for one exact name); none keeps all.
    pub keep: Vec<String>,
    /// Then drop tensors whose original name matches one of these.
    pub drop: Vec<String>,
    /// Renames `(from, to)` of exact original names, applied after the
    /// selection, all at once (so `a→b, b→a` swaps).
    pub renames: Vec<(String, String)>,
    /// Edits of `__metadata__`, in order; every other key is kept.
    pub metadata_edits: Vec<MetadataEdit>,
    /// Conversions `(from, to)`: every selected tensor of dtype `from` is
    /// written as `to` (see [`crate::dtype::convert`] for the pairs).
    pub conversions: Vec<(Dtype, Dtype)>,
    /// What a value too large for an F8 target becomes.
    pub overflow: Overflow,
    /// Re-shard: at most this many bytes of tensor data per shard (a
    /// larger tensor gets a shard of its own), written as
    /// `model-0000N-of-0000M.safetensors` with a `model.safetensors.index.json`.
    pub max_shard_bytes: Option<u64>,
    /// Failure injection (tests, and the GUI's tests of its error path):
    /// the output reports a short write, as a full disk would, after this
    /// many bytes in total. `None` in normal use.
    pub fail_after_bytes: Option<u64>,
    /// Write each decoded quantized weight as a plain tensor of its true
    /// values under its logical name, in place of its parts (in the dtype
    /// the writing library computes in, then through `conversions`).
    pub dequantize: bool,
    /// A GGUF's tensors under their Hugging Face names, attention Q and K
    /// un-permuted (GGUF.md, `resave --hf-names`).
    pub hf_names: bool,
}

/// One output tensor: where its bytes come from and how they are written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlannedTensor {
    /// Where its data comes from.
    #[serde(skip)]
    pub source: TensorRef,
    /// Its name in the source.
    pub source_name: String,
    /// Its name in the output.
    pub name: String,
    /// Its dtype in the source.
    pub source_dtype: Dtype,
    /// Its dtype in the output.
    pub dtype: Dtype,
    /// Its shape, the same in source and output.
    pub shape: Vec<u64>,
    /// Its bytes in the output.
    pub nbytes: u64,
    /// Index of its output file in [`ResavePlan::files`].
    pub file: usize,
    /// A decoded quantized weight written as its values: its index in
    /// [`ResavePlan::quant`]'s tensors (`source` is then one of its parts,
    /// `source_dtype` the dtype its values are computed in).
    #[serde(skip)]
    pub logical: Option<usize>,
    /// A GGUF's attention Q or K under `--hf-names`: its rows written in
    /// Hugging Face's order, un-permuted for this many heads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpermute_heads: Option<u64>,
}

/// One output file: a single file, or one shard of a sharded output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Where it is written (its temporary file is beside it).
    pub path: PathBuf,
    /// Its name in the index (the file name).
    pub name: String,
    /// Its tensors: indices into [`ResavePlan::tensors`].
    pub tensors: Vec<usize>,
    /// Bytes of tensor data in the file (its size less the header).
    pub data_bytes: u64,
}

/// Everything [`execute`] will write, decided by [`plan()`].
#[derive(Debug, Clone)]
pub struct ResavePlan {
    /// The output tensors, in the checkpoint's order.
    pub tensors: Vec<PlannedTensor>,
    /// The `__metadata__` of every output file (`None`: no metadata).
    pub metadata: Option<BTreeMap<String, String>>,
    /// The output files (one for a single-file output).
    pub files: Vec<PlannedFile>,
    /// The index file of a sharded output.
    pub index: Option<PathBuf>,
    /// The index's `metadata` object (`total_size` and the keys kept from
    /// the source's index).
    pub index_metadata: serde_json::Map<String, serde_json::Value>,
    /// A folder [`execute`] creates for a sharded output (removed again if
    /// the write fails and it is empty).
    pub create_folder: Option<PathBuf>,
    /// The conversions asked for, `(from, to)`; each tensor of dtype `from`
    /// is written as `to`.
    pub conversions: Vec<(Dtype, Dtype)>,
    /// What a value too large for an F8 target becomes.
    pub overflow: Overflow,
    /// Things worth telling the user (an unused `--dtype`, shards whose
    /// metadata disagree).
    pub warnings: Vec<String>,
    /// See [`ResaveOptions::fail_after_bytes`].
    pub fail_after_bytes: Option<u64>,
    /// The quantization of a `dequantize` plan.
    pub quant: Option<crate::quant::Quantization>,
}

impl ResavePlan {
    /// Bytes of tensor data over every output file.
    pub fn data_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.data_bytes).sum()
    }
}

/// A file that was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// Its path, after the rename into place.
    pub path: PathBuf,
    /// How many tensors it holds.
    pub tensors: usize,
    /// Bytes of tensor data in it (its size less the header).
    pub data_bytes: u64,
    /// Its size in bytes (header included).
    pub file_size: u64,
}

/// A tensor whose dtype was converted, and what happened to its values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TensorConversion {
    /// Its name in the output (after renames).
    pub name: String,
    /// Its dtype in the source.
    pub from: Dtype,
    /// Its dtype in the output.
    pub to: Dtype,
    /// Saturated / NaN / Inf / zero counts.
    #[serde(flatten)]
    pub counts: ConversionCounts,
}

/// What [`execute`] wrote, once every file is in place.
#[derive(Debug, Clone)]
pub struct ResaveReport {
    /// The safetensors files, in shard order.
    pub files: Vec<WrittenFile>,
    /// The index of a sharded output.
    pub index: Option<PathBuf>,
    /// Every output tensor, in the checkpoint's order.
    pub tensors: Vec<PlannedTensor>,
    /// The converted tensors, each with what happened to its values.
    pub conversions: Vec<TensorConversion>,
    /// The sums of the conversions' counts.
    pub conversion_totals: ConversionCounts,
    /// The `__metadata__` of every output file (`None`: none).
    pub metadata: Option<BTreeMap<String, String>>,
    /// Bytes of tensor data over every file (headers excluded).
    pub data_bytes: u64,
    /// Bytes written over every file (headers and index included).
    pub bytes_written: u64,
    /// See [`ResavePlan::warnings`].
    pub warnings: Vec<String>,
}

/// [`plan()`] then [`execute`]: the CLI's path, which has nothing to show
/// between the two.
pub fn resave(
    ck: &Checkpoint,
    out: &Path,
    opts: &ResaveOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ResaveReport, ResaveError> {
    let plan = plan(ck, out, opts)?;
    execute(ck, &plan, cancel, progress)
}
