//! The containers behind one model of a checkpoint: stored tensors (name,
//! dtype, shape, byte order, file and byte range, layout) over one or more
//! files, each file recognised by its content. Safetensors (header types,
//! the validating reader, sharded checkpoints) and NumPy (`.npy`, `.npz`)
//! are read today.
//!
//! [`parse()`] reproduces the reference implementation's verdict on every
//! input (FORMAT.md); [`Checkpoint::open`] opens a file, a shard index or a
//! folder holding one. [`write`](mod@write) writes files the way the reference writer
//! lays them out; [`crate::resave`] re-saves a checkpoint (subset, renames,
//! metadata edits, [`crate::dtype::convert`]ed dtypes, re-sharding) with it.

pub mod blocks;
mod checkpoint;
pub(crate) mod containers;
pub mod dcp;
pub mod decode;
pub mod deepspeed;
mod file;
pub mod flax;
mod gather;
pub mod gguf;
pub mod hdf5;
mod keras;
pub mod numpy;
pub mod onnx;
mod opened;
mod prepare;
pub mod pytorch;
pub mod safetensors;
pub mod stored;
pub mod tensorflow;
#[cfg(test)]
mod test_support;
pub mod zip;

use std::path::PathBuf;
use std::sync::Arc;

pub use checkpoint::{
    Checkpoint, CheckpointKind, INDEX_FILE_NAME, Shard, StoredFacts, TensorRef, Warning,
};
pub use containers::{Container, ContainerKind};
pub use file::StoredFile;
pub use numpy::NumpyParts;
pub use safetensors::write;
pub use safetensors::{
    ForeignFormat, FormatError, FormatWarning, Header, MAX_HEADER_SIZE, N_LEN, OverflowStage,
    Rejected, TensorInfo, detect_foreign, parse, parse_explained,
};

/// Every container but safetensors (the default, asked first), in the
/// order they are asked: adding a container is its folder and its line here.
pub(crate) const CONTAINERS: &[&Container] = &[
    &gguf::CONTAINER,
    // Before the bare pickle, which claims every pickle.
    &dcp::CONTAINER,
    // Before PyTorch, which claims its `*_model_states.pt` zips.
    &deepspeed::CONTAINER,
    &pytorch::CONTAINER,
    &pytorch::PICKLE,
    &numpy::CONTAINER,
    &tensorflow::CONTAINER,
    &flax::CONTAINER,
    &onnx::CONTAINER,
    &keras::CONTAINER,
    &hdf5::container::CONTAINER,
];

/// True when a container keeps a model as the folder `dir` (a DCP
/// checkpoint's `.metadata` and `.distcp` files, a SavedModel): a folder
/// that is one checkpoint, for a series of them.
pub fn is_container_folder(dir: &std::path::Path) -> bool {
    CONTAINERS
        .iter()
        .any(|c| c.folder.is_some_and(|folder| folder(dir).is_some()))
}

impl ContainerKind {
    /// A safetensors file.
    pub const SAFETENSORS: Self = Self::of(&safetensors::CONTAINER);
    /// A GGUF file (llama.cpp's), or the parts of a split one.
    pub const GGUF: Self = Self::of(&gguf::CONTAINER);
    /// A PyTorch checkpoint (`torch.save`'s zip, or its legacy format).
    pub const PYTORCH: Self = Self::of(&pytorch::CONTAINER);
    /// A bare pickle: no tensors, only what its pickle names.
    pub const PICKLE: Self = Self::of(&pytorch::PICKLE);
    /// A NumPy `.npy` file or `.npz` archive.
    pub const NUMPY: Self = Self::of(&numpy::CONTAINER);
    /// An ONNX model (and its external data).
    pub const ONNX: Self = Self::of(&onnx::CONTAINER);
    /// A Keras 3 `.keras` archive.
    pub const KERAS: Self = Self::of(&keras::CONTAINER);
    /// An HDF5 file (`.h5`, Keras' `.weights.h5`).
    pub const HDF5: Self = Self::of(&hdf5::container::CONTAINER);
    /// A Flax checkpoint (`flax.serialization` msgpack).
    pub const FLAX: Self = Self::of(&flax::CONTAINER);
    /// A PyTorch Distributed Checkpoint (a folder of `.distcp` files and
    /// their `.metadata`).
    pub const DCP: Self = Self::of(&dcp::CONTAINER);
    /// A DeepSpeed ZeRO checkpoint (a step folder of per-rank `torch.save`
    /// files, or the folder whose `latest` names it).
    pub const DEEPSPEED: Self = Self::of(&deepspeed::CONTAINER);
    /// A TensorFlow TensorBundle (`.index` and its data shards).
    pub const TENSORFLOW: Self = Self::of(&tensorflow::CONTAINER);
}

