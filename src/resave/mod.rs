//! Re-saving a checkpoint: a selection of its tensors (by index, as the
//! GUI's table gives it, and/or by keep/drop regexes), renamed, with edited
//! `__metadata__`, some dtypes converted, into one file or re-sharded
//! under a new `model.safetensors.index.json`.
//!
//! Two steps, so the GUI can show the outcome (names, dtypes, sizes, file
//! names, errors) before anything is written:
//! - [`plan`] checks the request against the checkpoint and decides every
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::dtype::Dtype;
use crate::dtype::convert::{ConversionCounts, Converter, Overflow, convert_chunks, is_supported};
use crate::format::LoadError;
use crate::format::SafetensorsFile;
use crate::format::write::{TensorEntry, WriteError, header_for_entries};
use crate::format::{Checkpoint, CheckpointKind, INDEX_FILE_NAME, TensorRef};
use crate::fsio::{
    CommitError, FileError, FinishedFile, PendingFile, ShortWriter, commit_all, copy_chunked,
    same_file, write_chunk,
};
use crate::jobs::{CancelToken, Progress};

/// One edit of `__metadata__`, applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataEdit {
    /// Add or change a key.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: String,
    },
    /// Remove a key (an error when it is absent, to catch typos).
    Delete {
        /// The key.
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
    /// written as `to` (see [`super::convert`] for the pairs).
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
}

/// One output tensor.
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
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its bytes in the output.
    pub nbytes: u64,
    /// Index of its output file in [`ResavePlan::files`].
    pub file: usize,
}

/// One output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Where it is written.
    pub path: PathBuf,
    /// Its name in the index (the file name).
    pub name: String,
    /// Its tensors: indices into [`ResavePlan::tensors`].
    pub tensors: Vec<usize>,
    /// Bytes of tensor data.
    pub data_bytes: u64,
}

/// Everything [`execute`] will write, decided by [`plan`].
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
    /// The conversions asked for.
    pub conversions: Vec<(Dtype, Dtype)>,
    /// What a value too large for an F8 target becomes.
    pub overflow: Overflow,
    /// Things worth telling the user (an unused `--dtype`, shards whose
    /// metadata disagree).
    pub warnings: Vec<String>,
    /// See [`ResaveOptions::fail_after_bytes`].
    pub fail_after_bytes: Option<u64>,
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
    /// Its path.
    pub path: PathBuf,
    /// Tensors in it.
    pub tensors: usize,
    /// Bytes of tensor data.
    pub data_bytes: u64,
    /// Its size in bytes (header included).
    pub file_size: u64,
}

/// A tensor whose dtype was converted, and what happened to its values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TensorConversion {
    /// Its output name.
    pub name: String,
    /// The source dtype.
    pub from: Dtype,
    /// The output dtype.
    pub to: Dtype,
    /// Saturated / NaN / Inf / zero counts.
    #[serde(flatten)]
    pub counts: ConversionCounts,
}

/// What [`execute`] wrote.
#[derive(Debug, Clone)]
pub struct ResaveReport {
    /// The safetensors files, in shard order.
    pub files: Vec<WrittenFile>,
    /// The index of a sharded output.
    pub index: Option<PathBuf>,
    /// Every output tensor.
    pub tensors: Vec<PlannedTensor>,
    /// The converted tensors.
    pub conversions: Vec<TensorConversion>,
    /// The sums of the conversions' counts.
    pub conversion_totals: ConversionCounts,
    /// The `__metadata__` written.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Bytes of tensor data.
    pub data_bytes: u64,
    /// Bytes written over every file (headers and index included).
    pub bytes_written: u64,
    /// See [`ResavePlan::warnings`].
    pub warnings: Vec<String>,
}

