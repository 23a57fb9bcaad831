//! A remote file as the format reads it: a mapped cache file that fills
//! in as ranges are fetched.
//!
//! Opening reads the header in at most two range requests: the first
//! [`HEADER_GUESS`] bytes (which hold the 8-byte length and, for most
//! files, the whole header), then the rest of the header if it is longer.
//! A cached header is revalidated with a conditional request (`304`, no
//! bytes). Tensor bytes come in runs of [`BLOCK`]s of at most [`CHUNK`]
//! per request, [`Settings::parallel`] in flight, each response checked
//! against the file's version; a block is marked present only once all
//! its bytes are written. Ranges a reader
//! uses are pinned ([`Pin`]) so that the cache cap never takes them from
//! under it.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::cache::{self, BLOCK, CHUNK, Entry};
use super::http::Client;
use super::version::Version;
use super::{RemoteError, url};
use crate::jobs::{CancelToken, Progress};
use crate::source::map::Mapping;

/// Bytes asked for by the first request of a file: its header's length and,
/// for most files, the whole header.
pub const HEADER_GUESS: u64 = 64 * 1024;

/// The largest remote file opened: 16 TiB (a bitmap of 32 MiB). The
/// largest checkpoints are sharded into files of a few GB.
pub const MAX_REMOTE_FILE: u64 = 16 << 40;

/// Attempts per chunk when the connection fails (a dropped connection, a
/// body cut short, a timeout): the first and two more.
const ATTEMPTS: u32 = 3;

/// A remote file, open: cheap to clone (one shared state).
#[derive(Debug, Clone)]
pub struct RemoteFile {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    url: String,
    client: Client,
    version: Version,
    /// False when the server ignores `Range`: only the header was read.
    ranges: bool,
    entry: Entry,
    map: Mapping,
    /// `[0, header_end)` is present (the header read at open).
    header_end: u64,
    /// One bit per block: its bytes are in the cache file.
    present: Vec<AtomicU64>,
    /// When each chunk (the unit of eviction) was last asked for (a
    /// process-wide tick).
    used: Vec<AtomicU64>,
    /// Block ranges in use by readers.
    pins: Mutex<Vec<Range<u64>>>,
    /// Held while blocks are downloaded: two readers of the same bytes
    /// download them once.
    downloading: Mutex<()>,
    /// When the bitmap was last written to disk.
    persisted: Mutex<std::time::Instant>,
    /// Set when a response showed another version of the file.
    changed: AtomicBool,
    /// Bytes received from the network for this file.
    fetched: AtomicU64,
}

/// A range kept in the cache while a reader uses it; released on drop.
#[derive(Debug)]
pub struct Pin {
    inner: Arc<Inner>,
    blocks: Range<u64>,
}

