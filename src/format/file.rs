//! One file of a checkpoint, of any container: mapped, recognised by its
//! content, validated, and sliced into zero-copy tensor views (or, for a
//! tensor stored otherwise, read once into scratch space in C order).

use std::fs::File;
use std::sync::Arc;

use crate::source::map::Mapping;
use crate::source::scratch::{Slot, SlotPin};
use crate::source::{RemoteFile, Source};
use std::path::{Path, PathBuf};

use super::LoadError;
use super::error::FormatError;
use super::numpy::{self, NpyTensor, NumpyError};
use super::parse::{Header, TensorInfo, parse, parse_explained};
use super::stored::{Encoding, Placement};

/// The container a file is, as `info --json`'s `format` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// A safetensors file.
    Safetensors,
    /// A NumPy `.npy` file or `.npz` archive.
    Numpy,
    /// A PyTorch checkpoint (`torch.save`'s zip, or its legacy format).
    Pytorch,
    /// A bare pickle: no tensors, only what its pickle names.
    Pickle,
    /// A GGUF file (llama.cpp's), or the parts of a split one.
    Gguf,
}

impl ContainerKind {
    /// The identifier of `info --json`'s `format`.
    pub const fn id(self) -> &'static str {
        match self {
            ContainerKind::Safetensors => "safetensors",
            ContainerKind::Numpy => "numpy",
            ContainerKind::Pytorch => "pytorch",
            ContainerKind::Pickle => "pickle",
            ContainerKind::Gguf => "gguf",
        }
    }

    /// True when the container's tensors lie in one data section that
    /// their `data_offsets` count from (safetensors, GGUF); false when
    /// they are anywhere in the file (NumPy).
    pub const fn has_data_section(self) -> bool {
        matches!(self, ContainerKind::Safetensors | ContainerKind::Gguf)
    }

    /// The name people know the container by, for the explorer.
    pub const fn label(self) -> &'static str {
        match self {
            ContainerKind::Safetensors => "safetensors",
            ContainerKind::Numpy => "NumPy",
            ContainerKind::Pytorch => "PyTorch",
            ContainerKind::Pickle => "Python pickle",
            ContainerKind::Gguf => "GGUF",
        }
    }
}

/// What a NumPy file adds to the model.
#[derive(Debug)]
pub struct NumpyParts {
    extras: Vec<NpyTensor>,
    other_members: Vec<String>,
    is_archive: bool,
}

impl NumpyParts {
    /// True for an `.npz` archive.
    pub fn is_archive(&self) -> bool {
        self.is_archive
    }

    /// An archive's members that are not arrays.
    pub fn other_members(&self) -> &[String] {
        &self.other_members
    }

    /// What NumPy says of the tensor at `index` of the header.
    pub fn tensor(&self, index: usize) -> Option<&NpyTensor> {
        self.extras.get(index)
    }
}

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
    numpy: Option<NumpyParts>,
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
    /// What a PyTorch file's pickle says beyond its tensors.
    pickle: Option<super::pytorch::PickleReport>,
    /// A remote torch zip: where its storages' local headers are, checked
    /// when each is fetched.
    unverified: Option<remote_zip::Unverified>,
    /// What a GGUF file says beyond its tensors.
    gguf: Option<super::gguf::open::GgufParts>,
}

mod gguf;
mod remote_zip;

/// The tensor name of a local `.npy` at `path`: its file name less `.npy`.
fn npy_name(path: &Path) -> String {
    path.file_name()
        .map(|n| numpy::name_of_file(&n.to_string_lossy()))
        .unwrap_or_default()
}

/// The tensor name of a remote `.npy`: the URL's last segment, without its
/// query or fragment, less `.npy`.
fn npy_name_of_url(url: &Path) -> String {
    let text = url.to_string_lossy();
    let last = text
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or("");
    numpy::name_of_file(last)
}

