//! HDF5 files (`.h5`, `.hdf5`, Keras `.weights.h5`, legacy Keras `.h5`, and
//! the `model.weights.h5` of a `.keras` archive), read by our own bounded
//! parser (FRAMEWORKS.md, "HDF5"): no C library.
//!
//! [`open`] reads the superblock (versions 0 to 3, 8-byte addresses), then
//! walks the groups from the root depth-first in ascending name order,
//! each object once by its header address (so a group linked into itself
//! or into a descendant is walked once), following hard links only. Every
//! dataset of a tensor type becomes a [`Tensor`] named by its path
//! without the leading `/`; datasets of other types (strings,
//! references, other compounds, ...) are skipped with a warning.
//! Attributes become metadata keyed `"<path>@<name>"`.
//!
//! A contiguous or compact dataset is [`Data::Plain`] (zero-copy; its
//! big-endian elements flagged); a chunked one, or one never written, is
//! [`Data::Decoded`] by [`decode::Chunked`], which runs each chunk back
//! through its filters (deflate, shuffle, Fletcher-32 checked, LZF) and
//! assembles them in bands. `open` checks every header, layout and filter,
//! and every chunk's address and size against the file's end; only what
//! needs the data (a checksum, a deflate stream) is left to decoding.

mod attrs;
mod btree;
mod chunks;
pub(crate) mod container;
mod decode;
mod earray;
mod error;
mod group;
mod header;
mod io;
mod messages;
#[cfg(test)]
mod tests;
mod types;

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use crate::format::blocks::{self, Rules};
use crate::format::decode::{Data, Opened, Tensor};

pub use error::Hdf5Error;
pub use header::{SIGNATURE, find_superblock};

use btree::Budget;
use chunks::{ChunkBudget, Geometry, MAX_CHUNK_BYTES};
use header::Message;
use io::{Cur, File, UNDEF};
use messages::{Index, Layout, Space, Target};
use types::Conv;

/// Objects (groups and datasets) read at most.
pub const MAX_OBJECTS: usize = 1_000_000;
/// Groups nested at most.
pub const MAX_DEPTH: usize = 1000;
/// The largest dataset read as a tensor, in bytes.
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;
/// Links looked at over the whole file, at most.
const MAX_LINKS_SEEN: usize = 4_000_000;
/// Object header messages read over the whole file, at most (headers
/// may share continuation blocks).
const MAX_MESSAGES_SEEN: usize = 1 << 24;

/// Reads an HDF5 file's structure (no tensor data): its datasets as
/// tensors, its attributes as metadata.
pub fn open(bytes: &[u8]) -> Result<Opened, Hdf5Error> {
    let at = find_superblock(bytes).ok_or(Hdf5Error::BadMagic {
        len: bytes.len() as u64,
    })?;
    let f = File { bytes, base: at };
    let sb = header::superblock(&f, at)?;
    let mut w = Walk {
        f,
        budget: Budget::default(),
        chunks: ChunkBudget::default(),
        seen: HashSet::new(),
        links_seen: 0,
        messages_seen: 0,
        meta_left: attrs::MAX_METADATA,
        out: Opened::default(),
        data_bytes: 0,
    };
    w.run(sb.root)?;
    let mut out = w.out;
    out.facts
        .insert("superblock_version".into(), Value::from(sb.version));
    out.facts.insert("user_block".into(), Value::from(at));
    out.header_len = (bytes.len() as u64).saturating_sub(w.data_bytes);
    Ok(out)
}

/// The state of one walk over a file.
struct Walk<'a> {
    f: File<'a>,
    budget: Budget,
    chunks: ChunkBudget,
    /// Object header addresses met.
    seen: HashSet<u64>,
    links_seen: usize,
    messages_seen: usize,
    meta_left: u64,
    out: Opened,
    /// Bytes of tensor data stored (for the header size).
    data_bytes: u64,
}

/// A group being walked: its path and its links, sorted by name.
struct Frame {
    path: String,
    links: Vec<(Vec<u8>, Target)>,
    next: usize,
}

