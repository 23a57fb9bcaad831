//! One `TensorProto`: its fields read in place ([`TensorMsg::read`]), its
//! `data_type` mapped to a dtype ([`onnx_type`]), and where its bytes are
//! ([`locate`]): `raw_data` in the model file, a typed field decoded, or
//! an external file (its location checked lexically; its size is asked
//! later, once every tensor has passed).

use std::ops::Range;

use super::error::OnnxError;
use super::wire::{self, Field, Scalar, Value, fields_of};
use crate::dtype::Dtype;

/// `TensorProto` field numbers (onnx.proto).
mod field {
    pub const DIMS: u32 = 1;
    pub const DATA_TYPE: u32 = 2;
    pub const SEGMENT: u32 = 3;
    pub const FLOAT_DATA: u32 = 4;
    pub const INT32_DATA: u32 = 5;
    pub const INT64_DATA: u32 = 7;
    pub const NAME: u32 = 8;
    pub const RAW_DATA: u32 = 9;
    pub const DOUBLE_DATA: u32 = 10;
    pub const UINT64_DATA: u32 = 11;
    pub const EXTERNAL_DATA: u32 = 13;
    pub const DATA_LOCATION: u32 = 14;
}

/// `TensorProto.DataLocation.EXTERNAL`.
const EXTERNAL: u64 = 1;

/// A typed data field: which one, how its elements are encoded, and its
/// name for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Storage {
    /// The field number.
    pub field: u32,
    /// How each element is encoded.
    pub scalar: Scalar,
    /// `float_data`, `int32_data`, ...
    pub name: &'static str,
    /// Bytes each element gives out (the low bytes of its value, as
    /// numpy's `astype` truncates); BOOL gives one byte, 0 or 1.
    pub width: usize,
}

const FLOAT_DATA: Storage = Storage {
    field: field::FLOAT_DATA,
    scalar: Scalar::Fixed32,
    name: "float_data",
    width: 4,
};
const DOUBLE_DATA: Storage = Storage {
    field: field::DOUBLE_DATA,
    scalar: Scalar::Fixed64,
    name: "double_data",
    width: 8,
};
const INT64_DATA: Storage = Storage {
    field: field::INT64_DATA,
    scalar: Scalar::Varint,
    name: "int64_data",
    width: 8,
};
const fn int32_data(width: usize) -> Storage {
    Storage {
        field: field::INT32_DATA,
        scalar: Scalar::Varint,
        name: "int32_data",
        width,
    }
}
const fn uint64_data(width: usize) -> Storage {
    Storage {
        field: field::UINT64_DATA,
        scalar: Scalar::Varint,
        name: "uint64_data",
        width,
    }
}

/// The name of `TensorProto.DataType` number `n` (`unknown` past the
/// ones onnx defines today).
pub fn type_name(n: i64) -> &'static str {
    const NAMES: [&str; 27] = [
        "UNDEFINED",
        "FLOAT",
        "UINT8",
        "INT8",
        "UINT16",
        "INT16",
        "INT32",
        "INT64",
        "STRING",
        "BOOL",
        "FLOAT16",
        "DOUBLE",
        "UINT32",
        "UINT64",
        "COMPLEX64",
        "COMPLEX128",
        "BFLOAT16",
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "UINT4",
        "INT4",
        "FLOAT4E2M1",
        "FLOAT8E8M0",
        "UINT2",
        "INT2",
    ];
    usize::try_from(n)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("unknown")
}

