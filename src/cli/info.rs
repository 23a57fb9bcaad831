//! `tensorscope info`: the header of a file or sharded model.

use std::fmt::Write as _;

use serde::Serialize;

use super::output::{Output, display_name, group_digits, path_string, report_error};
use super::quant_doc::QuantDoc;
use super::{EXIT_OK, InfoArgs};
use crate::format::stored::ByteOrder;
use crate::format::{Checkpoint, CheckpointKind, Warning};

/// One tensor in `info --json`.
#[derive(Debug, Serialize)]
pub struct TensorDoc {
    /// The tensor's name as in the header (JSON-escaped by serde, not by us).
    pub name: String,
    /// The dtype as the header spells it (`BF16`, `F8_E4M3`).
    pub dtype: &'static str,
    /// Shape (exact u64).
    pub shape: Vec<u64>,
    /// `[begin, end]` relative to the data buffer of a safetensors file; for
    /// a container without one (NumPy), the absolute byte range of data
    /// stored as is; `null` for compressed data.
    pub data_offsets: Option<[u64; 2]>,
    /// Elements (the product of the shape; 1 for a scalar).
    pub numel: u64,
    /// Bytes of data: `numel × bits / 8`, equal to the offsets' span.
    pub nbytes: u64,
    /// The shard's file name (sharded models only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// `"big"` for big-endian elements (absent: little-endian).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub byte_order: Option<&'static str>,
    /// Strides in elements, when not stored in C order (Fortran order, a
    /// view).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<u64>>,
    /// The first element's index in a storage other tensors share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_offset: Option<u64>,
    /// The id of a storage other tensors read too (tied weights).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<usize>,
    /// `"deflate"` for a compressed zip member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<&'static str>,
    /// What the container says of the tensor (NumPy: `descr`,
    /// `format_version`, `fortran_order`, `member`).
    #[serde(flatten)]
    pub container: serde_json::Map<String, serde_json::Value>,
}

/// One shard in `info --json`.
#[derive(Debug, Serialize)]
pub struct ShardDoc {
    /// The shard file's path, as resolved beside the index.
    pub path: String,
    /// Its name in the index.
    pub name: String,
    /// The shard's size in bytes, header included.
    pub file_size: u64,
    /// The shard's header length N (bytes 8..8+N hold the JSON).
    pub header_size: u64,
    /// The shard's own `__metadata__` (`null` when it has none); the index's
    /// `metadata` is the document's top-level `metadata`.
    pub metadata: serde_json::Value,
}

/// The `info --json` document (fields as DESIGN.md fixes them; new fields
/// may be added, none renamed).
#[derive(Debug, Serialize)]
pub struct InfoDoc {
    /// What was opened, as given: a file, a shard index or a folder.
    pub path: String,
    /// The container: `safetensors` or `numpy`.
    pub format: &'static str,
    /// `single`, `sharded`, or `folder` (a folder of NumPy files).
    pub kind: &'static str,
    /// Size of the opened file (the index file for a sharded model).
    pub file_size: u64,
    /// Header length N; `null` for a shard index.
    pub header_size: Option<u64>,
    /// `__metadata__` (a single file) or the index's `metadata`.
    pub metadata: serde_json::Value,
    /// Number of tensors over every shard.
    pub tensor_count: usize,
    /// Total elements over every tensor.
    pub parameter_count: u64,
    /// Total bytes of tensor data.
    pub data_bytes: u64,
    /// Every tensor, in offset order, shard by shard.
    pub tensors: Vec<TensorDoc>,
    /// The shards of a sharded model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardDoc>>,
    /// What the reference reader accepts but a user should know of
    /// (duplicate keys, leading whitespace, …).
    pub warnings: Vec<Warning>,
    /// The quantization (`null` for a plain checkpoint).
    pub quantization: Option<QuantDoc>,
    /// A PyTorch file's pickle: the globals it names and those outside
    /// the allowlist (absent for other containers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pickle: Option<PickleDoc>,
    /// A GGUF file's own header (the first part's, for a split model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gguf: Option<GgufDoc>,
    /// A DeepSpeed ZeRO checkpoint's layout: `{stage, world_size}`
    /// (DISTRIBUTED.md §6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero: Option<serde_json::Value>,
    /// The container's own facts, under its id (`onnx`: `ir_version`,
    /// `opset`, `producer`; `tensorflow`: `num_shards`).
    #[serde(flatten)]
    pub container: serde_json::Map<String, serde_json::Value>,
}

