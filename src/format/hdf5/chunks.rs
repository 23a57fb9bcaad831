//! A chunked dataset's chunks, from its index: a version 1 B-tree (layout
//! version 3), or, in layout versions 4 and 5, a single chunk, implicit
//! chunks, a fixed array, an extensible array or a version 2 B-tree. Each chunk becomes a [`Block`] whose piece is its
//! byte range in the file (checked against the file's end) and its filter
//! mask.

use super::btree::{Budget, walk_v1, walk_v2};
use super::earray;
use super::error::Hdf5Error;
use super::io::{Cur, File, UNDEF};
use super::messages::Index;
use crate::format::blocks::Block;

/// Chunks of all datasets of a file held at most.
pub(super) const MAX_CHUNKS: u64 = 1 << 21;

/// The largest chunk read (decoded bytes): HDF5 allows 4 GiB, memory here
/// holds a band of chunks at once.
pub(super) const MAX_CHUNK_BYTES: u64 = 256 << 20;

/// A stored chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Piece {
    /// Its absolute byte offset in the file.
    pub start: u64,
    /// Its stored length.
    pub len: u64,
    /// Filters skipped for it (bit `i`: filter `i` of the pipeline).
    pub mask: u32,
    /// False when the pipeline is not applied (a partial edge chunk of a
    /// layout that says so, or a dataset without filters).
    pub filtered: bool,
}

/// What the chunk reader needs of the dataset.
pub(super) struct Geometry<'a> {
    /// The dataset's dimensions.
    pub dims: &'a [u64],
    /// Its maximum dimensions.
    pub max: &'a [u64],
    /// The chunk's dimensions.
    pub chunk: &'a [u64],
    /// Bytes of one decoded chunk.
    pub chunk_bytes: u64,
    /// The dataset has a filter pipeline.
    pub filtered: bool,
    /// Partial edge chunks are stored unfiltered.
    pub edge_unfiltered: bool,
}

impl Geometry<'_> {
    fn is_edge(&self, origin: &[u64]) -> bool {
        origin
            .iter()
            .zip(self.chunk)
            .zip(self.dims)
            .any(|((&o, &c), &d)| o.saturating_add(c) > d)
    }

    fn inside(&self, origin: &[u64]) -> bool {
        origin.iter().zip(self.dims).all(|(&o, &d)| o < d)
    }

    /// Chunks per dimension over `dims`.
    fn counts(&self, dims: &[u64]) -> Vec<u64> {
        dims.iter()
            .zip(self.chunk)
            .map(|(&d, &c)| d.div_ceil(c))
            .collect()
    }

    fn block(&self, origin: Vec<u64>, start: u64, len: u64, mask: u32) -> Block<Piece> {
        let filtered = self.filtered && !(self.edge_unfiltered && self.is_edge(&origin));
        Block {
            origin,
            shape: self.chunk.to_vec(),
            piece: Piece {
                start,
                len,
                mask,
                filtered,
            },
        }
    }
}

/// Counts chunks against [`MAX_CHUNKS`] over the whole file.
#[derive(Debug, Default)]
pub(super) struct ChunkBudget {
    used: u64,
}

impl ChunkBudget {
    fn take(&mut self, n: u64) -> Result<(), Hdf5Error> {
        self.used = self.used.saturating_add(n);
        if self.used > MAX_CHUNKS {
            return Err(Hdf5Error::Limit {
                what: "chunks in the file",
                limit: MAX_CHUNKS,
            });
        }
        Ok(())
    }
}

