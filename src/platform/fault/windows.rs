//! The vectored exception handler of Windows.
//!
//! Windows refuses to shorten a file that a process has mapped
//! (`ERROR_USER_MAPPED_FILE`), but a page-in can still fail: a file on a
//! network share whose server went away, a removed disk, a file replaced
//! under a share. The read then raises `EXCEPTION_IN_PAGE_ERROR`, whose
//! second parameter is the faulting address. Vectored handlers run first,
//! in the faulting thread, before any frame-based handler, so the fault is
//! recovered where it happened: the view is unmapped and zero pages are
//! committed at the same address (a view starts on the allocation
//! granularity, as `VirtualAlloc` needs), and the access is retried. The
//! zero pages are freed after `memmap2` tries to unmap the view, which
//! leaves memory that is not a view alone.

#![allow(unsafe_code)]

use std::sync::OnceLock;

use windows_sys::Win32::Foundation::STATUS_IN_PAGE_ERROR;
use windows_sys::Win32::System::Diagnostics::Debug::{
    AddVectoredExceptionHandler, EXCEPTION_CONTINUE_EXECUTION, EXCEPTION_CONTINUE_SEARCH,
    EXCEPTION_POINTERS,
};
use windows_sys::Win32::System::Memory::{
    MEM_COMMIT, MEM_RELEASE, MEM_RESERVE, MEMORY_MAPPED_VIEW_ADDRESS, PAGE_READONLY,
    UnmapViewOfFile, VirtualAlloc, VirtualFree,
};

/// A view is unmapped whole, so zero pages replace all of it.
pub const REPLACES_WHOLE_VIEW: bool = true;

/// The system's page: views are committed in whole pages.
const PAGE: usize = 4096;

/// Whether the handler was added.
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Adds the handler once; false when that failed.
pub fn installed() -> bool {
    *INSTALLED.get_or_init(|| {
        // SAFETY: the handler is a plain function that lives as long as
        // the process; 1 puts it first in the list.
        let handle = unsafe { AddVectoredExceptionHandler(1, Some(on_exception)) };
        !handle.is_null()
    })
}

/// Unmaps the view at `start` and commits zero pages over `start..end`.
pub fn replace_with_zeros(_addr: usize, start: usize, end: usize) -> bool {
    let len = (end - start).div_ceil(PAGE) * PAGE;
    // SAFETY: `start` is the base of a view this process mapped read-only
    // (memmap2 maps whole files from offset 0, so its pointer is the view's
    // base) and registered; no reference to its bytes is handed out as
    // mutable, and every reader checks the changed flag before trusting
    // what it read, so replacing the bytes by zeros breaks no invariant.
    unsafe {
        if UnmapViewOfFile(MEMORY_MAPPED_VIEW_ADDRESS {
            Value: start as *mut _,
        }) == 0
        {
            return false;
        }
        let at = VirtualAlloc(
            start as *const _,
            len,
            MEM_RESERVE | MEM_COMMIT,
            PAGE_READONLY,
        );
        at as usize == start
    }
}

/// Frees the zero pages that replaced a view.
pub fn free_replacement(start: usize, _len: usize) {
    // SAFETY: `start` is the base of the allocation `replace_with_zeros`
    // made; the view it replaced is gone and nothing reads it any more
    // (the mapping was dropped).
    unsafe {
        VirtualFree(start as *mut _, 0, MEM_RELEASE);
    }
}

/// The handler: an in-page error in one of our views is recovered; every
/// other exception goes on to the next handler.
unsafe extern "system" fn on_exception(info: *mut EXCEPTION_POINTERS) -> i32 {
    // SAFETY: the system passes valid exception pointers to a vectored
    // handler for the duration of the call.
    let record = unsafe { info.as_ref().and_then(|i| i.ExceptionRecord.as_ref()) };
    let Some(record) = record else {
        return EXCEPTION_CONTINUE_SEARCH;
    };
    if record.ExceptionCode != STATUS_IN_PAGE_ERROR || record.NumberParameters < 2 {
        return EXCEPTION_CONTINUE_SEARCH;
    }
    if super::recover(record.ExceptionInformation[1]) {
        EXCEPTION_CONTINUE_EXECUTION
    } else {
        EXCEPTION_CONTINUE_SEARCH
    }
}
