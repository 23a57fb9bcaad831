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

/// What the header needs to know of a tensor whose bytes are produced
/// later (copied in chunks, or converted): everything but the data.
#[derive(Debug, Clone, Copy)]
pub struct TensorEntry<'a> {
    /// Name.
    pub name: &'a str,
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
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
    let mut pending = PendingFile::create(path)?;
    body(pending.writer()).map_err(|e| pending.error(e))?;
    pending.finish()?.commit().map(drop)
}

/// An error that stops a write as cancelled: return it from a body given
/// to [`atomic_write`] (or written through a [`PendingFile`]) and the write
/// ends with [`WriteError::Cancelled`].
pub fn cancelled_io_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, Cancelled)
}

/// A temporary file in a target's folder, being written; [`PendingFile::finish`]
/// syncs it into a [`FinishedFile`], which [`FinishedFile::commit`] renames
/// over the target. Dropping either before the rename removes the temporary
/// file, so no error path can leave one behind.
#[derive(Debug)]
pub struct PendingFile {
    guard: TempGuard,
    writer: BufWriter<File>,
}

/// A complete, synced temporary file waiting to be renamed over its target.
#[derive(Debug)]
pub struct FinishedFile {
    guard: TempGuard,
}

/// Removes the temporary file on drop unless it was renamed.
#[derive(Debug)]
struct TempGuard {
    target: PathBuf,
    tmp: PathBuf,
    folder: PathBuf,
    renamed: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Removes temporary files of the same target left by a process that was
/// killed mid-write (`.<name>.tmp-<pid>-<n>` whose process no longer runs).
/// Only where `/proc` tells which processes run (Linux); elsewhere nothing.
fn remove_stale_temps(folder: &Path, base: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{base}.tmp-");
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl PendingFile {
    /// Creates a new, empty temporary file beside `target` (hidden, named
    /// `.<target name>.tmp-<pid>-<n>`).
    pub fn create(target: &Path) -> Result<Self, WriteError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let folder = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = target
            .file_name()
            .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
        remove_stale_temps(&folder, &base);
        let tmp = folder.join(format!(
            ".{base}.tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io_error(target, e))?;
        Ok(Self {
            guard: TempGuard {
                target: target.to_path_buf(),
                tmp,
                folder,
                renamed: false,
            },
            writer: BufWriter::with_capacity(1 << 20, file),
        })
    }

    /// The file this will become.
    pub fn target(&self) -> &Path {
        &self.guard.target
    }

    /// The temporary file's path.
    pub fn temp_path(&self) -> &Path {
        &self.guard.tmp
    }

    /// The buffered writer of the temporary file.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.writer
    }

    /// The [`WriteError`] for an I/O error met while writing this file
    /// ([`WriteError::Cancelled`] for [`cancelled_io_error`]).
    pub fn error(&self, e: io::Error) -> WriteError {
        io_error(&self.guard.target, e)
    }

    /// Flushes and syncs the temporary file to disk.
    pub fn finish(self) -> Result<FinishedFile, WriteError> {
        let Self { guard, writer } = self;
        let file = writer
            .into_inner()
            .map_err(|e| io_error(&guard.target, e.into_error()))?;
        file.sync_all().map_err(|e| io_error(&guard.target, e))?;
        Ok(FinishedFile { guard })
    }
}

impl FinishedFile {
    /// The file this will become.
    pub fn target(&self) -> &Path {
        &self.guard.target
    }

    /// The temporary file's path (to verify it before the rename).
    pub fn temp_path(&self) -> &Path {
        &self.guard.tmp
    }

    /// Renames the temporary file over the target and syncs the folder;
    /// returns the target's path.
    pub fn commit(mut self) -> Result<PathBuf, WriteError> {
        std::fs::rename(&self.guard.tmp, &self.guard.target)
            .map_err(|e| io_error(&self.guard.target, e))?;
        self.guard.renamed = true;
        // Make the rename itself durable where the platform allows.
        if let Ok(dir) = File::open(&self.guard.folder) {
            let _ = dir.sync_all();
        }
        Ok(self.guard.target.clone())
    }
}

/// A multi-file write that failed while renaming, after some files were
/// already in place.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{error} (after {} of {total} files were renamed into place)", renamed.len())]
pub struct CommitError {
    /// The targets already renamed into place (complete, synced files).
    pub renamed: Vec<PathBuf>,
    /// How many files there were.
    pub total: usize,
    /// What failed.
    pub error: WriteError,
}

/// Renames finished temporary files over their targets, in order. Every
/// file is already [`PendingFile::finish`]ed, so only renames remain:
/// the files are complete before any target changes. If a rename fails,
/// the files after it are removed (never renamed), and the error lists the
/// targets already in place.
pub fn commit_all(files: Vec<FinishedFile>) -> Result<Vec<PathBuf>, CommitError> {
    let total = files.len();
    let mut renamed = Vec::with_capacity(total);
    for file in files {
        // A failed commit drops (and removes) its temporary file; the rest
        // are dropped with the iterator.
        match file.commit() {
            Ok(p) => renamed.push(p),
            Err(error) => {
                return Err(CommitError {
                    renamed,
                    total,
                    error,
                });
            }
        }
    }
    Ok(renamed)
}

fn io_error(path: &Path, source: io::Error) -> WriteError {
    if source
        .get_ref()
        .is_some_and(<dyn std::error::Error + Send + Sync>::is::<Cancelled>)
    {
        WriteError::Cancelled
    } else {
        WriteError::Io {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

/// Failure injection: a writer that accepts `limit` bytes, then reports a
/// short write (`Ok(0)`, which `write_all` turns into `WriteZero`), the way
/// a full disk ends a write.
#[derive(Debug)]
pub struct ShortWriter<W> {
    inner: W,
    remaining: Option<u64>,
}

impl<W: Write> ShortWriter<W> {
    /// Wraps `inner`; `limit` of `None` passes everything through.
    pub fn new(inner: W, limit: Option<u64>) -> Self {
        Self {
            inner,
            remaining: limit,
        }
    }

    /// Bytes still accepted before the short write (`None`: no limit).
    pub fn remaining(&self) -> Option<u64> {
        self.remaining
    }
}

/// True when `a` and `b` name the same existing file: the same device and
/// inode on Unix (so hard links and symlinks to a file count as that file),
/// the same canonical path elsewhere. False when either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
    }
}

impl<W: Write> Write for ShortWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.remaining {
            None => self.inner.write(buf),
            Some(0) => Ok(0),
            Some(n) => {
                let take = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                let written = self.inner.write(&buf[..take])?;
                self.remaining = Some(n - written as u64);
                Ok(written)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
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
    fn temporary_files_of_dead_processes_are_swept() {
        let dir = std::env::temp_dir().join(format!("ts-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // PIDs above the kernel's limit (2^22) never run.
        let stale = dir.join(".out.bin.tmp-4194305-0");
        let other = dir.join(".other.bin.tmp-4194305-0");
        let mine = dir.join(format!(".out.bin.tmp-{}-999999", std::process::id()));
        for p in [&stale, &other, &mine] {
            std::fs::write(p, b"x").expect("write");
        }
        atomic_write(&dir.join("out.bin"), |w| w.write_all(b"new")).expect("write");
        if Path::new("/proc/self").exists() {
            assert!(!stale.exists());
        }
        assert!(other.exists() && mine.exists());
        std::fs::remove_dir_all(&dir).expect("cleanup");
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
