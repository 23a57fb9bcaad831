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
    /// Where its local header starts in the file.
    pub header_start: u64,
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

/// Reads the archive `bytes`' central directory, and each member's local
/// header for where its data starts.
pub fn open(bytes: &[u8]) -> Result<Archive, ZipError> {
    read_directory(bytes, &mut |zip, index| {
        let f = zip
            .by_index_raw(index)
            .map_err(|e| ZipError::Archive(format!("member {index}: {e}")))?;
        Ok(f.data_start().unwrap_or(0))
    })
}

/// Reads the central directory of an archive of which only the end
/// records and the directory are at hand (a remote file): a member's data
/// start is where `torch.save` puts it (see [`torch_data_start`]), to be
/// checked against its local header when that is read
/// ([`local_data_start`]).
pub fn open_directory(bytes: &[u8]) -> Result<Archive, ZipError> {
    read_directory(bytes, &mut |zip, index| {
        let f = zip
            .by_index_data(index)
            .map_err(|e| ZipError::Archive(format!("member {index}: {e}")))?;
        Ok(torch_data_start(
            f.header_start(),
            f.name_raw().len() as u64,
            f.compressed_size(),
        ))
    })
}

type DataStart<'a, 'b> =
    dyn FnMut(&mut zip::ZipArchive<Cursor<&'a [u8]>>, usize) -> Result<u64, ZipError> + 'b;

fn read_directory<'a>(
    bytes: &'a [u8],
    data_start: &mut DataStart<'a, '_>,
) -> Result<Archive, ZipError> {
    let mut zip =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| ZipError::Archive(e.to_string()))?;
    if zip.has_duplicate_names() {
        return Err(ZipError::Duplicate);
    }
    let mut members = Vec::with_capacity(zip.len());
    for index in 0..zip.len() {
        let start = data_start(&mut zip, index)?;
        let f = zip
            .by_index_data(index)
            .map_err(|e| ZipError::Archive(format!("member {index}: {e}")))?;
        let method = f.compression();
        let stored = method == zip::CompressionMethod::Stored;
        let deflated = method == zip::CompressionMethod::Deflated;
        members.push(Member {
            index,
            header_start: f.header_start(),
            name: String::from_utf8_lossy(f.name_raw()).into_owned(),
            is_dir: f.is_dir(),
            stored,
            unsupported: (!stored && !deflated).then(|| format!("{method:?}")),
            encrypted: f.encrypted(),
            data_start: start,
            compressed_size: f.compressed_size(),
            size: f.size(),
        });
    }
    Ok(Archive {
        meta: zip.metadata(),
        members,
    })
}

/// Where `torch.save` puts a member's data: after the 30-byte local header,
/// the name, and an extra field (`FB`, its length, padding; with the ZIP64
/// sizes and offset first when they need it) that pads the data to a
/// 64-byte boundary.
pub fn torch_data_start(header_start: u64, name_len: u64, size: u64) -> u64 {
    const WIDE: u64 = 0xFFFF_FFFF;
    let mut start = header_start
        .saturating_add(30)
        .saturating_add(name_len)
        .saturating_add(4);
    if size >= WIDE || header_start >= WIDE {
        start = start.saturating_add(4);
        if size >= WIDE {
            start = start.saturating_add(16);
        }
        if header_start >= WIDE {
            start = start.saturating_add(8);
        }
    }
    start.saturating_add(63) & !63
}

/// Where a member's data starts, read off its local header at
/// `header_start` in `bytes`; `None` when no local header is there.
pub fn local_data_start(bytes: &[u8], header_start: u64) -> Option<u64> {
    let at = usize::try_from(header_start).ok()?;
    let h = bytes.get(at..at.checked_add(30)?)?;
    if !h.starts_with(b"PK\x03\x04") {
        return None;
    }
    let name = u64::from(u16::from_le_bytes([h[26], h[27]]));
    let extra = u64::from(u16::from_le_bytes([h[28], h[29]]));
    Some(header_start + 30 + name + extra)
}

/// Where an archive's central directory is, read off its last bytes
/// (`tail`, which start at byte `tail_start` of a `len`-byte file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directory {
    /// The directory's byte range.
    At(std::ops::Range<u64>),
    /// A ZIP64 archive: its end record (56 bytes) is at this offset.
    Zip64Record(u64),
    /// The end record is not in `tail`: a longer tail is needed.
    NotInTail,
}

/// Finds the end-of-central-directory record in `tail` (scanning back for
/// its signature) and reads where the directory is.
pub fn locate_directory(tail: &[u8], tail_start: u64, len: u64) -> Result<Directory, ZipError> {
    let Some(at) = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..].starts_with(b"PK\x05\x06"))
    else {
        return Ok(Directory::NotInTail);
    };
    let e = &tail[at..];
    let u16_at = |i: usize| u64::from(u16::from_le_bytes([e[i], e[i + 1]]));
    let u32_at = |i: usize| u64::from(u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]));
    let (entries, size, offset) = (u16_at(10), u32_at(12), u32_at(16));
    if entries == 0xFFFF || size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF {
        // The ZIP64 locator, 20 bytes before the end record.
        let locator = at.checked_sub(20).and_then(|l| tail.get(l..l + 20));
        let Some(l) = locator.filter(|l| l.starts_with(b"PK\x06\x07")) else {
            return Err(ZipError::Archive(
                "a ZIP64 archive without its locator".into(),
            ));
        };
        let mut o = [0u8; 8];
        o.copy_from_slice(&l[8..16]);
        let record = u64::from_le_bytes(o);
        if record.checked_add(56).is_none_or(|end| end > len) {
            return Err(ZipError::Archive(format!(
                "the ZIP64 end record at byte {record} is past the file's {len} bytes"
            )));
        }
        return Ok(Directory::Zip64Record(record));
    }
    directory_range(offset, size, tail_start + at as u64)
}

