//! The guard of mapped files cut short while they are read.
//!
//! Checkpoints are overwritten while they are open (a resumed download, a
//! training run saving over its last checkpoint), and files on network
//! drives can fail a read. Reading such a page of a mapping does not
//! return an error, it raises a fault that kills the process: SIGBUS on
//! Linux and macOS, `EXCEPTION_IN_PAGE_ERROR` on Windows. Checking the
//! file's length before a job cannot close that window.
//!
//! So every mapping is registered in a fixed table that the fault handler
//! reads. When a fault hits one of our mappings, the handler puts zero
//! pages in place of the lost ones and marks the mapping as changed, and
//! the read is retried and sees zeros. Every reader checks
//! [`Registration::changed`] when it is done and before it reports, and
//! turns a changed mapping into an error, so a result computed over a
//! file that changed is never shown. A fault outside our mappings goes on
//! to whoever handled it before (Rust's own stack-overflow handler), so
//! nothing else changes. The hot loops pay nothing: the check is one
//! atomic load per reader, not per byte.
//!
//! - Linux and macOS (`unix.rs`): a SIGBUS handler maps anonymous zero
//!   pages over the rest of the mapping (`mmap` with `MAP_FIXED`).
//! - Windows (`windows.rs`): Windows refuses to truncate a mapped file, but
//!   a file on a network drive or removable disk can still fail a page-in;
//!   a vectored exception handler replaces the whole view by zero pages
//!   (`UnmapViewOfFile`, then `VirtualAlloc` at the same address).
//!
//! Elsewhere, and when the table is full, a mapping is not protected and
//! the length checks before each job are what remains.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

#[cfg(any(target_os = "linux", target_os = "macos"))]
mod unix;
#[cfg(any(target_os = "linux", target_os = "macos"))]
use unix as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

/// Mappings protected at once: a sharded model of a thousand shards fits
/// several times over.
const SLOTS: usize = 4096;

/// A slot's mapping is as it was mapped.
const MAPPED: u8 = 0;
/// The handler is putting zero pages in its place (Windows: one thread
/// replaces the view, others wait for it).
const REPLACING: u8 = 1;
/// Zero pages stand where the lost pages were.
const REPLACED: u8 = 2;
/// Replacing failed: faults in it are passed on.
const FAILED: u8 = 3;

struct Slot {
    /// First byte of the mapping; 0 when the slot is free.
    start: AtomicUsize,
    /// One past its last byte; 0 while being filled or emptied.
    end: AtomicUsize,
    /// Set by the handler when a read faulted in this mapping.
    changed: AtomicBool,
    /// `MAPPED`, `REPLACING`, `REPLACED` or `FAILED`.
    state: AtomicU8,
}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        changed: AtomicBool::new(false),
        state: AtomicU8::new(MAPPED),
    }
}; SLOTS];

/// The mapping holding `addr`: its slot, first byte and end. Only atomics:
/// safe in a signal handler.
#[cfg_attr(
    not(any(target_os = "linux", target_os = "macos", windows)),
    allow(dead_code)
)]
fn find(addr: usize) -> Option<(&'static Slot, usize, usize)> {
    TABLE.iter().find_map(|s| {
        let start = s.start.load(Ordering::Acquire);
        let end = s.end.load(Ordering::Acquire);
        (start != 0 && addr >= start && addr < end).then_some((s, start, end))
    })
}

/// A mapping's place in the table; freed by [`Registration::release`].
#[derive(Debug)]
pub struct Registration {
    slot: usize,
}

/// What the handler left in place of a released mapping: memory to free
/// once the mapping itself is unmapped (Windows), or nothing.
#[derive(Debug)]
#[must_use = "call `free_after_unmap` once the map is unmapped"]
pub struct Released {
    /// The replacement's first byte and length, when there is one to free.
    replacement: Option<(usize, usize)>,
}

impl Registration {
    /// True once a read found the file shorter than when it was mapped (or
    /// the system could not page it in): the bytes read since may be zeros
    /// that the file does not hold.
    pub fn changed(&self) -> bool {
        TABLE
            .get(self.slot)
            .is_some_and(|s| s.changed.load(Ordering::Acquire))
    }

    /// Takes the mapping out of the table. Call it before the map is
    /// unmapped (so its addresses, once given to another mapping, are not
    /// in the table twice), and call [`Released::free_after_unmap`]
    /// after.
    pub fn release(self) -> Released {
        let Some(s) = TABLE.get(self.slot) else {
            return Released { replacement: None };
        };
        // Wait for a replacement under way: its memory is ours to free.
        while s.state.load(Ordering::Acquire) == REPLACING {
            std::thread::yield_now();
        }
        let start = s.start.load(Ordering::Acquire);
        let end = s.end.load(Ordering::Acquire);
        let replaced = s.state.load(Ordering::Acquire) == REPLACED;
        s.end.store(0, Ordering::Release);
        s.changed.store(false, Ordering::Release);
        s.state.store(MAPPED, Ordering::Release);
        s.start.store(0, Ordering::Release);
        Released {
            replacement: (replaced && os::REPLACES_WHOLE_VIEW).then(|| (start, end - start)),
        }
    }
}

/// Registers the mapping `start..start + len`; `None` when the handler
/// cannot be installed here or the table is full.
pub fn register(start: usize, len: usize) -> Option<Registration> {
    if !os::installed() || start == 0 || len == 0 {
        return None;
    }
    let end = start.checked_add(len)?;
    for (slot, s) in TABLE.iter().enumerate() {
        if s.start
            .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.changed.store(false, Ordering::Release);
            s.state.store(MAPPED, Ordering::Release);
            s.end.store(end, Ordering::Release);
            return Some(Registration { slot });
        }
    }
    None
}

impl Released {
    /// Frees what the handler put in place of the mapping, once the mapping
    /// has been unmapped (which leaves a replacement alone).
    pub fn free_after_unmap(self) {
        if let Some((start, len)) = self.replacement {
            os::free_replacement(start, len);
        }
    }
}

/// Handles a fault at `addr`: true when it lay in one of our mappings and
/// zero pages now stand there (the access may be retried).
#[cfg_attr(
    not(any(target_os = "linux", target_os = "macos", windows)),
    allow(dead_code)
)]
fn recover(addr: usize) -> bool {
    let Some((slot, start, end)) = find(addr) else {
        return false;
    };
    if os::REPLACES_WHOLE_VIEW {
        // One thread replaces the view; the others wait for it.
        match slot
            .state
            .compare_exchange(MAPPED, REPLACING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                let done = os::replace_with_zeros(start, start, end);
                slot.changed.store(true, Ordering::Release);
                slot.state
                    .store(if done { REPLACED } else { FAILED }, Ordering::Release);
                done
            }
            Err(_) => loop {
                match slot.state.load(Ordering::Acquire) {
                    REPLACED => return true,
                    REPLACING => std::hint::spin_loop(),
                    _ => return false,
                }
            },
        }
    } else if os::replace_with_zeros(addr, start, end) {
        slot.state.store(REPLACED, Ordering::Release);
        slot.changed.store(true, Ordering::Release);
        true
    } else {
        false
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
mod os {
    //! No fault handler here: mappings are not registered.
    pub const REPLACES_WHOLE_VIEW: bool = false;
    pub fn installed() -> bool {
        false
    }
    pub fn replace_with_zeros(_addr: usize, _start: usize, _end: usize) -> bool {
        false
    }
    pub fn free_replacement(_start: usize, _len: usize) {}
}
