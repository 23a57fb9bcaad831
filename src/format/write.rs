//! Writing safetensors files the way the reference writer lays them out
//! (dtype alignment order, compact header padded to 8 bytes), but refusing
//! what it would get wrong (duplicate names, a tensor named `__metadata__`)
//! and writing metadata keys sorted so the same input gives the same bytes.
//!
//! Files are written to a temporary file in the target's folder, synced,
//! then renamed over the target: a failure never leaves a partial file.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::dtype::Dtype;
use crate::jobs::{CancelToken, Progress};

/// A tensor to write: its bytes are copied as they are.
#[derive(Debug, Clone)]
pub struct TensorSource<'a> {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<u64>,
    /// The encoded bytes, `numel × bits / 8` of them.
    pub data: &'a [u8],
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
        /// The tensor.
        name: String,
        /// Its dtype.
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
    /// The write was cancelled; nothing was left behind.
    #[error("cancelled")]
    Cancelled,
    /// The operating system refused.
    #[error("{source}: {}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The error.
        source: Arc<io::Error>,
    },
}

/// The header (with its 8-byte length) and the order the tensors are
/// written in (indices into the input).
pub fn header_bytes(
    tensors: &[TensorSource<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<(Vec<u8>, Vec<usize>), WriteError> {
    let mut seen = HashSet::with_capacity(tensors.len());
    for t in tensors {
        if t.name == "__metadata__" {
            return Err(WriteError::ReservedName);
        }
        if !seen.insert(t.name.as_str()) {
            return Err(WriteError::DuplicateName(t.name.clone()));
        }
        let expected = t
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(u64::from(t.dtype.bits())))
            .filter(|bits| bits % 8 == 0)
            .map(|bits| bits / 8);
        if expected != Some(t.data.len() as u64) {
            return Err(WriteError::SizeMismatch {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                expected: expected.map_or_else(|| "a whole number of".into(), |e| e.to_string()),
                found: t.data.len(),
            });
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| {
        let (ta, tb) = (&tensors[a], &tensors[b]);
        ta.dtype
            .writer_rank()
            .cmp(&tb.dtype.writer_rank())
            .then_with(|| ta.name.cmp(&tb.name))
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
        let end = offset + t.data.len() as u64;
        text.push_str(&serde_json::Value::String(t.name.clone()).to_string());
        // The reference writes the fields in declaration order.
        let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        let _ = write!(
            text,
            ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            t.dtype.name(),
            shape.join(",")
        );
        offset = end;
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

/// Writes a file atomically: to a temporary file beside `path`, synced,
/// then renamed. Progress counts bytes; cancellation is checked between
/// chunks and leaves nothing behind.
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
        w.write_all(&header)?;
        progress.add(header.len() as u64);
        for &i in &order {
            for chunk in tensors[i].data.chunks(8 << 20) {
                if cancel.is_cancelled() {
                    return Err(io::Error::new(io::ErrorKind::Interrupted, Cancelled));
                }
                w.write_all(chunk)?;
                progress.add(chunk.len() as u64);
            }
        }
        Ok(())
    })
}

#[derive(Debug)]
struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// Runs `body` against a buffered temporary file beside `path`, then syncs
/// and renames it over `path`. On any error the temporary file is removed.
pub fn atomic_write(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), WriteError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let io_err = |p: &Path, source: io::Error| {
        if source
            .get_ref()
            .is_some_and(<dyn std::error::Error + Send + Sync>::is::<Cancelled>)
        {
            WriteError::Cancelled
        } else {
            WriteError::Io {
                path: p.to_path_buf(),
                source: source.into(),
            }
        }
    };
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let tmp = folder.join(format!(
        ".{base}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_err(path, e))?;
    let result = (|| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        body(&mut w)?;
        let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        // Make the rename itself durable where the platform allows.
        if let Ok(dir) = File::open(&folder) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(path, e)
    })
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
        assert_eq!(parsed.tensors[1].name, "z_small");
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
        let dir = std::env::temp_dir().join(format!("ts-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
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
        assert!(matches!(r, Err(WriteError::Cancelled)), "{r:?}");
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
        write_file(&target, &t, None, &CancelToken::new(), &Progress::new()).expect("write");
        let bytes = std::fs::read(&target).expect("read");
        assert!(parse(&bytes).is_ok());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
