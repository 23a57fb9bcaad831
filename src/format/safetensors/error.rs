//! Why a file is not a valid safetensors file: one variant per check of the
//! reference implementation, each carrying its evidence.

use std::fmt;

use crate::dtype::Dtype;

/// Another file format recognised by its signature, reported when a file
/// fails the header checks (2-6) of the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForeignFormat {
    /// A zip archive: a PyTorch `.pt`/`.bin` checkpoint or a NumPy `.npz`.
    PytorchZip,
    /// A raw Python pickle (old PyTorch checkpoints).
    Pickle,
    /// A GGUF model file (llama.cpp).
    Gguf,
    /// A NumPy `.npy` array (`\x93NUMPY`).
    Npy,
    /// An HDF5 file (Keras `.h5`).
    Hdf5,
}

impl ForeignFormat {
    /// The stable identifier used in JSON output (`detected_format`).
    pub const fn id(self) -> &'static str {
        match self {
            ForeignFormat::PytorchZip => "pytorch-zip",
            ForeignFormat::Pickle => "pickle",
            ForeignFormat::Gguf => "gguf",
            ForeignFormat::Npy => "npy",
            ForeignFormat::Hdf5 => "hdf5",
        }
    }

    /// A phrase for messages: what the file most likely is.
    pub const fn description(self) -> &'static str {
        match self {
            ForeignFormat::PytorchZip => {
                "a zip archive (a PyTorch .pt/.bin checkpoint or a NumPy .npz), not safetensors"
            }
            ForeignFormat::Pickle => {
                "a Python pickle (a legacy PyTorch checkpoint), not safetensors"
            }
            ForeignFormat::Gguf => "a GGUF model file, not safetensors",
            ForeignFormat::Npy => "a NumPy .npy array, not safetensors",
            ForeignFormat::Hdf5 => "an HDF5 file (such as Keras .h5), not safetensors",
        }
    }
}

/// Which step of the size computation overflowed (check 8 or 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowStage {
    /// The product of the shape's dimensions.
    Elements,
    /// Elements times bits per element.
    Bits,
}