impl Walk<'_> {
    fn run(&mut self, root: u64) -> Result<(), Hdf5Error> {
        self.seen.insert(root);
        let msgs = header::object_header(&self.f, root)?;
        attrs::read(
            &self.f,
            "",
            &msgs,
            &mut self.budget,
            &mut self.meta_left,
            &mut self.out.metadata,
        );
        let Some(links) = group::links(&self.f, &msgs, &mut self.budget)? else {
            return Err(Hdf5Error::malformed(
                "the root group's object header",
                root,
                "it holds no symbol table, link or link info message",
            ));
        };
        let mut stack = vec![self.frame(String::new(), links)?];
        while let Some(top) = stack.last_mut() {
            let Some((name, target)) = top.links.get(top.next).cloned() else {
                stack.pop();
                continue;
            };
            top.next += 1;
            let name = String::from_utf8_lossy(&name).into_owned();
            let path = if top.path.is_empty() {
                name
            } else {
                format!("{}/{name}", top.path)
            };
            let Target::Hard(addr) = target else {
                continue;
            };
            if !self.seen.insert(addr) {
                continue;
            }
            if self.seen.len() > MAX_OBJECTS {
                return Err(Hdf5Error::Limit {
                    what: "objects in the file",
                    limit: MAX_OBJECTS as u64,
                });
            }
            let msgs = header::object_header(&self.f, addr).map_err(|e| e.in_dataset(&path))?;
            self.messages_seen = self.messages_seen.saturating_add(msgs.len());
            if self.messages_seen > MAX_MESSAGES_SEEN {
                return Err(Hdf5Error::Limit {
                    what: "object header messages in the file",
                    limit: MAX_MESSAGES_SEEN as u64,
                });
            }
            let is_dataset = msgs.iter().any(|m| m.kind == messages::LAYOUT);
            let links = if is_dataset {
                None
            } else {
                group::links(&self.f, &msgs, &mut self.budget).map_err(|e| e.in_dataset(&path))?
            };
            if !is_dataset && links.is_none() {
                // A committed datatype, or an object of no kind read.
                continue;
            }
            attrs::read(
                &self.f,
                &path,
                &msgs,
                &mut self.budget,
                &mut self.meta_left,
                &mut self.out.metadata,
            );
            if let Some(links) = links {
                if stack.len() >= MAX_DEPTH {
                    return Err(Hdf5Error::Limit {
                        what: "groups nested",
                        limit: MAX_DEPTH as u64,
                    });
                }
                let frame = self.frame(path, links)?;
                stack.push(frame);
            } else {
                self.dataset(&path, &msgs)
                    .map_err(|e| e.in_dataset(&path))?;
            }
        }
        Ok(())
    }

    /// A group's frame: its links sorted by name (bytes), a repeated
    /// name kept once, names that cannot be path parts skipped.
    fn frame(&mut self, path: String, mut links: group::Links) -> Result<Frame, Hdf5Error> {
        self.links_seen = self.links_seen.saturating_add(links.len());
        if self.links_seen > MAX_LINKS_SEEN {
            return Err(Hdf5Error::Limit {
                what: "links in the file",
                limit: MAX_LINKS_SEEN as u64,
            });
        }
        links.sort_by(|a, b| a.0.cmp(&b.0));
        links.dedup_by(|a, b| a.0 == b.0);
        links.retain(|(name, _)| {
            let ok = !name.is_empty() && !name.contains(&b'/');
            if !ok {
                self.out.warnings.push(format!(
                    "group {path:?}: a link named {:?} is skipped (not a path component)",
                    String::from_utf8_lossy(name)
                ));
            }
            ok
        });
        Ok(Frame {
            path,
            links,
            next: 0,
        })
    }

    /// A dataset: its tensor, or a warning when its type is no tensor's.
    fn dataset(&mut self, path: &str, msgs: &[Message<'_>]) -> Result<(), Hdf5Error> {
        let find = |kind: u16| msgs.iter().find(|m| m.kind == kind);
        let need = |kind: u16, what: &str| {
            find(kind).ok_or_else(|| {
                Hdf5Error::malformed(
                    "a dataset's object header",
                    0,
                    format!("it has a layout but no {what} message"),
                )
            })
        };
        let space_msg = need(messages::DATASPACE, "dataspace")?;
        let space = messages::dataspace(&mut space_msg.cursor("a dataspace message"))?;
        let type_msg = need(messages::DATATYPE, "datatype")?;
        let t = self.datatype(type_msg)?;
        let (dtype, conv) = match t.tensor() {
            Ok(x) => x,
            Err(why) => {
                self.out.warnings.push(format!(
                    "dataset {path:?} is skipped: its type is {why}, no tensor's"
                ));
                return Ok(());
            }
        };
        if space == Space::Null {
            self.out.warnings.push(format!(
                "dataset {path:?} is skipped: its dataspace is null (no elements)"
            ));
            return Ok(());
        }
        let element = u64::from(t.size().unwrap_or(0));
        let shape = space.dims().to_vec();
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = numel.and_then(|n| n.checked_mul(element));
        let Some(nbytes) = bytes.filter(|&b| b <= MAX_TENSOR_BYTES) else {
            return Err(Hdf5Error::TooLarge {
                bytes: bytes.unwrap_or(u64::MAX),
            });
        };
        let filters = match find(messages::FILTERS) {
            Some(m) => messages::filters(&mut m.cursor("a filter pipeline message"))?,
            None => Vec::new(),
        };
        for flt in &filters {
            if ![
                decode::DEFLATE,
                decode::SHUFFLE,
                decode::FLETCHER32,
                decode::LZF,
            ]
            .contains(&flt.id)
            {
                return Err(Hdf5Error::UnknownFilter {
                    id: flt.id,
                    name: flt.name.clone(),
                });
            }
        }
        let fill_raw = match find(messages::FILL).or_else(|| find(messages::FILL_OLD)) {
            Some(m) => messages::fill(m)?,
            None => None,
        };
        let mut fill = vec![0u8; element as usize];
        if let Some(raw) = fill_raw.filter(|r| !r.is_empty()) {
            if raw.len() as u64 != element {
                return Err(Hdf5Error::malformed(
                    "a fill value message",
                    0,
                    format!(
                        "a fill value of {} bytes for {element}-byte elements",
                        raw.len()
                    ),
                ));
            }
            fill = raw;
            conv.apply(&mut fill);
        }
        let layout = messages::layout(need(messages::LAYOUT, "layout")?)?;
        let max = match &space {
            Space::Simple { max, .. } => max.clone(),
            _ => shape.clone(),
        };
        let spec = Spec {
            path,
            shape: &shape,
            max: &max,
            element,
            nbytes,
            conv,
            filters: &filters,
            fill: &fill,
        };
        let (data, facts) = self.data(&spec, layout)?;
        self.out.tensors.push(Tensor {
            name: path.to_owned(),
            dtype,
            shape,
            data,
            facts,
        });
        Ok(())
    }

    /// Where a dataset's bytes are, by its layout, with the facts `info`
    /// shows.
    fn data(&mut self, s: &Spec<'_>, layout: Layout) -> Result<(Data, Facts), Hdf5Error> {
        let mut facts: Facts = Vec::new();
        let data = match layout {
            Layout::Compact { at, len } => {
                facts.push(("layout", "compact".into()));
                if len < s.nbytes {
                    return Err(Hdf5Error::StorageTooSmall {
                        need: s.nbytes,
                        have: len,
                    });
                }
                plain(s, at..at + s.nbytes)
            }
            Layout::Contiguous { addr, size } => {
                facts.push(("layout", "contiguous".into()));
                if let Some(size) = size.filter(|&n| n < s.nbytes) {
                    return Err(Hdf5Error::StorageTooSmall {
                        need: s.nbytes,
                        have: size,
                    });
                }
                if addr == UNDEF {
                    facts.push(("written", false.into()));
                    chunked(s, Vec::new(), 0)
                } else {
                    let (start, end) = self.f.range(addr, s.nbytes, "the dataset's data")?;
                    self.data_bytes = self.data_bytes.saturating_add(s.nbytes);
                    facts.push(("offset", start.into()));
                    plain(s, start..end)
                }
            }
            Layout::Chunked {
                dims,
                element,
                index,
                edge_unfiltered,
            } => {
                facts.push(("layout", "chunked".into()));
                if element != s.element || dims.len() != s.shape.len() {
                    return Err(Hdf5Error::malformed(
                        "a data layout message",
                        0,
                        format!(
                            "chunks of {dims:?} x {element} bytes for a dataset of shape {:?} x {}",
                            s.shape, s.element
                        ),
                    ));
                }
                let chunk_bytes = dims
                    .iter()
                    .try_fold(element, |a, &d| a.checked_mul(d))
                    .filter(|&b| b <= MAX_CHUNK_BYTES)
                    .ok_or_else(|| {
                        Hdf5Error::unsupported(format!(
                            "chunks of {dims:?} x {element} bytes (at most {MAX_CHUNK_BYTES} bytes a chunk are read)"
                        ))
                    })?;
                if matches!(index, Index::Implicit(_)) && !s.filters.is_empty() {
                    return Err(Hdf5Error::malformed(
                        "a data layout message",
                        0,
                        "implicit chunks with filters",
                    ));
                }
                let g = Geometry {
                    dims: s.shape,
                    max: s.max,
                    chunk: &dims,
                    chunk_bytes,
                    filtered: !s.filters.is_empty(),
                    edge_unfiltered,
                };
                let blocks = chunks::read(&self.f, &g, &index, &mut self.budget, &mut self.chunks)?;
                let rules = Rules {
                    holes: true,
                    overhang: true,
                };
                blocks::check(s.shape, &blocks, rules)
                    .map_err(|e| Hdf5Error::malformed("the dataset's chunks", 0, e))?;
                let stored = blocks
                    .iter()
                    .fold(0u64, |a, b| a.saturating_add(b.piece.len));
                self.data_bytes = self.data_bytes.saturating_add(stored);
                facts.push(("chunk_shape", dims.clone().into()));
                facts.push(("chunks", blocks.len().into()));
                if !s.filters.is_empty() {
                    let ids: Vec<u16> = s.filters.iter().map(|f| f.id).collect();
                    facts.push(("filters", ids.into()));
                }
                chunked(s, blocks, chunk_bytes)
            }
            Layout::Virtual => {
                return Err(Hdf5Error::unsupported("a virtual dataset"));
            }
        };
        Ok((data, facts))
    }

    /// The datatype message's type, following a shared (committed) type
    /// to its object header once.
    fn datatype(&self, m: &Message<'_>) -> Result<types::Type, Hdf5Error> {
        if m.flags & 0x02 == 0 {
            return types::datatype(&mut m.cursor("a datatype message"));
        }
        let addr = messages::shared(m)?;
        let msgs = header::object_header(&self.f, addr)?;
        let Some(t) = msgs.iter().find(|m| m.kind == messages::DATATYPE) else {
            return Err(Hdf5Error::malformed(
                "a committed datatype",
                addr,
                "its object header holds no datatype message",
            ));
        };
        if t.flags & 0x02 != 0 {
            return Err(Hdf5Error::malformed(
                "a committed datatype",
                addr,
                "its datatype is itself shared",
            ));
        }
        types::datatype(&mut Cur::new(t.data, t.at, "a committed datatype"))
    }
}

