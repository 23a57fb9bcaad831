//! Flax checkpoints: `flax.serialization.to_bytes` / `msgpack_serialize`
//! files (`.msgpack`), read as `flax.serialization.msgpack_restore` reads
//! them (FRAMEWORKS.md, "Flax").
//!
//! The file is one msgpack map, the state dict. Nested map keys are joined
//! with `/` (`params/Dense_0/kernel`), integer keys in decimal, a msgpack
//! array's elements by index (`layers/0/w`). An ndarray ext (code 1) and a
//! numpy-scalar ext (code 3, shape `[]`) are tensors whose bytes are the
//! payload's bin, read in place ([`Data::Plain`]); a chunked array (a map
//! holding `__msgpack_chunked_array__`, see [`chunks`]) is one tensor whose
//! chunks are streamed ([`Data::Decoded`]). Plain values (int, float, str,
//! bool, nil, bytes) and a Python complex (ext code 2) are metadata under
//! their joined name.
//!
//! Our own msgpack reader ([`msgpack`]) is the security boundary: every
//! length checked before use, counts against the bytes present before
//! anything is reserved, nesting past 1,000 refused with no recursion, and
//! nothing read after the top-level map.

mod chunks;
mod container;
mod error;
pub mod ext;
pub mod msgpack;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod hostile;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

pub use chunks::ChunksDecoder;
pub(crate) use container::CONTAINER;
pub use error::FlaxError;
use msgpack::{MAX_VALUES, Parser, Value};

use crate::format::decode::{Data, Opened, Tensor};

/// Bytes of joined names a file may make at most (every tensor's and
/// metadata value's name, and the maps' on the way).
pub const MAX_NAME_BYTES: u64 = 256 << 20;

/// Bytes of metadata strings copied at most; longer strings past it are
/// summarised as `<N-byte string>`.
pub const MAX_KEPT_BYTES: u64 = 64 << 20;

/// True when `bytes` may be a Flax msgpack file: its first byte is a
/// msgpack map's (fixmap, map16, map32).
pub fn looks_like(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(0x80..=0x8f | 0xde | 0xdf))
}

/// Reads a Flax msgpack file, `bytes` being all of it (file 0): its
/// tensors in file order, its plain values as metadata. No tensor data is
/// read, but the whole msgpack structure is checked.
pub fn open(bytes: &[u8]) -> Result<Opened, FlaxError> {
    if !looks_like(bytes) {
        return Err(FlaxError::NotAMap(match bytes.first() {
            None => "the file is empty".to_owned(),
            Some(b) => format!("its first byte is 0x{b:02x}, not a msgpack map's"),
        }));
    }
    let mut budget = MAX_VALUES;
    let mut parser = Parser::new(bytes, 0..bytes.len(), &mut budget);
    let root = parser.value()?;
    let end = parser.pos();
    if end != bytes.len() {
        return Err(FlaxError::TrailingBytes {
            at: end as u64,
            len: (bytes.len() - end) as u64,
        });
    }
    let Value::Map(pairs) = &root else {
        return Err(FlaxError::NotAMap(
            "the top-level value is no map".to_owned(),
        ));
    };
    if chunks::is_chunked(bytes, pairs) {
        return Err(FlaxError::BadChunkedArray {
            name: String::new(),
            message: "the whole file is one chunked array, which has no name".to_owned(),
        });
    }
    let mut walk = Walk {
        bytes,
        budget,
        opened: Opened::default(),
        name_bytes: 0,
        kept_bytes: 0,
        chunked: 0,
    };
    walk.run(pairs)?;
    let mut opened = walk.opened;
    let mut seen = HashSet::with_capacity(opened.tensors.len() + opened.metadata.len());
    let names = opened.tensors.iter().map(|t| &t.name);
    for name in names.chain(opened.metadata.iter().map(|(k, _)| k)) {
        if !seen.insert(name.as_str()) {
            return Err(FlaxError::DuplicateName { name: name.clone() });
        }
    }
    opened.header_len = opened
        .tensors
        .iter()
        .filter_map(|t| match &t.data {
            Data::Plain { range, .. } => Some(range.start),
            Data::Decoded(d) => d.ranges().iter().map(|(_, r)| r.start).min(),
        })
        .min()
        .unwrap_or(bytes.len() as u64);
    opened.facts.insert(
        "chunked_arrays".to_owned(),
        serde_json::Value::from(walk.chunked),
    );
    Ok(opened)
}

/// Where a value sits: only maps reached from the top through maps are
/// searched for chunked arrays (`_unchunk_array_leaves_in_place` walks
/// dicts, never lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    ThroughMaps,
    InArray,
}

struct Walk<'a> {
    bytes: &'a [u8],
    /// Values the ext payloads may still declare.
    budget: u64,
    opened: Opened,
    name_bytes: u64,
    kept_bytes: u64,
    chunked: u64,
}

