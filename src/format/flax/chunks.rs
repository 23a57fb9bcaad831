//! Flax's chunked arrays: an array over `MAX_CHUNK_SIZE` bytes is written
//! as a map `{"__msgpack_chunked_array__": true, "shape": {"0": d0, ...},
//! "chunks": {"0": a0, "1": a1, ...}}` of 1-D ndarray chunks, read back as
//! `np.concatenate` of the chunks in index order reshaped to the shape.
//! The tensor's bytes are the chunks' bytes one after another, which
//! [`ChunksDecoder`] streams straight from the file.

use std::ops::Range;
use std::sync::Arc;

use super::FlaxError;
use super::ext;
use super::msgpack::Value;
use crate::format::decode::{Data, Decode, DecodeError, Sink, Tensor};
use crate::jobs::CancelToken;

/// The key that marks a chunked array.
pub const MARKER: &[u8] = b"__msgpack_chunked_array__";

/// Bytes handed to the sink at once.
const PIECE: usize = 1 << 20;

/// True when the map's keys include the marker (Flax checks the key's
/// presence only, whatever its value).
pub fn is_chunked(bytes: &[u8], pairs: &[(Value, Value)]) -> bool {
    pairs
        .iter()
        .any(|(k, _)| matches!(k, Value::Str(r) if bytes.get(r.clone()) == Some(MARKER)))
}

/// The values of a map keyed `"0"`, `"1"`, ... `"n-1"` (Flax's
/// `_dict_to_tuple`: `n` is the map's length; every index must be there,
/// once, as a string in plain decimal), in index order.
fn numbered<'v>(
    bytes: &[u8],
    v: &'v Value,
    what: &str,
    bad: &dyn Fn(String) -> FlaxError,
) -> Result<Vec<&'v Value>, FlaxError> {
    let Value::Map(pairs) = v else {
        return Err(bad(format!("its {what} is {}, not a map", v.type_name())));
    };
    let mut slots: Vec<Option<&Value>> = vec![None; pairs.len()];
    for (k, v) in pairs {
        let index = match k {
            Value::Str(r) => bytes
                .get(r.clone())
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<usize>().ok().filter(|i| i.to_string() == s)),
            _ => None,
        };
        // Keys that are no index of 0..n leave an index missing.
        if let Some(slot) = index.and_then(|i| slots.get_mut(i)) {
            if slot.is_some() {
                return Err(bad(format!("its {what} repeat an index")));
            }
            *slot = Some(v);
        }
    }
    slots
        .iter()
        .enumerate()
        .map(|(i, s)| s.ok_or_else(|| bad(format!("its {what} have no \"{i}\""))))
        .collect()
}

/// The one tensor a chunked-array map named `name` stands for, and the
/// keys it ignores (as Flax does) as warnings.
pub fn tensor(
    bytes: &[u8],
    name: &str,
    pairs: &[(Value, Value)],
    budget: &mut u64,
) -> Result<(Tensor, Vec<String>), FlaxError> {
    let bad = |message: String| FlaxError::BadChunkedArray {
        name: name.to_owned(),
        message,
    };
    let mut shape = None;
    let mut chunks = None;
    let mut warnings = Vec::new();
    for (k, v) in pairs {
        let key = match k {
            Value::Str(r) => bytes.get(r.clone()),
            _ => None,
        };
        let slot = match key {
            Some(b"shape") => &mut shape,
            Some(b"chunks") => &mut chunks,
            Some(MARKER) => continue,
            _ => {
                warnings.push(format!(
                    "chunked array {name:?}: a key other than shape and chunks is ignored"
                ));
                continue;
            }
        };
        if slot.replace(v).is_some() {
            return Err(bad("a key is repeated".to_owned()));
        }
    }
    let shape = shape.ok_or_else(|| bad("it has no \"shape\"".to_owned()))?;
    let chunks = chunks.ok_or_else(|| bad("it has no \"chunks\"".to_owned()))?;
    let dims = numbered(bytes, shape, "shape's keys", &bad)?;
    let shape = ext::dims_of(&dims).map_err(bad)?;
    let parts = numbered(bytes, chunks, "chunks' keys", &bad)?;
    if parts.is_empty() {
        return Err(bad("it has no chunks".to_owned()));
    }
    let mut dtype = None;
    let mut ranges: Vec<Range<u64>> = Vec::with_capacity(parts.len());
    let mut elements: u64 = 0;
    for (i, part) in parts.iter().enumerate() {
        let chunk_name = format!("{name}/chunks/{i}");
        let Value::Ext {
            code: ext::NDARRAY,
            data,
        } = part
        else {
            return Err(bad(format!(
                "chunk {i} is {}, not an ndarray",
                part.type_name()
            )));
        };
        let a = ext::ndarray(bytes, data, &chunk_name, budget)?;
        let [len] = a.shape.as_slice() else {
            return Err(bad(format!(
                "chunk {i} has shape {:?}, not one dimension",
                a.shape
            )));
        };
        match dtype {
            None => dtype = Some(a.dtype),
            Some(d) if d != a.dtype => {
                return Err(bad(format!("chunk {i} is {}, chunk 0 {d}", a.dtype)));
            }
            Some(_) => {}
        }
        elements = elements.saturating_add(*len);
        ranges.push(a.range);
    }
    let dtype = dtype.ok_or_else(|| bad("it has no chunks".to_owned()))?;
    let numel = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|_| dtype.byte_len(&shape).is_some())
        .ok_or_else(|| FlaxError::ShapeOverflow {
            name: name.to_owned(),
            shape: shape.clone(),
        })?;
    if elements != numel {
        return Err(bad(format!(
            "its chunks hold {elements} elements, its shape {shape:?} {numel}"
        )));
    }
    let first = ranges.first().map_or(0, |r| r.start);
    let adjacent = ranges.windows(2).all(|w| w[0].end == w[1].start);
    let data = if adjacent {
        let end = ranges.last().map_or(first, |r| r.end);
        Data::Plain {
            file: 0,
            range: first..end,
            big_endian: false,
        }
    } else {
        Data::Decoded(Arc::new(ChunksDecoder {
            name: name.to_owned(),
            ranges,
        }))
    };
    let facts = vec![
        ("offset", serde_json::Value::from(first)),
        ("chunks", serde_json::Value::from(parts.len())),
    ];
    let t = Tensor {
        name: name.to_owned(),
        dtype,
        shape,
        data,
        facts,
    };
    Ok((t, warnings))
}

/// A chunked array's bytes: its chunks' byte ranges of file 0, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunksDecoder {
    /// The tensor, for messages.
    pub name: String,
    /// The chunks' bytes, in index order.
    pub ranges: Vec<Range<u64>>,
}

impl Decode for ChunksDecoder {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        self.ranges.iter().map(|r| (0, r.clone())).collect()
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let file = files.first().copied().unwrap_or_default();
        for (i, r) in self.ranges.iter().enumerate() {
            let slice = usize::try_from(r.start)
                .ok()
                .zip(usize::try_from(r.end).ok())
                .and_then(|(s, e)| file.get(s..e))
                .ok_or_else(|| {
                    DecodeError::invalid(
                        "Truncated",
                        format!(
                            "chunked array {:?}: chunk {i} at bytes {}..{} is past the file's {} bytes",
                            self.name,
                            r.start,
                            r.end,
                            file.len()
                        ),
                    )
                })?;
            for piece in slice.chunks(PIECE) {
                cancel.check()?;
                sink(piece).map_err(DecodeError::Sink)?;
            }
        }
        Ok(())
    }
}
