//! Sparse files: the remote cache's `data` is as long as the remote file
//! and takes only the disk of the chunks it holds; evicted chunks give
//! their disk back (a hole punched) without changing its length. Linux and
//! macOS file systems make files sparse by themselves; NTFS must be asked
//! (`FSCTL_SET_SPARSE`), and it punches with `FSCTL_SET_ZERO_DATA`.

use std::fs::File;
use std::ops::Range;

/// Makes `f` sparse where the file system needs to be asked (Windows);
/// false where it could not be.
pub fn make_sparse(f: &File) -> bool {
    #[cfg(windows)]
    {
        super::windows::set_sparse(f)
    }
    #[cfg(not(windows))]
    {
        let _ = f;
        true
    }
}

/// Gives `range` of `f`'s disk back: the file keeps its size and reads
/// zeros there. False where the system cannot (macOS would need
/// `F_PUNCHHOLE`; there the cache's cap counts whole entries).
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

/// Gives `range` of a sparse file's disk back (Windows).
#[cfg(windows)]
pub fn punch_hole(f: &File, range: Range<u64>) -> bool {
    super::windows::zero_data(f, range.start, range.end)
}

/// Gives `range` of `f`'s disk back; false where the system cannot.
#[cfg(not(any(target_os = "linux", windows)))]
pub fn punch_hole(_f: &File, _range: Range<u64>) -> bool {
    false
}

/// The disk the file at `path` takes (its length where the system does
/// not say); 0 when it cannot be read.
pub fn allocated(path: &std::path::Path) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path).map_or(0, |m| m.blocks().saturating_mul(512))
    }
    #[cfg(windows)]
    {
        super::windows::allocated_size(path)
            .or_else(|| std::fs::metadata(path).ok().map(|m| m.len()))
            .unwrap_or(0)
    }
    #[cfg(not(any(unix, windows)))]
    {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }
}
