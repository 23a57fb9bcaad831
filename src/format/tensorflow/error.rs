//! Why a TensorBundle is refused: one variant per rule, each carrying its
//! evidence (the entry's key, the byte offset or range, what was expected
//! and what was found).

/// A refused TensorBundle (`.index` and its data files).
#[derive(Debug, thiserror::Error)]
pub enum TensorflowError {
    /// The `.index` is empty or shorter than the table's footer.
    #[error("the .index is {len} bytes; a table needs at least its 48-byte footer")]
    TooShort {
        /// The file's length.
        len: u64,
    },
    /// The footer does not end in the table magic.
    #[error(
        "the footer's magic is {found:#018x}, not the table magic 0xdb4775248b80fb57 (bytes {at}..{end})"
    )]
    BadMagic {
        /// The 8 bytes found, as a little-endian number.
        found: u64,
        /// Where they are.
        at: u64,
        /// Their end (the file's length).
        end: u64,
    },
    /// A block handle points outside the table.
    #[error(
        "the {which} block handle points at bytes {offset}..{end} (with its 5-byte trailer), past the table's {limit} bytes before the footer"
    )]
    BlockOutOfBounds {
        /// Which block: `index` or `data`.
        which: &'static str,
        /// The block's offset.
        offset: u64,
        /// Where it and its trailer end (saturating).
        end: u64,
        /// Where the footer starts.
        limit: u64,
    },
    /// A block's stored CRC-32C is not the CRC of its bytes and type byte.
    #[error(
        "the {which} block at bytes {offset}..{end}: stored CRC-32C {stored:#010x} (masked), computed {computed:#010x}"
    )]
    BlockChecksum {
        /// Which block.
        which: &'static str,
        /// The block's offset.
        offset: u64,
        /// Its end (without the trailer).
        end: u64,
        /// The masked CRC stored after it.
        stored: u32,
        /// The masked CRC of its bytes.
        computed: u32,
    },
    /// A block is compressed (only uncompressed blocks are read).
    #[error(
        "the {which} block at byte {offset} has compression type {kind}; only 0 (none) is read"
    )]
    Compressed {
        /// Which block.
        which: &'static str,
        /// The block's offset.
        offset: u64,
        /// The type byte.
        kind: u8,
    },
    /// A block's entries or restart array break the table format.
    #[error("the {which} block at byte {block}: {rule} (at byte {at})")]
    BadBlock {
        /// Which block.
        which: &'static str,
        /// The block's offset in the file.
        block: u64,
        /// The rule broken.
        rule: String,
        /// The file offset where it is broken.
        at: u64,
    },
    /// A key is not greater than the one before it.
    #[error(
        "key {key} at byte {at} is not greater than the key before it ({previous}): the table's keys must be strictly increasing"
    )]
    KeysOutOfOrder {
        /// The key (escaped).
        key: String,
        /// The one before it (escaped).
        previous: String,
        /// The entry's file offset.
        at: u64,
    },
    /// The keys together are larger than what is kept in memory.
    #[error("the table's keys add up to more than {limit} bytes")]
    KeysTooLarge {
        /// The bound.
        limit: u64,
    },
    /// The table has no header entry (the empty key).
    #[error("the table has no header entry (the empty key holding BundleHeaderProto)")]
    MissingHeader,
    /// A protobuf value cannot be read.
    #[error("the {message} of key {key} cannot be read: {rule}")]
    BadProto {
        /// The entry's key (escaped; empty for the header).
        key: String,
        /// `BundleHeaderProto` or `BundleEntryProto`.
        message: &'static str,
        /// What is wrong, and where in the value.
        rule: String,
    },
    /// The bundle was written big-endian (or with an unknown byte order).
    #[error("the bundle's endianness is {value} ({name}); only little-endian bundles are read")]
    Endianness {
        /// The header's `endianness`.
        value: i32,
        /// Its name.
        name: &'static str,
    },
    /// The header's version says this reader (TensorBundle version 1) may not read it.
    #[error(
        "the bundle's version (producer {producer}, min_consumer {min_consumer}) excludes readers of version 1"
    )]
    UnsupportedVersion {
        /// `version.producer`.
        producer: i32,
        /// `version.min_consumer`.
        min_consumer: i32,
    },
    /// `num_shards` is negative or absurdly large.
    #[error("num_shards is {num_shards}; 0..={limit} are read")]
    BadShardCount {
        /// The header's value.
        num_shards: i64,
        /// The bound.
        limit: u64,
    },
    /// A key that names a tensor is not UTF-8.
    #[error("key {key} at byte {at} is not UTF-8")]
    KeyNotUtf8 {
        /// The key (escaped).
        key: String,
        /// The entry's file offset.
        at: u64,
    },
    /// A dtype with no safetensors dtype (or unknown).
    #[error("tensor {key:?} has dtype {dtype} ({name}), which is not read")]
    UnsupportedDtype {
        /// The tensor.
        key: String,
        /// The `DataType` number.
        dtype: i32,
        /// Its name (`DT_COMPLEX128`, …, or `unknown`).
        name: &'static str,
    },
    /// A shape with an unknown rank, a negative dimension, too many
    /// dimensions or an element count that overflows.
    #[error("tensor {key:?}: {rule}")]
    BadShape {
        /// The entry's key (escaped if binary).
        key: String,
        /// What is wrong.
        rule: String,
    },
    /// An entry's shard is not one of the bundle's.
    #[error("entry {key:?} is in shard {shard}, but the bundle has {num_shards} shards")]
    ShardOutOfRange {
        /// The entry's key.
        key: String,
        /// Its `shard_id`.
        shard: i64,
        /// The header's `num_shards`.
        num_shards: u32,
    },
    /// An entry's `size` is not its shape's byte count (or its offset or
    /// size is negative).
    #[error("entry {key:?}: {rule}")]
    SizeMismatch {
        /// The entry's key.
        key: String,
        /// What is wrong.
        rule: String,
    },
    /// An entry's bytes reach past the end of its data file.
    #[error("entry {key:?}: bytes {offset}..{end} of {file}, which is {file_size} bytes")]
    DataOutsideFile {
        /// The entry's key.
        key: String,
        /// The data file's name.
        file: String,
        /// The entry's offset.
        offset: u64,
        /// Its end (saturating).
        end: u64,
        /// The data file's size.
        file_size: u64,
    },
    /// A data file's size could not be had (missing, unreadable).
    #[error("data file {file} (shard {shard}) cannot be read: {source}")]
    DataFile {
        /// Its name.
        file: String,
        /// Its shard number.
        shard: u32,
        /// Why.
        source: std::io::Error,
    },
    /// A slice a partitioned tensor lists has no entry.
    #[error("tensor {key:?}: its slice {slice} has no entry (key {slice_key})")]
    SliceMissing {
        /// The tensor.
        key: String,
        /// The slice, as `start,length` per dimension.
        slice: String,
        /// The slice's key (escaped).
        slice_key: String,
    },
    /// A partitioned tensor's slices do not tile it exactly, or a slice's
    /// entry does not match it.
    #[error("tensor {key:?}: {rule}")]
    BadSlice {
        /// The tensor.
        key: String,
        /// What is wrong.
        rule: String,
    },
}

