//! The thread pool that background jobs run their parallel work on.

/// Runs `work` on the thread pool of the GUI's jobs: all cores but one (at
/// least one thread), so the window stays responsive while a multi-GB scan
/// or diff runs. Falls back to the calling thread if no pool can be made.
pub fn on_job_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let threads =
            std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tensorscope-job-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(p) => p.install(work),
        None => work(),
    }
}