/// Why a checkpoint could not be re-saved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResaveError {
    /// The source cannot be read (it changed since it was opened).
    #[error(transparent)]
    Load(LoadError),
    /// A keep/drop pattern is not a valid regex.
    #[error("invalid regex {pattern:?}: {message}")]
    InvalidRegex {
        /// The pattern.
        pattern: String,
        /// The regex engine's message.
        message: String,
    },
    /// A selection index is past the end of the tensor list.
    #[error("selection index {index} is out of range: the checkpoint has {count} tensors")]
    SelectionOutOfRange {
        /// The index.
        index: usize,
        /// The number of tensors.
        count: usize,
    },
    /// Nothing is left to write.
    #[error("no tensor is selected; check --keep and --drop")]
    NothingSelected,
    /// A rename names a tensor the checkpoint does not have.
    #[error("cannot rename {from:?}: the checkpoint has no tensor of that name")]
    RenameMissing {
        /// The name.
        from: String,
    },
    /// A rename names a tensor that the selection left out.
    #[error("cannot rename {from:?}: it is not selected (see --keep and --drop)")]
    RenameNotSelected {
        /// The name.
        from: String,
    },
    /// The same tensor is renamed twice.
    #[error("tensor {from:?} is renamed twice")]
    DuplicateRename {
        /// The name.
        from: String,
    },
    /// Two output tensors would have the same name.
    #[error("two tensors would be named {name:?} (from {first:?} and {second:?})")]
    NameCollision {
        /// The name.
        name: String,
        /// One source name.
        first: String,
        /// The other.
        second: String,
    },
    /// A rename to `__metadata__`, which readers take for the metadata.
    #[error("cannot rename {from:?} to \"__metadata__\": readers take that key for the metadata")]
    ReservedName {
        /// The name.
        from: String,
    },
    /// A metadata key to delete is absent.
    #[error("cannot delete metadata key {key:?}: it is not there")]
    MetadataKeyMissing {
        /// The key.
        key: String,
    },
    /// A conversion that is not supported.
    #[error(
        "cannot convert {from} to {to}: conversions go from F64, F32, F16 or BF16 to another of those, F8_E4M3 or F8_E5M2"
    )]
    UnsupportedConversion {
        /// From.
        from: Dtype,
        /// To.
        to: Dtype,
    },
    /// Two conversions of the same dtype.
    #[error("{from} is converted twice")]
    DuplicateConversion {
        /// The dtype.
        from: Dtype,
    },
    /// A maximum shard size of 0.
    #[error("the maximum shard size must be at least 1 byte")]
    InvalidShardSize,
    /// The output path does not fit the output's layout.
    #[error("{message}: {}", path.display())]
    InvalidOutput {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An output path is a file of the source checkpoint.
    #[error("refusing to overwrite a file of the checkpoint being read ({}); save under another name: {}", source_file.display(), output.display())]
    WouldOverwriteSource {
        /// The output path.
        output: PathBuf,
        /// The source file it is.
        source_file: PathBuf,
    },
    /// Writing failed; no output was changed.
    #[error(transparent)]
    Write(WriteError),
    /// A written file did not read back as planned; it was not renamed
    /// into place.
    #[error("the written file does not read back as planned ({message}); nothing was replaced: {}", path.display())]
    Verify {
        /// The target.
        path: PathBuf,
        /// What differs.
        message: String,
    },
    /// Renaming the finished files into place failed midway.
    #[error(transparent)]
    Commit(CommitError),
    /// A plan whose indices do not fit together (edited after [`plan`]).
    #[error("the plan is inconsistent ({0}); make it again with plan()")]
    InvalidPlan(String),
    /// Cancelled; no output was changed.
    #[error("cancelled; no file was changed")]
    Cancelled,
}

