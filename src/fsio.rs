//! Atomic file writes, shared by every writer of the crate (the
//! safetensors writer, the exporters, resave).
//!
//! A file is written to a hidden temporary file in the target's own folder
//! (so the final `rename` stays on one filesystem and is atomic), synced
//! with `fsync`, then renamed over the target, and the folder is synced so
//! the rename survives a crash. Until the rename, every error, cancel or
//! panic removes the temporary file, so the target keeps its previous
//! content and no partial file is left. Temporary files left by a killed
//! process are swept on the next write to the same target.
//!
//! Also here: [`same_file`], which writers use to refuse an output that is
//! the file being read (mapped files must never be written over); the one
//! chunked copy loop ([`copy_chunked`], [`write_chunk`]) with its
//! cancellation checks and progress; and [`ShortWriter`], which makes a
//! write fail as a full disk would, for the tests of error paths.
//!
//! This module knows files only, not the formats written into them: its
//! error, [`FileError`], is wrapped by each format's own error.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::jobs::{CancelToken, Cancelled, Progress};

/// Bytes per chunk of [`copy_chunked`]: large enough that the cancellation
/// check costs nothing, small enough that a cancel is seen within a few
/// milliseconds.
pub const COPY_CHUNK_BYTES: usize = 8 << 20;

/// Why a file could not be written; the target was left unchanged.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FileError {
    /// The write was cancelled (see [`cancelled_io_error`]); nothing was
    /// left behind.
    #[error("cancelled")]
    Cancelled,
    /// The operating system refused (a full disk, a missing folder, no
    /// permission).
    #[error("{source}: {}", path.display())]
    Io {
        /// The target being written (not the temporary file: that is the
        /// path a user knows).
        path: PathBuf,
        /// The operating system's error, shared so the error can be cloned.
        source: Arc<io::Error>,
    },
}

impl FileError {
    /// A stable kind for JSON output: `Cancelled` or `Io`.
    pub fn kind(&self) -> &'static str {
        match self {
            FileError::Cancelled => "Cancelled",
            FileError::Io { .. } => "Io",
        }
    }

    /// The target whose write failed (`None` for a cancel).
    pub fn path(&self) -> Option<&Path> {
        match self {
            FileError::Cancelled => None,
            FileError::Io { path, .. } => Some(path),
        }
    }

    /// The error for `source`, met while writing `path`
    /// ([`FileError::Cancelled`] for a [`cancelled_io_error`]).
    pub fn from_io(path: &Path, source: io::Error) -> Self {
        if source
            .get_ref()
            .is_some_and(<dyn std::error::Error + Send + Sync>::is::<Cancelled>)
        {
            FileError::Cancelled
        } else {
            FileError::Io {
                path: path.to_path_buf(),
                source: source.into(),
            }
        }
    }
}

/// Runs `body` against a buffered temporary file beside `path`, then syncs
/// and renames it over `path`. On any error the temporary file is removed.
pub fn atomic_write(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), FileError> {
    let mut pending = PendingFile::create(path)?;
    body(pending.writer()).map_err(|e| pending.error(e))?;
    pending.finish()?.commit().map(drop)
}

/// An error that stops a write as cancelled: return it from a body given
/// to [`atomic_write`] (or written through a [`PendingFile`]) and the write
/// ends with [`FileError::Cancelled`].
pub fn cancelled_io_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, Cancelled)
}

/// Writes `chunk` to `w` unless `cancel` is set, then adds `work` to
/// `progress`. `work` is in the caller's progress unit: the chunk's length
/// when progress counts bytes written, or the source bytes or elements the
/// chunk was made from when the output is a conversion.
pub fn write_chunk<W: Write + ?Sized>(
    w: &mut W,
    chunk: &[u8],
    work: u64,
    cancel: &CancelToken,
    progress: &Progress,
) -> io::Result<()> {
    if cancel.is_cancelled() {
        return Err(cancelled_io_error());
    }
    w.write_all(chunk)?;
    progress.add(work);
    Ok(())
}