impl Drop for Pin {
    fn drop(&mut self) {
        {
            let mut pins = lock(&self.inner.pins);
            if let Some(i) = pins.iter().position(|p| *p == self.blocks) {
                pins.swap_remove(i);
            }
        }
        // What the reader held may now make room under the cap.
        if !self.blocks.is_empty() {
            self.inner.enforce_cap();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

static TICK: AtomicU64 = AtomicU64::new(1);

/// How often at most the bitmap is written while a file is read.
const PERSIST_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for Inner {
    fn drop(&mut self) {
        self.persist();
    }
}

/// Every remote file open in this process, for the cache cap.
static OPEN: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// Bytes received from the network by every remote file of this process.
static FETCHED: AtomicU64 = AtomicU64::new(0);

impl RemoteFile {
    /// Opens `target`: reads its header (or revalidates the cached one)
    /// and maps its cache file. The first 8 bytes give the header's
    /// length; at most `max_header` more are fetched for it (a longer one is
    /// the format's verdict to give, from what was read).
    pub fn open(client: &Client, target: &str, max_header: u64) -> Result<Self, RemoteError> {
        Self::open_reading(client, target, HEADER_GUESS, max_header)
    }

    /// Opens `target` asking for its first byte only: its size and
    /// version, for a file whose bytes are read later by ranges (an ONNX
    /// model's external data, a TensorFlow bundle's data shards).
    pub fn open_sized(client: &Client, target: &str) -> Result<Self, RemoteError> {
        Self::open_reading(client, target, 1, 0)
    }

    /// Opens `target`, reading its first `first` bytes (and, for a
    /// safetensors-like length prefix, at most `max_header` more).
    fn open_reading(
        client: &Client,
        target: &str,
        first_bytes: u64,
        max_header: u64,
    ) -> Result<Self, RemoteError> {
        let mut entry = Entry::open(client.settings(), target)?;
        let stored = entry.stored().cloned();
        let cancel = CancelToken::new();
        let mut first = Vec::new();
        let reply = client.read_range(
            target,
            0..first_bytes,
            stored.as_ref().map(|(v, _)| v),
            stored.as_ref().is_some_and(|(_, h)| *h > 0),
            &mut |b| {
                first.extend_from_slice(b);
                Ok(())
            },
            &cancel,
        )?;
        FETCHED.fetch_add(reply.bytes, Ordering::Relaxed);
        let version = reply.version.clone();
        // The size is the server's word: checked before the cache file is
        // sized and its bitmap allocated by it.
        if version.size > MAX_REMOTE_FILE {
            return Err(RemoteError::new(
                "BadResponse",
                format!(
                    "{} says it is {} bytes; files of more than {MAX_REMOTE_FILE} bytes (16 TiB) are not opened",
                    url::display(target),
                    version.size
                ),
            ));
        }
        entry.prepare(target, &version)?;
        let mut header_end = if reply.not_modified {
            stored.as_ref().map_or(0, |(_, h)| *h)
        } else {
            entry.write_at(0, &first)?;
            first.len() as u64
        };
        let mut fetched = reply.bytes;
        if !reply.not_modified && first.len() >= 8 {
            let mut n = [0u8; 8];
            n.copy_from_slice(&first[..8]);
            let need = u64::from_le_bytes(n).saturating_add(8);
            // A length past the limit or the file is the format's verdict
            // to give; nothing more is read for it.
            if need > header_end && need <= version.size && need - 8 <= max_header {
                if !reply.ranges {
                    return Err(RemoteError::new(
                        "RangeIgnored",
                        format!(
                            "{}: the server ignores Range requests and the header is {need} bytes; it is not downloaded whole (download the file and open the copy)",
                            url::display(target)
                        ),
                    ));
                }
                let mut rest = Vec::new();
                let r = client.read_range(
                    target,
                    header_end..need,
                    Some(&version),
                    false,
                    &mut |b| {
                        if rest.len() as u64 + b.len() as u64 > need {
                            return Err(RemoteError::new(
                                "BadResponse",
                                "the header came longer than asked",
                            ));
                        }
                        rest.extend_from_slice(b);
                        Ok(())
                    },
                    &cancel,
                )?;
                FETCHED.fetch_add(r.bytes, Ordering::Relaxed);
                fetched += r.bytes;
                entry.write_at(header_end, &rest)?;
                header_end = need;
            }
        }
        let blocks = version.size.div_ceil(BLOCK);
        let words = usize::try_from(blocks.div_ceil(64)).map_err(|_| {
            RemoteError::new(
                "BadResponse",
                format!("{} is too large", url::display(target)),
            )
        })?;
        let present: Vec<AtomicU64> = (0..words).map(|_| AtomicU64::new(0)).collect();
        for (i, byte) in entry.stored_chunks().iter().enumerate() {
            if let Some(w) = present.get(i / 8) {
                w.fetch_or(u64::from(*byte) << ((i % 8) * 8), Ordering::Relaxed);
            }
        }
        let data = entry.data()?;
        let map = Mapping::map(&data).map_err(|e| {
            RemoteError::new("Cache", format!("the cache file cannot be mapped: {e}"))
        })?;
        let used = (0..version.size.div_ceil(CHUNK))
            .map(|_| AtomicU64::new(0))
            .collect();
        let inner = Arc::new(Inner {
            url: target.to_owned(),
            client: client.clone(),
            version,
            ranges: reply.ranges,
            entry,
            map,
            header_end,
            present,
            used,
            pins: Mutex::new(Vec::new()),
            downloading: Mutex::new(()),
            persisted: Mutex::new(std::time::Instant::now()),
            changed: AtomicBool::new(false),
            fetched: AtomicU64::new(fetched),
        });
        inner.persist();
        let mut open = lock(&OPEN);
        open.retain(|w| w.strong_count() > 0);
        open.push(Arc::downgrade(&inner));
        Ok(Self { inner })
    }

    /// The URL this file was opened from.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The remote file's version (ETag or Last-Modified, and size).
    pub fn version(&self) -> &Version {
        &self.inner.version
    }

    /// Bytes received from the network for this file.
    pub fn fetched(&self) -> u64 {
        self.inner.fetched.load(Ordering::Relaxed)
    }

    /// The cache file's map: the whole file, zeros where not fetched.
    pub fn bytes(&self) -> &[u8] {
        self.inner.map.bytes()
    }

    /// True once a response showed another version of the file (or the
    /// cache file was cut short under its map).
    pub fn changed(&self) -> bool {
        self.inner.changed.load(Ordering::Acquire) || self.inner.map.changed()
    }

    /// Bytes of `ranges` that are not in the cache yet: what fetching them
    /// would download, in whole blocks, each block once.
    pub fn missing(&self, ranges: &[Range<u64>]) -> u64 {
        let mut blocks: Vec<u64> = ranges
            .iter()
            .map(|r| self.clamp(r.clone()))
            .filter(|r| !r.is_empty() && r.end > self.inner.header_end)
            .flat_map(Self::blocks)
            .filter(|&b| !self.inner.has(b))
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        blocks
            .into_iter()
            .map(|b| self.inner.block_range(b).end - b * BLOCK)
            .sum()
    }

    fn clamp(&self, range: Range<u64>) -> Range<u64> {
        let size = self.inner.version.size;
        range.start.min(size)..range.end.min(size)
    }

    fn blocks(r: Range<u64>) -> Range<u64> {
        r.start / BLOCK..r.end.div_ceil(BLOCK)
    }

    /// Reads `range` (at most 16 MiB) in one request, outside the cache.
    pub fn read_exact(&self, range: Range<u64>) -> Result<Vec<u8>, RemoteError> {
        let r = self.clamp(range);
        if r.is_empty() {
            return Ok(Vec::new());
        }
        if r.end - r.start > 16 << 20 || !self.inner.ranges {
            return Err(RemoteError::new(
                "RangeIgnored",
                format!(
                    "{}: bytes {}-{} cannot be read alone",
                    url::display(&self.inner.url),
                    r.start,
                    r.end - 1
                ),
            ));
        }
        let mut out = Vec::new();
        let reply = self.inner.client.read_range(
            &self.inner.url,
            r,
            Some(&self.inner.version),
            false,
            &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            },
            &CancelToken::new(),
        );
        self.inner
            .fetched
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        FETCHED.fetch_add(out.len() as u64, Ordering::Relaxed);
        match reply {
            Ok(_) => Ok(out),
            Err(e) => {
                if e.kind() == "RemoteChanged" {
                    self.inner.changed.store(true, Ordering::Release);
                }
                Err(e)
            }
        }
    }

    /// Makes `range` readable through the map without fetching whole
    /// blocks: read in one request per 16 MiB ([`RemoteFile::read_exact`])
    /// and written into the cache file, no block marked present (a block is
    /// present only when fetched whole). For a container's directory, read
    /// at the file's end (a zip's), where a block would bring in far more
    /// than the records. Nothing is read when `range` is present already.
    pub fn read_into_map(&self, range: Range<u64>) -> Result<(), RemoteError> {
        let r = self.clamp(range);
        if self.is_present(r.clone()) {
            return Ok(());
        }
        let mut at = r.start;
        while at < r.end {
            let end = r.end.min(at + (16 << 20));
            let bytes = self.read_exact(at..end)?;
            if bytes.len() as u64 != end - at {
                return Err(RemoteError::new(
                    "BadResponse",
                    format!(
                        "{}: bytes {at}-{} came {} bytes long",
                        url::display(&self.inner.url),
                        end - 1,
                        bytes.len()
                    ),
                ));
            }
            self.inner.entry.write_at(at, &bytes)?;
            at = end;
        }
        Ok(())
    }

    /// True when every byte of `range` is in the cache.
    pub fn is_present(&self, range: Range<u64>) -> bool {
        let r = self.clamp(range);
        r.is_empty() || r.end <= self.inner.header_end || Self::blocks(r).all(|b| self.inner.has(b))
    }

    /// Fetches what `range` lacks, in requests of at most [`CHUNK`],
    /// [`Settings::parallel`] at once, and pins the range until the
    /// returned [`Pin`] is dropped. Bytes received are added to
    /// `progress`'s fetched count.
    pub fn fetch(
        &self,
        range: Range<u64>,
        cancel: &CancelToken,
        progress: &Progress,
    ) -> Result<Pin, RemoteError> {
        let r = self.clamp(range);
        let blocks = if r.is_empty() || r.end <= self.inner.header_end {
            0..0
        } else {
            Self::blocks(r.clone())
        };
        let pin = Pin {
            inner: Arc::clone(&self.inner),
            blocks: blocks.clone(),
        };
        lock(&self.inner.pins).push(blocks.clone());
        let tick = TICK.fetch_add(1, Ordering::Relaxed);
        for c in r.start / CHUNK..r.end.div_ceil(CHUNK) {
            if let Some(u) = usize::try_from(c).ok().and_then(|c| self.inner.used.get(c)) {
                u.store(tick, Ordering::Relaxed);
            }
        }
        if blocks.clone().all(|b| self.inner.has(b)) {
            return Ok(pin);
        }
        if !self.inner.ranges {
            return Err(RemoteError::new(
                "RangeIgnored",
                format!(
                    "{}: the server ignores Range requests, so a tensor's bytes cannot be read without downloading the whole file; download it and open the copy",
                    url::display(&self.inner.url)
                ),
            ));
        }
        let failure: Mutex<Option<RemoteError>> = Mutex::new(None);
        {
            // Looked at again under the lock: another reader may have
            // brought some of the blocks in meanwhile.
            let _downloading = lock(&self.inner.downloading);
            let runs = self.inner.missing_runs(blocks);
            let next = AtomicU64::new(0);
            let workers = self
                .inner
                .client
                .settings()
                .parallel
                .clamp(1, 16)
                .min(runs.len());
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(|| {
                        loop {
                            if lock(&failure).is_some() {
                                return;
                            }
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(run) = usize::try_from(i).ok().and_then(|i| runs.get(i))
                            else {
                                return;
                            };
                            if let Err(e) = self.inner.download(run.clone(), cancel, progress) {
                                lock(&failure).get_or_insert(e);
                                return;
                            }
                        }
                    });
                }
            });
        }
        self.inner.persist_now_and_then();
        self.inner.enforce_cap();
        if let Some(e) = lock(&failure).take() {
            return Err(e);
        }
        Ok(pin)
    }
}

