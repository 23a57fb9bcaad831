//! PyTorch Distributed Checkpoints (DISTRIBUTED.md §1-5): a folder of
//! per-rank `.distcp` files and the pickled `.metadata` that says which
//! bytes of which file hold each chunk of each global tensor. `.metadata`
//! is read by the pickle machine (never run) against PICKLE.md's
//! allowlist and DCP's record classes; each chunk is a `torch.save` zip
//! nested in a `.distcp` file, read in place; a tensor of one chunk is a
//! slice of its file, a tensor of many is assembled block by block
//! ([`crate::format::blocks`]).

pub(crate) mod hf;
pub mod metadata;

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use self::metadata::Entry;
use crate::format::blocks::{self, Block, Rules};
use crate::format::containers::{Container, ContainerKind, Opening, Probe};
use crate::format::decode::{Data, Decode, DecodeError, Opened, Sink, Tensor};
use crate::format::opened::{Siblings, into_file, refusal, remote_unsupported};
use crate::format::pytorch::{PickleReport, archive, pickle};
use crate::format::{LoadError, StoredFile, zip};
use crate::jobs::CancelToken;

/// The globals `.metadata` may name beyond PICKLE.md's allowlist: DCP's
/// records (what torch 2.15 writes), each only the fields of its state.
pub(crate) const ALLOWED: &[&str] = &[
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    "pathlib.PosixPath",
    "pathlib.PurePosixPath",
    "pathlib._local.PosixPath",
];

/// The name of a DCP checkpoint's index.
pub const METADATA: &str = ".metadata";

/// DCP in the table of containers: a file named `.metadata` holding a
/// pickle, or a folder holding one.
pub(crate) const CONTAINER: Container = Container {
    id: "dcp",
    label: "PyTorch Distributed Checkpoint",
    has_data_section: false,
    separator: '.',
    claims: |p: &Probe<'_>| {
        p.extension == Some("metadata")
            && p.bytes.first() == Some(&crate::format::pytorch::bare::PROTO)
    },
    open,
    refuse: None,
    expand: None,
    folder: Some(|dir: &Path| {
        let index = dir.join(METADATA);
        index.is_file().then_some(index)
    }),
};

/// The globals of `globals` outside PICKLE.md's allowlist and DCP's.
fn unsafe_globals(globals: &BTreeSet<String>) -> Vec<String> {
    crate::format::pytorch::unsafe_globals_beyond(globals, ALLOWED)
}

