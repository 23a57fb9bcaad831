//! Why an HDF5 file is refused: one variant per rule, each with its
//! evidence (what was read, at which byte, and for a dataset its path).

/// An HDF5 file (or one of its datasets) that cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Hdf5Error {
    /// No superblock signature at offset 0 or any power of two below the
    /// file's length.
    #[error(
        "no HDF5 superblock: the signature \\x89HDF\\r\\n\\x1a\\n is at none of offsets 0, 512, 1024, ... of the {len}-byte file"
    )]
    BadMagic {
        /// The file's length.
        len: u64,
    },
    /// A structure needs bytes past the end of the file.
    #[error("{what} needs bytes {start}..{end}, past the end of the file ({len} bytes)")]
    Truncated {
        /// What was being read.
        what: String,
        /// Its first byte.
        start: u64,
        /// One past its last byte.
        end: u64,
        /// The file's length.
        len: u64,
    },
    /// A structure's signature is not the one its address promises.
    #[error("{what} at byte {at}: signature {found:?}, expected {expected:?}")]
    BadSignature {
        /// What was being read.
        what: &'static str,
        /// Its absolute byte offset.
        at: u64,
        /// The signature expected.
        expected: &'static str,
        /// The bytes found.
        found: String,
    },
    /// A Jenkins lookup3 checksum of a metadata block does not match.
    #[error("{what} at byte {at}: checksum {computed:#010x} computed, {stored:#010x} stored")]
    ChecksumMismatch {
        /// What was being read.
        what: &'static str,
        /// Its absolute byte offset.
        at: u64,
        /// The checksum stored in the file.
        stored: u32,
        /// The checksum of its bytes.
        computed: u32,
    },
    /// A field breaks a rule of the format.
    #[error("{what} at byte {at}: {message}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// Its absolute byte offset.
        at: u64,
        /// Which rule, what was found.
        message: String,
    },
    /// A valid HDF5 feature this reader does not read.
    #[error("unsupported HDF5 feature: {message}")]
    Unsupported {
        /// What the feature is, and where.
        message: String,
    },
    /// A dataset's filter pipeline holds a filter this reader does not
    /// know (only deflate 1, shuffle 2, fletcher32 3 and LZF 32000 are).
    #[error("filter {id}{} in the pipeline is unknown (deflate 1, shuffle 2, fletcher32 3 and LZF 32000 are read)", name.as_ref().map(|n| format!(" ({n:?})")).unwrap_or_default())]
    UnknownFilter {
        /// The filter's id.
        id: u16,
        /// Its name, when the pipeline gives one.
        name: Option<String>,
    },
    /// A dataset's storage holds fewer bytes than its dataspace needs.
    #[error("the storage holds {have} bytes but the dataspace needs {need}")]
    StorageTooSmall {
        /// Bytes the dataspace needs (elements x element size).
        need: u64,
        /// Bytes the layout stores.
        have: u64,
    },
    /// A dataset larger than any tensor read (2^40 bytes), or whose size
    /// overflows.
    #[error("the dataset is {bytes} bytes; at most 2^40 bytes are read")]
    TooLarge {
        /// Its size in bytes (saturated).
        bytes: u64,
    },
    /// A bound of the reader is reached (objects, links, chunks, nesting,
    /// B-tree nodes).
    #[error("{what}: more than {limit}")]
    Limit {
        /// What was counted.
        what: &'static str,
        /// The bound.
        limit: u64,
    },
    /// An error about one dataset.
    #[error("dataset {path:?}: {source}")]
    InDataset {
        /// The dataset's path from the root, without the leading `/`.
        path: String,
        /// What is wrong with it.
        source: Box<Hdf5Error>,
    },
}

impl Hdf5Error {
    /// A stable name of the rule broken, as `--json`'s `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Hdf5Error::BadMagic { .. } => "BadMagic",
            Hdf5Error::Truncated { .. } => "Truncated",
            Hdf5Error::BadSignature { .. } => "BadSignature",
            Hdf5Error::ChecksumMismatch { .. } => "ChecksumMismatch",
            Hdf5Error::Malformed { .. } => "Malformed",
            Hdf5Error::Unsupported { .. } => "Hdf5Unsupported",
            Hdf5Error::UnknownFilter { .. } => "UnknownFilter",
            Hdf5Error::StorageTooSmall { .. } => "StorageTooSmall",
            Hdf5Error::TooLarge { .. } => "TensorTooLarge",
            Hdf5Error::Limit { .. } => "LimitExceeded",
            Hdf5Error::InDataset { source, .. } => source.kind(),
        }
    }

    /// The dataset (tensor name) the error is about, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            Hdf5Error::InDataset { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The error, said of the dataset at `path` (kept as it is when it
    /// already names one).
    pub(super) fn in_dataset(self, path: &str) -> Hdf5Error {
        match self {
            e @ Hdf5Error::InDataset { .. } => e,
            e => Hdf5Error::InDataset {
                path: path.to_owned(),
                source: Box::new(e),
            },
        }
    }

    /// A malformed field.
    pub(super) fn malformed(what: &'static str, at: u64, message: impl Into<String>) -> Self {
        Hdf5Error::Malformed {
            what,
            at,
            message: message.into(),
        }
    }

    /// An unsupported feature.
    pub(super) fn unsupported(message: impl Into<String>) -> Self {
        Hdf5Error::Unsupported {
            message: message.into(),
        }
    }
}
