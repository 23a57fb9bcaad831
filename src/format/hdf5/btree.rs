//! The two B-trees: version 1 (group nodes, type 0, and chunks, type 1)
//! and version 2 (the link-name index of dense groups, type 5). Walked
//! with an explicit stack, each node once, every level one below its
//! parent's, within a budget of nodes for the whole file.

use std::collections::HashSet;

use super::error::Hdf5Error;
use super::io::{File, UNDEF};

/// B-tree and heap nodes, and the entries and records they hold, read at
/// most over the whole file.
pub(super) const MAX_NODES: u64 = 1 << 23;

/// A count of nodes read, shared by every walk of one file.
#[derive(Debug, Default)]
pub(super) struct Budget {
    nodes: u64,
}

impl Budget {
    pub(super) fn take(&mut self) -> Result<(), Hdf5Error> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Hdf5Error::Limit {
                what: "B-tree nodes, records and heap objects read",
                limit: MAX_NODES,
            });
        }
        Ok(())
    }
}

/// What a version 1 B-tree walk hands each leaf entry: the key before
/// the child, and the child's address.
pub(super) type Leaf<'b> = &'b mut dyn FnMut(&[u8], u64) -> Result<(), Hdf5Error>;

/// Walks the version 1 B-tree of `node_type` at `root` (keys of
/// `key_size` bytes), handing `leaf` each entry of its level-0 nodes: the
/// key before the child, and the child's address.
pub(super) fn walk_v1(
    f: &File<'_>,
    root: u64,
    node_type: u8,
    key_size: usize,
    budget: &mut Budget,
    leaf: Leaf<'_>,
) -> Result<(), Hdf5Error> {
    const WHAT: &str = "a version 1 B-tree node";
    if root == UNDEF {
        return Ok(());
    }
    let mut stack: Vec<(u64, Option<u8>)> = vec![(root, None)];
    let mut seen = HashSet::new();
    while let Some((addr, level_wanted)) = stack.pop() {
        if !seen.insert(addr) {
            return Err(Hdf5Error::malformed(
                WHAT,
                addr,
                "the node is reached twice (a B-tree is no tree)",
            ));
        }
        budget.take()?;
        let mut c = f.cursor(addr, 24, WHAT)?;
        c.signature("TREE")?;
        let kind = c.u8()?;
        let level = c.u8()?;
        let entries = c.u16()? as u64;
        if kind != node_type {
            return Err(c.err(format!("node type {kind}, expected {node_type}")));
        }
        if level_wanted.is_some_and(|l| l != level) {
            return Err(c.err(format!(
                "level {level} under a node of level {}",
                level_wanted.map_or(0, |l| l + 1)
            )));
        }
        let size = 24 + entries * (key_size as u64 + 8) + key_size as u64;
        let mut c = f.cursor(addr, size, WHAT)?;
        c.skip(24)?;
        for _ in 0..entries {
            budget.take()?;
            let key = c.bytes(key_size)?;
            let child = c.u64()?;
            if level == 0 {
                leaf(key, child)?;
            } else {
                stack.push((child, Some(level - 1)));
            }
        }
    }
    Ok(())
}

/// `H5VM_limit_enc_size`: bytes that encode numbers up to `n`.
pub(super) fn enc_size(n: u64) -> usize {
    (n.max(1).ilog2() / 8 + 1) as usize
}

/// Walks the version 2 B-tree whose header is at `addr`, handing `record`
/// each record's bytes (in no particular order).
pub(super) fn walk_v2<'a>(
    f: &File<'a>,
    addr: u64,
    budget: &mut Budget,
    record: &mut dyn FnMut(&'a [u8]) -> Result<(), Hdf5Error>,
) -> Result<(), Hdf5Error> {
    const WHAT: &str = "a version 2 B-tree header";
    let mut c = f.cursor(addr, 38, WHAT)?;
    c.signature("BTHD")?;
    let version = c.u8()?;
    if version != 0 {
        return Err(c.err(format!("version {version} (0 is read)")));
    }
    let _kind = c.u8()?;
    let node_size = u64::from(c.u32()?);
    let rec_size = c.u16()? as usize;
    let depth = c.u16()?;
    c.skip(2)?;
    let root = c.u64()?;
    let root_nrec = c.u16()?;
    let _total = c.u64()?;
    c.check_sum(34)?;
    if root == UNDEF || root_nrec == 0 {
        return Ok(());
    }
    if rec_size == 0 || !(10..=1 << 20).contains(&node_size) || depth > 32 {
        return Err(c.err(format!(
            "node size {node_size}, record size {rec_size}, depth {depth}: not a B-tree read"
        )));
    }
    // The widths of the child pointers' counts, per depth (H5B2__hdr_init).
    let leaf_max = (node_size - 10) / rec_size as u64;
    let max_nrec_size = enc_size(leaf_max);
    let mut cum = vec![leaf_max];
    let mut cum_size = vec![0usize];
    for d in 1..=depth as usize {
        let ptr = 8 + max_nrec_size + cum_size[d - 1];
        let max = node_size.saturating_sub(10 + ptr as u64) / (rec_size + ptr) as u64;
        let c = max
            .saturating_add(1)
            .saturating_mul(cum[d - 1])
            .saturating_add(max);
        cum.push(c);
        cum_size.push(enc_size(c));
    }
    let mut stack = vec![(root, root_nrec, depth)];
    let mut seen = HashSet::new();
    while let Some((node, nrec, d)) = stack.pop() {
        if !seen.insert(node) {
            return Err(Hdf5Error::malformed(
                "a version 2 B-tree node",
                node,
                "the node is reached twice",
            ));
        }
        budget.take()?;
        let sig = if d == 0 { "BTLF" } else { "BTIN" };
        let what = if d == 0 {
            "a version 2 B-tree leaf"
        } else {
            "a version 2 B-tree internal node"
        };
        let mut c = f.cursor(node, node_size, what)?;
        c.signature(sig)?;
        c.skip(2)?;
        for _ in 0..nrec {
            budget.take()?;
            record(c.bytes(rec_size)?)?;
        }
        if d > 0 {
            let d = d as usize;
            for _ in 0..=nrec {
                let child = c.u64()?;
                let n = c.uint(max_nrec_size)? as u16;
                c.skip(if d > 1 { cum_size[d - 1] } else { 0 })?;
                if n > 0 {
                    stack.push((child, n, (d - 1) as u16));
                }
            }
        }
        let len = c.pos();
        c.check_sum(len)?;
    }
    Ok(())
}