/// A reason a file is not valid safetensors.
///
/// The variants are the reference implementation's error kinds, in the order
/// of its checks; [`FormatError::kind`] returns the reference's variant name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Check 1: the file is shorter than the 8-byte header length.
    #[error("file is {file_size} bytes; a safetensors file starts with an 8-byte header length")]
    HeaderTooSmall {
        /// Length of the file in bytes.
        file_size: u64,
    },
    /// Checks 2-3: the header length exceeds 100,000,000 bytes.
    #[error("{}", header_too_large(*header_size, *detected))]
    HeaderTooLarge {
        /// The header length N read from bytes 0..8.
        header_size: u64,
        /// Another format recognised by its first bytes.
        detected: Option<ForeignFormat>,
    },
    /// Check 4: the header runs past the end of the file.
    #[error("{}", with_detected(format!("header length {header_size} needs bytes 8..{} but the file has {file_size} bytes", header_size.saturating_add(8)), *detected))]
    InvalidHeaderLength {
        /// The header length N read from bytes 0..8.
        header_size: u64,
        /// Length of the file in bytes.
        file_size: u64,
        /// Another format recognised by its first bytes.
        detected: Option<ForeignFormat>,
    },
    /// Check 5: the header is not valid UTF-8.
    #[error("{}", with_detected(format!("header is not valid UTF-8: invalid byte at file offset {byte_offset}"), *detected))]
    InvalidHeader {
        /// File offset of the first invalid byte.
        byte_offset: u64,
        /// Another format recognised by its first bytes.
        detected: Option<ForeignFormat>,
    },
    /// Check 6: the header is not the JSON object the format requires.
    #[error("{}", with_detected(format!("header JSON is invalid at file offset {byte_offset} (line {line}, column {column}): {message}"), *detected))]
    InvalidHeaderDeserialization {
        /// What the JSON parser or the schema rejected.
        message: String,
        /// Line in the header (1-based).
        line: usize,
        /// Column in the header (1-based, in bytes).
        column: usize,
        /// File offset of the error (8 + position in the header).
        byte_offset: u64,
        /// Another format recognised by its first bytes.
        detected: Option<ForeignFormat>,
    },
    /// Check 7: a tensor does not start where the previous one ends, or ends
    /// before it begins.
    #[error("{}", invalid_offset(tensor, *data_offsets, *expected_begin))]
    InvalidOffset {
        /// The tensor whose offsets are wrong.
        tensor: String,
        /// Its `data_offsets` as written (relative to the data buffer).
        data_offsets: [u64; 2],
        /// Where it should begin: the end of the previous tensor (0 first).
        expected_begin: u64,
    },
    /// Checks 8-9: the element count or the size in bits overflows 64 bits.
    #[error("tensor {tensor:?}: {} of shape {shape:?} ({dtype}) overflows 64 bits", match stage { OverflowStage::Elements => "element count", OverflowStage::Bits => "size in bits" })]
    ValidationOverflow {
        /// The tensor's name (after JSON unescaping).
        tensor: String,
        /// Its dtype, which sets the bits per element.
        dtype: Dtype,
        /// Its shape, as written.
        shape: Vec<u64>,
        /// Which product overflowed: the element count or the size in bits.
        stage: OverflowStage,
    },
    /// Check 10: the tensor's size in bits is not a whole number of bytes.
    #[error(
        "tensor {tensor:?}: {elements} elements of {dtype} are {bits} bits, not a whole number of bytes"
    )]
    MisalignedSlice {
        /// The tensor's name (after JSON unescaping).
        tensor: String,
        /// Its dtype, which sets the bits per element.
        dtype: Dtype,
        /// Its element count (the product of the shape).
        elements: u64,
        /// Its size in bits: elements × bits per element.
        bits: u64,
    },
    /// Check 11: the byte range does not match dtype × shape.
    #[error("tensor {tensor:?}: data_offsets [{}, {}] span {found_bytes} bytes but {dtype} {shape:?} needs {expected_bytes}", data_offsets[0], data_offsets[1])]
    TensorInvalidInfo {
        /// The tensor's name (after JSON unescaping).
        tensor: String,
        /// Its dtype, which sets the bits per element.
        dtype: Dtype,
        /// Its shape, as written.
        shape: Vec<u64>,
        /// Its `data_offsets` as written (relative to the data buffer).
        data_offsets: [u64; 2],
        /// Bytes its dtype and shape need.
        expected_bytes: u64,
        /// Bytes its offsets span (end − begin).
        found_bytes: u64,
    },
    /// Check 12: the byte buffer is not exactly as long as the tensors need.
    #[error("{}", incomplete_buffer(*header_size, *data_end, *file_size))]
    MetadataIncompleteBuffer {
        /// The header length N read from bytes 0..8.
        header_size: u64,
        /// The end of the last tensor's data (relative to the buffer).
        data_end: u64,
        /// Length of the file in bytes.
        file_size: u64,
    },
}

