"""Tensorscope: safetensors' numpy API for every checkpoint container.

`safe_open` and `load_file` read safetensors files and shard indexes, NumPy
`.npy`/`.npz`, PyTorch files (their pickles interpreted, never run), GGUF
models (block types dequantized to float32), ONNX, TensorFlow, Keras/HDF5
and Flax checkpoints, local or remote (`https://`, `hf://`). The verbs
return the documents `tensorscope VERB --json` prints.

This stub is checked against the module by `python/tests/test_stub.py`.
"""

import os
from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Sequence, Type, Union

import numpy as np

_Path = Union[str, "os.PathLike[str]"]

__version__: str
__all__: List[str]

class TensorscopeError(Exception):
    """Every failure of the library."""

    kind: str
    """The command line's `error.kind` for the same failure (`"HeaderTooSmall"`, `"Io"`, `"UnknownTensor"`, ...)."""
    path: Optional[str]
    """The file concerned, when there is one."""
    globals: List[str]
    """The unsafe globals of a pickle (empty for other errors)."""

class UnsafePickleError(TensorscopeError):
    """A pickle importing a global outside torch's weights_only allowlist (never run)."""

    kind: Literal["UnsafePickle"]
    globals: List[str]
    """Those globals, as `"module.name"`."""

class TensorSlice:
    """What `safe_open.get_slice` returns: shape, dtype and numpy indexing."""

    def get_shape(self) -> List[int]:
        """The tensor's shape."""
    def get_dtype(self) -> str:
        """The stored dtype (`"BF16"`); a GGUF tensor's ggml type (`"Q4_K"`)."""
    def __getitem__(self, index: Any) -> np.ndarray:
        """The values numpy's indexing of the whole tensor gives."""
    def __len__(self) -> int: ...

class safe_open:
    """A checkpoint opened for reading, as `safetensors.safe_open(path, framework="np")`."""

    def __init__(
        self, filename: _Path, framework: Literal["np", "numpy"] = "np", device: Literal["cpu"] = "cpu"
    ) -> None: ...
    def __enter__(self) -> "safe_open": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    def close(self) -> None:
        """Lets go of the checkpoint; arrays already returned stay valid."""
    def keys(self) -> List[str]:
        """Every tensor's name, sorted."""
    def offset_keys(self) -> List[str]:
        """Every tensor's name in the order of its bytes in the files."""
    def metadata(self) -> Optional[Dict[str, str]]:
        """A `.safetensors` file's `__metadata__` (None without); other containers: `info`'s metadata as strings."""
    def get_tensor(self, name: str) -> np.ndarray:
        """The tensor as a numpy array (a read-only view of the mapped file where it can be)."""
    def get_slice(self, name: str) -> TensorSlice:
        """The tensor's shape and dtype, and numpy indexing of its values."""

def load_file(path: _Path) -> Dict[str, np.ndarray]:
    """Every tensor by name, as `safetensors.numpy.load_file`."""

def info(path: _Path) -> Dict[str, Any]:
    """The document of `tensorscope info --json PATH`."""

def validate(path: _Path) -> Dict[str, Any]:
    """The document of `tensorscope validate --json PATH` (`valid` false for an invalid file)."""

def stats(path: _Path, tensors: Optional[Sequence[str]] = None, moments: bool = False) -> Dict[str, Any]:
    """The document of `tensorscope stats --json PATH [--tensor NAME]... [--moments]`."""

def diff(a: _Path, b: _Path) -> Dict[str, Any]:
    """The document of `tensorscope diff --json A B`."""

def convert(src: _Path, dst: _Path) -> Dict[str, Any]:
    """Writes what `tensorscope resave SRC -o DST` writes; returns its `--json` document."""

def scan(path: _Path) -> Union[Dict[str, Any], List[Dict[str, Any]]]:
    """The row `tensorscope scan --json PATH` prints for a file (`path`, `format`, `verdict`,
    `findings`, `bytes`, `tensors`), as a dict; for a folder or a Hugging Face repository,
    the list of its files' rows. Nothing is executed or written."""
