//! [`Task`]: the one type for a value the explorer computes in the
//! background. Every job of the GUI (opening a file, statistics, the scan,
//! heatmaps, diffs, writes, dialogs, folder listings) is held in one, so a
//! panicked, cancelled or never-started job is mapped once, here, and every
//! panel reads the same states.
//!
//! A task is keyed: the key says what the value is of (a path, a tensor and
//! its bit order, a heatmap request). A finished value stays on show while a
//! new key runs (no flicker), and the last few outcomes are kept by key, so
//! going back to a tensor shows its statistics at once. The runner starts a
//! task by handing it a spawned [`Job`]; a task never spawns anything itself.

use std::collections::VecDeque;

use crate::jobs::{Job, JobState, Progress};

/// Why a task has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// The work returned this error.
    Error(E),
    /// The user (or a newer request) cancelled it: an outcome, not an error.
    Cancelled,
    /// The job's thread panicked; the message says where. A bug, shown as one.
    Panicked(String),
    /// No thread could be started for it (the system's thread limit).
    NotStarted(String),
}

impl<E: std::fmt::Display> std::fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Error(e) => e.fmt(f),
            Self::Cancelled => f.write_str("cancelled"),
            Self::Panicked(m) => write!(f, "internal error: {m}"),
            Self::NotStarted(m) => write!(f, "cannot start a background job: {m}"),
        }
    }
}

/// What a task finished with.
pub type Outcome<T, E> = Result<T, Failure<E>>;

/// The job of a task, with the key it computes.
struct Running<K, T, E> {
    key: K,
    job: Job<Result<T, E>>,
}

/// A value computed in the background, keyed; see the module docs.
pub struct Task<K, T, E> {
    running: Option<Running<K, T, E>>,
    /// Finished outcomes, newest first, at most `keep` of them.
    finished: VecDeque<(K, Outcome<T, E>)>,
    keep: usize,
}

impl<K, T, E> Default for Task<K, T, E> {
    fn default() -> Self {
        Self::keeping(1)
    }
}

impl<K, T, E> std::fmt::Debug for Task<K, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("running", &self.running.is_some())
            .field("finished", &self.finished.len())
            .finish_non_exhaustive()
    }
}

impl<K, T, E> Task<K, T, E> {
    /// A task that keeps the outcomes of its last `keep` keys (at least one).
    pub fn keeping(keep: usize) -> Self {
        Self {
            running: None,
            finished: VecDeque::new(),
            keep: keep.max(1),
        }
    }

    /// True while a job runs.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// True once the running job was asked to stop and has not reported yet.
    pub fn is_stopping(&self) -> bool {
        self.running.as_ref().is_some_and(|r| r.job.is_cancelled())
    }

    /// The running job's progress.
    pub fn progress(&self) -> Option<&Progress> {
        self.running.as_ref().map(|r| r.job.progress())
    }

    /// The running job's key.
    pub fn running_key(&self) -> Option<&K> {
        self.running.as_ref().map(|r| &r.key)
    }

    /// Asks the running job to stop at its next check. It stays running
    /// until it reports: work that stops ends as [`Failure::Cancelled`],
    /// work that had already finished keeps its value (a write that was
    /// renamed into place is reported as written, not as cancelled).
    pub fn cancel(&self) {
        if let Some(r) = &self.running {
            r.job.cancel();
        }
    }

    /// Stops waiting for the running job: its handle is dropped (which
    /// cancels it) and the task ends as [`Failure::Cancelled`] at once. For
    /// work that does not check for cancellation, such as parsing a header,
    /// and writes nothing.
    pub fn abandon(&mut self) {
        if let Some(Running { key, .. }) = self.running.take() {
            self.push(key, Err(Failure::Cancelled));
        }
    }

    /// Drops the running job (which cancels it) and every outcome.
    pub fn clear(&mut self) {
        self.running = None;
        self.finished.clear();
    }

    /// The newest outcome, whatever its key (the value kept on show while
    /// another key runs).
    pub fn latest(&self) -> Option<&Outcome<T, E>> {
        self.finished.front().map(|(_, o)| o)
    }

    /// The newest outcome's key.
    pub fn latest_key(&self) -> Option<&K> {
        self.finished.front().map(|(k, _)| k)
    }

    /// The newest value that finished well, whatever its key.
    pub fn value(&self) -> Option<&T> {
        self.latest().and_then(|o| o.as_ref().ok())
    }

    /// Collects the job once it ends; true when an outcome arrived.
    pub fn poll(&mut self) -> bool {
        let Some(running) = &mut self.running else {
            return false;
        };
        let cancelled = running.job.is_cancelled();
        let outcome = match running.job.poll() {
            JobState::Running => return false,
            JobState::Done(Ok(value)) => Ok(value),
            // Work that was asked to stop reports it in its own error type;
            // the request, not the error's wording, says what happened.
            JobState::Done(Err(_)) if cancelled => Err(Failure::Cancelled),
            JobState::Done(Err(e)) => Err(Failure::Error(e)),
            JobState::Panicked(m) => Err(Failure::Panicked(m)),
        };
        if let Some(Running { key, .. }) = self.running.take() {
            self.push(key, outcome);
        }
        true
    }

