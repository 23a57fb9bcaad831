//! The legacy `torch.save` format (`_use_new_zipfile_serialization=False`,
//! PICKLE.md §1): five pickles back to back (the magic number, the
//! protocol version, `sys_info`, the object, the storage keys), then each
//! storage in the keys' order: an 8-byte little-endian element count and
//! its elements. Every count is checked against the bytes that follow
//! before anything is read; nothing is allocated from one.

use std::collections::{BTreeSet, HashMap};

use super::archive::{TorchError, TorchZip, placements};
use super::objects;
use super::pickle;
use super::value::{Graph, Node};
use crate::format::stored::{ByteOrder, Encoding, Storage};

/// How a legacy file starts: `PROTO 2`, `LONG1` of 10 bytes, and the magic
/// number 0x1950a86a20f9469cfc6c little-endian.
pub const MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// Reads the legacy file `bytes`.
pub fn read(bytes: &[u8]) -> Result<TorchZip, TorchError> {
    let mut at = 0usize;
    let mut globals = BTreeSet::new();
    let mut graphs: Vec<Graph> = Vec::with_capacity(5);
    for _ in 0..5 {
        let rest = bytes.get(at..).unwrap_or_default();
        match pickle::parse(rest) {
            Ok(p) => {
                globals.extend(p.globals);
                at += p.end;
                graphs.push(p.graph);
            }
            Err(f) => {
                globals.extend(f.globals);
                // An unsafe global seen before the failure is what matters.
                let unsafe_globals = super::unsafe_globals(&globals);
                if !unsafe_globals.is_empty() {
                    return Ok(TorchZip::unsafe_file(globals, unsafe_globals));
                }
                return Err(TorchError::Pickle(f.error));
            }
        }
    }
    let unsafe_globals = super::unsafe_globals(&globals);
    if !unsafe_globals.is_empty() {
        return Ok(TorchZip::unsafe_file(globals, unsafe_globals));
    }
    let [_, _, sys_info, object, keys] = graphs.as_slice() else {
        return Err(TorchError::Layout("fewer than five pickles".into()));
    };
    let byte_order = if little_endian(sys_info) {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    let contents = objects::contents(object).map_err(TorchError::Object)?;
    let element_sizes = storage_element_sizes(object);
    let key_list: Vec<String> = keys
        .items_of(keys.root)
        .ok_or_else(|| TorchError::Layout("the storage keys are not a list".into()))?
        .iter()
        .map(|&k| match keys.get(k) {
            Some(Node::Str(s)) => Ok(s.clone()),
            Some(Node::Int(i)) => Ok(i.to_string()),
            _ => Err(TorchError::Layout("a storage key is not a string".into())),
        })
        .collect::<Result<_, _>>()?;
    // Each storage: its count, then its elements.
    let mut storages: HashMap<String, Storage> = HashMap::new();
    for key in &key_list {
        let Some(&element) = element_sizes.get(key) else {
            return Err(TorchError::Layout(format!(
                "storage {key:?} is listed but no persistent id gives its type"
            )));
        };
        let count_bytes = bytes
            .get(at..at + 8)
            .ok_or_else(|| TorchError::ViewOutOfBounds {
                tensor: String::new(),
                message: format!("storage {key:?}: the file ends before its element count"),
            })?;
        let mut c = [0u8; 8];
        c.copy_from_slice(count_bytes);
        let count = i64::from_le_bytes(c);
        let start = (at + 8) as u64;
        let len = u64::try_from(count)
            .ok()
            .and_then(|n| n.checked_mul(element))
            .filter(|&len| start.checked_add(len).is_some_and(|e| e <= bytes.len() as u64))
            .ok_or_else(|| TorchError::ViewOutOfBounds {
                tensor: String::new(),
                message: format!(
                    "storage {key:?} says {count} elements of {element} bytes, past the file's {} bytes",
                    bytes.len()
                ),
            })?;
        storages.insert(
            key.clone(),
            Storage {
                file: 0,
                file_range: start..start + len,
                skip: 0,
                len,
                encoding: Encoding::Plain,
            },
        );
        at = (start + len) as usize;
    }
    let (tensors, placements) = placements(contents.tensors, byte_order, |t| {
        storages
            .get(&t.storage)
            .cloned()
            .ok_or_else(|| TorchError::MissingStorage {
                tensor: t.name.clone(),
                key: t.storage.clone(),
                entry: "(the legacy storage list)".into(),
            })
    })?;
    Ok(TorchZip {
        root: String::new(),
        pickle_bytes: at as u64,
        globals,
        unsafe_globals: Vec::new(),
        tensors,
        placements,
        metadata: contents.metadata,
    })
}

/// `sys_info['little_endian']` (true when absent).
fn little_endian(g: &Graph) -> bool {
    let Some(Node::Dict(pairs)) = g.get(g.root) else {
        return true;
    };
    pairs
        .iter()
        .find(|(k, _)| g.str_of(*k) == Some("little_endian"))
        .is_none_or(|(_, v)| g.get(*v) != Some(&Node::Bool(false)))
}

/// The element size of every storage a persistent id names, by key.
fn storage_element_sizes(g: &Graph) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for node in &g.nodes {
        let Node::PersId(inner) = node else { continue };
        let Some(items) = g.items_of(*inner) else {
            continue;
        };
        let (Some(&class), Some(&key)) = (items.get(1), items.get(2)) else {
            continue;
        };
        let Some((_, class)) = g.global_of(class) else {
            continue;
        };
        let key = match g.get(key) {
            Some(Node::Str(s)) => s.clone(),
            Some(Node::Int(i)) => i.to_string(),
            _ => continue,
        };
        if let Some(size) = objects::storage_element_size(class) {
            out.insert(key, size);
        }
    }
    out
}
