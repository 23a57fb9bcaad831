//! The superblock (versions 0 to 3) and object headers (versions 1 and 2,
//! with their continuation blocks): every message of an object, as a
//! slice of the file.

use std::collections::HashSet;

use super::error::Hdf5Error;
use super::io::{Cur, File, UNDEF, le};

/// The HDF5 file signature.
pub const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Continuation blocks an object header may have at most.
const MAX_CHUNKS: usize = 4096;
/// Messages an object header may hold at most.
const MAX_MESSAGES: usize = 1 << 16;

/// Where the superblock is: offset 0, or 512, 1024, 2048, ... (a user
/// block before it), the first offset below the file's length holding the
/// signature.
pub fn find_superblock(bytes: &[u8]) -> Option<u64> {
    let len = bytes.len() as u64;
    let mut at = 0u64;
    loop {
        if bytes.get(at as usize..(at + 8) as usize) == Some(&SIGNATURE[..]) {
            return Some(at);
        }
        at = if at == 0 { 512 } else { at.checked_mul(2)? };
        if at.checked_add(8)? > len {
            return None;
        }
    }
}

/// What the superblock says.
#[derive(Debug, Clone, Copy)]
pub(super) struct Superblock {
    /// Its version (0 to 3).
    pub version: u8,
    /// The root group's object header address.
    pub root: u64,
}

/// Reads the superblock at absolute offset `at` (the base address: as the
/// HDF5 library does, addresses are relative to where the superblock is,
/// whatever base address it stores).
pub(super) fn superblock(f: &File<'_>, at: u64) -> Result<Superblock, Hdf5Error> {
    const WHAT: &str = "the superblock";
    let need = |n: u64| f.cursor(0, n, WHAT);
    let mut c = need(9)?;
    c.skip(8)?;
    let version = c.u8()?;
    let (root, eof) = match version {
        0 | 1 => {
            let size = if version == 0 { 96 } else { 100 };
            let mut c = need(size)?;
            c.skip(13)?;
            let (offsets, lengths) = (c.u8()?, c.u8()?);
            sizes(at, offsets, lengths)?;
            c.skip(1 + 2 + 2 + 4)?;
            if version == 1 {
                c.skip(4)?;
            }
            let _base = c.u64()?;
            let _free = c.u64()?;
            let eof = c.u64()?;
            let _driver = c.u64()?;
            // The root group's symbol table entry: name offset, header.
            let _name = c.u64()?;
            (c.u64()?, eof)
        }
        2 | 3 => {
            let mut c = need(48)?;
            c.skip(9)?;
            let (offsets, lengths) = (c.u8()?, c.u8()?);
            sizes(at, offsets, lengths)?;
            c.skip(1)?;
            let _base = c.u64()?;
            let _extension = c.u64()?;
            let eof = c.u64()?;
            let root = c.u64()?;
            c.check_sum(44)?;
            (root, eof)
        }
        v => {
            return Err(Hdf5Error::unsupported(format!(
                "superblock version {v} at byte {at} (versions 0 to 3 are read)"
            )));
        }
    };
    // The end-of-file address counts the user block too (as the HDF5
    // library compares it with the file's length).
    if eof != UNDEF && eof > f.len() {
        return Err(Hdf5Error::Truncated {
            what: "the file (its superblock's end-of-file address)".into(),
            start: 0,
            end: eof,
            len: f.len(),
        });
    }
    Ok(Superblock { version, root })
}

/// Only 8-byte offsets and lengths are read.
fn sizes(at: u64, offsets: u8, lengths: u8) -> Result<(), Hdf5Error> {
    if offsets != 8 || lengths != 8 {
        return Err(Hdf5Error::unsupported(format!(
            "the superblock at byte {at} gives {offsets}-byte addresses and {lengths}-byte lengths (only 8 and 8 are read)"
        )));
    }
    Ok(())
}

/// One message of an object header.
#[derive(Debug, Clone, Copy)]
pub(super) struct Message<'a> {
    /// Its type (0x0001 dataspace, 0x0003 datatype, ...).
    pub kind: u16,
    /// Its flags (bit 1: shared).
    pub flags: u8,
    /// Its bytes.
    pub data: &'a [u8],
    /// The absolute offset of its first byte.
    pub at: u64,
}

impl<'a> Message<'a> {
    /// A cursor over its bytes.
    pub fn cursor(&self, what: &'static str) -> Cur<'a> {
        Cur::new(self.data, self.at, what)
    }
}

/// The messages of the object header at relative address `addr`, in
/// order, continuation blocks followed (each once, at most
/// [`MAX_CHUNKS`]).
pub(super) fn object_header<'a>(f: &File<'a>, addr: u64) -> Result<Vec<Message<'a>>, Hdf5Error> {
    let first = f.at(addr, 4, "an object header")?;
    if first == b"OHDR" {
        v2(f, addr)
    } else {
        v1(f, addr)
    }
}

