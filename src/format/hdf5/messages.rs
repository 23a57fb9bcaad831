//! The object header messages a dataset and a group are read from:
//! dataspace (0x0001), link info (0x0002), fill value (0x0004, 0x0005),
//! link (0x0006), data layout (0x0008), filter pipeline (0x000B), symbol
//! table (0x0011), and the shared-message reference.

use super::error::Hdf5Error;
use super::header::Message;
use super::io::{Cur, UNDEF};

/// Message types.
pub(super) const DATASPACE: u16 = 0x01;
pub(super) const LINK_INFO: u16 = 0x02;
pub(super) const DATATYPE: u16 = 0x03;
pub(super) const FILL_OLD: u16 = 0x04;
pub(super) const FILL: u16 = 0x05;
pub(super) const LINK: u16 = 0x06;
pub(super) const LAYOUT: u16 = 0x08;
pub(super) const GROUP_INFO: u16 = 0x0A;
pub(super) const FILTERS: u16 = 0x0B;
pub(super) const ATTRIBUTE: u16 = 0x0C;
pub(super) const ATTRIBUTE_INFO: u16 = 0x15;
pub(super) const SYMBOL_TABLE: u16 = 0x11;

/// Dimensions a dataspace may have at most (HDF5's own bound).
const MAX_RANK: usize = 32;

/// A dataspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Space {
    /// No elements at all (h5py's `Empty`).
    Null,
    /// One element, shape `[]`.
    Scalar,
    /// Its dimensions and maximum dimensions (`u64::MAX`: unlimited).
    Simple { dims: Vec<u64>, max: Vec<u64> },
}

impl Space {
    /// The shape (`[]` for a scalar, and for null).
    pub fn dims(&self) -> &[u64] {
        match self {
            Space::Simple { dims, .. } => dims,
            _ => &[],
        }
    }
}

/// Reads a dataspace message (versions 1 and 2).
pub(super) fn dataspace(c: &mut Cur<'_>) -> Result<Space, Hdf5Error> {
    let version = c.u8()?;
    let rank = c.u8()? as usize;
    let flags = c.u8()?;
    let kind = match version {
        1 => {
            c.skip(5)?;
            u8::from(rank != 0)
        }
        2 => c.u8()?,
        v => return Err(c.err(format!("dataspace version {v} (1 and 2 are read)"))),
    };
    if rank > MAX_RANK {
        return Err(c.err(format!("{rank} dimensions (at most {MAX_RANK})")));
    }
    match kind {
        0 => Ok(Space::Scalar),
        2 => Ok(Space::Null),
        1 => {
            let mut dims = Vec::with_capacity(rank);
            for _ in 0..rank {
                dims.push(c.u64()?);
            }
            let mut max = dims.clone();
            if flags & 1 != 0 {
                for m in &mut max {
                    *m = c.u64()?;
                }
            }
            Ok(Space::Simple { dims, max })
        }
        k => Err(c.err(format!("dataspace type {k} (0 scalar, 1 simple, 2 null)"))),
    }
}

/// Where a dataset's chunks are indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Index {
    /// A version 1 B-tree of type 1 (layout version 3).
    BTree1(u64),
    /// One chunk; its filtered size and filter mask when filtered.
    Single(u64, Option<(u64, u32)>),
    /// Chunks one after another from the address, in grid order.
    Implicit(u64),
    /// A fixed array (header address).
    FixedArray(u64),
    /// An extensible array (header address): one unlimited dimension.
    ExtensibleArray(u64),
    /// A version 2 B-tree (header address): several unlimited dimensions.
    BTree2(u64),
}

/// A data layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Layout {
    /// In the header: the absolute range of the data.
    Compact { at: u64, len: u64 },
    /// One range at a relative address (`UNDEF`: never written); `size`
    /// is what the message says (none before version 3).
    Contiguous { addr: u64, size: Option<u64> },
    /// Chunks of `dims` (the dataset's rank; the element size apart).
    Chunked {
        dims: Vec<u64>,
        element: u64,
        index: Index,
        /// Partial edge chunks are stored unfiltered (version 4, flag 0).
        edge_unfiltered: bool,
    },
    /// A virtual dataset.
    Virtual,
}

