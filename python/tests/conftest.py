"""Shared helpers for the tests of the `tensorscope` Python module.

Oracles:
- safetensors files: the `safetensors` package itself (0.8.0), reading the same file;
- every other container: the `tensorscope` command (`export`, `info --json`, ...), which
  the module must agree with bit for bit (PYTHON.md), and the per-tensor sha256 of the
  fixtures' MANIFEST.json files, written by the framework's own library.

The CLI is the one installed beside the interpreter (the wheel ships both), else the one
on PATH; `TENSORSCOPE_CLI` overrides both.
"""

import functools
import hashlib
import itertools
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.dont_write_bytecode = True

REPO = Path(os.environ.get("TENSORSCOPE_REPO") or Path(__file__).resolve().parents[2])
DATA = REPO / "tests" / "data"

MANIFEST_KINDS = ("numpy", "pytorch", "gguf", "onnx", "tensorflow", "keras", "hdf5", "flax")


# --------------------------------------------------------------------------- the CLI


def _find_cli():
    env = os.environ.get("TENSORSCOPE_CLI")
    if env:
        return env
    exe = "tensorscope.exe" if os.name == "nt" else "tensorscope"
    beside = Path(sys.executable).parent / exe
    if beside.is_file():
        return str(beside)
    return shutil.which("tensorscope")


CLI = _find_cli()


def cli_path():
    if CLI is None:
        pytest.fail(
            "the `tensorscope` command is neither beside sys.executable nor on PATH "
            "(the wheel installs it with the module)"
        )
    return CLI


def run_cli(*args, cwd=None):
    """Runs the CLI; returns the CompletedProcess (text mode)."""
    return subprocess.run(
        [cli_path(), *[str(a) for a in args]],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def cli_json(*args, cwd=None, codes=(0, 1)):
    """The one JSON document a `--json` verb prints; its exit code must be in `codes`."""
    proc = run_cli(*args, cwd=cwd)
    assert proc.returncode in codes, (
        f"tensorscope {' '.join(map(str, args))} exited {proc.returncode}\n"
        f"stdout: {proc.stdout[:2000]}\nstderr: {proc.stderr[:2000]}"
    )
    return json.loads(proc.stdout)


@functools.lru_cache(maxsize=None)
def cli_info(path):
    """`tensorscope info --json PATH` (exit 0 or 2: an error document)."""
    return cli_json("info", "--json", path, codes=(0, 2))


_export_counter = itertools.count()


def cli_export(path, name, out_dir, raw=False):
    """np.load of `tensorscope export PATH NAME -o OUT.npy [--raw]`."""
    out = Path(out_dir) / f"export_{next(_export_counter)}{'_raw' if raw else ''}.npy"
    args = ["export", path, name, "-o", out]
    if raw:
        args.append("--raw")
    proc = run_cli(*args)
    assert proc.returncode == 0, (
        f"tensorscope export {path} {name!r} failed ({proc.returncode}): {proc.stderr}"
    )
    arr = np.load(out, allow_pickle=False)
    out.unlink()
    return arr


def cli_export_many(path, requests, out_dir, workers=4):
    """{(name, raw): array} of many exports of one file, run a few at a time."""
    from concurrent.futures import ThreadPoolExecutor

    requests = list(dict.fromkeys(requests))
    with ThreadPoolExecutor(max_workers=workers) as ex:
        arrays = list(ex.map(lambda r: cli_export(path, r[0], out_dir, raw=r[1]), requests))
    return dict(zip(requests, arrays))


def export_requests(name, stored):
    """The exports `assert_matches_cli_export` compares a tensor of dtype `stored` with."""
    return [(name, True), (name, False)] if stored in RAW_CODES else [(name, False)]


def cli_has_verb(verb):
    """True when `tensorscope --help` lists `verb` among its commands."""
    proc = run_cli("--help")
    lines = proc.stdout.split("Commands:", 1)[-1].split("\n\n", 1)[0].splitlines()
    return any(line.split()[:1] == [verb] for line in lines)


# --------------------------------------------------------------------------- dtypes

DTYPES = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "I8": np.dtype(np.int8),
    "I16": np.dtype(np.int16),
    "I32": np.dtype(np.int32),
    "I64": np.dtype(np.int64),
    "U8": np.dtype(np.uint8),
    "U16": np.dtype(np.uint16),
    "U32": np.dtype(np.uint32),
    "U64": np.dtype(np.uint64),
    "BOOL": np.dtype(np.bool_),
    "C64": np.dtype(np.complex64),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "F8_E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
    "F6_E2M3": np.dtype(ml_dtypes.float6_e2m3fn),
    "F6_E3M2": np.dtype(ml_dtypes.float6_e3m2fn),
    "F4": np.dtype(ml_dtypes.float4_e2m1fn),
}

