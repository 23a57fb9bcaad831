//! The `stats` document written as the tensors arrive ([`Streamed`]): the
//! bytes of the whole document, one run of tensors at a time, encoded on
//! every core while the scan goes on.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::text::{logical_text, summary_text, tensor_text};
use super::{FailOn, FailOnDoc};
use crate::cli::EXIT_ERROR;
use crate::cli::json::JsonBuf;
use crate::cli::output::{ErrorDoc, Output, display_name, pretty_at};
use crate::stats::{Entry, Summary, TensorStats};

/// The output of `stats`, written as the tensors arrive: the same bytes as
/// the whole [`super::StatsDoc`] pretty-printed (or the text report), one
/// tensor at a time. An error after the first tensor closes the document
/// with an `error` member in place of the summary, so stdout still holds
/// one JSON document.
///
/// The JSON of a tensor (a histogram's hundreds of numbers) costs more than
/// scanning a small tensor, so tensors wait in `pending` (a bounded number,
/// see [`Streamed::room`]) and are encoded a run at a time on every core of
/// the pool while the scan goes on; each run is written, in order, when the
/// next one is handed over (at most one run is being encoded).
pub(super) struct Streamed {
    json: bool,
    path: String,
    bins: u64,
    /// Tensors written so far.
    written: usize,
    /// Tensors received and not yet handed over to be encoded (JSON only).
    pending: Vec<Entry>,
    /// The run being encoded: its JSON arrives here, a buffer a slice of
    /// the run, with the number of tensors in it.
    encoding: Option<std::sync::mpsc::Receiver<Vec<Encoded>>>,
    /// Buffers of runs already written, for the next ones.
    spare: Vec<JsonBuf>,
}

/// The JSON of a slice of a run (its tensors, each after a comma and an
/// indent), and how many tensors it holds.
type Encoded = (usize, JsonBuf);

/// Bytes of JSON that the pending tensors may take at most, about.
const PENDING_BYTES: usize = 32 << 20;

impl Streamed {
    pub(super) fn new(json: bool, path: String, bins: u64) -> Self {
        Self {
            json,
            path,
            bins,
            written: 0,
            pending: Vec::new(),
            encoding: None,
            spare: Vec::new(),
        }
    }

    /// True once a tensor was received: the document is under way.
    pub(super) fn started(&self) -> bool {
        self.written > 0 || !self.pending.is_empty() || self.encoding.is_some()
    }

    /// Tensors that may wait: as many as `PENDING_BYTES` of JSON of
    /// tensors with `bins` bins hold (at least one, at most 1024).
    fn room(&self) -> usize {
        (PENDING_BYTES / self.per_tensor()).clamp(1, 1024)
    }

    /// Bytes of JSON of a tensor with `bins` bins, about.
    fn per_tensor(&self) -> usize {
        usize::try_from(self.bins.saturating_mul(24).saturating_add(2048)).unwrap_or(usize::MAX)
    }

    /// The document's opening, up to the tensors array.
    fn head(&self) -> String {
        let path = serde_json::to_string(&self.path).unwrap_or_else(|_| "\"\"".into());
        format!(
            "{{\n  \"path\": {path},\n  \"bins\": {},\n  \"tensors\": [",
            self.bins
        )
    }

    pub(super) fn tensor(&mut self, out: &mut Output, t: TensorStats) {
        if !self.json {
            out.text(&tensor_text(&t));
            self.written += 1;
            return;
        }
        self.push(out, Entry::Plain(Box::new(t)));
    }

    /// An entry of a dequantized scan.
    pub(super) fn entry(&mut self, out: &mut Output, e: Entry) {
        if self.json {
            self.push(out, e);
            return;
        }
        let text = match &e {
            Entry::Plain(t) => tensor_text(t),
            Entry::Logical(l) => logical_text(l),
            Entry::Undecoded(u) => format!(
                "{}  {}  {}: {}\n",
                display_name(&u.name),
                display_name(&u.label),
                u.status,
                display_name(&u.message)
            ),
        };
        out.text(&text);
        self.written += 1;
    }