impl Inner {
    fn has(&self, c: u64) -> bool {
        usize::try_from(c / 64)
            .ok()
            .and_then(|w| self.present.get(w))
            .is_some_and(|w| w.load(Ordering::Acquire) & (1 << (c % 64)) != 0)
    }

    fn set(&self, c: u64, on: bool) {
        if let Some(w) = usize::try_from(c / 64)
            .ok()
            .and_then(|w| self.present.get(w))
        {
            if on {
                w.fetch_or(1 << (c % 64), Ordering::AcqRel);
            } else {
                w.fetch_and(!(1 << (c % 64)), Ordering::AcqRel);
            }
        }
    }

    fn block_range(&self, b: u64) -> Range<u64> {
        b * BLOCK..((b + 1) * BLOCK).min(self.version.size)
    }

    /// The blocks of `blocks` not held, as runs of at most a [`CHUNK`].
    fn missing_runs(&self, blocks: Range<u64>) -> Vec<Range<u64>> {
        let per_run = CHUNK / BLOCK;
        let mut runs: Vec<Range<u64>> = Vec::new();
        for b in blocks.filter(|&b| !self.has(b)) {
            match runs.last_mut() {
                Some(r) if r.end == b && r.end - r.start < per_run => r.end = b + 1,
                _ => runs.push(b..b + 1),
            }
        }
        runs
    }

