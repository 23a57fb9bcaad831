//! One file of a checkpoint, of any container: mapped, recognised by its
//! content, validated, and sliced into zero-copy tensor views (or, for a
//! tensor stored otherwise, read once into scratch space in C order).

use std::fs::File;
use std::sync::Arc;

use crate::source::map::Mapping;
use crate::source::scratch::{Slot, SlotPin};
use crate::source::{RemoteFile, Source};
use std::path::{Path, PathBuf};

use super::CONTAINERS;
use super::containers::{ContainerKind, Opening, Probe, names_of};
use super::stored::{Encoding, Placement};
use super::{FormatError, Header, LoadError, TensorInfo, parse, parse_explained};

/// A validated checkpoint file, mapped read-only.
#[derive(Debug)]
pub struct StoredFile {
    path: PathBuf,
    source: Source,
    header: Header,
    kind: ContainerKind,
    /// One a tensor for containers other than safetensors (whose tensors
    /// are all C order, little-endian slices of the file).
    placements: Vec<Placement>,
    /// Scratch space for the tensors not stored as readers want them,
    /// filled in C order, little-endian, while [`StoredFile::prepare`]'s
    /// pins are kept.
    prepared: Vec<Arc<Slot>>,
    /// True for a tensor whose storage another tensor reads too (tied
    /// weights, views).
    shared: Vec<bool>,
    /// True when every tensor is a C-order, little-endian slice of the file.
    in_place: bool,
    /// A zip container's directory (an `.npz`, a torch zip).
    zip: Option<super::zip::Archive>,
    /// What the container says beyond the model (see [`Parts`]).
    parts: Option<Box<dyn Parts>>,
    /// The files beside it that its tensors are in too (an ONNX model's
    /// external data, a TensorFlow bundle's data shards): file `k` is
    /// `others[k - 1]`, with the name the container gave it.
    others: Vec<(String, Source)>,
}

/// The error for a path that is a FIFO, a socket or a device.
pub(crate) fn not_a_regular_file() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "is not a regular file (a FIFO, a socket or a device): not read",
    )
}

