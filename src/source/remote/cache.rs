//! The on-disk cache of remote files.
//!
//! One entry per URL, a folder named by a hash of the URL in
//! [`Settings::cache_dir`]:
//! - `data`: a sparse file as long as the remote file; fetched chunks are
//!   written at their offsets, the rest are holes (zeros, no disk);
//! - `chunks`: a bitmap, one bit per [`BLOCK`] of `data` that holds the
//!   remote bytes (written after the data is synced, so a bit never claims
//!   bytes a crash lost);
//! - `meta.json`: the URL, the remote file's version (ETag, or
//!   Last-Modified, and size) and how much of its start (the header) is in
//!   `data`. A version the server no longer has empties the entry.
//!
//! Entries are used under a shared lock on their `lock` file; eviction (the cap,
//! [`Settings::cache_max`], least recently used first) removes only entries
//! whose lock it can take exclusively, so it never takes bytes from under
//! another process. A removed file stays readable by whoever has it mapped.

use std::fs::{File, OpenOptions};
use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::version::Version;
use super::{RemoteError, Settings};
use crate::platform::lock::{Lock, downgrade, try_lock, upgrade};
use crate::platform::sparse;

/// The file an entry's lock is taken on (never its data: Windows' locks
/// would forbid reading and writing it).
const LOCK_FILE: &str = "lock";

/// The largest request for tensor bytes, and the unit of eviction: 4 MiB.
pub const CHUNK: u64 = 4 << 20;

/// The unit the cache records as held: 64 KiB, so that a tensor costs at
/// most its own bytes and two blocks, whatever its alignment.
pub const BLOCK: u64 = 64 << 10;

/// What an entry's `meta.json` records.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Meta {
    url: String,
    version: Version,
    /// `data[..header_end]` holds the remote bytes (the header read at open).
    header_end: u64,
    chunk: u64,
}

/// An open cache entry.
#[derive(Debug)]
pub struct Entry {
    /// The entry's folder.
    dir: Option<PathBuf>,
    data: Mutex<File>,
    /// The entry's `lock` file, held shared while the entry is open.
    lock: Option<File>,
    /// The version and header extent found on disk at open, if any.
    stored: Option<(Version, u64)>,
    /// The bitmap found on disk, if it matched the stored version.
    stored_chunks: Vec<u8>,
}

fn cache_error(path: &Path, what: &str, e: &std::io::Error) -> RemoteError {
    RemoteError::new(
        "Cache",
        format!("the cache {}: {what}: {e}", path.display()),
    )
}

/// A stable 128-bit hash of the URL, as 32 hex digits (two FNV-1a passes
/// with different offsets): the entry's folder name.
fn key(url: &str) -> String {
    let fnv = |mut h: u64| {
        for b in url.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4)
    )
}

impl Entry {
    /// Opens (or creates) the entry of `url` in the cache folder.
    pub fn open(settings: &Settings, url: &str) -> Result<Self, RemoteError> {
        match &settings.cache_dir {
            Some(root) => Self::open_in(root, url),
            None => Err(RemoteError::new(
                "Cache",
                "no cache folder for remote files: set TENSORSCOPE_CACHE_DIR (or XDG_CACHE_HOME or HOME)",
            )),
        }
    }

    fn open_in(root: &Path, url: &str) -> Result<Self, RemoteError> {
        let dir = root.join(key(url));
        std::fs::create_dir_all(&dir).map_err(|e| cache_error(&dir, "cannot be created", &e))?;
        let data_path = dir.join("data");
        let data = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&data_path)
            .map_err(|e| cache_error(&data_path, "cannot be opened", &e))?;
        sparse::make_sparse(&data);
        let lock = lock_entry(&dir, Lock::Shared);
        let meta: Option<Meta> = std::fs::read(dir.join("meta.json"))
            .ok()
            .filter(|t| t.len() < 1 << 20)
            .and_then(|t| serde_json::from_slice(&t).ok())
            .filter(|m: &Meta| m.url == url && m.chunk == BLOCK);
        let len = data.metadata().map_or(0, |m| m.len());
        let stored = meta
            .filter(|m| m.version.size == len && m.header_end <= len)
            .map(|m| (m.version, m.header_end));
        let stored_chunks = match &stored {
            Some((v, _)) => std::fs::read(dir.join("chunks"))
                .ok()
                .filter(|b| b.len() as u64 == bitmap_len(v.size))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(Self {
            dir: Some(dir),
            data: Mutex::new(data),
            lock,
            stored,
            stored_chunks,
        })
    }