/// The file-name extensions of the containers read (a shard index is a
/// `.json`), for open dialogs' filters. Detection itself is by content.
pub const CHECKPOINT_EXTENSIONS: &[&str] = &[
    "safetensors",
    "json",
    "npy",
    "npz",
    "bin",
    "pt",
    "pth",
    "ckpt",
    "gguf",
    "onnx",
    "index",
    "keras",
    "h5",
    "hdf5",
    "msgpack",
];

/// The extensions PyTorch files have (`pytorch_model.bin`, `model.pt`,
/// `best.pth`, Lightning's `last.ckpt`).
pub const TORCH_EXTENSIONS: &[&str] = &["bin", "pt", "pth", "ckpt"];

/// True for a PyTorch shard index's name (`pytorch_model.bin.index.json`).
pub fn is_torch_index_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    TORCH_EXTENSIONS
        .iter()
        .any(|e| lower.ends_with(&format!(".{e}.index.json")))
}

/// True for a file name a checkpoint usually has: a container's extension,
/// or a shard index (`*.safetensors.index.json`,
/// `pytorch_model.bin.index.json`); for file pickers, which list these
/// first. Any file can still be opened: detection is by content.
pub fn is_checkpoint_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".safetensors.index.json")
        || is_torch_index_name(&lower)
        || CHECKPOINT_EXTENSIONS
            .iter()
            .filter(|e| **e != "json")
            .any(|e| lower.rsplit_once('.').is_some_and(|(_, x)| x == *e))
}

/// Why a checkpoint could not be opened. Displayed as its
/// [`LoadError::message`], then `: ` and the path.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read at all.
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The operating system's error (shared, so the error can be cloned).
        source: Arc<std::io::Error>,
    },
    /// The file is not valid safetensors.
    Format {
        /// The file that failed the check.
        path: PathBuf,
        /// Which of the reference's checks it failed, with the evidence.
        error: FormatError,
        /// Tensor names the header repeats, which may explain the error
        /// (the reference keeps the last entry of each).
        repeated: Vec<FormatWarning>,
    },
    /// The shard index is not a valid `model.safetensors.index.json`.
    InvalidIndex {
        /// The index file that cannot be used.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A shard named by the index cannot be opened.
    ShardMissing {
        /// The shard's name in the index.
        shard: String,
        /// Where it was looked for.
        path: PathBuf,
        /// The operating system's error (shared, so the error can be cloned).
        source: Arc<std::io::Error>,
    },
    /// A shard named by the index is not valid safetensors.
    ShardInvalid {
        /// The shard's name in the index.
        shard: String,
        /// The shard file that failed the check.
        path: PathBuf,
        /// Which of the reference's checks it failed, with the evidence.
        error: FormatError,
        /// Tensor names the shard's header repeats (see [`LoadError::Format`]).
        repeated: Vec<FormatWarning>,
    },
    /// The index maps a tensor to a shard that does not hold it.
    IndexMismatch {
        /// The tensor the index maps.
        tensor: String,
        /// The shard the index names.
        shard: String,
        /// A shard that does hold it, if any.
        found_in: Option<String>,
        /// The index file, where the mapping is written.
        path: PathBuf,
    },
    /// A NumPy `.npy` or `.npz` file that is refused (NUMPY.md).
    Numpy {
        /// The file.
        path: PathBuf,
        /// Which rule it breaks, with the evidence.
        error: numpy::NumpyError,
    },
    /// A PyTorch file that is refused or unsafe (PICKLE.md).
    Pytorch {
        /// The file.
        path: PathBuf,
        /// What is wrong, or the globals it would import.
        error: pytorch::archive::TorchError,
    },
    /// A GGUF file that is refused (GGUF.md).
    Gguf {
        /// The file.
        path: PathBuf,
        /// Which rule it breaks, with the evidence.
        error: gguf::header::GgufError,
    },
    /// A file of a container read through `decode` (ONNX, TensorFlow,
    /// HDF5, Flax) that is refused (FRAMEWORKS.md).
    Container {
        /// The file.
        path: PathBuf,
        /// The rule it breaks, as `--json`'s `kind`.
        kind: &'static str,
        /// What was found, where.
        message: String,
        /// The tensor concerned, if any.
        tensor: Option<String>,
    },
    /// A remote file could not be read (HTTP, the cache), or changed on
    /// the server.
    Remote {
        /// The URL (or Hub location).
        path: PathBuf,
        /// What went wrong.
        error: crate::source::RemoteError,
    },
    /// The file changed length since it was opened.
    Changed {
        /// The file whose length changed.
        path: PathBuf,
        /// Its length in bytes when it was opened (and mapped).
        was: u64,
        /// Its length in bytes now; reading past it would raise SIGBUS.
        now: u64,
    },
}