/// Version 1: a 16-byte prefix, messages of 8-byte headers.
fn v1<'a>(f: &File<'a>, addr: u64) -> Result<Vec<Message<'a>>, Hdf5Error> {
    const WHAT: &str = "an object header (version 1)";
    let mut c = f.cursor(addr, 16, WHAT)?;
    let version = c.u8()?;
    if version != 1 {
        return Err(c.err(format!(
            "version {version}: neither 1 nor an \"OHDR\" signature of version 2"
        )));
    }
    c.skip(1)?;
    let count = c.u16()? as usize;
    let _refs = c.u32()?;
    let size = c.u32()?;
    let mut out = Vec::new();
    let mut chunks = vec![(addr.saturating_add(16), u64::from(size))];
    let mut seen = HashSet::new();
    let mut i = 0;
    while let Some(&(at, len)) = chunks.get(i) {
        i += 1;
        let mut c = f.cursor(at, len, WHAT)?;
        while c.remaining() >= 8 && out.len() < count {
            let kind = c.u16()?;
            let size = c.u16()? as usize;
            let flags = c.u8()?;
            c.skip(3)?;
            let msg_at = c.abs();
            let data = c.bytes(size)?;
            push(
                &mut out,
                &mut chunks,
                &mut seen,
                Message {
                    kind,
                    flags,
                    data,
                    at: msg_at,
                },
            )?;
        }
    }
    Ok(out)
}

/// Version 2: "OHDR", flags, optional times and attribute bounds, chunk
/// 0's size; messages of 4- or 6-byte headers; each block checksummed.
fn v2<'a>(f: &File<'a>, addr: u64) -> Result<Vec<Message<'a>>, Hdf5Error> {
    const WHAT: &str = "an object header (version 2)";
    let mut c = f.tail(addr, 64, WHAT)?;
    c.signature("OHDR")?;
    let version = c.u8()?;
    if version != 2 {
        return Err(c.err(format!("version {version} after \"OHDR\" (2 is read)")));
    }
    let flags = c.u8()?;
    if flags & 0x20 != 0 {
        c.skip(16)?;
    }
    if flags & 0x10 != 0 {
        c.skip(4)?;
    }
    let size = c.uint(1 << (flags & 3))?;
    let prefix = c.pos() as u64;
    let order = flags & 0x04 != 0;
    // Chunk 0 is the prefix, the messages and the checksum.
    let total = prefix
        .checked_add(size)
        .and_then(|n| n.checked_add(4))
        .ok_or_else(|| c.err("its size overflows"))?;
    let block = f.cursor(addr, total, WHAT)?;
    block.check_sum((prefix + size) as usize)?;
    let mut out = Vec::new();
    let mut chunks = vec![(addr, total)];
    let mut seen = HashSet::new();
    let mut i = 0;
    while let Some(&(at, len)) = chunks.get(i) {
        let mut c = f.cursor(at, len, WHAT)?;
        if i == 0 {
            c.skip(prefix as usize)?;
        } else {
            c.signature("OCHK")?;
            if len < 8 {
                return Err(c.err("a continuation block shorter than its signature and checksum"));
            }
            c.check_sum(len as usize - 4)?;
        }
        i += 1;
        let end = (len as usize).saturating_sub(4);
        let head = if order { 6 } else { 4 };
        while c.pos() + head <= end {
            let kind = u16::from(c.u8()?);
            let size = c.u16()? as usize;
            let mflags = c.u8()?;
            if order {
                c.skip(2)?;
            }
            if c.pos() + size > end {
                return Err(c.err(format!("a message of {size} bytes runs past its block")));
            }
            let msg_at = c.abs();
            let data = c.bytes(size)?;
            push(
                &mut out,
                &mut chunks,
                &mut seen,
                Message {
                    kind,
                    flags: mflags,
                    data,
                    at: msg_at,
                },
            )?;
        }
    }
    Ok(out)
}

/// Keeps a message; a continuation (0x10) adds its block to `chunks`.
fn push<'a>(
    out: &mut Vec<Message<'a>>,
    chunks: &mut Vec<(u64, u64)>,
    seen: &mut HashSet<u64>,
    m: Message<'a>,
) -> Result<(), Hdf5Error> {
    if out.len() >= MAX_MESSAGES {
        return Err(Hdf5Error::Limit {
            what: "messages in one object header",
            limit: MAX_MESSAGES as u64,
        });
    }
    if m.kind == 0x10 {
        let (Some(a), Some(l)) = (m.data.get(..8), m.data.get(8..16)) else {
            return Err(Hdf5Error::malformed(
                "a continuation message",
                m.at,
                "shorter than an address and a length",
            ));
        };
        let (a, l) = (le(a), le(l));
        if seen.insert(a) {
            if chunks.len() >= MAX_CHUNKS {
                return Err(Hdf5Error::Limit {
                    what: "continuation blocks of one object header",
                    limit: MAX_CHUNKS as u64,
                });
            }
            chunks.push((a, l));
        }
    }
    out.push(m);
    Ok(())
}