/// `info --json`'s `gguf` object (GGUF.md, `info`).
#[derive(Debug, Serialize)]
pub struct GgufDoc {
    /// 2 or 3.
    pub version: u32,
    /// `general.alignment`, or 32.
    pub alignment: u64,
    /// Where the data section starts (absolute).
    pub tensor_data_offset: u64,
    /// Every key, by GGUF.md's rules (long arrays summarised).
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// `info --json`'s `pickle` object.
#[derive(Debug, Serialize)]
pub struct PickleDoc {
    /// Every global named, `module.name` as written, sorted, once each.
    pub globals: Vec<String>,
    /// Those outside torch's `weights_only` allowlist.
    pub unsafe_globals: Vec<String>,
}

/// The pickles of every file of a checkpoint, as one report.
fn pickle_doc(ck: &Checkpoint) -> Option<PickleDoc> {
    let mut globals = std::collections::BTreeSet::new();
    let mut unsafe_globals = std::collections::BTreeSet::new();
    let mut any = false;
    for s in ck.shards() {
        if let Some(p) = s.file().pickle() {
            any = true;
            globals.extend(p.globals.iter().cloned());
            unsafe_globals.extend(p.unsafe_globals.iter().cloned());
        }
    }
    any.then(|| PickleDoc {
        globals: globals.into_iter().collect(),
        unsafe_globals: unsafe_globals.into_iter().collect(),
    })
}

/// The document's `metadata`: a single file's, a split GGUF's first
/// part's, or a shard index's.
pub fn metadata_of(ck: &Checkpoint) -> serde_json::Value {
    match ck.kind() {
        CheckpointKind::Single => metadata_json(ck.shards()[0].file()),
        CheckpointKind::Folder => ck
            .shards()
            .first()
            .filter(|s| s.file().gguf().is_some())
            .map_or(serde_json::Value::Null, |s| metadata_json(s.file())),
        CheckpointKind::Sharded { metadata, .. } => metadata.clone(),
    }
}

fn metadata_json(file: &crate::format::StoredFile) -> serde_json::Value {
    file.metadata_values()
        .map_or(serde_json::Value::Null, serde_json::Value::Object)
}

impl InfoDoc {
    /// Builds the document for an opened checkpoint.
    pub fn new(ck: &Checkpoint) -> Self {
        let sharded = ck.is_sharded();
        let tensors: Vec<TensorDoc> = ck
            .entries()
            .map(|(t, info)| {
                let facts = ck.stored_facts(t);
                let data_offsets = if ck.container().has_data_section() {
                    Some(info.data_offsets())
                } else {
                    facts.data_range.as_ref().map(|r| [r.start, r.end])
                };
                // A GGUF tensor is its ggml type and row-major shape (a block
                // type's stored bytes are its part, for the other verbs).
                let gguf = ck.shards()[t.shard()]
                    .file()
                    .gguf()
                    .and_then(|g| Some((*g.types.get(t.index())?, g.shapes.get(t.index())?)));
                let (dtype, shape) = match gguf {
                    Some((ty, shape)) => (ty.name(), shape.clone()),
                    None => (info.dtype().name(), info.shape().to_vec()),
                };
                TensorDoc {
                    name: info.name().to_owned(),
                    dtype,
                    numel: shape.iter().product(),
                    shape,
                    data_offsets,
                    nbytes: info.nbytes(),
                    shard: sharded.then(|| ck.shards()[t.shard()].name().to_owned()),
                    byte_order: (facts.byte_order != ByteOrder::Little)
                        .then_some(facts.byte_order.id()),
                    storage_offset: (facts.shared_storage.is_some() || facts.storage_offset != 0)
                        .then_some(facts.storage_offset),
                    strides: facts.strides,
                    storage: facts.shared_storage,
                    compression: facts.compressed.then_some("deflate"),
                    container: facts
                        .container
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                }
            })
            .collect();
        let parameter_count = tensors.iter().fold(0u64, |a, t| a.saturating_add(t.numel));
        let data_bytes = tensors.iter().fold(0u64, |a, t| a.saturating_add(t.nbytes));
        let shard_docs = || {
            ck.shards()
                .iter()
                .map(|s| ShardDoc {
                    path: path_string(s.file().path()),
                    name: s.name().to_owned(),
                    file_size: s.file().file_size(),
                    header_size: s.file().header().header_size(),
                    metadata: metadata_json(s.file()),
                })
                .collect()
        };
        let (file_size, header_size, shards) = match &ck.kind() {
            CheckpointKind::Single => {
                let f = &ck.shards()[0].file();
                (f.file_size(), Some(f.header().header_size()), None)
            }
            // A folder of files: their sizes together, each one a shard.
            CheckpointKind::Folder => (
                ck.shards()
                    .iter()
                    .fold(0u64, |a, s| a.saturating_add(s.file().file_size())),
                None,
                Some(shard_docs()),
            ),
            CheckpointKind::Sharded { index_bytes, .. } => (*index_bytes, None, Some(shard_docs())),
        };
        let metadata = metadata_of(ck);
        Self {
            path: path_string(ck.path()),
            format: ck.container().id(),
            kind: match ck.kind() {
                CheckpointKind::Single => "single",
                CheckpointKind::Folder => "folder",
                CheckpointKind::Sharded { .. } => "sharded",
            },
            file_size,
            header_size,
            metadata,
            tensor_count: tensors.len(),
            parameter_count,
            data_bytes,
            tensors,
            shards,
            warnings: ck.warnings().to_vec(),
            quantization: crate::quant::detect(ck).map(|q| QuantDoc::new(ck, &q)),
            pickle: pickle_doc(ck),
            gguf: ck
                .shards()
                .first()
                .and_then(|s| s.file().gguf())
                .map(|g| GgufDoc {
                    version: g.version,
                    alignment: g.alignment,
                    tensor_data_offset: g.tensor_data_offset,
                    metadata: g.metadata_json(),
                }),
            zero: (ck.container() == crate::format::ContainerKind::DEEPSPEED)
                .then(|| ck.shards().first().and_then(|s| s.file().file_facts()))
                .flatten()
                .and_then(|facts| facts.get("zero").cloned()),
            container: ck
                .shards()
                .first()
                .and_then(|s| s.file().file_facts())
                .map(|facts| {
                    let mut out = serde_json::Map::new();
                    out.insert(ck.container().id().to_owned(), facts.into());
                    out
                })
                .unwrap_or_default(),
        }
    }

