//! A `torch.save` zip (PICKLE.md §1): `<root>/data.pkl`, the storages
//! `<root>/data/<key>` (looked up as entry names, byte for byte, never as
//! paths), `<root>/byteorder`. Read into the checkpoint model: a tensor's
//! placement is its storage entry (stored: a slice of the file, zero-copy;
//! deflated: a stream), its byte order, and its view (offset and strides),
//! checked against the storage's length. An unsafe pickle is reported with
//! its globals and nothing of it is built.

use std::collections::{BTreeSet, HashMap};

use super::objects::{self, ObjectError, TensorDesc};
use super::pickle;
use crate::format::TensorInfo;
use crate::format::stored::{ByteOrder, Encoding, Layout, Placement, Storage};
use crate::format::zip::{Archive, Member, ZipError};

/// `data.pkl` entries larger than this are refused (real ones are far
/// smaller: a pickle names tensors, it does not hold them).
pub(crate) const MAX_PICKLE_BYTES: u64 = 256 << 20;

/// Why a torch zip cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TorchError {
    /// The pickle names globals outside the allowlist: nothing of it is
    /// built, and no verb reads it.
    #[error(
        "the pickle would import {} (not executed); the file is not read",
        globals.join(", ")
    )]
    Unsafe {
        /// The globals outside the allowlist.
        globals: Vec<String>,
    },
    /// The archive or one of its entries cannot be read.
    #[error("{0}")]
    Zip(ZipError),
    /// No `<root>/data.pkl`, or more than one root.
    #[error("not a torch zip: {0}")]
    Layout(String),
    /// The pickle does not parse.
    #[error("{0}")]
    Pickle(pickle::PickleError),
    /// The object is not a checkpoint that can be read.
    #[error("{0}")]
    Object(ObjectError),
    /// A tensor names a storage with no entry.
    #[error("tensor {tensor:?} names storage {key:?}, which has no entry {entry:?}")]
    MissingStorage {
        /// The tensor.
        tensor: String,
        /// The storage key.
        key: String,
        /// The entry looked for.
        entry: String,
    },
    /// A storage entry is shorter than its tensors need, or a view reaches
    /// past its storage.
    #[error("tensor {tensor:?}: {message}")]
    ViewOutOfBounds {
        /// The tensor.
        tensor: String,
        /// What does not fit.
        message: String,
    },
}

impl TorchError {
    /// A stable kind for JSON output (PICKLE.md §8).
    pub fn kind(&self) -> &'static str {
        match self {
            TorchError::Unsafe { .. } => "UnsafePickle",
            TorchError::Zip(_) | TorchError::Layout(_) => "InvalidZip",
            TorchError::Pickle(e) => e.kind(),
            TorchError::Object(e) => e.kind(),
            TorchError::MissingStorage { .. } => "MissingStorage",
            TorchError::ViewOutOfBounds { .. } => "ViewOutOfBounds",
        }
    }
}

/// A torch zip read into the model.
#[derive(Debug)]
pub struct TorchZip {
    /// The root folder of its entries (`archive`, `pytorch_model`, …).
    pub root: String,
    /// Bytes of its `data.pkl`.
    pub pickle_bytes: u64,
    /// Every global its pickle names, sorted.
    pub globals: BTreeSet<String>,
    /// Those outside the allowlist: when any, nothing below is built.
    pub unsafe_globals: Vec<String>,
    /// The tensors, in the object's order.
    pub tensors: Vec<TensorInfo>,
    /// Where each one's bytes lie.
    pub placements: Vec<Placement>,
    /// The non-tensor leaves, path → JSON value.
    pub metadata: Vec<(String, serde_json::Value)>,
}

impl TorchZip {
    /// A file whose pickle names `unsafe_globals`: nothing of it is built.
    pub(super) fn unsafe_file(globals: BTreeSet<String>, unsafe_globals: Vec<String>) -> Self {
        TorchZip {
            root: String::new(),
            pickle_bytes: 0,
            globals,
            unsafe_globals,
            tensors: Vec::new(),
            placements: Vec::new(),
            metadata: Vec::new(),
        }
    }
}

/// Parses one pickle. A pickle that stops parsing after naming an unsafe
/// global is that unsafe file (`Ok(Err(..))`: what a scanner reports),
/// else the parse error.
pub(super) fn parse_scanned(bytes: &[u8]) -> Result<Result<pickle::Parsed, TorchZip>, TorchError> {
    match pickle::parse(bytes) {
        Ok(p) => Ok(Ok(p)),
        Err(f) => {
            let unsafe_globals = super::unsafe_globals(&f.globals);
            if unsafe_globals.is_empty() {
                Err(TorchError::Pickle(f.error))
            } else {
                Ok(Err(TorchZip::unsafe_file(f.globals, unsafe_globals)))
            }
        }
    }
}