fn open(o: Opening) -> Result<StoredFile, LoadError> {
    let Opening { path, source, .. } = o;
    if source.remote().is_some() {
        return Err(remote_unsupported(&path, CONTAINER.label));
    }
    let bad = |kind: &'static str, message: String, tensor: Option<&str>| {
        refusal(&path, kind, message, tensor)
    };
    let parsed = match pickle::parse(source.bytes()) {
        Ok(p) => p,
        Err(f) => {
            let unsafe_globals = unsafe_globals(&f.globals);
            if unsafe_globals.is_empty() {
                return Err(bad(
                    "InvalidMetadata",
                    format!("{METADATA} is not a pickle DCP writes: {}", f.error),
                    None,
                ));
            }
            return unsafe_file(path, source, f.globals, unsafe_globals);
        }
    };
    let mut report = PickleReport {
        globals: parsed.globals.iter().cloned().collect(),
        unsafe_globals: unsafe_globals(&parsed.globals),
        leaves: Vec::new(),
    };
    if !report.unsafe_globals.is_empty() {
        return unsafe_file(path, source, parsed.globals, report.unsafe_globals);
    }
    let meta = metadata::read(&parsed.graph).map_err(|m| {
        let kind = if m.starts_with("Unsupported") {
            "Unsupported"
        } else {
            "InvalidMetadata"
        };
        bad(kind, m, None)
    })?;
    // Every file a storage entry names, checked to be a plain name in
    // the folder, opened once, in the order first named.
    let mut names: Vec<String> = Vec::new();
    for s in meta.storage.values() {
        let name = &s.relative_path;
        if !is_plain_name(name) {
            return Err(bad(
                "PathOutsideFolder",
                format!(
                    "a storage entry names {name:?}, which is not a file of the checkpoint's folder"
                ),
                None,
            ));
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names.sort();
    let siblings = Siblings::new(&path, false);
    let others = siblings.take(&names)?;
    let file_of = |name: &str| names.iter().position(|n| n == name).map(|i| i + 1);
    // The bytes of a storage entry, checked to lie in its file.
    let span =
        |fqn: &str, s: &metadata::StorageInfo| -> Result<(usize, Range<u64>, &[u8]), LoadError> {
            let k = file_of(&s.relative_path).unwrap_or(0);
            let bytes = others
                .get(k.wrapping_sub(1))
                .map_or(&[][..], |(_, src)| src.bytes());
            let end = s
                .offset
                .checked_add(s.length)
                .filter(|&e| e <= bytes.len() as u64)
                .ok_or_else(|| {
                    bad(
                        "StoragePastEnd",
                        format!(
                            "the storage of {fqn:?} is bytes {}..+{} of {:?}, which has {} bytes",
                            s.offset,
                            s.length,
                            s.relative_path,
                            bytes.len()
                        ),
                        Some(fqn),
                    )
                })?;
            let slice = &bytes[s.offset as usize..end as usize];
            Ok((k, s.offset..end, slice))
        };
    let mut opened = Opened::default();
    let mut globals: BTreeSet<String> = parsed.globals.clone();
    for (key, entry) in &meta.entries {
        match entry {
            Entry::Bytes => {
                let Some(s) = meta.storage.get(&(key.clone(), None)) else {
                    return Err(bad(
                        "MissingStorage",
                        format!("the value {key:?} has no storage entry"),
                        None,
                    ));
                };
                let (_, _, slice) = span(key, s)?;
                match nested_value(slice) {
                    Ok((value, g)) => {
                        globals.extend(g);
                        opened.metadata.push((key.clone(), value));
                    }
                    Err(Nested::Unsafe(g, u)) => {
                        globals.extend(g);
                        let mut all_unsafe = unsafe_globals(&globals);
                        all_unsafe.extend(u);
                        all_unsafe.sort();
                        all_unsafe.dedup();
                        return unsafe_file(path, source, globals, all_unsafe);
                    }
                    Err(Nested::Invalid(m)) => {
                        return Err(bad(
                            "InvalidStorage",
                            format!("the value {key:?}: {m}"),
                            None,
                        ));
                    }
                }
            }
            Entry::Tensor {
                dtype,
                shape,
                chunks,
            } => {
                let tensor = tensor(key, *dtype, shape, chunks, &meta, &span, &mut globals)
                    .map_err(|e| match e {
                        ChunkError::Load(e) => e,
                        ChunkError::Rule(kind, m) => {
                            bad(kind, format!("tensor {key:?}: {m}"), Some(key))
                        }
                    })?;
                opened.tensors.push(tensor);
            }
        }
    }
    report.globals = globals.into_iter().collect();
    opened.pickle = Some(report);
    opened
        .facts
        .insert("files".into(), serde_json::Value::from(names.clone()));
    opened.header_len = source.len();
    into_file(path, source, ContainerKind::of(&CONTAINER), opened, others)
}

/// A `.metadata`, or a value of it, that names a global outside the
/// allowlists: the file lists no tensor, and no verb but `info` reads it.
fn unsafe_file(
    path: PathBuf,
    source: crate::source::Source,
    globals: BTreeSet<String>,
    unsafe_globals: Vec<String>,
) -> Result<StoredFile, LoadError> {
    let opened = Opened {
        pickle: Some(PickleReport {
            globals: globals.into_iter().collect(),
            unsafe_globals,
            leaves: Vec::new(),
        }),
        header_len: source.len(),
        ..Opened::default()
    };
    into_file(
        path,
        source,
        ContainerKind::of(&CONTAINER),
        opened,
        Vec::new(),
    )
}

/// A name that is one file of the folder: no separator, not `.` or `..`,
/// not empty, no NUL.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !(name.len() >= 2 && name.as_bytes()[1] == b':')
}

