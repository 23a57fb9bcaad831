//! Where a checkpoint's bytes come from: the layer below the format.
//!
//! A [`Source`] is either a local file mapped read-only ([`map`]: zero
//! copy, as before) or a remote file read in ranges over HTTP(S) through an
//! on-disk cache ([`remote`]). Both give the format one slice of the whole
//! file, so the format, statistics, diff, export, quantization and heatmap
//! code have no remote special case. What a remote file adds is one step
//! before reading: [`Source::fetch`] brings a byte range into the cache (a
//! no-op for a local file) and pins it until the reader is done; every
//! reader asks for the tensors it is about to read through
//! `Checkpoint::fetch`. A reader that forgot would read zeros, so
//! `Checkpoint::check_unchanged`, which every reader calls before it
//! reports, also refuses a range that is not in the cache.

pub(crate) mod map;
pub mod remote;
pub mod scratch;

use std::ops::Range;

use crate::jobs::{CancelToken, Progress};
use map::Mapping;
pub use remote::{RemoteError, RemoteFile};

/// `path` made absolute, unless it is a remote location (a URL is kept
/// as written).
pub fn absolute_location(path: std::path::PathBuf) -> std::path::PathBuf {
    if is_remote_location(&path) {
        return path;
    }
    std::path::absolute(&path).unwrap_or(path)
}

/// True when `path` names a remote location (`http(s)://`, `hf://`).
pub fn is_remote_location(path: &std::path::Path) -> bool {
    path.to_str().is_some_and(remote::is_remote)
}

/// How many of `items` (at least one, at most `max_items`) make the next
/// batch of a reader: as many as fit in `max_bytes`, a larger first item
/// alone.
pub fn batch_len<T>(
    items: &[T],
    max_items: usize,
    max_bytes: u64,
    bytes_of: impl Fn(&T) -> u64,
) -> usize {
    let mut size = 0u64;
    let mut len = 0;
    for t in items.iter().take(max_items) {
        if len > 0 && size.saturating_add(bytes_of(t)) > max_bytes {
            break;
        }
        size = size.saturating_add(bytes_of(t));
        len += 1;
    }
    len.max(1).min(items.len())
}

/// The bytes of one file.
#[derive(Debug)]
pub enum Source {
    /// A local file, mapped read-only.
    Local(Mapping),
    /// A remote file, read in ranges into a mapped cache file.
    Remote(RemoteFile),
}

/// Ranges of a file kept in the cache while a reader uses them (nothing
/// for a local file); released when dropped.
#[derive(Debug, Default)]
#[must_use = "the bytes stay pinned only while this is kept"]
pub struct Fetched {
    pins: Vec<remote::Pin>,
    slots: Vec<scratch::SlotPin>,
}

impl Fetched {
    /// Adds the pins of another fetch.
    pub fn extend(&mut self, other: Fetched) {
        self.pins.extend(other.pins);
        self.slots.extend(other.slots);
    }

    /// Keeps a tensor's scratch space filled while this is kept.
    pub fn keep(&mut self, slot: scratch::SlotPin) {
        self.slots.push(slot);
    }
}

impl Source {
    /// The whole file: as mapped, or (remote) the cache file's map, whose
    /// ranges not yet fetched read as zeros.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Source::Local(m) => m.bytes(),
            Source::Remote(r) => r.bytes(),
        }
    }

    /// Length of the file in bytes when it was opened.
    pub fn len(&self) -> u64 {
        self.bytes().len() as u64
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The remote file, if this is one.
    pub fn remote(&self) -> Option<&RemoteFile> {
        match self {
            Source::Local(_) => None,
            Source::Remote(r) => Some(r),
        }
    }

    /// True once a read found the local file cut short, or a response of
    /// the server showed another version of the remote file.
    pub fn changed(&self) -> bool {
        match self {
            Source::Local(m) => m.changed(),
            Source::Remote(r) => r.changed(),
        }
    }

    /// Brings `range` into the cache (remote) and keeps it there until the
    /// result is dropped; nothing to do for a local file.
    pub fn fetch(
        &self,
        range: Range<u64>,
        cancel: &CancelToken,
        progress: &Progress,
    ) -> Result<Fetched, RemoteError> {
        match self {
            Source::Local(_) => Ok(Fetched::default()),
            Source::Remote(r) => Ok(Fetched {
                pins: vec![r.fetch(range, cancel, progress)?],
                slots: Vec::new(),
            }),
        }
    }

    /// True when every byte of `range` can be read: always for a local
    /// file, once fetched for a remote one. One look at a bitmap: for the
    /// UI thread, which must not fetch.
    pub fn is_present(&self, range: Range<u64>) -> bool {
        match self {
            Source::Local(_) => true,
            Source::Remote(r) => r.is_present(range),
        }
    }
}
