//! The verbs as functions: each runs the command line's verb with `--json`
//! into a buffer and returns `json.loads` of that document, so a result is
//! exactly the dict `tensorscope VERB --json` prints. What makes the
//! command exit 2 raises instead ([`super::errors`]).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser as _;
use pyo3::prelude::*;

use super::{errors, run};
use crate::cli::{Cli, EXIT_ERROR, ErrorDoc, Output};

/// The document of `tensorscope info --json PATH`.
#[pyfunction]
pub fn info(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    verb(py, vec!["info".into(), path.into()])
}

/// The document of `tensorscope validate --json PATH` (an invalid file is
/// a document whose `valid` is false, not an exception).
#[pyfunction]
pub fn validate(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    verb(py, vec!["validate".into(), path.into()])
}

/// The document of `tensorscope stats --json PATH [--tensor NAME]...
/// [--moments]`.
#[pyfunction]
#[pyo3(signature = (path, tensors=None, moments=false))]
pub fn stats(
    py: Python<'_>,
    path: PathBuf,
    tensors: Option<Vec<String>>,
    moments: bool,
) -> PyResult<Py<PyAny>> {
    let mut args: Vec<OsString> = vec!["stats".into(), path.into()];
    for name in tensors.unwrap_or_default() {
        // `--tensor=NAME`: a name that starts with `-` stays a name.
        args.push(format!("--tensor={name}").into());
    }
    if moments {
        args.push("--moments".into());
    }
    verb(py, args)
}

/// The document of `tensorscope diff --json A B` (differing files give
/// their document, not an exception).
#[pyfunction]
pub fn diff(py: Python<'_>, a: PathBuf, b: PathBuf) -> PyResult<Py<PyAny>> {
    verb(py, vec!["diff".into(), a.into(), b.into()])
}

/// Writes the safetensors file `tensorscope resave SRC -o DST` writes and
/// returns that command's `--json` document.
#[pyfunction]
pub fn convert(py: Python<'_>, src: PathBuf, dst: PathBuf) -> PyResult<Py<PyAny>> {
    let mut output = OsString::from("--output=");
    output.push(dst.as_os_str());
    verb(py, vec!["resave".into(), src.into(), output])
}

/// The row of `tensorscope scan --json PATH` for a file, as a dict; for a
/// folder or a Hugging Face repository, the list of its files' rows.
#[pyfunction]
pub fn scan(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let location = path.to_string_lossy().into_owned();
    let many = path.is_dir()
        || crate::source::remote::hub::parse(
            &location,
            &crate::source::remote::client().settings().hf_endpoint,
        )
        .is_ok_and(|h| h.is_some_and(|h| h.path.is_none()));
    let shown = location.clone();
    let rows = run::detached(py, move |cancel| {
        let targets = crate::scan::targets(&location).map_err(|e| e.message)?;
        let mut rows = Vec::with_capacity(targets.len());
        for t in targets {
            if cancel.is_cancelled() {
                return Err("cancelled".to_owned());
            }
            rows.push(t.judge().map_err(|e| e.to_string())?);
        }
        serde_json::to_vec(&rows).map_err(|e| e.to_string())
    })?
    .map_err(|message| errors::error(py, "Io", message, Some(shown)))?;
    let doc = py
        .import("json")?
        .call_method1("loads", (pyo3::types::PyBytes::new(py, &rows),))?;
    if many {
        return Ok(doc.unbind());
    }
    Ok(doc.get_item(0)?.unbind())
}

/// A `Write` whose bytes stay readable after the [`Output`] owning it is
/// dropped.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `tensorscope ARGS --json` in this process, without the GIL.
fn verb(py: Python<'_>, mut args: Vec<OsString>) -> PyResult<Py<PyAny>> {
    args.insert(0, "tensorscope".into());
    args.push("--json".into());
    let verb = Cli::try_parse_from(&args)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?
        .command
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("no verb"))?;
    let captured = Captured::default();
    let sink = captured.clone();
    let code = run::detached(py, move |cancel| {
        let mut out = Output::to_writer(Box::new(sink));
        crate::cli::run_verb_to(verb, &mut out, cancel)
    })?;
    let text = std::mem::take(&mut *captured.0.lock().unwrap_or_else(PoisonError::into_inner));
    let doc = py
        .import("json")?
        .call_method1("loads", (pyo3::types::PyBytes::new(py, &text),))?;
    if code == EXIT_ERROR {
        let error = doc.get_item("error").ok();
        let field = |key: &str| error.as_ref().and_then(|e| e.get_item(key).ok());
        let doc = ErrorDoc {
            kind: field("kind")
                .and_then(|v| v.extract().ok())
                .unwrap_or_else(|| "Io".to_owned()),
            message: field("message")
                .and_then(|v| v.extract().ok())
                .unwrap_or_default(),
            path: field("path").and_then(|v| v.extract().ok()),
            globals: field("globals")
                .and_then(|v| v.extract().ok())
                .unwrap_or_default(),
        };
        return Err(errors::from_doc(py, &doc));
    }
    Ok(doc.unbind())
}
