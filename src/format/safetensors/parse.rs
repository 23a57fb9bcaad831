//! Parsing and validating a safetensors header: the reference's twelve checks,
//! in its order, with a JSON visitor that reproduces what serde's derived
//! parsing accepts while also finding duplicates.

use std::collections::BTreeMap;

mod json;

use super::detect::detect_foreign;
use super::error::{FormatError, FormatWarning, OverflowStage};
use crate::dtype::Dtype;
use json::{RawEntry, parse_json};

/// Length of the little-endian header size that starts every file.
pub const N_LEN: u64 = 8;

/// The largest header the reference accepts.
pub const MAX_HEADER_SIZE: u64 = 100_000_000;

/// One validated tensor entry: its offsets span exactly the bytes its dtype
/// and shape need. Made only by [`parse`] (whose entries also lie inside
/// their file's data buffer) and [`TensorInfo::new`], so every value read
/// through the accessors holds these invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
    numel: u64,
    nbytes: u64,
}

impl TensorInfo {
    /// An entry of `dtype` and `shape` whose data starts `begin` bytes into
    /// a data buffer; `None` when its size overflows or is not whole bytes.
    /// (For tensors that come from elsewhere than a file's header, such as
    /// a slice of memory given to `stats::stats_of`.)
    pub fn new(name: String, dtype: Dtype, shape: Vec<u64>, begin: u64) -> Option<Self> {
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
        let nbytes = dtype.byte_len(&shape)?;
        let end = begin.checked_add(nbytes)?;
        Some(Self {
            name,
            dtype,
            shape,
            data_offsets: [begin, end],
            numel,
            nbytes,
        })
    }

    /// The name (after JSON unescaping; may be empty or hold any character).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The element type, parsed from the header's exact, case-sensitive name.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Dimensions; empty for a scalar.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Byte range relative to the start of the data buffer: `[begin, end)`.
    pub fn data_offsets(&self) -> [u64; 2] {
        self.data_offsets
    }

    /// Number of elements (1 for a scalar, 0 when a dimension is 0).
    pub fn numel(&self) -> u64 {
        self.numel
    }

    /// Size of the data in bytes (`end - begin`).
    pub fn nbytes(&self) -> u64 {
        self.nbytes
    }
}

/// A parsed and validated header, made only by [`parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// N, as stored in bytes 0..8 (for another container: the bytes of
    /// its headers).
    length: u64,
    /// File offset of the data buffer: 8 + N, or 0 for another container,
    /// whose entries' offsets are absolute.
    data_start: u64,
    metadata: Option<BTreeMap<String, String>>,
    tensors: Vec<TensorInfo>,
    warnings: Vec<FormatWarning>,
}

impl Header {
    /// N: the header length in bytes, as stored in bytes 0..8.
    pub fn header_size(&self) -> u64 {
        self.length
    }

    /// The `__metadata__` object; `None` when absent or `null`.
    pub fn metadata(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.as_ref()
    }

    /// Every tensor, in offset order (ties broken by name).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Quirks the reference accepts, in the order they were found.
    pub fn warnings(&self) -> &[FormatWarning] {
        &self.warnings
    }

    /// File offset where the data buffer starts (8 + N; 0 for another
    /// container).
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// The header of another container: its tensors (offsets absolute in
    /// the file), and `length` bytes of its own headers; no metadata.
    pub(crate) fn of_container(length: u64, tensors: Vec<TensorInfo>) -> Self {
        Self {
            length,
            data_start: 0,
            metadata: None,
            tensors,
            warnings: Vec::new(),
        }
    }

    /// The header of a container whose entries' offsets count from a data
    /// section at `data_start` (GGUF's), not from the file's start.
    pub(crate) fn with_data_start(mut self, data_start: u64) -> Self {
        self.data_start = data_start;
        self
    }

    /// The header with `metadata` as its `__metadata__` (a container's own
    /// key → text pairs, such as a PyTorch file's non-tensor leaves), so
    /// that the explorer shows it and a resave carries it.
    pub(crate) fn with_metadata(mut self, metadata: BTreeMap<String, String>) -> Self {
        self.metadata = (!metadata.is_empty()).then_some(metadata);
        self
    }

