//! One safetensors file: mapped, validated, and sliced into zero-copy tensor
//! views.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::LoadError;
use super::error::FormatError;
use super::map::Mapping;
use super::parse::{Header, TensorInfo, parse, parse_explained};

/// A validated safetensors file, mapped read-only.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    map: Mapping,
    header: Header,
}

/// The error for a path that is a FIFO, a socket or a device.
pub(crate) fn not_a_regular_file() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "is not a regular file (a FIFO, a socket or a device): not read",
    )
}

impl SafetensorsFile {
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
        let header = parse_explained(map.bytes()).map_err(|r| LoadError::Format {
            path: path.to_path_buf(),
            error: r.error,
            repeated: r.repeated,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            map,
            header,
        })
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
        self.map.len() as u64
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
        range.and_then(|r| self.map.get(r)).unwrap_or(&[])
    }

    /// True once a read of the mapping found the file cut short (the bytes
    /// read may be zeros it does not hold). One atomic load, no file-system
    /// call: for code that reads the map often, such as a drawn value grid.
    pub fn changed_while_read(&self) -> bool {
        self.map.changed()
    }

    /// Checks that the file still has the length it had when it was mapped,
    /// and that no read found it cut short since (see `format::map`).
    /// Every reader calls this before it reads and again before it reports:
    /// a result computed over a file that changed is an error, never shown.
    pub fn check_unchanged(&self) -> Result<(), LoadError> {
        let now = std::fs::metadata(&self.path).map_err(|source| LoadError::Io {
            path: self.path.clone(),
            source: source.into(),
        })?;
        if now.len() == self.file_size() && !self.map.changed() {
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
