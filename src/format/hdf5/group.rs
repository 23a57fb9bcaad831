//! A group's links, whichever way they are stored: a symbol table (a
//! version 1 B-tree of symbol nodes, names in a local heap), link
//! messages in the header (compact), or dense storage (a fractal heap of
//! link messages indexed by a version 2 B-tree of names).

use super::btree::{Budget, walk_v1, walk_v2};
use super::error::Hdf5Error;
use super::header::Message;
use super::io::{Cur, File, UNDEF, le};
use super::messages::{self, Target};

/// Links of one group held at most.
pub(super) const MAX_LINKS: usize = 1 << 20;

/// A group's links: name and target, as stored (unsorted).
pub(super) type Links = Vec<(Vec<u8>, Target)>;

/// The links of the group whose header holds `msgs`, or `None` when the
/// object is no group.
pub(super) fn links(
    f: &File<'_>,
    msgs: &[Message<'_>],
    budget: &mut Budget,
) -> Result<Option<Links>, Hdf5Error> {
    let mut out = Vec::new();
    let mut group = false;
    for m in msgs {
        match m.kind {
            messages::SYMBOL_TABLE => {
                group = true;
                let (tree, heap) = messages::symbol_table(&mut m.cursor("a symbol table message"))?;
                symbol_table(f, tree, heap, budget, &mut out)?;
            }
            messages::LINK => {
                group = true;
                out.push(messages::link(&mut m.cursor("a link message"))?);
            }
            messages::LINK_INFO => {
                group = true;
                if let Some((heap, names)) =
                    messages::link_info(&mut m.cursor("a link info message"))?
                {
                    dense(f, heap, names, budget, &mut out)?;
                }
            }
            messages::GROUP_INFO => group = true,
            _ => {}
        }
        if out.len() > MAX_LINKS {
            return Err(Hdf5Error::Limit {
                what: "links in one group",
                limit: MAX_LINKS as u64,
            });
        }
    }
    Ok(group.then_some(out))
}

/// A symbol table: B-tree nodes of type 0 whose leaves point at symbol
/// nodes ("SNOD") of 40-byte entries, names in the local heap.
fn symbol_table(
    f: &File<'_>,
    tree: u64,
    heap: u64,
    budget: &mut Budget,
    out: &mut Links,
) -> Result<(), Hdf5Error> {
    let names = local_heap(f, heap)?;
    walk_v1(f, tree, 0, 8, budget, &mut |_, snod| {
        const WHAT: &str = "a symbol table node";
        let mut c = f.cursor(snod, 8, WHAT)?;
        c.signature("SNOD")?;
        let version = c.u8()?;
        if version != 1 {
            return Err(c.err(format!("version {version} (1 is read)")));
        }
        c.skip(1)?;
        let n = u64::from(c.u16()?);
        let mut c = f.cursor(snod, 8 + n * 40, WHAT)?;
        c.skip(8)?;
        for _ in 0..n {
            let name_at = c.u64()?;
            let header = c.u64()?;
            let cache = c.u32()?;
            c.skip(20)?;
            let name = heap_name(&names, name_at).ok_or_else(|| {
                c.err(format!(
                    "a link name at offset {name_at} of the local heap, past its {} bytes or without its NUL",
                    names.data().len()
                ))
            })?;
            // Cache type 2: a soft link (its value in the scratch pad).
            let target = if cache == 2 || header == UNDEF {
                Target::Elsewhere
            } else {
                Target::Hard(header)
            };
            out.push((name.to_vec(), target));
            if out.len() > MAX_LINKS {
                return Err(Hdf5Error::Limit {
                    what: "links in one group",
                    limit: MAX_LINKS as u64,
                });
            }
        }
        Ok(())
    })
}

/// A local heap's data segment.
fn local_heap<'a>(f: &File<'a>, addr: u64) -> Result<Cur<'a>, Hdf5Error> {
    let mut c = f.cursor(addr, 32, "a local heap")?;
    c.signature("HEAP")?;
    let version = c.u8()?;
    if version != 0 {
        return Err(c.err(format!("version {version} (0 is read)")));
    }
    c.skip(3)?;
    let size = c.u64()?;
    let _free = c.u64()?;
    let data = c.u64()?;
    f.cursor(data, size, "a local heap's data segment")
}

