//! Flax's msgpack ext payloads (flax/serialization.py): code 1, an ndarray,
//! and code 3, a numpy scalar, each a msgpack `[shape, dtype name, bytes]`
//! (numpy's `tobytes('C')`, native little-endian); code 2, a Python
//! complex, a msgpack `[re, im]`. A payload is a msgpack document of its
//! own: it must hold exactly one value (`unpackb` refuses extra data).

use std::ops::Range;

use super::FlaxError;
use super::msgpack::{Parser, Value};
use crate::dtype::Dtype;

/// The ext code of an ndarray.
pub const NDARRAY: i8 = 1;
/// The ext code of a Python complex.
pub const COMPLEX: i8 = 2;
/// The ext code of a numpy scalar (an ndarray of shape `[]`).
pub const NPSCALAR: i8 = 3;

/// Dimensions numpy allows at most.
pub const MAX_RANK: usize = 64;

/// An ndarray ext read: its dtype, shape and where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Array {
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its bytes in the file, exactly the shape's size.
    pub range: Range<u64>,
}

/// A shape's dimensions (an ndarray's, a chunked array's): at most
/// [`MAX_RANK`], each a non-negative integer; else why not.
pub fn dims_of(dims: &[&Value]) -> Result<Vec<u64>, String> {
    if dims.len() > MAX_RANK {
        return Err(format!(
            "its shape has {} dimensions, numpy's limit is {MAX_RANK}",
            dims.len()
        ));
    }
    dims.iter()
        .map(|d| match d {
            Value::UInt(u) => Ok(*u),
            other => Err(format!(
                "a dimension is {}, not a non-negative int",
                match other {
                    Value::Int(i) => i.to_string(),
                    v => v.type_name().to_owned(),
                }
            )),
        })
        .collect()
}

/// The dtype a Flax dtype name (numpy's `dtype.name`) stands for.
pub fn dtype_of(name: &[u8]) -> Option<Dtype> {
    Some(match name {
        b"float32" => Dtype::F32,
        b"float64" => Dtype::F64,
        b"float16" => Dtype::F16,
        b"bfloat16" => Dtype::BF16,
        b"float8_e4m3fn" => Dtype::F8E4M3,
        b"float8_e5m2" => Dtype::F8E5M2,
        b"float8_e4m3fnuz" => Dtype::F8E4M3Fnuz,
        b"float8_e5m2fnuz" => Dtype::F8E5M2Fnuz,
        b"float8_e8m0fnu" => Dtype::F8E8M0,
        b"int8" => Dtype::I8,
        b"int16" => Dtype::I16,
        b"int32" => Dtype::I32,
        b"int64" => Dtype::I64,
        b"uint8" => Dtype::U8,
        b"uint16" => Dtype::U16,
        b"uint32" => Dtype::U32,
        b"uint64" => Dtype::U64,
        b"bool" => Dtype::Bool,
        b"complex64" => Dtype::C64,
        _ => return None,
    })
}

/// The single value an ext payload holds.
fn payload(
    bytes: &[u8],
    data: &Range<usize>,
    name: &str,
    budget: &mut u64,
) -> Result<Value, FlaxError> {
    let mut p = Parser::new(bytes, data.clone(), budget);
    let v = p.value()?;
    if p.pos() != data.end {
        return Err(FlaxError::BadExt {
            name: name.to_owned(),
            at: data.start as u64,
            message: format!(
                "{} bytes follow the payload's value, from byte {}",
                data.end.saturating_sub(p.pos()),
                p.pos()
            ),
        });
    }
    Ok(v)
}

/// Reads an ndarray (or numpy scalar) ext payload at `data` of the value
/// named `name`: `[shape, dtype name, bytes]`, the bytes exactly the
/// shape's size. The dtype name and bytes may be str or bin (Flax reads
/// the payload with `raw=True`, where both are bytes).
pub fn ndarray(
    bytes: &[u8],
    data: &Range<usize>,
    name: &str,
    budget: &mut u64,
) -> Result<Array, FlaxError> {
    let bad = |message: String| FlaxError::BadExt {
        name: name.to_owned(),
        at: data.start as u64,
        message,
    };
    let v = payload(bytes, data, name, budget)?;
    let Value::Array(items) = v else {
        return Err(bad(format!(
            "an ndarray holds [shape, dtype, bytes], this one {}",
            v.type_name()
        )));
    };
    let [shape, dtype, buffer] = items.as_slice() else {
        return Err(bad(format!(
            "an ndarray holds [shape, dtype, bytes], this one {} items",
            items.len()
        )));
    };
    let Value::Array(dims) = shape else {
        return Err(bad(format!(
            "its shape is {}, not an array",
            shape.type_name()
        )));
    };
    let dims: Vec<&Value> = dims.iter().collect();
    let shape = dims_of(&dims).map_err(bad)?;
    let (Value::Str(dname) | Value::Bin(dname)) = dtype else {
        return Err(bad(format!(
            "its dtype name is {}, not a string",
            dtype.type_name()
        )));
    };
    let dname = bytes.get(dname.clone()).unwrap_or_default();
    let dtype = dtype_of(dname).ok_or_else(|| FlaxError::UnsupportedDtype {
        name: name.to_owned(),
        dtype: String::from_utf8_lossy(dname).chars().take(64).collect(),
    })?;
    let (Value::Bin(range) | Value::Str(range)) = buffer else {
        return Err(bad(format!(
            "its data is {}, not bytes",
            buffer.type_name()
        )));
    };
    let need = dtype
        .byte_len(&shape)
        .ok_or_else(|| FlaxError::ShapeOverflow {
            name: name.to_owned(),
            shape: shape.clone(),
        })?;
    let found = range.len() as u64;
    if need != found {
        return Err(FlaxError::SizeMismatch {
            name: name.to_owned(),
            dtype,
            shape,
            need,
            found,
            at: range.start as u64,
        });
    }
    Ok(Array {
        dtype,
        shape,
        range: range.start as u64..range.end as u64,
    })
}

/// Reads a complex ext payload: `[re, im]`, two numbers, as JSON `[re, im]`
/// (floats, as Python's `complex` holds them; one that is not finite as
/// `null`).
pub fn complex(
    bytes: &[u8],
    data: &Range<usize>,
    name: &str,
    budget: &mut u64,
) -> Result<serde_json::Value, FlaxError> {
    let v = payload(bytes, data, name, budget)?;
    let part = |v: &Value| match v {
        Value::UInt(u) => Some(*u as f64),
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    let parts = match &v {
        Value::Array(items) => match items.as_slice() {
            [re, im] => part(re).zip(part(im)),
            _ => None,
        },
        _ => None,
    };
    let (re, im) = parts.ok_or_else(|| FlaxError::BadExt {
        name: name.to_owned(),
        at: data.start as u64,
        message: "a complex ext holds [re, im], two numbers".to_owned(),
    })?;
    let num = |f: f64| serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, Into::into);
    Ok(serde_json::Value::Array(vec![num(re), num(im)]))
}