impl StoredFile {
    /// Maps and validates the file at `path`. Only the header is read.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let io = |source: std::io::Error| LoadError::Io {
            path: path.to_path_buf(),
            source: source.into(),
        };
        // Looked at before opening: opening a FIFO waits for a writer
        // forever, and a device (`/dev/zero`) is no file to map.
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.is_dir() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a folder with no model.safetensors.index.json or .safetensors file",
            )));
        }
        if !meta.is_file() {
            return Err(io(not_a_regular_file()));
        }
        let file = File::open(path).map_err(io)?;
        let map = Mapping::map(&file).map_err(io)?;
        Self::with_source(path.to_path_buf(), Source::Local(map))
    }

    /// Opens the remote file at `url` (`http(s)://`): its header is read
    /// in at most two range requests, or revalidated from the cache.
    pub fn open_url(url: &str) -> Result<Self, LoadError> {
        let remote = RemoteFile::open(crate::source::remote::client(), url, super::MAX_HEADER_SIZE)
            .map_err(|error| LoadError::Remote {
                path: url.into(),
                error,
            })?;
        Self::with_source(url.into(), Source::Remote(remote))
    }

    /// Validates a local file whose bytes are at hand (`scan`, which read
    /// them once for its own rules).
    pub(crate) fn open_local(path: PathBuf, map: Mapping) -> Result<Self, LoadError> {
        Self::with_source(path, Source::Local(map))
    }

    /// Opens a remote file already open (its first block read).
    pub(crate) fn open_remote(path: PathBuf, remote: RemoteFile) -> Result<Self, LoadError> {
        Self::with_source(path, Source::Remote(remote))
    }

    /// Recognises the container by its content: safetensors first (a
    /// file whose header length fits it and whose header starts with `{`
    /// is safetensors, valid or not, whatever its first byte), then each
    /// container of [`CONTAINERS`] in turn; the name's extension only says
    /// which error a file that is none of them gets.
    fn with_source(path: PathBuf, source: Source) -> Result<Self, LoadError> {
        let rejected = match parse_explained(source.bytes()) {
            Ok(header) => {
                return Ok(Self::assemble(
                    path,
                    source,
                    header,
                    ContainerKind::SAFETENSORS,
                    Vec::new(),
                ));
            }
            Err(r) => r,
        };
        let safetensors_error = |path: PathBuf| LoadError::Format {
            path,
            error: rejected.error.clone(),
            repeated: rejected.repeated.clone(),
        };
        if super::safetensors::is_its_own(source.bytes(), source.len()) {
            return Err(safetensors_error(path));
        }
        let (name, extension) = names_of(&path);
        let remote = source.remote().is_some();
        // A local zip's directory, read once for every container that asks.
        let archive = (!remote && super::zip::is_zip(source.bytes()))
            .then(|| super::zip::open(source.bytes()).ok())
            .flatten();
        let probe = Probe {
            bytes: source.bytes(),
            extension: extension.as_deref(),
            name: &name,
            remote,
            archive: archive.as_ref(),
        };
        let claimed = CONTAINERS.iter().find(|c| (c.claims)(&probe));
        if let Some(container) = claimed {
            return (container.open)(Opening {
                path,
                source,
                archive,
            });
        }
        let refused = CONTAINERS
            .iter()
            .filter_map(|c| c.refuse)
            .find_map(|refuse| refuse(&probe, &path));
        Err(refused.unwrap_or_else(|| safetensors_error(path)))
    }

    /// A file read into the model by its container: its header, the
    /// placement of each tensor (none for safetensors), its container.
    pub(crate) fn assemble(
        path: PathBuf,
        source: Source,
        header: Header,
        kind: ContainerKind,
        placements: Vec<Placement>,
    ) -> Self {
        let prepared = header
            .tensors()
            .iter()
            .take(placements.len())
            .map(|info| Arc::new(Slot::new(info.nbytes())))
            .collect();
        let mut users: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
        for p in &placements {
            *users.entry(p.storage_id()).or_default() += 1;
        }
        let shared = placements
            .iter()
            .map(|p| users.get(&p.storage_id()).is_some_and(|&n| n > 1))
            .collect();
        let in_place = placements
            .iter()
            .zip(header.tensors())
            .all(|(p, info)| p.is_native(info.shape()));
        Self {
            path,
            source,
            header,
            kind,
            placements,
            prepared,
            shared,
            in_place,
            zip: None,
            parts: None,
            others: Vec::new(),
        }
    }

    /// Keeps the files beside it that its tensors are in too.
    pub(crate) fn with_others(mut self, others: Vec<(String, Source)>) -> Self {
        self.others = others;
        self
    }

    /// The bytes of file `k` (0: this file; `k`: the `k`-th beside it).
    pub(crate) fn file_bytes(&self, k: usize) -> &[u8] {
        self.file_source(k).map_or(&[], Source::bytes)
    }

    /// The source of file `k`.
    pub(crate) fn file_source(&self, k: usize) -> Option<&Source> {
        match k {
            0 => Some(&self.source),
            k => self.others.get(k - 1).map(|(_, s)| s),
        }
    }

    /// The files beside this one that its tensors are in too, by name.
    pub fn other_files(&self) -> impl Iterator<Item = (&str, u64)> {
        self.others.iter().map(|(n, s)| (n.as_str(), s.len()))
    }

    /// Keeps a zip container's directory, which deflated storages read.
    pub(crate) fn with_zip(mut self, archive: Option<super::zip::Archive>) -> Self {
        self.zip = archive;
        self
    }

    /// Keeps what the container says beyond the model.
    pub(crate) fn with_parts(mut self, parts: impl Parts) -> Self {
        self.parts = Some(Box::new(parts));
        self
    }

    /// What the container keeps of type `T` (its own [`Parts`]).
    pub(crate) fn parts<T: Parts>(&self) -> Option<&T> {
        self.parts.as_ref()?.as_any().downcast_ref::<T>()
    }

    /// The container's [`Parts`], whatever they are.
    pub(crate) fn any_parts(&self) -> Option<&dyn Parts> {
        self.parts.as_deref()
    }

    /// The container this file is.
    pub fn kind(&self) -> ContainerKind {
        self.kind
    }

    /// Where the tensor at `index` of the header lies, for containers that
    /// say (`None` for safetensors: C order, little-endian, in place).
    pub fn placement(&self, index: usize) -> Option<&Placement> {
        self.placements.get(index)
    }

    /// True when the tensor at `index` is read in place (a slice of the
    /// file); false when it is read into scratch space first.
    pub fn is_in_place(&self, index: usize) -> bool {
        match (self.placements.get(index), self.header.tensors().get(index)) {
            (Some(p), Some(info)) => p.is_native(info.shape()),
            _ => true,
        }
    }

    /// True when every tensor of the file is read in place.
    pub fn all_in_place(&self) -> bool {
        self.in_place
    }

    /// True when the bytes of the tensor at `index` can be read now: in
    /// place, or already prepared.
    pub fn is_prepared(&self, index: usize) -> bool {
        self.is_in_place(index) || self.prepared.get(index).is_some_and(|p| p.is_ready())
    }

    /// The bytes of the tensor at `index` of the header, in C order and
    /// little-endian: a slice of the map, or of its scratch space once
    /// [`StoredFile::prepare`]d (empty before).
    pub fn bytes_at(&self, index: usize) -> &[u8] {
        let Some(info) = self.header.tensors().get(index) else {
            return &[];
        };
        if self.is_in_place(index) {
            return match self.placements.get(index) {
                Some(p) if p.storage().file != 0 => p
                    .native_range(info.shape(), info.nbytes())
                    .and_then(|r| {
                        self.file_bytes(p.storage().file)
                            .get(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?)
                    })
                    .unwrap_or(&[]),
                _ => self.tensor_bytes(info),
            };
        }
        self.prepared.get(index).map_or(&[], |p| p.bytes())
    }

    /// Reads the tensor at `index` into scratch space in C order,
    /// little-endian, when it is not read in place: a deflated member is
    /// decoded as a stream (its length and CRC-32 checked), byte-swapped or
    /// strided elements are gathered block by block. The bytes stay while
    /// the pin is kept (`None` for a tensor read in place).
    pub fn prepare(
        &self,
        index: usize,
        cancel: &crate::jobs::CancelToken,
        progress: Option<&crate::jobs::Progress>,
    ) -> Result<Option<SlotPin>, LoadError> {
        if self.is_in_place(index) {
            return Ok(None);
        }
        let (Some(info), Some(p), Some(slot)) = (
            self.header.tensors().get(index),
            self.placements.get(index),
            self.prepared.get(index),
        ) else {
            return Ok(None);
        };
        let io_error = |e: std::io::Error| LoadError::Io {
            path: self.path.clone(),
            source: Arc::new(std::io::Error::new(
                e.kind(),
                format!("tensor {:?}: {e}", info.name()),
            )),
        };
        let files: Vec<&[u8]> = (0..=self.others.len())
            .map(|k| self.file_bytes(k))
            .collect();
        let from = super::prepare::ReadFrom {
            path: &self.path,
            bytes: self.file_bytes(p.storage().file),
            member: self.member(&p.storage().encoding),
            files: &files,
        };
        slot.pin(
            |sink| {
                super::prepare::fill_c_order(&from, info, p, cancel, &mut |b| {
                    sink(b)?;
                    if let Some(progress) = progress {
                        progress.add(b.len() as u64);
                    }
                    Ok(())
                })
            },
            io_error,
        )
        .map(Some)
    }

    /// The bytes a reader of the tensor at `index` needs, as `(file,
    /// range)`: its storage (for a deflated member, its compressed stream;
    /// for a decoded one, what its container reads), else its data. What a
    /// remote checkpoint fetches for it.
    pub fn read_ranges(&self, index: usize) -> Vec<(usize, std::ops::Range<u64>)> {
        match (self.placements.get(index), self.header.tensors().get(index)) {
            (Some(p), _) => {
                if let Encoding::Decoded(d) = &p.storage().encoding {
                    return d.0.ranges();
                }
                let r = p.storage().file_range.clone();
                let start = self
                    .any_parts()
                    .and_then(|parts| parts.local_header_start(self, index));
                vec![(p.storage().file, start.unwrap_or(r.start)..r.end)]
            }
            (None, Some(info)) => vec![(0, self.tensor_range(info))],
            (None, None) => Vec::new(),
        }
    }

    /// True when every byte [`StoredFile::read_ranges`] names is at hand.
    pub fn is_present(&self, index: usize) -> bool {
        self.read_ranges(index).into_iter().all(|(k, r)| {
            self.file_source(k)
                .is_some_and(|source| source.is_present(r))
        })
    }

    /// The file's metadata in its container, as key → JSON value: a
    /// safetensors file's `__metadata__` (every value a string), or what
    /// the container keeps; `None` when the file has none (NumPy files
    /// never do).
    pub fn metadata_values(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        if let Some(values) = self.any_parts().and_then(Parts::metadata) {
            return Some(values);
        }
        self.header.metadata().map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect()
        })
    }

    /// The tensor's data as an absolute byte range of the file, when it is
    /// stored as is (for `info`'s `data_offsets` of a container without a
    /// data section); `None` for a compressed one.
    pub fn stored_range(&self, index: usize) -> Option<std::ops::Range<u64>> {
        let info = self.header.tensors().get(index)?;
        match self.placements.get(index) {
            None => Some(self.tensor_range(info)),
            Some(p) if p.storage().encoding == Encoding::Plain => {
                Some(p.storage().file_range.clone())
            }
            Some(_) => None,
        }
    }

    /// The id of the tensor's storage when another tensor of the file
    /// reads it too (tied weights, views); `None` when it is its own.
    pub fn shared_storage(&self, index: usize) -> Option<usize> {
        self.shared
            .get(index)
            .copied()
            .filter(|&s| s)
            .and_then(|_| self.placements.get(index))
            .map(Placement::storage_id)
    }

    /// What the container says of the tensor at `index` beyond the model's
    /// fields, as JSON fields (`descr`, `format_version`, `member`, …);
    /// empty for safetensors.
    pub fn container_facts(&self, index: usize) -> Vec<(&'static str, serde_json::Value)> {
        self.any_parts().map(|p| p.facts(index)).unwrap_or_default()
    }

    /// The globals outside the allowlist that the file's pickle would
    /// import (a PyTorch file no verb reads); empty for other files.
    pub fn unsafe_globals(&self) -> &[String] {
        self.any_parts().map_or(&[], Parts::unsafe_globals)
    }

    /// The container's own facts of the file (ONNX's `ir_version`,
    /// `opset`, `producer`), for `info --json` under the container's id.
    pub fn file_facts(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.any_parts()?.file_facts()
    }

    /// What the container warns of (an archive's members that are not
    /// arrays), as `(kind, message)`.
    pub fn container_warnings(&self) -> Vec<(&'static str, String)> {
        self.any_parts().map(Parts::warnings).unwrap_or_default()
    }

    /// The container's own shape of the tensor at `index`, where it
    /// differs from its stored bytes' (a GGUF block type's row-major shape).
    pub fn container_shape(&self, index: usize) -> Option<&[u64]> {
        self.any_parts()?.shape(index)
    }

    /// The archive member behind a deflated storage.
    pub(crate) fn member(
        &self,
        encoding: &Encoding,
    ) -> Option<(&super::zip::Archive, &super::zip::Member)> {
        let Encoding::Deflated { member, .. } = encoding else {
            return None;
        };
        let archive = self.archive()?;
        Some((archive, archive.members().get(*member)?))
    }

    /// The directory of a zip container (an `.npz`, a torch zip).
    pub(crate) fn archive(&self) -> Option<&super::zip::Archive> {
        self.zip.as_ref()
    }

    /// Reads every byte of a zip container's members (an `.npz`'s, a
    /// torch zip's), checking each one's length and CRC-32; nothing to do
    /// for other files. For `validate`, whose verdict covers the data.
    pub fn verify_members(&self, cancel: &crate::jobs::CancelToken) -> Result<(), LoadError> {
        self.verify_decoded(cancel)?;
        let Some(archive) = self.archive() else {
            return Ok(());
        };
        // A remote archive: every member comes in first, and stays while
        // it is read.
        let _pins = match self.remote() {
            Some(remote) => {
                let progress = crate::jobs::Progress::new();
                let mut pins = Vec::new();
                for m in archive.members() {
                    let end = m.data_start.saturating_add(m.compressed_size);
                    let pin = remote
                        .fetch(m.header_start..end, cancel, &progress)
                        .map_err(|error| LoadError::Remote {
                            path: self.path.clone(),
                            error,
                        })?;
                    pins.push(pin);
                }
                pins
            }
            None => Vec::new(),
        };
        archive
            .verify(self.source.bytes(), cancel)
            .map_err(|e| match self.any_parts() {
                Some(parts) => parts.zip_error(&self.path, e),
                None => LoadError::Io {
                    path: self.path.clone(),
                    source: Arc::new(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        e.to_string(),
                    )),
                },
            })
    }

    /// Decodes every tensor its container decodes (chunks, slices), each
    /// to its end and into nothing, so that every checksum the container
    /// keeps is checked. For `validate`.
    fn verify_decoded(&self, cancel: &crate::jobs::CancelToken) -> Result<(), LoadError> {
        let files: Vec<&[u8]> = (0..=self.others.len())
            .map(|k| self.file_bytes(k))
            .collect();
        for (index, p) in self.placements.iter().enumerate() {
            let Encoding::Decoded(d) = &p.storage().encoding else {
                continue;
            };
            let Some(info) = self.header.tensors().get(index) else {
                continue;
            };
            // A remote file's ranges come in first, and stay while read.
            let mut pins = Vec::new();
            for (k, r) in self.read_ranges(index) {
                if let Some(source) = self.file_source(k).filter(|s| s.remote().is_some()) {
                    let pin = source
                        .fetch(r, cancel, &crate::jobs::Progress::new())
                        .map_err(|error| LoadError::Remote {
                            path: self.path.clone(),
                            error,
                        })?;
                    pins.push(pin);
                }
            }
            let mut seen = 0u64;
            d.0.decode(&files, cancel, &mut |b| {
                seen += b.len() as u64;
                Ok(())
            })
            .map_err(|e| match e {
                super::decode::DecodeError::Invalid { kind, message } => LoadError::Container {
                    path: self.path.clone(),
                    kind,
                    message: format!("tensor {:?}: {message}", info.name()),
                    tensor: Some(info.name().to_owned()),
                },
                super::decode::DecodeError::Cancelled => LoadError::Remote {
                    path: self.path.clone(),
                    error: crate::source::RemoteError::new("Cancelled", "cancelled"),
                },
                super::decode::DecodeError::Sink(e) => LoadError::Io {
                    path: self.path.clone(),
                    source: Arc::new(e),
                },
            })?;
            if seen != info.nbytes() {
                return Err(LoadError::Container {
                    path: self.path.clone(),
                    kind: "DecodedSize",
                    message: format!(
                        "tensor {:?} decoded to {seen} bytes; its shape holds {}",
                        info.name(),
                        info.nbytes()
                    ),
                    tensor: Some(info.name().to_owned()),
                });
            }
        }
        Ok(())
    }

    /// The refusal of a file no verb may read: a PyTorch file whose pickle
    /// would import globals outside the allowlist.
    pub fn readable(&self) -> Result<(), LoadError> {
        match self.any_parts().and_then(|p| p.refusal(&self.path)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Checks, once the tensor at `index` is fetched, what its container
    /// could not check before (a remote zip's local header).
    pub fn check_fetched(&self, index: usize) -> Result<(), LoadError> {
        self.any_parts()
            .map_or(Ok(()), |p| p.check_fetched(self, index))
    }

    /// Where the bytes come from: a local map or a remote file.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The remote file, when this file is one.
    pub fn remote(&self) -> Option<&RemoteFile> {
        self.source.remote()
    }

    /// The byte range of `tensor` in the file.
    pub fn tensor_range(&self, tensor: &TensorInfo) -> std::ops::Range<u64> {
        let start = self.header.data_start();
        let [b, e] = tensor.data_offsets();
        start.saturating_add(b)..start.saturating_add(e)
    }

    /// Validates an in-memory file image (for tests and tools); the bytes
    /// are kept by the caller, so this returns the header only.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Header, FormatError> {
        parse(bytes)
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The validated header: its tensors are in offset order and inside the file.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Length of the file in bytes, when it was opened.
    pub fn file_size(&self) -> u64 {
        self.source.len()
    }

    /// The raw bytes of a tensor: a slice of the mapping, no copy.
    ///
    /// `tensor` must come from this file's header; another tensor's offsets
    /// give an empty slice rather than a panic.
    pub fn tensor_bytes(&self, tensor: &TensorInfo) -> &[u8] {
        let start = self.header.data_start();
        let range = start
            .checked_add(tensor.data_offsets()[0])
            .zip(start.checked_add(tensor.data_offsets()[1]))
            .and_then(|(b, e)| Some(usize::try_from(b).ok()?..usize::try_from(e).ok()?));
        range
            .and_then(|r| self.source.bytes().get(r))
            .unwrap_or(&[])
    }

    /// True once a read of the mapping found the file cut short (the bytes
    /// read may be zeros it does not hold). One atomic load, no file-system
    /// call: for code that reads the map often, such as a drawn value grid.
    pub fn changed_while_read(&self) -> bool {
        self.source.changed()
    }

    /// Checks that the file still has the length it had when it was mapped,
    /// and that no read found it cut short since (see `format::map`).
    /// Every reader calls this before it reads and again before it reports:
    /// a result computed over a file that changed is an error, never shown.
    pub fn check_unchanged(&self) -> Result<(), LoadError> {
        for (name, other) in &self.others {
            let changed = if let Some(remote) = other.remote() {
                remote.changed()
            } else {
                let path = self.path.parent().unwrap_or(Path::new(".")).join(name);
                other.changed() || std::fs::metadata(&path).map_or(true, |m| m.len() != other.len())
            };
            if changed {
                return Err(LoadError::Changed {
                    path: self.path.parent().unwrap_or(Path::new(".")).join(name),
                    was: other.len(),
                    now: 0,
                });
            }
        }
        if let Some(remote) = self.remote() {
            // The server's answers are checked against the file's version
            // as they come; one that differed set the flag.
            return if remote.changed() {
                Err(LoadError::Remote {
                    path: self.path.clone(),
                    error: crate::source::RemoteError::new(
                        "RemoteChanged",
                        format!(
                            "{} changed on the server while being read; reopen it",
                            self.path.display()
                        ),
                    ),
                })
            } else {
                Ok(())
            };
        }
        let now = std::fs::metadata(&self.path).map_err(|source| LoadError::Io {
            path: self.path.clone(),
            source: source.into(),
        })?;
        if now.len() == self.file_size() && !self.source.changed() {
            Ok(())
        } else {
            Err(LoadError::Changed {
                path: self.path.clone(),
                was: self.file_size(),
                now: now.len(),
            })
        }
    }
}

/// What a container keeps of a file beyond the model (a GGUF's key/value
/// table, a pickle's globals, an archive's other members), and how it
/// answers the questions only it can. Each container's folder has its own.
pub(crate) trait Parts: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Itself, for [`StoredFile::parts`].
    fn as_any(&self) -> &dyn std::any::Any;

    /// The file's metadata, key → JSON value; `None` for the header's.
    fn metadata(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        None
    }

    /// What it says of the tensor at `index`, as JSON fields.
    fn facts(&self, _index: usize) -> Vec<(&'static str, serde_json::Value)> {
        Vec::new()
    }

    /// What its pickles say, for a container read through the pickle
    /// machine.
    fn pickle(&self) -> Option<&crate::format::pytorch::PickleReport> {
        None
    }

    /// Globals outside the allowlist its pickle would import.
    fn unsafe_globals(&self) -> &[String] {
        &[]
    }

    /// Why no verb may read the file, if so.
    fn refusal(&self, _path: &Path) -> Option<LoadError> {
        None
    }

    /// The container's own facts of the file, for `info --json` (under
    /// the container's id: ONNX's `ir_version`, `opset`, `producer`).
    fn file_facts(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        None
    }

    /// Warnings, as `(kind, message)`.
    fn warnings(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// The tensor's shape in the container's terms, where it differs.
    fn shape(&self, _index: usize) -> Option<&[u64]> {
        None
    }

    /// The file in words, for the explorer (`NumPy .npz archive · …`);
    /// `None` for `<label> file`.
    fn describe(&self, _file: &StoredFile) -> Option<String> {
        None
    }

    /// A zip member's failure, as the container names it.
    fn zip_error(&self, path: &Path, error: super::zip::ZipError) -> LoadError {
        LoadError::Io {
            path: path.to_path_buf(),
            source: Arc::new(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                error.to_string(),
            )),
        }
    }

    /// Where a remote reader's range for the tensor must start (a remote
    /// zip member's local header, read with its data).
    fn local_header_start(&self, _file: &StoredFile, _index: usize) -> Option<u64> {
        None
    }

    /// What is checked once the tensor's bytes are fetched.
    fn check_fetched(&self, _file: &StoredFile, _index: usize) -> Result<(), LoadError> {
        Ok(())
    }
}
