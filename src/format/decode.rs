//! What a container reader hands the format layer: its tensors (name,
//! dtype, shape) and where each one's bytes are. A tensor whose bytes are a
//! C-order slice of one file is [`Data::Plain`] (read in place when it is
//! little-endian); any other (chunks, slices, compressed or typed fields)
//! is [`Data::Decoded`]: the container's own [`Decode`] hands its bytes on
//! in C order, little-endian, with bounded memory, from the files' bytes.
//!
//! A checkpoint may keep its tensors in files beside the one opened (an
//! ONNX model's external data, a TensorFlow bundle's data shards): file 0
//! is the file opened, file `k` the `k`-th of [`Opened::files`].

use std::ops::Range;
use std::sync::Arc;

use crate::dtype::Dtype;
use crate::jobs::CancelToken;

/// Where the tensor's bytes go, in order; a failure ends the read.
pub type Sink<'a> = &'a mut dyn FnMut(&[u8]) -> std::io::Result<()>;

/// Why a [`Decode`] stopped.
#[derive(Debug)]
pub enum DecodeError {
    /// The bytes break a rule of the container: `kind` is the stable
    /// name of the rule (`ChecksumMismatch`, `BadDeflate`, …), `message`
    /// says what was found, where (tensor, byte range).
    Invalid {
        /// Stable identifier, as `--json`'s `kind`.
        kind: &'static str,
        /// For people: which rule, which tensor, which bytes.
        message: String,
    },
    /// The token was cancelled.
    Cancelled,
    /// The sink failed (the scratch space is full, say).
    Sink(std::io::Error),
}

impl DecodeError {
    /// A broken rule.
    pub fn invalid(kind: &'static str, message: impl Into<String>) -> Self {
        DecodeError::Invalid {
            kind,
            message: message.into(),
        }
    }
}

impl From<crate::jobs::Cancelled> for DecodeError {
    fn from(_: crate::jobs::Cancelled) -> Self {
        DecodeError::Cancelled
    }
}

/// Bytes `range` of file `k` of the files a [`Decode`] is given:
/// `StoragePastEnd` when they are not all there.
pub fn file_range<'f>(
    files: &[&'f [u8]],
    k: usize,
    range: &Range<u64>,
) -> Result<&'f [u8], DecodeError> {
    files
        .get(k)
        .zip(usize::try_from(range.start).ok())
        .zip(usize::try_from(range.end).ok())
        .and_then(|((f, a), b)| f.get(a..b))
        .ok_or_else(|| {
            DecodeError::invalid(
                "StoragePastEnd",
                format!("bytes {range:?} of file {k} are missing"),
            )
        })
}

/// A tensor's bytes that are not one slice of a file, decoded by its
/// container.
pub trait Decode: Send + Sync + std::fmt::Debug {
    /// The byte ranges of the files that decoding reads, as `(file,
    /// range)`: what a remote checkpoint fetches first.
    fn ranges(&self) -> Vec<(usize, Range<u64>)>;

    /// Hands `sink` the tensor's bytes in C order, little-endian, in
    /// pieces, `files[k]` being file `k`'s bytes. Memory stays bounded
    /// (never the whole tensor for a large one when its pieces allow
    /// streaming); checksums the container keeps are checked here.
    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError>;
}

/// Where a tensor's bytes are.
#[derive(Debug, Clone)]
pub enum Data {
    /// A C-order slice of a file: `range` of file `file`, its elements
    /// little-endian unless `big_endian` (then swapped when read).
    Plain {
        /// 0 for the file opened, `k` for the `k`-th of [`Opened::files`].
        file: usize,
        /// Exactly the tensor's bytes.
        range: Range<u64>,
        /// True when the elements are big-endian.
        big_endian: bool,
    },
    /// Decoded by the container.
    Decoded(Arc<dyn Decode>),
}

/// One tensor of a container.
#[derive(Debug, Clone)]
pub struct Tensor {
    /// Its name, as the container's spec fixes it.
    pub name: String,
    /// Its safetensors dtype.
    pub dtype: Dtype,
    /// Its logical shape.
    pub shape: Vec<u64>,
    /// Where its bytes are.
    pub data: Data,
    /// What the container says of it beyond the model's fields, as
    /// `info --json` fields (`shard`, `offset`, `location`, …).
    pub facts: Vec<(&'static str, serde_json::Value)>,
}

/// A container file read (its header only): its tensors in listing
/// order, its metadata, and the facts `info` prints.
#[derive(Debug, Default)]
pub struct Opened {
    /// The tensors, in the order the container lists them.
    pub tensors: Vec<Tensor>,
    /// The file's metadata, key → value (strings, numbers, objects).
    pub metadata: Vec<(String, serde_json::Value)>,
    /// The container's own facts for `info --json` (an object under the
    /// container's id: ONNX's `ir_version`, `opset`, `producer`).
    pub facts: serde_json::Map<String, serde_json::Value>,
    /// Other files the tensors are in: names relative to the opened
    /// file's folder, already checked to stay inside it.
    pub files: Vec<String>,
    /// Things worth saying that do not make the file invalid (a dataset
    /// skipped because its type is no tensor's).
    pub warnings: Vec<String>,
    /// Bytes of the opened file that are its header (what `info` calls
    /// the header size).
    pub header_len: u64,
    /// What its pickles say (the globals they name; those outside the
    /// allowlist make no verb but `info` read it), for a container whose
    /// index is a pickle (DCP's `.metadata`).
    pub pickle: Option<crate::format::pytorch::PickleReport>,
}
