//! How long work runs off the UI thread: a [`CancelToken`] and a
//! [`Progress`] that library functions take as parameters, and a [`Job`]
//! that runs such a function on a named thread and hands back its result.
//!
//! The CLI calls the same library functions synchronously; the GUI wraps
//! them in a `Job`. Dropping a `Job` cancels it.

mod pool;

pub use pool::on_job_pool;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;

/// Asks long work to stop. Cheap to clone; every clone shares the flag.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests cancellation; work sees it at its next chunk boundary.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once [`CancelToken::cancel`] was called on any clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once cancelled: `token.check()?` between chunks.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// The outcome of work that was cancelled: not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// Units of work done out of a total (bytes, tensors, …), updated through
/// atomics from any thread; an optional callback is told of each update
/// (the GUI passes `request_repaint`).
#[derive(Default)]
pub struct Progress {
    done: AtomicU64,
    total: AtomicU64,
    fetched: AtomicU64,
    notify: Option<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("done", &self.done())
            .field("total", &self.total())
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// A progress counter with no callback.
    pub fn new() -> Self {
        Self::default()
    }

    /// A progress counter that calls `notify` after every update.
    pub fn with_notify(notify: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            notify: Some(Box::new(notify)),
            ..Self::default()
        }
    }

    /// Sets the total amount of work.
    pub fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
        self.notify();
    }

    /// Adds `amount` to the work done.
    pub fn add(&self, amount: u64) {
        self.done.fetch_add(amount, Ordering::Relaxed);
        self.notify();
    }

    /// Adds `bytes` to the bytes fetched from the network (remote files).
    pub fn add_fetched(&self, bytes: u64) {
        self.fetched.fetch_add(bytes, Ordering::Relaxed);
        self.notify();
    }

    /// Bytes fetched from the network so far by this work (0 for local files).
    pub fn fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    /// Work done so far, in the unit the work chose (bytes, elements, …).
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Total work (0 when unknown).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Fraction done in 0..=1; `None` while the total is unknown.
    pub fn fraction(&self) -> Option<f32> {
        let total = self.total();
        (total > 0).then(|| (self.done() as f64 / total as f64).clamp(0.0, 1.0) as f32)
    }

    fn notify(&self) {
        if let Some(n) = &self.notify {
            n();
        }
    }
}

/// Where a [`Job`] is: running, or finished with its result.
#[derive(Debug)]
pub enum JobState<T> {
    /// Still running.
    Running,
    /// Finished with this value.
    Done(T),
    /// The thread panicked; the message says why.
    Panicked(String),
}

/// Work running on a named thread. Poll it each frame; drop it to cancel.
pub struct Job<T> {
    rx: mpsc::Receiver<thread::Result<T>>,
    cancel: CancelToken,
    progress: Arc<Progress>,
    finished: bool,
}

impl<T> std::fmt::Debug for Job<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("progress", &self.progress)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Job<T> {
    /// Runs `work` on a thread named `name`. `on_update` is called on every
    /// progress update and once at the end (the GUI passes a repaint
    /// request).
    pub fn spawn<F>(
        name: &str,
        on_update: impl Fn() + Send + Sync + 'static,
        work: F,
    ) -> std::io::Result<Self>
    where
        F: FnOnce(&CancelToken, &Progress) -> T + Send + 'static,
    {
        let cancel = CancelToken::new();
        let on_update = Arc::new(on_update);
        let notify = Arc::clone(&on_update);
        let progress = Arc::new(Progress::with_notify(move || notify()));
        let (tx, rx) = mpsc::sync_channel(1);
        let thread_cancel = cancel.clone();
        let thread_progress = Arc::clone(&progress);
        thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    work(&thread_cancel, &thread_progress)
                }));
                // The receiver may be gone (job dropped): nothing to do then.
                let _ = tx.send(result);
                on_update();
            })?;
        Ok(Self {
            rx,
            cancel,
            progress,
            finished: false,
        })
    }
}

impl<T> Job<T> {
    /// Takes the result once it is there.
    pub fn poll(&mut self) -> JobState<T> {
        if self.finished {
            return JobState::Panicked("the result was already taken".into());
        }
        match self.rx.try_recv() {
            Ok(Ok(value)) => {
                self.finished = true;
                JobState::Done(value)
            }
            Ok(Err(panic)) => {
                self.finished = true;
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                JobState::Panicked(message)
            }
            Err(mpsc::TryRecvError::Empty) => JobState::Running,
            Err(mpsc::TryRecvError::Disconnected) => {
                self.finished = true;
                JobState::Panicked("the job's thread ended without a result".into())
            }
        }
    }

    /// Blocks until the job ends (tests and the CLI).
    pub fn wait(mut self) -> JobState<T> {
        match self.rx.recv() {
            Ok(Ok(value)) => JobState::Done(value),
            Ok(Err(_)) => JobState::Panicked("the job panicked".into()),
            Err(_) => {
                self.finished = true;
                JobState::Panicked("the job's thread ended without a result".into())
            }
        }
    }

    /// The job's progress, updated by the worker; read it each frame.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Asks the job to stop; it still sends whatever it returns.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// True once [`Job::cancel`] was called (or the job dropped).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

impl<T> Drop for Job<T> {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_job_returns_its_value_and_reports_progress() {
        let job = Job::spawn(
            "test-job",
            || {},
            |_, p| {
                p.set_total(10);
                p.add(10);
                42
            },
        )
        .expect("spawn");
        assert!(matches!(job.wait(), JobState::Done(42)));
    }

    #[test]
    fn dropping_a_job_cancels_it() {
        let (tx, rx) = mpsc::channel();
        let job = Job::spawn(
            "cancel-job",
            || {},
            move |c, _| {
                while !c.is_cancelled() {
                    thread::sleep(Duration::from_millis(1));
                }
                let _ = tx.send(true);
            },
        )
        .expect("spawn");
        drop(job);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true));
    }

    #[test]
    fn a_panic_is_reported_not_propagated() {
        let job = Job::spawn("panic-job", || {}, |_, _| -> u32 { panic!("boom") }).expect("spawn");
        match job.wait() {
            JobState::Panicked(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn fraction() {
        let p = Progress::new();
        assert_eq!(p.fraction(), None);
        p.set_total(4);
        p.add(1);
        assert_eq!(p.fraction(), Some(0.25));
        let c = CancelToken::new();
        assert!(c.check().is_ok());
        c.clone().cancel();
        assert_eq!(c.check(), Err(Cancelled));
    }
}