# The dtypes `export --raw` writes as codes, and the integer type of those codes.
RAW_CODES = {
    "BF16": np.dtype(np.uint16),
    "F8_E4M3": np.dtype(np.uint8),
    "F8_E5M2": np.dtype(np.uint8),
    "F8_E4M3FNUZ": np.dtype(np.uint8),
    "F8_E5M2FNUZ": np.dtype(np.uint8),
    "F8_E8M0": np.dtype(np.uint8),
    "F6_E2M3": np.dtype(np.uint8),
    "F6_E3M2": np.dtype(np.uint8),
    "F4": np.dtype(np.uint8),
}

BITS = {"F6_E2M3": 6, "F6_E3M2": 6, "F4": 4}


def expected_dtype(stored):
    """The numpy dtype PYTHON.md's table gives a stored dtype (GGUF block types: float32)."""
    return DTYPES.get(stored, np.dtype(np.float32))


def st_dtype_name(dtype):
    """The safetensors dtype string of a numpy dtype of the table."""
    dtype = np.dtype(dtype)
    for name, dt in DTYPES.items():
        if dt == dtype:
            return name
    raise KeyError(dtype)


# --------------------------------------------------------------------------- comparisons


def sha256_of(arr):
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def is_native(dtype):
    return dtype.byteorder in ("=", "|") or (
        dtype.byteorder == ("<" if sys.byteorder == "little" else ">")
    )


def assert_same_array(actual, expected, what=""):
    """Same dtype, shape and bytes (C order)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype == np.bool_:
        # BOOL: any non-zero byte is true; compare the truth values.
        assert np.array_equal(actual, expected), f"{what}: values differ"
        return
    a = np.ascontiguousarray(actual).tobytes()
    e = np.ascontiguousarray(expected).tobytes()
    if a != e:
        av = np.ascontiguousarray(actual).reshape(-1)
        ev = np.ascontiguousarray(expected).reshape(-1)
        bad = [i for i in range(av.size) if av[i : i + 1].tobytes() != ev[i : i + 1].tobytes()]
        pytest.fail(
            f"{what}: bytes differ at {len(bad)} of {av.size} elements, first {bad[:5]}: "
            f"{av[bad[:5]]!r} != {ev[bad[:5]]!r}"
        )


def assert_floats_equal(actual, expected, what=""):
    """Float arrays equal as values: NaN matches NaN (any payload), zeros by sign."""
    with np.errstate(invalid="ignore"):
        actual = np.asarray(actual, dtype=np.float64)
        expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    an = np.isnan(actual)
    en = np.isnan(expected)
    assert np.array_equal(an, en), f"{what}: NaN positions differ"
    assert np.array_equal(actual[~an], expected[~en]), f"{what}: values differ"
    assert np.array_equal(np.signbit(actual[~an]), np.signbit(expected[~en])), (
        f"{what}: signs of zeros differ"
    )


def assert_matches_cli_export(arr, path, name, stored, tmp_dir, exports=None):
    """`arr` (get_tensor of `name`) against the CLI's export of the same tensor.

    Types numpy has: same dtype, shape and bytes as the `.npy` export. BF16/F8/F6/F4:
    the ml_dtypes type of the table whose codes are the `--raw` export's, and whose
    values are the (float32) export's. GGUF block types: float32 equal to the export.
    `exports` may hold the exports already made (`cli_export_many`).
    """

    def export(raw):
        if exports is not None and (name, raw) in exports:
            return exports[(name, raw)]
        return cli_export(path, name, tmp_dir, raw=raw)

    what = f"{path}:{name}"
    arr = np.asarray(arr)
    want = expected_dtype(stored)
    assert arr.dtype == want, f"{what}: dtype {arr.dtype!r}, PYTHON.md says {want!r}"
    assert is_native(arr.dtype), f"{what}: byte order {arr.dtype.byteorder!r} is not native"
    if stored in RAW_CODES:
        raw = export(True)
        assert raw.dtype == RAW_CODES[stored]
        assert_same_array(arr.view(RAW_CODES[stored]), raw, what + " (codes vs export --raw)")
        values = export(False)
        assert values.dtype == np.float32
        assert_floats_equal(arr.astype(np.float32), values, what + " (values vs export)")
    else:
        exported = export(False)
        assert_same_array(arr, exported, what + " (vs export)")


def json_equal(a, b):
    """Equality of parsed JSON values, NaN equal to NaN, ints and floats by value."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def assert_metadata_matches_cli(md, cli_md, what=""):
    """PYTHON.md: a dict[str, str] of the CLI's `metadata`, non-strings as JSON text."""
    assert isinstance(md, dict), f"{what}: metadata() is {type(md).__name__}, not a dict"
    cli_md = cli_md or {}
    assert set(md) == set(cli_md), (
        f"{what}: metadata keys differ: only module {sorted(set(md) - set(cli_md))[:10]}, "
        f"only CLI {sorted(set(cli_md) - set(md))[:10]}"
    )
    for key, value in md.items():
        assert isinstance(key, str) and isinstance(value, str), (
            f"{what}: metadata[{key!r}] = {value!r} is not str -> str"
        )
        expected = cli_md[key]
        if isinstance(expected, str):
            assert value == expected, f"{what}: metadata[{key!r}] {value!r} != {expected!r}"
        else:
            parsed = json.loads(value)
            assert json_equal(parsed, expected), (
                f"{what}: metadata[{key!r}]: json.loads({value[:200]!r}) != {expected!r:.200}"
            )


