//! Zip archives, for the containers that are zips (`.npz`; PyTorch's zip
//! checkpoints next): the member list, a member's first bytes, and a
//! member decoded as a stream into scratch space. Read through the `zip`
//! crate over the file's map; nothing is ever extracted to disk.

use std::io::{Cursor, Read};
use std::sync::Arc;

use crate::jobs::CancelToken;
use crate::source::scratch::{self, Scratch};

/// True when `bytes` start as a zip archive does (a local header, or the
/// end record of an empty archive).
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

/// One member of an archive, as its central directory gives it.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its index in the central directory.
    pub index: usize,
    /// Its name (not UTF-8 bytes replaced).
    pub name: String,
    /// True for a folder entry.
    pub is_dir: bool,
    /// True when stored as is; false when deflated.
    pub stored: bool,
    /// The compression method's name, when neither stored nor deflated.
    pub unsupported: Option<String>,
    /// True when encrypted.
    pub encrypted: bool,
    /// Where its (compressed) bytes start in the file.
    pub data_start: u64,
    /// Its compressed length.
    pub compressed_size: u64,
    /// Its uncompressed length, as declared.
    pub size: u64,
}

/// Why an archive or one of its members cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    /// Not a readable archive (no end record, a broken central directory).
    #[error("not a readable zip archive: {0}")]
    Archive(String),
    /// Two members have the same name.
    #[error("two members of the archive have the same name, which makes it ambiguous")]
    Duplicate,
    /// A member's stream is broken: it ends early, fails its CRC-32, or
    /// holds more than declared.
    #[error("member {member:?}: {message}")]
    Stream {
        /// The member's name.
        member: String,
        /// What is wrong.
        message: String,
    },
    /// The token was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// A zip archive's central directory, read once: its members, and the
/// crate's metadata, so that reading a member does not read the directory
/// again (an archive of 100,000 members is read in one pass).
#[derive(Debug, Clone)]
pub struct Archive {
    meta: Arc<zip::read::ZipArchiveMetadata>,
    members: Vec<Member>,
}

/// Reads the archive `bytes`' central directory.
pub fn open(bytes: &[u8]) -> Result<Archive, ZipError> {
    let zip =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| ZipError::Archive(e.to_string()))?;
    if zip.has_duplicate_names() {
        return Err(ZipError::Duplicate);
    }
    let mut zip = zip;
    let mut members = Vec::with_capacity(zip.len());
    for index in 0..zip.len() {
        let f = zip
            .by_index_raw(index)
            .map_err(|e| ZipError::Archive(format!("member {index}: {e}")))?;
        let method = f.compression();
        let stored = method == zip::CompressionMethod::Stored;
        let deflated = method == zip::CompressionMethod::Deflated;
        members.push(Member {
            index,
            name: String::from_utf8_lossy(f.name_raw()).into_owned(),
            is_dir: f.is_dir(),
            stored,
            unsupported: (!stored && !deflated).then(|| format!("{method:?}")),
            encrypted: f.encrypted(),
            data_start: f.data_start().unwrap_or(0),
            compressed_size: f.compressed_size(),
            size: f.size(),
        });
    }
    Ok(Archive {
        meta: zip.metadata(),
        members,
    })
}

impl Archive {
    /// The members, in central-directory order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// A reader of `bytes`, the very bytes this directory was read from.
    #[allow(unsafe_code)]
    fn reader<'a>(&self, bytes: &'a [u8]) -> zip::ZipArchive<Cursor<&'a [u8]>> {
        // SAFETY: the crate marks this `unsafe` only as the contract that
        // the metadata belongs to the reader's bytes (there is no memory
        // effect); `Archive` is made from, and only used with, the bytes
        // of its own file, and a mismatch would at worst give an error.
        unsafe {
            zip::ZipArchive::unsafe_new_with_metadata(Cursor::new(bytes), Arc::clone(&self.meta))
        }
    }

    /// Up to `max` first bytes of a member, decoded.
    pub fn prefix(&self, bytes: &[u8], member: &Member, max: u64) -> Result<Vec<u8>, ZipError> {
        let mut zip = self.reader(bytes);
        let f = zip
            .by_index(member.index)
            .map_err(|e| stream_error(member, &e))?;
        let mut out = Vec::new();
        f.take(max)
            .read_to_end(&mut out)
            .map_err(|e| stream_error(member, &e))?;
        Ok(out)
    }

    /// Reads the whole member, checking its length and CRC-32, and hands
    /// bytes `skip..skip + len` of it to `sink` (a block at a time). The
    /// stream must hold at least `skip + len` bytes; what follows is read
    /// (for the CRC) and dropped.
    pub fn stream(
        &self,
        bytes: &[u8],
        member: &Member,
        skip: u64,
        len: u64,
        cancel: &CancelToken,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), ZipError> {
        let mut zip = self.reader(bytes);
        let mut f = zip
            .by_index(member.index)
            .map_err(|e| stream_error(member, &e))?;
        let want_end = skip.saturating_add(len);
        let mut at = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            if cancel.is_cancelled() {
                return Err(ZipError::Cancelled);
            }
            let n = f.read(&mut buf).map_err(|e| stream_error(member, &e))?;
            if n == 0 {
                break;
            }
            let (start, end) = (at, at + n as u64);
            let lo = start.max(skip);
            let hi = end.min(want_end);
            if lo < hi {
                let piece = &buf[(lo - start) as usize..(hi - start) as usize];
                sink(piece).map_err(|m| stream_error(member, &m))?;
            }
            at = end;
        }
        if at < want_end {
            return Err(stream_error(
                member,
                &format!("its stream ends after {at} bytes, but {want_end} are needed"),
            ));
        }
        if at != member.size {
            return Err(stream_error(
                member,
                &format!(
                    "its stream holds {at} bytes, but the archive declares {}",
                    member.size
                ),
            ));
        }
        Ok(())
    }

    /// Bytes `skip..skip + len` of a member, decoded into scratch space.
    pub fn decode(
        &self,
        bytes: &[u8],
        member: &Member,
        skip: u64,
        len: u64,
        cancel: &CancelToken,
    ) -> Result<Scratch, ZipError> {
        let mut out = scratch::writer(len).map_err(|e| stream_error(member, &e))?;
        self.stream(bytes, member, skip, len, cancel, &mut |b| {
            out.write(b).map_err(|e| e.to_string())
        })?;
        out.finish().map_err(|e| stream_error(member, &e))
    }

    /// Reads every member whole, checking each one's length and CRC-32.
    pub fn verify(&self, bytes: &[u8], cancel: &CancelToken) -> Result<(), ZipError> {
        for m in &self.members {
            if m.is_dir || m.unsupported.is_some() || m.encrypted {
                continue;
            }
            self.stream(bytes, m, 0, 0, cancel, &mut |_| Ok(()))?;
        }
        Ok(())
    }
}

fn stream_error(member: &Member, e: &dyn std::fmt::Display) -> ZipError {
    ZipError::Stream {
        member: member.name.clone(),
        message: e.to_string(),
    }
}
