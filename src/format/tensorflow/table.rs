//! The LevelDB-style table a TensorBundle's `.index` is (tsl's
//! `table_format.txt`): a 48-byte footer (the metaindex and index block
//! handles as varint pairs, zero padding, the magic), an index block whose
//! entries point at the data blocks, and data blocks of prefix-compressed
//! entries with a restart array. Each block is followed by a type byte
//! (only 0, uncompressed, is read) and the masked CRC-32C of the block and
//! its type, which is checked. Every varint, length and restart point is
//! checked against the block; keys must be strictly increasing across the
//! whole table, data blocks in file order without overlap.

use super::crc;
use super::error::{TensorflowError, show_key};
use super::wire;

/// The footer's length.
pub const FOOTER_LEN: usize = 48;
/// The footer's last 8 bytes, little-endian.
pub const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// A block's trailer: the type byte and the masked CRC.
const TRAILER: u64 = 5;
/// The table's keys add up to at most this many bytes (prefix compression
/// lets a small file spell long keys many times over).
pub const MAX_KEY_BYTES: u64 = 256 << 20;

/// One entry of the table: its key (rebuilt from the shared prefix), its
/// value (bytes of the file) and the file offset of the entry.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// The full key.
    pub key: Vec<u8>,
    /// The value's bytes.
    pub value: &'a [u8],
    /// The entry's offset in the file, for messages.
    pub at: u64,
}

/// Where a block is: its offset and its length without the trailer.
#[derive(Debug, Clone, Copy)]
struct Handle {
    offset: u64,
    size: u64,
}

fn handle(buf: &[u8], pos: &mut usize) -> Result<Handle, wire::WireError> {
    Ok(Handle {
        offset: wire::varint(buf, pos)?,
        size: wire::varint(buf, pos)?,
    })
}

/// Reads the table `file` (the whole `.index`): every data entry, in key
/// order.
pub fn entries(file: &[u8]) -> Result<Vec<Entry<'_>>, TensorflowError> {
    let len = file.len();
    let Some(footer_at) = len.checked_sub(FOOTER_LEN) else {
        return Err(TensorflowError::TooShort { len: len as u64 });
    };
    let footer = &file[footer_at..];
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&footer[40..]);
    let found = u64::from_le_bytes(magic);
    if found != MAGIC {
        return Err(TensorflowError::BadMagic {
            found,
            at: (len - 8) as u64,
            end: len as u64,
        });
    }
    let handles = &footer[..40];
    let mut pos = 0;
    let bad_footer = |e: wire::WireError| TensorflowError::BadBlock {
        which: "footer",
        block: footer_at as u64,
        rule: format!("its block handles cannot be read: {}", e.rule),
        at: (footer_at + e.offset) as u64,
    };
    let _metaindex = handle(handles, &mut pos).map_err(bad_footer)?;
    let index = handle(handles, &mut pos).map_err(bad_footer)?;
    let limit = footer_at as u64;
    let index_block = block(file, index, "index", limit)?;
    let mut out: Vec<Entry<'_>> = Vec::new();
    let mut key_bytes = 0u64;
    let mut data_end = 0u64;
    walk(index_block, index.offset, "index", &mut |sep, value, at| {
        let mut p = 0;
        let h = handle(value, &mut p).map_err(|e| TensorflowError::BadBlock {
            which: "index",
            block: index.offset,
            rule: format!("an entry's block handle cannot be read: {}", e.rule),
            at,
        })?;
        if h.offset < data_end {
            return Err(TensorflowError::BadBlock {
                which: "index",
                block: index.offset,
                rule: format!(
                    "the data block at byte {} overlaps the one before it or comes before it",
                    h.offset
                ),
                at,
            });
        }
        let data = block(file, h, "data", limit)?;
        data_end = h.offset + h.size + TRAILER;
        let before = out.len();
        walk(data, h.offset, "data", &mut |key, value, at| {
            if let Some(prev) = out.last()
                && prev.key.as_slice() >= key
            {
                return Err(TensorflowError::KeysOutOfOrder {
                    key: show_key(key),
                    previous: show_key(&prev.key),
                    at,
                });
            }
            key_bytes = key_bytes.saturating_add(key.len() as u64);
            if key_bytes > MAX_KEY_BYTES {
                return Err(TensorflowError::KeysTooLarge {
                    limit: MAX_KEY_BYTES,
                });
            }
            out.push(Entry {
                key: key.to_vec(),
                value,
                at,
            });
            Ok(())
        })?;
        let rule = match out.last() {
            Some(_) if out.len() == before => Some("the data block holds no entry"),
            None => Some("the data block holds no entry"),
            Some(last) if last.key.as_slice() > sep => {
                Some("the index key is less than its data block's last key")
            }
            Some(_) => None,
        };
        match rule {
            Some(rule) => Err(TensorflowError::BadBlock {
                which: "index",
                block: index.offset,
                rule: rule.to_owned(),
                at,
            }),
            None => Ok(()),
        }
    })?;
    Ok(out)
}

