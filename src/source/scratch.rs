//! Scratch space for the bytes of tensors that are not stored as readers
//! want them (byte-swapped, strided, deflated): written block by block,
//! then read in place like a mapped file. A tensor's [`Slot`] is filled
//! when a reader pins it and, when it lives in a file, given back when the
//! last pin drops (the hole reads as zeros again, and the slot says it is
//! not ready, so no reader reports what it read then), as the remote cache
//! gives back its chunks. Small tensors stay in memory (within a cap);
//! larger ones go to an unlinked file in the cache folder, which the
//! system removes when the last handle closes, also after a crash. The
//! disk in use at once is capped (`$TENSORSCOPE_SCRATCH_MAX`, such as
//! `64G`; default 64 GiB), so a hostile file cannot fill the disk.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::map::Mapping;

/// Tensors up to this size are kept in memory.
const IN_MEMORY_BYTES: u64 = 1 << 20;

/// Bytes of slots kept in memory at once, in this process; beyond, small
/// tensors go to files too.
const MEMORY_CAP: u64 = 256 << 20;

/// Bytes of slots kept in memory now.
static IN_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Slots in files at least this large are paged out of the resident set
/// while they are read (see [`pager`]).
const PAGED_BYTES: u64 = 64 << 20;

/// How often the pager lets go of the pages of the slots being read.
const PAGER_PERIOD: std::time::Duration = std::time::Duration::from_millis(50);

/// Default cap of the scratch files in use at once.
const DEFAULT_MAX: u64 = 64 << 30;

/// Bytes of scratch files in use now, in this process.
static IN_USE: AtomicU64 = AtomicU64::new(0);

/// The bytes of one tensor, in the order readers want.
#[derive(Debug)]
pub struct Scratch {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Memory(Vec<u8>),
    File { map: Mapping, _reserved: Reserved },
}

/// A share of the cap, given back when dropped.
#[derive(Debug)]
struct Reserved(u64);

impl Drop for Reserved {
    fn drop(&mut self) {
        IN_USE.fetch_sub(self.0, Ordering::Relaxed);
    }
}

impl Scratch {
    /// The bytes written.
    pub fn bytes(&self) -> &[u8] {
        match &self.kind {
            Kind::Memory(v) => v,
            Kind::File { map, .. } => map.bytes(),
        }
    }
}

/// Where scratch bytes are written; [`Writer::finish`] checks the length.
#[derive(Debug)]
pub struct Writer {
    target: Target,
    expected: u64,
    written: u64,
}

#[derive(Debug)]
enum Target {
    Memory(Vec<u8>),
    File {
        out: io::BufWriter<File>,
        reserved: Reserved,
    },
}

/// The cap from the environment.
fn cap() -> u64 {
    std::env::var("TENSORSCOPE_SCRATCH_MAX")
        .ok()
        .and_then(|v| super::remote::parse_size(&v))
        .unwrap_or(DEFAULT_MAX)
}

/// The scratch folder: `scratch/` in the cache folder of remote files (the
/// system's temporary folder when none is configured).
#[allow(
    clippy::disallowed_methods,
    reason = "with no cache folder configured, scratch files (unlinked as soon as made, so nothing is left behind) go to the system's temporary folder"
)]
fn folder() -> io::Result<PathBuf> {
    let dir = super::remote::Settings::from_env()
        .cache_dir
        .unwrap_or_else(|| std::env::temp_dir().join("tensorscope"))
        .join("scratch");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A writer for `len` bytes: in memory when small, else a new unlinked
/// file, within the cap.
pub fn writer(len: u64) -> io::Result<Writer> {
    writer_in(len, None)
}

/// [`writer`], with its files in `dir` (else the cache folder's).
fn writer_in(len: u64, dir: Option<&std::path::Path>) -> io::Result<Writer> {
    if len <= IN_MEMORY_BYTES {
        return Ok(Writer {
            target: Target::Memory(Vec::with_capacity(len as usize)),
            expected: len,
            written: 0,
        });
    }
    let reserved = reserve(len)?;
    let file = unlinked_file(dir)?;
    Ok(Writer {
        target: Target::File {
            out: io::BufWriter::with_capacity(1 << 20, file),
            reserved,
        },
        expected: len,
        written: 0,
    })
}

/// A share of the disk cap for `len` bytes, or why there is none.
fn reserve(len: u64) -> io::Result<Reserved> {
    let max = cap();
    let before = IN_USE.fetch_add(len, Ordering::Relaxed);
    let reserved = Reserved(len);
    if before.saturating_add(len) > max {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "reading it needs {len} bytes of scratch space and {before} are in use; the cap is {max} (TENSORSCOPE_SCRATCH_MAX)"
            ),
        ));
    }
    Ok(reserved)
}

