//! Read-only memory mapping of a file: the one place of the format that
//! needs `unsafe`.
//!
//! # A file that shrinks while it is mapped
//!
//! Checkpoints are overwritten while they are open (a resumed download, a
//! training run saving over its last checkpoint). Reading a page of a
//! mapping that lies past the file's new end raises SIGBUS, which kills the
//! process — the explorer's window included. Checking the file's length
//! before a job cannot close that window: the file can shrink a moment
//! later, in the middle of a scan.
//!
//! So on Linux every mapping is registered in a fixed table that a SIGBUS
//! handler reads. When a fault hits one of our mappings, the handler maps
//! anonymous zero pages over the rest of that mapping (`mmap` with
//! `MAP_FIXED`, which is async-signal-safe), marks the mapping as changed,
//! and returns: the read is retried and sees zeros. Every reader checks
//! [`Mapping::changed`] (through `StoredFile::check_unchanged`) when it
//! is done and before it reports anything, and turns a changed mapping into
//! an error, so a result computed over a file that changed is never shown
//! as valid. A fault outside our mappings goes to the handler that was
//! there before (Rust's own, which tells a stack overflow), so nothing else
//! changes. The hot loops pay nothing: the check is one atomic load per
//! reader, not per byte.
//!
//! Elsewhere, and when the table is full, a mapping is not protected and
//! the length checks before each job are what remains.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;

/// The bytes of a file, mapped read-only (or empty for an empty file, which
/// cannot be mapped on every platform).
#[derive(Debug)]
pub struct Mapping {
    /// Where this mapping sits in the fault handler's table, if it does.
    /// Declared first, so it is dropped (unregistered) before the map is
    /// unmapped and its addresses can be given to another mapping.
    guard: Option<guard::Registration>,
    map: Option<memmap2::Mmap>,
}