impl<'a> Walk<'a> {
    /// `prefix/key`, or `key` at the top; counted against
    /// [`MAX_NAME_BYTES`].
    fn join(&mut self, prefix: Option<&str>, key: &str) -> Result<String, FlaxError> {
        let name = match prefix {
            None => key.to_owned(),
            Some(p) => format!("{p}/{key}"),
        };
        self.name_bytes = self.name_bytes.saturating_add(name.len() as u64);
        if self.name_bytes > MAX_NAME_BYTES {
            return Err(FlaxError::TooLarge(format!(
                "the joined names exceed {MAX_NAME_BYTES} bytes (at {name:?})"
            )));
        }
        Ok(name)
    }

    /// A str's text, refused when it is not UTF-8.
    fn text(&self, r: &std::ops::Range<usize>) -> Result<&'a str, FlaxError> {
        self.bytes
            .get(r.clone())
            .and_then(|s| std::str::from_utf8(s).ok())
            .ok_or(FlaxError::BadUtf8 {
                at: r.start as u64,
                end: r.end as u64,
            })
    }

    /// A map key as a name part: a str (or bin) as it is, an int in decimal.
    fn key(&self, k: &Value, under: &str) -> Result<String, FlaxError> {
        match k {
            Value::Str(r) | Value::Bin(r) => self.text(r).map(str::to_owned),
            Value::UInt(u) => Ok(u.to_string()),
            Value::Int(i) => Ok(i.to_string()),
            other => Err(FlaxError::BadKey {
                under: under.to_owned(),
                found: other.type_name(),
            }),
        }
    }

    /// Walks the top-level map's pairs depth first, in file order, with an
    /// explicit stack.
    fn run(&mut self, top: &'a [(Value, Value)]) -> Result<(), FlaxError> {
        let mut stack: Vec<(String, &'a Value, Reach)> = Vec::new();
        self.push_pairs(&mut stack, None, top, Reach::ThroughMaps)?;
        while let Some((name, v, reach)) = stack.pop() {
            match v {
                Value::Map(pairs)
                    if reach == Reach::ThroughMaps && chunks::is_chunked(self.bytes, pairs) =>
                {
                    let (t, warnings) = chunks::tensor(self.bytes, &name, pairs, &mut self.budget)?;
                    self.opened.tensors.push(t);
                    self.opened.warnings.extend(warnings);
                    self.chunked += 1;
                }
                Value::Map(pairs) => self.push_pairs(&mut stack, Some(&name), pairs, reach)?,
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate().rev() {
                        let child = self.join(Some(&name), &i.to_string())?;
                        stack.push((child, item, Reach::InArray));
                    }
                }
                Value::Ext { code, data } => match *code {
                    ext::NDARRAY | ext::NPSCALAR => {
                        let a = ext::ndarray(self.bytes, data, &name, &mut self.budget)?;
                        let mut facts = vec![("offset", serde_json::Value::from(a.range.start))];
                        if *code == ext::NPSCALAR {
                            facts.push(("numpy_scalar", serde_json::Value::Bool(true)));
                        }
                        self.opened.tensors.push(Tensor {
                            name,
                            dtype: a.dtype,
                            shape: a.shape,
                            data: Data::Plain {
                                file: 0,
                                range: a.range,
                                big_endian: false,
                            },
                            facts,
                        });
                    }
                    ext::COMPLEX => {
                        let c = ext::complex(self.bytes, data, &name, &mut self.budget)?;
                        self.opened.metadata.push((name, c));
                    }
                    code => {
                        return Err(FlaxError::UnknownExt {
                            name,
                            code,
                            at: data.start as u64,
                        });
                    }
                },
                scalar => {
                    let j = self.scalar(scalar)?;
                    self.opened.metadata.push((name, j));
                }
            }
        }
        Ok(())
    }

    /// Pushes a map's pairs (last first, so that they pop in file order),
    /// reached as the map was.
    fn push_pairs(
        &mut self,
        stack: &mut Vec<(String, &'a Value, Reach)>,
        prefix: Option<&str>,
        pairs: &'a [(Value, Value)],
        reach: Reach,
    ) -> Result<(), FlaxError> {
        for (k, v) in pairs.iter().rev() {
            let key = self.key(k, prefix.unwrap_or_default())?;
            let name = self.join(prefix, &key)?;
            stack.push((name, v, reach));
        }
        Ok(())
    }

    /// A plain value as JSON: numbers exact (a float that is not finite as
    /// `null`), a str as itself, a bin as `<N bytes>`.
    fn scalar(&mut self, v: &Value) -> Result<serde_json::Value, FlaxError> {
        use serde_json::Value as J;
        Ok(match v {
            Value::Bool(b) => J::Bool(*b),
            Value::UInt(u) => J::from(*u),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(r) => {
                let s = self.text(r)?;
                self.kept_bytes = self.kept_bytes.saturating_add(s.len() as u64);
                if self.kept_bytes > MAX_KEPT_BYTES {
                    J::String(format!("<{}-byte string>", s.len()))
                } else {
                    J::String(s.to_owned())
                }
            }
            Value::Bin(r) => J::String(format!("<{} bytes>", r.len())),
            // Containers and exts are walked, never made metadata.
            Value::Nil | Value::Array(_) | Value::Map(_) | Value::Ext { .. } => J::Null,
        })
    }
}
