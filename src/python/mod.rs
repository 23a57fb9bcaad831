//! `import tensorscope` (feature `python`): the PyO3 layer, kept thin.
//!
//! Arguments come in, and the library's own values go out: a verb's result
//! is the very JSON document the command line prints with `--json` (the
//! verb runs through [`crate::cli`], one serializer), a tensor is a numpy
//! array that views the mapped file when it can ([`array`]). Every call
//! that reads or computes runs with the GIL released ([`run`]), and stops
//! at the engine's next cancellation check on Ctrl-C.

#![allow(
    clippy::needless_pass_by_value,
    reason = "PyO3 hands a function its arguments as owned values"
)]

mod array;
mod errors;
mod open;
mod run;
mod verbs;

use pyo3::prelude::*;

/// The module `tensorscope`.
#[pymodule]
fn tensorscope(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The verbs' documents come back as values or exceptions: nothing
    // is printed on the caller's stderr (the command restores it).
    crate::cli::output::set_quiet(true);
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "TensorscopeError",
        py.get_type::<errors::TensorscopeError>(),
    )?;
    m.add(
        "UnsafePickleError",
        py.get_type::<errors::UnsafePickleError>(),
    )?;
    m.add_class::<open::SafeOpen>()?;
    m.add_class::<open::TensorSlice>()?;
    m.add_function(wrap_pyfunction!(open::load_file, m)?)?;
    m.add_function(wrap_pyfunction!(verbs::info, m)?)?;
    m.add_function(wrap_pyfunction!(verbs::validate, m)?)?;
    m.add_function(wrap_pyfunction!(verbs::stats, m)?)?;
    m.add_function(wrap_pyfunction!(verbs::diff, m)?)?;
    m.add_function(wrap_pyfunction!(verbs::convert, m)?)?;
    m.add_function(wrap_pyfunction!(verbs::scan, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add(
        "__all__",
        [
            "TensorscopeError",
            "UnsafePickleError",
            "TensorSlice",
            "safe_open",
            "load_file",
            "info",
            "validate",
            "stats",
            "diff",
            "convert",
            "scan",
            // `from .tensorscope import *` (maturin's package) re-exports
            // only these: the command's entry point must be among them.
            "_cli_main",
            "__version__",
        ],
    )?;
    Ok(())
}

/// The `tensorscope` command of the wheel (`[project.scripts]`): the
/// command line with `sys.argv`, returning its exit code.
#[pyfunction]
#[pyo3(name = "_cli_main")]
fn cli_main(py: Python<'_>) -> PyResult<i32> {
    use std::io::Write as _;
    let argv: Vec<std::ffi::OsString> = py.import("sys")?.getattr("argv")?.extract()?;
    crate::cli::output::set_quiet(false);
    // Ctrl-C stops the command, as it stops the binary (Python's own
    // handler would only set a flag that nothing here reads).
    let signal = py.import("signal")?;
    signal.call_method1(
        "signal",
        (signal.getattr("SIGINT")?, signal.getattr("SIG_DFL")?),
    )?;
    // The explorer's event loop must own the main thread: run here, with
    // the GIL released so nothing else waits on it.
    let code = py.detach(|| {
        let code = crate::launch::main(argv);
        // A library has no runtime that flushes stdout at exit.
        let _ = std::io::stdout().flush();
        code
    });
    Ok(code)
}