/// A new file in `dir`'s `scratch/` (else the cache folder's), unlinked at
/// once: its bytes live as long as the handle and its map, and nothing is
/// left behind.
fn unlinked_file(dir: Option<&std::path::Path>) -> io::Result<File> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = match dir {
        Some(d) => {
            let d = d.join("scratch");
            std::fs::create_dir_all(&d)?;
            d
        }
        None => folder()?,
    };
    loop {
        let name = format!(
            "{}-{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                let _ = std::fs::remove_file(&path);
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

impl Writer {
    /// Appends `bytes`; more than the expected length is an error.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let after = self.written.saturating_add(bytes.len() as u64);
        if after > self.expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("more than the {} bytes expected", self.expected),
            ));
        }
        match &mut self.target {
            Target::Memory(v) => v.extend_from_slice(bytes),
            Target::File { out, .. } => out.write_all(bytes)?,
        }
        self.written = after;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The target, once exactly the expected length was written, flushed.
    fn done(self) -> io::Result<Target> {
        if self.written != self.expected {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} bytes of the {} expected", self.written, self.expected),
            ));
        }
        let mut target = self.target;
        if let Target::File { out, .. } = &mut target {
            out.flush()?;
        }
        Ok(target)
    }

    /// The bytes, once exactly the expected length was written.
    pub fn finish(self) -> io::Result<Scratch> {
        let kind = match self.done()? {
            Target::Memory(v) => Kind::Memory(v),
            Target::File { out, reserved } => {
                let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
                Kind::File {
                    map: Mapping::map(&file)?,
                    _reserved: reserved,
                }
            }
        };
        Ok(Scratch { kind })
    }
}

