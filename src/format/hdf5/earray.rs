//! The extensible array chunk index (layout version 4, a dataset with one
//! unlimited dimension): a header ("EAHD"), an index block ("EAIB") with
//! the first elements and the first data blocks' addresses, data blocks
//! ("EADB") and secondary blocks ("EASB") of doubling sizes. Unpaged data
//! blocks are read (up to 1024 chunks a block, h5py's default page size);
//! paged ones are refused.

use super::error::Hdf5Error;
use super::io::{Cur, File, UNDEF};

/// An element: chunk address, stored size (filtered), filter mask.
pub(super) type Entry = (u64, Option<u64>, u32);

/// What the header says.
struct Header {
    class: u8,
    element: u64,
    idx_blk_elmts: u64,
    dblk_min: u64,
    sblk_min_ptrs: u64,
    page_bits: u8,
    off_size: usize,
    nsblks: u64,
    index_block: u64,
}

/// One super block's data blocks: how many, of how many elements.
fn sblk_info(h: &Header, u: u64) -> (u64, u64) {
    let ndblks = 1u64 << (u / 2);
    let nelmts = (1u64 << u.div_ceil(2)).saturating_mul(h.dblk_min);
    (ndblks, nelmts)
}

/// The first `n` elements of the extensible array whose header is at
/// `addr` (elements never written: `UNDEF` addresses).
pub(super) fn read(f: &File<'_>, addr: u64, wanted: u64) -> Result<Vec<Entry>, Hdf5Error> {
    let mut c = f.cursor(addr, 12 + 6 * 8 + 8 + 4, "an extensible array header")?;
    c.signature("EAHD")?;
    let version = c.u8()?;
    let class = c.u8()?;
    let element = u64::from(c.u8()?);
    let max_bits = c.u8()?;
    let idx_blk_elmts = u64::from(c.u8()?);
    let dblk_min = u64::from(c.u8()?);
    let sblk_min_ptrs = u64::from(c.u8()?);
    let page_bits = c.u8()?;
    c.skip(6 * 8)?;
    let index_block = c.u64()?;
    c.check_sum(12 + 6 * 8 + 8)?;
    let log2 = |x: u64| u64::from(x.max(1).ilog2());
    if version != 0
        || class > 1
        || !(8..=28).contains(&element)
        || !(1..=64).contains(&max_bits)
        || !dblk_min.is_power_of_two()
        || !sblk_min_ptrs.is_power_of_two()
        || log2(dblk_min) > u64::from(max_bits)
        || page_bits > 32
    {
        return Err(c.err(format!(
            "version {version}, class {class}, {element}-byte elements, {max_bits} bits, blocks of {dblk_min}, {sblk_min_ptrs} pointers: not an extensible array read"
        )));
    }
    let h = Header {
        class,
        element,
        idx_blk_elmts,
        dblk_min,
        sblk_min_ptrs,
        page_bits,
        off_size: usize::from(max_bits).div_ceil(8),
        nsblks: 1 + u64::from(max_bits) - log2(dblk_min),
        index_block,
    };
    let mut out = vec![(UNDEF, None, 0); 0];
    if h.index_block == UNDEF || wanted == 0 {
        return Ok(out);
    }
    // The index block: elements, data block and secondary block addresses.
    let iblk_sblks = 2 * log2(h.sblk_min_ptrs);
    let dblk_count = 2 * (h.sblk_min_ptrs - 1);
    let sblk_count = h.nsblks.saturating_sub(iblk_sblks);
    let prefix = 4 + 1 + 1 + 8;
    let len = prefix + h.idx_blk_elmts * h.element + (dblk_count + sblk_count) * 8;
    let mut c = f.cursor(h.index_block, len + 4, "an extensible array index block")?;
    c.signature("EAIB")?;
    c.skip(2)?;
    if c.u64()? != addr {
        return Err(c.err("its header address is not the array's"));
    }
    let mut kept = 0u64;
    while kept < h.idx_blk_elmts && kept < wanted {
        out.push(entry(&h, &mut c)?);
        kept += 1;
    }
    c.skip(((h.idx_blk_elmts - kept) * h.element) as usize)?;
    let mut dblks = Vec::new();
    for _ in 0..dblk_count {
        dblks.push(c.u64()?);
    }
    let mut sblks = Vec::new();
    for _ in 0..sblk_count {
        sblks.push(c.u64()?);
    }
    c.check_sum(len as usize)?;
    // Super blocks in order: their data blocks from the index block, or
    // from a secondary block.
    let mut next_dblk = 0usize;
    for sb in 0..h.nsblks {
        if out.len() as u64 >= wanted {
            break;
        }
        let (count, nelmts) = sblk_info(&h, sb);
        let addrs: Vec<u64> = if sb < iblk_sblks {
            let these = dblks
                .get(next_dblk..next_dblk + count as usize)
                .unwrap_or(&[])
                .to_vec();
            next_dblk += count as usize;
            these
        } else {
            let s = sblks
                .get((sb - iblk_sblks) as usize)
                .copied()
                .unwrap_or(UNDEF);
            secondary(f, &h, s, addr, count, nelmts)?
        };
        for block in 0..count {
            if out.len() as u64 >= wanted {
                break;
            }
            let take = nelmts.min(wanted - out.len() as u64);
            match addrs.get(block as usize).copied().unwrap_or(UNDEF) {
                UNDEF => out.extend(std::iter::repeat_n((UNDEF, None, 0), take as usize)),
                at => data_block(f, &h, at, addr, nelmts, take, &mut out)?,
            }
        }
    }
    Ok(out)
}

