//! Writing a verb's result: one JSON document or human text on stdout, a
//! closed pipe ending quietly, and the shared error document.

use std::io::{self, IsTerminal as _, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use tensorscope::format::LoadError;
use tensorscope::jobs::Progress;

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

    /// Any writer (tests capture what a verb writes this way).
    #[cfg(test)]
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
            if e.kind() != io::ErrorKind::BrokenPipe {
                self.failed = true;
                eprintln!("tensorscope: cannot write output: {e}");
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
                eprintln!("tensorscope: cannot encode JSON: {e}");
            }
        }
    }
}

/// Appends `value` to `buf` as pretty JSON nested `depth` levels deep: two
/// spaces an indent, as `serde_json::to_string_pretty`, except that an array
/// of numbers (or booleans, or nulls) is written on one line, `[1, 2, 3]`:
/// a histogram's 257 edges take one line, not 257, so a document of a
/// million small tensors is a third as long and written three times as
/// fast. Its first line is not indented, the lines after it are, so it can
/// follow a key or an indent already written. This is how a streamed
/// document comes out byte for byte as the whole one would, without
/// re-indenting a copy.
pub fn pretty_at<T: Serialize + ?Sized>(
    buf: &mut Vec<u8>,
    value: &T,
    depth: usize,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        buf,
        Nested {
            depth,
            has_value: false,
            arrays: Vec::new(),
            pending: None,
        },
    );
    value.serialize(&mut ser)
}

/// How the elements of an open array are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// No element yet.
    Undecided,
    /// Scalars on the array's line.
    Inline,
    /// One element a line, as `serde_json` pretty-prints.
    Lines,
}

/// `serde_json`'s pretty formatter, starting `depth` levels in, with arrays
/// of scalars on one line.
struct Nested {
    depth: usize,
    has_value: bool,
    /// The layout of each open array, innermost last.
    arrays: Vec<Layout>,
    /// An array's first element has begun but nothing of it was written:
    /// its first write decides the layout.
    pending: Option<bool>,
}

impl Nested {
    fn line<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> io::Result<()> {
        /// A separator and a line break, then enough spaces for one write at
        /// any usual depth: one write an element, not three.
        const LINE: &[u8; 66] =
            b",\n                                                                ";
        let start = usize::from(first);
        let mut n = self.depth * 2;
        let k = n.min(LINE.len() - 2);
        w.write_all(&LINE[start..2 + k])?;
        n -= k;
        while n > 0 {
            let k = n.min(LINE.len() - 2);
            w.write_all(&LINE[2..2 + k])?;
            n -= k;
        }
        Ok(())
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        if self.has_value {
            self.line(w, true)?;
        }
        w.write_all(bracket)
    }

    /// Before a number, a boolean or a null: the first element of an
    /// array makes it an inline one.
    fn scalar(&mut self) {
        if self.pending.take().is_some()
            && let Some(layout) = self.arrays.last_mut()
        {
            *layout = Layout::Inline;
        }
    }

    /// Before a string, an object or an array: the first element of an
    /// array makes it one of lines, and its line is written now.
    fn compound<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if let Some(first) = self.pending.take() {
            if let Some(layout) = self.arrays.last_mut() {
                *layout = Layout::Lines;
            }
            self.line(w, first)?;
        }
        Ok(())
    }
}

/// The scalar writers of [`Nested`]: each settles a pending layout, then
/// writes as `serde_json` does.
macro_rules! scalar_writers {
    ($($name:ident: $t:ty),* $(,)?) => {
        $(
            fn $name<W: ?Sized + Write>(&mut self, w: &mut W, value: $t) -> io::Result<()> {
                self.scalar();
                serde_json::ser::CompactFormatter.$name(w, value)
            }
        )*
    };
}

