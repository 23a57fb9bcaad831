//! A GGUF file into the model ([`open_file`]), and a remote
//! GGUF's header (GGUF.md, "Remote"): read from the start in
//! bounded steps, never into the tensor data. Each step fetches what the
//! parse says the header needs at the least (everything declared and not
//! yet read, at its smallest size) plus [`MARGIN`], so a 150k-token
//! vocabulary takes a few requests, and what is received stays within the
//! data section's start plus [`MARGIN`] (plus the first block, when the
//! header is smaller than it).

use crate::format::containers::{ContainerKind, Opening};
use crate::format::file::Parts;
use crate::format::gguf::header::GgufError;
use crate::format::gguf::open::{GgufParts, Opened, open as open_bytes};
use crate::format::{Header, LoadError, StoredFile};
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

/// A GGUF file read into the model: its header parsed (for a remote
/// file, fetched in bounded steps first: see [`open`]).
pub(crate) fn open_file(o: Opening) -> Result<StoredFile, LoadError> {
    let Opening { path, source, .. } = o;
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
        None => open_bytes(source.bytes(), source.len()).map_err(error)?,
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
    Ok(
        StoredFile::assemble(path, source, header, ContainerKind::GGUF, Vec::new())
            .with_parts(opened.parts),
    )
}

impl Parts for GgufParts {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn metadata(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        Some(self.metadata_json())
    }

    fn shape(&self, index: usize) -> Option<&[u64]> {
        self.shapes.get(index).map(Vec::as_slice)
    }
}

impl StoredFile {
    /// What a GGUF file says beyond its tensors (`None` for other
    /// containers).
    pub fn gguf(&self) -> Option<&GgufParts> {
        self.parts()
    }
}