/// The model's entries and placements of `tensors`, each over the storage
/// `storage_of` finds for it (one id a storage: tied weights share it),
/// checked: the storage holds the elements its persistent id declares, and
/// the view reaches none past them.
pub(super) fn placements(
    tensors: Vec<TensorDesc>,
    byte_order: ByteOrder,
    storage_of: impl Fn(&TensorDesc) -> Result<Storage, TorchError>,
) -> Result<(Vec<TensorInfo>, Vec<Placement>), TorchError> {
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut infos = Vec::with_capacity(tensors.len());
    let mut out = Vec::with_capacity(tensors.len());
    for t in tensors {
        let storage = storage_of(&t)?;
        let next = ids.len();
        let storage_id = *ids.entry(t.storage.clone()).or_insert(next);
        let element = u64::from(t.dtype.bits() / 8).max(1);
        let declared = t.storage_numel.saturating_mul(element);
        if declared > storage.len {
            return Err(TorchError::ViewOutOfBounds {
                tensor: t.name,
                message: format!(
                    "its storage {:?} declares {} elements ({declared} bytes) but holds {} bytes",
                    t.storage, t.storage_numel, storage.len
                ),
            });
        }
        let layout = Layout::Strided {
            offset: t.offset,
            strides: t.strides.clone(),
        };
        let placement = Placement::new(t.dtype, &t.shape, byte_order, layout, storage, storage_id)
            .map_err(|message| TorchError::ViewOutOfBounds {
                tensor: t.name.clone(),
                message,
            })?;
        let overflow = || TorchError::ViewOutOfBounds {
            tensor: t.name.clone(),
            message: format!("its shape {:?} overflows 64 bits", t.shape),
        };
        let nbytes = t.dtype.byte_len(&t.shape).ok_or_else(overflow)?;
        // Read in place, its bytes are where its view starts.
        let begin = placement
            .native_range(&t.shape, nbytes)
            .map_or(0, |r| r.start);
        let info = TensorInfo::new(t.name.clone(), t.dtype, t.shape.clone(), begin)
            .ok_or_else(overflow)?;
        infos.push(info);
        out.push(placement);
    }
    Ok((infos, out))
}

/// Reads the torch zip whose whole file is `bytes` and whose directory is
/// `archive`.
pub fn read(bytes: &[u8], archive: &Archive) -> Result<TorchZip, TorchError> {
    let members = archive.members();
    let pickles: Vec<&Member> = members
        .iter()
        .filter(|m| m.name == "data.pkl" || m.name.ends_with("/data.pkl"))
        .collect();
    let [pkl] = pickles.as_slice() else {
        return Err(TorchError::Layout(format!(
            "{} entries named */data.pkl",
            pickles.len()
        )));
    };
    let root = pkl.name.strip_suffix("data.pkl").unwrap_or("").to_owned();
    let by_name: HashMap<&str, &Member> = members.iter().map(|m| (m.name.as_str(), m)).collect();
    let small = |m: &Member, max: u64| -> Result<Vec<u8>, TorchError> {
        if m.size > max {
            return Err(TorchError::Layout(format!(
                "{:?} is {} bytes; at most {max} are read",
                m.name, m.size
            )));
        }
        archive.prefix(bytes, m, max).map_err(TorchError::Zip)
    };
    let byte_order = match by_name.get(format!("{root}byteorder").as_str()) {
        Some(m) => match small(m, 64)?.trim_ascii() {
            b"big" => ByteOrder::Big,
            b"little" => ByteOrder::Little,
            other => {
                return Err(TorchError::Layout(format!(
                    "byteorder says {:?}",
                    String::from_utf8_lossy(other)
                )));
            }
        },
        None => ByteOrder::Little,
    };
    let pickle_bytes = small(pkl, MAX_PICKLE_BYTES)?;
    let parsed = match parse_scanned(&pickle_bytes)? {
        Ok(p) => p,
        Err(unsafe_file) => return Ok(unsafe_file),
    };
    let unsafe_globals = super::unsafe_globals(&parsed.globals);
    let mut out = TorchZip {
        root: root.clone(),
        pickle_bytes: pickle_bytes.len() as u64,
        globals: parsed.globals,
        unsafe_globals,
        tensors: Vec::new(),
        placements: Vec::new(),
        metadata: Vec::new(),
    };
    if !out.unsafe_globals.is_empty() {
        return Ok(out);
    }
    let contents = objects::contents(&parsed.graph).map_err(TorchError::Object)?;
    out.metadata = contents.metadata;
    let (tensors, placements) = placements(contents.tensors, byte_order, |t| {
        let entry = format!("{root}data/{}", t.storage);
        let Some(m) = by_name.get(entry.as_str()) else {
            return Err(TorchError::MissingStorage {
                tensor: t.name.clone(),
                key: t.storage.clone(),
                entry,
            });
        };
        if m.stored {
            let storage = Storage {
                file: 0,
                file_range: m.data_start..m.data_start.saturating_add(m.size),
                skip: 0,
                len: m.size,
                encoding: Encoding::Plain,
            };
            if storage.file_range.end > bytes.len() as u64 {
                return Err(TorchError::ViewOutOfBounds {
                    tensor: t.name.clone(),
                    message: format!(
                        "its storage entry {entry:?} ends at byte {} of a {}-byte file",
                        storage.file_range.end,
                        bytes.len()
                    ),
                });
            }
            Ok(storage)
        } else {
            Ok(Storage {
                file: 0,
                file_range: m.data_start..m.data_start.saturating_add(m.compressed_size),
                skip: 0,
                len: m.size,
                encoding: Encoding::Deflated {
                    member: m.index,
                    declared_size: m.size,
                },
            })
        }
    })?;
    out.tensors = tensors;
    out.placements = placements;
    Ok(out)
}