/// The chunks of a dataset.
pub(super) fn read(
    f: &File<'_>,
    g: &Geometry<'_>,
    index: &Index,
    budget: &mut Budget,
    chunks: &mut ChunkBudget,
) -> Result<Vec<Block<Piece>>, Hdf5Error> {
    let rank = g.dims.len();
    let mut out = Vec::new();
    match *index {
        Index::BTree1(root) => {
            let key_size = 8 + 8 * (rank + 1);
            walk_v1(f, root, 1, key_size, budget, &mut |key, child| {
                let mut c = Cur::new(key, 0, "a chunk B-tree key");
                let size = u64::from(c.u32()?);
                let mask = c.u32()?;
                let mut origin = Vec::with_capacity(rank);
                for d in 0..rank {
                    let o = c.u64()?;
                    if o % g.chunk[d] != 0 {
                        return Err(Hdf5Error::malformed(
                            "a chunk B-tree key",
                            child,
                            format!(
                                "chunk offset {o} in dimension {d} is not a multiple of the chunk's {}",
                                g.chunk[d]
                            ),
                        ));
                    }
                    origin.push(o);
                }
                chunks.take(1)?;
                if !g.inside(&origin) {
                    return Ok(());
                }
                let len = if g.filtered { size } else { g.chunk_bytes };
                if !g.filtered && size < g.chunk_bytes {
                    return Err(Hdf5Error::StorageTooSmall {
                        need: g.chunk_bytes,
                        have: size,
                    });
                }
                let (start, _) = f.range(child, len, "a chunk")?;
                out.push(g.block(origin, start, len, mask));
                Ok(())
            })?;
        }
        Index::Single(addr, filtered) => {
            chunks.take(1)?;
            if addr != UNDEF {
                let (len, mask) = filtered.unwrap_or((g.chunk_bytes, 0));
                let (start, _) = f.range(addr, len, "the single chunk")?;
                out.push(g.block(vec![0; rank], start, len, mask));
            }
        }
        Index::Implicit(addr) => {
            let n = grid_len(&g.counts(g.dims))?;
            chunks.take(n)?;
            if addr != UNDEF {
                let down = down(&g.counts(g.max))?;
                for_each_chunk(g, n, &down, &mut |origin, idx| {
                    let at = idx
                        .checked_mul(g.chunk_bytes)
                        .and_then(|o| o.checked_add(addr))
                        .unwrap_or(UNDEF);
                    let (start, _) = f.range(at, g.chunk_bytes, "an implicit chunk")?;
                    out.push(g.block(origin, start, g.chunk_bytes, 0));
                    Ok(())
                })?;
            }
        }
        Index::FixedArray(addr) => {
            let n = grid_len(&g.counts(g.dims))?;
            chunks.take(n)?;
            let entries = fixed_array(f, addr)?;
            let down = down(&g.counts(g.max))?;
            for_each_chunk(g, n, &down, &mut |origin, idx| {
                let Some(&(a, size, mask)) = entries.get(idx as usize) else {
                    return Err(Hdf5Error::malformed(
                        "a fixed array",
                        addr,
                        format!("chunk {idx} is past its {} entries", entries.len()),
                    ));
                };
                if a == UNDEF {
                    return Ok(());
                }
                let len = size.unwrap_or(g.chunk_bytes);
                let (start, _) = f.range(a, len, "a chunk")?;
                out.push(g.block(origin, start, len, mask));
                Ok(())
            })?;
        }
        Index::ExtensibleArray(addr) => extensible(f, g, addr, chunks, &mut out)?,
        Index::BTree2(addr) => btree2(f, g, addr, budget, chunks, &mut out)?,
    }
    Ok(out)
}

/// The chunks of an extensible array index.
fn extensible(
    f: &File<'_>,
    g: &Geometry<'_>,
    addr: u64,
    chunks: &mut ChunkBudget,
    out: &mut Vec<Block<Piece>>,
) -> Result<(), Hdf5Error> {
    let rank = g.dims.len();
    let n = grid_len(&g.counts(g.dims))?;
    chunks.take(n)?;
    // The unlimited dimension first (HDF5 swizzles it there), the
    // others in order, strides over the maximum chunk counts.
    let unlim = g.max.iter().position(|&m| m == UNDEF).unwrap_or(0);
    let mut order: Vec<usize> = (0..rank).filter(|&d| d != unlim).collect();
    order.insert(0, unlim);
    let max_counts = g.counts(g.max);
    let swizzled: Vec<u64> = order.iter().map(|&d| max_counts[d]).collect();
    let sdown = down(&swizzled)?;
    let mut strides = vec![0u64; rank];
    for (k, &d) in order.iter().enumerate() {
        strides[d] = sdown[k];
    }
    let last = g
        .counts(g.dims)
        .iter()
        .zip(&strides)
        .try_fold(0u64, |a, (&c, &s)| {
            a.checked_add(c.saturating_sub(1).checked_mul(s)?)
        })
        .and_then(|x| x.checked_add(1))
        .filter(|&x| x <= MAX_CHUNKS)
        .ok_or(Hdf5Error::Limit {
            what: "entries of an extensible array",
            limit: MAX_CHUNKS,
        })?;
    let entries = earray::read(f, addr, if n == 0 { 0 } else { last })?;
    for_each_chunk(g, n, &strides, &mut |origin, idx| {
        let Some(&(a, size, mask)) = entries.get(idx as usize) else {
            return Ok(());
        };
        if a == UNDEF {
            return Ok(());
        }
        let len = size.unwrap_or(g.chunk_bytes);
        let (start, _) = f.range(a, len, "a chunk")?;
        out.push(g.block(origin, start, len, mask));
        Ok(())
    })?;
    Ok(())
}