/// The scratch space of one tensor, `len` bytes: empty until a reader
/// [`pin`](Slot::pin)s it, which fills it; a slot in a file is given back
/// when its last pin drops.
#[derive(Debug)]
pub struct Slot {
    len: u64,
    /// Where its file goes (`None`: the cache folder's `scratch/`).
    dir: Option<PathBuf>,
    backing: std::sync::OnceLock<Backing>,
    state: std::sync::Mutex<SlotState>,
    /// True while pinned: `state`'s pin count, for the pager, which must
    /// not take the lock.
    pinned: std::sync::atomic::AtomicBool,
    /// True while filled; set under `state`'s lock, read without it (the
    /// explorer asks every frame, and a fill holds the lock for its whole
    /// length).
    ready: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
enum Backing {
    /// Filled once and kept (small tensors, within [`MEMORY_CAP`]).
    Memory(Vec<u8>),
    /// An unlinked file of `len` bytes, mapped once; filled when pinned,
    /// its disk given back when unpinned.
    File { file: File, map: Mapping },
}

#[derive(Debug, Default)]
struct SlotState {
    pins: u32,
    reserved: Option<Reserved>,
}

/// Keeps a slot's bytes while a reader uses them; dropping the last pin
/// of a slot in a file gives its disk back.
#[derive(Debug)]
pub struct SlotPin(Arc<Slot>);

impl Drop for SlotPin {
    fn drop(&mut self) {
        let slot = &self.0;
        let mut state = slot.lock();
        state.pins = state.pins.saturating_sub(1);
        if state.pins == 0 {
            slot.pinned.store(false, Ordering::Release);
        }
        if state.pins == 0
            && let Some(Backing::File { file, .. }) = slot.backing.get()
        {
            slot.ready.store(false, Ordering::Release);
            state.reserved = None;
            if !crate::platform::sparse::punch_hole(file, 0..slot.len) {
                // No hole punching here: the bytes stay until the slot goes.
                slot.ready.store(true, Ordering::Release);
            }
        }
    }
}

impl Slot {
    /// An empty slot for `len` bytes.
    pub fn new(len: u64) -> Self {
        Self {
            len,
            dir: None,
            backing: std::sync::OnceLock::new(),
            state: std::sync::Mutex::new(SlotState::default()),
            pinned: std::sync::atomic::AtomicBool::new(false),
            ready: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True while the bytes are filled (pinned, or kept in memory).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The bytes: what was filled, zeros in a slot given back, empty
    /// before the first fill. Readers check [`Slot::is_ready`] before
    /// they report.
    pub fn bytes(&self) -> &[u8] {
        match self.backing.get() {
            Some(Backing::Memory(v)) => v,
            Some(Backing::File { map, .. }) => map.bytes(),
            None => &[],
        }
    }

    /// Pins the slot, filling it first by `fill` (which must write exactly
    /// its length) unless it is ready.
    pub fn pin<E>(
        self: &Arc<Self>,
        writer: impl FnOnce(&mut dyn FnMut(&[u8]) -> io::Result<()>) -> Result<(), E>,
        io_error: impl Fn(io::Error) -> E,
    ) -> Result<SlotPin, E> {
        let mut state = self.lock();
        if !self.is_ready() {
            self.fill(&mut state, writer, &io_error)?;
        }
        state.pins += 1;
        self.pinned.store(true, Ordering::Release);
        Ok(SlotPin(Arc::clone(self)))
    }

    fn fill<E>(
        self: &Arc<Self>,
        state: &mut SlotState,
        writer: impl FnOnce(&mut dyn FnMut(&[u8]) -> io::Result<()>) -> Result<(), E>,
        io_error: &impl Fn(io::Error) -> E,
    ) -> Result<(), E> {
        let len = self.len;
        let backing = if let Some(b) = self.backing.get() {
            b
        } else {
            if len <= IN_MEMORY_BYTES {
                let before = IN_MEMORY.fetch_add(len, Ordering::Relaxed);
                if before.saturating_add(len) <= MEMORY_CAP {
                    let mut w = Writer {
                        target: Target::Memory(Vec::with_capacity(len as usize)),
                        expected: len,
                        written: 0,
                    };
                    let filled =
                        writer(&mut |b| w.write(b)).and_then(|()| w.done().map_err(io_error));
                    let Ok(Target::Memory(v)) = filled else {
                        IN_MEMORY.fetch_sub(len, Ordering::Relaxed);
                        return filled.map(drop);
                    };
                    let _ = self.backing.set(Backing::Memory(v));
                    self.ready.store(true, Ordering::Release);
                    return Ok(());
                }
                IN_MEMORY.fetch_sub(len, Ordering::Relaxed);
            }
            let scratch_file = unlinked_file(self.dir.as_deref()).map_err(io_error)?;
            scratch_file.set_len(len).map_err(io_error)?;
            let map = Mapping::map(&scratch_file).map_err(io_error)?;
            let _ = self.backing.set(Backing::File {
                file: scratch_file,
                map,
            });
            self.backing
                .get()
                .ok_or_else(|| io_error(io::Error::other("the scratch file was not kept")))?
        };
        let Backing::File { file, .. } = backing else {
            self.ready.store(true, Ordering::Release);
            return Ok(());
        };
        // Written again from its start after it was given back.
        let mut out = io::BufWriter::with_capacity(1 << 20, file.try_clone().map_err(io_error)?);
        io::Seek::seek(&mut out, io::SeekFrom::Start(0)).map_err(io_error)?;
        let mut w = Writer {
            target: Target::File {
                out,
                reserved: reserve(len).map_err(io_error)?,
            },
            expected: len,
            written: 0,
        };
        writer(&mut |b| w.write(b))?;
        if let Target::File { reserved, .. } = w.done().map_err(io_error)? {
            state.reserved = Some(reserved);
        }
        self.ready.store(true, Ordering::Release);
        if len >= PAGED_BYTES {
            // Pinned by the caller as soon as this returns.
            self.pinned.store(true, Ordering::Release);
            pager::watch(self);
        }
        Ok(())
    }
}

/// While a large slot in a file is read, its pages would stay in the
/// process's resident set until the slot is given back: a one-pass read of
/// a 1 GiB tensor would hold 1 GiB. A named thread lets go of them every
/// [`PAGER_PERIOD`] (`Mapping::forget_pages`: they stay in the page cache
/// and are mapped back on the next read), so the resident set stays near
/// what is read in one period, whatever the tensor's size.
mod pager {
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};

    use super::{Backing, PAGER_PERIOD, Slot};

    struct Watched {
        slots: Mutex<Vec<Weak<Slot>>>,
        wake: Condvar,
    }

    fn watched() -> &'static Watched {
        static WATCHED: OnceLock<Watched> = OnceLock::new();
        static STARTED: OnceLock<bool> = OnceLock::new();
        let w = WATCHED.get_or_init(|| Watched {
            slots: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        });
        STARTED.get_or_init(|| {
            std::thread::Builder::new()
                .name("scratch-pager".into())
                .spawn(run)
                .is_ok()
        });
        w
    }

    /// Starts letting go of `slot`'s pages while it is pinned.
    pub(super) fn watch(slot: &Arc<Slot>) {
        let w = watched();
        let mut slots = w.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.push(Arc::downgrade(slot));
        w.wake.notify_one();
    }

