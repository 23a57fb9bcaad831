//! The bytes of a tensor that is not a plain slice of a file: a typed
//! field (`float_data`, `int32_data`, ...) re-read from the model file in
//! place, each element truncated to the dtype's width as numpy's `astype`
//! does (BOOL as 0/1), or a BOOL `raw_data` (inline or external) whose
//! bytes are made 0/1. Streamed in pieces of about 1 MiB.

use std::ops::Range;

use super::tensor::Storage;
use super::wire::{self, WireError, fields_of};
use crate::format::decode::{Decode, DecodeError, Sink};
use crate::jobs::CancelToken;

/// Bytes handed to the sink at once.
const PIECE: usize = 1 << 20;

/// Where the bytes come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Raw BOOL bytes, `range` of file `file`: non-zero read as 1.
    RawBool {
        /// The file (0: the model).
        file: usize,
        /// The bytes.
        range: Range<u64>,
    },
    /// The typed field `storage` of the `TensorProto` stored in `parts`
    /// of the model file, `count` elements.
    Typed {
        /// The message's parts (one unless a singular field repeated).
        parts: Vec<Range<usize>>,
        /// The field and its encoding.
        storage: Storage,
        /// True for BOOL (one byte, 0 or 1, per element).
        bool: bool,
        /// Elements the field holds (checked again while decoding).
        count: u64,
    },
}

/// An ONNX tensor's decoder.
#[derive(Debug, Clone)]
pub struct OnnxDecoder {
    /// The tensor's name, for messages.
    pub tensor: String,
    /// Where its bytes are.
    pub source: Source,
}

impl From<WireError> for DecodeError {
    fn from(e: WireError) -> Self {
        let (kind, what) = match e {
            WireError::Truncated { at, what, .. } => ("Truncated", format!("{what} at byte {at}")),
            WireError::Invalid { at, what } => ("InvalidProtobuf", format!("{what} at byte {at}")),
        };
        DecodeError::invalid(kind, what)
    }
}

/// Collects bytes and hands them on in pieces, checking cancellation
/// between them.
struct Pieces<'a, 'b> {
    buf: Vec<u8>,
    sink: Sink<'a>,
    cancel: &'b CancelToken,
}

impl Pieces<'_, '_> {
    fn push(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= PIECE {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), DecodeError> {
        self.cancel.check()?;
        if !self.buf.is_empty() {
            (self.sink)(&self.buf).map_err(DecodeError::Sink)?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl Decode for OnnxDecoder {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        match &self.source {
            Source::RawBool { file, range } => vec![(*file, range.clone())],
            Source::Typed { parts, .. } => parts
                .iter()
                .map(|r| (0, r.start as u64..r.end as u64))
                .collect(),
        }
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let missing = |file: usize, what: String| {
            DecodeError::invalid(
                "Truncated",
                format!(
                    "tensor {:?}: {what} of file {file} are not there",
                    self.tensor
                ),
            )
        };
        let mut out = Pieces {
            buf: Vec::new(),
            sink,
            cancel,
        };
        match &self.source {
            Source::RawBool { file, range } => {
                let bytes = files
                    .get(*file)
                    .and_then(|b| {
                        let r =
                            usize::try_from(range.start).ok()?..usize::try_from(range.end).ok()?;
                        b.get(r)
                    })
                    .ok_or_else(|| missing(*file, format!("bytes {range:?}")))?;
                for chunk in bytes.chunks(PIECE) {
                    let ones: Vec<u8> = chunk.iter().map(|&b| u8::from(b != 0)).collect();
                    out.push(&ones)?;
                }
            }
            Source::Typed {
                parts,
                storage,
                bool,
                count,
            } => {
                let bytes = files
                    .first()
                    .ok_or_else(|| missing(0, "the model's bytes".to_owned()))?;
                let mut seen = 0u64;
                for f in fields_of(bytes, parts) {
                    let f = f?;
                    if f.number != storage.field {
                        continue;
                    }
                    wire::for_each_element(bytes, &f, storage.scalar, &mut |v| {
                        seen += 1;
                        if seen > *count {
                            return Ok(());
                        }
                        if *bool {
                            out.push(&[u8::from(v as u8 != 0)])
                        } else {
                            let le = v.to_le_bytes();
                            out.push(le.get(..storage.width).unwrap_or(&le))
                        }
                    })?;
                }
                if seen != *count {
                    return Err(DecodeError::invalid(
                        "SizeMismatch",
                        format!(
                            "tensor {:?}: {} holds {seen} elements, {count} were counted when the model was opened",
                            self.tensor, storage.name
                        ),
                    ));
                }
            }
        }
        out.flush()
    }
}
