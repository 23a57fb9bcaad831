"""Zero-copy and lifetime (PYTHON.md): a local little-endian C-order tensor of a
numpy-native dtype is a read-only view of the mapped file, the mapping outlives the
`safe_open` object, and `get_tensor` of 256 MiB does not grow RSS by 256 MiB."""

import gc
import os
import sys

import numpy as np
import pytest

import tensorscope
from conftest import BIG_ELEMENTS, DATA, mappings_of, rss_bytes, write_safetensors

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")


@pytest.fixture()
def f32_file(tmp_path):
    p = tmp_path / "f32.safetensors"
    write_safetensors(p, {
        "w": np.arange(4096, dtype=np.float32).reshape(64, 64),
        "v": np.linspace(-1, 1, 100).astype(np.float64),
    })
    return p


def _base_chain(arr):
    chain = []
    b = arr.base
    while b is not None and len(chain) < 16:
        chain.append(b)
        b = getattr(b, "base", None)
    return chain


def test_view_is_read_only(f32_file):
    with tensorscope.safe_open(str(f32_file), framework="np") as f:
        arr = f.get_tensor("w")
    assert arr.flags.writeable is False
    with pytest.raises(ValueError):
        arr[0, 0] = 1.0
    with pytest.raises(ValueError):
        arr += 1
    assert arr.base is not None, "a zero-copy view has an owner in its base chain"
    assert _base_chain(arr)


def test_view_cannot_be_made_writeable(f32_file):
    """Beyond "writing raises": the read-only view must not be turned writeable with
    setflags (writing through it would fault on a read-only mapping)."""
    with tensorscope.safe_open(str(f32_file), framework="np") as f:
        arr = f.get_tensor("w")
    with pytest.raises(ValueError):
        arr.setflags(write=True)
    assert arr.flags.writeable is False


@linux_only
@pytest.mark.parametrize(
    "path, name",
    [
        (None, "w"),
        (str(DATA / "numpy/le_f4.npy"), "le_f4"),
        (str(DATA / "gguf/types.gguf"), "t.F32"),
        (str(DATA / "gguf/llama_tiny.gguf"), "blk.0.attn_q.weight"),
    ],
)
def test_data_pointer_inside_file_mapping(f32_file, path, name):
    path = path or str(f32_file)
    with tensorscope.safe_open(path, framework="np") as f:
        arr = f.get_tensor(name)
        maps = mappings_of(path)
        assert maps, f"{path} is not mapped"
        ptr = arr.ctypes.data
        assert any(start <= ptr and ptr + arr.nbytes <= end for start, end in maps), (
            f"data pointer {ptr:#x} is not inside a mapping of {path}: {maps}"
        )
        assert arr.flags.writeable is False
        assert arr.flags.c_contiguous


def test_arrays_outlive_the_safe_open_object(f32_file):
    want_w = np.arange(4096, dtype=np.float32).reshape(64, 64)
    want_v = np.linspace(-1, 1, 100).astype(np.float64)
    with tensorscope.safe_open(str(f32_file), framework="np") as f:
        w = f.get_tensor("w")
        v = f.get_tensor("v")
        s = f.get_slice("w")
    del f
    gc.collect()
    assert np.array_equal(w, want_w)
    assert np.array_equal(v, want_v)
    assert np.array_equal(s[1:3], want_w[1:3])
    # And after many open/close cycles, with arrays from each kept alive.
    keep = []
    for _ in range(50):
        g = tensorscope.safe_open(str(f32_file), framework="np")
        keep.append(g.get_tensor("w")[::7])
        del g
    gc.collect()
    for a in keep:
        assert np.array_equal(a, want_w[::7])
    # A view of a view, after its parent array is gone.
    with tensorscope.safe_open(str(f32_file), framework="np") as f:
        row = f.get_tensor("w")[5]
    gc.collect()
    assert np.array_equal(row, want_w[5])


@linux_only
def test_arrays_outlive_the_file_name(tmp_path):
    """The mapping keeps the data after the file is unlinked (POSIX)."""
    p = tmp_path / "gone.safetensors"
    want = np.arange(1000, dtype=np.int32)
    write_safetensors(p, {"x": want})
    f = tensorscope.safe_open(str(p), framework="np")
    x = f.get_tensor("x")
    del f
    os.unlink(p)
    gc.collect()
    assert np.array_equal(x, want)


def test_load_file_arrays_after_collection(f32_file):
    d = tensorscope.load_file(str(f32_file))
    gc.collect()
    assert np.array_equal(d["w"], np.arange(4096, dtype=np.float32).reshape(64, 64))


def test_fresh_arrays_for_other_layouts():
    """Big-endian / Fortran / dequantized tensors are fresh arrays with the right values;
    read-only or not, they hold no reference to a dropped mapping."""
    for path, name in [
        (DATA / "numpy/fortran_be_f8.npy", "fortran_be_f8"),
        (DATA / "gguf/types.gguf", "t.Q4_K"),
        (DATA / "numpy/savez_compressed_mixed.npz", None),
    ]:
        with tensorscope.safe_open(str(path), framework="np") as f:
            name = name or f.keys()[0]
            a = f.get_tensor(name)
            copy = a.copy()
        del f
        gc.collect()
        assert np.array_equal(a, copy, equal_nan=a.dtype.kind == "f")
        assert a.flags.c_contiguous


@linux_only
def test_get_tensor_of_256_mib_does_not_grow_rss(big_safetensors):
    gc.collect()
    with tensorscope.safe_open(str(big_safetensors), framework="np") as f:
        gc.collect()
        before = rss_bytes()
        arr = f.get_tensor("big")
        after = rss_bytes()
        assert arr.shape == (BIG_ELEMENTS,) and arr.dtype == np.float32
        assert arr.flags.writeable is False
        grown = after - before
        assert grown < 8 * 1024 * 1024, f"RSS grew by {grown / 2**20:.1f} MiB"
        # Touching a few pages reads the right values.
        first = np.fromfile(big_safetensors, dtype=np.uint8, count=8)
        hlen = int.from_bytes(first.tobytes(), "little")
        ref = np.fromfile(big_safetensors, dtype=np.float32, count=16, offset=8 + hlen)
        assert np.array_equal(arr[:16], ref)
        sl = f.get_slice("big")[BIG_ELEMENTS - 4:]
        ref_tail = np.fromfile(big_safetensors, dtype=np.float32, count=4,
                               offset=8 + hlen + (BIG_ELEMENTS - 4) * 4)
        assert np.array_equal(sl, ref_tail)
    del arr
    gc.collect()