/// What a dataset's data needs of its messages.
struct Spec<'a> {
    path: &'a str,
    shape: &'a [u64],
    max: &'a [u64],
    element: u64,
    nbytes: u64,
    conv: Conv,
    filters: &'a [messages::Filter],
    /// One element of fill value, little-endian.
    fill: &'a [u8],
}

/// A tensor's facts for `info`.
type Facts = Vec<(&'static str, Value)>;

/// A plain range (zero-copy), or a reordering decoder when the elements
/// are not a plain slice.
fn plain(s: &Spec<'_>, range: std::ops::Range<u64>) -> Data {
    match s.conv.plain() {
        Some(big_endian) => Data::Plain {
            file: 0,
            range,
            big_endian,
        },
        None => Data::Decoded(Arc::new(decode::Reordered {
            name: s.path.to_owned(),
            range,
            element: s.element as usize,
            conv: s.conv,
        })),
    }
}

/// Chunks (none: never written) assembled by [`decode::Chunked`].
fn chunked(s: &Spec<'_>, blocks: Vec<blocks::Block<chunks::Piece>>, chunk_bytes: u64) -> Data {
    Data::Decoded(Arc::new(decode::Chunked {
        name: s.path.to_owned(),
        shape: s.shape.to_vec(),
        element: s.element as usize,
        chunk_bytes,
        conv: s.conv,
        filters: s.filters.to_vec(),
        blocks,
        fill: s.fill.to_vec(),
    }))
}