    fn push(&mut self, out: &mut Output, e: Entry) {
        self.pending.push(e);
        if self.pending.len() >= self.room() {
            self.hand_over(out);
        }
    }

    /// Writes the run being encoded, then hands the pending tensors over to
    /// be encoded on the pool (in parallel) while the caller goes on.
    fn hand_over(&mut self, out: &mut Output) {
        self.write_encoded(out);
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let per_tensor = self.per_tensor();
        let mut spare = std::mem::take(&mut self.spare);
        let (send, receive) = std::sync::mpsc::channel();
        self.encoding = Some(receive);
        rayon::spawn(move || {
            use rayon::prelude::*;
            // A few slices a thread: balanced, and each one buffer (written
            // without a copy when it exceeds the output's buffer, and kept
            // for a later run).
            let slice = pending
                .len()
                .div_ceil(4 * rayon::current_num_threads())
                .max(1);
            let buffers: Vec<JsonBuf> = (0..pending.len().div_ceil(slice))
                .map(|_| {
                    spare
                        .pop()
                        .unwrap_or_else(|| JsonBuf::with_capacity(slice.saturating_mul(per_tensor)))
                })
                .collect();
            drop(spare);
            let encoded: Vec<Encoded> = pending
                .par_chunks(slice)
                .zip(buffers)
                .map(|(run, mut json)| {
                    for e in run {
                        json.raw(b",\n    ");
                        if let Err(e) = json.pretty(e, 2) {
                            say!("tensorscope: cannot encode JSON: {e}");
                        }
                    }
                    (run.len(), json)
                })
                .collect();
            drop(pending);
            // The receiver waits for it; gone only if stdout was given up.
            let _ = send.send(encoded);
        });
    }

    /// Waits for the run being encoded, if any, and writes it.
    fn write_encoded(&mut self, out: &mut Output) {
        let Some(receive) = self.encoding.take() else {
            return;
        };
        let Ok(encoded) = receive.recv() else {
            say!("tensorscope: cannot encode JSON: the encoder stopped");
            return;
        };
        for (tensors, mut json) in encoded {
            let buf = json.as_bytes();
            if self.written == 0 {
                out.bytes(self.head().as_bytes());
                // The first tensor has no comma before it.
                out.bytes(buf.get(1..).unwrap_or(&[]));
            } else {
                out.bytes(buf);
            }
            self.written += tensors;
            json.clear();
            self.spare.push(json);
        }
    }

    /// Writes every tensor received.
    fn flush(&mut self, out: &mut Output) {
        self.hand_over(out);
        self.write_encoded(out);
    }

    /// The rest of the document after the tensors: `key` and its value.
    fn close<T: Serialize>(&self, key: &str, value: &T) -> Vec<u8> {
        let mut s = if self.written == 0 {
            format!("{}]", self.head())
        } else {
            String::from("\n  ]")
        };
        let _ = write!(s, ",\n  \"{key}\": ");
        let mut buf = s.into_bytes();
        if let Err(e) = pretty_at(&mut buf, value, 1) {
            say!("tensorscope: cannot encode JSON: {e}");
        }
        buf.extend_from_slice(b"\n}\n");
        buf
    }