    fn push(&mut self, key: K, outcome: Outcome<T, E>) {
        self.finished.push_front((key, outcome));
        self.finished.truncate(self.keep);
    }
}

impl<K: PartialEq, T, E> Task<K, T, E> {
    /// The outcome for `key`, if one is kept.
    pub fn outcome(&self, key: &K) -> Option<&Outcome<T, E>> {
        self.finished.iter().find(|(k, _)| k == key).map(|(_, o)| o)
    }

    /// True while `key` runs.
    pub fn is_running_for(&self, key: &K) -> bool {
        self.running_key() == Some(key)
    }

    /// True when nothing runs or is kept for `key`: a panel that shows
    /// `key` asks the runner to start it. A job that could not start is
    /// kept as an outcome, so it is reported once, not retried every frame.
    pub fn wants(&self, key: &K) -> bool {
        !self.is_running_for(key) && self.outcome(key).is_none()
    }

    /// Runs `job` for `key`, replacing (and so cancelling) any running job.
    /// `job` is what [`Job::spawn`] returned: a spawn error is kept as
    /// [`Failure::NotStarted`]. A new run of a kept key forgets the old
    /// outcome of that key, so only the new one is found.
    pub fn start(&mut self, key: K, job: std::io::Result<Job<Result<T, E>>>) {
        self.finished.retain(|(k, _)| *k != key);
        match job {
            Ok(job) => self.running = Some(Running { key, job }),
            Err(e) => {
                self.running = None;
                self.push(key, Err(Failure::NotStarted(e.to_string())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn settle<K, T, E>(t: &mut Task<K, T, E>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while t.is_running() {
            t.poll();
            assert!(Instant::now() < deadline, "the job did not end");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn job<T: Send + 'static>(
        work: impl FnOnce(&crate::jobs::CancelToken) -> T + Send + 'static,
    ) -> std::io::Result<Job<T>> {
        Job::spawn("task-test", || {}, move |c, _| work(c))
    }

    #[test]
    fn values_are_kept_by_key_and_shown_while_the_next_runs() {
        let mut t: Task<u32, u32, String> = Task::keeping(2);
        assert!(t.wants(&1));
        t.start(1, job(|_| Ok(10)));
        assert!(!t.wants(&1) && t.is_running_for(&1));
        settle(&mut t);
        assert_eq!(t.value(), Some(&10));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        t.start(
            2,
            job(move |_| {
                let _ = rx.recv();
                Ok(20)
            }),
        );
        // The previous value stays on show while key 2 runs.
        assert_eq!(t.value(), Some(&10));
        drop(tx);
        settle(&mut t);
        assert_eq!(t.outcome(&2), Some(&Ok(20)));
        assert_eq!(t.outcome(&1), Some(&Ok(10)));
        t.start(3, job(|_| Err("bad".to_owned())));
        settle(&mut t);
        assert_eq!(t.outcome(&3), Some(&Err(Failure::Error("bad".into()))));
        // Only two outcomes are kept.
        assert_eq!(t.outcome(&1), None);
        assert!(t.wants(&1));
    }

    #[test]
    fn cancellation_and_panics_are_outcomes() {
        let mut t: Task<(), (), String> = Task::default();
        t.start(
            (),
            job(|c| {
                while !c.is_cancelled() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err("stopped at byte 12".to_owned())
            }),
        );
        t.cancel();
        // The job stays running until it reports, then ends as cancelled
        // whatever its own error says.
        settle(&mut t);
        assert_eq!(t.latest(), Some(&Err(Failure::Cancelled)));
        t.start(
            (),
            job(|c| {
                while !c.is_cancelled() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            }),
        );
        // Work that finished anyway keeps its value.
        t.cancel();
        settle(&mut t);
        assert_eq!(t.latest(), Some(&Ok(())));
        t.start(
            (),
            job(|_| {
                std::thread::sleep(Duration::from_mins(1));
                Ok(())
            }),
        );
        t.abandon();
        assert!(!t.is_running());
        assert_eq!(t.latest(), Some(&Err(Failure::Cancelled)));
        t.start((), job(|_| -> Result<(), String> { panic!("boom") }));
        settle(&mut t);
        assert!(matches!(t.latest(), Some(Err(Failure::Panicked(m))) if m.contains("boom")));
    }

    #[test]
    fn a_job_that_cannot_start_is_reported_once() {
        let mut t: Task<u8, (), String> = Task::default();
        t.start(7, Err(std::io::Error::other("no threads left")));
        assert!(!t.is_running());
        assert!(!t.wants(&7));
        let shown = t.outcome(&7).map(|o| match o {
            Err(f) => f.to_string(),
            Ok(()) => String::new(),
        });
        assert_eq!(
            shown.as_deref(),
            Some("cannot start a background job: no threads left")
        );
    }
}
