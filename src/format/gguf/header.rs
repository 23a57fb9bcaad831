//! The GGUF header (GGUF.md, "Layout"): magic, version 2 or 3, the
//! metadata key/value table (every value type, arrays nested up to 64
//! deep), the tensor infos, the alignment and where the data section
//! starts. Every count and length is checked against the bytes that remain
//! before anything is allocated or looped over, and what is kept is
//! bounded: an array of more than 64 elements keeps its first 16 (what
//! `info` prints), the rest are read past.

use super::types::{GgmlType, ValueType};

/// A GGUF file's first four bytes.
pub const MAGIC: &[u8] = b"GGUF";
/// Arrays of more elements than this are summarised (GGUF.md, `info`).
pub const FULL_ARRAY: u64 = 64;
/// Elements a summarised array keeps.
pub const ARRAY_HEAD: u64 = 16;
/// Arrays nested deeper than this are refused.
pub const MAX_DEPTH: usize = 64;
/// Values kept at most over the whole table (a bound on memory that no
/// real file reaches: a vocabulary keeps 16).
const MAX_KEPT: u64 = 1 << 20;
/// Bytes of keys, names and strings a header may have copied at most (a
/// chat template is kilobytes; a string of gigabytes is never copied).
pub const MAX_KEPT_BYTES: u64 = 64 << 20;
/// Tensors a file may hold at most.
pub const MAX_TENSORS: u64 = 1 << 18;
/// Keys a file may hold at most.
pub const MAX_KEYS: u64 = 1 << 16;
/// The alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// UINT8 … UINT64.
    Unsigned(u64),
    /// INT8 … INT64.
    Signed(i64),
    /// FLOAT32.
    F32(f32),
    /// FLOAT64.
    F64(f64),
    /// BOOL.
    Bool(bool),
    /// STRING (not UTF-8 bytes replaced).
    Str(String),
    /// ARRAY: its element type, its length, and its elements (all of them
    /// up to [`FULL_ARRAY`], else the first [`ARRAY_HEAD`]).
    Array {
        /// The element type.
        elem: ValueType,
        /// How many elements it has.
        len: u64,
        /// The elements kept.
        items: Vec<Value>,
        /// Where its first element is in the file (to read the others:
        /// [`elements`]).
        at: u64,
    },
}

impl Value {
    /// The value as metadata text (a safetensors `__metadata__` value, a
    /// pane's row): a string as itself, anything else as `info` writes it.
    pub fn text(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            other => other.to_json().to_string(),
        }
    }

    /// True for an array `info` summarises (more than [`FULL_ARRAY`]
    /// elements), at any depth.
    pub fn is_summarised(&self) -> bool {
        match self {
            Value::Array { len, items, .. } => {
                *len > FULL_ARRAY || items.iter().any(Value::is_summarised)
            }
            _ => false,
        }
    }

    /// The value as `info --json` writes it (GGUF.md, `info`): integers
    /// exact, FLOAT32 widened exactly (its shortest text reads back to the
    /// same float32), a float that is not finite as `null` (JSON has no
    /// such number), an array of more than 64 elements as `{type, len,
    /// head}`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        let float = |f: f64| serde_json::Number::from_f64(f).map_or(J::Null, J::Number);
        match self {
            Value::Unsigned(u) => J::from(*u),
            Value::Signed(i) => J::from(*i),
            Value::F32(f) => float(f64::from(*f)),
            Value::F64(f) => float(*f),
            Value::Bool(b) => J::Bool(*b),
            Value::Str(s) => J::String(s.clone()),
            Value::Array {
                elem, len, items, ..
            } => {
                let items = J::Array(items.iter().map(Value::to_json).collect());
                if *len > FULL_ARRAY {
                    serde_json::json!({"type": elem.name(), "len": len, "head": items})
                } else {
                    items
                }
            }
        }
    }
}

