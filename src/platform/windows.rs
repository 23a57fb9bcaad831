//! Windows calls that std does not make: a file's identity, sparse files
//! (the remote cache's holes), the shell's refresh after associations
//! change, and the console the program was started with.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::windows::ffi::OsStrExt as _;
use std::os::windows::io::AsRawHandle as _;
use std::path::Path;

use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, GetCompressedFileSizeW, GetFileInformationByHandle,
    INVALID_FILE_SIZE,
};
use windows_sys::Win32::System::Console::{FreeConsole, GetConsoleProcessList};
use windows_sys::Win32::System::IO::DeviceIoControl;
use windows_sys::Win32::System::Ioctl::{
    FILE_ZERO_DATA_INFORMATION, FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA,
};
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

/// Marks `f` sparse, so that its unwritten ranges take no disk (NTFS
/// allocates a file's whole length otherwise); false where the file system
/// cannot.
pub fn set_sparse(f: &File) -> bool {
    let mut returned = 0u32;
    // SAFETY: no buffers: FSCTL_SET_SPARSE with no input sets the flag;
    // `returned` is a valid out-parameter; no overlapped I/O.
    let ok = unsafe {
        DeviceIoControl(
            f.as_raw_handle(),
            FSCTL_SET_SPARSE,
            std::ptr::null(),
            0,
            std::ptr::null_mut(),
            0,
            &raw mut returned,
            std::ptr::null_mut(),
        )
    };
    ok != 0
}

/// Gives `start..end` of a sparse file's disk back (it then reads zeros).
pub fn zero_data(f: &File, start: u64, end: u64) -> bool {
    let (Ok(from), Ok(to)) = (i64::try_from(start), i64::try_from(end)) else {
        return false;
    };
    let range = FILE_ZERO_DATA_INFORMATION {
        FileOffset: from,
        BeyondFinalZero: to,
    };
    let mut returned = 0u32;
    // SAFETY: the input is one FILE_ZERO_DATA_INFORMATION that outlives
    // the call; no output buffer; no overlapped I/O.
    let ok = unsafe {
        DeviceIoControl(
            f.as_raw_handle(),
            FSCTL_SET_ZERO_DATA,
            (&raw const range).cast(),
            std::mem::size_of::<FILE_ZERO_DATA_INFORMATION>() as u32,
            std::ptr::null_mut(),
            0,
            &raw mut returned,
            std::ptr::null_mut(),
        )
    };
    ok != 0
}

/// The disk a file takes (a sparse file's allocated ranges), if known.
pub fn allocated_size(path: &Path) -> Option<u64> {
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let mut high = 0u32;
    // SAFETY: `wide` is a NUL-terminated path that outlives the call;
    // `high` is a valid out-parameter.
    let low = unsafe { GetCompressedFileSizeW(wide.as_ptr(), &raw mut high) };
    // INVALID_FILE_SIZE is also a valid low half: then the error says.
    if low == INVALID_FILE_SIZE && std::io::Error::last_os_error().raw_os_error() != Some(0) {
        return None;
    }
    Some((u64::from(high) << 32) | u64::from(low))
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
