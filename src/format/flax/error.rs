//! Why a Flax msgpack file is refused: one variant per rule, each naming
//! the byte offset and, where it concerns one, the tensor (its joined name).

/// A Flax `.msgpack` file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlaxError {
    /// The file does not start with a msgpack map (Flax's state dict).
    #[error("not a Flax msgpack file: {0}")]
    NotAMap(String),
    /// A value runs past the end of the file (or of its ext payload).
    #[error("{what} at byte {at} needs {need} bytes, only {left} are left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts.
        at: u64,
        /// Bytes it declares or needs.
        need: u64,
        /// Bytes left before the end.
        left: u64,
    },
    /// An array or map count that the bytes left cannot hold (each
    /// element takes one byte at the least).
    #[error(
        "{what} at byte {at} declares {count} elements, more than the {left} bytes left can hold"
    )]
    CountTooLarge {
        /// An array or a map.
        what: &'static str,
        /// Where its header is.
        at: u64,
        /// The declared count (pairs for a map).
        count: u64,
        /// Bytes left before the end.
        left: u64,
    },
    /// Containers nested deeper than [`super::msgpack::MAX_DEPTH`].
    #[error(
        "values are nested more than {} deep (at byte {at})",
        super::msgpack::MAX_DEPTH
    )]
    NestingTooDeep {
        /// The header that would nest one level too deep.
        at: u64,
    },
    /// More values, or longer names, than any checkpoint has.
    #[error("{0}")]
    TooLarge(String),
    /// A byte that msgpack never uses (0xc1).
    #[error("byte {at} is 0x{byte:02x}, which is no msgpack type")]
    BadMsgpack {
        /// Its offset.
        at: u64,
        /// The byte.
        byte: u8,
    },
    /// Bytes after the top-level map.
    #[error("{len} bytes follow the top-level map, from byte {at}")]
    TrailingBytes {
        /// Where they start.
        at: u64,
        /// How many.
        len: u64,
    },
    /// A string (a key, a value) that is not UTF-8 (msgpack_restore reads
    /// strings as Python `str`).
    #[error("the string at bytes {at}..{end} is not UTF-8")]
    BadUtf8 {
        /// Its first byte.
        at: u64,
        /// Past its last byte.
        end: u64,
    },
    /// A map key that is not a string, bytes or an integer.
    #[error("a key under {under:?} is {found}: only strings and integers name values")]
    BadKey {
        /// The name of the map holding it (`""` for the top level).
        under: String,
        /// The key's msgpack type.
        found: &'static str,
    },
    /// An ext of a code other than 1 (ndarray), 2 (complex), 3 (numpy scalar).
    #[error("{name:?} is an ext of code {code} at byte {at}: Flax writes only codes 1, 2 and 3")]
    UnknownExt {
        /// The value's joined name.
        name: String,
        /// The ext code.
        code: i8,
        /// The ext payload's first byte.
        at: u64,
    },
    /// An ndarray or scalar ext whose payload is not `[shape, dtype, bytes]`,
    /// or a complex ext that is not `[re, im]`.
    #[error("{name:?} (ext at byte {at}): {message}")]
    BadExt {
        /// The value's joined name.
        name: String,
        /// The ext payload's first byte.
        at: u64,
        /// What is wrong.
        message: String,
    },
    /// A dtype name outside FRAMEWORKS.md's table.
    #[error("tensor {name:?} has dtype {dtype:?}, which has no safetensors dtype")]
    UnsupportedDtype {
        /// The tensor.
        name: String,
        /// The name as stored (lossy UTF-8, cut at 64 characters).
        dtype: String,
    },
    /// A shape whose element count or byte count overflows 64 bits.
    #[error("tensor {name:?} has shape {shape:?}, whose size overflows 64 bits")]
    ShapeOverflow {
        /// The tensor.
        name: String,
        /// Its shape.
        shape: Vec<u64>,
    },
    /// An ndarray's bytes are not exactly its shape's size.
    #[error(
        "tensor {name:?} ({dtype} {shape:?}) needs {need} bytes, its data at byte {at} has {found}"
    )]
    SizeMismatch {
        /// The tensor.
        name: String,
        /// Its dtype.
        dtype: crate::dtype::Dtype,
        /// Its shape.
        shape: Vec<u64>,
        /// Bytes the shape needs.
        need: u64,
        /// Bytes stored.
        found: u64,
        /// Where the stored bytes start.
        at: u64,
    },
    /// A chunked array (`__msgpack_chunked_array__`) that does not make one
    /// tensor: a key missing, a chunk missing, chunks of different dtypes or
    /// sizes that do not add up to its shape.
    #[error("chunked array {name:?}: {message}")]
    BadChunkedArray {
        /// The tensor.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// Two values under one joined name.
    #[error("two values are named {name:?}")]
    DuplicateName {
        /// The name.
        name: String,
    },
}

impl FlaxError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            FlaxError::NotAMap(_) => "NotAMap",
            FlaxError::Truncated { .. } => "Truncated",
            FlaxError::CountTooLarge { .. } => "CountTooLarge",
            FlaxError::NestingTooDeep { .. } => "NestingTooDeep",
            FlaxError::TooLarge(_) => "TooLarge",
            FlaxError::BadMsgpack { .. } => "BadMsgpack",
            FlaxError::TrailingBytes { .. } => "TrailingBytes",
            FlaxError::BadUtf8 { .. } => "BadUtf8",
            FlaxError::BadKey { .. } => "BadKey",
            FlaxError::UnknownExt { .. } => "UnknownExt",
            FlaxError::BadExt { .. } => "BadExt",
            FlaxError::UnsupportedDtype { .. } => "UnsupportedDtype",
            FlaxError::ShapeOverflow { .. } => "ShapeOverflow",
            FlaxError::SizeMismatch { .. } => "SizeMismatch",
            FlaxError::BadChunkedArray { .. } => "BadChunkedArray",
            FlaxError::DuplicateName { .. } => "DuplicateName",
        }
    }

    /// The tensor (or value) the error concerns, by its joined name.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            FlaxError::UnknownExt { name, .. }
            | FlaxError::BadExt { name, .. }
            | FlaxError::UnsupportedDtype { name, .. }
            | FlaxError::ShapeOverflow { name, .. }
            | FlaxError::SizeMismatch { name, .. }
            | FlaxError::BadChunkedArray { name, .. }
            | FlaxError::DuplicateName { name } => Some(name),
            _ => None,
        }
    }
}