impl serde_json::ser::Formatter for Nested {
    fn write_null<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.scalar();
        w.write_all(b"null")
    }

    scalar_writers!(
        write_bool: bool,
        write_i8: i8,
        write_i16: i16,
        write_i32: i32,
        write_i64: i64,
        write_i128: i128,
        write_u8: u8,
        write_u16: u16,
        write_u32: u32,
        write_u64: u64,
        write_u128: u128,
        write_f32: f32,
        write_f64: f64,
        write_number_str: &str,
    );

    fn begin_string<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.compound(w)?;
        w.write_all(b"\"")
    }

    fn write_raw_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.compound(w)?;
        w.write_all(fragment.as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.compound(w)?;
        self.depth += 1;
        self.has_value = false;
        self.arrays.push(Layout::Undecided);
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        // An element begun and never written cannot happen; forget it.
        self.pending = None;
        if self.arrays.pop() == Some(Layout::Inline) {
            self.depth = self.depth.saturating_sub(1);
            return w.write_all(b"]");
        }
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        match self.arrays.last() {
            Some(Layout::Inline) => w.write_all(if first { b"" } else { b", " }),
            Some(Layout::Undecided) => {
                self.pending = Some(first);
                Ok(())
            }
            _ => self.line(w, first),
        }
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.compound(w)?;
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.line(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
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
    eprintln!("tensorscope: {e}");
    super::EXIT_ERROR
}

/// Reports an error document the way every verb does (JSON on stdout
/// with `--json`, the message on stderr) and returns [`super::EXIT_ERROR`].
pub fn fail(out: &mut Output, json: bool, doc: &ErrorDoc) -> i32 {
    if json {
        out.json(&doc.wrapped());
    }
    eprintln!("tensorscope: {}", doc.message);
    super::EXIT_ERROR
}

/// Runs `work` on this thread while a progress bar of `progress` is drawn
/// on stderr beside it (see [`progress_bar`]; `started` is when the verb
/// began, for the rate). The bar is cleared when `work` returns, or panics.
pub fn with_progress_bar<T>(progress: &Progress, started: Instant, work: impl FnOnce() -> T) -> T {
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
        if io::stderr().is_terminal() {
            s.spawn(|| progress_bar(progress, &done, started));
        }
        let _stop = Stop(&done);
        work()
    })
}

/// Draws a progress bar on stderr until `done`, when stderr is a terminal
/// and the work takes more than a moment (short runs show none).
fn progress_bar(progress: &Progress, done: &AtomicBool, started: Instant) {
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
        let rate = progress.done() as f64 / elapsed.as_secs_f64().max(1e-9) / 1e9;
        let fetched = match progress.fetched() {
            0 => String::new(),
            n => format!(" fetched {:.2} GB", n as f64 / 1e9),
        };
        eprint!(
            "\r[{}{}] {:5.1}%  {:.2} / {:.2} GB  {:.2} GB/s{fetched} ",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled),
            fraction * 100.0,
            progress.done() as f64 / 1e9,
            progress.total() as f64 / 1e9,
            rate
        );
        shown = true;
    }
    if shown {
        eprint!("\r{}\r", " ".repeat(WIDTH + 64));
    }
}

pub use tensorscope::text::{display_name, group_digits};

#[cfg(test)]
mod tests {
    use super::pretty_at;

    /// A value written `depth` levels in is, once every later line loses
    /// `depth` indents, exactly what `serde_json` pretty-prints.
    #[test]
    fn nested_pretty_json_is_serde_json_pretty_indented() {
        let value = serde_json::json!({
            "a": [1, 2.5, {"b": [], "c": {}}, [[]], null],
            "name": "x\u{200b}\"y",
            "empty": [],
            "names": ["p", "q"],
            "nested": {"deep": [{"k": [true, false]}, [3, -4]]}
        });
        let mut buf = Vec::new();
        pretty_at(&mut buf, &value, 0).expect("json");
        let whole = String::from_utf8(buf).expect("utf-8");
        // The same value, pretty-printed, arrays of scalars on one line.
        let back: serde_json::Value = serde_json::from_str(&whole).expect("valid JSON");
        assert_eq!(back, value);
        assert!(whole.contains("\"k\": [true, false]"), "{whole}");
        assert!(whole.contains("\n      [3, -4]\n"), "{whole}");
        assert!(
            whole.contains("\"names\": [\n    \"p\",\n    \"q\"\n  ]"),
            "{whole}"
        );
        assert!(whole.contains("\"empty\": [],"), "{whole}");
        for depth in [1, 2, 5, 40] {
            let mut buf = Vec::new();
            pretty_at(&mut buf, &value, depth).expect("json");
            let text = String::from_utf8(buf).expect("utf-8");
            let pad = " ".repeat(2 * depth);
            let expected = whole.replace('\n', &format!("\n{pad}"));
            assert_eq!(text, expected, "depth {depth}");
        }
        // Without arrays of scalars it is serde_json's pretty output.
        let plain = serde_json::json!({"a": {"b": "c", "d": [{"e": "f"}]}, "g": {}});
        let mut buf = Vec::new();
        pretty_at(&mut buf, &plain, 0).expect("json");
        assert_eq!(
            String::from_utf8(buf).expect("utf-8"),
            serde_json::to_string_pretty(&plain).expect("json")
        );
        let mut buf = Vec::new();
        pretty_at(&mut buf, &[0u8; 0], 3).expect("json");
        assert_eq!(buf, b"[]");
    }
}
