//! `safe_open` and `load_file`: safetensors' numpy API over every
//! container Tensorscope opens.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::array::{self, Found, Opened};
use super::{errors, run};
use crate::format::ContainerKind;

/// `safe_open(path, framework="np")`: a checkpoint opened for reading, as
/// safetensors' `safe_open` with `framework="np"`. A context manager; also
/// usable without `with`.
#[pyclass(module = "tensorscope", name = "safe_open")]
pub struct SafeOpen {
    opened: RwLock<Option<Arc<Opened>>>,
    path: String,
}

impl SafeOpen {
    fn opened(&self, py: Python<'_>) -> PyResult<Arc<Opened>> {
        self.opened
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                errors::error(
                    py,
                    "Closed",
                    "the file is closed (its `with` block ended)".to_owned(),
                    Some(self.path.clone()),
                )
            })
    }
}

/// Opens `path` off the GIL.
fn open(py: Python<'_>, path: &std::path::Path) -> PyResult<Arc<Opened>> {
    run::detached(py, |_| Opened::open(path))?
        .map(Arc::new)
        .map_err(|e| errors::from_load(py, &e))
}

fn check_framework(framework: &str, device: &str) -> PyResult<()> {
    if !matches!(framework, "np" | "numpy") {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "framework {framework:?} is not supported: tensorscope returns numpy arrays (\"np\" or \"numpy\")"
        )));
    }
    if device != "cpu" {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "device {device:?} is not supported: numpy arrays live on the \"cpu\""
        )));
    }
    Ok(())
}

#[pymethods]
impl SafeOpen {
    #[new]
    #[pyo3(signature = (filename, framework="np", device="cpu"))]
    fn new(py: Python<'_>, filename: PathBuf, framework: &str, device: &str) -> PyResult<Self> {
        check_framework(framework, device)?;
        let opened = open(py, &filename)?;
        Ok(Self {
            opened: RwLock::new(Some(opened)),
            path: crate::cli::output::path_string(&filename),
        })
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    /// Lets go of the checkpoint; arrays already returned stay valid.
    fn close(&self) {
        *self.opened.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Every tensor's name, sorted.
    fn keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let opened = self.opened(py)?;
        let mut names: Vec<String> = opened
            .ck
            .entries()
            .map(|(_, info)| info.name().to_owned())
            .collect();
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    /// Every tensor's name in the order of their bytes in the files.
    fn offset_keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let opened = self.opened(py)?;
        let mut seen = std::collections::HashSet::new();
        Ok(opened
            .ck
            .entries()
            .map(|(_, info)| info.name().to_owned())
            .filter(|n| seen.insert(n.clone()))
            .collect())
    }

    /// A single `.safetensors` file's `__metadata__` (or None); for every
    /// other container, `info --json`'s `metadata` as strings.
    fn metadata(&self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        let opened = self.opened(py)?;
        metadata(py, &opened).map(|d| d.map(Bound::unbind))
    }

    /// The tensor as a numpy array.
    fn get_tensor<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let opened = self.opened(py)?;
        array::tensor(py, &opened, name)
    }

    /// The tensor's shape and dtype, and numpy indexing of its values.
    fn get_slice(&self, py: Python<'_>, name: &str) -> PyResult<TensorSlice> {
        let opened = self.opened(py)?;
        let Some(found) = opened.find(name) else {
            return Err(errors::error(
                py,
                "UnknownTensor",
                format!("no tensor named {}", crate::text::display_name(name)),
                Some(self.path.clone()),
            ));
        };
        let shape = opened.shape(found);
        let dtype = match found {
            Found::Logical(_) => opened.ck.find(name).map_or("F32", |t| opened.dtype_name(t)),
            Found::Stored(t) => opened.dtype_name(t),
        };
        Ok(TensorSlice {
            opened,
            name: name.to_owned(),
            shape,
            dtype,
        })
    }

    fn __repr__(&self) -> String {
        format!("tensorscope.safe_open({:?})", self.path)
    }
}

/// What `metadata()` returns.
fn metadata<'py>(py: Python<'py>, opened: &Opened) -> PyResult<Option<Bound<'py, PyDict>>> {
    let ck = &opened.ck;
    let dict = PyDict::new(py);
    let single_safetensors = ck.container() == ContainerKind::SAFETENSORS && !ck.is_sharded();
    if single_safetensors {
        let Some(meta) = ck
            .shards()
            .first()
            .and_then(|s| s.file().header().metadata())
        else {
            return Ok(None);
        };
        for (k, v) in meta {
            dict.set_item(k, v)?;
        }
        return Ok(Some(dict));
    }
    if let serde_json::Value::Object(map) = crate::cli::info_metadata(ck) {
        for (k, v) in map {
            match v {
                serde_json::Value::String(s) => dict.set_item(k, s)?,
                other => dict.set_item(k, other.to_string())?,
            }
        }
    }
    Ok(Some(dict))
}

/// `get_slice(name)`: a tensor's shape and dtype, and its values indexed
/// as numpy indexes them.
#[pyclass(module = "tensorscope", name = "TensorSlice", frozen)]
pub struct TensorSlice {
    opened: Arc<Opened>,
    name: String,
    shape: Vec<u64>,
    dtype: &'static str,
}

#[pymethods]
impl TensorSlice {
    /// The tensor's shape.
    fn get_shape(&self) -> Vec<u64> {
        self.shape.clone()
    }

    /// The stored dtype's name (`"BF16"`; a GGUF tensor's ggml type,
    /// `"Q4_K"`).
    fn get_dtype(&self) -> &'static str {
        self.dtype
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let whole = array::tensor(py, &self.opened, &self.name)?;
        whole.get_item(index)
    }

    /// The first dimension, as `len()` of the array; a 0-d tensor has
    /// none (`TypeError`, as numpy says).
    fn __len__(&self) -> PyResult<usize> {
        match self.shape.first() {
            Some(&d) => Ok(usize::try_from(d).unwrap_or(usize::MAX)),
            None => Err(pyo3::exceptions::PyTypeError::new_err(
                "len() of a 0-d tensor",
            )),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "TensorSlice({:?}, shape={:?}, dtype={})",
            self.name, self.shape, self.dtype
        )
    }
}

/// `load_file(path)`: every tensor, by name, as `safetensors.numpy.load_file`.
#[pyfunction]
pub fn load_file(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let opened = open(py, &path)?;
    let dict = PyDict::new(py);
    let mut names: Vec<&str> = opened.ck.entries().map(|(_, i)| i.name()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        dict.set_item(name, array::tensor(py, &opened, name)?)?;
    }
    Ok(dict)
}
