//! Writing a verb's result: one JSON document or human text on stdout, a
//! closed pipe ending quietly, and the shared error document.

use std::io::{self, IsTerminal as _, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::format::LoadError;
use crate::jobs::Progress;

/// Where a verb writes its result.
///
/// Buffered: a document of a million tensors goes out in large writes, not
/// one system call per line. The buffer is flushed after every piece when
/// stdout is a terminal, at least every [`FLUSH_EVERY`] otherwise (so a
/// reader of a pipe sees a slow scan advance), and in [`Output::failed`].
pub struct Output {
    sink: io::BufWriter<Box<dyn Write>>,
    flush_each: bool,
    flushed: Instant,
    closed: bool,
    /// A write failed for another reason than a closed pipe (a full disk):
    /// the verb's result did not arrive, so it must exit 2.
    failed: bool,
}

/// Set while the verbs' messages on stderr are silenced.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences (or restores) the verbs' messages and progress bars on stderr,
/// for the whole process: the Python module's callers get the document or
/// an exception instead, and its `tensorscope` command restores them.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// True while the verbs' messages on stderr are silenced.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// The longest a written piece waits in the buffer of a pipe or file.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// The buffer of [`Output`].
const BUFFER: usize = 1 << 18;

impl Output {
    /// Standard output, locked for the verb's lifetime so a document is never
    /// interleaved with other output.
    pub fn stdout() -> Self {
        let terminal = io::stdout().is_terminal();
        Self::new(Box::new(io::stdout().lock()), terminal)
    }

    fn new(sink: Box<dyn Write>, flush_each: bool) -> Self {
        Self {
            sink: io::BufWriter::with_capacity(BUFFER, sink),
            flush_each,
            flushed: Instant::now(),
            closed: false,
            failed: false,
        }
    }

    /// Any writer (tests and the Python module capture what a verb writes
    /// this way).
    pub fn to_writer(sink: Box<dyn Write>) -> Self {
        Self::new(sink, false)
    }

    /// Flushes what is buffered, then tells whether the output could not be
    /// written (not a closed pipe, which a reader such as `| head` closes on
    /// purpose).
    pub fn failed(&mut self) -> bool {
        if !self.closed {
            let result = self.sink.flush();
            self.check(result);
        }
        self.failed
    }

    /// Writes text. A closed pipe (`| head`) stops output silently.
    pub fn text(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// Writes bytes (UTF-8 text). A closed pipe stops output silently.
    pub fn bytes(&mut self, b: &[u8]) {
        if self.closed {
            return;
        }
        let mut result = self.sink.write_all(b);
        if result.is_ok() && (self.flush_each || self.flushed.elapsed() >= FLUSH_EVERY) {
            result = self.sink.flush();
            self.flushed = Instant::now();
        }
        self.check(result);
    }

    fn check(&mut self, result: io::Result<()>) {
        if let Err(e) = result {
            self.closed = true;
            if !crate::platform::pipe::reader_closed(&e) {
                self.failed = true;
                say!("tensorscope: cannot write output: {e}");
            }
        }
    }

    /// Writes one JSON document and a newline.
    pub fn json<T: Serialize>(&mut self, value: &T) {
        let mut buf = Vec::new();
        match pretty_at(&mut buf, value, 0) {
            Ok(()) => {
                buf.push(b'\n');
                self.bytes(&buf);
            }
            Err(e) => {
                self.failed = true;
                say!("tensorscope: cannot encode JSON: {e}");
            }
        }
    }
}

/// `{"error": {"kind", "message", "path"}}`: the JSON a verb prints on error.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorDoc {
    /// The error kind (the reference's kind for format errors, `Io`, `Usage`, …).
    pub kind: String,
    /// The message, without the path.
    pub message: String,
    /// The path concerned, if any.
    pub path: Option<String>,
    /// For `UnsafePickle`: the globals the pickle would import (none are).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub globals: Vec<String>,
}

/// The wrapper object of an [`ErrorDoc`].
#[derive(Debug, Serialize)]
pub struct Wrapped<'a> {
    /// The error, serialised under the `error` key.
    pub error: &'a ErrorDoc,
}