/// The chunks of a version 2 B-tree index (records of type 10, or 11
/// when filtered: address, [size, filter mask,] scaled offsets).
fn btree2(
    f: &File<'_>,
    g: &Geometry<'_>,
    addr: u64,
    budget: &mut Budget,
    chunks: &mut ChunkBudget,
    out: &mut Vec<Block<Piece>>,
) -> Result<(), Hdf5Error> {
    let rank = g.dims.len();
    walk_v2(f, addr, budget, &mut |rec| {
        let mut c = Cur::new(rec, 0, "a chunk record of a version 2 B-tree");
        let a = c.u64()?;
        let (len, mask) = if g.filtered {
            let width = rec
                .len()
                .checked_sub(8 + 4 + 8 * rank)
                .filter(|w| (1..=8).contains(w));
            let Some(width) = width else {
                return Err(c.err(format!("a filtered chunk record of {} bytes", rec.len())));
            };
            (c.uint(width)?, c.u32()?)
        } else {
            (g.chunk_bytes, 0)
        };
        let mut origin = Vec::with_capacity(rank);
        for d in 0..rank {
            let scaled = c.u64()?;
            origin.push(scaled.checked_mul(g.chunk[d]).ok_or_else(|| {
                c.err(format!("scaled offset {scaled} in dimension {d} overflows"))
            })?);
        }
        chunks.take(1)?;
        if a == UNDEF || !g.inside(&origin) {
            return Ok(());
        }
        let (start, _) = f.range(a, len, "a chunk")?;
        out.push(g.block(origin, start, len, mask));
        Ok(())
    })?;
    Ok(())
}

/// The number of chunks of a grid.
fn grid_len(counts: &[u64]) -> Result<u64, Hdf5Error> {
    counts
        .iter()
        .try_fold(1u64, |a, &c| a.checked_mul(c))
        .ok_or(Hdf5Error::Limit {
            what: "chunks in the file",
            limit: MAX_CHUNKS,
        })
}

/// C-order strides of a grid of `counts` (refused when a dimension is
/// unlimited: these indexes need fixed maximum dimensions).
fn down(counts: &[u64]) -> Result<Vec<u64>, Hdf5Error> {
    let mut out = vec![1u64; counts.len()];
    for d in (0..counts.len().saturating_sub(1)).rev() {
        out[d] = out[d + 1].checked_mul(counts[d + 1]).ok_or_else(|| {
            Hdf5Error::unsupported("an implicit or fixed-array index over unlimited dimensions")
        })?;
    }
    Ok(out)
}

/// Calls `each` with the origin and the linear index (over strides
/// `down`) of every one of the `n` chunks that start inside the dataset.
fn for_each_chunk(
    g: &Geometry<'_>,
    n: u64,
    down: &[u64],
    each: &mut dyn FnMut(Vec<u64>, u64) -> Result<(), Hdf5Error>,
) -> Result<(), Hdf5Error> {
    let counts = g.counts(g.dims);
    let rank = counts.len();
    let mut scaled = vec![0u64; rank];
    for _ in 0..n {
        let origin: Vec<u64> = scaled.iter().zip(g.chunk).map(|(&s, &c)| s * c).collect();
        let idx = scaled
            .iter()
            .zip(down)
            .try_fold(0u64, |a, (&s, &d)| a.checked_add(s.checked_mul(d)?))
            .unwrap_or(u64::MAX);
        each(origin, idx)?;
        for d in (0..rank).rev() {
            scaled[d] += 1;
            if scaled[d] < counts[d] {
                break;
            }
            scaled[d] = 0;
        }
    }
    Ok(())
}

