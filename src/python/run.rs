//! Running the engine with the GIL released: the work runs on a thread of
//! its own while the calling thread, without the GIL, waits for it and
//! looks at Python's signals now and then. Ctrl-C sets the work's cancel
//! token; the engine stops at its next check, and `KeyboardInterrupt` is
//! raised once it has.

use std::sync::mpsc;
use std::time::Duration;

use pyo3::prelude::*;

use crate::jobs::CancelToken;

/// How often the waiting thread looks at Python's signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Runs `work` with the GIL released and Ctrl-C wired to its cancel token.
pub fn detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&CancelToken) -> T + Send,
{
    let cancel = CancelToken::new();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel(1);
        // Shared with the GIL-free closures below, which must be `Sync`.
        let rx = std::sync::Mutex::new(rx);
        let recv = |timeout: Option<Duration>| {
            let rx = rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match timeout {
                Some(t) => rx.recv_timeout(t),
                None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            }
        };
        let cancel = &cancel;
        let spawned = std::thread::Builder::new()
            .name("tensorscope-python".to_owned())
            .spawn_scoped(s, move || {
                // The receiver waits until this is sent or the thread ends.
                let _ = tx.send(work(cancel));
            });
        if let Err(e) = spawned {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                "cannot start a thread: {e}"
            )));
        }
        loop {
            match py.detach(|| recv(Some(SIGNAL_CHECK))) {
                Ok(value) => return Ok(value),
                // The work panicked: the scope's end re-raises the panic,
                // which PyO3 turns into a `PanicException`.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(
                        "the work stopped without a result",
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(interrupt) = py.check_signals() {
                        cancel.cancel();
                        // Wait (without the GIL) for the engine to stop.
                        let _ = py.detach(|| recv(None));
                        return Err(interrupt);
                    }
                }
            }
        }
    })
}