/// One element.
fn entry(h: &Header, c: &mut Cur<'_>) -> Result<Entry, Hdf5Error> {
    let a = c.u64()?;
    if h.class == 0 {
        c.skip((h.element - 8) as usize)?;
        return Ok((a, None, 0));
    }
    let size = c.uint((h.element - 12) as usize)?;
    let mask = c.u32()?;
    Ok((a, Some(size), mask))
}

fn paged(h: &Header, nelmts: u64) -> Result<(), Hdf5Error> {
    if nelmts > 1u64 << h.page_bits {
        return Err(Hdf5Error::unsupported(format!(
            "an extensible array data block of {nelmts} chunks in pages of {}",
            1u64 << h.page_bits
        )));
    }
    Ok(())
}

/// A secondary block's data block addresses.
fn secondary(
    f: &File<'_>,
    h: &Header,
    at: u64,
    header: u64,
    count: u64,
    nelmts: u64,
) -> Result<Vec<u64>, Hdf5Error> {
    if at == UNDEF {
        return Ok(Vec::new());
    }
    paged(h, nelmts)?;
    let len = 4 + 1 + 1 + 8 + h.off_size as u64 + count * 8;
    let mut c = f.cursor(at, len + 4, "an extensible array secondary block")?;
    c.signature("EASB")?;
    c.skip(2)?;
    if c.u64()? != header {
        return Err(c.err("its header address is not the array's"));
    }
    c.skip(h.off_size)?;
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(c.u64()?);
    }
    c.check_sum(len as usize)?;
    Ok(out)
}

/// A data block's first `take` elements.
fn data_block(
    f: &File<'_>,
    h: &Header,
    at: u64,
    header: u64,
    nelmts: u64,
    take: u64,
    out: &mut Vec<Entry>,
) -> Result<(), Hdf5Error> {
    paged(h, nelmts)?;
    let len = 4 + 1 + 1 + 8 + h.off_size as u64 + nelmts * h.element;
    let mut c = f.cursor(at, len + 4, "an extensible array data block")?;
    c.signature("EADB")?;
    c.skip(2)?;
    if c.u64()? != header {
        return Err(c.err("its header address is not the array's"));
    }
    c.skip(h.off_size)?;
    for _ in 0..take {
        out.push(entry(h, &mut c)?);
    }
    c.check_sum(len as usize)?;
    Ok(())
}