    /// The version and header extent the entry holds from an earlier run.
    pub fn stored(&self) -> Option<&(Version, u64)> {
        self.stored.as_ref()
    }

    /// The chunk bitmap from an earlier run (empty when none applies).
    pub fn stored_chunks(&self) -> &[u8] {
        &self.stored_chunks
    }

    /// Makes the entry hold `version`: kept if it is the stored one, else
    /// a new empty `data` of the file's length takes the place of the old
    /// one (which stays whole for a process that has it mapped).
    pub fn prepare(&mut self, url: &str, version: &Version) -> Result<(), RemoteError> {
        let same = self
            .stored
            .as_ref()
            .is_some_and(|(v, _)| v.same_as(version));
        if !same {
            self.stored = None;
            self.stored_chunks.clear();
            if let Some(dir) = &self.dir {
                let fresh = dir.join(format!("data.new-{}", std::process::id()));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&fresh)
                    .map_err(|e| cache_error(&fresh, "cannot be created", &e))?;
                sparse::make_sparse(&f);
                let _ = std::fs::remove_file(dir.join("chunks"));
                // Our handle of the old data closed first: Windows does not
                // rename over a file this process holds open.
                *self
                    .data
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = f;
                std::fs::rename(&fresh, dir.join("data"))
                    .map_err(|e| cache_error(&fresh, "cannot be renamed", &e))?;
            }
        }
        let data = self
            .data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if data.metadata().map_or(0, |m| m.len()) != version.size {
            data.set_len(version.size).map_err(|e| {
                RemoteError::new("Cache", format!("the cache file cannot be sized: {e}"))
            })?;
        }
        drop(data);
        self.write_meta(url, version, self.stored.as_ref().map_or(0, |s| s.1));
        Ok(())
    }

    /// The data file, for mapping.
    pub fn data(&self) -> Result<File, RemoteError> {
        self.data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .try_clone()
            .map_err(|e| RemoteError::new("Cache", format!("the cache file: {e}")))
    }

    /// Writes `bytes` at `offset` of the data file.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<(), RemoteError> {
        let mut f = self
            .data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.seek(SeekFrom::Start(offset))
            .and_then(|_| f.write_all(bytes))
            .map_err(|e| {
                RemoteError::new(
                    "Cache",
                    format!("writing the cache failed (is the disk full? the cap is TENSORSCOPE_CACHE_MAX): {e}"),
                )
            })
    }

    /// Syncs the data, then records `chunks` (and the header extent) on
    /// disk. Failures only lose the cache, never a result: ignored.
    pub fn persist(&self, url: &str, version: &Version, header_end: u64, chunks: &[u8]) {
        let Some(dir) = &self.dir else { return };
        let synced = self
            .data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .sync_data()
            .is_ok();
        if synced {
            let _ = replace(&dir.join("chunks"), chunks);
        }
        self.write_meta(url, version, header_end);
    }

    fn write_meta(&self, url: &str, version: &Version, header_end: u64) {
        let Some(dir) = &self.dir else { return };
        let meta = Meta {
            url: url.to_owned(),
            version: version.clone(),
            header_end,
            chunk: BLOCK,
        };
        if let Ok(text) = serde_json::to_vec(&meta) {
            let _ = replace(&dir.join("meta.json"), &text);
        }
    }

    /// Gives the disk of `range` (whole chunks) back: the bytes read as
    /// zeros again. Only while no other process holds the entry.
    pub fn punch(&self, range: std::ops::Range<u64>) -> bool {
        let Some(held) = &self.lock else {
            return false;
        };
        if !upgrade(held) {
            return false;
        }
        let f = self
            .data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let done = sparse::punch_hole(&f, range);
        downgrade(held);
        done
    }

    /// The entry's folder, if it has one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

