//! TensorFlow's TensorBundle: the checkpoints of `tf.train.Checkpoint`,
//! `tf.compat.v1.train.Saver` and a SavedModel's `variables/`, opened by
//! their `.index` (a LevelDB-style table, read and checked here: no
//! TensorFlow code) beside data shards `PREFIX.data-0000i-of-0000N`.
//!
//! [`open`] reads the table only (block CRCs, keys, every entry's shard,
//! size and extent against its data file's size); tensor bytes are read
//! later by the decoders it hands back ([`Whole`], [`Sliced`]), which
//! check each tensor's CRC-32C. Tensors are the keys as stored; the
//! header (the empty key), `DT_STRING` entries (listed in the metadata)
//! and the slices of partitioned tensors (keys starting with `\0`) are not
//! tensors. A partitioned tensor is assembled from its slices.

mod container;
mod crc;
mod decoder;
mod error;
mod proto;
mod slices;
mod table;
pub mod wire;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use crate::dtype::Dtype;
use crate::format::blocks::{self, Block, Rules};
use crate::format::decode::{Data, Opened, Tensor};
pub(crate) use container::CONTAINER;
pub use decoder::{Chunk, Sliced, Whole};
pub use error::TensorflowError;
use error::show_key;

/// The table magic: the `.index`'s last 8 bytes, little-endian.
pub const MAGIC: u64 = table::MAGIC;

/// Shards a bundle may have at most (the data files' names pad the count
/// to five digits).
pub const MAX_SHARDS: u64 = 100_000;

/// `DT_STRING`.
const DT_STRING: i32 = 7;

/// True when `bytes` can be a TensorBundle's `.index`: at least a footer
/// long and ending in the table magic.
pub fn is_index(bytes: &[u8]) -> bool {
    bytes.len() >= table::FOOTER_LEN && bytes.ends_with(&MAGIC.to_le_bytes())
}

/// The name of data shard `i` of `n` beside the index `PREFIX.index`.
pub fn data_file_name(prefix: &str, i: u32, n: u32) -> String {
    format!("{prefix}.data-{i:05}-of-{n:05}")
}

/// The safetensors dtype of a `DataType` number, or the name of the type
/// that is refused.
fn dtype(n: i32) -> Result<Dtype, &'static str> {
    Ok(match n {
        1 => Dtype::F32,
        2 => Dtype::F64,
        3 => Dtype::I32,
        4 => Dtype::U8,
        5 => Dtype::I16,
        6 => Dtype::I8,
        8 => Dtype::C64,
        9 => Dtype::I64,
        10 => Dtype::Bool,
        14 => Dtype::BF16,
        17 => Dtype::U16,
        19 => Dtype::F16,
        22 => Dtype::U32,
        23 => Dtype::U64,
        0 => return Err("DT_INVALID"),
        7 => return Err("DT_STRING"),
        11 => return Err("DT_QINT8"),
        12 => return Err("DT_QUINT8"),
        13 => return Err("DT_QINT32"),
        15 => return Err("DT_QINT16"),
        16 => return Err("DT_QUINT16"),
        18 => return Err("DT_COMPLEX128"),
        20 => return Err("DT_RESOURCE"),
        21 => return Err("DT_VARIANT"),
        _ => return Err("unknown or unsupported"),
    })
}

/// What [`open`] keeps at hand while checking entries.
struct Bundle<'a> {
    prefix: &'a str,
    num_shards: u32,
    data_size: &'a dyn Fn(&str) -> std::io::Result<u64>,
    sizes: HashMap<u32, u64>,
}

