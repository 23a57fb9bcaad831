//! A GGUF file into the model (GGUF.md): every tensor a stored tensor of
//! the data section. A float or integer type is its dtype with the
//! row-major shape; a block type is its stored bytes as `U8`, shaped as
//! gguf-py's `GGUFReader` gives them (the row-major shape with its last
//! axis the bytes of a row), which the quantization layer reads as a
//! logical tensor of the row-major shape and decoded values.

use super::header::{GgufError, GgufHeader, Value, parse_prefix, stored_bytes};
use super::types::GgmlType;
use crate::dtype::Dtype;
use crate::format::TensorInfo;

/// What a GGUF file says beyond the model's fields.
#[derive(Debug, Clone)]
pub struct GgufParts {
    /// 2 or 3.
    pub version: u32,
    /// `general.alignment`, or 32.
    pub alignment: u64,
    /// Where the data section starts (absolute).
    pub tensor_data_offset: u64,
    /// The key/value table, in file order.
    pub metadata: Vec<(String, Value)>,
    /// Each tensor's ggml type, in header order.
    pub types: Vec<GgmlType>,
    /// Each tensor's row-major shape (the GGUF dimensions reversed).
    pub shapes: Vec<Vec<u64>>,
}

impl GgufParts {
    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `general.architecture`, when it is a string.
    pub fn architecture(&self) -> Option<&str> {
        match self.get("general.architecture") {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// An unsigned integer key (any width, or a non-negative signed one).
    pub fn unsigned(&self, key: &str) -> Option<u64> {
        match self.get(key)? {
            Value::Unsigned(u) => Some(*u),
            Value::Signed(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// The metadata as JSON values, by `info`'s rules.
    pub fn metadata_json(&self) -> serde_json::Map<String, serde_json::Value> {
        self.metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.to_json()))
            .collect()
    }
}

/// The dtype a stored (non-block) ggml type keeps.
pub fn stored_dtype(t: GgmlType) -> Option<Dtype> {
    Some(match t.name() {
        "F32" => Dtype::F32,
        "F16" => Dtype::F16,
        "BF16" => Dtype::BF16,
        "F64" => Dtype::F64,
        "I8" => Dtype::I8,
        "I16" => Dtype::I16,
        "I32" => Dtype::I32,
        "I64" => Dtype::I64,
        _ => return None,
    })
}

/// The shape a block type's stored bytes are given: the row-major shape
/// with its last axis the bytes of a row (`ne[0] / block × block bytes`).
pub fn raw_shape(t: GgmlType, shape: &[u64]) -> Vec<u64> {
    let (elements, bytes) = t.block();
    let mut out = shape.to_vec();
    match out.last_mut() {
        Some(last) => *last = *last / elements * bytes,
        None => out.push(bytes * u64::from(elements == 1)),
    }
    out
}

/// A GGUF file read into the model.
#[derive(Debug)]
pub struct Opened {
    /// The header's length (the data section's start).
    pub header_len: u64,
    /// One entry per tensor, in file order, offsets relative to the data
    /// section.
    pub tensors: Vec<TensorInfo>,
    /// The rest.
    pub parts: GgufParts,
}

/// Reads a GGUF file's header from `bytes`, the first bytes of a file of
/// `file_len` bytes (all of it, locally).
pub fn open(bytes: &[u8], file_len: u64) -> Result<Opened, GgufError> {
    let h = parse_prefix(bytes, file_len)?;
    into_model(h)
}

fn into_model(h: GgufHeader) -> Result<Opened, GgufError> {
    let mut tensors = Vec::with_capacity(h.tensors.len());
    let mut types = Vec::with_capacity(h.tensors.len());
    let mut shapes = Vec::with_capacity(h.tensors.len());
    for t in &h.tensors {
        let shape = t.shape();
        let nbytes = stored_bytes(t).map_err(GgufError::Invalid)?;
        let (dtype, stored_shape) = match stored_dtype(t.ggml_type) {
            Some(d) => (d, shape.clone()),
            None if shape.is_empty() => {
                return Err(GgufError::Invalid(format!(
                    "tensor {:?} is a scalar of block type {}",
                    t.name,
                    t.ggml_type.name()
                )));
            }
            None => (Dtype::U8, raw_shape(t.ggml_type, &shape)),
        };
        let info = TensorInfo::new(t.name.clone(), dtype, stored_shape, t.offset)
            .filter(|i| i.nbytes() == nbytes)
            .ok_or_else(|| {
                GgufError::Invalid(format!(
                    "tensor {:?}: its {nbytes} bytes at offset {} cannot be addressed",
                    t.name, t.offset
                ))
            })?;
        tensors.push(info);
        types.push(t.ggml_type);
        shapes.push(shape);
    }
    Ok(Opened {
        header_len: h.tensor_data_offset,
        tensors,
        parts: GgufParts {
            version: h.version,
            alignment: h.alignment,
            tensor_data_offset: h.tensor_data_offset,
            metadata: h.metadata,
            types,
            shapes,
        },
    })
}