/// A fixed array's entries: address, stored size (filtered chunks) and
/// filter mask.
type Entry = (u64, Option<u64>, u32);

/// Reads the fixed array whose header ("FAHD") is at `addr`.
fn fixed_array(f: &File<'_>, addr: u64) -> Result<Vec<Entry>, Hdf5Error> {
    let mut c = f.cursor(addr, 28, "a fixed array header")?;
    c.signature("FAHD")?;
    let version = c.u8()?;
    let client = c.u8()?;
    let entry = c.u8()? as u64;
    let page_bits = c.u8()?;
    let n = c.u64()?;
    let dblock = c.u64()?;
    c.check_sum(24)?;
    if version != 0 || client > 1 || page_bits > 32 {
        return Err(c.err(format!(
            "version {version}, client {client}, {page_bits} page bits: not a fixed array read"
        )));
    }
    let want = if client == 0 { 8 } else { 8 + 1 + 4 };
    if entry < want || entry > 8 + 8 + 4 {
        return Err(c.err(format!("entries of {entry} bytes")));
    }
    if dblock == UNDEF {
        return Ok(Vec::new());
    }
    if n > MAX_CHUNKS {
        return Err(Hdf5Error::Limit {
            what: "entries of a fixed array",
            limit: MAX_CHUNKS,
        });
    }
    // Every entry must be in the file before any is held.
    if n.saturating_mul(entry) > f.len() {
        return Err(Hdf5Error::Truncated {
            what: format!("a fixed array of {n} entries"),
            start: dblock,
            end: dblock.saturating_add(n.saturating_mul(entry)),
            len: f.len(),
        });
    }
    let page = 1u64 << page_bits;
    let prefix = 4 + 1 + 1 + 8;
    let parse = |c: &mut Cur<'_>, out: &mut Vec<Entry>, k: u64| -> Result<(), Hdf5Error> {
        for _ in 0..k {
            let a = c.u64()?;
            if client == 0 {
                out.push((a, None, 0));
            } else {
                let size = c.uint((entry - 12) as usize)?;
                let mask = c.u32()?;
                out.push((a, Some(size), mask));
            }
        }
        Ok(())
    };
    let mut out = Vec::with_capacity(n as usize);
    let check_head = |c: &mut Cur<'_>| -> Result<(), Hdf5Error> {
        c.signature("FADB")?;
        c.skip(2)?;
        if c.u64()? != addr {
            return Err(c.err("its header address is not the fixed array's"));
        }
        Ok(())
    };
    if n <= page {
        let len = prefix + n * entry;
        let mut c = f.cursor(dblock, len + 4, "a fixed array data block")?;
        check_head(&mut c)?;
        parse(&mut c, &mut out, n)?;
        c.check_sum(len as usize)?;
        return Ok(out);
    }
    let pages = n.div_ceil(page);
    let bitmap = pages.div_ceil(8);
    let mut c = f.cursor(dblock, prefix + bitmap + 4, "a fixed array data block")?;
    check_head(&mut c)?;
    let bits = c.bytes(bitmap as usize)?;
    c.check_sum((prefix + bitmap) as usize)?;
    let mut at = dblock + prefix + bitmap + 4;
    for p in 0..pages {
        let k = page.min(n - p * page);
        let len = k * entry;
        let init = bits
            .get((p / 8) as usize)
            .is_some_and(|b| b & (0x80 >> (p % 8)) != 0);
        if init {
            let mut c = f.cursor(at, len + 4, "a fixed array page")?;
            parse(&mut c, &mut out, k)?;
            c.check_sum(len as usize)?;
        } else {
            out.extend(std::iter::repeat_n((UNDEF, None, 0), k as usize));
        }
        at = at.saturating_add(len + 4);
    }
    Ok(out)
}
