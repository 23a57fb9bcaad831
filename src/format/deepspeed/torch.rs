//! One `torch.save` zip of a DeepSpeed checkpoint, read for what the
//! reassembly needs: its pickle's graph (never run), the globals it names,
//! and where a tensor of it lies in the file. Tensors are found by walking
//! the graph to them, not by listing every tensor: an optimizer file's
//! `base_optimizer_state` is never read.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use crate::dtype::Dtype;
use crate::format::pytorch::value::{Graph, Id, Node};
use crate::format::pytorch::{archive, objects, pickle};
use crate::format::zip::{self, Member};

/// A torch zip's pickle, read.
pub(super) struct TorchFile {
    /// The pickle's values.
    pub graph: Graph,
    /// Every global the pickle names.
    pub globals: BTreeSet<String>,
    /// The storages' members: key → (stored, data start, size).
    storages: HashMap<String, Member>,
    /// The file's length.
    len: u64,
}

/// Why a torch zip is not read.
pub(super) enum ReadError {
    /// Its pickle names globals outside the allowlists: (all, unsafe).
    Unsafe(BTreeSet<String>, Vec<String>),
    /// It is not a torch zip that can be read: (kind, message).
    Invalid(&'static str, String),
}

/// A tensor's bytes: C order, in one range of its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stored {
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its bytes in the file.
    pub range: Range<u64>,
}

impl Stored {
    /// Its element count.
    pub fn numel(&self) -> u64 {
        self.range.end.saturating_sub(self.range.start) / element_size(self.dtype)
    }
}

/// Bytes of one element of `dtype` (at least 1).
pub(super) fn element_size(dtype: Dtype) -> u64 {
    u64::from(dtype.bits() / 8).max(1)
}

/// Reads the torch zip `bytes`; `unsafe_of` says which of its globals
/// are outside the allowlists.
pub(super) fn read(
    bytes: &[u8],
    unsafe_of: impl Fn(&BTreeSet<String>) -> Vec<String>,
) -> Result<TorchFile, ReadError> {
    let invalid = |kind: &'static str, m: String| ReadError::Invalid(kind, m);
    let archive = zip::open(bytes).map_err(|e| invalid("InvalidZip", e.to_string()))?;
    let members = archive.members();
    let pickles: Vec<&Member> = members
        .iter()
        .filter(|m| m.name == "data.pkl" || m.name.ends_with("/data.pkl"))
        .collect();
    let [pkl] = pickles.as_slice() else {
        return Err(invalid(
            "InvalidZip",
            format!(
                "not a torch zip: {} entries named */data.pkl",
                pickles.len()
            ),
        ));
    };
    let root = pkl.name.strip_suffix("data.pkl").unwrap_or("").to_owned();
    let small = |m: &Member, max: u64| -> Result<Vec<u8>, ReadError> {
        if m.size > max {
            return Err(invalid(
                "InvalidZip",
                format!("{:?} is {} bytes; at most {max} are read", m.name, m.size),
            ));
        }
        archive
            .prefix(bytes, m, max)
            .map_err(|e| invalid("InvalidZip", e.to_string()))
    };
    if let Some(m) = members
        .iter()
        .find(|m| m.name == format!("{root}byteorder"))
    {
        match small(m, 64)?.trim_ascii() {
            b"little" => {}
            b"big" => {
                return Err(invalid(
                    "Unsupported",
                    "its storages are big-endian, which DeepSpeed checkpoints are not read in"
                        .into(),
                ));
            }
            other => {
                return Err(invalid(
                    "InvalidZip",
                    format!("byteorder says {:?}", String::from_utf8_lossy(other)),
                ));
            }
        }
    }
    let pickle_bytes = small(pkl, archive::MAX_PICKLE_BYTES)?;
    let parsed = match pickle::parse(&pickle_bytes) {
        Ok(p) => p,
        Err(f) => {
            let u = unsafe_of(&f.globals);
            return Err(if u.is_empty() {
                invalid(f.error.kind(), format!("its pickle: {}", f.error))
            } else {
                ReadError::Unsafe(f.globals, u)
            });
        }
    };
    let u = unsafe_of(&parsed.globals);
    if !u.is_empty() {
        return Err(ReadError::Unsafe(parsed.globals, u));
    }
    let prefix = format!("{root}data/");
    let storages = members
        .iter()
        .filter_map(|m| Some((m.name.strip_prefix(&prefix)?.to_owned(), m.clone())))
        .collect();
    Ok(TorchFile {
        graph: parsed.graph,
        globals: parsed.globals,
        storages,
        len: bytes.len() as u64,
    })
}

