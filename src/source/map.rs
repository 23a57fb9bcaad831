//! Read-only memory mapping of a file: the one place of the format that
//! needs `unsafe`.
//!
//! # A file that shrinks while it is mapped
//!
//! Checkpoints are overwritten while they are open, and reading a page
//! that a file lost since it was mapped raises a fault that would kill the
//! process. Every mapping is registered with the platform's fault guard
//! (`platform::fault`), which puts zero pages in place of the lost ones and
//! flags the mapping: every reader checks [`Mapping::changed`] (through
//! `StoredFile::check_unchanged`) before it reports, and turns a changed
//! mapping into an error.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;

use crate::platform::fault;

/// The bytes of a file, mapped read-only (or empty for an empty file, which
/// cannot be mapped on every platform).
#[derive(Debug)]
pub struct Mapping {
    /// Where this mapping sits in the fault handler's table, if it does;
    /// released before the map is unmapped (see `Drop`).
    guard: Option<fault::Registration>,
    map: Option<memmap2::Mmap>,
    /// The file's bytes read into memory instead of mapped
    /// ([`Mapping::read`]).
    owned: Option<Box<[u8]>>,
}

impl Mapping {
    /// Maps `file` read-only; an empty file gets an empty slice, not a map.
    pub fn map(file: &File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(Self {
                map: None,
                guard: None,
                owned: None,
            });
        }
        // SAFETY: the mapping is read-only and private to this process.
        // Tensorscope never writes to a file it has mapped and copies the
        // header before parsing it. A rewrite by another program changes the
        // bytes under us (readers re-check the length when done); a
        // truncation (or a failed page-in) would raise a fault, which the
        // platform's guard turns into zero pages and a flag.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        let guard = fault::register(map.as_ptr() as usize, map.len());
        Ok(Self {
            map: Some(map),
            guard,
            owned: None,
        })
    }

    /// Bytes already in memory, as a mapping's (a small remote file fetched
    /// whole, validated by an opener of local files).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self {
            map: None,
            guard: None,
            owned: Some(bytes.into_boxed_slice()),
        }
    }

    /// The first `len` bytes of `file` read into memory, for a small file
    /// that many threads look at once (`scan`): mapping and unmapping it
    /// would cost each thread's TLB a flush on every unmap. A file changed
    /// while read is the caller's to see (its length, read again).
    pub fn read(file: &File, len: u64) -> io::Result<Self> {
        use std::io::Read as _;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(usize::try_from(len).map_err(io::Error::other)?)?;
        file.take(len).read_to_end(&mut bytes)?;
        Ok(Self::from_bytes(bytes))
    }

    /// The mapped bytes: the whole file as it was when mapped (with zeros
    /// where it was cut short while mapped; see [`Mapping::changed`]).
    pub fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(map) => map,
            None => self.owned.as_deref().unwrap_or(&[]),
        }
    }

    /// Drops this process's hold on the mapped pages: they leave its
    /// resident set and stay in the page cache, and a later read maps them
    /// back from there (a minor fault, no disk read). For the maps of
    /// scratch files, which a long read would otherwise keep resident whole.
    #[cfg(unix)]
    pub fn forget_pages(&self) {
        if let Some(map) = &self.map {
            // SAFETY: the map is a shared mapping of a file (`map` above),
            // for which MADV_DONTNEED only unmaps pages: their contents are
            // the file's, read back from the page cache on the next access,
            // so no reader, also one reading now, sees other bytes.
            let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    /// Where pages cannot be let go of, nothing is done.
    #[cfg(not(unix))]
    pub fn forget_pages(&self) {}

    /// True once a read found the file shorter than when it was mapped: the
    /// bytes read since may be zeros that the file does not hold.
    pub fn changed(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(fault::Registration::changed)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Out of the handler's table before the addresses are unmapped and
        // can be given to another mapping; what the handler put in place
        // of the view (Windows) freed after.
        let released = self.guard.take().map(fault::Registration::release);
        drop(self.map.take());
        if let Some(released) = released {
            released.free_after_unmap();
        }
    }
}

impl Deref for Mapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_file_cut_short_reads_as_zeros_and_is_flagged() {
        let page = 4096;
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(&vec![7u8; 8 * page]).expect("write");
        f.flush().expect("flush");
        let map = Mapping::map(f.as_file()).expect("map");
        assert!(!map.changed());
        assert_eq!(map.bytes()[5 * page], 7);
        f.as_file().set_len(page as u64).expect("truncate");
        // Without the handler this read would end the process.
        let sum: u64 = map.bytes().iter().map(|&b| u64::from(b)).sum();
        assert!(map.changed());
        assert_eq!(map.bytes().len(), 8 * page);
        assert_eq!(
            sum,
            7 * page as u64,
            "the page kept reads 7s, the rest zeros"
        );
        drop(map);
        // A new mapping of the same slot starts unflagged.
        let again = Mapping::map(f.as_file()).expect("map");
        assert!(!again.changed());
    }
}