    /// Downloads the blocks `run` (a few attempts when the connection
    /// fails) and marks them held.
    fn download(
        &self,
        run: Range<u64>,
        cancel: &CancelToken,
        progress: &Progress,
    ) -> Result<(), RemoteError> {
        let range = self.block_range(run.start).start..self.block_range(run.end - 1).end;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut at = range.start;
            let result = self.client.read_range(
                &self.url,
                range.clone(),
                Some(&self.version),
                false,
                &mut |b| {
                    self.entry.write_at(at, b)?;
                    at += b.len() as u64;
                    self.fetched.fetch_add(b.len() as u64, Ordering::Relaxed);
                    FETCHED.fetch_add(b.len() as u64, Ordering::Relaxed);
                    progress.add_fetched(b.len() as u64);
                    Ok(())
                },
                cancel,
            );
            match result {
                Ok(_) => {
                    for b in run.clone() {
                        self.set(b, true);
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == "RemoteChanged" => {
                    self.changed.store(true, Ordering::Release);
                    return Err(e);
                }
                Err(e)
                    if e.kind() == "Transport" && attempt < ATTEMPTS && !cancel.is_cancelled() =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Records what the cache file holds, on disk.
    /// [`Inner::persist`] at most every [`PERSIST_EVERY`]: each costs a
    /// sync of the cache file, which a scan fetching batch after batch must
    /// not pay per batch. The rest is written when the file is closed.
    fn persist_now_and_then(&self) {
        let due = {
            let mut at = lock(&self.persisted);
            let due = at.elapsed() >= PERSIST_EVERY;
            if due {
                *at = std::time::Instant::now();
            }
            due
        };
        if due {
            self.persist();
        }
    }

    /// Writes the bitmap of what the cache file holds (after syncing it).
    fn persist(&self) {
        let len = usize::try_from(cache::bitmap_len(self.version.size)).unwrap_or(0);
        let mut bytes = vec![0u8; len];
        for (i, b) in bytes.iter_mut().enumerate() {
            if let Some(w) = self.present.get(i / 8) {
                *b = (w.load(Ordering::Acquire) >> ((i % 8) * 8)) as u8;
            }
        }
        self.entry
            .persist(&self.url, &self.version, self.header_end, &bytes);
        if let Some(dir) = self.entry.dir() {
            cache::touch(dir);
        }
    }

    /// Keeps the cache folder under its cap: other entries out first,
    /// least recently used; then chunks of this process's open files that
    /// no reader has pinned, least recently used.
    fn enforce_cap(&self) {
        let settings = self.client.settings();
        let cap = settings.cache_max;
        let Some(root) = &settings.cache_dir else {
            return;
        };
        let open: Vec<Arc<Inner>> = lock(&OPEN).iter().filter_map(Weak::upgrade).collect();
        let keep: Vec<std::path::PathBuf> = open
            .iter()
            .filter_map(|f| f.entry.dir().map(std::path::Path::to_path_buf))
            .collect();
        let mut total = cache::evict(root, cap, &keep);
        if total <= cap {
            return;
        }
        // Chunks (runs of blocks) are the unit given back.
        let per = CHUNK / BLOCK;
        let mut candidates: Vec<(u64, usize, u64)> = Vec::new();
        for (i, f) in open.iter().enumerate() {
            let pins = lock(&f.pins).clone();
            for c in 0..f.version.size.div_ceil(CHUNK) {
                let blocks = c * per..(c + 1) * per;
                // The header's chunk stays: `header_end` vouches for it.
                let pinned = pins
                    .iter()
                    .any(|p| p.start < blocks.end && blocks.start < p.end);
                if c * CHUNK >= f.header_end && !pinned && blocks.clone().any(|b| f.has(b)) {
                    let used = usize::try_from(c)
                        .ok()
                        .and_then(|c| f.used.get(c))
                        .map_or(0, |u| u.load(Ordering::Relaxed));
                    candidates.push((used, i, c));
                }
            }
        }
        candidates.sort_unstable();
        for (_, i, c) in candidates {
            if total <= cap {
                break;
            }
            let f = &open[i];
            let blocks: Vec<u64> = (c * per..(c + 1) * per).filter(|&b| f.has(b)).collect();
            // Marked absent first: a reader that looks now fetches again.
            for &b in &blocks {
                f.set(b, false);
            }
            if f.entry.punch(c * CHUNK..(c + 1) * CHUNK) {
                let freed: u64 = blocks
                    .iter()
                    .map(|&b| f.block_range(b).end - b * BLOCK)
                    .sum();
                total = total.saturating_sub(freed);
            } else {
                for &b in &blocks {
                    f.set(b, true);
                }
            }
        }
        for f in &open {
            f.persist();
        }
    }
}