/// Reads a data layout message (versions 1 to 5; 5, of HDF5 2, is laid
/// out as 4).
pub(super) fn layout(m: &Message<'_>) -> Result<Layout, Hdf5Error> {
    let mut c = m.cursor("a data layout message");
    let version = c.u8()?;
    match version {
        1 | 2 => layout_old(&mut c),
        3..=5 => {
            let class = c.u8()?;
            match class {
                0 => {
                    let len = u64::from(c.u16()?);
                    let at = c.abs();
                    c.skip(len as usize)?;
                    Ok(Layout::Compact { at, len })
                }
                1 => {
                    let addr = c.u64()?;
                    let size = c.u64()?;
                    Ok(Layout::Contiguous {
                        addr,
                        size: Some(size),
                    })
                }
                2 if version == 3 => {
                    let n = c.u8()? as usize;
                    let addr = c.u64()?;
                    let (dims, element) = chunk_dims(&mut c, n, 4)?;
                    Ok(Layout::Chunked {
                        dims,
                        element,
                        index: Index::BTree1(addr),
                        edge_unfiltered: false,
                    })
                }
                2 => layout_v4_chunked(&mut c),
                3 => Ok(Layout::Virtual),
                k => Err(c.err(format!("layout class {k} (0 to 3 exist)"))),
            }
        }
        v => Err(c.err(format!("layout version {v} (1 to 5 are read)"))),
    }
}

/// Versions 1 and 2: rank, class, then address, 32-bit dimensions.
fn layout_old(c: &mut Cur<'_>) -> Result<Layout, Hdf5Error> {
    let n = c.u8()? as usize;
    let class = c.u8()?;
    c.skip(5)?;
    match class {
        0 => {
            c.skip(n * 4)?;
            let len = u64::from(c.u32()?);
            let at = c.abs();
            c.skip(len as usize)?;
            Ok(Layout::Compact { at, len })
        }
        1 => {
            let addr = c.u64()?;
            c.skip(n * 4)?;
            Ok(Layout::Contiguous { addr, size: None })
        }
        2 => {
            let addr = c.u64()?;
            let (dims, element) = chunk_dims(c, n, 4)?;
            Ok(Layout::Chunked {
                dims,
                element,
                index: Index::BTree1(addr),
                edge_unfiltered: false,
            })
        }
        k => Err(c.err(format!("layout class {k} (0 to 2 exist before version 3)"))),
    }
}

/// `n` chunk dimensions of `width` bytes, the last one the element size.
fn chunk_dims(c: &mut Cur<'_>, n: usize, width: usize) -> Result<(Vec<u64>, u64), Hdf5Error> {
    if n == 0 || n > MAX_RANK + 1 {
        return Err(c.err(format!(
            "{n} chunk dimensions (1 to {} exist)",
            MAX_RANK + 1
        )));
    }
    let mut dims = Vec::with_capacity(n);
    for _ in 0..n {
        dims.push(c.uint(width)?);
    }
    let element = dims.pop().unwrap_or(0);
    if dims.contains(&0) || element == 0 {
        return Err(c.err(format!("a chunk dimension of 0 in {dims:?} x {element}")));
    }
    Ok((dims, element))
}

/// Version 4's chunked layout: flags, dimensions, the chunk index.
fn layout_v4_chunked(c: &mut Cur<'_>) -> Result<Layout, Hdf5Error> {
    let flags = c.u8()?;
    let n = c.u8()? as usize;
    let width = c.u8()? as usize;
    if !(1..=8).contains(&width) {
        return Err(c.err(format!("chunk dimensions of {width} bytes (1 to 8 exist)")));
    }
    let (dims, element) = chunk_dims(c, n, width)?;
    let kind = c.u8()?;
    let index = match kind {
        1 => {
            let filtered = if flags & 2 != 0 {
                Some((c.u64()?, c.u32()?))
            } else {
                None
            };
            Index::Single(c.u64()?, filtered)
        }
        2 => Index::Implicit(c.u64()?),
        3 => {
            c.skip(1)?;
            Index::FixedArray(c.u64()?)
        }
        4 => {
            c.skip(5)?;
            Index::ExtensibleArray(c.u64()?)
        }
        5 => {
            c.skip(6)?;
            Index::BTree2(c.u64()?)
        }
        k => return Err(c.err(format!("chunk index type {k} (1 to 5 exist)"))),
    };
    Ok(Layout::Chunked {
        dims,
        element,
        index,
        edge_unfiltered: flags & 1 != 0,
    })
}

/// One filter of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Filter {
    /// Its id (1 deflate, 2 shuffle, 3 fletcher32, 32000 LZF).
    pub id: u16,
    /// Its name, when stored.
    pub name: Option<String>,
    /// Its client data.
    pub client: Vec<u32>,
}

