"""`tensorscope.safe_open` / `load_file` against safetensors' own numpy API (0.8.0),
on files written by `safetensors.numpy.save_file`, and every dtype row of PYTHON.md on
hand-written files against the CLI's `export`."""

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy as stnp

import tensorscope
from conftest import (
    DTYPES,
    RAW_CODES,
    assert_floats_equal,
    assert_matches_cli_export,
    assert_same_array,
    cli_export,
    st_dtype_name,
    write_safetensors,
)

# --------------------------------------------------------------------------- fixtures


def _native_tensors():
    """One tensor of every dtype safetensors' numpy writer takes, specials included.

    Names are chosen so that the file order (the writer's: by dtype alignment, then
    name) is not the sorted order.
    """
    rng = np.random.default_rng(7)
    t = {}
    t["z_f64"] = np.array(
        [[0.0, -0.0, 1.5, np.nan], [np.inf, -np.inf, 5e-324, 1.7976931348623157e308],
         [-2.5, 3.25, 1e-300, -7.0]],
        dtype=np.float64,
    )
    f32 = rng.standard_normal((4, 5, 6)).astype(np.float32)
    f32.flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e-45, np.finfo(np.float32).max]
    t["a_f32"] = f32
    f16 = rng.standard_normal((6, 7)).astype(np.float16)
    f16.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, np.float16(6e-8)]
    t["m_f16"] = f16
    for name, dt in [("i8", np.int8), ("i16", np.int16), ("i32", np.int32), ("i64", np.int64),
                     ("u8", np.uint8), ("u16", np.uint16), ("u32", np.uint32), ("u64", np.uint64)]:
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, size=(3, 4), dtype=dt, endpoint=True)
        a.flat[0] = info.min
        a.flat[1] = info.max
        t["int_" + name] = a
    t["b_bool"] = rng.integers(0, 2, size=(5, 3)).astype(np.bool_)
    c = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    c.flat[0] = complex(np.nan, -0.0)
    t["c_c64"] = c
    t["scalar_f32"] = np.array(3.5, dtype=np.float32)
    t["scalar_i64"] = np.array(-(2**62), dtype=np.int64)
    t["empty_f32"] = np.zeros((2, 0, 3), dtype=np.float32)
    t["empty_u8"] = np.zeros((0,), dtype=np.uint8)
    # Names JSON escapes, and non-ASCII ones (sorted by code point, as Python sorts).
    t['Ünï "q" \\ é/ü'] = np.array([1.0, -2.0], dtype=np.float32)
    t["émbed.weight"] = np.array([[1, 2]], dtype=np.int16)
    t["Zeta"] = np.array([True])
    bf = rng.standard_normal((5, 6)).astype(ml_dtypes.bfloat16)
    bf.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    t["bf16"] = bf
    return t


def _ml_tensors():
    """float8 tensors safetensors can write (but its numpy reader cannot read)."""
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    return {
        "f8_e4m3": codes.view(ml_dtypes.float8_e4m3fn),
        "f8_e5m2": codes.view(ml_dtypes.float8_e5m2),
        "f8_e4m3fnuz": codes.view(ml_dtypes.float8_e4m3fnuz),
        "f8_e5m2fnuz": codes.view(ml_dtypes.float8_e5m2fnuz),
        "f8_e8m0": codes.view(ml_dtypes.float8_e8m0fnu),
    }


NATIVE = _native_tensors()
ML = _ml_tensors()
METADATA = {"format": "np", "note": "written by safetensors.numpy.save_file", "empty": ""}


@pytest.fixture(scope="module")
def native_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("st") / "native.safetensors"
    stnp.save_file(NATIVE, str(path), metadata=METADATA)
    return path


@pytest.fixture(scope="module")
def all_file(tmp_path_factory):
    """Native tensors and the float8s, written by safetensors."""
    path = tmp_path_factory.mktemp("st") / "all.safetensors"
    stnp.save_file({**NATIVE, **ML}, str(path), metadata=METADATA)
    return path


@pytest.fixture(scope="module")
def no_meta_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("st") / "nometa.safetensors"
    stnp.save_file({"x": np.arange(6, dtype=np.float32).reshape(2, 3)}, str(path))
    return path