/// The dtype of `TensorProto.DataType` number `n` and the typed field its
/// values are stored in when not in `raw_data` (FRAMEWORKS.md's table);
/// `None` for the types refused.
pub fn onnx_type(n: i64) -> Option<(Dtype, Storage)> {
    Some(match n {
        1 => (Dtype::F32, FLOAT_DATA),
        2 => (Dtype::U8, int32_data(1)),
        3 => (Dtype::I8, int32_data(1)),
        4 => (Dtype::U16, int32_data(2)),
        5 => (Dtype::I16, int32_data(2)),
        6 => (Dtype::I32, int32_data(4)),
        7 => (Dtype::I64, INT64_DATA),
        9 => (Dtype::Bool, int32_data(1)),
        10 => (Dtype::F16, int32_data(2)),
        11 => (Dtype::F64, DOUBLE_DATA),
        12 => (Dtype::U32, uint64_data(4)),
        13 => (Dtype::U64, uint64_data(8)),
        // Interleaved (re, im) pairs of float_data.
        14 => (Dtype::C64, FLOAT_DATA),
        16 => (Dtype::BF16, int32_data(2)),
        17 => (Dtype::F8E4M3, int32_data(1)),
        18 => (Dtype::F8E4M3Fnuz, int32_data(1)),
        19 => (Dtype::F8E5M2, int32_data(1)),
        20 => (Dtype::F8E5M2Fnuz, int32_data(1)),
        24 => (Dtype::F8E8M0, int32_data(1)),
        _ => return None,
    })
}

/// A `TensorProto`'s fields, read in place (last occurrence wins for the
/// singular ones, as protobuf merges).
#[derive(Debug, Default)]
pub struct TensorMsg {
    /// `name`, if present.
    pub name: Option<String>,
    /// `data_type` (0, UNDEFINED, when absent).
    pub data_type: i64,
    /// `dims`, as stored (signed): the first [`MAX_RANK`] + 1 only.
    pub dims: Vec<i64>,
    /// How many `dims` there are.
    pub rank: u64,
    /// True when a `segment` is present.
    pub segment: bool,
    /// `raw_data`'s payload range in the file.
    pub raw: Option<Range<usize>>,
    /// Elements of each typed field: float, int32, int64, double, uint64.
    pub counts: [u64; 5],
    /// The `external_data` entries read (`location`, `offset`, `length`;
    /// the last of each key), the others (`checksum`, ...) ignored.
    pub external: External,
    /// `data_location` (0, DEFAULT, when absent).
    pub data_location: u64,
}

/// Dimensions a tensor may have at most (numpy's limit: `to_array`
/// cannot make an array of more).
pub const MAX_RANK: u64 = 64;

/// Bytes an `external_data` value may have at most (a path, a number).
const MAX_EXTERNAL_VALUE: usize = 64 << 10;

/// A tensor's `external_data` keys that are read.
#[derive(Debug, Default)]
pub struct External {
    /// `location`.
    pub location: Option<String>,
    /// `offset`, as written.
    pub offset: Option<String>,
    /// `length`, as written.
    pub length: Option<String>,
}

/// The index in [`TensorMsg::counts`] of a typed field.
fn count_slot(number: u32) -> Option<(usize, Scalar)> {
    Some(match number {
        field::FLOAT_DATA => (0, Scalar::Fixed32),
        field::INT32_DATA => (1, Scalar::Varint),
        field::INT64_DATA => (2, Scalar::Varint),
        field::DOUBLE_DATA => (3, Scalar::Fixed64),
        field::UINT64_DATA => (4, Scalar::Varint),
        _ => return None,
    })
}

/// A string field as UTF-8, refused otherwise (it becomes a name or a
/// path).
pub fn utf8(bytes: &[u8], f: &Field, what: &str) -> Result<String, OnnxError> {
    let r = f.payload().unwrap_or(0..0);
    let s = bytes.get(r).unwrap_or_default();
    String::from_utf8(s.to_vec()).map_err(|_| OnnxError::Protobuf {
        at: f.at as u64,
        what: format!("{what} is not UTF-8"),
    })
}

/// A `StringStringEntryProto`'s key and value (the last of each), raw.
pub fn entry(bytes: &[u8], r: Range<usize>) -> Result<(&[u8], &[u8]), OnnxError> {
    let (mut key, mut value) = (&[][..], &[][..]);
    for f in wire::Fields::new(bytes, r) {
        let f = f?;
        if let Value::Len(p) = &f.value {
            let s = bytes.get(p.clone()).unwrap_or_default();
            match f.number {
                1 => key = s,
                2 => value = s,
                _ => {}
            }
        }
    }
    Ok((key, value))
}

