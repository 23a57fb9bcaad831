//! A PyTorch file into the model: `torch.save`'s zip (local, or remote
//! opened from its end: `remote.rs`), its legacy format, or a bare pickle;
//! its tensors, or none and the globals it would import when its pickle is
//! unsafe.

use std::path::{Path, PathBuf};

use super::PickleReport;
use super::archive::{TorchError, TorchZip};
use crate::format::containers::{ContainerKind, Opening};
use crate::format::file::Parts;
use crate::format::stored::Encoding;
use crate::format::zip::{self, Archive, ZipError};
use crate::format::{Header, LoadError, StoredFile};
use crate::source::Source;

/// What a PyTorch file keeps beyond the model.
#[derive(Debug)]
pub(crate) struct TorchParts {
    pub(super) report: PickleReport,
    /// A remote torch zip: where its storages' local headers are, checked
    /// when each is fetched.
    pub(super) unverified: Option<Unverified>,
}

/// Where a remote torch zip's storages are, by the data start their
/// placements use: the member, whose local header is checked when read.
#[derive(Debug, Default)]
pub(super) struct Unverified {
    members: std::collections::HashMap<u64, usize>,
}

impl Unverified {
    /// The members by the data start their placements use.
    pub(super) fn new(members: std::collections::HashMap<u64, usize>) -> Self {
        Self { members }
    }
}

/// A `torch.save` file (a zip with its directory, or a legacy file) read
/// into the model.
pub(super) fn into_file(
    path: PathBuf,
    source: Source,
    read: Result<TorchZip, TorchError>,
    archive: Option<Archive>,
    kind: ContainerKind,
    unverified: Option<Unverified>,
) -> Result<StoredFile, LoadError> {
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
    let report = PickleReport {
        globals: read.globals.into_iter().collect(),
        unsafe_globals: read.unsafe_globals,
        leaves: read.metadata,
    };
    Ok(
        StoredFile::assemble(path, source, header, kind, read.placements)
            .with_zip(archive)
            .with_parts(TorchParts { report, unverified }),
    )
}

/// A local torch file: a zip through its directory, or the legacy format.
pub(super) fn open_local(o: Opening) -> Result<StoredFile, LoadError> {
    let Opening {
        path,
        source,
        archive,
    } = o;
    let bytes = source.bytes();
    let (read, archive) = match archive {
        Some(archive) => (super::archive::read(bytes, &archive), Some(archive)),
        None => (super::legacy::read(bytes), None),
    };
    into_file(path, source, read, archive, ContainerKind::PYTORCH, None)
}

/// A bare pickle: no tensors, what it names.
pub(super) fn open_bare(o: Opening) -> Result<StoredFile, LoadError> {
    let read = super::bare::read(o.source.bytes());
    into_file(o.path, o.source, read, None, ContainerKind::PICKLE, None)
}

impl TorchParts {
    /// The archive member holding the storage of the tensor at `index`, in
    /// a remote zip whose storages' local headers are read when fetched.
    fn unverified_member<'a>(&self, file: &'a StoredFile, index: usize) -> Option<&'a zip::Member> {
        let unverified = self.unverified.as_ref()?;
        let storage = file.placement(index)?.storage();
        let member = match storage.encoding {
            Encoding::Deflated { member, .. } => member,
            Encoding::Plain => *unverified.members.get(&storage.file_range.start)?,
            Encoding::Decoded(_) => return None,
        };
        file.archive()?.members().get(member)
    }

    /// Where a remote zip's tensor's bytes start, its local header
    /// included (read with them, to check where its data starts).
    fn local_header(&self, file: &StoredFile, index: usize) -> Option<u64> {
        self.unverified_member(file, index).map(|m| m.header_start)
    }

    /// Checks, once the tensor's bytes are fetched, that its storage's
    /// local header puts the data where its placement reads it.
    fn check_local_header(&self, file: &StoredFile, index: usize) -> Result<(), LoadError> {
        let Some(m) = self.unverified_member(file, index) else {
            return Ok(());
        };
        match zip::local_data_start(file.source().bytes(), m.header_start) {
            Some(start) if start == m.data_start => Ok(()),
            found => Err(LoadError::Pytorch {
                path: file.path().to_path_buf(),
                error: TorchError::Zip(ZipError::Archive(format!(
                    "member {:?}: its local header at byte {} puts its data at {}, not at byte {} where torch.save puts it; this remote file cannot be read by ranges (download it and open the copy)",
                    m.name,
                    m.header_start,
                    found.map_or_else(|| "no valid header".to_owned(), |s| format!("byte {s}")),
                    m.data_start
                ))),
            }),
        }
    }
}

impl Parts for TorchParts {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn metadata(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        Some(self.report.leaves.iter().cloned().collect())
    }

    fn pickle(&self) -> Option<&PickleReport> {
        Some(&self.report)
    }

    fn unsafe_globals(&self) -> &[String] {
        &self.report.unsafe_globals
    }

    fn refusal(&self, path: &Path) -> Option<LoadError> {
        (!self.report.unsafe_globals.is_empty()).then(|| LoadError::Pytorch {
            path: path.to_path_buf(),
            error: TorchError::Unsafe {
                globals: self.report.unsafe_globals.clone(),
            },
        })
    }

    fn zip_error(&self, path: &Path, error: ZipError) -> LoadError {
        LoadError::Pytorch {
            path: path.to_path_buf(),
            error: TorchError::Zip(error),
        }
    }

    fn local_header_start(&self, file: &StoredFile, index: usize) -> Option<u64> {
        self.local_header(file, index)
    }

    fn check_fetched(&self, file: &StoredFile, index: usize) -> Result<(), LoadError> {
        self.check_local_header(file, index)
    }
}

impl StoredFile {
    /// What a file's pickles say (`None` for containers without one).
    pub fn pickle(&self) -> Option<&PickleReport> {
        self.any_parts()?.pickle()
    }
}
