//! Why an ONNX model is refused: one variant per rule (FRAMEWORKS.md,
//! "ONNX"), each naming the tensor, the byte offset or the location.

use super::wire::WireError;

/// Why an ONNX model cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OnnxError {
    /// A varint, fixed value or length-delimited field runs past the end of
    /// its message (a length prefix of 4 GiB in a small file, say).
    #[error("the protobuf is cut short at byte {at}: {what} needs {need} bytes, {left} are left")]
    Truncated {
        /// Where the item starts in the file.
        at: u64,
        /// What was being read.
        what: &'static str,
        /// Bytes it needs.
        need: u64,
        /// Bytes left in its message.
        left: u64,
    },
    /// Bytes that are not a protobuf message: a varint over 10 bytes, a
    /// group or undefined wire type, a field number 0, a packed field
    /// that does not split into elements, a name that is not UTF-8.
    #[error("not a valid protobuf at byte {at}: {what}")]
    Protobuf {
        /// Where in the file.
        at: u64,
        /// What is wrong.
        what: String,
    },
    /// A tensor of a type with no safetensors dtype (INT4, UINT4, INT2,
    /// UINT2, FLOAT4E2M1, FLOAT6*, COMPLEX128, STRING, UNDEFINED or a
    /// number onnx does not define): the whole model is refused.
    #[error(
        "tensor {tensor:?} is of type {type_name} (data_type {data_type}), which has no safetensors dtype: the model is refused"
    )]
    UnsupportedDtype {
        /// The tensor.
        tensor: String,
        /// Its `data_type` number.
        data_type: i64,
        /// Its name in `TensorProto.DataType`, or `unknown`.
        type_name: &'static str,
    },
    /// Two tensors (initializers or main-graph `Constant` outputs) of one
    /// name.
    #[error(
        "two tensors are named {tensor:?} (initializers and Constant outputs share one namespace)"
    )]
    DuplicateName {
        /// The name.
        tensor: String,
    },
    /// A negative dimension, or a shape whose element or byte count
    /// overflows 64 bits.
    #[error("tensor {tensor:?} has an invalid shape: {what}")]
    InvalidShape {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        what: String,
    },
    /// The bytes present are not the shape's: `raw_data` of another
    /// length, a typed field of another element count, no data at all for
    /// a non-empty tensor.
    #[error(
        "tensor {tensor:?}: {field} holds {found} {unit}, the shape {shape:?} of {dtype} needs {expected}"
    )]
    SizeMismatch {
        /// The tensor.
        tensor: String,
        /// The field read (`raw_data`, `float_data`, ... or `no data field`).
        field: &'static str,
        /// What the field holds.
        found: u64,
        /// What the shape needs.
        expected: u64,
        /// `bytes` or `elements`.
        unit: &'static str,
        /// The shape.
        shape: Vec<u64>,
        /// The dtype's name.
        dtype: &'static str,
    },
    /// A tensor stored in segments (`TensorProto.segment`), which
    /// `numpy_helper.to_array` does not read either.
    #[error("tensor {tensor:?} is stored in segments, which are not read")]
    Segment {
        /// The tensor.
        tensor: String,
    },
    /// An external-data location that could leave the model's folder: an
    /// absolute path, a drive or URL prefix (any `:`), a `..` component, an
    /// empty path or a NUL byte. Refused before anything is opened.
    #[error("tensor {tensor:?}: the external data location {location:?} is refused: {why}")]
    ExternalDataOutside {
        /// The tensor.
        tensor: String,
        /// The location as written.
        location: String,
        /// Which rule it breaks.
        why: String,
    },
    /// The external data file does not exist.
    #[error("tensor {tensor:?}: the external data file {location:?} is missing ({message})")]
    ExternalDataMissing {
        /// The tensor.
        tensor: String,
        /// The location (normalised).
        location: String,
        /// The operating system's (or server's) message.
        message: String,
    },
    /// The external data file's size could not be found for another
    /// reason than its absence.
    #[error("tensor {tensor:?}: the external data file {location:?} cannot be read ({message})")]
    ExternalDataUnreadable {
        /// The tensor.
        tensor: String,
        /// The location (normalised).
        location: String,
        /// The operating system's (or server's) message.
        message: String,
    },
    /// The tensor's bytes `offset .. offset + size` pass the end of its
    /// external file.
    #[error(
        "tensor {tensor:?}: bytes {offset}..{end} of {location:?} are needed, the file has {file_size}"
    )]
    ExternalDataShort {
        /// The tensor.
        tensor: String,
        /// The location (normalised).
        location: String,
        /// Where the tensor starts.
        offset: u64,
        /// Where it ends (saturated at u64::MAX).
        end: u64,
        /// The file's size.
        file_size: u64,
    },
    /// `external_data` that cannot be read: no `location`, an `offset` or
    /// `length` that is not a non-negative decimal integer, a `length`
    /// other than the shape's byte size.
    #[error("tensor {tensor:?}: invalid external_data: {what}")]
    ExternalDataInvalid {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        what: String,
    },
}

impl OnnxError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            OnnxError::Truncated { .. } => "Truncated",
            OnnxError::Protobuf { .. } => "InvalidProtobuf",
            OnnxError::UnsupportedDtype { .. } => "UnsupportedDtype",
            OnnxError::DuplicateName { .. } => "DuplicateTensor",
            OnnxError::InvalidShape { .. } => "InvalidShape",
            OnnxError::SizeMismatch { .. } => "SizeMismatch",
            OnnxError::Segment { .. } => "UnsupportedSegment",
            OnnxError::ExternalDataOutside { .. } => "ExternalDataOutside",
            OnnxError::ExternalDataMissing { .. } => "ExternalDataMissing",
            OnnxError::ExternalDataUnreadable { .. } => "ExternalDataUnreadable",
            OnnxError::ExternalDataShort { .. } => "ExternalDataShort",
            OnnxError::ExternalDataInvalid { .. } => "ExternalDataInvalid",
        }
    }

    /// The tensor the error concerns, if one.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            OnnxError::Truncated { .. } | OnnxError::Protobuf { .. } => None,
            OnnxError::UnsupportedDtype { tensor, .. }
            | OnnxError::DuplicateName { tensor }
            | OnnxError::InvalidShape { tensor, .. }
            | OnnxError::SizeMismatch { tensor, .. }
            | OnnxError::Segment { tensor }
            | OnnxError::ExternalDataOutside { tensor, .. }
            | OnnxError::ExternalDataMissing { tensor, .. }
            | OnnxError::ExternalDataUnreadable { tensor, .. }
            | OnnxError::ExternalDataShort { tensor, .. }
            | OnnxError::ExternalDataInvalid { tensor, .. } => Some(tensor),
        }
    }
}

impl From<WireError> for OnnxError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated {
                at,
                what,
                need,
                left,
            } => OnnxError::Truncated {
                at,
                what,
                need,
                left,
            },
            WireError::Invalid { at, what } => OnnxError::Protobuf { at, what },
        }
    }
}