impl FormatError {
    /// The reference implementation's name for this error kind.
    pub const fn kind(&self) -> &'static str {
        match self {
            FormatError::HeaderTooSmall { .. } => "HeaderTooSmall",
            FormatError::HeaderTooLarge { .. } => "HeaderTooLarge",
            FormatError::InvalidHeaderLength { .. } => "InvalidHeaderLength",
            FormatError::InvalidHeader { .. } => "InvalidHeader",
            FormatError::InvalidHeaderDeserialization { .. } => "InvalidHeaderDeserialization",
            FormatError::InvalidOffset { .. } => "InvalidOffset",
            FormatError::ValidationOverflow { .. } => "ValidationOverflow",
            FormatError::MisalignedSlice { .. } => "MisalignedSlice",
            FormatError::TensorInvalidInfo { .. } => "TensorInvalidInfo",
            FormatError::MetadataIncompleteBuffer { .. } => "MetadataIncompleteBuffer",
        }
    }

    /// The tensor the error is about, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            FormatError::InvalidOffset { tensor, .. }
            | FormatError::ValidationOverflow { tensor, .. }
            | FormatError::MisalignedSlice { tensor, .. }
            | FormatError::TensorInvalidInfo { tensor, .. } => Some(tensor),
            _ => None,
        }
    }

    /// The other file format recognised by its signature, if any.
    pub const fn detected_format(&self) -> Option<ForeignFormat> {
        match self {
            FormatError::HeaderTooLarge { detected, .. }
            | FormatError::InvalidHeaderLength { detected, .. }
            | FormatError::InvalidHeader { detected, .. }
            | FormatError::InvalidHeaderDeserialization { detected, .. } => *detected,
            _ => None,
        }
    }

    /// The rule that was broken, in plain words (for the GUI's error pane).
    pub const fn rule(&self) -> &'static str {
        match self {
            FormatError::HeaderTooSmall { .. } => {
                "A safetensors file starts with 8 bytes holding the header length."
            }
            FormatError::HeaderTooLarge { .. } => {
                "The header length may be at most 100,000,000 bytes."
            }
            FormatError::InvalidHeaderLength { .. } => {
                "The header (bytes 8 to 8+N) must lie inside the file."
            }
            FormatError::InvalidHeader { .. } => "The header must be UTF-8 text.",
            FormatError::InvalidHeaderDeserialization { .. } => {
                "The header must be a JSON object mapping names to {dtype, shape, data_offsets}, with an optional __metadata__ object of strings."
            }
            FormatError::InvalidOffset { .. } => {
                "Sorted by offset, tensors must be packed back to back from 0, each ending at or after its start."
            }
            FormatError::ValidationOverflow { .. } => {
                "A tensor's element count and size in bits must fit in 64 bits."
            }
            FormatError::MisalignedSlice { .. } => "A tensor must occupy a whole number of bytes.",
            FormatError::TensorInvalidInfo { .. } => {
                "A tensor's byte range must be exactly elements × dtype size."
            }
            FormatError::MetadataIncompleteBuffer { .. } => {
                "The data after the header must be exactly as long as the tensors need."
            }
        }
    }
}

fn with_detected(message: String, detected: Option<ForeignFormat>) -> String {
    match detected {
        Some(f) => format!("this looks like {}: {message}", f.description()),
        None => message,
    }
}

fn header_too_large(header_size: u64, detected: Option<ForeignFormat>) -> String {
    with_detected(
        format!("header length {header_size} (bytes 0..8) exceeds the limit of 100000000"),
        detected,
    )
}

fn invalid_offset(tensor: &str, data_offsets: [u64; 2], expected_begin: u64) -> String {
    let [begin, end] = data_offsets;
    if end < begin {
        format!("tensor {tensor:?}: data_offsets [{begin}, {end}] end before they begin")
    } else if begin < expected_begin {
        format!(
            "tensor {tensor:?}: data_offsets [{begin}, {end}] overlap the previous tensor, which ends at {expected_begin}"
        )
    } else {
        format!(
            "tensor {tensor:?}: data_offsets [{begin}, {end}] leave a gap: the previous tensor ends at {expected_begin}"
        )
    }
}

fn incomplete_buffer(header_size: u64, data_end: u64, file_size: u64) -> String {
    match data_end
        .checked_add(8)
        .and_then(|v| v.checked_add(header_size))
    {
        Some(expected) if expected > file_size => format!(
            "tensor data ends at file offset {expected} but the file has {file_size} bytes (truncated by {} bytes)",
            expected - file_size
        ),
        Some(expected) => format!(
            "tensor data ends at file offset {expected} but the file has {file_size} bytes ({} trailing bytes)",
            file_size - expected
        ),
        None => format!(
            "tensor data end {data_end} plus the header overflows 64 bits; the file has {file_size} bytes"
        ),
    }
}

