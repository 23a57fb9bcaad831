//! Files the desktop asks the running explorer to open after it started.
//!
//! On Linux and Windows a double-click starts the program with the file as
//! an argument, so nothing arrives here. macOS starts an app once and sends
//! it open-document events (Finder's double-click, *Open With*, a file
//! dropped on the Dock icon), the first of them while the app is still
//! launching; winit does not deliver them, so the macOS module receives
//! them (`application:openURLs:`) and queues the paths here, and the
//! explorer takes them every frame.

use std::path::PathBuf;
use std::sync::Mutex;

/// Called after a path is queued, to wake the explorer's frame loop.
type Waker = Box<dyn Fn() + Send + Sync>;

/// Paths received and not yet taken, and what wakes their taker.
struct Queue {
    paths: Mutex<Vec<PathBuf>>,
    waker: Mutex<Option<Waker>>,
}

impl Queue {
    const fn new() -> Self {
        Self {
            paths: Mutex::new(Vec::new()),
            waker: Mutex::new(None),
        }
    }

    fn set_waker(&self, waker: Waker) {
        *self
            .waker
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(waker);
    }

    fn push(&self, paths: impl IntoIterator<Item = PathBuf>) {
        self.paths
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(paths);
        if let Some(wake) = self
            .waker
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            wake();
        }
    }

    fn take(&self) -> Vec<PathBuf> {
        std::mem::take(
            &mut *self
                .paths
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// The process's queue: the desktop's events arrive once per process.
static QUEUE: Queue = Queue::new();

/// Starts receiving the desktop's open-document events; call once, before
/// the event loop is created. A no-op where files arrive as arguments.
pub fn install() {
    #[cfg(target_os = "macos")]
    super::macos::install_open_documents();
}

/// Sets what wakes the frame loop once a path is queued (it may already
/// hold paths that arrived during launch: take them on the next frame).
pub fn set_waker(waker: impl Fn() + Send + Sync + 'static) {
    QUEUE.set_waker(Box::new(waker));
}

/// Queues paths to open and wakes the frame loop.
pub fn push(paths: impl IntoIterator<Item = PathBuf>) {
    QUEUE.push(paths);
}

/// The paths queued since the last call, in the order they arrived.
pub fn take() -> Vec<PathBuf> {
    QUEUE.take()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn queued_paths_are_taken_once_in_order_and_wake_the_loop() {
        let q = Queue::new();
        let woken = Arc::new(AtomicUsize::new(0));
        let w = Arc::clone(&woken);
        q.set_waker(Box::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        q.push([PathBuf::from("a.safetensors"), PathBuf::from("b.gguf")]);
        q.push([PathBuf::from("c.npy")]);
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        assert_eq!(
            q.take(),
            ["a.safetensors", "b.gguf", "c.npy"].map(PathBuf::from)
        );
        assert!(q.take().is_empty());
    }
}
