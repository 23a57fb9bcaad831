//! DCP's `.metadata` (DISTRIBUTED.md §2): the pickled `Metadata` read off
//! the pickle machine's graph, as records of their `BUILD` states. Nothing
//! is built or called: a dataclass is only the fields its state holds.

use std::collections::HashMap;

use crate::dtype::Dtype;
use crate::format::pytorch::value::{Graph, Id, Node};

/// One entry of `state_dict_metadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A tensor: its global shape, dtype and chunks.
    Tensor {
        /// `properties.dtype`.
        dtype: Dtype,
        /// `size`: the global shape.
        shape: Vec<u64>,
        /// `chunks`: (offsets, sizes) each.
        chunks: Vec<(Vec<u64>, Vec<u64>)>,
    },
    /// A non-tensor value, pickled in its own storage entry.
    Bytes,
}

/// Where one storage entry's bytes are (`_StorageInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageInfo {
    /// The file, relative to the checkpoint's folder.
    pub relative_path: String,
    /// Its first byte in that file.
    pub offset: u64,
    /// Its length in bytes.
    pub length: u64,
}

/// What `.metadata` says.
#[derive(Debug, Default)]
pub struct Metadata {
    /// The entries, in the pickle's order.
    pub entries: Vec<(String, Entry)>,
    /// Storage by (`fqn`, chunk offsets; `None` for a bytes entry).
    pub storage: HashMap<(String, Option<Vec<u64>>), StorageInfo>,
}

/// Reads the graph of `.metadata`; the error says which object is not as
/// torch writes it.
pub fn read(graph: &Graph) -> Result<Metadata, String> {
    let root = fields(graph, graph.root, "Metadata")?;
    let sdm = root
        .get("state_dict_metadata")
        .copied()
        .ok_or("Metadata has no state_dict_metadata")?;
    let Some(Node::Dict(pairs)) = graph.get(sdm) else {
        return Err("Metadata.state_dict_metadata is not a dict".into());
    };
    let mut out = Metadata::default();
    for &(k, v) in pairs {
        let key = graph
            .str_of(k)
            .ok_or("a key of state_dict_metadata is not a string")?
            .to_owned();
        let entry = entry(graph, v).map_err(|e| format!("entry {key:?}: {e}"))?;
        out.entries.push((key, entry));
    }
    let storage = root
        .get("storage_data")
        .copied()
        .ok_or("Metadata has no storage_data")?;
    let Some(Node::Dict(pairs)) = graph.get(storage) else {
        return Err("Metadata.storage_data is not a dict".into());
    };
    for &(k, v) in pairs {
        let index = fields(graph, k, "MetadataIndex")?;
        let fqn = index
            .get("fqn")
            .and_then(|&id| graph.str_of(id))
            .ok_or("a MetadataIndex has no fqn string")?
            .to_owned();
        let offset = match index.get("offset").map(|&id| graph.get(id)) {
            None | Some(Some(Node::None)) => None,
            Some(_) => Some(
                index
                    .get("offset")
                    .and_then(|&id| size(graph, id))
                    .ok_or_else(|| format!("MetadataIndex of {fqn:?}: its offset is no size"))?,
            ),
        };
        let info = fields(graph, v, "_StorageInfo")?;
        if let Some(&t) = info.get("transform_descriptors")
            && !matches!(graph.get(t), Some(Node::None))
            && graph.items_of(t).is_none_or(|items| !items.is_empty())
        {
            return Err(format!(
                "Unsupported: the storage of {fqn:?} has transform descriptors (compressed or encrypted), which are not read"
            ));
        }
        let relative_path = info
            .get("relative_path")
            .and_then(|&id| graph.str_of(id))
            .ok_or_else(|| format!("the storage of {fqn:?} has no relative_path string"))?
            .to_owned();
        let number = |name: &str| {
            info.get(name)
                .and_then(|&id| graph.int_of(id))
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| format!("the storage of {fqn:?} has no {name} (a count of bytes)"))
        };
        let storage = StorageInfo {
            relative_path,
            offset: number("offset")?,
            length: number("length")?,
        };
        out.storage.insert((fqn, offset), storage);
    }
    Ok(out)
}

fn entry(graph: &Graph, id: Id) -> Result<Entry, String> {
    match class_of(graph, id) {
        Some("BytesStorageMetadata") => return Ok(Entry::Bytes),
        Some("TensorStorageMetadata") => {}
        other => return Err(format!("not a storage metadata record ({other:?})")),
    }
    let f = fields(graph, id, "TensorStorageMetadata")?;
    let shape = f
        .get("size")
        .and_then(|&s| size(graph, s))
        .ok_or("its size is not a torch.Size")?;
    let props = f.get("properties").copied().ok_or("it has no properties")?;
    let dtype = properties_dtype(graph, props)?;
    let chunks_id = f.get("chunks").copied().ok_or("it has no chunks")?;
    let items = graph
        .items_of(chunks_id)
        .ok_or("its chunks are not a list")?;
    let mut chunks = Vec::with_capacity(items.len());
    for &c in items {
        let cf = fields(graph, c, "ChunkStorageMetadata")?;
        let offsets = cf
            .get("offsets")
            .and_then(|&s| size(graph, s))
            .ok_or("a chunk's offsets are not a torch.Size")?;
        let sizes = cf
            .get("sizes")
            .and_then(|&s| size(graph, s))
            .ok_or("a chunk's sizes are not a torch.Size")?;
        chunks.push((offsets, sizes));
    }
    Ok(Entry::Tensor {
        dtype,
        shape,
        chunks,
    })
}