impl ErrorDoc {
    /// The document for a load error.
    pub fn from_load(e: &LoadError) -> Self {
        Self {
            kind: e.kind().to_owned(),
            message: e.message(),
            path: Some(path_string(e.path())),
            globals: e.unsafe_globals().to_vec(),
        }
    }

    /// `{"error": self}`: the one document a verb prints on failure with `--json`.
    pub fn wrapped(&self) -> Wrapped<'_> {
        Wrapped { error: self }
    }
}

/// A path for JSON output; not UTF-8 paths are converted lossily.
pub fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Reports a load error the way every verb does: JSON on stdout with
/// `--json`, else a message on stderr. Returns [`super::EXIT_ERROR`].
pub fn report_error(out: &mut Output, json: bool, e: &LoadError) -> i32 {
    if json {
        out.json(&ErrorDoc::from_load(e).wrapped());
    }
    say!("tensorscope: {e}");
    super::EXIT_ERROR
}

/// Reports an error document the way every verb does (JSON on stdout
/// with `--json`, the message on stderr) and returns [`super::EXIT_ERROR`].
pub fn fail(out: &mut Output, json: bool, doc: &ErrorDoc) -> i32 {
    if json {
        out.json(&doc.wrapped());
    }
    say!("tensorscope: {}", doc.message);
    super::EXIT_ERROR
}

/// Runs `work` on this thread while a progress bar of `progress` is drawn
/// on stderr beside it (see [`progress_bar`]; `started` is when the verb
/// began, for the rate). The bar is cleared when `work` returns, or panics.
pub fn with_progress_bar<T>(progress: &Progress, started: Instant, work: impl FnOnce() -> T) -> T {
    with_progress_bar_in(progress, started, Units::Bytes, work)
}

/// What a progress bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// Bytes, shown in GB and GB/s.
    Bytes,
    /// Files, shown as counts and files/s.
    Files,
}

/// [`with_progress_bar`] counting `units`.
pub fn with_progress_bar_in<T>(
    progress: &Progress,
    started: Instant,
    units: Units,
    work: impl FnOnce() -> T,
) -> T {
    /// Sets the flag on drop, so a panic in `work` stops the bar too and
    /// the scope's join does not wait forever.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        if !quiet() && io::stderr().is_terminal() {
            s.spawn(|| progress_bar(progress, &done, started, units));
        }
        let _stop = Stop(&done);
        work()
    })
}

/// Draws a progress bar on stderr until `done`, when stderr is a terminal
/// and the work takes more than a moment (short runs show none).
fn progress_bar(progress: &Progress, done: &AtomicBool, started: Instant, units: Units) {
    const WIDTH: usize = 30;
    if !io::stderr().is_terminal() {
        return;
    }
    let mut shown = false;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let elapsed = started.elapsed();
        if elapsed < Duration::from_millis(400) || done.load(Ordering::Relaxed) {
            continue;
        }
        let fraction = f64::from(progress.fraction().unwrap_or(0.0));
        let filled = ((fraction * WIDTH as f64) as usize).min(WIDTH);
        let per_second = progress.done() as f64 / elapsed.as_secs_f64().max(1e-9);
        let fetched = match progress.fetched() {
            0 => String::new(),
            n => format!(" fetched {:.2} GB", n as f64 / 1e9),
        };
        let amounts = match units {
            Units::Bytes => format!(
                "{:.2} / {:.2} GB  {:.2} GB/s",
                progress.done() as f64 / 1e9,
                progress.total() as f64 / 1e9,
                per_second / 1e9
            ),
            Units::Files => format!(
                "{} / {} files  {:.0} files/s",
                progress.done(),
                progress.total(),
                per_second
            ),
        };
        say_part!(
            "\r[{}{}] {:5.1}%  {amounts}{fetched} ",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled),
            fraction * 100.0,
        );
        shown = true;
    }
    if shown {
        say_part!("\r{}\r", " ".repeat(WIDTH + 64));
    }
}

pub use super::json::pretty_at;
pub use crate::text::{display_name, group_digits};