    fn run() {
        let w = watched();
        let mut slots = w.slots.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            while slots.is_empty() {
                slots = w.wake.wait(slots).unwrap_or_else(PoisonError::into_inner);
            }
            let (kept, _) = w
                .wake
                .wait_timeout(slots, PAGER_PERIOD)
                .unwrap_or_else(PoisonError::into_inner);
            slots = kept;
            slots.retain(|weak| {
                let Some(slot) = weak.upgrade() else {
                    return false;
                };
                // Read without the slot's lock, which its filler holds
                // while it hands the slot here.
                let pinned = slot.pinned.load(Ordering::Acquire);
                if pinned && let Some(Backing::File { map, .. }) = slot.backing.get() {
                    map.forget_pages();
                }
                pinned
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a fill writes.
    type Sink<'a> = &'a mut dyn FnMut(&[u8]) -> io::Result<()>;

    fn fill_with(byte: u8, n: u64) -> impl FnOnce(Sink<'_>) -> io::Result<()> {
        move |sink| {
            let block = vec![byte; 1 << 20];
            let mut left = n;
            while left > 0 {
                let k = left.min(block.len() as u64);
                sink(&block[..k as usize])?;
                left -= k;
            }
            Ok(())
        }
    }

    #[test]
    fn a_slot_is_filled_when_pinned_and_a_file_slot_given_back_when_unpinned() {
        let dir = tempfile::tempdir().expect("dir");
        let len = IN_MEMORY_BYTES + 4096;
        let slot = Arc::new(Slot {
            dir: Some(dir.path().to_path_buf()),
            ..Slot::new(len)
        });
        assert!(!slot.is_ready() && slot.bytes().is_empty());
        let pin = slot.pin(fill_with(3, len), |e| e).expect("filled");
        let again = slot
            .pin(|_| -> io::Result<()> { panic!("filled twice") }, |e| e)
            .expect("pinned");
        assert!(slot.is_ready());
        assert!(slot.bytes().len() as u64 == len && slot.bytes().iter().all(|&b| b == 3));
        drop(pin);
        assert!(slot.is_ready(), "still pinned once");
        drop(again);
        assert!(!slot.is_ready(), "given back");
        // Pinned again: filled again.
        let _pin = slot.pin(fill_with(5, len), |e| e).expect("refilled");
        assert!(slot.bytes().iter().all(|&b| b == 5));
        // A fill of the wrong length is an error and leaves it not ready.
        let short = Arc::new(Slot {
            dir: Some(dir.path().to_path_buf()),
            ..Slot::new(len)
        });
        assert!(short.pin(fill_with(1, len - 1), |e| e).is_err());
        assert!(short.pin(fill_with(1, len + 1), |e| e).is_err());
        assert!(!short.is_ready());
    }

    #[test]
    fn a_read_slot_keeps_its_bytes_while_the_pager_lets_go_of_its_pages() {
        let dir = tempfile::tempdir().expect("dir");
        let len = PAGED_BYTES + 4096;
        let slot = Arc::new(Slot {
            dir: Some(dir.path().to_path_buf()),
            ..Slot::new(len)
        });
        let pin = slot.pin(fill_with(7, len), |e| e).expect("filled");
        // Read across several of the pager's periods: every byte stays.
        let deadline = std::time::Instant::now() + PAGER_PERIOD * 4;
        while std::time::Instant::now() < deadline {
            assert!(slot.bytes().iter().step_by(4096).all(|&b| b == 7));
        }
        if let Some(Backing::File { map, .. }) = slot.backing.get() {
            map.forget_pages();
        }
        assert!(slot.bytes().iter().all(|&b| b == 7));
        drop(pin);
        assert!(!slot.is_ready());
    }

    #[test]
    fn a_small_slot_stays_in_memory() {
        let slot = Arc::new(Slot::new(10));
        drop(slot.pin(fill_with(9, 10), |e| e).expect("filled"));
        assert!(slot.is_ready());
        assert_eq!(slot.bytes(), &[9u8; 10]);
    }

    #[test]
    fn small_in_memory_large_in_a_file_lengths_checked() {
        let mut w = writer(3).expect("writer");
        w.write(b"ab").expect("write");
        assert!(w.write(b"cd").is_err());
        w.write(b"c").expect("write");
        assert_eq!(w.finish().expect("finish").bytes(), b"abc");
        let short = writer(4).expect("writer");
        assert!(short.finish().is_err());

        let dir = tempfile::tempdir().expect("dir");
        let len = IN_MEMORY_BYTES + 5;
        let mut w = writer_in(len, Some(dir.path())).expect("file writer");
        let block = vec![7u8; 1 << 20];
        while w.written() + block.len() as u64 <= len {
            w.write(&block).expect("write");
        }
        let rest = (len - w.written()) as usize;
        w.write(&block[..rest]).expect("write");
        let s = w.finish().expect("finish");
        assert_eq!(s.bytes().len() as u64, len);
        assert!(s.bytes().iter().all(|&b| b == 7));
        // Unlinked: the folder holds nothing.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("scratch"))
            .expect("scratch folder")
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