impl Bundle<'_> {
    /// The size of shard `shard`'s data file, asked once.
    fn shard_size(&mut self, shard: u32) -> Result<u64, TensorflowError> {
        if let Some(&s) = self.sizes.get(&shard) {
            return Ok(s);
        }
        let file = data_file_name(self.prefix, shard, self.num_shards);
        let size = (self.data_size)(&file).map_err(|source| TensorflowError::DataFile {
            file,
            shard,
            source,
        })?;
        self.sizes.insert(shard, size);
        Ok(size)
    }

    /// Checks an entry's shard, offset and size (against `expected` bytes
    /// when given, and its data file's size) and says where its bytes are.
    fn chunk(
        &mut self,
        key: &str,
        e: &proto::Entry,
        expected: Option<u64>,
    ) -> Result<Chunk, TensorflowError> {
        let shard = u32::try_from(e.shard_id)
            .ok()
            .filter(|&s| s < self.num_shards)
            .ok_or_else(|| TensorflowError::ShardOutOfRange {
                key: key.to_owned(),
                shard: e.shard_id.into(),
                num_shards: self.num_shards,
            })?;
        let size_err = |rule: String| TensorflowError::SizeMismatch {
            key: key.to_owned(),
            rule,
        };
        let (Ok(offset), Ok(size)) = (u64::try_from(e.offset), u64::try_from(e.size)) else {
            return Err(size_err(format!(
                "offset {} and size {} must not be negative",
                e.offset, e.size
            )));
        };
        if let Some(n) = expected
            && n != size
        {
            return Err(size_err(format!(
                "its size is {size} bytes, but its dtype and shape need {n}"
            )));
        }
        let file_size = self.shard_size(shard)?;
        let end = offset.checked_add(size);
        if end.is_none_or(|end| end > file_size) {
            return Err(TensorflowError::DataOutsideFile {
                key: key.to_owned(),
                file: data_file_name(self.prefix, shard, self.num_shards),
                offset,
                end: offset.saturating_add(size),
                file_size,
            });
        }
        Ok(Chunk {
            key: key.to_owned(),
            shard,
            offset,
            size,
            crc32c: e.crc32c,
        })
    }
}

/// An entry's shape as sizes, refusing an unknown rank or dimension.
fn shape(key: &str, e: &proto::Entry) -> Result<Vec<u64>, TensorflowError> {
    let bad = |rule: String| TensorflowError::BadShape {
        key: key.to_owned(),
        rule,
    };
    if e.unknown_rank {
        return Err(bad("its shape has an unknown rank".to_owned()));
    }
    e.dims
        .iter()
        .map(|&d| {
            u64::try_from(d)
                .map_err(|_| bad(format!("its shape {:?} has a negative dimension", e.dims)))
        })
        .collect()
}

