//! A checkpoint: the model every reader sees. One file of any container,
//! or a sharded model described by a `model.safetensors.index.json`, seen
//! as one list of stored tensors with O(1) lookup by name. `open` finds
//! and opens the files; `read` is how readers reach the bytes (fetching
//! remote ranges, preparing tensors not stored in C order).

mod open;
mod read;
pub(crate) use open::FOLDER_HOLDS;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::TensorInfo;
use super::stored::{ByteOrder, Encoding, Layout, Placement};
use super::{ContainerKind, StoredFile};

/// The usual name of a shard index.
pub const INDEX_FILE_NAME: &str = "model.safetensors.index.json";

/// The shard index of a sharded PyTorch model.
pub const TORCH_INDEX_NAME: &str = "pytorch_model.bin.index.json";

/// Index files larger than this are refused rather than read into memory.
pub(crate) const MAX_INDEX_BYTES: u64 = 512 * 1024 * 1024;

/// What was opened: one file, or a shard index and its shards.
#[derive(Debug)]
pub enum CheckpointKind {
    /// One safetensors file: [`Checkpoint::shards`] holds it alone.
    Single,
    /// A folder of files of one container (NumPy `.npy`/`.npz`), with no
    /// index: every file's tensors, in file-name order.
    Folder,
    /// A shard index (`model.safetensors.index.json`) and the shards it names.
    Sharded {
        /// The index's `metadata` object (`null` when absent).
        metadata: serde_json::Value,
        /// `metadata.total_size`, when present and an integer.
        total_size: Option<u64>,
        /// Length of the index file in bytes, as read.
        index_bytes: u64,
    },
}

/// One file of a checkpoint.
#[derive(Debug)]
pub struct Shard {
    name: String,
    file: StoredFile,
}

impl Shard {
    /// The shard's name as the index writes it (the file name for a single
    /// file).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The opened file: mapped, its header validated.
    pub fn file(&self) -> &StoredFile {
        &self.file
    }
}

/// Where a tensor of a checkpoint lives. Made only by [`Checkpoint`], so
/// a reference from a checkpoint always finds its tensor there (use it with
/// the checkpoint it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorRef {
    shard: usize,
    index: usize,
}

impl TensorRef {
    /// A reference for the crate's own tests, which build plans by hand.
    #[cfg(test)]
    pub(crate) const fn for_tests(shard: usize, index: usize) -> Self {
        Self { shard, index }
    }

    /// Index into [`Checkpoint::shards`] (0 for a single file).
    pub fn shard(self) -> usize {
        self.shard
    }

    /// Index into that shard's header tensors.
    pub fn index(self) -> usize {
        self.index
    }
}

/// Something worth telling the user that does not make the checkpoint invalid.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// A stable identifier for JSON output (`DuplicateTensor`, …).
    pub kind: &'static str,
    /// What was found, for people.
    pub message: String,
    /// The tensor concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// The shard concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

/// How one tensor is stored, beyond its name, dtype and shape
/// ([`Checkpoint::stored_facts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFacts {
    /// The elements' byte order in the file.
    pub byte_order: ByteOrder,
    /// Strides in elements, when the tensor is not stored in C order.
    pub strides: Option<Vec<u64>>,
    /// The first element's index in its storage (0 for a tensor of its own).
    pub storage_offset: u64,
    /// The storage's id when other tensors read it too (tied weights).
    pub shared_storage: Option<usize>,
    /// The data's byte range in the file, when it is stored as is.
    pub data_range: Option<std::ops::Range<u64>>,
    /// True when the data is compressed (a deflated zip member).
    pub compressed: bool,
    /// What the container says of the tensor (`descr`, `member`, …).
    pub container: Vec<(&'static str, serde_json::Value)>,
}

impl Default for StoredFacts {
    fn default() -> Self {
        Self {
            byte_order: ByteOrder::Little,
            strides: None,
            storage_offset: 0,
            shared_storage: None,
            data_range: None,
            compressed: false,
            container: Vec::new(),
        }
    }
}

/// An opened, validated checkpoint: one file or every shard of an index,
/// mapped read-only, with its tensors in offset order. Made only by
/// [`Checkpoint::open`]; every [`TensorRef`] in [`Checkpoint::tensors`]
/// finds its entry.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    kind: CheckpointKind,
    shards: Vec<Shard>,
    tensors: Vec<TensorRef>,
    warnings: Vec<Warning>,
    /// Position in `tensors` by name (the first, when a sharded model holds
    /// a name twice), so lookups by name cost O(1).
    by_name: HashMap<String, usize>,
}

