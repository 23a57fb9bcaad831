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

/// Paths received and not yet taken.
static QUEUE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Called after a path is queued, to wake the explorer's frame loop.
type Waker = Box<dyn Fn() + Send + Sync>;
static WAKER: Mutex<Option<Waker>> = Mutex::new(None);

/// Starts receiving the desktop's open-document events; call once, before
/// the event loop is created. A no-op where files arrive as arguments.
pub fn install() {
    #[cfg(target_os = "macos")]
    super::macos::install_open_documents();
}

/// Sets what wakes the frame loop once a path is queued (it may already
/// hold paths that arrived during launch: take them on the next frame).
pub fn set_waker(waker: impl Fn() + Send + Sync + 'static) {
    *WAKER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(waker));
}

/// Queues paths to open and wakes the frame loop.
pub fn push(paths: impl IntoIterator<Item = PathBuf>) {
    QUEUE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .extend(paths);
    if let Some(wake) = WAKER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
    {
        wake();
    }
}

/// The paths queued since the last call, in the order they arrived.
pub fn take() -> Vec<PathBuf> {
    std::mem::take(
        &mut *QUEUE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn queued_paths_are_taken_once_in_order_and_wake_the_loop() {
        let woken = Arc::new(AtomicUsize::new(0));
        let w = Arc::clone(&woken);
        set_waker(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        push([PathBuf::from("a.safetensors"), PathBuf::from("b.gguf")]);
        push([PathBuf::from("c.npy")]);
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        assert_eq!(
            take(),
            ["a.safetensors", "b.gguf", "c.npy"].map(PathBuf::from)
        );
        assert!(take().is_empty());
    }
}