impl ResaveError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            ResaveError::Load(e) => e.kind(),
            ResaveError::InvalidRegex { .. } => "InvalidRegex",
            ResaveError::SelectionOutOfRange { .. } => "InvalidSelection",
            ResaveError::NothingSelected => "NothingSelected",
            ResaveError::RenameMissing { .. } => "UnknownTensor",
            ResaveError::RenameNotSelected { .. } => "RenameNotSelected",
            ResaveError::DuplicateRename { .. } => "DuplicateRename",
            ResaveError::NameCollision { .. } => "NameCollision",
            ResaveError::ReservedName { .. } => "ReservedName",
            ResaveError::MetadataKeyMissing { .. } => "MetadataKeyMissing",
            ResaveError::UnsupportedConversion { .. } => "UnsupportedConversion",
            ResaveError::DuplicateConversion { .. } => "DuplicateConversion",
            ResaveError::InvalidShardSize => "InvalidShardSize",
            ResaveError::InvalidOutput { .. } => "InvalidOutput",
            ResaveError::WouldOverwriteSource { .. } => "WouldOverwriteSource",
            ResaveError::Write(e) => e.kind(),
            ResaveError::Verify { .. } => "VerifyFailed",
            ResaveError::Commit(_) => "CommitFailed",
            ResaveError::InvalidPlan(_) => "InvalidPlan",
            ResaveError::Cancelled => "Cancelled",
        }
    }

    /// The path most relevant to the error, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ResaveError::Load(e) => Some(e.path()),
            ResaveError::InvalidOutput { path, .. } | ResaveError::Verify { path, .. } => {
                Some(path)
            }
            ResaveError::WouldOverwriteSource { output, .. } => Some(output),
            ResaveError::Write(WriteError::Io { path, .. }) => Some(path),
            ResaveError::Commit(c) => c.error.path(),
            _ => None,
        }
    }
}

impl From<FileError> for ResaveError {
    fn from(e: FileError) -> Self {
        WriteError::from(e).into()
    }
}

impl From<WriteError> for ResaveError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Cancelled => ResaveError::Cancelled,
            other => ResaveError::Write(other),
        }
    }
}

/// Parses a size: `5GB` (5·10^9), `5GiB` (5·2^30), `1.5MB`, `500kB` or a
/// plain byte count. Units: B, kB/KB, MB, GB, TB (powers of 1000), KiB, MiB,
/// GiB, TiB (powers of 1024); case-insensitive. Fractions round down to
/// whole bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit_bytes: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?} (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            ));
        }
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let bad = || format!("{text:?} is not a size (such as 5GB, 5GiB or 1000000)");
    if whole.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 18 {
        return Err(bad());
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let bytes = whole
        .checked_mul(unit_bytes)
        .and_then(|w| w.checked_add(frac_value * unit_bytes / scale))
        .ok_or_else(|| format!("{text:?} is too large"))?;
    u64::try_from(bytes).map_err(|_| format!("{text:?} is too large"))
}

