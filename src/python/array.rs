//! Tensors as numpy arrays, in the dtypes of PYTHON.md's table.
//!
//! A local tensor read in place whose bytes numpy can take as they are is a
//! read-only view of the mapped file: the array's base holds the opened
//! checkpoint, so the mapping lives as long as any array viewing it.
//! Everything else (remote, compressed, byte-swapped, strided, sub-byte,
//! BOOL, dequantized) is read into a new array, off the GIL.

use std::sync::Arc;

use numpy::PyArray1;
use numpy::ndarray::ArrayView1;
use pyo3::prelude::*;
use rayon::prelude::*;

use super::{errors, run};
use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, code_at};
use crate::format::TensorRef;
use crate::format::{Checkpoint, LoadError};
use crate::jobs::{CancelToken, Progress};
use crate::quant::{Dequantizer, LogicalTensor, Quantization};

/// An opened checkpoint and what its arrays need: kept alive by every
/// array that views its mapping.
pub struct Opened {
    /// The checkpoint.
    pub ck: Checkpoint,
    /// A GGUF file's block types, whose tensors are their dequantized
    /// values (as the command line's `export` writes them).
    pub quant: Option<Quantization>,
}

impl Opened {
    /// Opens `path` as every reader does (an unsafe pickle is refused).
    pub fn open(path: &std::path::Path) -> Result<Self, LoadError> {
        let ck = Checkpoint::open_readable(path)?;
        let quant = crate::quant::for_values(&ck, false);
        Ok(Self { ck, quant })
    }

    /// What a name is: a block type's logical tensor, a stored tensor, or
    /// nothing.
    pub fn find(&self, name: &str) -> Option<Found<'_>> {
        if let Some(lt) = self.quant.as_ref().and_then(|q| q.find(name)) {
            return Some(Found::Logical(lt));
        }
        self.ck.find(name).map(Found::Stored)
    }

    /// The dtype name `get_dtype()` gives: a GGUF tensor's ggml type as
    /// gguf-py spells it, else the safetensors name.
    pub fn dtype_name(&self, t: TensorRef) -> &'static str {
        let gguf = self.ck.shards()[t.shard()]
            .file()
            .gguf()
            .and_then(|g| g.types.get(t.index()).copied());
        match gguf {
            Some(ty) => ty.name(),
            None => self.ck.info(t).map_or("", |i| i.dtype().name()),
        }
    }

    /// A tensor's shape: a GGUF tensor's row-major shape, else its
    /// header's.
    pub fn shape(&self, found: Found<'_>) -> Vec<u64> {
        match found {
            Found::Logical(lt) => lt.shape().to_vec(),
            Found::Stored(t) => self.ck.shape_of(t).to_vec(),
        }
    }
}

/// A tensor found by name.
#[derive(Clone, Copy)]
pub enum Found<'a> {
    /// A block type, read as its dequantized F32 values.
    Logical(&'a LogicalTensor),
    /// A stored tensor.
    Stored(TensorRef),
}

/// The owner of a view's mapping: the base object of the arrays that view
/// a mapped file.
#[pyclass(frozen, module = "tensorscope", name = "_Mapping")]
pub struct Mapping {
    _opened: Arc<Opened>,
}

/// The numpy array of tensor `name` of `opened`.
pub fn tensor<'py>(
    py: Python<'py>,
    opened: &Arc<Opened>,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(found) = opened.find(name) else {
        return Err(errors::error(
            py,
            "UnknownTensor",
            format!("no tensor named {}", crate::text::display_name(name)),
            Some(crate::cli::output::path_string(opened.ck.path())),
        ));
    };
    let shape = opened.shape(found);
    match found {
        Found::Logical(lt) => {
            let values = run::detached(py, |cancel| dequantized(&opened.ck, lt, cancel))?
                .map_err(|e| e.into_py(py, opened))?;
            let array = PyArray1::<f32>::from_vec(py, values);
            array.call_method1("reshape", (shape,))
        }
        Found::Stored(t) => {
            let Some(info) = opened.ck.info(t) else {
                return Err(errors::error(
                    py,
                    "UnknownTensor",
                    format!("no tensor named {name}"),
                    None,
                ));
            };
            let dtype = info.dtype();
            let np_dtype = numpy_dtype(py, dtype)?;
            if let Some(array) = view(py, opened, t, dtype)? {
                return array
                    .call_method1("view", (np_dtype,))?
                    .call_method1("reshape", (shape,));
            }
            let numel = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
            let bytes = run::detached(py, |cancel| copied(&opened.ck, t, dtype, numel, cancel))?
                .map_err(|e| e.into_py(py, opened))?;
            PyArray1::<u8>::from_vec(py, bytes)
                .call_method1("view", (np_dtype,))?
                .call_method1("reshape", (shape,))
        }
    }
}

