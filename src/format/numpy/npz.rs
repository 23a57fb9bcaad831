//! `.npz` archives: one tensor a `*.npy` member, stored or deflated (NUMPY.md,
//! ".npz rules"). Only headers are read here; a deflated member's data is
//! decoded as a stream when a reader asks for it.

use super::header::{self, MAX_HEADER_BYTES};
use super::{NumpyError, Opened, tensor};
use crate::format::stored::{Encoding, Storage};
use crate::format::zip::{self, Member};

/// Reads the `.npz` whose whole file is `bytes` (its central directory
/// already read, when the caller has it).
pub fn open_npz(bytes: &[u8], archive: Option<zip::Archive>) -> Result<Opened, NumpyError> {
    let archive = match archive {
        Some(a) => a,
        None => zip::open(bytes).map_err(NumpyError::Zip)?,
    };
    let members = archive.members();
    let mut out = Opened {
        header_bytes: 0,
        tensors: Vec::new(),
        placements: Vec::new(),
        extras: Vec::new(),
        other_members: Vec::new(),
        is_archive: true,
        archive: None,
    };
    for m in members {
        if m.is_dir {
            continue;
        }
        let Some(name) = m.name.strip_suffix(".npy") else {
            out.other_members.push(m.name.clone());
            continue;
        };
        let in_member = |error: NumpyError| NumpyError::Member {
            member: m.name.clone(),
            error: Box::new(error),
        };
        if m.encrypted {
            return Err(NumpyError::MemberEncoding {
                member: m.name.clone(),
                how: "encrypted".into(),
            });
        }
        if let Some(how) = &m.unsupported {
            return Err(NumpyError::MemberEncoding {
                member: m.name.clone(),
                how: format!("compressed with {how}"),
            });
        }
        let id = out.tensors.len();
        let (h, storage) = if m.stored {
            stored_member(bytes, m).map_err(in_member)?
        } else {
            deflated_member(bytes, &archive, m)?
        };
        let (info, placement, extra) =
            tensor(name.to_owned(), &h, storage, id, Some(m.name.clone())).map_err(in_member)?;
        out.header_bytes = out.header_bytes.saturating_add(h.data_offset);
        out.tensors.push(info);
        out.placements.push(placement);
        out.extras.push(extra);
    }
    if out.tensors.is_empty() {
        return Err(NumpyError::NoArrays {
            members: members.len(),
        });
    }
    out.archive = Some(archive);
    Ok(out)
}

/// A stored member: its `.npy` is a slice of the file.
fn stored_member(bytes: &[u8], m: &Member) -> Result<(header::NpyHeader, Storage), NumpyError> {
    let file_len = bytes.len() as u64;
    let end = m.data_start.checked_add(m.compressed_size);
    let Some(npy) = end
        .filter(|&e| e <= file_len)
        .and_then(|e| bytes.get(m.data_start as usize..e as usize))
    else {
        return Err(NumpyError::Truncated {
            what: "the member",
            needed: m.data_start.saturating_add(m.compressed_size),
            found: file_len,
        });
    };
    if m.size != m.compressed_size {
        return Err(NumpyError::Header(format!(
            "a stored member declares {} bytes uncompressed and {} stored",
            m.size, m.compressed_size
        )));
    }
    let h = header::parse_header(npy)?;
    let needed = h.data_offset.saturating_add(h.nbytes);
    if needed > npy.len() as u64 {
        return Err(NumpyError::Truncated {
            what: "the data",
            needed,
            found: npy.len() as u64,
        });
    }
    let start = m.data_start + h.data_offset;
    let storage = Storage {
        file: 0,
        file_range: start..start + h.nbytes,
        skip: 0,
        len: h.nbytes,
        encoding: Encoding::Plain,
    };
    Ok((h, storage))
}

/// A deflated member: its header is read from the start of its stream.
fn deflated_member(
    bytes: &[u8],
    archive: &zip::Archive,
    m: &Member,
) -> Result<(header::NpyHeader, Storage), NumpyError> {
    let in_member = |error: NumpyError| NumpyError::Member {
        member: m.name.clone(),
        error: Box::new(error),
    };
    // The length field first, then exactly the header.
    let first = archive.prefix(bytes, m, 12).map_err(NumpyError::Zip)?;
    let end = match header::header_end(&first).map_err(in_member)? {
        Some(end) => end,
        None if first.is_empty() => return Err(in_member(NumpyError::Empty)),
        None => {
            return Err(in_member(NumpyError::Truncated {
                what: "the header's length field",
                needed: 12,
                found: first.len() as u64,
            }));
        }
    };
    let head = archive
        .prefix(bytes, m, end.min(MAX_HEADER_BYTES + 12))
        .map_err(NumpyError::Zip)?;
    let h = header::parse_header(&head).map_err(in_member)?;
    let needed = h.data_offset.saturating_add(h.nbytes);
    if m.size < needed {
        return Err(NumpyError::MemberSize {
            member: m.name.clone(),
            declared: m.size,
            needed,
        });
    }
    let storage = Storage {
        file: 0,
        file_range: m.data_start..m.data_start.saturating_add(m.compressed_size),
        skip: h.data_offset,
        len: h.nbytes,
        encoding: Encoding::Deflated {
            member: m.index,
            declared_size: m.size,
        },
    };
    Ok((h, storage))
}