/// `TensorProperties`: its state is the tuple `(dtype, layout,
/// requires_grad, memory_format, pin_memory)` (or, older, a dict).
fn properties_dtype(graph: &Graph, id: Id) -> Result<Dtype, String> {
    let dtype_id = match state_of(graph, id).and_then(|s| graph.get(s)) {
        Some(Node::Tuple(items)) => items.first().copied(),
        Some(Node::Dict(_)) => fields(graph, id, "TensorProperties")?.get("dtype").copied(),
        _ => None,
    }
    .ok_or("its properties have no dtype")?;
    let (module, name) = graph
        .global_of(dtype_id)
        .ok_or("its properties' dtype is not a torch dtype")?;
    if module != "torch" {
        return Err(format!("its dtype {module}.{name} is not a torch dtype"));
    }
    crate::format::pytorch::objects::torch_dtype(name)
}

/// The class name of a call record (`NEWOBJ`/`REDUCE` of a global).
fn class_of(graph: &Graph, id: Id) -> Option<&str> {
    match graph.get(id)? {
        Node::Call { func, .. } => graph.global_of(*func).map(|(_, n)| n),
        _ => None,
    }
}

fn state_of(graph: &Graph, id: Id) -> Option<Id> {
    match graph.get(id)? {
        Node::Call { state, .. } => *state,
        _ => None,
    }
}

/// The fields of a dataclass record: its `BUILD` state, a dict or the
/// `(dict, slots)` pair of a class with `__slots__`.
fn fields<'g>(graph: &'g Graph, id: Id, what: &str) -> Result<HashMap<&'g str, Id>, String> {
    let state =
        state_of(graph, id).ok_or_else(|| format!("{what} is not a record with a state"))?;
    let mut out = HashMap::new();
    let mut add = |dict: Id| -> Result<(), String> {
        match graph.get(dict) {
            Some(Node::Dict(pairs)) => {
                for &(k, v) in pairs {
                    let key = graph
                        .str_of(k)
                        .ok_or_else(|| format!("{what}: a field name is not a string"))?;
                    out.insert(key, v);
                }
                Ok(())
            }
            Some(Node::None) => Ok(()),
            _ => Err(format!("{what}: its state is not a dict")),
        }
    };
    match graph.get(state) {
        Some(Node::Tuple(items)) if items.len() == 2 => {
            add(items[0])?;
            add(items[1])?;
        }
        _ => add(state)?,
    }
    Ok(out)
}

/// A `torch.Size`, or a plain tuple or list of non-negative integers.
fn size(graph: &Graph, id: Id) -> Option<Vec<u64>> {
    graph.size_of(id)
}

/// A pickled value as JSON (DISTRIBUTED.md §5: a bytes entry's value):
/// plain values as themselves, anything else as its description.
pub fn to_json(graph: &Graph, id: Id, depth: usize) -> serde_json::Value {
    use serde_json::Value;
    if depth > 32 {
        return Value::String("…".into());
    }
    match graph.get(id) {
        None | Some(Node::None) => Value::Null,
        Some(Node::Bool(b)) => Value::Bool(*b),
        Some(Node::Int(i)) => Value::from(*i),
        Some(Node::BigInt(s) | Node::Str(s)) => Value::String(s.clone()),
        Some(Node::Float(f)) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Some(Node::Bytes(b)) => Value::String(format!("<{} bytes>", b.len())),
        Some(Node::List(v) | Node::Tuple(v) | Node::Set(v)) => {
            Value::Array(v.iter().map(|&i| to_json(graph, i, depth + 1)).collect())
        }
        Some(Node::Dict(pairs)) => {
            let mut map = serde_json::Map::new();
            for &(k, v) in pairs {
                let key = match graph.get(k) {
                    Some(Node::Str(s)) => s.clone(),
                    _ => to_json(graph, k, depth + 1).to_string(),
                };
                map.insert(key, to_json(graph, v, depth + 1));
            }
            Value::Object(map)
        }
        Some(Node::Global { module, name }) => Value::String(format!("{module}.{name}")),
        Some(Node::Call { func, args, .. }) => match graph.global_of(*func) {
            // `torch.Size`, `collections.OrderedDict`: their plain values.
            Some(("torch", "Size")) => size(graph, id).map_or(Value::Null, Value::from),
            Some(("collections", "OrderedDict")) => {
                if let Some(Node::Call { items, .. }) = graph.get(id) {
                    let mut map = serde_json::Map::new();
                    for &(k, v) in items {
                        let key = graph.str_of(k).map_or_else(
                            || to_json(graph, k, depth + 1).to_string(),
                            str::to_owned,
                        );
                        map.insert(key, to_json(graph, v, depth + 1));
                    }
                    Value::Object(map)
                } else {
                    Value::Null
                }
            }
            Some((m, n)) => Value::String(format!("{m}.{n}(…)")),
            None => to_json(graph, *args, depth + 1),
        },
        Some(Node::PersId(_)) => Value::String("<storage>".into()),
    }
}