impl Mapping {
    /// Maps `file` read-only; an empty file gets an empty slice, not a map.
    pub fn map(file: &File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(Self {
                map: None,
                guard: None,
            });
        }
        // SAFETY: the mapping is read-only and private to this process.
        // Tensorscope never writes to a file it has mapped and copies the
        // header before parsing it. A rewrite by another program changes the
        // bytes under us (readers re-check the length when done); a
        // truncation would raise SIGBUS, which the guard below turns into
        // zero pages and a flag (see the module docs).
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        let guard = guard::register(map.as_ptr() as usize, map.len());
        Ok(Self {
            map: Some(map),
            guard,
        })
    }

    /// The mapped bytes: the whole file as it was when mapped (with zeros
    /// where it was cut short while mapped; see [`Mapping::changed`]).
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Drops this process's hold on the mapped pages: they leave its
    /// resident set and stay in the page cache, and a later read maps them
    /// back from there (a minor fault, no disk read). For the maps of
    /// scratch files, which a long read would otherwise keep resident whole.
    #[cfg(unix)]
    pub fn forget_pages(&self) {
        if let Some(map) = &self.map {
            // SAFETY: the map is a shared mapping of a file (`map` above),
            // for which MADV_DONTNEED only unmaps pages: their contents are
            // the file's, read back from the page cache on the next access,
            // so no reader, also one reading now, sees other bytes.
            let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    /// Where pages cannot be let go of, nothing is done.
    #[cfg(not(unix))]
    pub fn forget_pages(&self) {}

    /// True once a read found the file shorter than when it was mapped: the
    /// bytes read since may be zeros that the file does not hold.
    pub fn changed(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(guard::Registration::changed)
    }
}

impl Deref for Mapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

#[cfg(target_os = "linux")]
mod guard {
    //! The table of mappings and the SIGBUS handler that reads it. Only
    //! atomics and `mmap`/`sigaction` are used in signal context.

    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Mappings protected at once: a sharded model of a thousand shards
    /// fits several times over.
    const SLOTS: usize = 4096;

    struct Slot {
        /// First byte of the mapping; 0 when the slot is free.
        start: AtomicUsize,
        /// One past its last byte; 0 while being filled or emptied.
        end: AtomicUsize,
        /// Set by the handler when a read faulted in this mapping.
        changed: AtomicBool,
    }

    static TABLE: [Slot; SLOTS] = [const {
        Slot {
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            changed: AtomicBool::new(false),
        }
    }; SLOTS];

    /// The page size, read once when the handler is installed.
    static PAGE: AtomicUsize = AtomicUsize::new(0);

    /// The SIGBUS action that was there before ours, to pass other faults on.
    static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

    /// A mapping's place in the table; freed on drop.
    #[derive(Debug)]
    pub struct Registration {
        slot: usize,
    }

    impl Registration {
        pub fn changed(&self) -> bool {
            TABLE
                .get(self.slot)
                .is_some_and(|s| s.changed.load(Ordering::Acquire))
        }
    }

    impl Drop for Registration {
        fn drop(&mut self) {
            // Emptied before the mapping itself is unmapped (`Mapping` drops
            // its map after this), and no read of the mapping can be under
            // way: a read needs a borrow of it.
            if let Some(s) = TABLE.get(self.slot) {
                s.end.store(0, Ordering::Release);
                s.changed.store(false, Ordering::Release);
                s.start.store(0, Ordering::Release);
            }
        }
    }

    /// Registers the mapping `start..start + len`; `None` when the handler
    /// cannot be installed or the table is full.
    pub fn register(start: usize, len: usize) -> Option<Registration> {
        if !installed() || start == 0 {
            return None;
        }
        let end = start.checked_add(len)?;
        for (slot, s) in TABLE.iter().enumerate() {
            if s.start
                .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.changed.store(false, Ordering::Release);
                s.end.store(end, Ordering::Release);
                return Some(Registration { slot });
            }
        }
        None
    }

    /// Installs the handler once; false when that failed.
    fn installed() -> bool {
        PREVIOUS.get_or_init(install).is_some()
    }

    fn install() -> Option<libc::sigaction> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two())?;
        PAGE.store(page, Ordering::Release);
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no
        // flags) that the fields below complete; sigaction reads `action`
        // and writes the previous action into `previous`.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&raw mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &raw const action, &raw mut previous) != 0 {
                return None;
            }
            Some(previous)
        }
    }

    /// The SIGBUS handler: zero pages over the rest of one of our mappings,
    /// or the previous handler for any other fault.
    extern "C" fn on_sigbus(
        signal: libc::c_int,
        info: *mut libc::siginfo_t,
        context: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers;
        // si_addr is the faulting address for SIGBUS.
        let addr = unsafe { (*info).si_addr() } as usize;
        let page = PAGE.load(Ordering::Acquire);
        for s in &TABLE {
            let start = s.start.load(Ordering::Acquire);
            let end = s.end.load(Ordering::Acquire);
            if start == 0 || addr < start || addr >= end || page == 0 {
                continue;
            }
            let from = addr & !(page - 1);
            let len = (end - from).div_ceil(page) * page;
            // SAFETY: `from..from + len` lies within our own read-only
            // mapping (mappings start on a page and the kernel rounds their
            // length up to whole pages); MAP_FIXED replaces those pages by
            // anonymous zero pages, which is async-signal-safe.
            let mapped = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if mapped != libc::MAP_FAILED {
                s.changed.store(true, Ordering::Release);
                return;
            }
            break;
        }
        pass_on(signal, info, context);
    }

    /// Hands a fault that is not ours to the handler that was there before,
    /// or restores the default action so that the retried access ends the
    /// process as it would have without us.
    fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        let previous = PREVIOUS.get().copied().flatten();
        if let Some(p) = previous
            && p.sa_sigaction != libc::SIG_DFL
            && p.sa_sigaction != libc::SIG_IGN
        {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: with SA_SIGINFO the previous handler has this
                // signature; it was installed for this very signal.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(p.sa_sigaction) };
                f(signal, info, context);
            } else {
                // SAFETY: without SA_SIGINFO the handler takes the signal only.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(p.sa_sigaction) };
                f(signal);
            }
            return;
        }
        // SAFETY: signal() is async-signal-safe; SIG_DFL makes the retried
        // access terminate the process with SIGBUS, as without a handler.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod guard {
    //! No fault handler here: mappings are not registered.

    /// Never made on this platform.
    #[derive(Debug)]
    pub struct Registration;

    impl Registration {
        pub fn changed(&self) -> bool {
            false
        }
    }

    pub fn register(_start: usize, _len: usize) -> Option<Registration> {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_file_cut_short_reads_as_zeros_and_is_flagged() {
        let page = 4096;
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(&vec![7u8; 8 * page]).expect("write");
        f.flush().expect("flush");
        let map = Mapping::map(f.as_file()).expect("map");
        assert!(!map.changed());
        assert_eq!(map.bytes()[5 * page], 7);
        f.as_file().set_len(page as u64).expect("truncate");
        // Without the handler this read would end the process.
        let sum: u64 = map.bytes().iter().map(|&b| u64::from(b)).sum();
        assert!(map.changed());
        assert_eq!(map.bytes().len(), 8 * page);
        assert_eq!(
            sum,
            7 * page as u64,
            "the page kept reads 7s, the rest zeros"
        );
        drop(map);
        // A new mapping of the same slot starts unflagged.
        let again = Mapping::map(f.as_file()).expect("map");
        assert!(!again.changed());
    }
}
