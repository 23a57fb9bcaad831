//! Which tensor of A is compared with which of B: match keys (prefixes
//! stripped, renames applied), the pairs and the names on one side only,
//! and the metadata comparison.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{ChangedValue, DiffOptions, MetadataDiff};
use crate::format::{Checkpoint, CheckpointKind, TensorRef};

/// Which checkpoint of a diff a name comes from: the renames of
/// [`DiffOptions::renames`] apply to A's names only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The first checkpoint, whose names are renamed before matching.
    A,
    /// The second checkpoint, matched by its names as they are (after the
    /// prefixes are stripped).
    B,
}

/// The name a tensor is matched by: the first of
/// [`DiffOptions::strip_prefixes`] that it starts with removed, then, on
/// side A, renamed.
pub fn match_key(name: &str, options: &DiffOptions, side: Side) -> String {
    let mut n = name;
    for p in &options.strip_prefixes {
        if let Some(rest) = n.strip_prefix(p.as_str()) {
            n = rest;
            break;
        }
    }
    if side == Side::A
        && let Some((_, to)) = options.renames.iter().find(|(from, _)| from == n)
    {
        return to.clone();
    }
    n.to_owned()
}

/// The metadata of a checkpoint as strings (a shard index's values that
/// are not strings are written as JSON).
pub fn metadata_of(ck: &Checkpoint) -> BTreeMap<String, String> {
    match &ck.kind() {
        CheckpointKind::Single => ck
            .shards()
            .first()
            .and_then(|s| s.file().header().metadata().cloned())
            .unwrap_or_default(),
        // NumPy files carry no metadata.
        CheckpointKind::Folder => BTreeMap::new(),
        CheckpointKind::Sharded { metadata, .. } => metadata
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Compares the metadata of two checkpoints.
pub fn diff_metadata(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> MetadataDiff {
    let mut out = MetadataDiff::default();
    for (k, va) in a {
        match b.get(k) {
            None => {
                out.removed.insert(k.clone(), va.clone());
            }
            Some(vb) if vb != va => {
                out.changed.insert(
                    k.clone(),
                    ChangedValue {
                        a: va.clone(),
                        b: vb.clone(),
                    },
                );
            }
            Some(_) => {}
        }
    }
    for (k, vb) in b {
        if !a.contains_key(k) {
            out.added.insert(k.clone(), vb.clone());
        }
    }
    out
}

/// A matched pair before comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// A's tensor (a reference into the first checkpoint).
    pub a: TensorRef,
    /// B's tensor, whose match key equals A's.
    pub b: TensorRef,
}

/// Matches the tensors of two checkpoints: pairs in B's order, then the
/// names only in A and only in B.
pub fn match_tensors(
    a: &Checkpoint,
    b: &Checkpoint,
    options: &DiffOptions,
) -> (Vec<Pair>, Vec<String>, Vec<String>) {
    let mut in_a: HashMap<String, TensorRef> = HashMap::with_capacity(a.tensors().len());
    for (t, info) in a.entries() {
        in_a.insert(match_key(info.name(), options, Side::A), t);
    }
    let mut pairs = Vec::new();
    let mut only_b = Vec::new();
    let mut matched: BTreeSet<String> = BTreeSet::new();
    for (t, info) in b.entries() {
        let key = match_key(info.name(), options, Side::B);
        match in_a.get(&key) {
            Some(ta) => {
                pairs.push(Pair { a: *ta, b: t });
                matched.insert(key);
            }
            None => only_b.push(info.name().to_owned()),
        }
    }
    let mut only_a: Vec<String> = a
        .entries()
        .map(|(_, i)| i)
        .filter(|i| !matched.contains(&match_key(i.name(), options, Side::A)))
        .map(|i| i.name().to_owned())
        .collect();
    only_a.sort();
    only_b.sort();
    (pairs, only_a, only_b)
}
