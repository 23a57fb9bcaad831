//! Read-only memory mapping of a file: the one place that needs `unsafe`.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;

/// The bytes of a file, mapped read-only (or empty for an empty file, which
/// cannot be mapped on every platform).
#[derive(Debug)]
pub struct Mapping {
    map: Option<memmap2::Mmap>,
}

impl Mapping {
    /// Maps `file` read-only; an empty file gets an empty slice, not a map.
    pub fn map(file: &File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(Self { map: None });
        }
        // SAFETY: the mapping is read-only and private to this process. The
        // remaining hazard is another program truncating or rewriting the
        // file while it is mapped: a truncation raises SIGBUS on access and a
        // rewrite changes the bytes under us. Tensorscope never writes to a
        // file it has mapped, copies the header before parsing it, and checks
        // the file length before each job, which is the best a reader can do.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        Ok(Self { map: Some(map) })
    }

    /// The mapped bytes: the whole file as it was when mapped.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl Deref for Mapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}
