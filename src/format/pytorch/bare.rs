//! A bare pickle (PICKLE.md §1): a file that is one pickle and nothing
//! else (first byte `PROTO`, not the legacy magic), such as a `weights.bin`
//! written by `pickle.dump`. It has no storages, so it holds no tensors:
//! what matters is the globals it would import, and, when it is safe, its
//! plain leaves (a training run's arguments).

use super::archive::{TorchError, TorchZip};
use super::objects;

/// How a bare pickle starts: `PROTO` (protocol 2 and later).
pub const PROTO: u8 = 0x80;

/// Reads the bare pickle `bytes`: its globals, and its leaves when every
/// global is allowlisted. An unsafe global seen before the pickle stops
/// parsing still makes it unsafe.
pub fn read(bytes: &[u8]) -> Result<TorchZip, TorchError> {
    let parsed = match super::archive::parse_scanned(bytes)? {
        Ok(p) => p,
        Err(unsafe_file) => return Ok(unsafe_file),
    };
    let unsafe_globals = super::unsafe_globals(&parsed.globals);
    if !unsafe_globals.is_empty() {
        return Ok(TorchZip::unsafe_file(parsed.globals, unsafe_globals));
    }
    // Its tensors would name storages it does not have: only the leaves
    // are kept, and an object that is no checkpoint's keeps none.
    let metadata = objects::contents(&parsed.graph)
        .map(|c| c.metadata)
        .unwrap_or_default();
    let mut out = TorchZip::unsafe_file(parsed.globals, Vec::new());
    out.pickle_bytes = parsed.end as u64;
    out.metadata = metadata;
    Ok(out)
}
