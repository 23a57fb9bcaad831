//! One safetensors file: mapped, validated, and sliced into zero-copy tensor
//! views.

use std::fs::File;

use crate::source::map::Mapping;
use crate::source::{RemoteFile, Source};
use std::path::{Path, PathBuf};

use super::LoadError;
use super::error::FormatError;
use super::parse::{Header, TensorInfo, parse, parse_explained};

/// A validated safetensors file, mapped read-only.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    source: Source,
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

    fn with_source(path: PathBuf, source: Source) -> Result<Self, LoadError> {
        let header = parse_explained(source.bytes()).map_err(|r| LoadError::Format {
            path: path.clone(),
            error: r.error,
            repeated: r.repeated,
        })?;
        Ok(Self {
            path,
            source,
            header,
        })
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
