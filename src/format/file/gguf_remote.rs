//! A remote GGUF's header (GGUF.md, "Remote"): read from the start in
//! bounded steps, never into the tensor data. Each step fetches what the
//! parse says the header needs at the least (everything declared and not
//! yet read, at its smallest size) plus [`MARGIN`], so a 150k-token
//! vocabulary takes a few requests, and what is received stays within the
//! data section's start plus [`MARGIN`] (plus the first block, when the
//! header is smaller than it).

use crate::format::gguf::header::GgufError;
use crate::format::gguf::open::{Opened, open as open_bytes};
use crate::source::{RemoteError, RemoteFile};

/// What each step fetches beyond what the header needs at the least.
pub(crate) const MARGIN: u64 = 64 * 1024;

/// Why a remote GGUF is not opened.
pub(super) enum Failure {
    Gguf(GgufError),
    Remote(RemoteError),
}

/// Reads the header of `remote`, fetching it step by step.
pub(super) fn open(remote: &RemoteFile) -> Result<Opened, Failure> {
    let len = remote.bytes().len() as u64;
    let mut have = crate::source::remote::file::HEADER_GUESS.min(len);
    loop {
        remote.read_into_map(0..have).map_err(Failure::Remote)?;
        let bytes = remote.bytes().get(..have as usize).unwrap_or(&[]);
        match open_bytes(bytes, len) {
            Ok(opened) => return Ok(opened),
            Err(GgufError::Truncated {
                at, need, reach, ..
            }) if have < len => {
                let want = reach.max(at.saturating_add(need)).saturating_add(MARGIN);
                have = want.min(len).max(have + 1);
            }
            Err(e) => return Err(Failure::Gguf(e)),
        }
    }
}