/// A small remote file (a shard index, a config) kept whole with its ETag,
/// so that reading it again costs a `304`.
#[derive(Debug)]
pub struct SmallFile {
    dir: PathBuf,
}

/// Where the small file `url` is kept; `None` without a cache folder.
pub fn small_file(settings: &Settings, url: &str) -> Option<SmallFile> {
    let dir = settings.cache_dir.as_ref()?.join("small").join(key(url));
    Some(SmallFile { dir })
}

impl SmallFile {
    /// The ETag and bytes kept, if both are there.
    pub fn load(&self) -> Option<(String, Vec<u8>)> {
        let etag = std::fs::read_to_string(self.dir.join("etag")).ok()?;
        let bytes = std::fs::read(self.dir.join("body")).ok()?;
        Some((etag, bytes))
    }

    /// Keeps `bytes` as the version `etag` (failures only lose the copy).
    pub fn store(&self, etag: &str, bytes: &[u8]) {
        if std::fs::create_dir_all(&self.dir).is_ok() {
            // The body first: an ETag never names bytes that are not there.
            let _ = std::fs::remove_file(self.dir.join("etag"));
            if replace(&self.dir.join("body"), bytes).is_ok() {
                let _ = replace(&self.dir.join("etag"), etag.as_bytes());
            }
        }
    }
}

/// Bytes of the bitmap of a file of `size` bytes.
pub fn bitmap_len(size: u64) -> u64 {
    size.div_ceil(BLOCK).div_ceil(8)
}

/// Writes `path` through a temporary file and a rename.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The disk an entry's data takes.
fn allocated(path: &Path) -> u64 {
    sparse::allocated(path)
}

/// Opens (creating) an entry's lock file and takes `lock` on it; `None`
/// when it cannot be taken.
fn lock_entry(dir: &Path, lock: Lock) -> Option<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))
        .ok()?;
    try_lock(&f, lock).then_some(f)
}

/// Removes whole entries, least recently used first, until the cache is
/// at most `cap` bytes; never one in `keep` nor one another process holds.
/// Returns the bytes still in use.
pub fn evict(root: &Path, cap: u64, keep: &[PathBuf]) -> u64 {
    let Ok(read) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut entries: Vec<(std::time::SystemTime, PathBuf, u64)> = read
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let p = e.path();
            let used = std::fs::metadata(p.join("meta.json"))
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            let size = allocated(&p.join("data"));
            (used, p, size)
        })
        .collect();
    let mut total: u64 = entries.iter().map(|e| e.2).sum();
    entries.sort();
    for (_, path, size) in entries {
        if total <= cap {
            break;
        }
        if keep.contains(&path) {
            continue;
        }
        // Let go of before the folder goes (Windows cannot remove a
        // folder while a file in it is open).
        let free = lock_entry(&path, Lock::Exclusive).is_some();
        if free && std::fs::remove_dir_all(&path).is_ok() {
            total = total.saturating_sub(size);
        }
    }
    total
}

/// Marks the entry as just used (its `meta.json`'s time), for eviction.
pub fn touch(dir: &Path) {
    if let Ok(f) = OpenOptions::new().write(true).open(dir.join("meta.json")) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_differ() {
        assert_eq!(key("http://a/x"), key("http://a/x"));
        assert_ne!(key("http://a/x"), key("http://a/y"));
        assert_eq!(key("x").len(), 32);
        assert_eq!(bitmap_len(0), 0);
        assert_eq!(bitmap_len(1), 1);
        assert_eq!(bitmap_len(8 * BLOCK), 1);
        assert_eq!(bitmap_len(8 * BLOCK + 1), 2);
    }
}
