//! Writing safetensors files the way the reference writer lays them out
//! (dtype alignment order, compact header padded to 8 bytes), but refusing
//! what it would get wrong (duplicate names, a tensor named `__metadata__`)
//! and writing metadata keys sorted so the same input gives the same bytes.
//!
//! Files are written through [`crate::fsio`]: to a temporary file in the
//! target's folder, synced, then renamed over the target, so a failure
//! never leaves a partial file.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::dtype::Dtype;
use crate::fsio::{FileError, atomic_write, copy_chunked, write_chunk};
use crate::jobs::{CancelToken, Progress};

/// A tensor to write: its bytes are copied as they are.
#[derive(Debug, Clone)]
pub struct TensorSource<'a> {
    /// The tensor's name; must be unique and not `__metadata__`.
    pub name: String,
    /// Element type, which decides the tensor's place in the file (the
    /// reference's alignment order).
    pub dtype: Dtype,
    /// Shape, written as given (u64 dimensions).
    pub shape: Vec<u64>,
    /// The encoded bytes, `numel × bits / 8` of them.
    pub data: &'a [u8],
}

/// A tensor held with its own bytes: `(name, dtype, shape, data)`.
pub type OwnedTensor = (String, Dtype, Vec<u64>, Vec<u8>);

/// [`TensorSource`]s borrowing `owned`, in its order, for [`write_file`].
pub fn sources_of(owned: &[OwnedTensor]) -> Vec<TensorSource<'_>> {
    owned
        .iter()
        .map(|(name, dtype, shape, data)| TensorSource {
            name: name.clone(),
            dtype: *dtype,
            shape: shape.clone(),
            data,
        })
        .collect()
}

/// Why a file could not be written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// Two tensors share a name.
    #[error("two tensors are named {0:?}; names must be unique")]
    DuplicateName(String),
    /// A tensor is named `__metadata__`, which readers take for the metadata.
    #[error("a tensor may not be named \"__metadata__\"")]
    ReservedName,
    /// A tensor's bytes do not match its dtype and shape.
    #[error("tensor {name:?}: {dtype} {shape:?} needs {expected} bytes, got {found}")]
    SizeMismatch {
        /// The tensor whose bytes do not fit.
        name: String,
        /// Its dtype, with the shape, says how many bytes it needs.
        dtype: Dtype,
        /// Its shape.
        shape: Vec<u64>,
        /// Bytes needed (None when the size is not a whole number of bytes or overflows).
        expected: String,
        /// Bytes given.
        found: usize,
    },
    /// The header would exceed the format's limit.
    #[error("the header would be {0} bytes, over the format's limit of 100000000")]
    HeaderTooLarge(usize),
    /// Writing the file failed (cancelled, or refused by the operating
    /// system); the target was not changed.
    #[error(transparent)]
    File(#[from] FileError),
}

impl WriteError {
    /// A stable kind for JSON output: the variant's name.
    pub fn kind(&self) -> &'static str {
        match self {
            WriteError::DuplicateName(_) => "DuplicateName",
            WriteError::ReservedName => "ReservedName",
            WriteError::SizeMismatch { .. } => "SizeMismatch",
            WriteError::HeaderTooLarge(_) => "HeaderTooLarge",
            WriteError::File(e) => e.kind(),
        }
    }
}

/// What the header needs to know of a tensor whose bytes are produced
/// later (copied in chunks, or converted): everything but the data.
#[derive(Debug, Clone, Copy)]
pub struct TensorEntry<'a> {
    /// The tensor's name; must be unique and not `__metadata__`.
    pub name: &'a str,
    /// Element type, which decides the tensor's place in the file.
    pub dtype: Dtype,
    /// Shape, written as given.
    pub shape: &'a [u64],
    /// Bytes the data will have; must be `numel × bits / 8`.
    pub nbytes: u64,
}