/// The NUL-terminated name at `at` of a local heap's data.
fn heap_name<'a>(names: &Cur<'a>, at: u64) -> Option<&'a [u8]> {
    let rest = names.data().get(usize::try_from(at).ok()?..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

/// What a fractal heap's header says of its managed space.
struct Heap {
    /// Table width (blocks per row).
    width: u64,
    /// The first rows' block size.
    start: u64,
    /// The largest direct block.
    max_direct: u64,
    /// Bytes of a heap offset in an ID and a block header.
    off_size: usize,
    /// Bytes of an object length in an ID.
    len_size: usize,
    /// The root block, and its rows (0: the root is a direct block).
    root: u64,
    rows: u64,
    /// Direct blocks carry a checksum.
    checksummed: bool,
}

/// Dense links: the name index's records (hash, heap ID) looked up in the
/// fractal heap, each a link message.
fn dense(
    f: &File<'_>,
    heap: u64,
    names: u64,
    budget: &mut Budget,
    out: &mut Links,
) -> Result<(), Hdf5Error> {
    dense_objects(f, heap, names, 4, budget, &mut |obj| {
        let mut c = Cur::new(obj, 0, "a link message in a fractal heap");
        out.push(messages::link(&mut c)?);
        if out.len() > MAX_LINKS {
            return Err(Hdf5Error::Limit {
                what: "links in one group",
                limit: MAX_LINKS as u64,
            });
        }
        Ok(())
    })
}

/// Each object of a fractal heap that a version 2 B-tree's records name
/// (the heap ID at byte `id_at` of each record).
pub(super) fn dense_objects<'a>(
    f: &File<'a>,
    heap: u64,
    names: u64,
    id_at: usize,
    budget: &mut Budget,
    each: &mut dyn FnMut(&'a [u8]) -> Result<(), Hdf5Error>,
) -> Result<(), Hdf5Error> {
    let h = fractal_heap(f, heap)?;
    walk_v2(f, names, budget, &mut |rec| {
        let id = rec.get(id_at..).unwrap_or(&[]);
        each(heap_object(f, &h, id)?)
    })
}

fn log2(n: u64) -> u32 {
    n.max(1).ilog2()
}

/// Reads a fractal heap header ("FRHP").
fn fractal_heap(f: &File<'_>, addr: u64) -> Result<Heap, Hdf5Error> {
    let mut c = f.cursor(addr, 146, "a fractal heap header")?;
    c.signature("FRHP")?;
    let version = c.u8()?;
    if version != 0 {
        return Err(c.err(format!("version {version} (0 is read)")));
    }
    let _id_len = c.u16()?;
    let filters = c.u16()?;
    let flags = c.u8()?;
    let max_managed = c.u32()?;
    c.skip(8 + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 8)?;
    let width = u64::from(c.u16()?);
    let start = c.u64()?;
    let max_direct = c.u64()?;
    let max_heap_bits = c.u16()?;
    let _start_rows = c.u16()?;
    let root = c.u64()?;
    let rows = u64::from(c.u16()?);
    if filters != 0 {
        return Err(Hdf5Error::unsupported(format!(
            "a fractal heap with I/O filters (at byte {})",
            c.abs()
        )));
    }
    let len = c.pos();
    c.check_sum(len)?;
    let pow2 = |n: u64| n.is_power_of_two();
    if width == 0 || !pow2(width) || !pow2(start) || !pow2(max_direct) || max_direct < start {
        return Err(c.err(format!(
            "table width {width}, block sizes {start} to {max_direct}: not a doubling table"
        )));
    }
    if max_heap_bits == 0 || max_heap_bits > 64 || rows > 64 {
        return Err(c.err(format!("heap of {max_heap_bits} bits, {rows} root rows")));
    }
    let off_size = usize::from(max_heap_bits).div_ceil(8);
    let len_size = (log2(max_direct) as usize)
        .div_ceil(8)
        .min(super::btree::enc_size(u64::from(max_managed)));
    Ok(Heap {
        width,
        start,
        max_direct,
        off_size,
        len_size,
        root,
        rows,
        checksummed: flags & 2 != 0,
    })
}

/// The bytes of the object a heap ID names (managed or tiny).
fn heap_object<'a>(f: &File<'a>, h: &Heap, id: &'a [u8]) -> Result<&'a [u8], Hdf5Error> {
    const WHAT: &str = "a fractal heap ID";
    let mut c = Cur::new(id, 0, WHAT);
    let b0 = c.u8()?;
    if b0 >> 6 != 0 {
        return Err(c.err(format!("ID version {}", b0 >> 6)));
    }
    match (b0 >> 4) & 3 {
        0 => {
            let off = c.uint(h.off_size)?;
            let len = c.uint(h.len_size)?;
            let (block, block_off, size) = locate(f, h, off)?;
            let within = off - block_off;
            if within.saturating_add(len) > size {
                return Err(Hdf5Error::malformed(
                    "a fractal heap object",
                    block,
                    format!("bytes {within}..+{len} run past its direct block of {size}"),
                ));
            }
            f.at(
                block.saturating_add(within),
                len,
                "an object of a fractal heap",
            )
        }
        2 => {
            let len = usize::from(b0 & 0x0f) + 1;
            c.bytes(len)
        }
        _ => Err(Hdf5Error::unsupported(
            "a link stored as a huge fractal heap object",
        )),
    }
}

/// The row of heap offset `off` of a doubling table, its block size, and
/// the offset where that row starts.
fn row_of(h: &Heap, off: u64) -> (u64, u64, u64) {
    let first = h.width.saturating_mul(h.start);
    if off < first {
        return (0, h.start, 0);
    }
    let r = u64::from(log2(off / first)) + 1;
    let size = h
        .start
        .saturating_mul(1u64.checked_shl((r - 1) as u32).unwrap_or(0));
    (
        r,
        size,
        first.saturating_mul(1u64.checked_shl((r - 1) as u32).unwrap_or(0)),
    )
}

/// The direct block holding heap offset `off`: its address, the heap
/// offset it starts at and its size.
fn locate(f: &File<'_>, h: &Heap, off: u64) -> Result<(u64, u64, u64), Hdf5Error> {
    let direct_header = 4 + 1 + 8 + h.off_size as u64 + if h.checksummed { 4 } else { 0 };
    let check_direct = |addr: u64, block_off: u64, size: u64| {
        let mut c = f.cursor(addr, direct_header, "a fractal heap direct block")?;
        c.signature("FHDB")?;
        Ok((addr, block_off, size))
    };
    if h.rows == 0 {
        return check_direct(h.root, 0, h.start);
    }
    let max_direct_rows = u64::from(log2(h.max_direct) - log2(h.start)) + 2;
    let (mut iblock, mut iblock_off, mut rows) = (h.root, 0u64, h.rows);
    for _ in 0..64 {
        let rel = off.checked_sub(iblock_off).ok_or_else(|| {
            Hdf5Error::malformed("a fractal heap indirect block", iblock, "offset before it")
        })?;
        let (row, size, row_start) = row_of(h, rel);
        if row >= rows {
            return Err(Hdf5Error::malformed(
                "a fractal heap indirect block",
                iblock,
                format!("heap offset {off} is past its {rows} rows"),
            ));
        }
        let col = (rel - row_start) / size;
        let entry = row * h.width + col;
        let header = 4 + 1 + 8 + h.off_size as u64;
        let mut c = f.cursor(
            iblock,
            header + (entry + 1) * 8,
            "a fractal heap indirect block",
        )?;
        c.signature("FHIB")?;
        c.skip(header as usize - 4 + entry as usize * 8)?;
        let child = le(c.bytes(8)?);
        if child == UNDEF {
            return Err(c.err(format!("heap offset {off} is in a block never written")));
        }
        let child_off = iblock_off + row_start + col * size;
        if row < max_direct_rows {
            return check_direct(child, child_off, size);
        }
        iblock = child;
        iblock_off = child_off;
        rows = u64::from(log2(size) - log2(h.start.saturating_mul(h.width))) + 1;
    }
    Err(Hdf5Error::Limit {
        what: "fractal heap indirect blocks nested",
        limit: 64,
    })
}