# --------------------------------------------------------------------------- writing files


def pack_f6(codes):
    """Packs 6-bit codes into the little-endian bit stream (element 0 in the low bits)."""
    codes = np.asarray(codes, dtype=np.uint8).reshape(-1)
    assert codes.size % 4 == 0
    acc = 0
    for i, c in enumerate(codes.tolist()):
        acc |= (c & 0x3F) << (6 * i)
    return acc.to_bytes(codes.size * 6 // 8, "little")


def pack_f4(codes):
    """Packs 4-bit codes two to a byte, element 0 in the low nibble."""
    codes = np.asarray(codes, dtype=np.uint8).reshape(-1)
    assert codes.size % 2 == 0
    return (codes[0::2] & 0xF | ((codes[1::2] & 0xF) << 4)).astype(np.uint8).tobytes()


def encode_tensor(arr):
    """(dtype string, shape, bytes) of an array of a dtype of the table."""
    arr = np.asarray(arr)
    name = st_dtype_name(arr.dtype)
    codes = np.ascontiguousarray(arr)
    if name in ("F6_E2M3", "F6_E3M2"):
        data = pack_f6(codes.view(np.uint8))
    elif name == "F4":
        data = pack_f4(codes.view(np.uint8))
    else:
        data = codes.astype(codes.dtype.newbyteorder("<")).tobytes()
    return name, list(arr.shape), data


def write_safetensors(path, tensors, metadata=None):
    """Writes a safetensors file by hand: tensors in the given order.

    `tensors` maps a name to an array (any dtype of the table, sub-byte ones packed) or
    to a (dtype string, shape, bytes) triple.
    """
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name, value in tensors.items():
        if isinstance(value, tuple):
            dtype, shape, data = value
        else:
            dtype, shape, data = encode_tensor(value)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    return Path(path)


# --------------------------------------------------------------------------- manifests


@functools.lru_cache(maxsize=None)
def manifest(kind):
    with open(DATA / kind / "MANIFEST.json", encoding="utf-8") as f:
        return json.load(f)


def manifest_entries(kind):
    """(relative file, entry) of every file the manifest describes."""
    return [(f["file"], f) for f in manifest(kind)["files"]]


def manifest_tensors(entry):
    return entry.get("tensors", entry.get("arrays")) or []


# --------------------------------------------------------------------------- big file

BIG_ELEMENTS = 64 * 1024 * 1024  # 256 MiB of F32


@pytest.fixture(scope="session")
def big_safetensors(tmp_path_factory):
    """A 256 MiB safetensors file of one F32 tensor `big` (varied values, on disk)."""
    path = tmp_path_factory.mktemp("big") / "big.safetensors"
    rng = np.random.default_rng(1234)
    block_bytes = rng.standard_normal(256 * 1024, dtype=np.float32).tobytes()  # 1 MiB
    header = {"big": {"dtype": "F32", "shape": [BIG_ELEMENTS], "data_offsets": [0, BIG_ELEMENTS * 4]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _ in range(BIG_ELEMENTS * 4 // len(block_bytes)):
            f.write(block_bytes)
    return path


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def mappings_of(path):
    """(start, end) address ranges of /proc/self/maps lines that map `path`."""
    real = os.path.realpath(path)
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == real:
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end))
    return out
