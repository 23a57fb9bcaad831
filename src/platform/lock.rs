//! Advisory locks on the remote cache's entries, through std's file locks
//! (`flock` on Unix, `LockFileEx` on Windows).
//!
//! Windows' locks are mandatory for reads and writes through other handles
//! (and a shared lock forbids writing even through the handle that holds
//! it), so a lock is taken on a file of its own (an entry's `lock`), never
//! on a file that is read or written.

use std::fs::File;

/// The kind of lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Many holders at once: the entry is in use.
    Shared,
    /// One holder: the entry may be changed or removed.
    Exclusive,
}

/// Takes `lock` on `file` without waiting; true when it is held. A shared
/// lock held through this handle becomes exclusive where the system can
/// convert it (Unix), and stays shared where it cannot (Windows: false).
pub fn try_lock(file: &File, lock: Lock) -> bool {
    match lock {
        Lock::Shared => file.try_lock_shared().is_ok(),
        Lock::Exclusive => file.try_lock().is_ok(),
    }
}

/// Makes the shared lock this handle holds exclusive, without waiting;
/// false (the shared lock still held) when another holder is there. Unix
/// converts a lock in place; Windows cannot, so the shared lock is let go
/// of and the exclusive one tried, and on failure the shared one taken
/// again.
pub fn upgrade(file: &File) -> bool {
    if cfg!(windows) {
        let _ = file.unlock();
        if file.try_lock().is_ok() {
            return true;
        }
        let _ = file.lock_shared();
        false
    } else {
        file.try_lock().is_ok()
    }
}

/// Makes the exclusive lock this handle holds shared again.
pub fn downgrade(file: &File) {
    if cfg!(windows) {
        let _ = file.unlock();
    }
    let _ = file.lock_shared();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_lock_keeps_out_an_exclusive_one_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let a = File::create(&path).expect("create");
        let b = File::open(&path).expect("open");
        assert!(try_lock(&a, Lock::Shared));
        assert!(try_lock(&b, Lock::Shared), "shared locks coexist");
        let c = File::open(&path).expect("open");
        assert!(!try_lock(&c, Lock::Exclusive));
        drop((a, b));
        assert!(try_lock(&c, Lock::Exclusive));
    }

    #[test]
    fn a_shared_lock_is_upgraded_only_when_it_is_the_only_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let a = File::create(&path).expect("create");
        let b = File::open(&path).expect("open");
        assert!(try_lock(&a, Lock::Shared));
        assert!(try_lock(&b, Lock::Shared));
        assert!(!upgrade(&a), "b holds it too");
        drop(b);
        assert!(upgrade(&a));
        let c = File::open(&path).expect("open");
        assert!(!try_lock(&c, Lock::Shared), "exclusive now");
        downgrade(&a);
        assert!(try_lock(&c, Lock::Shared), "shared again");
    }
}