impl TorchFile {
    /// The tensor node `id` rebuilds (`_rebuild_tensor_v2`, through
    /// `_rebuild_parameter` or `_rebuild_from_type_v2`), found in place:
    /// its storage stored (not deflated) inside the file, its view C-order
    /// and inside the storage.
    pub fn tensor(&self, id: Id, name: &str) -> Result<Stored, String> {
        let desc = objects::tensor(&self.graph, id, name)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{name:?} is not a tensor"))?;
        let element = element_size(desc.dtype);
        let numel = desc
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(|| format!("{name:?}: its shape {:?} overflows", desc.shape))?;
        // C order: each dimension of more than one element steps over
        // the dimensions after it.
        let mut step = 1u64;
        for (&size, &stride) in desc.shape.iter().zip(&desc.strides).rev() {
            if size > 1 && stride != step {
                return Err(format!(
                    "{name:?} is a view of strides {:?} over shape {:?}, not in C order",
                    desc.strides, desc.shape
                ));
            }
            step = step.saturating_mul(size);
        }
        let member = self.storages.get(&desc.storage).ok_or_else(|| {
            format!(
                "{name:?} names storage {:?}, which has no entry",
                desc.storage
            )
        })?;
        if !member.stored {
            return Err(format!(
                "{name:?}: its storage {:?} is compressed; DeepSpeed checkpoints are read in place",
                desc.storage
            ));
        }
        let member_end = member
            .data_start
            .checked_add(member.size)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                format!(
                    "{name:?}: its storage {:?} ends past the end of the file",
                    desc.storage
                )
            })?;
        let declared = desc.storage_numel.checked_mul(element);
        if declared.is_none_or(|d| d > member.size) {
            return Err(format!(
                "{name:?}: its storage {:?} declares {} elements but holds {} bytes",
                desc.storage, desc.storage_numel, member.size
            ));
        }
        let end = desc
            .offset
            .checked_add(numel)
            .filter(|&e| numel == 0 || e <= desc.storage_numel)
            .ok_or_else(|| {
                format!(
                    "{name:?}: elements {}..+{numel} are outside its storage of {} elements",
                    desc.offset, desc.storage_numel
                )
            })?;
        let start = if numel == 0 {
            member.data_start
        } else {
            member.data_start + desc.offset * element
        };
        let range = start..start + (end - desc.offset) * element;
        debug_assert!(range.end <= member_end);
        Ok(Stored {
            dtype: desc.dtype,
            shape: desc.shape,
            range,
        })
    }
}

/// The items of a dict node (`{}` or `collections.OrderedDict`).
pub(super) fn dict_items(graph: &Graph, id: Id) -> Option<&[(Id, Id)]> {
    match graph.get(id)? {
        Node::Dict(pairs) => Some(pairs),
        Node::Call { func, items, .. }
            if graph.global_of(*func) == Some(("collections", "OrderedDict")) =>
        {
            Some(items)
        }
        _ => None,
    }
}

/// The value of `key` in dict node `id`.
pub(super) fn lookup(graph: &Graph, id: Id, key: &str) -> Option<Id> {
    dict_items(graph, id)?
        .iter()
        .find(|&&(k, _)| graph.str_of(k) == Some(key))
        .map(|&(_, v)| v)
}

/// True for a `None` node.
pub(super) fn is_none(graph: &Graph, id: Id) -> bool {
    matches!(graph.get(id), Some(Node::None))
}

/// A `torch.Size`, or a plain tuple or list of non-negative integers.
pub(super) fn size(graph: &Graph, id: Id) -> Option<Vec<u64>> {
    graph.size_of(id)
}

/// A non-negative integer node.
pub(super) fn count(graph: &Graph, id: Id) -> Option<u64> {
    graph.int_of(id).and_then(|n| u64::try_from(n).ok())
}