def _header_dtypes(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


def test_fixture_holds_every_dtype(all_file):
    dtypes = set(_header_dtypes(all_file).values())
    assert dtypes == {
        "F64", "F32", "F16", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "BOOL",
        "C64", "BF16", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0",
    }


# --------------------------------------------------------------------------- safe_open


def test_keys_sorted_like_safetensors(all_file):
    with safetensors.safe_open(str(all_file), framework="np") as ref:
        ref_keys = ref.keys()
    with tensorscope.safe_open(str(all_file), framework="np") as f:
        keys = f.keys()
    assert isinstance(keys, list)
    assert keys == ref_keys
    assert keys == sorted({**NATIVE, **ML})
    # The file order is not the sorted order: keys() really sorts.
    assert list(_header_dtypes(all_file)) != keys


def test_offset_keys_like_safetensors(all_file, native_file):
    """The stub's offset_keys: names in byte order, as safetensors' offset_keys()."""
    for path in (all_file, native_file):
        with safetensors.safe_open(str(path), framework="np") as ref:
            want = ref.offset_keys()
        with tensorscope.safe_open(str(path), framework="np") as f:
            assert f.offset_keys() == want


def test_close_keeps_arrays(native_file):
    f = tensorscope.safe_open(str(native_file), framework="np")
    a = f.get_tensor("a_f32")
    f.close()
    assert_same_array(a, NATIVE["a_f32"])


def test_metadata_like_safetensors(native_file, no_meta_file):
    for path in (native_file, no_meta_file):
        with safetensors.safe_open(str(path), framework="np") as ref:
            want = ref.metadata()
        with tensorscope.safe_open(str(path), framework="np") as f:
            got = f.metadata()
        assert got == want, path
    with tensorscope.safe_open(str(no_meta_file), framework="np") as f:
        assert f.metadata() is None
    with tensorscope.safe_open(str(native_file), framework="np") as f:
        assert f.metadata() == METADATA


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_get_tensor_like_safetensors(native_file, name):
    with safetensors.safe_open(str(native_file), framework="np") as ref:
        want = ref.get_tensor(name)
    with tensorscope.safe_open(str(native_file), framework="np") as f:
        got = f.get_tensor(name)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype == NATIVE[name].dtype
    assert got.shape == want.shape == NATIVE[name].shape
    assert_same_array(got, want, name)
    assert_same_array(got, NATIVE[name], name + " (original)")


@pytest.mark.parametrize("name", sorted(ML))
def test_get_tensor_float8_written_by_safetensors(all_file, name, tmp_path):
    with tensorscope.safe_open(str(all_file), framework="np") as f:
        got = f.get_tensor(name)
        s = f.get_slice(name)
        stored = s.get_dtype()
    assert got.dtype == ML[name].dtype
    assert_same_array(got.view(np.uint8), ML[name].view(np.uint8), name)
    assert stored == _header_dtypes(all_file)[name]
    assert_matches_cli_export(got, str(all_file), name, stored, tmp_path)


@pytest.mark.parametrize("name", sorted({**NATIVE, **ML}))
def test_get_slice_shape_and_dtype(all_file, name):
    with tensorscope.safe_open(str(all_file), framework="np") as f:
        s = f.get_slice(name)
        shape, dtype = s.get_shape(), s.get_dtype()
    assert isinstance(shape, list) and all(type(d) is int for d in shape)
    assert shape == list({**NATIVE, **ML}[name].shape)
    assert dtype == _header_dtypes(all_file)[name]
    if name in NATIVE:
        with safetensors.safe_open(str(all_file), framework="np") as ref:
            rs = ref.get_slice(name)
            assert shape == rs.get_shape()
            assert dtype == rs.get_dtype()


def candidate_indexes(shape):
    """Index expressions of PYTHON.md (ints, negative ints, slices with positive steps,
    Ellipsis, tuples) that numpy accepts for an array of `shape`."""
    cands = [
        Ellipsis, (), (Ellipsis,),
        0, -1, 1, -2,
        slice(None), slice(1, None), slice(None, 2), slice(None, None, 2), slice(1, None, 3),
        slice(-2, None), slice(-3, -1), slice(0, 1000), slice(3, 1), slice(5, 5), slice(-1000, 2),
        (0, Ellipsis), (Ellipsis, -1), (Ellipsis, slice(None, None, 2)),
        (0, 1), (-1, -1), (slice(None), 0), (slice(None), -1), (slice(None, None, 2), slice(1, None, 2)),
        (-1, slice(None, None, 2)), (slice(1, 3), Ellipsis), (Ellipsis, slice(1, 3)),
        (1, Ellipsis, 0), (0, slice(None), slice(None, None, 3)), (0, 1, 2), (-1, -2, -3),
        (slice(None), slice(None), slice(None, None, 2)), (slice(0, 1), 0, Ellipsis),
        (slice(None, None, 5), Ellipsis, slice(2, None)),
    ]
    probe = np.empty(shape, dtype=np.uint8)
    out = []
    for idx in cands:
        try:
            probe[idx]
        except IndexError:
            continue
        out.append(idx)
    return out


def _check_slices(f, name, full):
    s = f.get_slice(name)
    checked = 0
    for idx in candidate_indexes(full.shape):
        got = s[idx]
        want = full[idx]
        assert isinstance(got, (np.ndarray, np.generic)), f"{name}[{idx!r}] is {type(got)}"
        assert_same_array(np.asarray(got), np.asarray(want), f"{name}[{idx!r}]")
        checked += 1
    return checked


@pytest.mark.parametrize("name", sorted({**NATIVE, **ML}))
def test_slicing_equals_numpy_indexing(all_file, name):
    with tensorscope.safe_open(str(all_file), framework="np") as f:
        full = f.get_tensor(name)
        assert _check_slices(f, name, full) >= 2


@pytest.mark.parametrize("name", ["a_f32", "bf16", "int_u16", "m_f16", "b_bool", "c_c64"])
def test_slicing_like_safetensors(native_file, name):
    """The slices safetensors' own get_slice supports give the same arrays."""
    idxs = [0, -1, slice(1, 3), Ellipsis, (Ellipsis, 1), (slice(None), slice(0, 2)),
            slice(None, None, 2)]
    with safetensors.safe_open(str(native_file), framework="np") as ref, \
            tensorscope.safe_open(str(native_file), framework="np") as f:
        rs, s = ref.get_slice(name), f.get_slice(name)
        for idx in idxs:
            try:
                want = rs[idx]
            except Exception:  # not supported by safetensors: not compared here
                continue
            assert_same_array(np.asarray(s[idx]), np.asarray(want), f"{name}[{idx!r}]")


def test_slice_index_out_of_range_raises(native_file):
    with tensorscope.safe_open(str(native_file), framework="np") as f:
        s = f.get_slice("a_f32")
        for idx in (4, -5, (0, 5), (0, 0, 6), (0, 0, 0, 0)):
            with pytest.raises(Exception):
                s[idx]


# --------------------------------------------------------------------------- load_file


def test_load_file_like_safetensors(native_file):
    want = stnp.load_file(str(native_file))
    got = tensorscope.load_file(str(native_file))
    assert isinstance(got, dict)
    assert set(got) == set(want)
    for k in want:
        assert_same_array(got[k], want[k], k)


def test_load_file_with_float8(all_file):
    got = tensorscope.load_file(str(all_file))
    assert set(got) == set(NATIVE) | set(ML)
    for k, v in {**NATIVE, **ML}.items():
        assert_same_array(got[k], v, k)


# --------------------------------------------------------------------------- usage


def test_usable_without_with(native_file):
    f = tensorscope.safe_open(str(native_file), framework="np")
    assert f.keys() == sorted(NATIVE)
    assert_same_array(f.get_tensor("a_f32"), NATIVE["a_f32"])


def test_framework_numpy_alias(native_file):
    with tensorscope.safe_open(str(native_file), framework="numpy") as f:
        assert_same_array(f.get_tensor("int_i32"), NATIVE["int_i32"])


def test_default_framework(native_file):
    with tensorscope.safe_open(str(native_file)) as f:
        assert f.keys() == sorted(NATIVE)


def test_accepts_pathlib_path(native_file):
    """safetensors' API takes os.PathLike (its test_accept_path); a drop-in does too."""
    with tensorscope.safe_open(Path(native_file), framework="np") as f:
        assert f.keys() == sorted(NATIVE)
    assert set(tensorscope.load_file(Path(native_file))) == set(NATIVE)


# --------------------------------------------------------------------------- safetensors' own numpy tests, mirrored


def test_deserialization_of_reference_bytes(tmp_path):
    """safetensors' test_deserialization: the exact bytes of a 2x2 I32 zeros file."""
    serialized = (
        b'<\x00\x00\x00\x00\x00\x00\x00{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}'
        + b"\x00" * 16
    )
    path = tmp_path / "ref.safetensors"
    path.write_bytes(serialized)
    out = tensorscope.load_file(str(path))
    assert list(out.keys()) == ["test"]
    assert_same_array(out["test"], np.zeros((2, 2), dtype=np.int32))
    data = np.zeros((2, 2), dtype=np.int32)
    data[1, 1] = 1
    path.write_bytes(stnp.save({"test": data}))
    assert_same_array(tensorscope.load_file(str(path))["test"], data)


def test_numpy_example_roundtrip(tmp_path):
    """safetensors' README numpy example: save_file then load_file."""
    tensors = {"a": np.zeros((2, 2)), "b": np.zeros((2, 3), dtype=np.uint8)}
    path = tmp_path / "out.safetensors"
    stnp.save_file(tensors, str(path))
    loaded = tensorscope.load_file(str(path))
    assert loaded.keys() == tensors.keys()
    for k, v in tensors.items():
        assert np.allclose(loaded[k], v)
        assert_same_array(loaded[k], v, k)


def test_zero_sized(tmp_path):
    data = {"test": np.zeros((2, 0), dtype=np.float32), "test2": np.zeros((0,), dtype=np.int16)}
    path = tmp_path / "zero.safetensors"
    stnp.save_file(data, str(path))
    reloaded = tensorscope.load_file(str(path))
    for k, v in data.items():
        assert reloaded[k].shape == v.shape and reloaded[k].size == 0
        assert_same_array(reloaded[k], v, k)
    with tensorscope.safe_open(str(path), framework="np") as f:
        assert f.get_slice("test").get_shape() == [2, 0]
        assert f.get_slice("test")[:, :].shape == (2, 0)


def test_zero_dim_tensor(tmp_path):
    data = {"test": np.array(1.5), "i": np.array(7, dtype=np.uint8)}
    path = tmp_path / "scalar.safetensors"
    stnp.save_file(data, str(path))
    with tensorscope.safe_open(str(path), framework="np") as f:
        t = f.get_tensor("test")
        assert isinstance(t, np.ndarray) and t.ndim == 0 and t.shape == ()
        assert t.dtype == np.float64 and t[()] == 1.5
        assert f.get_slice("test").get_shape() == []
        assert np.asarray(f.get_slice("test")[...]).shape == ()
    assert_same_array(tensorscope.load_file(str(path))["i"], data["i"])


def test_order_invariant(tmp_path):
    data = np.arange(4, dtype=np.int32).reshape(2, 2)
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    stnp.save_file({"test1": data, "test2": data + 1}, str(a))
    stnp.save_file({"test2": data + 1, "test1": data}, str(b))
    assert a.read_bytes() == b.read_bytes()
    for p in (a, b):
        with tensorscope.safe_open(str(p), framework="np") as f:
            assert f.keys() == ["test1", "test2"]
            assert_same_array(f.get_tensor("test2"), data + 1)


def test_big_endian_input_saved_little_endian(tmp_path):
    """safetensors' numpy writer byte-swaps big-endian arrays; the values round-trip."""
    data = np.arange(12, dtype=">u4").reshape(3, 4) * 1000003
    path = tmp_path / "be.safetensors"
    stnp.save_file({"x": data}, str(path))
    got = tensorscope.load_file(str(path))["x"]
    assert got.dtype == np.dtype("<u4")
    assert np.array_equal(got, data)


def test_no_tensors(tmp_path):
    path = tmp_path / "empty.safetensors"
    stnp.save_file({}, str(path))
    with tensorscope.safe_open(str(path), framework="np") as f:
        assert f.keys() == []
        assert f.metadata() is None
    assert tensorscope.load_file(str(path)) == {}
    path2 = tmp_path / "meta_only.safetensors"
    stnp.save_file({}, str(path2), metadata={"a": "b"})
    with tensorscope.safe_open(str(path2), framework="np") as f:
        assert f.keys() == []
        assert f.metadata() == {"a": "b"}


def test_many_tensors_load_file(tmp_path):
    rng = np.random.default_rng(3)
    data = {f"layer.{i}.weight": rng.standard_normal((i % 5 + 1, 3)).astype(np.float32)
            for i in range(200)}
    path = tmp_path / "many.safetensors"
    stnp.save_file(data, str(path))
    got = tensorscope.load_file(str(path))
    want = stnp.load_file(str(path))
    assert set(got) == set(want) == set(data)
    for k in data:
        assert_same_array(got[k], want[k], k)
    with tensorscope.safe_open(str(path), framework="np") as f:
        assert f.keys() == sorted(data)


# --------------------------------------------------------------------------- every dtype row


def _table_tensors():
    """Every code of every small float, and BF16's whole code space, by dtype name."""
    out = {}
    for name in ("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0"):
        out[name] = np.arange(256, dtype=np.uint8).reshape(16, 16).view(DTYPES[name])
    for name in ("F6_E2M3", "F6_E3M2"):
        codes = np.concatenate([np.arange(64), np.arange(63, -1, -1)]).astype(np.uint8)
        out[name] = codes.reshape(2, 8, 8).view(DTYPES[name])
    out["F4"] = np.concatenate([np.arange(16), np.arange(15, -1, -1), [3, 9]]).astype(
        np.uint8).reshape(2, 17).view(DTYPES["F4"])
    out["BF16"] = np.arange(65536, dtype=np.uint16).reshape(256, 256).view(DTYPES["BF16"])
    # Odd shapes and offsets: a 1-D F6 of 12 codes after a 1-byte F4 pair.
    out["F4_pair"] = np.array([5, 12], dtype=np.uint8).view(DTYPES["F4"])
    out["F6_odd"] = np.array([63, 0, 1, 62, 33, 31, 5, 7, 11, 13, 17, 19], dtype=np.uint8).view(
        DTYPES["F6_E2M3"])
    out["F6_scalar_row"] = np.array([[1, 2, 3, 4]], dtype=np.uint8).view(DTYPES["F6_E3M2"])
    out["F4_empty"] = np.zeros((0, 4), dtype=np.uint8).view(DTYPES["F4"])
    return out


TABLE = _table_tensors()


@pytest.fixture(scope="module")
def table_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("table") / "table.safetensors"
    write_safetensors(path, {f"t.{k}": v for k, v in TABLE.items()}, metadata={"table": "1"})
    return path


@pytest.mark.parametrize("key", sorted(TABLE))
def test_dtype_table_row(table_file, key, tmp_path):
    name = f"t.{key}"
    orig = TABLE[key]
    stored = st_dtype_name(orig.dtype)
    with tensorscope.safe_open(str(table_file), framework="np") as f:
        arr = f.get_tensor(name)
        s = f.get_slice(name)
        assert s.get_dtype() == stored
        assert s.get_shape() == list(orig.shape)
        # The table's dtype, one element per item, the very codes that were written.
        assert arr.dtype == DTYPES[stored], f"{stored}: {arr.dtype!r}"
        assert arr.shape == orig.shape
        assert arr.dtype.itemsize == orig.dtype.itemsize
        assert_same_array(arr.view(RAW_CODES[stored]), orig.view(RAW_CODES[stored]), name)
        # ... equal to the CLI's codes (--raw) and values (float32).
        if orig.size:
            assert_matches_cli_export(arr, str(table_file), name, stored, tmp_path)
        # Slicing sub-byte and 8/16-bit floats.
        _check_slices(f, name, arr)
    # ml_dtypes gives the same values as the CLI's float32 export.
    if orig.size:
        values = cli_export(str(table_file), name, tmp_path)
        assert_floats_equal(orig.astype(np.float32), values, name)


def test_dtype_table_load_file(table_file):
    got = tensorscope.load_file(str(table_file))
    assert set(got) == {f"t.{k}" for k in TABLE}
    for k, v in TABLE.items():
        a = got[f"t.{k}"]
        assert a.dtype == v.dtype
        stored = st_dtype_name(v.dtype)
        assert_same_array(a.view(RAW_CODES[stored]), v.view(RAW_CODES[stored]), k)