impl Checkpoint {
    /// Assembles a checkpoint from validated shards and indexes its names.
    fn new(
        path: PathBuf,
        kind: CheckpointKind,
        shards: Vec<Shard>,
        tensors: Vec<TensorRef>,
        warnings: Vec<Warning>,
    ) -> Self {
        let mut by_name = HashMap::with_capacity(tensors.len());
        for (position, t) in tensors.iter().enumerate() {
            if let Some(info) = shards
                .get(t.shard)
                .and_then(|s| s.file.header().tensors().get(t.index))
            {
                by_name.entry(info.name().to_owned()).or_insert(position);
            }
        }
        Self {
            path,
            kind,
            shards,
            tensors,
            warnings,
            by_name,
        }
    }

    /// A checkpoint of several files of one container with no index (a
    /// folder of NumPy files, a split GGUF's parts): every file's tensors
    /// in the order given; a name a later file repeats is read from the
    /// first, and `repeated(shard, tensor, first)` says so.
    pub(crate) fn of_parts(
        path: PathBuf,
        parts: Vec<(String, StoredFile)>,
        repeated: impl Fn(&str, &str, &str) -> String,
    ) -> Self {
        let mut warnings = Vec::new();
        let shards: Vec<Shard> = parts
            .into_iter()
            .map(|(name, file)| {
                warnings.extend(open::format_warnings(&file, Some(&name)));
                Shard { name, file }
            })
            .collect();
        let mut seen: HashMap<&str, &str> = HashMap::new();
        let mut tensors = Vec::new();
        for (s, shard) in shards.iter().enumerate() {
            for (index, t) in shard.file.header().tensors().iter().enumerate() {
                if let Some(first) = seen.get(t.name()) {
                    warnings.push(Warning {
                        kind: "DuplicateTensor",
                        message: repeated(&shard.name, t.name(), first),
                        tensor: Some(t.name().to_owned()),
                        shard: Some(shard.name.clone()),
                    });
                } else {
                    seen.insert(t.name(), &shard.name);
                }
                tensors.push(TensorRef { shard: s, index });
            }
        }
        drop(seen);
        Self::new(path, CheckpointKind::Folder, shards, tensors, warnings)
    }

    /// The path that was opened: a file or an index (a folder resolves to
    /// the file inside it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A single file or a sharded model.
    pub fn kind(&self) -> &CheckpointKind {
        &self.kind
    }

    /// The files; exactly one for a single file, in name order for shards.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Every tensor: offset order within a shard, shard by shard.
    pub fn tensors(&self) -> &[TensorRef] {
        &self.tensors
    }