/// A chunk of a global tensor: where it lies, and its file and bytes.
pub(super) type ChunkBlock = Block<(usize, Range<u64>)>;

/// Finds a storage entry's bytes: its file, range, and the bytes.
type Span<'s, 'a> =
    &'s dyn Fn(&str, &metadata::StorageInfo) -> Result<(usize, Range<u64>, &'a [u8]), LoadError>;

enum ChunkError {
    Load(LoadError),
    Rule(&'static str, String),
}

impl From<LoadError> for ChunkError {
    fn from(e: LoadError) -> Self {
        Self::Load(e)
    }
}

/// The global tensor `key`: its chunks checked to tile its shape, each
/// found in its storage entry's nested `torch.save` zip.
#[allow(clippy::too_many_arguments)]
fn tensor(
    key: &str,
    dtype: crate::dtype::Dtype,
    shape: &[u64],
    chunks: &[(Vec<u64>, Vec<u64>)],
    meta: &metadata::Metadata,
    span: Span<'_, '_>,
    globals: &mut BTreeSet<String>,
) -> Result<Tensor, ChunkError> {
    let rule = |m: String| ChunkError::Rule("InvalidLayout", m);
    if dtype.bits() < 8 {
        return Err(rule(format!(
            "its dtype {} is not one torch stores",
            dtype.name()
        )));
    }
    let mut blocks_of: Vec<ChunkBlock> = Vec::with_capacity(chunks.len());
    for (offsets, sizes) in chunks {
        if offsets.len() != shape.len() || sizes.len() != shape.len() {
            return Err(rule(format!(
                "a chunk at {offsets:?} of sizes {sizes:?} does not have the tensor's {} dimensions",
                shape.len()
            )));
        }
        blocks_of.push(Block {
            origin: offsets.clone(),
            shape: sizes.clone(),
            piece: (0, 0..0),
        });
    }
    // Inside, apart and covering: before any byte is read.
    blocks::check(
        shape,
        &blocks_of,
        Rules {
            holes: false,
            overhang: false,
        },
    )
    .map_err(rule)?;
    let mut files = Vec::with_capacity(chunks.len());
    for b in &mut blocks_of {
        let Some(s) = meta.storage.get(&(key.to_owned(), Some(b.origin.clone()))) else {
            return Err(ChunkError::Rule(
                "MissingStorage",
                format!("the chunk at {:?} has no storage entry", b.origin),
            ));
        };
        let (k, range, slice) = span(key, s)?;
        let inner = chunk_range(slice, dtype, &b.shape, globals).map_err(|m| {
            ChunkError::Rule(
                "InvalidStorage",
                format!("the chunk at {:?}: {m}", b.origin),
            )
        })?;
        b.piece = (k, range.start + inner.start..range.start + inner.end);
        files.push(s.relative_path.clone());
    }
    Ok(global_tensor(key, dtype, shape.to_vec(), blocks_of, &files))
}

/// A global tensor whose chunks were checked to tile its shape: one chunk
/// is a slice of its file, read in place; several are assembled. `files`
/// names each chunk's file, for `info`'s `chunks`.
pub(super) fn global_tensor(
    name: &str,
    dtype: crate::dtype::Dtype,
    shape: Vec<u64>,
    mut blocks_of: Vec<ChunkBlock>,
    files: &[String],
) -> Tensor {
    let layout = blocks_of
        .iter()
        .zip(files)
        .map(|(b, file)| serde_json::json!({"offsets": b.origin, "sizes": b.shape, "file": file}))
        .collect();
    let data = if blocks_of.len() == 1 {
        let (file, range) = blocks_of.swap_remove(0).piece;
        Data::Plain {
            file,
            range,
            big_endian: false,
        }
    } else {
        Data::Decoded(Arc::new(Chunked {
            shape: shape.clone(),
            element: (dtype.bits() / 8) as usize,
            blocks: blocks_of,
        }))
    };
    Tensor {
        name: name.to_owned(),
        dtype,
        shape,
        data,
        facts: vec![("chunks", serde_json::Value::Array(layout))],
    }
}

/// Where, in a chunk's nested `torch.save` zip, its one tensor's bytes
/// are: checked to be the chunk's dtype and shape, C order, in place.
fn chunk_range(
    slice: &[u8],
    dtype: crate::dtype::Dtype,
    sizes: &[u64],
    globals: &mut BTreeSet<String>,
) -> Result<Range<u64>, String> {
    let archive = zip::open(slice).map_err(|e| format!("not a torch.save zip: {e}"))?;
    let read = archive::read(slice, &archive).map_err(|e| format!("its torch.save zip: {e}"))?;
    globals.extend(read.globals.iter().cloned());
    if !read.unsafe_globals.is_empty() {
        return Err(format!(
            "its pickle would import {} (not executed)",
            read.unsafe_globals.join(", ")
        ));
    }
    let ([info], [placement]) = (read.tensors.as_slice(), read.placements.as_slice()) else {
        return Err(format!(
            "its zip holds {} tensors, not one",
            read.tensors.len()
        ));
    };
    if info.dtype() != dtype || info.shape() != sizes {
        return Err(format!(
            "it stores {} {:?}, where the metadata says {} {:?}",
            info.dtype().name(),
            info.shape(),
            dtype.name(),
            sizes
        ));
    }
    placement
        .native_range(sizes, info.nbytes())
        .ok_or_else(|| "its tensor is not stored in C order, little-endian".to_owned())
}

/// Why a bytes entry's value was not read.
enum Nested {
    /// Its pickle names these globals (all named, those unsafe).
    Unsafe(BTreeSet<String>, Vec<String>),
    /// It is not a `torch.save` of a value.
    Invalid(String),
}

/// A bytes entry's value (a `torch.save` zip of any value), as JSON, and
/// the globals its pickle names.
fn nested_value(slice: &[u8]) -> Result<(serde_json::Value, BTreeSet<String>), Nested> {
    let archive =
        zip::open(slice).map_err(|e| Nested::Invalid(format!("not a torch.save zip: {e}")))?;
    let pkl = archive
        .members()
        .iter()
        .find(|m| m.name == "data.pkl" || m.name.ends_with("/data.pkl"))
        .ok_or_else(|| Nested::Invalid("its zip has no data.pkl".into()))?;
    if pkl.size > archive::MAX_PICKLE_BYTES {
        return Err(Nested::Invalid(format!(
            "its data.pkl declares {} bytes",
            pkl.size
        )));
    }
    let bytes = archive
        .prefix(slice, pkl, archive::MAX_PICKLE_BYTES)
        .map_err(|e| Nested::Invalid(e.to_string()))?;
    match pickle::parse(&bytes) {
        Ok(p) => {
            let u = unsafe_globals(&p.globals);
            if !u.is_empty() {
                return Err(Nested::Unsafe(p.globals, u));
            }
            Ok((metadata::to_json(&p.graph, p.graph.root, 0), p.globals))
        }
        Err(f) => {
            let u = unsafe_globals(&f.globals);
            if u.is_empty() {
                Err(Nested::Invalid(format!("its pickle: {}", f.error)))
            } else {
                Err(Nested::Unsafe(f.globals, u))
            }
        }
    }
}

/// A tensor of several chunks: each a C-order range of a `.distcp` file.
#[derive(Debug)]
pub struct Chunked {
    pub(super) shape: Vec<u64>,
    pub(super) element: usize,
    pub(super) blocks: Vec<ChunkBlock>,
}

impl Decode for Chunked {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        self.blocks.iter().map(|b| b.piece.clone()).collect()
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let fill = vec![0u8; self.element];
        blocks::assemble(
            &self.shape,
            self.element,
            &self.blocks,
            &fill,
            &|(k, range): &(usize, Range<u64>), out: &mut Vec<u8>| {
                out.extend_from_slice(crate::format::decode::file_range(files, *k, range)?);
                Ok(())
            },
            cancel,
            sink,
        )
    }
}