/// Reads a filter pipeline message (versions 1 and 2).
pub(super) fn filters(c: &mut Cur<'_>) -> Result<Vec<Filter>, Hdf5Error> {
    let version = c.u8()?;
    let n = c.u8()?;
    if version == 1 {
        c.skip(6)?;
    } else if version != 2 {
        return Err(c.err(format!(
            "filter pipeline version {version} (1 and 2 are read)"
        )));
    }
    if n > 32 {
        return Err(c.err(format!("{n} filters (at most 32)")));
    }
    let mut out = Vec::new();
    for _ in 0..n {
        let id = c.u16()?;
        let name_len = if version == 1 || id >= 256 {
            c.u16()? as usize
        } else {
            0
        };
        let _flags = c.u16()?;
        let count = c.u16()? as usize;
        let name = if name_len > 0 {
            let raw = c.bytes(if version == 1 {
                name_len.div_ceil(8) * 8
            } else {
                name_len
            })?;
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            Some(String::from_utf8_lossy(&raw[..end]).into_owned())
        } else {
            None
        };
        let mut client = Vec::with_capacity(count.min(c.remaining() / 4));
        for _ in 0..count {
            client.push(c.u32()?);
        }
        if version == 1 && count % 2 == 1 {
            c.skip(4)?;
        }
        out.push(Filter { id, name, client });
    }
    Ok(out)
}

/// The fill value a message defines, as stored (`None`: undefined, read
/// as zeros).
pub(super) fn fill(m: &Message<'_>) -> Result<Option<Vec<u8>>, Hdf5Error> {
    let mut c = m.cursor("a fill value message");
    if m.kind == FILL_OLD {
        let size = c.u32()? as usize;
        return Ok(Some(c.bytes(size)?.to_vec()));
    }
    let version = c.u8()?;
    let defined = match version {
        1 | 2 => {
            c.skip(2)?;
            c.u8()? != 0
        }
        3 => {
            let flags = c.u8()?;
            flags & 0x10 == 0 && flags & 0x20 != 0
        }
        v => return Err(c.err(format!("fill value version {v} (1 to 3 are read)"))),
    };
    if !defined {
        return Ok(None);
    }
    let size = c.u32()? as usize;
    Ok(Some(c.bytes(size)?.to_vec()))
}

/// Where a link leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    /// A hard link: the object header's address.
    Hard(u64),
    /// A soft or external link (never followed), or another type.
    Elsewhere,
}

/// Reads a link message: its name and target.
pub(super) fn link(c: &mut Cur<'_>) -> Result<(Vec<u8>, Target), Hdf5Error> {
    let version = c.u8()?;
    if version != 1 {
        return Err(c.err(format!("link message version {version} (1 is read)")));
    }
    let flags = c.u8()?;
    let kind = if flags & 0x08 != 0 { c.u8()? } else { 0 };
    if flags & 0x04 != 0 {
        c.skip(8)?;
    }
    if flags & 0x10 != 0 {
        c.skip(1)?;
    }
    let len = c.uint(1 << (flags & 3))? as usize;
    let name = c.bytes(len)?.to_vec();
    let target = if kind == 0 {
        Target::Hard(c.u64()?)
    } else {
        Target::Elsewhere
    };
    Ok((name, target))
}

/// Reads a link info message: the fractal heap and name B-tree of dense
/// storage (`None` when the links are in the header).
pub(super) fn link_info(c: &mut Cur<'_>) -> Result<Option<(u64, u64)>, Hdf5Error> {
    let version = c.u8()?;
    if version != 0 {
        return Err(c.err(format!("link info version {version} (0 is read)")));
    }
    let flags = c.u8()?;
    if flags & 1 != 0 {
        c.skip(8)?;
    }
    let heap = c.u64()?;
    let names = c.u64()?;
    Ok((heap != UNDEF).then_some((heap, names)))
}

/// Reads a symbol table message: the B-tree and the local heap.
pub(super) fn symbol_table(c: &mut Cur<'_>) -> Result<(u64, u64), Hdf5Error> {
    Ok((c.u64()?, c.u64()?))
}

/// The object header address a shared message (flag bit 1) points to.
pub(super) fn shared(m: &Message<'_>) -> Result<u64, Hdf5Error> {
    let mut c = m.cursor("a shared message");
    let version = c.u8()?;
    let kind = c.u8()?;
    match version {
        1 => {
            c.skip(6)?;
            c.u64()
        }
        2 => c.u64(),
        3 if kind == 2 => c.u64(),
        3 => Err(Hdf5Error::unsupported(format!(
            "a message shared in the shared object header message heap (at byte {})",
            m.at
        ))),
        v => Err(c.err(format!("shared message version {v} (1 to 3 exist)"))),
    }
}