/// A tensor entry as the header writes it, for messages about entries the
/// reader ignored: `F32 [2, 3], bytes 0..24`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryText {
    /// The dtype.
    pub dtype: Dtype,
    /// The shape.
    pub shape: Vec<u64>,
    /// `data_offsets`, relative to the data buffer.
    pub data_offsets: [u64; 2],
}

impl fmt::Display for EntryText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?}, bytes {}..{}",
            self.dtype, self.shape, self.data_offsets[0], self.data_offsets[1]
        )
    }
}

/// A quirk the reference accepts but the format's README forbids or
/// discourages; reported, never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatWarning {
    /// A tensor name appears more than once; the last entry wins, as in
    /// the reference's map, and the others are silently ignored.
    DuplicateTensor {
        /// The repeated name (after JSON unescaping).
        name: String,
        /// How many entries carried it.
        count: usize,
        /// The first entry (ignored), as written.
        first: EntryText,
        /// The last entry (used), as written.
        last: EntryText,
    },
    /// The header has whitespace before its opening `{`.
    LeadingWhitespace {
        /// How many whitespace bytes precede the `{`.
        bytes: usize,
    },
    /// A key appears more than once in `__metadata__`; the last wins.
    DuplicateMetadataKey {
        /// The repeated key (the last value is kept).
        key: String,
    },
    /// A tensor entry is a JSON array `[dtype, shape, data_offsets]`.
    TensorAsArray {
        /// The tensor's name (after JSON unescaping).
        name: String,
    },
    /// A dtype is written as a one-key object such as `{"F32": null}`.
    DtypeAsObject {
        /// The tensor's name (after JSON unescaping).
        name: String,
    },
    /// A tensor entry has fields other than dtype, shape and `data_offsets`.
    UnknownFields {
        /// The tensor's name (after JSON unescaping).
        name: String,
        /// The field names the reader ignored, in file order.
        fields: Vec<String>,
    },
}

impl FormatWarning {
    /// A stable identifier for JSON output.
    pub const fn kind(&self) -> &'static str {
        match self {
            FormatWarning::DuplicateTensor { .. } => "DuplicateTensor",
            FormatWarning::LeadingWhitespace { .. } => "LeadingWhitespace",
            FormatWarning::DuplicateMetadataKey { .. } => "DuplicateMetadataKey",
            FormatWarning::TensorAsArray { .. } => "TensorAsArray",
            FormatWarning::DtypeAsObject { .. } => "DtypeAsObject",
            FormatWarning::UnknownFields { .. } => "UnknownFields",
        }
    }

    /// The tensor the warning is about, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            FormatWarning::DuplicateTensor { name, .. }
            | FormatWarning::TensorAsArray { name }
            | FormatWarning::DtypeAsObject { name }
            | FormatWarning::UnknownFields { name, .. } => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for FormatWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatWarning::DuplicateTensor {
                name,
                count,
                first,
                last,
            } => write!(
                f,
                "tensor name {name:?} appears {count} times; the last entry ({last}) is used and the first ({first}) ignored (the format forbids duplicates)"
            ),
            FormatWarning::LeadingWhitespace { bytes } => write!(
                f,
                "header has {bytes} whitespace bytes before '{{' (the format says it starts with '{{')"
            ),
            FormatWarning::DuplicateMetadataKey { key } => write!(
                f,
                "__metadata__ key {key:?} appears more than once; the last value is used"
            ),
            FormatWarning::TensorAsArray { name } => write!(
                f,
                "tensor {name:?} is written as an array [dtype, shape, data_offsets] instead of an object"
            ),
            FormatWarning::DtypeAsObject { name } => write!(
                f,
                "tensor {name:?} writes its dtype as an object instead of a string"
            ),
            FormatWarning::UnknownFields { name, fields } => write!(
                f,
                "tensor {name:?} has unknown fields {fields:?}, which are ignored"
            ),
        }
    }
}