/// The header (with its 8-byte length) and the order the tensors are
/// written in (indices into the input).
pub fn header_bytes(
    tensors: &[TensorSource<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<(Vec<u8>, Vec<usize>), WriteError> {
    let entries: Vec<TensorEntry<'_>> = tensors
        .iter()
        .map(|t| TensorEntry {
            name: &t.name,
            dtype: t.dtype,
            shape: &t.shape,
            nbytes: t.data.len() as u64,
        })
        .collect();
    header_for_entries(&entries, metadata)
}

/// [`header_bytes`] for tensors described by [`TensorEntry`]: checks names
/// and sizes, and lays them out as the reference writer does.
pub fn header_for_entries(
    tensors: &[TensorEntry<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<(Vec<u8>, Vec<usize>), WriteError> {
    let mut seen = HashSet::with_capacity(tensors.len());
    for t in tensors {
        if t.name == "__metadata__" {
            return Err(WriteError::ReservedName);
        }
        if !seen.insert(t.name) {
            return Err(WriteError::DuplicateName(t.name.to_owned()));
        }
        let expected = t.dtype.byte_len(t.shape);
        if expected != Some(t.nbytes) {
            return Err(WriteError::SizeMismatch {
                name: t.name.to_owned(),
                dtype: t.dtype,
                shape: t.shape.to_vec(),
                expected: expected.map_or_else(|| "a whole number of".into(), |e| e.to_string()),
                found: usize::try_from(t.nbytes).unwrap_or(usize::MAX),
            });
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| {
        let (ta, tb) = (&tensors[a], &tensors[b]);
        ta.dtype
            .writer_rank()
            .cmp(&tb.dtype.writer_rank())
            .then_with(|| ta.name.cmp(tb.name))
    });
    // The entries are written by hand to keep the file order: metadata
    // first (its keys sorted, as serde_json's map keeps them), then the
    // tensors in offset order.
    let mut text = String::from("{");
    let mut first = true;
    if let Some(m) = metadata {
        let obj: serde_json::Map<String, serde_json::Value> = m
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        text.push_str("\"__metadata__\":");
        text.push_str(&serde_json::Value::Object(obj).to_string());
        first = false;
    }
    let mut offset = 0u64;
    for &i in &order {
        let t = &tensors[i];
        if !first {
            text.push(',');
        }
        first = false;
        let end = offset.saturating_add(t.nbytes);
        text.push_str(&serde_json::Value::String(t.name.to_owned()).to_string());
        // The reference writes the fields in declaration order.
        let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        let _ = write!(
            text,
            ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            t.dtype.name(),
            shape.join(",")
        );
        offset = end;
        if text.len() > 100_000_000 {
            return Err(WriteError::HeaderTooLarge(text.len()));
        }
    }
    text.push('}');
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    if text.len() > 100_000_000 {
        return Err(WriteError::HeaderTooLarge(text.len()));
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    Ok((out, order))
}

/// Writes a file atomically (see [`crate::fsio`]): to a temporary file
/// beside `path`, synced, then renamed. Progress counts bytes, header
/// included; cancellation is checked between chunks and leaves nothing
/// behind.
pub fn write_file(
    path: &Path,
    tensors: &[TensorSource<'_>],
    metadata: Option<&BTreeMap<String, String>>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<(), WriteError> {
    let (header, order) = header_bytes(tensors, metadata)?;
    let total: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
    progress.set_total(total + header.len() as u64);
    atomic_write(path, |w| {
        write_chunk(w, &header, header.len() as u64, cancel, progress)?;
        for &i in &order {
            copy_chunked(w, tensors[i].data, cancel, progress)?;
        }
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse;

    #[test]
    fn layout_follows_the_reference_writer() {
        let a = [1u8, 2, 3, 4];
        let b = [9u8; 8];
        let tensors = [
            TensorSource {
                name: "z_small".into(),
                dtype: Dtype::U8,
                shape: vec![4],
                data: &a,
            },
            TensorSource {
                name: "big".into(),
                dtype: Dtype::F64,
                shape: vec![],
                data: &b,
            },
        ];
        let meta = BTreeMap::from([("format".to_owned(), "pt".to_owned())]);
        let (header, order) = header_bytes(&tensors, Some(&meta)).expect("ok");
        assert_eq!(order, [1, 0]);
        assert_eq!(header.len() % 8, 0);
        let text = std::str::from_utf8(&header[8..]).expect("utf8");
        assert!(text.starts_with(
            r#"{"__metadata__":{"format":"pt"},"big":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"z_small""#
        ));
        let mut file = header.clone();
        file.extend_from_slice(&b);
        file.extend_from_slice(&a);
        let parsed = parse(&file).expect("valid");
        assert_eq!(parsed.tensors()[1].name(), "z_small");
    }

    #[test]
    fn refuses_what_readers_would_misread() {
        let d = [0u8; 1];
        let t = |name: &str| TensorSource {
            name: name.into(),
            dtype: Dtype::U8,
            shape: vec![1],
            data: &d,
        };
        assert!(matches!(
            header_bytes(&[t("a"), t("a")], None),
            Err(WriteError::DuplicateName(_))
        ));
        assert!(matches!(
            header_bytes(&[t("__metadata__")], None),
            Err(WriteError::ReservedName)
        ));
        let bad = TensorSource {
            shape: vec![2],
            ..t("x")
        };
        assert!(matches!(
            header_bytes(&[bad], None),
            Err(WriteError::SizeMismatch { .. })
        ));
    }

    #[test]
    fn metadata_without_tensors_is_valid() {
        let meta = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
        let (header, _) = header_bytes(&[], Some(&meta)).expect("ok");
        assert!(parse(&header).is_ok());
    }

    #[test]
    fn cancelled_writes_leave_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let data = vec![0u8; 1 << 20];
        let t = [TensorSource {
            name: "x".into(),
            dtype: Dtype::U8,
            shape: vec![1 << 20],
            data: &data,
        }];
        let cancel = CancelToken::new();
        cancel.cancel();
        let target = dir.join("out.safetensors");
        let r = write_file(&target, &t, None, &cancel, &Progress::new());
        assert!(
            matches!(r, Err(WriteError::File(FileError::Cancelled))),
            "{r:?}"
        );
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
        write_file(&target, &t, None, &CancelToken::new(), &Progress::new()).expect("write");
        let bytes = std::fs::read(&target).expect("read");
        assert!(parse(&bytes).is_ok());
    }
}
