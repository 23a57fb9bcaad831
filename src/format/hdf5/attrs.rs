//! Attributes of groups and datasets as metadata: scalars and short 1-D
//! arrays of numbers, booleans and strings (fixed-length, and
//! variable-length through the global heap), keyed `"<path>@<name>"`.
//! Anything else, or anything malformed, is skipped: attributes never make
//! a file unreadable.

use std::collections::HashMap;

use serde_json::Value;

use super::btree::Budget;
use super::error::Hdf5Error;
use super::group::dense_objects;
use super::header::Message;
use super::io::{Cur, File, UNDEF, le};
use super::messages::{self, Space};
use super::types::{self, Type};

/// Elements of an attribute kept at most (longer ones are skipped).
const MAX_ELEMENTS: u64 = 4096;
/// Bytes of one string kept at most.
const MAX_STRING: usize = 16 << 20;
/// Bytes of metadata kept over the whole file.
pub(super) const MAX_METADATA: u64 = 64 << 20;

/// Appends the attributes of the object at `path` (its header `msgs`) to
/// `out`, `left` bytes of metadata remaining.
pub(super) fn read(
    f: &File<'_>,
    path: &str,
    msgs: &[Message<'_>],
    budget: &mut Budget,
    left: &mut u64,
    out: &mut Vec<(String, Value)>,
) {
    // The attribute messages: in the header, and in dense storage.
    let mut raw: Vec<(&[u8], u64)> = Vec::new();
    for m in msgs {
        match m.kind {
            messages::ATTRIBUTE if m.flags & 0x02 == 0 => raw.push((m.data, m.at)),
            messages::ATTRIBUTE_INFO => {
                let Ok(Some((heap, names))) = attribute_info(&mut m.cursor("an attribute info"))
                else {
                    continue;
                };
                let _ = dense_objects(f, heap, names, 0, budget, &mut |obj| {
                    raw.push((obj, 0));
                    Ok(())
                });
            }
            _ => {}
        }
    }
    let mut mine = Vec::new();
    for (data, at) in raw {
        if let Ok(Some((name, value))) = attribute(f, data, at, budget) {
            let size = (name.len() + value.to_string().len()) as u64;
            if size <= *left {
                *left -= size;
                mine.push((format!("{path}@{name}"), value));
            }
        }
    }
    mine.sort_by(|a, b| a.0.cmp(&b.0));
    out.extend(mine);
}

/// The attribute info message: the fractal heap and name index of dense
/// attribute storage.
fn attribute_info(c: &mut Cur<'_>) -> Result<Option<(u64, u64)>, Hdf5Error> {
    let _version = c.u8()?;
    let flags = c.u8()?;
    if flags & 1 != 0 {
        c.skip(2)?;
    }
    let heap = c.u64()?;
    let names = c.u64()?;
    Ok((heap != UNDEF).then_some((heap, names)))
}

/// One attribute message: its name and value, `None` when the value is
/// not one kept.
fn attribute(
    file: &File<'_>,
    data: &[u8],
    at: u64,
    budget: &mut Budget,
) -> Result<Option<(String, Value)>, Hdf5Error> {
    let mut c = Cur::new(data, at, "an attribute message");
    let version = c.u8()?;
    let flags = c.u8()?;
    let name_len = c.u16()? as usize;
    let type_len = c.u16()? as usize;
    let space_len = c.u16()? as usize;
    if version == 3 {
        c.skip(1)?;
    }
    let pad = |n: usize| if version == 1 { n.div_ceil(8) * 8 } else { n };
    if flags & 3 != 0 {
        return Ok(None);
    }
    let raw_name = c.bytes(pad(name_len))?;
    let end = raw_name
        .iter()
        .take(name_len)
        .position(|&b| b == 0)
        .unwrap_or(name_len.min(raw_name.len()));
    let name = String::from_utf8_lossy(&raw_name[..end]).into_owned();
    let ty = types::datatype(&mut Cur::new(
        c.bytes(pad(type_len))?,
        at,
        "an attribute's type",
    ))?;
    let space = messages::dataspace(&mut Cur::new(
        c.bytes(pad(space_len))?,
        at,
        "an attribute's dataspace",
    ))?;
    let (scalar, n) = match &space {
        Space::Scalar => (true, 1u64),
        Space::Simple { dims, .. } if dims.len() == 1 => (false, dims[0]),
        _ => return Ok(None),
    };
    if n > MAX_ELEMENTS {
        return Ok(None);
    }
    let width = match ty {
        Type::VarStr => 16,
        _ => ty.size().unwrap_or(0) as usize,
    };
    if width == 0 {
        return Ok(None);
    }
    let bytes = c.bytes(width * n as usize)?;
    let mut heaps = HashMap::new();
    let mut values = Vec::with_capacity(n as usize);
    for e in bytes.chunks_exact(width) {
        match value(file, &ty, e, &mut heaps, budget) {
            Some(v) => values.push(v),
            None => return Ok(None),
        }
    }
    let value = if scalar {
        values.pop().unwrap_or(Value::Null)
    } else {
        Value::Array(values)
    };
    Ok(Some((name, value)))
}

/// Global heap collections read, by address: their objects (index,
/// bytes), or `None` when unreadable.
type Heaps<'a> = HashMap<u64, Option<Vec<(u16, &'a [u8])>>>;