/// One tensor info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// Its name.
    pub name: String,
    /// Its dimensions as stored: `ne[0]` (the row length) first.
    pub dims: Vec<u64>,
    /// Its ggml type.
    pub ggml_type: GgmlType,
    /// Its offset from the start of the data section.
    pub offset: u64,
}

impl TensorEntry {
    /// The row-major shape: the stored dimensions reversed.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }
}

/// A GGUF file's header.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    /// 2 or 3.
    pub version: u32,
    /// The key/value table, in file order.
    pub metadata: Vec<(String, Value)>,
    /// The tensor infos, in file order.
    pub tensors: Vec<TensorEntry>,
    /// `general.alignment`, or 32.
    pub alignment: u64,
    /// Where the data section starts in the file (absolute).
    pub tensor_data_offset: u64,
}

/// Why a GGUF header cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// Not `GGUF`, or an empty file.
    #[error("not a GGUF file: {0}")]
    Magic(String),
    /// A version other than 2 and 3.
    #[error("GGUF version {0} is not read (only 2 and 3)")]
    Version(u32),
    /// The header ends before what it declares.
    #[error("the header ends at byte {at}: {what} needs {need} more bytes")]
    Truncated {
        /// Where the read stopped.
        at: u64,
        /// What was being read.
        what: String,
        /// Bytes it needed.
        need: u64,
        /// Where the header ends at the least: the smallest sizes of
        /// everything declared and not yet read (what a remote reader may
        /// fetch in one step).
        reach: u64,
    },
    /// A count or length that the rest of the file cannot hold.
    #[error("{what} is {count}, more than the {left} bytes left can hold")]
    Count {
        /// What was counted.
        what: String,
        /// The declared count.
        count: u64,
        /// Bytes left.
        left: u64,
    },
    /// An unknown value type, array element type or ggml type.
    #[error("{0}")]
    Type(String),
    /// Arrays nested too deep.
    #[error("arrays are nested more than {MAX_DEPTH} deep (at byte {0})")]
    Nesting(u64),
    /// A key or tensor name that is not UTF-8, a duplicate, a bad
    /// alignment, or a tensor whose shape or bytes do not fit.
    #[error("{0}")]
    Invalid(String),
}

impl GgufError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            GgufError::Magic(_) => "GgufMagic",
            GgufError::Version(_) => "GgufVersion",
            GgufError::Truncated { .. } => "GgufTruncated",
            GgufError::Count { .. } => "GgufCount",
            GgufError::Type(_) => "GgufType",
            GgufError::Nesting(_) => "GgufNesting",
            GgufError::Invalid(_) => "GgufInvalid",
        }
    }
}