/// A read-only `uint8` view of a tensor's mapped bytes, when the tensor is
/// local, read in place and of a dtype whose bytes numpy takes as they are.
fn view<'py>(
    py: Python<'py>,
    opened: &Arc<Opened>,
    t: TensorRef,
    dtype: Dtype,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let ck = &opened.ck;
    // BOOL is normalised to 0/1 and sub-byte codes are unpacked: copies.
    let as_is = !matches!(
        dtype,
        Dtype::Bool | Dtype::F4 | Dtype::F6E2M3 | Dtype::F6E3M2
    );
    if !as_is || ck.is_remote() || !ck.is_in_place(t) {
        return Ok(None);
    }
    // A file that changed since it was opened is refused, not read.
    ck.check_files(&[t])
        .map_err(|e| errors::from_load(py, &e))?;
    let bytes = ck.bytes(t);
    let owner = Bound::new(
        py,
        Mapping {
            _opened: Arc::clone(opened),
        },
    )?;
    let view = ArrayView1::from(bytes);
    #[allow(
        unsafe_code,
        reason = "an array over memory that a Python object owns has no safe constructor"
    )]
    // SAFETY: `bytes` lies in the read-only mapping of a file of `opened`,
    // which `owner` keeps alive (and unmoved: a mapping's address is fixed)
    // for as long as the array, its base, exists. The array is made
    // read-only below, before any Python code sees it, and its base is not
    // an array, so numpy refuses to make it writable again.
    let array = unsafe { PyArray1::<u8>::borrow_from_array(&view, owner.into_any()) };
    array.call_method1("setflags", (false,))?;
    Ok(Some(array.into_any()))
}

/// A stored tensor's values in C order, little-endian, one element per
/// item (sub-byte codes unpacked, BOOL as 0/1), read into a new buffer.
fn copied(
    ck: &Checkpoint,
    t: TensorRef,
    dtype: Dtype,
    numel: Option<u64>,
    cancel: &CancelToken,
) -> Result<Vec<u8>, ReadError> {
    ck.check_files(&[t])?;
    let _fetched = ck.fetch(&[t], cancel, &Progress::new())?;
    ck.check_unchanged(&[t])?;
    let bytes = ck.bytes(t);
    let numel = numel.ok_or(ReadError::TooLarge)?;
    let out_len = match dtype {
        Dtype::F4 | Dtype::F6E2M3 | Dtype::F6E3M2 => {
            usize::try_from(numel).map_err(|_| ReadError::TooLarge)?
        }
        _ => bytes.len(),
    };
    let mut out = Vec::new();
    out.try_reserve_exact(out_len)
        .map_err(|_| ReadError::TooLarge)?;
    match dtype {
        Dtype::F4 | Dtype::F6E2M3 | Dtype::F6E3M2 => {
            for i in 0..numel {
                // Every code fits its bits (at most 6).
                out.push(code_at(dtype, bytes, i, BitOrder::LsbFirst).unwrap_or(0) as u8);
            }
        }
        Dtype::Bool => out.extend(bytes.iter().map(|&b| u8::from(b != 0))),
        _ => out.extend_from_slice(bytes),
    }
    Ok(out)
}

/// Values dequantized by one task, between two looks at the cancel
/// token.
const DEQUANT_PIECE: usize = 1 << 18;

