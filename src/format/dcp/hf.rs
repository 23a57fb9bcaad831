//! DCP's HuggingFace-writer folders (DISTRIBUTED.md §1, §4): no
//! `.metadata`; every `.safetensors` file's `__metadata__` holds
//! `DCP_SHARDING_INFO`, `{name: {"saved_offsets": [...]}}`, and each of its
//! tensors is one chunk of the global tensor of that name, whose shape is
//! the per-dimension maximum of the chunks' ends.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::CONTAINER;
use crate::format::blocks::{self, Block, Rules};
use crate::format::containers::ContainerKind;
use crate::format::decode::{Opened, Tensor};
use crate::format::opened::{Siblings, into_file, refusal};
use crate::format::{LoadError, StoredFile};
use crate::source::Source;

/// The `__metadata__` key of a HuggingFace-writer shard.
const SHARDING_INFO: &str = "DCP_SHARDING_INFO";

/// True when every one of `files` (a folder's `.safetensors` files) is a
/// HuggingFace-writer shard: its header's metadata names its chunks.
pub(crate) fn is_hf_folder(files: &[PathBuf]) -> bool {
    !files.is_empty()
        && files
            .iter()
            .all(|f| header_json(f).is_some_and(|h| sharding(&h).is_some()))
}

/// A safetensors file's header as JSON (bounded by the format's limit).
fn header_json(path: &Path) -> Option<serde_json::Value> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).ok()?;
    let len = u64::from_le_bytes(len);
    if len > crate::format::MAX_HEADER_SIZE {
        return None;
    }
    let mut text = Vec::new();
    file.take(len).read_to_end(&mut text).ok()?;
    serde_json::from_slice(&text).ok()
}

/// `DCP_SHARDING_INFO`, parsed: each tensor's `saved_offsets`.
fn sharding(header: &serde_json::Value) -> Option<HashMap<String, Vec<u64>>> {
    let text = header.get("__metadata__")?.get(SHARDING_INFO)?.as_str()?;
    let info: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut out = HashMap::new();
    for (name, v) in info.as_object()? {
        let offsets = v
            .get("saved_offsets")?
            .as_array()?
            .iter()
            .map(serde_json::Value::as_u64)
            .collect::<Option<Vec<u64>>>()?;
        out.insert(name.clone(), offsets);
    }
    Some(out)
}

/// One chunk: the tensor's dtype, where the chunk starts, its shape, and
/// its bytes (file, range).
struct Chunk {
    dtype: crate::dtype::Dtype,
    block: super::ChunkBlock,
    file: String,
}

/// Opens the HuggingFace-writer folder of `files` (sorted) as one DCP
/// checkpoint of global tensors.
pub(crate) fn open(files: &[PathBuf]) -> Result<StoredFile, LoadError> {
    let first = files.first().cloned().unwrap_or_default();
    let bad = |kind: &'static str, message: String, tensor: Option<&str>| {
        refusal(&first, kind, message, tensor)
    };
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| Some(f.file_name()?.to_string_lossy().into_owned()))
        .collect();
    let mut taken = Siblings::new(&first, false).take(&names)?.into_iter();
    let Some((_, source)) = taken.next() else {
        return Err(bad(
            "InvalidShard",
            "the folder holds no shard".into(),
            None,
        ));
    };
    let others: Vec<(String, Source)> = taken.collect();
    let file_names = names;
    let mut order: Vec<String> = Vec::new();
    let mut chunks: HashMap<String, Vec<Chunk>> = HashMap::new();
    let mut metadata: Vec<(String, serde_json::Value)> = Vec::new();
    let all: Vec<&[u8]> = std::iter::once(source.bytes())
        .chain(others.iter().map(|(_, s)| s.bytes()))
        .collect();
    for (k, bytes) in all.iter().enumerate() {
        let shown = &file_names[k];
        let header = crate::format::parse(bytes).map_err(|e| {
            bad(
                "InvalidShard",
                format!("{shown:?} is not a valid safetensors file: {e}"),
                None,
            )
        })?;
        let meta = header.metadata();
        let info = meta
            .and_then(|m| m.get(SHARDING_INFO))
            .and_then(|t| sharding(&serde_json::json!({"__metadata__": {SHARDING_INFO: t}})))
            .ok_or_else(|| {
                bad(
                    "InvalidMetadata",
                    format!("{shown:?} has no readable {SHARDING_INFO}"),
                    None,
                )
            })?;
        if k == 0 {
            for (key, value) in meta.into_iter().flatten() {
                if key != SHARDING_INFO {
                    metadata.push((key.clone(), serde_json::Value::String(value.clone())));
                }
            }
        }
        let start = header.data_start();
        for t in header.tensors() {
            let name = t.name().to_owned();
            let origin = info.get(&name).cloned().ok_or_else(|| {
                bad(
                    "InvalidLayout",
                    format!("{shown:?} holds {name:?} but its {SHARDING_INFO} gives no saved_offsets for it"),
                    Some(&name),
                )
            })?;
            if origin.len() != t.shape().len() {
                return Err(bad(
                    "InvalidLayout",
                    format!(
                        "{shown:?}: the saved_offsets {origin:?} of {name:?} do not have its {} dimensions",
                        t.shape().len()
                    ),
                    Some(&name),
                ));
            }
            let [a, b] = t.data_offsets();
            let piece = (k, start + a..start + b);
            if !chunks.contains_key(&name) {
                order.push(name.clone());
            }
            chunks.entry(name).or_default().push(Chunk {
                dtype: t.dtype(),
                block: Block {
                    origin,
                    shape: t.shape().to_vec(),
                    piece,
                },
                file: shown.clone(),
            });
        }
    }
    let mut opened = Opened::default();
    for name in order {
        let list = chunks.remove(&name).unwrap_or_default();
        opened.tensors.push(global(&name, list).map_err(|m| {
            bad(
                "InvalidLayout",
                format!("tensor {name:?}: {m}"),
                Some(&name),
            )
        })?);
    }
    opened.metadata = metadata;
    opened
        .facts
        .insert("files".into(), serde_json::Value::from(file_names));
    into_file(first, source, ContainerKind::of(&CONTAINER), opened, others)
}

/// The global tensor of `chunks`: its shape the chunks' furthest ends,
/// checked to be tiled exactly.
fn global(name: &str, chunks: Vec<Chunk>) -> Result<Tensor, String> {
    let dtype = chunks.first().map(|c| c.dtype).ok_or("no chunk")?;
    if let Some(c) = chunks.iter().find(|c| c.dtype != dtype) {
        return Err(format!(
            "its chunks are {} and {}",
            dtype.name(),
            c.dtype.name()
        ));
    }
    if dtype.bits() < 8 {
        return Err(format!(
            "its dtype {} is not one torch stores",
            dtype.name()
        ));
    }
    let rank = chunks[0].block.origin.len();
    let mut shape = vec![0u64; rank];
    for c in &chunks {
        if c.block.origin.len() != rank {
            return Err("its chunks do not have one number of dimensions".into());
        }
        for (d, s) in shape.iter_mut().enumerate() {
            let end = c.block.origin[d]
                .checked_add(c.block.shape[d])
                .ok_or("a chunk's end overflows")?;
            *s = (*s).max(end);
        }
    }
    let (blocks_of, files): (Vec<super::ChunkBlock>, Vec<String>) =
        chunks.into_iter().map(|c| (c.block, c.file)).unzip();
    blocks::check(
        &shape,
        &blocks_of,
        Rules {
            holes: false,
            overhang: false,
        },
    )?;
    Ok(super::global_tensor(name, dtype, shape, blocks_of, &files))
}
