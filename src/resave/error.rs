//! [`ResaveError`]: every way a re-save can fail, each with its evidence,
//! its stable JSON kind and the path a user should look at.

use std::path::{Path, PathBuf};

use crate::dtype::Dtype;
use crate::format::LoadError;
use crate::format::write::WriteError;
use crate::fsio::{CommitError, FileError};

/// Why a checkpoint could not be re-saved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResaveError {
    /// The source cannot be read (it changed since it was opened).
    #[error(transparent)]
    Load(LoadError),
    /// A keep/drop pattern is not a valid regex.
    #[error("invalid regex {pattern:?}: {message}")]
    InvalidRegex {
        /// The pattern, as given.
        pattern: String,
        /// The regex engine's message (it says where the pattern is wrong).
        message: String,
    },
    /// A selection index is past the end of the tensor list.
    #[error("selection index {index} is out of range: the checkpoint has {count} tensors")]
    SelectionOutOfRange {
        /// The index given.
        index: usize,
        /// The number of tensors in the checkpoint (indices go up to one less).
        count: usize,
    },
    /// Nothing is left to write.
    #[error("no tensor is selected; check --keep and --drop")]
    NothingSelected,
    /// A rename names a tensor the checkpoint does not have.
    #[error("cannot rename {from:?}: the checkpoint has no tensor of that name")]
    RenameMissing {
        /// The name to rename, which the checkpoint lacks.
        from: String,
    },
    /// A rename names a tensor that the selection left out.
    #[error("cannot rename {from:?}: it is not selected (see --keep and --drop)")]
    RenameNotSelected {
        /// The name to rename, which `--keep`/`--drop` left out.
        from: String,
    },
    /// The same tensor is renamed twice.
    #[error("tensor {from:?} is renamed twice")]
    DuplicateRename {
        /// The name renamed more than once.
        from: String,
    },
    /// Two output tensors would have the same name.
    #[error("two tensors would be named {name:?} (from {first:?} and {second:?})")]
    NameCollision {
        /// The output name both would have.
        name: String,
        /// The source name of the first tensor given that name.
        first: String,
        /// The source name of the second.
        second: String,
    },
    /// A rename to `__metadata__`, which readers take for the metadata.
    #[error("cannot rename {from:?} to \"__metadata__\": readers take that key for the metadata")]
    ReservedName {
        /// The source name renamed to `__metadata__`.
        from: String,
    },
    /// A metadata key to delete is absent.
    #[error("cannot delete metadata key {key:?}: it is not there")]
    MetadataKeyMissing {
        /// The key to delete, which the metadata lacks.
        key: String,
    },
    /// A conversion that is not supported.
    #[error(
        "cannot convert {from} to {to}: conversions go from F64, F32, F16 or BF16 to another of those, F8_E4M3 or F8_E5M2"
    )]
    UnsupportedConversion {
        /// The source dtype asked for.
        from: Dtype,
        /// The target dtype asked for.
        to: Dtype,
    },
    /// Two conversions of the same dtype.
    #[error("{from} is converted twice")]
    DuplicateConversion {
        /// The source dtype named by two conversions.
        from: Dtype,
    },
    /// A maximum shard size of 0.
    #[error("the maximum shard size must be at least 1 byte")]
    InvalidShardSize,
    /// The output path does not fit the output's layout.
    #[error("{message}: {}", path.display())]
    InvalidOutput {
        /// The output path, as given.
        path: PathBuf,
        /// What is wrong with it, for people.
        message: String,
    },
    /// An output path is a file of the source checkpoint.
    #[error("refusing to overwrite a file of the checkpoint being read ({}); save under another name: {}", source_file.display(), output.display())]
    WouldOverwriteSource {
        /// The output path, as given.
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
        /// The target whose temporary file failed the check.
        path: PathBuf,
        /// What differs from the plan (a count, a tensor, the metadata, the size).
        message: String,
    },
    /// Renaming the finished files into place failed midway.
    #[error(transparent)]
    Commit(CommitError),
    /// `--hf-names` on a checkpoint it cannot map (not a GGUF of a mapped
    /// architecture, a tensor with no Hugging Face name, rows that are not
    /// whole head pairs).
    #[error("--hf-names: {0}")]
    HfNames(String),
    /// A plan whose indices do not fit together (edited after [`plan()`](super::plan())).
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
            ResaveError::HfNames(_) => "HfNames",
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
            ResaveError::Write(WriteError::File(e)) => e.path(),
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
            WriteError::File(FileError::Cancelled) => ResaveError::Cancelled,
            other => ResaveError::Write(other),
        }
    }
}