    /// Quirks and inconsistencies found while opening.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Every tensor with its header entry, in [`Checkpoint::tensors`] order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (TensorRef, &TensorInfo)> + '_ {
        self.tensors.iter().map(|&t| (t, self.entry_of(t)))
    }

    /// The tensor at `position` in [`Checkpoint::tensors`], with its entry.
    pub fn entry(&self, position: usize) -> Option<(TensorRef, &TensorInfo)> {
        let t = *self.tensors.get(position)?;
        Some((t, self.entry_of(t)))
    }

    /// The entry of one of this checkpoint's own references.
    fn entry_of(&self, t: TensorRef) -> &TensorInfo {
        // Every reference in `tensors` was made from its shard's header.
        &self.shards[t.shard].file.header().tensors()[t.index]
    }

    /// The position in [`Checkpoint::tensors`] of the tensor called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// True for a checkpoint of several files: a sharded model, or a
    /// folder of files (each tensor then names its file, as its shard).
    pub fn is_sharded(&self) -> bool {
        matches!(
            self.kind,
            CheckpointKind::Sharded { .. } | CheckpointKind::Folder
        )
    }

    /// The header entry of a tensor; `None` for a reference this
    /// checkpoint did not make (one of another checkpoint).
    pub fn info(&self, t: TensorRef) -> Option<&TensorInfo> {
        self.shards
            .get(t.shard)?
            .file
            .header()
            .tensors()
            .get(t.index)
    }

    /// The bytes of a tensor in C order, little-endian: a slice of its
    /// shard's mapping, or (for a tensor stored otherwise: byte-swapped,
    /// strided, deflated) of the scratch space [`Checkpoint::fetch`]
    /// prepared; empty before that.
    pub fn bytes(&self, t: TensorRef) -> &[u8] {
        self.shards
            .get(t.shard)
            .map_or(&[], |s| s.file.bytes_at(t.index))
    }

    /// The container of the checkpoint's files.
    pub fn container(&self) -> ContainerKind {
        self.shards
            .first()
            .map_or(ContainerKind::SAFETENSORS, |s| s.file.kind())
    }

    /// The shape of a tensor as its container gives it: a GGUF tensor's
    /// row-major shape (a block type's stored bytes are shaped otherwise),
    /// else its header entry's.
    pub fn shape_of(&self, t: TensorRef) -> &[u64] {
        let file = self.shards.get(t.shard).map(|s| &s.file);
        if let Some(shape) = file.and_then(|f| f.container_shape(t.index)) {
            return shape;
        }
        self.info(t).map_or(&[], TensorInfo::shape)
    }

    /// True when the tensor's bytes are read in place; false when reading
    /// them first prepares them in scratch space (see [`Checkpoint::fetch`]).
    pub fn is_in_place(&self, t: TensorRef) -> bool {
        self.shards
            .get(t.shard)
            .is_none_or(|s| s.file.is_in_place(t.index))
    }

    /// Where a tensor lies, for containers that say (`None` for
    /// safetensors: C order, little-endian, in place).
    pub fn placement(&self, t: TensorRef) -> Option<&Placement> {
        self.shards.get(t.shard)?.file.placement(t.index)
    }

    /// How a tensor's bytes are kept when they are no range of a file
    /// (`deflated`, `decoded`: chunks, slices, typed fields), for a drawn
    /// table row; `None` for a tensor stored as is.
    pub fn encoding_label(&self, t: TensorRef) -> Option<&'static str> {
        match &self.placement(t)?.storage().encoding {
            Encoding::Plain => None,
            Encoding::Deflated { .. } => Some("deflated"),
            Encoding::Decoded(_) => Some("decoded"),
        }
    }

    /// The name of the file beside the one opened that holds a tensor's
    /// bytes (an ONNX model's external data); `None` for the file itself.
    pub fn other_file_of(&self, t: TensorRef) -> Option<&str> {
        let shard = self.shards.get(t.shard)?;
        let k = shard.file.placement(t.index)?.storage().file;
        shard
            .file
            .other_files()
            .nth(k.checked_sub(1)?)
            .map(|(n, _)| n)
    }

    /// The byte range of a tensor's data in its file when it is stored as
    /// is (`None` for compressed data); one look, for a drawn table row.
    pub fn file_range(&self, t: TensorRef) -> Option<std::ops::Range<u64>> {
        self.shards.get(t.shard)?.file.stored_range(t.index)
    }

    /// How a tensor is stored, where that differs from a safetensors
    /// tensor (C order, little-endian, its own bytes), with what its
    /// container says of it: what `info` reports beside the model's fields.
    pub fn stored_facts(&self, t: TensorRef) -> StoredFacts {
        let Some(shard) = self.shards.get(t.shard) else {
            return StoredFacts::default();
        };
        let file = &shard.file;
        let shape = self.info(t).map_or(&[][..], TensorInfo::shape);
        let p = file.placement(t.index);
        let (strides, storage_offset) = match p.map(Placement::layout) {
            Some(layout @ Layout::Strided { offset, strides }) => (
                (!layout.is_c_order(shape)).then(|| strides.clone()),
                *offset,
            ),
            _ => (None, 0),
        };
        StoredFacts {
            byte_order: p.map_or(ByteOrder::Little, Placement::byte_order),
            strides,
            storage_offset,
            shared_storage: file.shared_storage(t.index),
            data_range: file.stored_range(t.index),
            compressed: p
                .is_some_and(|p| matches!(p.storage().encoding, Encoding::Deflated { .. })),
            container: file.container_facts(t.index),
        }
    }

    /// The globals outside the allowlist that the pickles of its files
    /// would import (a PyTorch file that no verb reads), sorted.
    pub fn unsafe_globals(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .shards
            .iter()
            .flat_map(|s| s.file.unsafe_globals().iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The container in words, for the explorer: `safetensors file`,
    /// `NumPy .npz archive · 3 of 5 members deflated`, ….
    pub fn container_label(&self) -> String {
        let Some(first) = self.shards.first() else {
            return String::new();
        };
        let label = first.file.kind().label();
        match &self.kind {
            CheckpointKind::Sharded { .. } => {
                format!("{label} files · {} shards", self.shards.len())
            }
            CheckpointKind::Folder if first.file.kind().entry().expand.is_some() => {
                format!("{label} model · split in {} parts", self.shards.len())
            }
            CheckpointKind::Folder => {
                format!("{label} files · a folder of {}", self.shards.len())
            }
            CheckpointKind::Single => first
                .file
                .any_parts()
                .and_then(|p| p.describe(&first.file))
                .unwrap_or_else(|| format!("{label} file")),
        }
    }

    /// True when reading some tensor's bytes needs [`Checkpoint::fetch`]
    /// first: a remote file, or a tensor not stored in C order,
    /// little-endian, as is. Bulk readers that skip the fetch for a local
    /// file ask this.
    pub fn needs_fetch(&self) -> bool {
        self.is_remote() || self.shards.iter().any(|s| !s.file.all_in_place())
    }

    /// True when any file of the checkpoint is remote.
    pub fn is_remote(&self) -> bool {
        self.shards.iter().any(|s| s.file.remote().is_some())
    }

    /// Finds a tensor by name, in O(1).
    pub fn find(&self, name: &str) -> Option<TensorRef> {
        self.position(name)
            .and_then(|p| self.tensors.get(p).copied())
    }

    /// Total bytes of tensor data over every shard.
    pub fn data_bytes(&self) -> u64 {
        self.entries().map(|(_, i)| i.nbytes()).sum()
    }
}