/// The refusal of a remote `.npz` (or other zip).
fn numpy_remote_archive(path: PathBuf) -> LoadError {
    LoadError::Numpy {
        path,
        error: NumpyError::RemoteArchive,
    }
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

    /// Recognises the container by its content (the safetensors header
    /// check first, then the NumPy magic, then a zip's members; the name's
    /// extension only says which error a file that is none of them gets).
    fn with_source(path: PathBuf, source: Source) -> Result<Self, LoadError> {
        let rejected = match parse_explained(source.bytes()) {
            Ok(header) => {
                return Ok(Self::assemble(
                    path,
                    source,
                    header,
                    ContainerKind::Safetensors,
                    Vec::new(),
                    None,
                ));
            }
            Err(r) => r,
        };
        let safetensors_error = |path: PathBuf| LoadError::Format {
            path,
            error: rejected.error.clone(),
            repeated: rejected.repeated.clone(),
        };
        if source.bytes().starts_with(super::gguf::header::MAGIC) {
            return Self::gguf_file(path, source);
        }
        // A remote file: its first block is in the cache. A `.npy` is read
        // by ranges as a safetensors file is (its header fetched whole
        // first); an archive, whose directory is at its end, is not.
        if source.remote().is_some() {
            let bytes = source.bytes();
            if super::zip::is_zip(bytes) {
                return Self::remote_zip(path, source);
            }
            if !bytes.starts_with(numpy::header::MAGIC) {
                return Err(safetensors_error(path));
            }
            let header_end = numpy::header::header_end(bytes)
                .ok()
                .flatten()
                .map(|end| 0..end.min(source.len()));
            // Kept while the header is parsed.
            let _header = match header_end {
                Some(r) if !source.is_present(r.clone()) => Some(
                    source
                        .fetch(
                            r,
                            &crate::jobs::CancelToken::default(),
                            &crate::jobs::Progress::new(),
                        )
                        .map_err(|error| LoadError::Remote {
                            path: path.clone(),
                            error,
                        })?,
                ),
                _ => None,
            };
            let opened = numpy::open_npy(source.bytes(), npy_name_of_url(&path));
            return Self::numpy_file(path, source, opened);
        }
        let bytes = source.bytes();
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if bytes.starts_with(super::pytorch::legacy::MAGIC) {
            let read = super::pytorch::legacy::read(bytes);
            return Self::torch_file(path, source, read, None, ContainerKind::Pytorch);
        }
        if bytes.first() == Some(&super::pytorch::bare::PROTO) {
            let read = super::pytorch::bare::read(bytes);
            return Self::torch_file(path, source, read, None, ContainerKind::Pickle);
        }
        let opened = if bytes.starts_with(numpy::header::MAGIC) {
            numpy::open_npy(bytes, npy_name(&path))
        } else if super::zip::is_zip(bytes) {
            match super::zip::open(bytes) {
                Ok(archive) => {
                    let members = archive.members();
                    let pytorch = members
                        .iter()
                        .any(|m| m.name == "data.pkl" || m.name.ends_with("/data.pkl"));
                    // numpy's own test of a member's name (case-sensitive).
                    #[allow(clippy::case_sensitive_file_extension_comparisons)]
                    let arrays = members.iter().any(|m| m.name.ends_with(".npy"));
                    if pytorch {
                        let read = super::pytorch::archive::read(source.bytes(), &archive);
                        return Self::torch_file(
                            path,
                            source,
                            read,
                            Some(archive),
                            ContainerKind::Pytorch,
                        );
                    }
                    if !(arrays || extension.as_deref() == Some("npz")) {
                        return Err(safetensors_error(path));
                    }
                    numpy::open_npz(bytes, Some(archive))
                }
                Err(e) if extension.as_deref() == Some("npz") => Err(NumpyError::Zip(e)),
                Err(_) => return Err(safetensors_error(path)),
            }
        } else {
            match extension.as_deref() {
                // A `.gguf` that is no GGUF: GGUF's own verdict.
                Some("gguf") => {
                    let error = super::gguf::header::parse(bytes)
                        .err()
                        .unwrap_or_else(|| super::gguf::header::GgufError::Magic(String::new()));
                    return Err(LoadError::Gguf { path, error });
                }
                Some("npy") if bytes.is_empty() => Err(NumpyError::Empty),
                Some("npy") => Err(NumpyError::BadMagic),
                Some("npz") => numpy::open_npz(bytes, None),
                _ => return Err(safetensors_error(path)),
            }
        };
        Self::numpy_file(path, source, opened)
    }

    /// A `torch.save` file (a zip with its directory, or a legacy file)
    /// read into the model: its tensors, or none and the globals it would
    /// import when its pickle is unsafe.
    fn torch_file(
        path: PathBuf,
        source: Source,
        read: Result<super::pytorch::archive::TorchZip, super::pytorch::archive::TorchError>,
        archive: Option<super::zip::Archive>,
        kind: ContainerKind,
    ) -> Result<Self, LoadError> {
        let read = read.map_err(|error| LoadError::Pytorch {
            path: path.clone(),
            error,
        })?;
        // The leaves as text: a string as itself, anything else its JSON.
        let texts = read
            .metadata
            .iter()
            .map(|(k, v)| {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                (k.clone(), text)
            })
            .collect();
        let header = Header::of_container(read.pickle_bytes, read.tensors).with_metadata(texts);
        let mut file = Self::assemble(path, source, header, kind, read.placements, None);
        file.zip = archive;
        file.pickle = Some(super::pytorch::PickleReport {
            globals: read.globals.into_iter().collect(),
            unsafe_globals: read.unsafe_globals,
            leaves: read.metadata,
        });
        Ok(file)
    }

    /// What a PyTorch file's pickle says (`None` for other containers).
    pub fn pickle(&self) -> Option<&super::pytorch::PickleReport> {
        self.pickle.as_ref()
    }

    /// A NumPy file read into the model, or why it is refused.
    fn numpy_file(
        path: PathBuf,
        source: Source,
        opened: Result<numpy::Opened, NumpyError>,
    ) -> Result<Self, LoadError> {
        let opened = opened.map_err(|error| LoadError::Numpy {
            path: path.clone(),
            error,
        })?;
        let header = Header::of_container(opened.header_bytes, opened.tensors);
        let parts = NumpyParts {
            extras: opened.extras,
            other_members: opened.other_members,
            is_archive: opened.is_archive,
        };
        let mut file = Self::assemble(
            path,
            source,
            header,
            ContainerKind::Numpy,
            opened.placements,
            Some(parts),
        );
        file.zip = opened.archive;
        Ok(file)
    }

    fn assemble(
        path: PathBuf,
        source: Source,
        header: Header,
        kind: ContainerKind,
        placements: Vec<Placement>,
        numpy: Option<NumpyParts>,
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
            numpy,
            prepared,
            shared,
            in_place,
            zip: None,
            pickle: None,
            unverified: None,
            gguf: None,
        }
    }

    /// The container this file is.
    pub fn kind(&self) -> ContainerKind {
        self.kind
    }

    /// What a NumPy file adds (`None` for other containers).
    pub fn numpy(&self) -> Option<&NumpyParts> {
        self.numpy.as_ref()
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
            return self.tensor_bytes(info);
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
        let from = super::prepare::ReadFrom {
            path: &self.path,
            bytes: self.source.bytes(),
            member: self.member(&p.storage().encoding),
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

    /// The bytes of the file a reader of the tensor at `index` needs: its
    /// storage (for a deflated member, its compressed stream), else its
    /// data. What a remote file fetches for it.
    pub fn read_range(&self, index: usize) -> std::ops::Range<u64> {
        match (self.placements.get(index), self.header.tensors().get(index)) {
            (Some(p), _) => {
                let r = p.storage().file_range.clone();
                self.local_header_start(index).unwrap_or(r.start)..r.end
            }
            (None, Some(info)) => self.tensor_range(info),
            (None, None) => 0..0,
        }
    }

    /// The file's metadata in its container, as key → JSON value: a
    /// safetensors file's `__metadata__` (every value a string); `None`
    /// when the file has none (NumPy files never do).
    pub fn metadata_values(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        if let Some(p) = &self.pickle {
            return Some(p.leaves.iter().cloned().collect());
        }
        if let Some(g) = &self.gguf {
            return Some(g.metadata_json());
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
        let Some(t) = self.numpy.as_ref().and_then(|n| n.tensor(index)) else {
            return Vec::new();
        };
        let mut out = vec![
            ("descr", serde_json::Value::from(t.descr.clone())),
            (
                "format_version",
                serde_json::Value::from(format!("{}.{}", t.version.0, t.version.1)),
            ),
            ("fortran_order", serde_json::Value::from(t.fortran_order)),
        ];
        if let Some(m) = &t.member {
            out.push(("member", serde_json::Value::from(m.clone())));
        }
        out
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
    fn archive(&self) -> Option<&super::zip::Archive> {
        self.zip.as_ref()
    }

    /// Reads every byte of a zip container's members (an `.npz`'s, a
    /// torch zip's), checking each one's length and CRC-32; nothing to do
    /// for other files. For `validate`, whose verdict covers the data.
    pub fn verify_members(&self, cancel: &crate::jobs::CancelToken) -> Result<(), LoadError> {
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
            .map_err(|e| match self.kind {
                ContainerKind::Pytorch => LoadError::Pytorch {
                    path: self.path.clone(),
                    error: super::pytorch::archive::TorchError::Zip(e),
                },
                _ => LoadError::Numpy {
                    path: self.path.clone(),
                    error: NumpyError::Zip(e),
                },
            })
    }

    /// The refusal of a file no verb may read: a PyTorch file whose pickle
    /// would import globals outside the allowlist.
    pub fn readable(&self) -> Result<(), LoadError> {
        match &self.pickle {
            Some(p) if !p.unsafe_globals.is_empty() => Err(LoadError::Pytorch {
                path: self.path.clone(),
                error: super::pytorch::archive::TorchError::Unsafe {
                    globals: p.unsafe_globals.clone(),
                },
            }),
            _ => Ok(()),
        }
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