/// The contents of the block at `h` (without its trailer), after checking
/// that it and its trailer end before `limit`, its type is 0 and its CRC
/// matches.
fn block<'a>(
    file: &'a [u8],
    h: Handle,
    which: &'static str,
    limit: u64,
) -> Result<&'a [u8], TensorflowError> {
    let end = h
        .offset
        .checked_add(h.size)
        .and_then(|e| e.checked_add(TRAILER));
    let Some(end) = end.filter(|&e| e <= limit) else {
        return Err(TensorflowError::BlockOutOfBounds {
            which,
            offset: h.offset,
            end: h.offset.saturating_add(h.size).saturating_add(TRAILER),
            limit,
        });
    };
    // In bounds of `file`: `limit` is at most its length.
    let (start, stop) = (h.offset as usize, (h.offset + h.size) as usize);
    let contents = &file[start..stop];
    let kind = file[stop];
    let mut stored = [0u8; 4];
    stored.copy_from_slice(&file[stop + 1..end as usize]);
    let stored = u32::from_le_bytes(stored);
    let computed = crc::mask(crc::extend(crc::value(contents), &[kind]));
    if stored != computed {
        return Err(TensorflowError::BlockChecksum {
            which,
            offset: h.offset,
            end: h.offset + h.size,
            stored,
            computed,
        });
    }
    if kind != 0 {
        return Err(TensorflowError::Compressed {
            which,
            offset: h.offset,
            kind,
        });
    }
    Ok(contents)
}

/// What [`walk`] calls with each entry: its full key, its value and its
/// file offset.
type Visit<'v, 'a> = dyn FnMut(&[u8], &'a [u8], u64) -> Result<(), TensorflowError> + 'v;

/// Calls `f` with each entry of `block` (at file offset `offset`): its
/// full key, its value and its file offset.
fn walk<'a>(
    block: &'a [u8],
    offset: u64,
    which: &'static str,
    f: &mut Visit<'_, 'a>,
) -> Result<(), TensorflowError> {
    let bad = |rule: &str, at: usize| TensorflowError::BadBlock {
        which,
        block: offset,
        rule: rule.to_owned(),
        at: offset + at as u64,
    };
    let n = block.len();
    let Some(count_at) = n.checked_sub(4) else {
        return Err(bad("the block is shorter than its restart count", 0));
    };
    let mut count = [0u8; 4];
    count.copy_from_slice(&block[count_at..]);
    let restarts = u32::from_le_bytes(count) as usize;
    if restarts > count_at / 4 {
        return Err(bad(
            &format!("{restarts} restart points do not fit in the block"),
            count_at,
        ));
    }
    let entries_end = count_at - 4 * restarts;
    let restart = |i: usize| {
        let at = entries_end + 4 * i;
        let mut b = [0u8; 4];
        b.copy_from_slice(&block[at..at + 4]);
        u32::from_le_bytes(b) as usize
    };
    if restarts == 0 && entries_end > 0 {
        return Err(bad("entries but no restart point", count_at));
    }
    let region = &block[..entries_end];
    let mut key: Vec<u8> = Vec::new();
    let mut pos = 0usize;
    let mut next_restart = 0usize;
    let mut any = false;
    while pos < entries_end {
        let at = pos;
        let mut fields = [0u64; 3];
        for v in &mut fields {
            *v = wire::varint(region, &mut pos)
                .map_err(|e| bad(&format!("an entry's lengths: {}", e.rule), e.offset))?;
        }
        let [shared, unshared, value_len] = fields;
        if next_restart < restarts {
            let r = restart(next_restart);
            if r == at {
                if shared != 0 {
                    return Err(bad("the entry at a restart point shares a prefix", at));
                }
                next_restart += 1;
            } else if r < at {
                return Err(bad(&format!("restart point {r} is not at an entry"), at));
            }
        }
        if shared > key.len() as u64 {
            return Err(bad(
                &format!(
                    "the entry shares {shared} bytes of a previous key of {}",
                    key.len()
                ),
                at,
            ));
        }
        let rest = (entries_end - pos) as u64;
        if unshared
            .checked_add(value_len)
            .is_none_or(|need| need > rest)
        {
            return Err(bad(
                &format!(
                    "the entry's key suffix ({unshared}) and value ({value_len}) need more than the {rest} bytes left"
                ),
                at,
            ));
        }
        key.truncate(shared as usize);
        let k_end = pos + unshared as usize;
        key.extend_from_slice(&region[pos..k_end]);
        let v_end = k_end + value_len as usize;
        f(&key, &region[k_end..v_end], offset + at as u64)?;
        pos = v_end;
        any = true;
    }
    // An empty block still has its one restart point, at 0.
    for i in next_restart..restarts {
        let r = restart(i);
        if any || r != 0 {
            return Err(bad(
                &format!("restart point {r} is past the last entry"),
                entries_end + 4 * i,
            ));
        }
    }
    Ok(())
}