/// Opens a TensorBundle by its `.index` bytes; `prefix_name` is the
/// index's file name less `.index` (`ckpt-1`, `variables`), and
/// `data_size` gives a data file's size by its name (asked once per shard
/// that holds an entry). No tensor data is read.
pub fn open(
    index: &[u8],
    prefix_name: &str,
    data_size: &dyn Fn(&str) -> std::io::Result<u64>,
) -> Result<Opened, TensorflowError> {
    let entries = table::entries(index)?;
    let Some(first) = entries.first().filter(|e| e.key.is_empty()) else {
        return Err(TensorflowError::MissingHeader);
    };
    let header = proto::header(first.value).map_err(|e| TensorflowError::BadProto {
        key: String::new(),
        message: "BundleHeaderProto",
        rule: e.to_string(),
    })?;
    match header.endianness {
        0 => {}
        1 => {
            return Err(TensorflowError::Endianness {
                value: 1,
                name: "BIG",
            });
        }
        v => {
            return Err(TensorflowError::Endianness {
                value: v,
                name: "unknown",
            });
        }
    }
    // TensorBundle's reader is version 1 and accepts producers from 0.
    if header.producer < 0 || header.min_consumer > 1 || header.bad_consumers.contains(&1) {
        return Err(TensorflowError::UnsupportedVersion {
            producer: header.producer,
            min_consumer: header.min_consumer,
        });
    }
    let num_shards = u32::try_from(header.num_shards)
        .ok()
        .filter(|&n| u64::from(n) <= MAX_SHARDS)
        .ok_or(TensorflowError::BadShardCount {
            num_shards: header.num_shards.into(),
            limit: MAX_SHARDS,
        })?;
    let mut parsed = Vec::with_capacity(entries.len().saturating_sub(1));
    for t in &entries[1..] {
        let e = proto::entry(t.value).map_err(|e| TensorflowError::BadProto {
            key: show_key(&t.key),
            message: "BundleEntryProto",
            rule: e.to_string(),
        })?;
        parsed.push((t, e));
    }
    let mut bundle = Bundle {
        prefix: prefix_name,
        num_shards,
        data_size,
        sizes: HashMap::new(),
    };
    let mut opened = Opened {
        files: (0..num_shards)
            .map(|i| data_file_name(prefix_name, i, num_shards))
            .collect(),
        header_len: index.len() as u64,
        ..Opened::default()
    };
    for (t, e) in &parsed {
        if t.key.first() == Some(&0) {
            // A slice: checked here as any entry, and against its tensor
            // when that tensor is read.
            if e.slices.is_empty() {
                bundle.chunk(&show_key(&t.key), e, None)?;
            }
            continue;
        }
        let Ok(name) = std::str::from_utf8(&t.key) else {
            return Err(TensorflowError::KeyNotUtf8 {
                key: show_key(&t.key),
                at: t.at,
            });
        };
        if e.dtype == DT_STRING {
            let description = string_entry(&mut bundle, name, e)?;
            opened.metadata.push((name.to_owned(), json!(description)));
            continue;
        }
        let dt = dtype(e.dtype).map_err(|what| TensorflowError::UnsupportedDtype {
            key: name.to_owned(),
            dtype: e.dtype,
            name: what,
        })?;
        let dims = shape(name, e)?;
        let nbytes = dt
            .byte_len(&dims)
            .ok_or_else(|| TensorflowError::BadShape {
                key: name.to_owned(),
                rule: format!("its shape {dims:?} overflows 64 bits in bytes"),
            })?;
        let tensor = if e.slices.is_empty() {
            let chunk = bundle.chunk(name, e, Some(nbytes))?;
            let facts = vec![
                ("shard", json!(chunk.shard)),
                ("offset", json!(chunk.offset)),
                ("size", json!(chunk.size)),
            ];
            Tensor {
                name: name.to_owned(),
                dtype: dt,
                shape: dims,
                data: Data::Decoded(Arc::new(Whole { chunk })),
                facts,
            }
        } else {
            let sliced = assemble_plan(&mut bundle, &parsed, name, dt, &dims, nbytes, e)?;
            let facts = vec![("slices", json!(sliced.blocks.len()))];
            Tensor {
                name: name.to_owned(),
                dtype: dt,
                shape: dims,
                data: Data::Decoded(Arc::new(sliced)),
                facts,
            }
        };
        opened.tensors.push(tensor);
    }
    opened
        .facts
        .insert("num_shards".to_owned(), json!(num_shards));
    let version = json!({"producer": header.producer, "min_consumer": header.min_consumer});
    opened.facts.insert("version".to_owned(), version.clone());
    opened.metadata.push(("bundle_version".to_owned(), version));
    Ok(opened)
}

/// Checks a `DT_STRING` entry and says what it holds, for the metadata.
fn string_entry(
    bundle: &mut Bundle<'_>,
    name: &str,
    e: &proto::Entry,
) -> Result<String, TensorflowError> {
    let dims = shape(name, e)?;
    if !e.slices.is_empty() {
        return Ok(format!(
            "DT_STRING tensor of shape {dims:?}, partitioned in {} slices",
            e.slices.len()
        ));
    }
    let chunk = bundle.chunk(name, e, None)?;
    // Each element takes at least its one-byte length.
    let numel = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    if numel.is_none_or(|n| n > chunk.size) {
        return Err(TensorflowError::SizeMismatch {
            key: name.to_owned(),
            rule: format!(
                "a DT_STRING tensor of shape {dims:?} cannot fit in {} bytes",
                chunk.size
            ),
        });
    }
    Ok(format!(
        "DT_STRING tensor of shape {dims:?}, {} bytes at offset {} of shard {}",
        chunk.size, chunk.offset, chunk.shard
    ))
}