/// Checks `opts` against `ck` and decides every output tensor and file,
/// without writing anything. `out` is the output path:
/// - one file (no `max_shard_bytes`, `out` not ending in `.json`): `out`
///   itself, or `out/model.safetensors` when `out` is a folder;
/// - sharded (`max_shard_bytes`, or `out` ending in `.json`): the index at
///   `out` when it ends in `.json`, else `out/model.safetensors.index.json`
///   (the folder is created if missing), with the shards beside it.
pub fn plan(ck: &Checkpoint, out: &Path, opts: &ResaveOptions) -> Result<ResavePlan, ResaveError> {
    let selected = select(ck, opts)?;
    let names = rename(ck, &selected, &opts.renames)?;
    let mut warnings = Vec::new();

    let mut conversions: HashMap<Dtype, Dtype> = HashMap::new();
    for &(from, to) in &opts.conversions {
        if !is_supported(from, to) {
            return Err(ResaveError::UnsupportedConversion { from, to });
        }
        if conversions.insert(from, to).is_some() {
            return Err(ResaveError::DuplicateConversion { from });
        }
    }
    let mut tensors = Vec::with_capacity(selected.len());
    for (&t, name) in selected.iter().zip(names) {
        let Some(info) = ck.info(t) else { continue };
        let dtype = conversions.get(&info.dtype).copied().unwrap_or(info.dtype);
        // Conversions go to whole-byte dtypes, so this cannot overflow more
        // than the source's own (validated) size.
        let nbytes = if dtype == info.dtype {
            info.nbytes
        } else {
            info.numel.saturating_mul(u64::from(dtype.bits() / 8))
        };
        tensors.push(PlannedTensor {
            source: t,
            source_name: info.name.clone(),
            name,
            source_dtype: info.dtype,
            dtype,
            shape: info.shape.clone(),
            nbytes,
            file: 0,
        });
    }
    for &(from, to) in &opts.conversions {
        if !tensors.iter().any(|t| t.source_dtype == from) {
            warnings.push(format!(
                "no selected tensor is {from}; the conversion {from}={to} does nothing"
            ));
        }
    }

    let mut metadata = source_metadata(ck, &mut warnings);
    for edit in &opts.metadata_edits {
        match edit {
            MetadataEdit::Set { key, value } => {
                metadata
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key.clone(), value.clone());
            }
            MetadataEdit::Delete { key } => {
                if metadata.as_mut().and_then(|m| m.remove(key)).is_none() {
                    return Err(ResaveError::MetadataKeyMissing { key: key.clone() });
                }
            }
        }
    }

    let sharded = opts.max_shard_bytes.is_some() || is_json(out);
    if opts.max_shard_bytes == Some(0) {
        return Err(ResaveError::InvalidShardSize);
    }
    let (files, index, create_folder) = if sharded {
        let (folder, index, create) = if is_json(out) {
            let folder = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (folder, out.to_path_buf(), false)
        } else if out.is_dir() {
            (out.to_path_buf(), out.join(INDEX_FILE_NAME), false)
        } else if out.exists() || has_extension(out, "safetensors") {
            return Err(ResaveError::InvalidOutput {
                path: out.to_path_buf(),
                message:
                    "a sharded output needs a folder or an index path (….index.json), not a file"
                        .into(),
            });
        } else {
            (out.to_path_buf(), out.join(INDEX_FILE_NAME), true)
        };
        let groups = shard_groups(&tensors, opts.max_shard_bytes.unwrap_or(u64::MAX));
        let count = groups.len();
        let files = groups
            .into_iter()
            .enumerate()
            .map(|(i, members)| {
                let name = format!("model-{:05}-of-{count:05}.safetensors", i + 1);
                PlannedFile {
                    path: folder.join(&name),
                    name,
                    data_bytes: members.iter().map(|&k| tensors[k].nbytes).sum(),
                    tensors: members,
                }
            })
            .collect::<Vec<_>>();
        (files, Some(index), create.then_some(folder))
    } else {
        let path = if out.is_dir() {
            out.join("model.safetensors")
        } else {
            out.to_path_buf()
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = PlannedFile {
            path,
            name,
            tensors: (0..tensors.len()).collect(),
            data_bytes: tensors.iter().map(|t| t.nbytes).sum(),
        };
        (vec![file], None, None)
    };
    for (f, file) in files.iter().enumerate() {
        for &k in &file.tensors {
            tensors[k].file = f;
        }
    }
    let mut index_metadata = serde_json::Map::new();
    if let CheckpointKind::Sharded {
        metadata: serde_json::Value::Object(m),
        ..
    } = &ck.kind
    {
        index_metadata.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let total: u64 = files.iter().map(|f| f.data_bytes).sum();
    index_metadata.insert("total_size".into(), total.into());

    let plan = ResavePlan {
        tensors,
        metadata,
        files,
        index,
        index_metadata,
        create_folder,
        conversions: opts.conversions.clone(),
        overflow: opts.overflow,
        warnings,
        fail_after_bytes: opts.fail_after_bytes,
    };
    check_not_source(ck, &plan)?;
    // Catch reserved names, size and header limits now, not halfway.
    for file in &plan.files {
        header_for_entries(&entries(&plan, file), plan.metadata.as_ref())?;
    }
    Ok(plan)
}

/// Writes `plan` (from [`plan`] on the same checkpoint). Progress counts
/// bytes written; cancellation is checked between chunks of at most 8 MiB.
pub fn execute(
    ck: &Checkpoint,
    plan: &ResavePlan,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ResaveReport, ResaveError> {
    if cancel.is_cancelled() {
        return Err(ResaveError::Cancelled);
    }
    check_consistent(ck, plan)?;
    check_not_source(ck, plan)?;
    for shard in &ck.shards {
        shard.file.check_unchanged().map_err(ResaveError::Load)?;
    }
    let headers = plan
        .files
        .iter()
        .map(|f| header_for_entries(&entries(plan, f), plan.metadata.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let index_json = plan.index.as_ref().map(|_| index_document(plan));
    let total = headers
        .iter()
        .map(|(h, _)| h.len() as u64)
        .sum::<u64>()
        .saturating_add(plan.data_bytes())
        .saturating_add(index_json.as_ref().map_or(0, |j| j.len() as u64));
    progress.set_total(total);

    let created = match &plan.create_folder {
        Some(folder) if !folder.exists() => {
            std::fs::create_dir_all(folder).map_err(|e| {
                ResaveError::Write(WriteError::Io {
                    path: folder.clone(),
                    source: e.into(),
                })
            })?;
            Some(folder.clone())
        }
        _ => None,
    };
    let result = write_all_files(ck, plan, &headers, index_json.as_deref(), cancel, progress);
    match result {
        Ok(report) => Ok(report),
        Err(e) => {
            if let Some(folder) = created {
                // Only succeeds when empty: never removes anything but the
                // folder this call created.
                let _ = std::fs::remove_dir(folder);
            }
            Err(e)
        }
    }
}

/// [`plan`] then [`execute`].
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

fn write_all_files(
    ck: &Checkpoint,
    plan: &ResavePlan,
    headers: &[(Vec<u8>, Vec<usize>)],
    index_json: Option<&[u8]>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ResaveReport, ResaveError> {
    let converters: HashMap<Dtype, Converter> = plan
        .conversions
        .iter()
        .filter_map(|&(from, to)| Some((from, Converter::new(to, plan.overflow)?)))
        .collect();
    let mut budget = plan.fail_after_bytes;
    let mut finished: Vec<FinishedFile> = Vec::with_capacity(plan.files.len() + 1);
    let mut written = Vec::with_capacity(plan.files.len());
    let mut conversions = Vec::new();
    let mut bytes_written = 0u64;
    for (file, (header, order)) in plan.files.iter().zip(headers) {
        let mut pending = PendingFile::create(&file.path)?;
        let mut w = ShortWriter::new(pending.writer(), budget);
        let body = (|| -> std::io::Result<()> {
            write_chunk(&mut w, header, header.len() as u64, cancel, progress)?;
            for &k in order {
                let Some(t) = file.tensors.get(k).and_then(|&ti| plan.tensors.get(ti)) else {
                    continue;
                };
                let bytes = ck.bytes(t.source);
                if t.dtype == t.source_dtype {
                    copy_chunked(&mut w, bytes, cancel, progress)?;
                } else if let Some(&conv) = converters.get(&t.source_dtype) {
                    let mut counts = ConversionCounts::default();
                    convert_chunks(t.source_dtype, bytes, conv, &mut counts, |chunk| {
                        write_chunk(&mut w, chunk, chunk.len() as u64, cancel, progress)
                    })?;
                    conversions.push(TensorConversion {
                        name: t.name.clone(),
                        from: t.source_dtype,
                        to: t.dtype,
                        counts,
                    });
                }
            }
            w.flush()
        })();
        budget = w.remaining();
        body.map_err(|e| pending.error(e))?;
        let done = pending.finish()?;
        let file_size = verify(plan, file, header, &done)?;
        bytes_written += file_size;
        written.push(WrittenFile {
            path: file.path.clone(),
            tensors: file.tensors.len(),
            data_bytes: file.data_bytes,
            file_size,
        });
        finished.push(done);
    }
    if let (Some(index), Some(json)) = (&plan.index, index_json) {
        let mut pending = PendingFile::create(index)?;
        let mut w = ShortWriter::new(pending.writer(), budget);
        let r = w.write_all(json).and_then(|()| w.flush());
        r.map_err(|e| pending.error(e))?;
        progress.add(json.len() as u64);
        bytes_written += json.len() as u64;
        finished.push(pending.finish()?);
    }
    if cancel.is_cancelled() {
        return Err(ResaveError::Cancelled);
    }
    commit_all(finished).map_err(ResaveError::Commit)?;
    let mut conversion_totals = ConversionCounts::default();
    for c in &conversions {
        conversion_totals.add(&c.counts);
    }
    Ok(ResaveReport {
        files: written,
        index: plan.index.clone(),
        tensors: plan.tensors.clone(),
        conversions,
        conversion_totals,
        metadata: plan.metadata.clone(),
        data_bytes: plan.data_bytes(),
        bytes_written,
        warnings: plan.warnings.clone(),
    })
}

/// Re-opens a finished temporary file with the validating reader and
/// checks it holds exactly the planned tensors; returns its size.
fn verify(
    plan: &ResavePlan,
    file: &PlannedFile,
    header: &[u8],
    done: &FinishedFile,
) -> Result<u64, ResaveError> {
    let fail = |message: String| ResaveError::Verify {
        path: file.path.clone(),
        message,
    };
    let back = SafetensorsFile::open(done.temp_path()).map_err(|e| fail(e.to_string()))?;
    let h = back.header();
    if h.tensors.len() != file.tensors.len() {
        return Err(fail(format!(
            "{} tensors instead of {}",
            h.tensors.len(),
            file.tensors.len()
        )));
    }
    for t in file.tensors.iter().filter_map(|&k| plan.tensors.get(k)) {
        let found = h.tensors.iter().find(|i| i.name == t.name);
        match found {
            Some(i) if i.dtype == t.dtype && i.shape == t.shape && i.nbytes == t.nbytes => {}
            Some(i) => {
                return Err(fail(format!(
                    "tensor {:?} reads back as {} {:?}",
                    t.name, i.dtype, i.shape
                )));
            }
            None => return Err(fail(format!("tensor {:?} is missing", t.name))),
        }
    }
    if h.metadata != plan.metadata {
        return Err(fail("the metadata differs".into()));
    }
    let expected = header.len() as u64 + file.data_bytes;
    if back.file_size() != expected {
        return Err(fail(format!(
            "{} bytes instead of {expected}",
            back.file_size()
        )));
    }
    Ok(back.file_size())
}

fn index_document(plan: &ResavePlan) -> Vec<u8> {
    let weight_map: serde_json::Map<String, serde_json::Value> = plan
        .tensors
        .iter()
        .map(|t| {
            let file = plan.files.get(t.file).map(|f| f.name.clone());
            (
                t.name.clone(),
                serde_json::Value::String(file.unwrap_or_default()),
            )
        })
        .collect();
    let doc = serde_json::json!({
        "metadata": plan.index_metadata,
        "weight_map": weight_map,
    });
    let mut text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    text.push(b'\n');
    text
}

fn entries<'a>(plan: &'a ResavePlan, file: &PlannedFile) -> Vec<TensorEntry<'a>> {
    file.tensors
        .iter()
        .filter_map(|&k| plan.tensors.get(k))
        .map(|t| TensorEntry {
            name: &t.name,
            dtype: t.dtype,
            shape: &t.shape,
            nbytes: t.nbytes,
        })
        .collect()
}

/// The tensors to write, in checkpoint order.
fn select(ck: &Checkpoint, opts: &ResaveOptions) -> Result<Vec<TensorRef>, ResaveError> {
    let compile = |patterns: &[String]| {
        patterns
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|e| ResaveError::InvalidRegex {
                    pattern: p.clone(),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let keep = compile(&opts.keep)?;
    let drop = compile(&opts.drop)?;
    let count = ck.tensors.len();
    let mut chosen = vec![opts.selection.is_none(); count];
    for &index in opts.selection.iter().flatten() {
        *chosen
            .get_mut(index)
            .ok_or(ResaveError::SelectionOutOfRange { index, count })? = true;
    }
    let selected: Vec<TensorRef> = ck
        .tensors
        .iter()
        .zip(chosen)
        .filter(|&(_, c)| c)
        .map(|(&t, _)| t)
        .filter(|&t| {
            let Some(name) = ck.info(t).map(|i| i.name.as_str()) else {
                return false;
            };
            (keep.is_empty() || keep.iter().any(|r| r.is_match(name)))
                && !drop.iter().any(|r| r.is_match(name))
        })
        .collect();
    if selected.is_empty() {
        return Err(ResaveError::NothingSelected);
    }
    Ok(selected)
}

/// The output name of every selected tensor.
fn rename(
    ck: &Checkpoint,
    selected: &[TensorRef],
    renames: &[(String, String)],
) -> Result<Vec<String>, ResaveError> {
    let mut map: HashMap<&str, &str> = HashMap::with_capacity(renames.len());
    let selected_names: HashSet<&str> = selected
        .iter()
        .filter_map(|&t| ck.info(t).map(|i| i.name.as_str()))
        .collect();
    for (from, to) in renames {
        if map.insert(from, to).is_some() {
            return Err(ResaveError::DuplicateRename { from: from.clone() });
        }
        if ck.find(from).is_none() {
            return Err(ResaveError::RenameMissing { from: from.clone() });
        }
        if !selected_names.contains(from.as_str()) {
            return Err(ResaveError::RenameNotSelected { from: from.clone() });
        }
        if to == "__metadata__" {
            return Err(ResaveError::ReservedName { from: from.clone() });
        }
    }
    let mut out = Vec::with_capacity(selected.len());
    let mut owner: HashMap<String, &str> = HashMap::with_capacity(selected.len());
    for &t in selected {
        let Some(source) = ck.info(t).map(|i| i.name.as_str()) else {
            continue;
        };
        let name = map.get(source).copied().unwrap_or(source).to_owned();
        if let Some(first) = owner.insert(name.clone(), source) {
            return Err(ResaveError::NameCollision {
                name,
                first: first.to_owned(),
                second: source.to_owned(),
            });
        }
        out.push(name);
    }
    Ok(out)
}

/// The source's `__metadata__`: the file's, or for a sharded model the
/// union of its shards' (the first shard wins where they disagree, with a
/// warning).
fn source_metadata(
    ck: &Checkpoint,
    warnings: &mut Vec<String>,
) -> Option<BTreeMap<String, String>> {
    let mut merged: Option<BTreeMap<String, String>> = None;
    for shard in &ck.shards {
        let Some(m) = &shard.file.header().metadata else {
            continue;
        };
        let target = merged.get_or_insert_with(BTreeMap::new);
        for (k, v) in m {
            match target.get(k) {
                Some(existing) if existing != v => warnings.push(format!(
                    "shards disagree on metadata key {k:?}; keeping {existing:?}, not {v:?} from {}",
                    shard.name
                )),
                Some(_) => {}
                None => {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
    }
    merged
}

/// Greedy shards in tensor order: a new shard starts when the next tensor
/// would take the current one past `max_bytes` (a larger tensor gets a
/// shard of its own).
fn shard_groups(tensors: &[PlannedTensor], max_bytes: u64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut size = 0u64;
    for (k, t) in tensors.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if !g.is_empty() && size.saturating_add(t.nbytes) <= max_bytes => {
                g.push(k);
                size += t.nbytes;
            }
            _ => {
                groups.push(vec![k]);
                size = t.nbytes;
            }
        }
    }
    groups
}

/// Every tensor in exactly one file, every index in range, every source
/// tensor in the checkpoint, and sizes that match dtype × shape (the
/// header check does the last).
fn check_consistent(ck: &Checkpoint, plan: &ResavePlan) -> Result<(), ResaveError> {
    let mut owner = vec![None; plan.tensors.len()];
    for (f, file) in plan.files.iter().enumerate() {
        for &k in &file.tensors {
            match owner.get_mut(k) {
                Some(slot @ None) => *slot = Some(f),
                Some(Some(_)) => {
                    return Err(ResaveError::InvalidPlan(format!(
                        "tensor {k} is in two files"
                    )));
                }
                None => {
                    return Err(ResaveError::InvalidPlan(format!(
                        "file {f} lists tensor {k}"
                    )));
                }
            }
        }
    }
    for (k, t) in plan.tensors.iter().enumerate() {
        if owner[k] != Some(t.file) {
            return Err(ResaveError::InvalidPlan(format!(
                "tensor {:?} is not in the file it names",
                t.name
            )));
        }
        let source = ck.info(t.source);
        if source.is_none_or(|i| i.dtype != t.source_dtype || i.shape != t.shape) {
            return Err(ResaveError::InvalidPlan(format!(
                "tensor {:?} does not match its source in this checkpoint",
                t.name
            )));
        }
        let converted = t.dtype != t.source_dtype;
        if converted && !plan.conversions.contains(&(t.source_dtype, t.dtype)) {
            return Err(ResaveError::InvalidPlan(format!(
                "tensor {:?} changes dtype without a conversion",
                t.name
            )));
        }
    }
    Ok(())
}

/// Refuses any output path that is a file of the source.
fn check_not_source(ck: &Checkpoint, plan: &ResavePlan) -> Result<(), ResaveError> {
    let mut sources: Vec<&Path> = ck.shards.iter().map(|s| s.file.path()).collect();
    sources.push(&ck.path);
    let outputs = plan
        .files
        .iter()
        .map(|f| f.path.as_path())
        .chain(plan.index.as_deref());
    for output in outputs {
        if let Some(source) = sources.iter().find(|s| same_file(output, s)) {
            return Err(ResaveError::WouldOverwriteSource {
                output: output.to_path_buf(),
                source_file: source.to_path_buf(),
            });
        }
    }
    Ok(())
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

fn is_json(path: &Path) -> bool {
    has_extension(path, "json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("5GB"), Ok(5_000_000_000));
        assert_eq!(parse_size("5GiB"), Ok(5 << 30));
        assert_eq!(parse_size("5gib"), Ok(5 << 30));
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("1.5MB"), Ok(1_500_000));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size("10 kB"), Ok(10_000));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        for bad in [
            "",
            "GB",
            "5XB",
            "-5",
            "1.2.3MB",
            ".",
            "99999999999999999999TB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    fn planned(nbytes: u64) -> PlannedTensor {
        PlannedTensor {
            source: TensorRef { shard: 0, index: 0 },
            source_name: String::new(),
            name: String::new(),
            source_dtype: Dtype::U8,
            dtype: Dtype::U8,
            shape: vec![nbytes],
            nbytes,
            file: 0,
        }
    }

    #[test]
    fn shards_are_greedy_in_order() {
        let t: Vec<PlannedTensor> = [4, 4, 3, 10, 1, 0].into_iter().map(planned).collect();
        assert_eq!(
            shard_groups(&t, 8),
            vec![vec![0, 1], vec![2], vec![3], vec![4, 5]]
        );
        assert_eq!(shard_groups(&t, u64::MAX), vec![vec![0, 1, 2, 3, 4, 5]]);
    }
}
