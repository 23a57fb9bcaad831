"""Every container of tests/data through `safe_open` / `load_file`: names, metadata,
dtypes, shapes and values against the CLI (`info --json`, `export`), against the
fixtures' MANIFEST.json (written by numpy, torch, gguf-py, onnx, TensorFlow, h5py,
Flax), against `np.load` for NumPy files and `gguf.quants.dequantize` for GGUF."""

import zipfile
from pathlib import Path

import numpy as np
import pytest
import safetensors

import tensorscope
from conftest import (
    DATA,
    MANIFEST_KINDS,
    assert_matches_cli_export,
    assert_metadata_matches_cli,
    assert_same_array,
    cli_export_many,
    cli_info,
    export_requests,
    expected_dtype,
    manifest_entries,
    manifest_tensors,
    sha256_of,
)

# --------------------------------------------------------------------------- the fixtures


def _good_files():
    out = []
    for kind in MANIFEST_KINDS:
        for rel, entry in manifest_entries(kind):
            if entry.get("refused"):
                continue
            out.append(f"{kind}/{rel}")
    # Folders and indexes that open as one checkpoint.
    out += [
        "pytorch/sharded",
        "gguf/llama_tiny_hf",
        "tensorflow/saved_model",
    ]
    # Distributed-training checkpoints: folders of global tensors.
    for kind in ("dcp", "deepspeed"):
        for entry in _distributed_manifest(kind)["fixtures"]:
            out.append(f"{kind}/{entry['folder']}")
    return out


def _distributed_manifest(kind):
    import json

    with open(DATA / kind / "MANIFEST.json") as f:
        return json.load(f)


def _refused_files():
    out = []
    for kind in MANIFEST_KINDS:
        for rel, entry in manifest_entries(kind):
            if entry.get("refused"):
                out.append(f"{kind}/{rel}")
    return out


GOOD = _good_files()
REFUSED = _refused_files()


def _manifest_oracle(rel):
    """name -> manifest tensor entry for the file `rel` (kind/relative path), or {}."""
    kind, _, sub = rel.partition("/")
    out = {}
    if kind in ("dcp", "deepspeed"):
        for fixture in _distributed_manifest(kind)["fixtures"]:
            if fixture["folder"] == sub:
                for t in fixture["tensors"]:
                    out[t["name"]] = t
        return out
    entries = dict(manifest_entries(kind))
    if sub in entries:
        for t in manifest_tensors(entries[sub]):
            out[t["name"]] = t
        # A split GGUF opens from its first part as the whole model.
        for part in entries[sub].get("split_parts") or []:
            for t in manifest_tensors(entries.get(part, {})):
                out.setdefault(t["name"], t)
    elif rel == "pytorch/sharded":
        for t in manifest_tensors(entries["sharded/pytorch_model.bin.index.json"]):
            out[t["name"]] = t
    elif rel == "gguf/llama_tiny_hf":
        for t in manifest_tensors(entries["llama_tiny_hf/model.safetensors"]):
            out[t["name"]] = t
    elif rel == "tensorflow/saved_model":
        for t in manifest_tensors(entries["saved_model/variables/variables.index"]):
            out[t["name"]] = t
    return out


def _check_manifest_bytes(arr, entry, what):
    if "sha256_values" in entry:  # GGUF: values as gguf-py gives them
        vals = np.asarray(arr)
        if vals.dtype != np.dtype(entry["values_dtype"]):
            vals = vals.astype(entry["values_dtype"])
        assert sha256_of(vals) == entry["sha256_values"], f"{what}: values differ from MANIFEST"
    else:
        assert sha256_of(arr) == entry["sha256"], f"{what}: bytes differ from MANIFEST"


SLICES = [0, -1, slice(None, None, 2), (Ellipsis, -1), (slice(1, None), Ellipsis)]


def test_fixture_lists_are_not_empty():
    assert len(GOOD) > 40 and len(REFUSED) > 15


@pytest.mark.parametrize("rel", GOOD)
def test_container_against_cli_and_manifest(rel, tmp_path):
    path = str(DATA / rel)
    info = cli_info(path)
    assert "error" not in info, info
    oracle = _manifest_oracle(rel)
    names = [t["name"] for t in info["tensors"]]
    exports = cli_export_many(
        path, [r for t in info["tensors"] for r in export_requests(t["name"], t["dtype"])], tmp_path
    )
    with tensorscope.safe_open(path, framework="np") as f:
        keys = f.keys()
        assert keys == sorted(names), "keys() is not the CLI's names, sorted"
        if oracle:
            assert set(keys) == set(oracle), "keys() is not the MANIFEST's names"
        md = f.metadata()
        if info.get("format") == "safetensors" and Path(path).is_file():
            with safetensors.safe_open(path, framework="np") as ref:
                assert md == ref.metadata()
        else:
            assert md is not None, "metadata() is None for a non-safetensors container"
            assert_metadata_matches_cli(md, info.get("metadata"), rel)
        for t in info["tensors"]:
            name = t["name"]
            what = f"{rel}:{name}"
            s = f.get_slice(name)
            assert s.get_shape() == t["shape"], what
            assert s.get_dtype() == t["dtype"], what
            arr = f.get_tensor(name)
            assert isinstance(arr, np.ndarray), what
            assert arr.shape == tuple(t["shape"]), what
            assert arr.dtype == expected_dtype(t["dtype"]), f"{what}: {arr.dtype!r}"
            assert_matches_cli_export(arr, path, name, t["dtype"], tmp_path, exports)
            if name in oracle:
                _check_manifest_bytes(arr, oracle[name], what)
            if arr.ndim and arr.size:
                for idx in SLICES:
                    try:
                        want = arr[idx]
                    except IndexError:
                        continue
                    assert_same_array(np.asarray(s[idx]), np.asarray(want), f"{what}[{idx!r}]")


