//! `TensorscopeError` and `UnsafePickleError`: every failure of the
//! library, with the command line's `error.kind` for the same failure.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::cli::ErrorDoc;
use crate::format::LoadError;

pyo3::create_exception!(
    tensorscope,
    TensorscopeError,
    PyException,
    "Every failure of the library. `.kind` is the command line's `error.kind` for the same failure (`HeaderTooSmall`, `Io`, `UnknownTensor`, ...); `str(e)` is the message; `.path` the file concerned, or None."
);
pyo3::create_exception!(
    tensorscope,
    UnsafePickleError,
    TensorscopeError,
    "A pickle that imports a global outside torch's weights_only allowlist. `.globals` lists those globals (`module.name`); nothing was imported or run."
);

/// The exception of an error document: `UnsafePickleError` for an unsafe
/// pickle, else `TensorscopeError`, with `.kind`, `.path` and `.globals`.
pub fn from_doc(py: Python<'_>, doc: &ErrorDoc) -> PyErr {
    let err = if doc.kind == "UnsafePickle" {
        UnsafePickleError::new_err(doc.message.clone())
    } else {
        TensorscopeError::new_err(doc.message.clone())
    };
    let value = err.value(py);
    // Attributes of a fresh exception instance: setting them cannot fail
    // short of memory, when the error raised is that one.
    let set = || -> PyResult<()> {
        value.setattr("kind", &doc.kind)?;
        value.setattr("path", doc.path.clone())?;
        value.setattr("globals", doc.globals.clone())?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// The exception of a load error.
pub fn from_load(py: Python<'_>, e: &LoadError) -> PyErr {
    from_doc(py, &ErrorDoc::from_load(e))
}

/// An exception of kind `kind` about `path`.
pub fn error(py: Python<'_>, kind: &str, message: String, path: Option<String>) -> PyErr {
    from_doc(
        py,
        &ErrorDoc {
            kind: kind.to_owned(),
            message,
            path,
            globals: Vec::new(),
        },
    )
}