struct Reader<'a> {
    /// The bytes at hand: the whole file, or (remote) a prefix of it.
    bytes: &'a [u8],
    /// The whole file's length, that counts and lengths are checked against.
    file_len: u64,
    pos: usize,
    kept: u64,
    /// Bytes of the strings kept (copied) so far.
    kept_bytes: u64,
    /// The smallest number of bytes still to come for what was declared
    /// and not yet read (pairs, tensor infos, array elements).
    owed: u64,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes` (of a file `file_len` bytes long) from byte
    /// `at`, nothing kept or owed yet.
    fn new(bytes: &'a [u8], file_len: u64, at: u64) -> Self {
        Reader {
            bytes,
            file_len,
            pos: usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len()),
            kept: 0,
            kept_bytes: 0,
            owed: 0,
        }
    }

    /// Bytes at hand after the position.
    fn left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// Bytes of the file after the position.
    fn file_left(&self) -> u64 {
        self.file_len.saturating_sub(self.pos as u64)
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return Err(GgufError::Truncated {
                at: self.pos as u64,
                what: what.to_owned(),
                need: n - self.left(),
                reach: (self.pos as u64)
                    .saturating_add(n)
                    .saturating_add(self.owed),
            });
        }
        let n = n as usize;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A string's bytes: a u64 length, checked against what is left, and,
    /// for a string that is kept (copied), against [`MAX_KEPT_BYTES`]
    /// before it is read.
    fn string_bytes(&mut self, what: &str, keep: bool) -> Result<&'a [u8], GgufError> {
        let len = self.u64(what)?;
        if len > self.file_left() {
            return Err(GgufError::Count {
                what: format!("the length of {what}"),
                count: len,
                left: self.file_left(),
            });
        }
        if keep {
            self.kept_bytes = self.kept_bytes.saturating_add(len);
            if self.kept_bytes > MAX_KEPT_BYTES {
                return Err(GgufError::Invalid(format!(
                    "{what} of {len} bytes at byte {}: the header's kept strings pass {MAX_KEPT_BYTES} bytes",
                    self.pos
                )));
            }
        }
        self.take(len, what)
    }

    /// A count of items of at least `min` bytes each, checked against the
    /// bytes left.
    fn check_count(&self, count: u64, min: u64, what: &str) -> Result<(), GgufError> {
        if count.checked_mul(min).is_none_or(|n| n > self.file_left()) {
            return Err(GgufError::Count {
                what: what.to_owned(),
                count,
                left: self.file_left(),
            });
        }
        Ok(())
    }

    fn keep(&mut self) -> Result<(), GgufError> {
        self.kept += 1;
        if self.kept > MAX_KEPT {
            return Err(GgufError::Invalid(format!(
                "the metadata holds more than {MAX_KEPT} values to keep"
            )));
        }
        Ok(())
    }

    /// A value of type `t`; kept when `keep`, else only read past.
    fn value(&mut self, t: ValueType, depth: usize, keep: bool) -> Result<Value, GgufError> {
        let what = "a metadata value";
        Ok(match t {
            ValueType::U8 => Value::Unsigned(u64::from(self.take(1, what)?[0])),
            ValueType::I8 => Value::Signed(i64::from(self.take(1, what)?[0] as i8)),
            ValueType::U16 => {
                let b = self.take(2, what)?;
                Value::Unsigned(u64::from(u16::from_le_bytes([b[0], b[1]])))
            }
            ValueType::I16 => {
                let b = self.take(2, what)?;
                Value::Signed(i64::from(i16::from_le_bytes([b[0], b[1]])))
            }
            ValueType::U32 => Value::Unsigned(u64::from(self.u32(what)?)),
            ValueType::I32 => Value::Signed(i64::from(self.u32(what)? as i32)),
            ValueType::F32 => Value::F32(f32::from_bits(self.u32(what)?)),
            ValueType::Bool => Value::Bool(self.take(1, what)?[0] != 0),
            ValueType::U64 => Value::Unsigned(self.u64(what)?),
            ValueType::I64 => Value::Signed(self.u64(what)? as i64),
            ValueType::F64 => Value::F64(f64::from_bits(self.u64(what)?)),
            ValueType::Str => {
                let b = self.string_bytes("a string", keep)?;
                if keep {
                    Value::Str(String::from_utf8_lossy(b).into_owned())
                } else {
                    Value::Str(String::new())
                }
            }
            ValueType::Array => {
                if depth >= MAX_DEPTH {
                    return Err(GgufError::Nesting(self.pos as u64));
                }
                let code = self.u32("an array's element type")?;
                let elem = ValueType::from_id(code).ok_or_else(|| {
                    GgufError::Type(format!("an array's element type {code} is not a GGUF type"))
                })?;
                let len = self.u64("an array's length")?;
                self.check_count(len, elem.min_bytes(), "an array's length")?;
                let at = self.pos as u64;
                let kept = if len > FULL_ARRAY { ARRAY_HEAD } else { len };
                let mut items = Vec::new();
                let min = elem.min_bytes();
                self.owed = self.owed.saturating_add(len * min);
                for i in 0..len {
                    let keep_this = keep && i < kept;
                    self.owed = self.owed.saturating_sub(min);
                    let v = self.value(elem, depth + 1, keep_this)?;
                    if keep_this {
                        self.keep()?;
                        items.push(v);
                    }
                }
                Value::Array {
                    elem,
                    len,
                    items,
                    at,
                }
            }
        })
    }
}

/// Elements `from..from + count` of an array of `len` elements of type
/// `elem` whose first element is at `at` in `bytes` (a file's header): the
/// ones before are read past (strings have no fixed size), nested arrays
/// kept as the header keeps them. Fewer at the end of the array. (A reader
/// going page by page keeps where each page starts and calls [`page`].)
pub fn elements(
    bytes: &[u8],
    elem: ValueType,
    at: u64,
    len: u64,
    from: u64,
    count: u64,
) -> Result<Vec<Value>, GgufError> {
    let mut r = Reader::new(bytes, bytes.len() as u64, at);
    let min = elem.min_bytes();
    let end = from.saturating_add(count).min(len);
    // A fixed-size element is found by arithmetic, not by reading past.
    if matches!(elem, ValueType::Str | ValueType::Array) {
        for _ in 0..from.min(len) {
            r.value(elem, 1, false)?;
        }
    } else {
        let skip = usize::try_from(from.min(len).saturating_mul(min)).unwrap_or(usize::MAX);
        r.pos = r.pos.saturating_add(skip).min(bytes.len());
    }
    Ok(page(bytes, elem, r.pos as u64, end.saturating_sub(from))?.0)
}

/// `count` elements of type `elem` from byte `at` of `bytes` (a file's
/// header), and the byte after them: where the next page starts, so that
/// paging on costs a page, not the elements before it.
pub fn page(
    bytes: &[u8],
    elem: ValueType,
    at: u64,
    count: u64,
) -> Result<(Vec<Value>, u64), GgufError> {
    let mut r = Reader::new(bytes, bytes.len() as u64, at);
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(4096));
    for _ in 0..count {
        out.push(r.value(elem, 1, true)?);
    }
    Ok((out, r.pos as u64))
}

/// Reads the header at the start of `bytes` (the whole file: tensor
/// offsets and sizes are checked against it).
pub fn parse(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    parse_prefix(bytes, bytes.len() as u64)
}

/// Reads the header from `bytes`, the first bytes of a file of `file_len`
/// bytes (a remote file's fetched start): counts, lengths and tensor
/// ranges are checked against the whole file; a read past `bytes` is a
/// [`GgufError::Truncated`] whose `at + need` says how far the header
/// reaches so far.
pub fn parse_prefix(bytes: &[u8], file_len: u64) -> Result<GgufHeader, GgufError> {
    let file_len = file_len.max(bytes.len() as u64);
    if bytes.is_empty() {
        return Err(GgufError::Magic("the file is empty".into()));
    }
    if !bytes.starts_with(b"GGUF") {
        return Err(GgufError::Magic(format!(
            "it starts {:?}, not \"GGUF\"",
            String::from_utf8_lossy(&bytes[..bytes.len().min(4)])
        )));
    }
    let mut r = Reader::new(bytes, file_len, 4);
    let version = r.u32("the version")?;
    if version != 2 && version != 3 {
        return Err(GgufError::Version(version));
    }
    let n_tensors = r.u64("the tensor count")?;
    let n_kv = r.u64("the key/value count")?;
    // Far above any model (the largest hold a few thousand tensors and a
    // few dozen keys), and what keeps every verb's memory bounded.
    for (count, most, what) in [
        (n_tensors, MAX_TENSORS, "the tensor count"),
        (n_kv, MAX_KEYS, "the key/value count"),
    ] {
        if count > most {
            return Err(GgufError::Count {
                what: format!("{what} (at most {most} are read)"),
                count,
                left: r.file_left(),
            });
        }
    }
    // A pair is at least a key length, a type and one byte; a tensor info
    // a name length, n_dims, a type and an offset.
    r.check_count(n_kv, 13, "the key/value count")?;
    r.check_count(n_tensors, 24, "the tensor count")?;
    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv.min(4096) as usize);
    let mut keys = std::collections::HashSet::new();
    let mut alignment_type = None;
    r.owed = (n_kv * 13).saturating_add(n_tensors * 24);
    for _ in 0..n_kv {
        r.owed = r.owed.saturating_sub(13);
        let key = utf8(r.string_bytes("a key", true)?, "a key")?;
        if !keys.insert(key.clone()) {
            return Err(GgufError::Invalid(format!("key {key:?} appears twice")));
        }
        let code = r.u32("a value type")?;
        let t = ValueType::from_id(code).ok_or_else(|| {
            GgufError::Type(format!(
                "key {key:?} has value type {code}, not a GGUF type"
            ))
        })?;
        let v = r.value(t, 0, true)?;
        r.keep()?;
        if key == "general.alignment" {
            alignment_type = Some(t);
        }
        metadata.push((key, v));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::Unsigned(a)))
            if a.is_power_of_two() && alignment_type == Some(ValueType::U32) =>
        {
            *a
        }
        Some((_, v)) => {
            return Err(GgufError::Invalid(format!(
                "general.alignment is {} ({}): it must be a UINT32 power of two",
                v.to_json(),
                alignment_type.map_or("?", ValueType::name)
            )));
        }
    };
    let mut tensors: Vec<TensorEntry> = Vec::with_capacity(n_tensors.min(4096) as usize);
    let mut names = std::collections::HashSet::new();
    for _ in 0..n_tensors {
        r.owed = r.owed.saturating_sub(24);
        let name = utf8(r.string_bytes("a tensor name", true)?, "a tensor name")?;
        if !names.insert(name.clone()) {
            return Err(GgufError::Invalid(format!(
                "two tensors are named {name:?}"
            )));
        }
        let n_dims = r.u32("a tensor's dimension count")?;
        r.check_count(u64::from(n_dims), 8, "a tensor's dimension count")?;
        let dims = (0..n_dims)
            .map(|_| r.u64("a dimension"))
            .collect::<Result<Vec<u64>, _>>()?;
        let code = r.u32("a ggml type")?;
        let ggml_type = GgmlType::from_id(code).ok_or_else(|| {
            GgufError::Type(format!(
                "tensor {name:?} has ggml type {code}, which is not read"
            ))
        })?;
        let offset = r.u64("a tensor offset")?;
        tensors.push(TensorEntry {
            name,
            dims,
            ggml_type,
            offset,
        });
    }
    let end = r.pos as u64;
    let tensor_data_offset = end.div_ceil(alignment).saturating_mul(alignment);
    let data_len = file_len.saturating_sub(tensor_data_offset);
    for t in &tensors {
        let n = stored_bytes(t).map_err(GgufError::Invalid)?;
        if t.offset.checked_add(n).is_none_or(|e| e > data_len) {
            return Err(GgufError::Invalid(format!(
                "tensor {:?}: its {n} bytes at offset {} run past the data section's {data_len} bytes",
                t.name, t.offset
            )));
        }
    }
    Ok(GgufHeader {
        version,
        metadata,
        tensors,
        alignment,
        tensor_data_offset,
    })
}

/// The stored bytes of a tensor: elements over the block size times the
/// block bytes, with `ne[0]` a multiple of the block size.
pub fn stored_bytes(t: &TensorEntry) -> Result<u64, String> {
    let numel = t
        .dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            format!(
                "tensor {:?}: dimensions {:?} overflow 64 bits",
                t.name, t.dims
            )
        })?;
    let (block, bytes) = t.ggml_type.block();
    if t.dims.first().is_some_and(|&ne0| ne0 % block != 0) {
        return Err(format!(
            "tensor {:?}: its row of {} elements is not a multiple of {}'s block of {block}",
            t.name,
            t.dims[0],
            t.ggml_type.name()
        ));
    }
    (numel / block)
        .checked_mul(bytes)
        .ok_or_else(|| format!("tensor {:?}: its size overflows 64 bits", t.name))
}

fn utf8(b: &[u8], what: &str) -> Result<String, GgufError> {
    String::from_utf8(b.to_vec()).map_err(|_| GgufError::Invalid(format!("{what} is not UTF-8")))
}