@pytest.mark.parametrize("rel", GOOD)
def test_load_file_equals_get_tensor(rel):
    path = str(DATA / rel)
    got = tensorscope.load_file(path)
    assert isinstance(got, dict)
    with tensorscope.safe_open(path, framework="np") as f:
        assert sorted(got) == f.keys()
        for k in f.keys():
            assert_same_array(got[k], f.get_tensor(k), f"{rel}:{k}")


@pytest.mark.parametrize("rel", REFUSED)
def test_refused_file_raises_cli_kind(rel):
    path = str(DATA / rel)
    info = cli_info(path)
    assert "error" in info, f"the CLI opens {rel}"
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        with tensorscope.safe_open(path, framework="np") as f:
            for k in f.keys():
                f.get_tensor(k)
    assert ei.value.kind == info["error"]["kind"], str(ei.value)
    assert not isinstance(ei.value, tensorscope.UnsafePickleError)
    assert str(ei.value)
    with pytest.raises(tensorscope.TensorscopeError) as ei2:
        tensorscope.load_file(path)
    assert ei2.value.kind == info["error"]["kind"]


# --------------------------------------------------------------------------- NumPy


def _numpy_files():
    return [rel for rel in GOOD if rel.startswith("numpy/")]


@pytest.mark.parametrize("rel", _numpy_files())
def test_numpy_values_equal_np_load(rel):
    """Big-endian and Fortran-order arrays come back little-endian (native), C order,
    with np.load's values."""
    path = DATA / rel
    with tensorscope.safe_open(str(path), framework="np") as f:
        keys = f.keys()
        if path.suffix == ".npz":
            with zipfile.ZipFile(path) as zf:
                members = [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
            with np.load(path, allow_pickle=False) as z:
                refs = {k: z[k] for k in members}
        else:
            assert len(keys) == 1
            refs = {keys[0]: np.load(path, allow_pickle=False)}
        assert sorted(refs) == keys
        for k, ref in refs.items():
            got = f.get_tensor(k)
            native = ref.dtype.newbyteorder("=")
            assert got.dtype == native, f"{k}: {got.dtype!r} vs {native!r}"
            assert got.dtype.byteorder in ("=", "|")
            assert got.flags.c_contiguous
            assert_same_array(got, ref.astype(native, order="C"), f"{rel}:{k}")
            assert np.array_equal(got, ref, equal_nan=got.dtype.kind in "fc")


def test_numpy_big_endian_and_fortran_fixtures_present():
    files = _numpy_files()
    assert any("be_" in f for f in files) and any("fortran" in f for f in files)


# --------------------------------------------------------------------------- GGUF

GGUF_STORED = {"F32", "F16", "F64", "I8", "I16", "I32", "I64"}


def _gguf_files():
    return [rel for rel in GOOD if rel.endswith(".gguf")]


@pytest.mark.parametrize("rel", _gguf_files())
def test_gguf_against_gguf_py(rel):
    gguf = pytest.importorskip("gguf", reason="the gguf package (gguf-py) is not installed")
    from gguf.quants import dequantize

    path = str(DATA / rel)
    reader = gguf.GGUFReader(path)
    with tensorscope.safe_open(path, framework="np") as f:
        keys = set(f.keys())
        for t in reader.tensors:
            name = t.name
            assert name in keys
            qtype = t.tensor_type.name
            s = f.get_slice(name)
            assert s.get_dtype() == qtype, name
            shape = [int(d) for d in reversed(list(t.shape))]
            assert s.get_shape() == shape, name
            arr = f.get_tensor(name)
            if qtype in GGUF_STORED:
                want = np.ascontiguousarray(t.data).reshape(shape)
                assert_same_array(arr, want, f"{rel}:{name}")
            elif qtype == "BF16":
                assert arr.dtype == expected_dtype("BF16")
                want = dequantize(t.data, t.tensor_type).reshape(shape)
                assert_same_array(arr.astype(np.float32), want, f"{rel}:{name}")
            else:
                assert arr.dtype == np.float32, f"{name}: {arr.dtype}"
                want = dequantize(t.data, t.tensor_type).reshape(shape)
                assert_same_array(arr, want.astype(np.float32), f"{rel}:{name} ({qtype})")


def test_gguf_block_types_covered():
    info = cli_info(str(DATA / "gguf/types.gguf"))
    dtypes = {t["dtype"] for t in info["tensors"]}
    assert {"Q4_0", "Q4_K", "Q6_K", "IQ2_XXS", "TQ1_0", "MXFP4"} <= dtypes


def test_gguf_split_opens_whole_model():
    first = str(DATA / "gguf/split/tiny-00001-of-00002.gguf")
    with tensorscope.safe_open(first, framework="np") as f:
        assert f.keys() == sorted(t["name"] for t in cli_info(first)["tensors"])
        assert len(f.keys()) == 5