impl TensorMsg {
    /// Reads the message stored in `parts` of `bytes` (one part, or
    /// several when a singular message field was repeated on the wire).
    pub fn read(bytes: &[u8], parts: &[Range<usize>]) -> Result<TensorMsg, OnnxError> {
        let mut msg = TensorMsg::default();
        for f in fields_of(bytes, parts) {
            let f = f?;
            match (f.number, &f.value) {
                (field::DIMS, _) => {
                    wire::for_each_element(bytes, &f, Scalar::Varint, &mut |v| {
                        msg.rank += 1;
                        if msg.rank <= MAX_RANK + 1 {
                            msg.dims.push(v as i64);
                        }
                        Ok::<_, OnnxError>(())
                    })?;
                }
                (field::DATA_TYPE, Value::Varint(v)) => msg.data_type = *v as i64,
                (field::SEGMENT, Value::Len(_)) => msg.segment = true,
                (field::NAME, Value::Len(_)) => msg.name = Some(utf8(bytes, &f, "a tensor name")?),
                (field::RAW_DATA, Value::Len(r)) => msg.raw = Some(r.clone()),
                (field::EXTERNAL_DATA, Value::Len(r)) => {
                    let (key, value) = entry(bytes, r.clone())?;
                    let slot = match key {
                        b"location" => &mut msg.external.location,
                        b"offset" => &mut msg.external.offset,
                        b"length" => &mut msg.external.length,
                        _ => continue,
                    };
                    if value.len() > MAX_EXTERNAL_VALUE {
                        return Err(OnnxError::Protobuf {
                            at: f.at as u64,
                            what: format!(
                                "an external_data value of {} bytes (more than {MAX_EXTERNAL_VALUE})",
                                value.len()
                            ),
                        });
                    }
                    *slot = Some(String::from_utf8(value.to_vec()).map_err(|_| {
                        OnnxError::Protobuf {
                            at: f.at as u64,
                            what: "an external_data value is not UTF-8".to_owned(),
                        }
                    })?);
                }
                // A value outside the enum is kept as an unknown field by
                // protobuf's parsers: the location stays as it was.
                (field::DATA_LOCATION, Value::Varint(v @ (0 | EXTERNAL))) => {
                    msg.data_location = *v;
                }
                (n, _) => {
                    if let Some((slot, scalar)) = count_slot(n)
                        && let Some(count) = wire::count_elements(bytes, &f, scalar)?
                    {
                        msg.counts[slot] = msg.counts[slot].saturating_add(count);
                    }
                }
            }
        }
        Ok(msg)
    }

    /// Elements the typed field `storage` holds.
    pub fn count(&self, storage: Storage) -> u64 {
        count_slot(storage.field).map_or(0, |(slot, _)| self.counts[slot])
    }

    /// True when the data is in an external file.
    pub fn is_external(&self) -> bool {
        self.data_location == EXTERNAL
    }
}

/// A tensor's checked type and shape.
#[derive(Debug, Clone)]
pub struct Typed {
    /// Its dtype.
    pub dtype: Dtype,
    /// The typed field its values would be in.
    pub storage: Storage,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Elements.
    pub numel: u64,
    /// Bytes (C order, little-endian).
    pub byte_len: u64,
}

/// Checks `t`'s segment, type and shape (FRAMEWORKS.md: refused types
/// refuse the model; a negative dim or an overflowing size is refused).
pub fn check_type(name: &str, t: &TensorMsg) -> Result<Typed, OnnxError> {
    if t.segment {
        return Err(OnnxError::Segment {
            tensor: name.to_owned(),
        });
    }
    let Some((dtype, storage)) = onnx_type(t.data_type) else {
        return Err(OnnxError::UnsupportedDtype {
            tensor: name.to_owned(),
            data_type: t.data_type,
            type_name: type_name(t.data_type),
        });
    };
    if t.rank > MAX_RANK {
        return Err(OnnxError::InvalidShape {
            tensor: name.to_owned(),
            what: format!("{} dimensions, more than numpy's {MAX_RANK}", t.rank),
        });
    }
    let mut shape = Vec::with_capacity(t.dims.len());
    for (i, &d) in t.dims.iter().enumerate() {
        let Ok(d) = u64::try_from(d) else {
            return Err(OnnxError::InvalidShape {
                tensor: name.to_owned(),
                what: format!("dimension {i} is {d}, negative"),
            });
        };
        shape.push(d);
    }
    let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let byte_len = dtype.byte_len(&shape);
    let (Some(numel), Some(byte_len)) = (numel, byte_len) else {
        return Err(OnnxError::InvalidShape {
            tensor: name.to_owned(),
            what: format!("{shape:?} of {dtype} overflows 64 bits"),
        });
    };
    Ok(Typed {
        dtype,
        storage,
        shape,
        numel,
        byte_len,
    })
}

