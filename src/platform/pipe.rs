//! A reader that went away: `tensorscope info … | head` ends quietly on
//! every system, though each says so differently.

use std::io;

/// True when a write failed because the reading end of the pipe was
/// closed: EPIPE on Unix; on Windows `ERROR_BROKEN_PIPE` (109) and
/// `ERROR_NO_DATA` (232), which std reads as `BrokenPipe`, and
/// `ERROR_PIPE_NOT_CONNECTED` (233), which it does not.
pub fn reader_closed(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
        || (cfg!(windows) && matches!(e.raw_os_error(), Some(109 | 232 | 233)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_a_closed_reader_and_a_full_disk_is_not() {
        assert!(reader_closed(&io::Error::from(io::ErrorKind::BrokenPipe)));
        assert!(!reader_closed(&io::Error::from(io::ErrorKind::StorageFull)));
        assert_eq!(
            reader_closed(&io::Error::from_raw_os_error(233)),
            cfg!(windows)
        );
    }
}