/// Copies `bytes` to `w` in chunks of [`COPY_CHUNK_BYTES`], checking
/// `cancel` before each chunk and counting the bytes written in `progress`.
pub fn copy_chunked<W: Write + ?Sized>(
    w: &mut W,
    bytes: &[u8],
    cancel: &CancelToken,
    progress: &Progress,
) -> io::Result<()> {
    for chunk in bytes.chunks(COPY_CHUNK_BYTES) {
        write_chunk(w, chunk, chunk.len() as u64, cancel, progress)?;
    }
    Ok(())
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

/// Removes the temporary files a process of ours left in `folder` when it
/// was killed mid-write (`kill -9`, a crash, a power cut): hidden files
/// named `.<name>.tmp-<pid>-<n>`, as [`PendingFile::create`] names them,
/// whose process no longer runs. Only where `/proc` tells which processes
/// run (Linux); elsewhere nothing is removed.
fn remove_stale_temps(folder: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .filter(|n| n.starts_with('.'))
            .and_then(|n| n.rsplit_once(".tmp-"))
            .map(|(_, rest)| rest)
        else {
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
    pub fn create(target: &Path) -> Result<Self, FileError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let folder = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = target
            .file_name()
            .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
        remove_stale_temps(&folder);
        let tmp = folder.join(format!(
            ".{base}.tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| FileError::from_io(target, e))?;
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

    /// The temporary file's path (hidden, in the target's folder).
    pub fn temp_path(&self) -> &Path {
        &self.guard.tmp
    }

    /// The buffered writer of the temporary file (1 MiB buffer).
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.writer
    }

    /// The [`FileError`] for an I/O error met while writing this file
    /// ([`FileError::Cancelled`] for [`cancelled_io_error`]).
    pub fn error(&self, e: io::Error) -> FileError {
        FileError::from_io(&self.guard.target, e)
    }

    /// Flushes and syncs the temporary file to disk.
    pub fn finish(self) -> Result<FinishedFile, FileError> {
        let Self { guard, writer } = self;
        let file = writer
            .into_inner()
            .map_err(|e| FileError::from_io(&guard.target, e.into_error()))?;
        file.sync_all()
            .map_err(|e| FileError::from_io(&guard.target, e))?;
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
    pub fn commit(mut self) -> Result<PathBuf, FileError> {
        std::fs::rename(&self.guard.tmp, &self.guard.target)
            .map_err(|e| FileError::from_io(&self.guard.target, e))?;
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
    /// How many files the write had, renamed or not.
    pub total: usize,
    /// The rename that failed.
    pub error: FileError,
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

/// True when `a` and `b` name the same existing file (hard links and
/// symlinks to a file count as that file); see `platform::paths`.
pub fn same_file(a: &Path, b: &Path) -> bool {
    crate::platform::paths::same_file(a, b)
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

    #[test]
    fn temporary_files_of_dead_processes_are_swept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        // PIDs above the kernel's limit (2^22) never run.
        let stale = dir.join(".out.bin.tmp-4194305-0");
        let other = dir.join(".other.bin.tmp-4194305-0");
        let mine = dir.join(format!(".out.bin.tmp-{}-999999", std::process::id()));
        // Not named as ours: a visible file, and a hidden one of another shape.
        let visible = dir.join("out.bin.tmp-4194305-0");
        let foreign = dir.join(".out.bin.tmp-4194305-x");
        for p in [&stale, &other, &mine, &visible, &foreign] {
            std::fs::write(p, b"x").expect("write");
        }
        atomic_write(&dir.join("out.bin"), |w| w.write_all(b"new")).expect("write");
        if Path::new("/proc/self").exists() {
            // Every temporary file of a process that is gone, whatever its
            // target; this process's own are left alone.
            assert!(!stale.exists() && !other.exists());
        }
        assert!(mine.exists() && visible.exists() && foreign.exists());
    }

    #[test]
    fn a_cancelled_body_leaves_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let cancel = CancelToken::new();
        cancel.cancel();
        let r = atomic_write(&dir.join("out.bin"), |w| {
            copy_chunked(w, b"data", &cancel, &Progress::new())
        });
        assert!(matches!(r, Err(FileError::Cancelled)), "{r:?}");
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
    }
}