    /// The human-readable form printed without `--json`: one line per tensor,
    /// names escaped for the terminal.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "path:        {}", self.path);
        let _ = writeln!(s, "format:      {}", self.format);
        if let Some(zero) = &self.zero {
            let _ = writeln!(
                s,
                "zero:        stage {}, {} ranks",
                zero["stage"], zero["world_size"]
            );
        }
        if let Some(h) = self.header_size {
            let _ = writeln!(
                s,
                "file size:   {} bytes (header {} bytes)",
                group_digits(self.file_size),
                group_digits(h)
            );
        } else {
            let shards = self.shards.as_ref().map_or(0, Vec::len);
            let total: u64 = self.shards.iter().flatten().map(|s| s.file_size).sum();
            let _ = writeln!(
                s,
                "shards:      {shards} files, {} bytes",
                group_digits(total)
            );
        }
        let _ = writeln!(
            s,
            "tensors:     {} ({} parameters, {} bytes of data)",
            group_digits(self.tensor_count as u64),
            group_digits(self.parameter_count),
            group_digits(self.data_bytes)
        );
        match &self.metadata {
            serde_json::Value::Object(m) if !m.is_empty() => {
                let _ = writeln!(s, "metadata:");
                for (k, v) in m {
                    let v = match v {
                        serde_json::Value::String(v) => v.clone(),
                        other => other.to_string(),
                    };
                    let _ = writeln!(s, "  {} = {}", display_name(k), display_name(&v));
                }
            }
            _ => {
                let _ = writeln!(s, "metadata:    (none)");
            }
        }
        if !self.tensors.is_empty() {
            let _ = writeln!(s);
        }
        for t in &self.tensors {
            let shape = t
                .shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(s, "{}  {}  [{}]", display_name(&t.name), t.dtype, shape);
            match t.data_offsets {
                Some([b, e]) => {
                    let _ = write!(s, "  {b}..{e}");
                }
                None if t.compression.is_some() => s.push_str("  (deflated)"),
                None => match t.container.get("chunks").and_then(|c| c.as_array()) {
                    // A distributed checkpoint's tensor cut across ranks.
                    Some(chunks) => {
                        let _ = write!(s, "  ({} chunks)", chunks.len());
                    }
                    None => s.push_str("  (decoded)"),
                },
            }
            if let Some(order) = t.byte_order {
                let _ = write!(s, "  {order}-endian");
            }
            if t.strides.is_some() {
                s.push_str("  strided");
            }
            if let Some(shard) = &t.shard {
                let _ = write!(s, "  {}", display_name(shard));
            }
            s.push('\n');
        }
        if let Some(p) = self
            .pickle
            .as_ref()
            .filter(|p| !p.unsafe_globals.is_empty())
        {
            let _ = writeln!(
                s,
                "unsafe: the pickle would import {} (not executed); its tensors are not read",
                display_name(&p.unsafe_globals.join(", "))
            );
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {}", display_name(&w.message));
        }
        if let Some(q) = &self.quantization {
            s.push('\n');
            s.push_str(&q.to_text());
        }
        s
    }
}

/// Runs `info` and returns its exit code (0, or 2 when the file cannot be
/// opened).
pub fn run(args: &InfoArgs, out: &mut Output) -> i32 {
    let ck = match Checkpoint::open(&args.file) {
        Ok(ck) => ck,
        Err(e) => return report_error(out, args.common.json, &e),
    };
    let doc = InfoDoc::new(&ck);
    if args.common.json {
        out.json(&doc);
    } else {
        out.text(&doc.to_text());
    }
    EXIT_OK
}