impl TensorflowError {
    /// A stable identifier for the rule, as `--json`'s `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            TensorflowError::TooShort { .. } => "TooShort",
            TensorflowError::BadMagic { .. } => "BadMagic",
            TensorflowError::BlockOutOfBounds { .. } => "BlockOutOfBounds",
            TensorflowError::BlockChecksum { .. } => "ChecksumMismatch",
            TensorflowError::Compressed { .. } => "UnsupportedCompression",
            TensorflowError::BadBlock { .. } => "BadBlock",
            TensorflowError::KeysOutOfOrder { .. } => "KeysOutOfOrder",
            TensorflowError::KeysTooLarge { .. } => "KeysTooLarge",
            TensorflowError::MissingHeader => "MissingHeader",
            TensorflowError::BadProto { .. } => "BadProto",
            TensorflowError::Endianness { .. } => "UnsupportedEndianness",
            TensorflowError::UnsupportedVersion { .. } => "UnsupportedVersion",
            TensorflowError::BadShardCount { .. } => "BadShardCount",
            TensorflowError::KeyNotUtf8 { .. } => "KeyNotUtf8",
            TensorflowError::UnsupportedDtype { .. } => "UnsupportedDtype",
            TensorflowError::BadShape { .. } => "BadShape",
            TensorflowError::ShardOutOfRange { .. } => "ShardOutOfRange",
            TensorflowError::SizeMismatch { .. } => "SizeMismatch",
            TensorflowError::DataOutsideFile { .. } => "DataOutsideFile",
            TensorflowError::DataFile { .. } => "DataFileMissing",
            TensorflowError::SliceMissing { .. } => "SliceMissing",
            TensorflowError::BadSlice { .. } => "BadSlice",
        }
    }

    /// The tensor (or entry key) the error concerns, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            TensorflowError::UnsupportedDtype { key, .. }
            | TensorflowError::BadShape { key, .. }
            | TensorflowError::ShardOutOfRange { key, .. }
            | TensorflowError::SizeMismatch { key, .. }
            | TensorflowError::DataOutsideFile { key, .. }
            | TensorflowError::SliceMissing { key, .. }
            | TensorflowError::BadSlice { key, .. } => Some(key),
            TensorflowError::BadProto { key, .. } if !key.is_empty() => Some(key),
            _ => None,
        }
    }
}

/// A key as text for messages: UTF-8 as itself, other bytes escaped.
pub fn show_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if !s.starts_with('\0') => s.to_owned(),
        _ => key.escape_ascii().to_string(),
    }
}