/// A block type's dequantized values, as `export` writes them.
fn dequantized(
    ck: &Checkpoint,
    lt: &LogicalTensor,
    cancel: &CancelToken,
) -> Result<Vec<f32>, ReadError> {
    let dq =
        Dequantizer::new(ck, lt).ok_or_else(|| ReadError::NotDecoded(lt.message().to_owned()))?;
    let parts = dq.parts();
    ck.check_files(&parts)?;
    let _fetched = ck.fetch(&parts, cancel, &Progress::new())?;
    let len = usize::try_from(dq.len()).map_err(|_| ReadError::TooLarge)?;
    let mut values = Vec::new();
    values
        .try_reserve_exact(len)
        .map_err(|_| ReadError::TooLarge)?;
    values.resize(len, 0f32);
    // Pieces decoded on every core; a cancel is seen between them.
    values
        .par_chunks_mut(DEQUANT_PIECE)
        .enumerate()
        .try_for_each(|(i, piece)| {
            if cancel.is_cancelled() {
                return Err(ReadError::Cancelled);
            }
            let start = i * DEQUANT_PIECE;
            let mut done = 0usize;
            while done < piece.len() {
                let got = dq.values((start + done) as u64, &mut piece[done..]);
                if got == 0 {
                    return Err(ReadError::NotDecoded(format!(
                        "the values of {:?} end after {} of {len} elements",
                        lt.name(),
                        start + done
                    )));
                }
                done += got;
            }
            Ok(())
        })?;
    ck.check_unchanged(&parts)?;
    Ok(values)
}

/// Why a tensor could not be read into a new array.
pub enum ReadError {
    /// The checkpoint's own error.
    Load(LoadError),
    /// The array would not fit in memory.
    TooLarge,
    /// A block type this build does not decode.
    NotDecoded(String),
    /// Interrupted (the caller raises `KeyboardInterrupt`).
    Cancelled,
}

impl From<LoadError> for ReadError {
    fn from(e: LoadError) -> Self {
        Self::Load(e)
    }
}

impl ReadError {
    fn into_py(self, py: Python<'_>, opened: &Opened) -> PyErr {
        let path = Some(crate::cli::output::path_string(opened.ck.path()));
        match self {
            Self::Load(e) => errors::from_load(py, &e),
            Self::TooLarge => pyo3::exceptions::PyMemoryError::new_err(
                "the tensor does not fit in this process's memory",
            ),
            Self::NotDecoded(message) => errors::error(py, "NotDecoded", message, path),
            Self::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
        }
    }
}

/// The numpy dtype of a stored dtype (PYTHON.md's table).
pub fn numpy_dtype(py: Python<'_>, dtype: Dtype) -> PyResult<Bound<'_, PyAny>> {
    let numpy_name = match dtype {
        Dtype::F64 => "<f8",
        Dtype::F32 => "<f4",
        Dtype::F16 => "<f2",
        Dtype::I8 => "i1",
        Dtype::I16 => "<i2",
        Dtype::I32 => "<i4",
        Dtype::I64 => "<i8",
        Dtype::U8 => "u1",
        Dtype::U16 => "<u2",
        Dtype::U32 => "<u4",
        Dtype::U64 => "<u8",
        Dtype::Bool => "?",
        Dtype::C64 => "<c8",
        other => {
            let name = match other {
                Dtype::BF16 => "bfloat16",
                Dtype::F8E4M3 => "float8_e4m3fn",
                Dtype::F8E5M2 => "float8_e5m2",
                Dtype::F8E4M3Fnuz => "float8_e4m3fnuz",
                Dtype::F8E5M2Fnuz => "float8_e5m2fnuz",
                Dtype::F8E8M0 => "float8_e8m0fnu",
                Dtype::F6E2M3 => "float6_e2m3fn",
                Dtype::F6E3M2 => "float6_e3m2fn",
                _ => "float4_e2m1fn",
            };
            let ty = py.import("ml_dtypes")?.getattr(name)?;
            return py.import("numpy")?.getattr("dtype")?.call1((ty,));
        }
    };
    py.import("numpy")?.getattr("dtype")?.call1((numpy_name,))
}