    pub(super) fn finish(
        mut self,
        out: &mut Output,
        summary: &Summary,
        verdict: Option<&FailOnDoc>,
        elapsed: Duration,
    ) {
        self.flush(out);
        if self.json {
            /// The summary with the verdict last, its own fields in order.
            #[derive(Serialize)]
            struct WithVerdict<'a> {
                #[serde(flatten)]
                summary: &'a Summary,
                fail_on: &'a FailOnDoc,
            }
            let doc = match verdict {
                Some(fail_on) => self.close("summary", &WithVerdict { summary, fail_on }),
                None => self.close("summary", summary),
            };
            out.bytes(&doc);
        } else {
            let mut text = summary_text(summary, elapsed);
            if let Some(v) = verdict {
                let names =
                    |w: &[FailOn]| w.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
                if v.failed.is_empty() {
                    let _ = writeln!(text, "fail-on {}: none found", names(&v.checked));
                } else {
                    let _ = writeln!(
                        text,
                        "fail-on: found {} in {}",
                        names(&v.failed),
                        v.tensors
                            .iter()
                            .map(|t| display_name(t))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
            out.text(&text);
        }
    }

    /// Ends a document already under way with `error` (exit code 2).
    pub(super) fn fail(mut self, out: &mut Output, error: &ErrorDoc) -> i32 {
        self.flush(out);
        if self.json {
            out.bytes(&self.close("error", error));
        }
        say!("tensorscope: {}", error.message);
        EXIT_ERROR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::stats::StatsDoc;
    use crate::format::Checkpoint;
    use crate::jobs::{CancelToken, Progress};
    use crate::stats::StatsOptions;

    /// A writer the test keeps a handle on.
    #[derive(Clone, Default)]
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn streamed(tensors: &[TensorStats], summary: &Summary, json: bool, bins: u64) -> String {
        let sink = Shared::default();
        let mut out = Output::to_writer(Box::new(sink.clone()));
        let mut doc = Streamed::new(json, "dir/m \"q\".safetensors".into(), bins);
        for t in tensors {
            doc.tensor(&mut out, t.clone());
        }
        doc.finish(&mut out, summary, None, Duration::from_millis(1));
        assert!(!out.failed(), "flushed");
        let bytes = sink.0.borrow().clone();
        String::from_utf8(bytes).expect("UTF-8")
    }

    /// The streamed document is byte for byte the one document
    /// pretty-printed whole (as every verb prints its document), with none,
    /// one and several tensors.
    #[test]
    fn the_streamed_document_is_the_whole_document() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data: Vec<u8> = (0..64u8).collect();
        let sources: Vec<crate::format::write::TensorSource<'_>> = ["a", "b", "c"]
            .iter()
            .map(|name| crate::format::write::TensorSource {
                name: (*name).into(),
                dtype: crate::Dtype::F16,
                shape: vec![4, 8],
                data: &data,
            })
            .collect();
        let path = dir.path().join("m.safetensors");
        crate::format::write::write_file(
            &path,
            &sources,
            None,
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("write");
        let ck = Checkpoint::open(&path).expect("open");
        let report = crate::stats::scan(
            &ck,
            ck.tensors(),
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        )
        .expect("scan");
        // 64 bins: the tensors wait and are written together at the end;
        // 2^20: each is written as it comes (one fits the pending bytes).
        for bins in [64, 1 << 20] {
            let doc = Streamed::new(true, String::new(), bins);
            assert_eq!(doc.room(), if bins == 64 { 1024 } else { 1 });
            for n in [0, 1, 3] {
                let tensors = &report.tensors[..n];
                let mut whole = Vec::new();
                crate::cli::output::pretty_at(
                    &mut whole,
                    &StatsDoc {
                        path: "dir/m \"q\".safetensors".into(),
                        bins,
                        tensors,
                        summary: &report.summary,
                    },
                    0,
                )
                .expect("JSON");
                let whole = String::from_utf8(whole).expect("UTF-8") + "\n";
                assert_eq!(
                    streamed(tensors, &report.summary, true, bins),
                    whole,
                    "{n} tensors, {bins} bins"
                );
            }
        }
        let text = streamed(&report.tensors, &report.summary, false, 64);
        assert!(
            text.starts_with("a  F16  [4, 8]") && text.contains("3 tensors"),
            "{text}"
        );
        // An error after some tensors still ends one JSON document.
        let sink = Shared::default();
        let mut out = Output::to_writer(Box::new(sink.clone()));
        let mut doc = Streamed::new(true, "m".into(), 64);
        for t in &report.tensors[..2] {
            doc.tensor(&mut out, t.clone());
        }
        let error = ErrorDoc {
            kind: "Changed".into(),
            message: "the file changed while being read".into(),
            path: Some("m".into()),
            globals: Vec::new(),
        };
        assert_eq!(doc.fail(&mut out, &error), EXIT_ERROR);
        assert!(!out.failed(), "flushed");
        let bytes = sink.0.borrow().clone();
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("one document");
        assert_eq!(v["tensors"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["error"]["kind"], "Changed");
        assert!(v.get("summary").is_none());
    }
}
