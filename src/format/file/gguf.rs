//! A GGUF file into the model ([`StoredFile::gguf_file`]), and a remote
//! GGUF's header (GGUF.md, "Remote"): read from the start in
//! bounded steps, never into the tensor data. Each step fetches what the
//! parse says the header needs at the least (everything declared and not
//! yet read, at its smallest size) plus [`MARGIN`], so a 150k-token
//! vocabulary takes a few requests, and what is received stays within the
//! data section's start plus [`MARGIN`] (plus the first block, when the
//! header is smaller than it).

use std::path::PathBuf;

use super::{ContainerKind, Header, LoadError, Source, StoredFile};
use crate::format::gguf::header::GgufError;
use crate::format::gguf::open::{Opened, open as open_bytes};
use crate::source::{RemoteError, RemoteFile};

/// What each step fetches beyond what the header needs at the least.
pub(crate) const MARGIN: u64 = 64 * 1024;

/// Why a remote GGUF is not opened.
enum Failure {
    Gguf(GgufError),
    Remote(RemoteError),
}

/// Reads the header of `remote`, fetching it step by step.
fn open(remote: &RemoteFile) -> Result<Opened, Failure> {
    let len = remote.bytes().len() as u64;
    let mut have = crate::source::remote::file::HEADER_GUESS.min(len);
    remote.read_into_map(0..have).map_err(Failure::Remote)?;
    loop {
        let bytes = remote.bytes().get(..have as usize).unwrap_or(&[]);
        match open_bytes(bytes, len) {
            Ok(opened) => return Ok(opened),
            Err(GgufError::Truncated {
                at, need, reach, ..
            }) if have < len => {
                let want = reach.max(at.saturating_add(need)).saturating_add(MARGIN);
                let next = want.min(len).max(have + 1);
                // Only what is not at hand yet.
                remote.read_into_map(have..next).map_err(Failure::Remote)?;
                have = next;
            }
            Err(e) => return Err(Failure::Gguf(e)),
        }
    }
}

impl StoredFile {
    /// A GGUF file read into the model: its header parsed (for a remote
    /// file, fetched in bounded steps first: see [`gguf_remote`]).
    pub(super) fn gguf_file(path: PathBuf, source: Source) -> Result<Self, LoadError> {
        let error = |error| LoadError::Gguf {
            path: path.clone(),
            error,
        };
        let opened = match source.remote() {
            Some(remote) => open(remote).map_err(|e| match e {
                Failure::Gguf(e) => error(e),
                Failure::Remote(e) => LoadError::Remote {
                    path: path.clone(),
                    error: e,
                },
            })?,
            None => crate::format::gguf::open::open(source.bytes(), source.len()).map_err(error)?,
        };
        // What the explorer lists and a resave carries as `__metadata__`:
        // every key but the arrays `info` summarises (a vocabulary), as
        // text (a string as itself, anything else its JSON).
        let texts = opened
            .parts
            .metadata
            .iter()
            .filter(|(_, v)| !v.is_summarised())
            .map(|(k, v)| (k.clone(), v.text()))
            .collect();
        let header = Header::of_container(opened.header_len, opened.tensors)
            .with_data_start(opened.header_len)
            .with_metadata(texts);
        let mut file = Self::assemble(path, source, header, ContainerKind::Gguf, Vec::new(), None);
        file.gguf = Some(opened.parts);
        Ok(file)
    }

    /// What a GGUF file says beyond its tensors (`None` for other
    /// containers).
    pub fn gguf(&self) -> Option<&crate::format::gguf::open::GgufParts> {
        self.gguf.as_ref()
    }
}