/// Where a tensor's bytes are, before external files are sized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `raw_data`: this range of the model file, exactly the tensor's bytes.
    Raw(Range<usize>),
    /// The typed field, holding exactly the tensor's element count.
    Typed,
    /// No data, and none needed (no elements).
    Empty,
    /// An external file.
    External {
        /// The location, normalised.
        location: String,
        /// `offset` (0 when absent).
        offset: u64,
        /// `length`, when present.
        length: Option<u64>,
    },
}

/// A non-negative decimal integer, as `external_data` writes `offset` and
/// `length`.
fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn mismatch(
    name: &str,
    ty: &Typed,
    field: &'static str,
    found: u64,
    expected: u64,
    unit: &'static str,
) -> OnnxError {
    OnnxError::SizeMismatch {
        tensor: name.to_owned(),
        field,
        found,
        expected,
        unit,
        shape: ty.shape.clone(),
        dtype: ty.dtype.name(),
    }
}

/// Where `t`'s bytes are, as `numpy_helper.to_array` reads them: external
/// data when `data_location` is EXTERNAL, else `raw_data` when present,
/// else the typed field of its type. Sizes are checked here, except an
/// external file's, which [`super`] asks for once every tensor passed.
pub fn locate(name: &str, t: &TensorMsg, ty: &Typed) -> Result<Place, OnnxError> {
    if t.is_external() {
        let location = t.external.location.as_deref();
        let offset = t.external.offset.as_deref();
        let length = t.external.length.as_deref();
        let invalid = |what: String| OnnxError::ExternalDataInvalid {
            tensor: name.to_owned(),
            what,
        };
        let Some(location) = location else {
            return Err(invalid("no location".to_owned()));
        };
        let normal =
            super::location::normalise(location).map_err(|why| OnnxError::ExternalDataOutside {
                tensor: name.to_owned(),
                location: location.to_owned(),
                why,
            })?;
        let number = |key: &str, v: Option<&str>| match v {
            None => Ok(None),
            Some(s) => decimal(s)
                .map(Some)
                .ok_or_else(|| invalid(format!("{key} {s:?} is not a non-negative integer"))),
        };
        let offset = number("offset", offset)?.unwrap_or(0);
        let length = number("length", length)?;
        if let Some(l) = length
            && l != ty.byte_len
        {
            return Err(mismatch(
                name,
                ty,
                "external_data length",
                l,
                ty.byte_len,
                "bytes",
            ));
        }
        return Ok(Place::External {
            location: normal,
            offset,
            length,
        });
    }
    if let Some(r) = &t.raw {
        let len = r.len() as u64;
        if len != ty.byte_len {
            return Err(mismatch(name, ty, "raw_data", len, ty.byte_len, "bytes"));
        }
        return Ok(if len == 0 {
            Place::Empty
        } else {
            Place::Raw(r.clone())
        });
    }
    let per = if ty.dtype == Dtype::C64 { 2 } else { 1 };
    // numel * 2 cannot overflow: the byte length (8 per element) did not.
    let expected = ty.numel.saturating_mul(per);
    let found = t.count(ty.storage);
    if found != expected {
        return Err(mismatch(
            name,
            ty,
            ty.storage.name,
            found,
            expected,
            "elements",
        ));
    }
    Ok(if expected == 0 {
        Place::Empty
    } else {
        Place::Typed
    })
}