    /// End of the data buffer relative to its start (the last tensor's end).
    pub fn data_len(&self) -> u64 {
        self.tensors.last().map_or(0, |t| t.data_offsets[1])
    }

    /// Looks a tensor up by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Parses and validates the whole file image `file` (header and data), the
/// way the reference's `SafeTensors::read_metadata` does.
///
/// Only the first `8 + N` bytes are read; the data buffer is checked by
/// length alone, so a mapped multi-gigabyte file is not paged in.
pub fn parse(file: &[u8]) -> Result<Header, FormatError> {
    parse_explained(file).map_err(|r| r.error)
}

/// Why a file was rejected: the reference's verdict, and the tensor names
/// its header repeats. The reference keeps the last entry of a repeated
/// name, so a file can fail over an entry that is not the one a reader of
/// the header sees (a gap where the ignored entry was): the repeats explain
/// such an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The check that failed, as the reference names it.
    pub error: FormatError,
    /// [`FormatWarning::DuplicateTensor`] for each repeated name; empty
    /// when the header's JSON could not be read or repeats nothing.
    pub repeated: Vec<FormatWarning>,
}

impl From<FormatError> for Rejected {
    fn from(error: FormatError) -> Self {
        Self {
            error,
            repeated: Vec::new(),
        }
    }
}

/// [`parse`], keeping the repeated names of a rejected header.
pub fn parse_explained(file: &[u8]) -> Result<Header, Rejected> {
    let file_size = file.len() as u64;
    // Check 1.
    let Some(len_bytes) = file.get(..8) else {
        return Err(FormatError::HeaderTooSmall { file_size }.into());
    };
    let mut n_bytes = [0u8; 8];
    n_bytes.copy_from_slice(len_bytes);
    let header_size = u64::from_le_bytes(n_bytes);
    let detected = || detect_foreign(file);
    // Checks 2 and 3: N must fit in usize and be at most the limit, checked
    // before N is compared with the file.
    if usize::try_from(header_size).is_err() || header_size > MAX_HEADER_SIZE {
        return Err(FormatError::HeaderTooLarge {
            header_size,
            detected: detected(),
        }
        .into());
    }
    // Check 4.
    let header_end = N_LEN + header_size;
    let Some(header_bytes) = usize::try_from(header_end)
        .ok()
        .and_then(|end| file.get(8..end))
    else {
        return Err(FormatError::InvalidHeaderLength {
            header_size,
            file_size,
            detected: detected(),
        }
        .into());
    };
    // The header is copied (it is at most 100 MB) so that another program
    // writing to the mapped file cannot change it between the UTF-8 check
    // and the JSON parse.
    let header_bytes = header_bytes.to_vec();
    // Check 5.
    let text = match String::from_utf8(header_bytes) {
        Ok(text) => text,
        Err(e) => {
            return Err(FormatError::InvalidHeader {
                byte_offset: N_LEN + e.utf8_error().valid_up_to() as u64,
                detected: detected(),
            }
            .into());
        }
    };
    // Check 6.
    let raw = parse_json(&text).map_err(|e| json_error(&text, &e, detected()))?;
    let explained = |error: FormatError| Rejected {
        error,
        repeated: raw
            .warnings
            .iter()
            .filter(|w| matches!(w, FormatWarning::DuplicateTensor { .. }))
            .cloned()
            .collect(),
    };
    // Checks 7-11.
    let (tensors, data_end) = validate(raw.entries).map_err(explained)?;
    // Check 12.
    let complete = data_end
        .checked_add(N_LEN)
        .and_then(|v| v.checked_add(header_size))
        == Some(file_size);
    if !complete {
        return Err(explained(FormatError::MetadataIncompleteBuffer {
            header_size,
            data_end,
            file_size,
        }));
    }
    Ok(Header {
        length: header_size,
        data_start: N_LEN + header_size,
        metadata: raw.metadata,
        tensors,
        warnings: raw.warnings,
    })
}