/// One element as JSON.
fn value<'a>(
    file: &File<'a>,
    t: &Type,
    e: &[u8],
    heaps: &mut Heaps<'a>,
    budget: &mut Budget,
) -> Option<Value> {
    let ordered = |big: bool| -> Vec<u8> {
        let mut v = e.to_vec();
        if big {
            v.reverse();
        }
        v
    };
    let float = |x: f64| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number);
    match t {
        Type::Int {
            size,
            signed,
            big,
            exact: true,
        } if *size <= 8 => {
            let v = le(&ordered(*big));
            let bits = size * 8;
            Some(if *signed {
                let shift = 64 - bits;
                Value::from(((v << shift) as i64) >> shift)
            } else {
                Value::from(v)
            })
        }
        Type::Float {
            size,
            big,
            ieee: true,
        } => {
            let v = le(&ordered(*big));
            Some(match size {
                2 => float(f64::from(half::f16::from_bits(v as u16))),
                4 => float(f64::from(f32::from_bits(v as u32))),
                _ => float(f64::from_bits(v)),
            })
        }
        Type::Enum { .. } => match t.tensor() {
            Ok((crate::dtype::Dtype::Bool, _)) => {
                Some(Value::Bool(e.first().is_some_and(|&b| b != 0)))
            }
            _ => None,
        },
        Type::Str { space, .. } => {
            let end = e.iter().position(|&b| b == 0).unwrap_or(e.len());
            let mut s = &e[..end];
            if *space {
                while let [rest @ .., b' '] = s {
                    s = rest;
                }
            }
            Some(Value::String(String::from_utf8_lossy(s).into_owned()))
        }
        Type::VarStr => {
            let len = le(e.get(..4)?) as usize;
            let coll = le(e.get(4..12)?);
            let index = le(e.get(12..16)?) as u16;
            if len > MAX_STRING {
                return None;
            }
            let objects = heaps
                .entry(coll)
                .or_insert_with(|| global_heap(file, coll, budget).ok())
                .as_ref()?;
            let data = objects.iter().find(|(i, _)| *i == index)?.1;
            Some(Value::String(
                String::from_utf8_lossy(data.get(..len)?).into_owned(),
            ))
        }
        _ => None,
    }
}

/// The objects of the global heap collection at `addr`: index and bytes.
fn global_heap<'a>(
    f: &File<'a>,
    addr: u64,
    budget: &mut Budget,
) -> Result<Vec<(u16, &'a [u8])>, Hdf5Error> {
    let mut c = f.cursor(addr, 16, "a global heap collection")?;
    c.signature("GCOL")?;
    c.skip(4)?;
    let size = c.u64()?;
    let mut c = f.cursor(addr, size, "a global heap collection")?;
    c.skip(16)?;
    let mut out = Vec::new();
    while c.remaining() >= 16 {
        budget.take()?;
        let index = c.u16()?;
        c.skip(6)?;
        let n = c.u64()? as usize;
        if index == 0 {
            break;
        }
        let data = c.bytes(n)?;
        out.push((index, data));
        let pad = n.div_ceil(8) * 8 - n;
        if c.skip(pad).is_err() {
            break;
        }
    }
    Ok(out)
}