/// The directory's range from a ZIP64 end record's bytes.
pub fn zip64_directory(record: &[u8], record_start: u64) -> Result<Directory, ZipError> {
    if record.len() < 56 || !record.starts_with(b"PK\x06\x06") {
        return Err(ZipError::Archive(
            "no ZIP64 end record where its locator says".into(),
        ));
    }
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&record[i..i + 8]);
        u64::from_le_bytes(b)
    };
    directory_range(u64_at(48), u64_at(40), record_start)
}

fn directory_range(offset: u64, size: u64, end: u64) -> Result<Directory, ZipError> {
    match offset.checked_add(size) {
        Some(stop) if stop <= end => Ok(Directory::At(offset..stop)),
        _ => Err(ZipError::Archive(format!(
            "the central directory ({size} bytes at byte {offset}) runs past its end record at byte {end}"
        ))),
    }
}

impl Archive {
    /// Sets where member `index`'s data starts, read off its local header.
    pub fn set_data_start(&mut self, index: usize, start: u64) {
        if let Some(m) = self.members.get_mut(index) {
            m.data_start = start;
        }
    }

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

/// Why a remote archive's directory or member could not be read.
#[derive(Debug, Clone)]
pub enum Fetch {
    /// The server did not give the bytes.
    Remote(crate::source::RemoteError),
    /// The bytes are no readable archive.
    Zip(ZipError),
}

/// Bytes of a remote archive's end read first: the end record (22), the
/// ZIP64 locator (20), and the directory itself when the archive is small.
const TAIL_GUESS: u64 = 4096;
/// The longest end: the records and a comment of 65,535 bytes.
const TAIL_MAX: u64 = 22 + 20 + 65_535;

/// A central directory longer than this is refused (a million members).
pub const MAX_DIRECTORY: u64 = 256 << 20;

/// A local header's extra field read with the member, before its length
/// is known (`torch.save` pads to 64 bytes: at most 67 with its `FB`
/// field, plus the ZIP64 sizes).
const EXTRA_GUESS: u64 = 256;

/// Reads a remote archive's central directory into `remote`'s map
/// (`bytes`, the whole file): the end records, then the directory, each by
/// exact ranges; no member's data.
pub fn fetch_directory(remote: &crate::source::RemoteFile, bytes: &[u8]) -> Result<Archive, Fetch> {
    let len = bytes.len() as u64;
    let slice = |r: std::ops::Range<u64>| -> &[u8] {
        bytes
            .get(r.start as usize..(r.end as usize).min(bytes.len()))
            .unwrap_or_default()
    };
    let mut tail = TAIL_GUESS.min(len);
    let directory = loop {
        let start = len - tail;
        remote.read_into_map(start..len).map_err(Fetch::Remote)?;
        match locate_directory(slice(start..len), start, len).map_err(Fetch::Zip)? {
            Directory::NotInTail if tail < TAIL_MAX.min(len) => tail = TAIL_MAX.min(len),
            Directory::NotInTail => {
                return Err(Fetch::Zip(ZipError::Archive(
                    "no end-of-central-directory record in its last bytes".into(),
                )));
            }
            Directory::Zip64Record(at) => {
                remote.read_into_map(at..at + 56).map_err(Fetch::Remote)?;
                break zip64_directory(slice(at..at + 56), at).map_err(Fetch::Zip)?;
            }
            at @ Directory::At(_) => break at,
        }
    };
    let Directory::At(range) = directory else {
        return Err(Fetch::Zip(ZipError::Archive("no central directory".into())));
    };
    if range.end - range.start > MAX_DIRECTORY {
        return Err(Fetch::Zip(ZipError::Archive(format!(
            "its central directory is {} bytes; at most {MAX_DIRECTORY} are read",
            range.end - range.start
        ))));
    }
    remote.read_into_map(range).map_err(Fetch::Remote)?;
    open_directory(bytes).map_err(Fetch::Zip)
}

/// Reads member `index` of a remote archive into `remote`'s map: its local
/// header, checked, then its (compressed) bytes, at most `max` of them;
/// its data start is set in `archive`.
pub fn fetch_member(
    remote: &crate::source::RemoteFile,
    bytes: &[u8],
    archive: &mut Archive,
    index: usize,
    max: u64,
) -> Result<(), Fetch> {
    let len = bytes.len() as u64;
    let Some(m) = archive.members().get(index).cloned() else {
        return Ok(());
    };
    if m.compressed_size > max {
        return Err(Fetch::Zip(ZipError::Archive(format!(
            "{:?} is {} bytes; at most {max} are read",
            m.name, m.compressed_size
        ))));
    }
    let guess = m
        .header_start
        .saturating_add(30 + m.name.len() as u64 + EXTRA_GUESS)
        .saturating_add(m.compressed_size)
        .min(len);
    remote
        .read_into_map(m.header_start..guess)
        .map_err(Fetch::Remote)?;
    let start = local_data_start(bytes, m.header_start).ok_or_else(|| {
        Fetch::Zip(ZipError::Archive(format!(
            "member {:?} has no local header at byte {}",
            m.name, m.header_start
        )))
    })?;
    let end = start.saturating_add(m.compressed_size).min(len);
    if end > guess {
        remote.read_into_map(guess..end).map_err(Fetch::Remote)?;
    }
    archive.set_data_start(index, start);
    Ok(())
}
