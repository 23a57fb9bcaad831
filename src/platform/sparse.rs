//! Giving a file's disk space back without changing its length (a hole
//! punched in a sparse file), for the remote cache's evicted chunks.

use std::fs::File;
use std::ops::Range;

/// Gives `range` of `f`'s disk back: the file keeps its size and reads
/// zeros there. False where the system cannot (only Linux can here: macOS
/// and Windows would need their own calls, and the cache's cap then counts
/// whole entries).
#[cfg(target_os = "linux")]
pub fn punch_hole(f: &File, range: Range<u64>) -> bool {
    use std::os::fd::AsRawFd as _;
    let (Ok(off), Ok(len)) = (
        libc::off_t::try_from(range.start),
        libc::off_t::try_from(range.end.saturating_sub(range.start)),
    ) else {
        return false;
    };
    #[allow(unsafe_code)]
    // SAFETY: fallocate on an open descriptor has no memory effects; the
    // file keeps its size (KEEP_SIZE), so no mapping of it faults.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        )
    };
    r == 0
}

/// Gives `range` of `f`'s disk back; false where the system cannot.
#[cfg(not(target_os = "linux"))]
pub fn punch_hole(_f: &File, _range: Range<u64>) -> bool {
    false
}

/// The disk a file takes (its length where the system does not say).
pub fn allocated(m: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        m.blocks().saturating_mul(512)
    }
    #[cfg(not(unix))]
    {
        m.len()
    }
}