impl LoadError {
    /// A stable kind for JSON output: the reference's kind for a format
    /// error, otherwise the variant name.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadError::Io { .. } => "Io",
            LoadError::Format { error, .. } => error.kind(),
            LoadError::InvalidIndex { .. } => "InvalidIndex",
            LoadError::ShardMissing { .. } => "ShardMissing",
            LoadError::ShardInvalid { .. } => "ShardInvalid",
            LoadError::IndexMismatch { .. } => "IndexMismatch",
            LoadError::Changed { .. } => "Changed",
            LoadError::Numpy { error, .. } => error.kind(),
            LoadError::Pytorch { error, .. } => error.kind(),
            LoadError::Gguf { error, .. } => error.kind(),
            LoadError::Container { kind, .. } => kind,
            LoadError::Remote { error, .. } => error.kind(),
        }
    }

    /// True when a folder was opened that is not one checkpoint: it holds
    /// none, or several files and no index (a folder of a run's steps, say,
    /// which opens as a series).
    pub fn is_folder_of_many(&self) -> bool {
        matches!(self, LoadError::Io { source, .. }
            if source.to_string().starts_with(checkpoint::FOLDER_HOLDS))
    }

    /// True when the error says the input is invalid, as opposed to an I/O
    /// failure that says nothing about validity (`validate` exits 1 for the
    /// former, 2 for the latter).
    pub fn is_verdict(&self) -> bool {
        !matches!(
            self,
            LoadError::Io { .. } | LoadError::Changed { .. } | LoadError::Remote { .. }
        )
    }

    /// The path most relevant to the error.
    pub fn path(&self) -> &std::path::Path {
        match self {
            LoadError::Io { path, .. }
            | LoadError::Format { path, .. }
            | LoadError::InvalidIndex { path, .. }
            | LoadError::ShardMissing { path, .. }
            | LoadError::ShardInvalid { path, .. }
            | LoadError::IndexMismatch { path, .. }
            | LoadError::Changed { path, .. }
            | LoadError::Numpy { path, .. }
            | LoadError::Pytorch { path, .. }
            | LoadError::Gguf { path, .. }
            | LoadError::Container { path, .. }
            | LoadError::Remote { path, .. } => path,
        }
    }

    /// The format error behind this error, if any.
    pub fn format_error(&self) -> Option<&FormatError> {
        match self {
            LoadError::Format { error, .. } | LoadError::ShardInvalid { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The tensor the error is about, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            LoadError::IndexMismatch { tensor, .. } => Some(tensor),
            LoadError::Container { tensor, .. } => tensor.as_deref(),
            LoadError::Numpy { error, .. } => {
                error.member().map(|m| m.strip_suffix(".npy").unwrap_or(m))
            }
            other => other.format_error().and_then(FormatError::tensor),
        }
    }

    /// The globals an unsafe pickle would import (empty otherwise).
    pub fn unsafe_globals(&self) -> &[String] {
        match self {
            LoadError::Pytorch {
                error: pytorch::archive::TorchError::Unsafe { globals },
                ..
            } => globals,
            _ => &[],
        }
    }

    /// The shard the error is about, if any.
    pub fn shard(&self) -> Option<&str> {
        match self {
            LoadError::ShardMissing { shard, .. }
            | LoadError::ShardInvalid { shard, .. }
            | LoadError::IndexMismatch { shard, .. } => Some(shard),
            _ => None,
        }
    }

    /// The message without the path (which [`LoadError::path`] gives), as
    /// JSON documents carry it. For a shard's format error it names the
    /// reference kind too, since the document's own `kind` is
    /// `ShardInvalid`.
    pub fn message(&self) -> String {
        self.text(InnerKind::Named)
    }

    /// The one wording of every variant; `inner` says whether a shard's
    /// format error names its reference kind.
    fn text(&self, inner: InnerKind) -> String {
        let text = self.verdict(inner);
        match self.repeated() {
            [] => text,
            repeated => {
                let notes: Vec<String> = repeated.iter().map(ToString::to_string).collect();
                format!("{text}; note: {}", notes.join("; "))
            }
        }
    }

    /// Tensor names the rejected header repeats: the reference keeps the
    /// last entry of each, which can explain its verdict.
    pub fn repeated(&self) -> &[FormatWarning] {
        match self {
            LoadError::Format { repeated, .. } | LoadError::ShardInvalid { repeated, .. } => {
                repeated
            }
            _ => &[],
        }
    }

    /// The wording of the verdict itself, without the notes.
    fn verdict(&self, inner: InnerKind) -> String {
        match self {
            LoadError::Io { source, .. } => source.to_string(),
            LoadError::Format { error, .. } => error.to_string(),
            LoadError::InvalidIndex { message, .. } => format!("invalid shard index: {message}"),
            LoadError::ShardMissing { shard, source, .. } => {
                format!("shard {shard:?} named by the index cannot be opened ({source})")
            }
            LoadError::ShardInvalid { shard, error, .. } => match inner {
                InnerKind::Named => {
                    format!("shard {shard:?} is invalid: {} ({error})", error.kind())
                }
                InnerKind::Unnamed => format!("shard {shard:?} is invalid: {error}"),
            },
            LoadError::IndexMismatch {
                tensor,
                shard,
                found_in,
                ..
            } => format!(
                "the index maps tensor {tensor:?} to shard {shard:?}, which does not hold it{}",
                found_in
                    .as_ref()
                    .map(|s| format!(" (it is in {s:?})"))
                    .unwrap_or_default()
            ),
            LoadError::Remote { error, .. } => error.message().to_owned(),
            LoadError::Numpy { error, .. } => error.to_string(),
            LoadError::Pytorch { error, .. } => error.to_string(),
            LoadError::Gguf { error, .. } => error.to_string(),
            LoadError::Container { message, .. } => message.clone(),
            LoadError::Changed { was, now, .. } => {
                format!(
                    "the file changed while being read: it is now {now} bytes, {was} were expected; reopen it"
                )
            }
        }
    }
}

/// Whether [`LoadError::text`] names the reference kind of a shard's
/// format error: the JSON message does, the terminal line (whose reader
/// has no `kind` field to miss) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InnerKind {
    Named,
    Unnamed,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            self.text(InnerKind::Unnamed),
            self.path().display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminal_line_is_the_message_and_the_path() {
        let errors = [
            LoadError::Changed {
                path: "m.safetensors".into(),
                was: 10,
                now: 4,
            },
            LoadError::InvalidIndex {
                path: "i.json".into(),
                message: "no weight_map".into(),
            },
            LoadError::Io {
                path: "gone.safetensors".into(),
                source: Arc::new(std::io::Error::other("denied")),
            },
        ];
        for e in errors {
            assert_eq!(
                e.to_string(),
                format!("{}: {}", e.message(), e.path().display())
            );
        }
    }
}
