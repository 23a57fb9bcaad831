//! The SIGBUS handler of Linux and macOS.
//!
//! Both raise SIGBUS, with the faulting address in `si_addr`, when a
//! process reads a page of a file mapping that lies wholly past the file's
//! current end (Linux mmap(2): "Attempted access to a portion of the
//! buffer that does not correspond to the file"; Darwin's mmap(2) and
//! sigaction(2) likewise). On macOS Rust's std also handles SIGBUS, for
//! stack overflows that hit the guard page there: such a fault is not in
//! our table and is passed on to it. Only atomics and `mmap`/`sigaction`
//! (system calls) run in signal context.

#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Zero pages go over the rest of the mapping from the faulting page on.
pub const REPLACES_WHOLE_VIEW: bool = false;

/// The page size, read once when the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// The SIGBUS action that was there before ours, to pass other faults on.
static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

/// Installs the handler once; false when that failed.
pub fn installed() -> bool {
    PREVIOUS.get_or_init(install).is_some()
}

fn install() -> Option<libc::sigaction> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two())?;
    PAGE.store(page, Ordering::Release);
    // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags)
    // that the fields below complete; sigaction reads `action` and writes
    // the previous action into `previous`.
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

/// Maps zero pages over `from`'s page to `end` (a mapping of ours).
pub fn replace_with_zeros(addr: usize, _start: usize, end: usize) -> bool {
    let page = PAGE.load(Ordering::Acquire);
    if page == 0 {
        return false;
    }
    let from = addr & !(page - 1);
    let len = (end - from).div_ceil(page) * page;
    // SAFETY: `from..from + len` lies within our own read-only mapping
    // (mappings start on a page and the kernel rounds their length up to
    // whole pages); MAP_FIXED replaces those pages by anonymous zero pages.
    // mmap is a system call that touches no user-space state.
    let mapped = unsafe {
        libc::mmap(
            from as *mut libc::c_void,
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    mapped != libc::MAP_FAILED
}

/// The zero pages lie inside the mapping, which `munmap` removes whole.
pub fn free_replacement(_start: usize, _len: usize) {}

/// The faulting address of a SIGBUS.
fn fault_address(info: *mut libc::siginfo_t) -> usize {
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers;
    // for SIGBUS si_addr is the faulting address.
    #[cfg(target_os = "linux")]
    let addr = unsafe { (*info).si_addr() };
    // SAFETY: as above; Darwin's siginfo_t has si_addr as a field.
    #[cfg(target_os = "macos")]
    let addr = unsafe { (*info).si_addr };
    addr as usize
}

/// The SIGBUS handler: zero pages over the rest of one of our mappings,
/// or the previous handler for any other fault.
extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    if !super::recover(fault_address(info)) {
        pass_on(signal, info, context);
    }
}

/// Hands a fault that is not ours to the handler that was there before, or
/// restores the default action so that the retried access ends the process
/// as it would have without us.
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
