//! Windows calls that std does not make: a file's identity, the shell's
//! refresh after associations change, and the console the program was
//! started with.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::windows::io::AsRawHandle as _;

use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
};
use windows_sys::Win32::System::Console::{FreeConsole, GetConsoleProcessList};
use windows_sys::Win32::UI::Shell::{SHCNE_ASSOCCHANGED, SHCNF_IDLIST, SHChangeNotify};

/// The volume's serial number and the file's index on it: equal for two
/// handles of one file (hard links included).
pub fn file_id(f: &File) -> Option<(u32, u64)> {
    let mut info = BY_HANDLE_FILE_INFORMATION::default();
    // SAFETY: the handle is open for the life of `f`; `info` is a valid
    // out-parameter of the right type.
    let ok = unsafe { GetFileInformationByHandle(f.as_raw_handle(), &raw mut info) };
    (ok != 0).then(|| {
        (
            info.dwVolumeSerialNumber,
            (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
        )
    })
}

/// Tells Explorer that file associations changed, so icons and *Open
/// with* show them without a restart.
pub fn associations_changed() {
    // SAFETY: SHCNE_ASSOCCHANGED takes no items (both null).
    unsafe {
        SHChangeNotify(
            SHCNE_ASSOCCHANGED as i32,
            SHCNF_IDLIST,
            std::ptr::null(),
            std::ptr::null(),
        );
    }
}

/// Lets go of the console window when this process is its only user: the
/// console program was started by a double-click (Explorer made a console
/// for it), not from a terminal, and is about to open its window.
pub fn leave_own_console() {
    let mut pids = [0u32; 2];
    // SAFETY: the buffer holds `pids.len()` process ids.
    let count = unsafe { GetConsoleProcessList(pids.as_mut_ptr(), pids.len() as u32) };
    if count == 1 {
        // SAFETY: no other thread uses the console yet.
        unsafe {
            FreeConsole();
        }
    }
}