/// The slices of the partitioned tensor `name` (entry `e`), found and
/// checked: each slice inside the shape, its entry present with the
/// tensor's dtype and the slice's shape and size, and the slices tiling
/// the shape exactly.
fn assemble_plan(
    bundle: &mut Bundle<'_>,
    parsed: &[(&table::Entry<'_>, proto::Entry)],
    name: &str,
    dt: Dtype,
    dims: &[u64],
    nbytes: u64,
    e: &proto::Entry,
) -> Result<Sliced, TensorflowError> {
    let bad = |rule: String| TensorflowError::BadSlice {
        key: name.to_owned(),
        rule,
    };
    if dims.is_empty() {
        return Err(bad("a scalar cannot be partitioned".to_owned()));
    }
    let mut out = Vec::with_capacity(e.slices.len());
    for (i, extents) in e.slices.iter().enumerate() {
        if extents.len() != dims.len() {
            return Err(bad(format!(
                "slice {i} has {} extents, the tensor {} dimensions",
                extents.len(),
                dims.len()
            )));
        }
        let mut origin = Vec::with_capacity(dims.len());
        let mut extent = Vec::with_capacity(dims.len());
        let mut full = true;
        for (x, &d) in extents.iter().zip(dims) {
            match x.length {
                None | Some(-1) => {
                    origin.push(0);
                    extent.push(d);
                }
                Some(l) => {
                    let (Ok(s), Ok(l)) = (u64::try_from(x.start), u64::try_from(l)) else {
                        return Err(bad(format!(
                            "slice {i} has a negative start or length: {extents:?}"
                        )));
                    };
                    if s.checked_add(l).is_none_or(|end| end > d) {
                        return Err(bad(format!(
                            "slice {i} ({}) is outside the shape {dims:?}",
                            describe(extents)
                        )));
                    }
                    full = false;
                    origin.push(s);
                    extent.push(l);
                }
            }
        }
        let chunk = if full {
            // TensorFlow reads a whole-tensor "slice" from the entry itself.
            bundle.chunk(name, e, Some(nbytes))?
        } else {
            let key = slices::slice_key(name.as_bytes(), extents);
            let Ok(at) = parsed.binary_search_by(|(t, _)| t.key.as_slice().cmp(&key)) else {
                return Err(TensorflowError::SliceMissing {
                    key: name.to_owned(),
                    slice: describe(extents),
                    slice_key: show_key(&key),
                });
            };
            let s = &parsed[at].1;
            let want: Vec<i64> = extent.iter().map(|&x| x as i64).collect();
            if s.dtype != e.dtype || s.dims != want || !s.slices.is_empty() {
                return Err(bad(format!(
                    "the entry of slice {i} ({}) has dtype {} and shape {:?}, not dtype {} and shape {want:?}",
                    describe(extents),
                    s.dtype,
                    s.dims,
                    e.dtype
                )));
            }
            let size = dt.byte_len(&extent).unwrap_or(u64::MAX);
            bundle.chunk(&show_key(&key), s, Some(size))?
        };
        out.push(Block {
            origin,
            shape: extent,
            piece: chunk,
        });
    }
    blocks::check(
        dims,
        &out,
        Rules {
            holes: false,
            overhang: false,
        },
    )
    .map_err(|rule| bad(format!("its slices do not tile its shape: {rule}")))?;
    Ok(Sliced {
        shape: dims.to_vec(),
        element: (dt.bits() / 8) as usize,
        blocks: out,
    })
}

/// A slice as TensorFlow writes it: `start,length` per dimension, `-` for
/// a whole one, joined by `:`.
fn describe(extents: &[proto::Extent]) -> String {
    extents
        .iter()
        .map(|x| match x.length {
            None | Some(-1) => "-".to_owned(),
            Some(l) => format!("{},{l}", x.start),
        })
        .collect::<Vec<_>>()
        .join(":")
}