fn json_error(
    text: &str,
    e: &serde_json::Error,
    detected: Option<crate::format::ForeignFormat>,
) -> FormatError {
    let (line, column) = (e.line(), e.column());
    let position = byte_position(text, line, column);
    // serde_json appends " at line L column C"; the error carries them apart.
    let mut message = e.to_string();
    if let Some(cut) = message.rfind(" at line ") {
        message.truncate(cut);
    }
    FormatError::InvalidHeaderDeserialization {
        message,
        line,
        column,
        byte_offset: N_LEN + position as u64,
        detected,
    }
}

/// Converts serde_json's 1-based line and byte column to a byte position.
fn byte_position(text: &str, line: usize, column: usize) -> usize {
    let bytes = text.as_bytes();
    let mut start = 0usize;
    if line > 1 {
        let mut seen = 1usize;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                seen += 1;
                if seen == line {
                    start = i + 1;
                    break;
                }
            }
        }
    }
    start
        .saturating_add(column.saturating_sub(1))
        .min(bytes.len())
}

/// Checks 7-11 over the entries sorted by offsets (ties by name, so the
/// verdict is deterministic where the reference's is not). Returns the
/// tensors in that order and the end of the last one.
fn validate(mut entries: Vec<RawEntry>) -> Result<(Vec<TensorInfo>, u64), FormatError> {
    entries.sort_by(|a, b| {
        a.data_offsets
            .cmp(&b.data_offsets)
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut start = 0u64;
    let mut tensors = Vec::with_capacity(entries.len());
    for entry in entries {
        let [begin, end] = entry.data_offsets;
        // Check 7.
        if begin != start || end < begin {
            return Err(FormatError::InvalidOffset {
                tensor: entry.name,
                data_offsets: entry.data_offsets,
                expected_begin: start,
            });
        }
        start = end;
        // Check 8: left to right, as the reference multiplies.
        let Some(numel) = entry
            .shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        else {
            return Err(FormatError::ValidationOverflow {
                tensor: entry.name,
                dtype: entry.dtype,
                shape: entry.shape,
                stage: OverflowStage::Elements,
            });
        };
        // Check 9.
        let Some(bits) = numel.checked_mul(u64::from(entry.dtype.bits())) else {
            return Err(FormatError::ValidationOverflow {
                tensor: entry.name,
                dtype: entry.dtype,
                shape: entry.shape,
                stage: OverflowStage::Bits,
            });
        };
        // Check 10.
        if bits % 8 != 0 {
            return Err(FormatError::MisalignedSlice {
                tensor: entry.name,
                dtype: entry.dtype,
                elements: numel,
                bits,
            });
        }
        // Check 11.
        let nbytes = bits / 8;
        let span = end - begin;
        if span != nbytes {
            return Err(FormatError::TensorInvalidInfo {
                tensor: entry.name,
                dtype: entry.dtype,
                shape: entry.shape,
                data_offsets: entry.data_offsets,
                expected_bytes: nbytes,
                found_bytes: span,
            });
        }
        tensors.push(TensorInfo {
            name: entry.name,
            dtype: entry.dtype,
            shape: entry.shape,
            data_offsets: entry.data_offsets,
            numel,
            nbytes,
        });
    }
    Ok((tensors, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data_len: usize) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.resize(out.len() + data_len, 0);
        out
    }

    #[test]
    fn parses_a_minimal_file() {
        let h = parse(&file(
            r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"a":{"dtype":"U8","shape":[],"data_offsets":[0,4]}}"#,
            12,
        ));
        let err = h.expect_err("a: scalar U8 is 1 byte, not 4");
        assert_eq!(err.kind(), "TensorInvalidInfo");
        let h = parse(&file(
            r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}"#,
            9,
        ))
        .expect("valid");
        assert_eq!(h.tensors[0].name, "a");
        assert_eq!(h.tensors[1].numel, 2);
        assert_eq!(
            h.metadata
                .as_ref()
                .and_then(|m| m.get("format"))
                .map(String::as_str),
            Some("pt")
        );
        assert!(h.warnings.is_empty());
    }

    #[test]
    fn empty_object_is_valid() {
        let h = parse(&file("{}", 0)).expect("valid");
        assert!(h.tensors.is_empty());
        assert_eq!(h.metadata, None);
        assert_eq!(
            parse(&file("{}", 1)).expect_err("trailing").kind(),
            "MetadataIncompleteBuffer"
        );
    }

    #[test]
    fn json_error_positions_are_file_offsets() {
        let err = parse(&file("{\"a\": x}", 0)).expect_err("bad json");
        match err {
            FormatError::InvalidHeaderDeserialization {
                byte_offset, line, ..
            } => {
                assert_eq!(line, 1);
                assert_eq!(byte_offset, 8 + 6);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn quirks_are_accepted_with_warnings() {
        let h = parse(&file(
            r#"  {"__metadata__":{"k":"1","k":"2"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\u0061":["U8",[1],[0,1]],"z":{"dtype":{"U8":null},"shape":[0],"data_offsets":[1,1],"extra":[[1]]}}"#,
            1,
        ))
        .expect("valid");
        let kinds: Vec<&str> = h.warnings.iter().map(FormatWarning::kind).collect();
        for k in [
            "LeadingWhitespace",
            "DuplicateMetadataKey",
            "DuplicateTensor",
            "TensorAsArray",
            "DtypeAsObject",
            "UnknownFields",
        ] {
            assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
        }
        assert_eq!(
            h.metadata
                .as_ref()
                .and_then(|m| m.get("k"))
                .map(String::as_str),
            Some("2")
        );
        assert_eq!(h.tensors.len(), 2);
    }

    #[test]
    fn dtype_object_must_hold_null() {
        for (dtype, ok) in [
            (r#"{"U8":null}"#, true),
            (r#"{"U8":{}}"#, false),
            (r#"{"U8":[]}"#, false),
            ("{}", false),
            (r#"{"U8":null,"I8":null}"#, false),
            (r#"{"u8":null}"#, false),
        ] {
            let header = format!(r#"{{"a":{{"dtype":{dtype},"shape":[1],"data_offsets":[0,1]}}}}"#);
            assert_eq!(parse(&file(&header, 1)).is_ok(), ok, "{dtype}");
        }
    }

    #[test]
    fn nesting_limit_applies_inside_ignored_fields() {
        let deep = |levels: usize| {
            // The top object and the entry object are two levels.
            let inner = "[".repeat(levels - 2) + &"]".repeat(levels - 2);
            format!(r#"{{"a":{{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{inner}}}}}"#)
        };
        assert!(parse(&file(&deep(127), 1)).is_ok());
        assert_eq!(
            parse(&file(&deep(128), 1)).expect_err("too deep").kind(),
            "InvalidHeaderDeserialization"
        );
    }

    #[test]
    fn overflow_depends_on_dimension_order() {
        let h = format!(
            r#"{{"a":{{"dtype":"F32","shape":[0,{},4],"data_offsets":[0,0]}}}}"#,
            1u64 << 63
        );
        assert!(parse(&file(&h, 0)).is_ok());
        let h = format!(
            r#"{{"a":{{"dtype":"F32","shape":[{},4,0],"data_offsets":[0,0]}}}}"#,
            1u64 << 63
        );
        assert_eq!(
            parse(&file(&h, 0)).expect_err("overflow").kind(),
            "ValidationOverflow"
        );
    }

    #[test]
    fn ends_near_u64_max_do_not_overflow() {
        // Eight tensors of 2^61 - 1 bytes (about the most one tensor can
        // have: its size in bits must fit 64 bits) end at 2^64 - 8; adding
        // the header to that end overflows.
        let chunk = (1u64 << 61) - 1;
        let mut entries = Vec::new();
        for i in 0..8u64 {
            let end = (i + 1) * chunk;
            let len = chunk;
            entries.push(format!(
                r#""t{i}":{{"dtype":"U8","shape":[{len}],"data_offsets":[{},{end}]}}"#,
                i * chunk
            ));
        }
        let h = format!("{{{}}}", entries.join(","));
        assert_eq!(
            parse(&file(&h, 0)).expect_err("buffer").kind(),
            "MetadataIncompleteBuffer"
        );
    }
}
