#!/usr/bin/env python3
"""ONNX, TensorFlow, Keras, HDF5 and Flax fixtures for Tensorscope's readers,
written by the real libraries.

One subcommand per library; each writes one folder (cleared first) and its
MANIFEST.json: where the files came from (python, the library versions,
the command, the date) and, per fixture file, the oracle of
../shared/FRAMEWORKS.md: for every tensor the reader must list, its name,
dtype (safetensors name), shape, the sha256 (and, under 4 KB, the hex) of
its bytes in C order little-endian as safetensors stores them (BOOL as 0/1
bytes, BF16/F8 as their bit patterns, C64 as interleaved float32 re, im),
"first" (up to 4 values as JSON numbers; BF16/F8 converted to float with
ml_dtypes; NaN/+-Inf as the strings "nan", "inf", "-inf"; C64 as [re, im])
and its statistics. Every figure is computed from what the framework's own
reader gives back for the written file: onnx.numpy_helper.to_array (external
data loaded), tf.train.load_checkpoint(prefix).get_tensor, h5py Dataset[()],
flax.serialization.msgpack_restore. Each file also lists what must not be
listed (metadata, skipped datasets, strings), and files meant to be refused
carry "refused": true with the expected error kind.

    python scripts/make_framework_fixtures.py onnx        [OUTDIR]  # tests/data/onnx
    python scripts/make_framework_fixtures.py tensorflow  [OUTDIR]  # tests/data/tensorflow
    python scripts/make_framework_fixtures.py keras       [OUTDIR]  # tests/data/keras
    python scripts/make_framework_fixtures.py hdf5        [OUTDIR]  # tests/data/hdf5
    python scripts/make_framework_fixtures.py flax        [OUTDIR]  # tests/data/flax

Each subcommand runs in the venv that has its library (versions conflict, so
there are three; made outside the repository):

    python3 -m venv /work/venvs/onnx
    /work/venvs/onnx/bin/pip install onnx==1.23.2 numpy==2.4.6 ml_dtypes==0.7.0
    /work/venvs/onnx/bin/python scripts/make_framework_fixtures.py onnx

    python3 -m venv /work/venvs/tf    # tensorflow, keras and hdf5
    /work/venvs/tf/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1 h5py==3.14.0 \\
        numpy==2.4.6 ml_dtypes==0.7.0
    /work/venvs/tf/bin/python scripts/make_framework_fixtures.py tensorflow
    /work/venvs/tf/bin/python scripts/make_framework_fixtures.py keras
    /work/venvs/tf/bin/python scripts/make_framework_fixtures.py hdf5

    python3 -m venv /work/venvs/flax
    /work/venvs/flax/bin/pip install "jax[cpu]==0.10.2" flax==0.12.8 optax==0.2.8 \\
        numpy==2.4.6 ml_dtypes==0.7.0
    /work/venvs/flax/bin/python scripts/make_framework_fixtures.py flax

Paths are relative to this file, so it runs from anywhere; FIXTURE_DATE
overrides the date written in the manifests. The Rust tests read the
committed files and manifests: they never need Python.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import pathlib
import platform
import shutil
import struct
import sys
import zipfile
from fractions import Fraction

import numpy as np
import ml_dtypes

SCRIPT = "scripts/make_framework_fixtures.py"
ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
HEX_LIMIT = 4096  # tensors of fewer bytes carry their bytes as hex
EXPECTED = {  # the versions the committed fixtures were made with
    "numpy": "2.4.6", "ml_dtypes": "0.7.0", "onnx": "1.23.2", "tensorflow": "2.21.0",
    "keras": "3.15.1", "h5py": "3.14.0", "flax": "0.12.8", "jax": "0.10.2",
}

# numpy dtype name -> safetensors dtype name (FRAMEWORKS.md's table).
DTYPE_NAMES = {
    "float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ",
    "float8_e8m0fnu": "F8_E8M0",
    "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
    "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "bool": "BOOL", "complex64": "C64",
}
FLOATS = {"F32", "F64", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
          "F8_E8M0"}
ML = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
      "float8_e5m2": ml_dtypes.float8_e5m2, "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
      "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu}

CONVENTIONS = {
    "file": "path relative to this folder: the file a reader opens (a TensorBundle by its .index)",
    "tensors": "every tensor the reader must list (FRAMEWORKS.md naming), and nothing else; "
               "order: the order the framework's reader gives (ONNX: initializers then "
               "Constant nodes in graph order; TF: sorted keys; HDF5: depth-first ascending "
               "name order; Flax: msgpack order). Compare as a set unless a test says otherwise",
    "dtype": "safetensors dtype name; shape [] for 0-d",
    "bytes": "sha256 / hex: the tensor as the framework's own reader returns it, in C order, "
             "little-endian (big-endian HDF5 types byte-swapped), BOOL as 0/1 bytes, BF16/F8 as "
             f"their bit patterns, C64 as interleaved float32 re, im; hex only under {HEX_LIMIT} "
             "bytes",
    "first": "up to 4 leading values in C order as JSON numbers (integers exact, BOOL 0/1, "
             "BF16/F8 converted to float exactly, C64 as [re, im]); non-finite values as the "
             "strings \"nan\", \"inf\", \"-inf\"",
    "stats": "over the finite values; count, nan, pos_inf, neg_inf, zeros exact; min/max "
             "exact (integers as JSON integers, -0 as 0, BOOL as 0/1, BF16/F8 as float); mean, "
             "std (population) and abs_mean exact, rounded once to float64; C64: figures of |z| "
             "in float64 from the float32 parts (+Inf when a part is infinite), real and imag "
             "of each part",
    "not_listed": "things in the file that are not tensors: each with its name/path and why "
                  "(metadata, skipped type, subgraph, ...)",
    "refused": "true: every verb must refuse the file (FRAMEWORKS.md); error_kind is the kind "
               "FRAMEWORKS.md names, or null when it names none; message_any: the message "
               "contains one of these (case-insensitive)",
}


# ------------------------------------------------------------ common part


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def st_dtype(a: np.ndarray) -> str:
    return DTYPE_NAMES[np.dtype(a.dtype).name]


def c_le_bytes(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()


def jnum(v: float):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def first_values(a: np.ndarray) -> list:
    flat = np.ascontiguousarray(a).reshape(-1)[:4]
    name = st_dtype(a)
    if name == "BOOL":
        return [int(v) for v in flat.tolist()]
    if name in FLOATS:
        return [jnum(float(v)) for v in flat.astype(np.float64).tolist()]
    if name == "C64":
        return [[jnum(float(z.real)), jnum(float(z.imag))] for z in flat.tolist()]
    return [int(v) for v in flat.tolist()]


def exact_sqrt(x: Fraction) -> float:
    """sqrt of a non-negative Fraction, correct well beyond float64 before
    the final rounding (no float64 overflow on the way)."""
    p, q = x.numerator, x.denominator
    if p == 0:
        return 0.0
    e = p.bit_length() - q.bit_length()
    k = (240 - e) // 2
    if k >= 0:
        n = math.isqrt((p << (2 * k)) // q)
        return float(Fraction(n, 1 << k))
    n = math.isqrt(p // (q << (-2 * k)))
    return float(Fraction(n << (-k)))


def moments(values: list) -> dict:
    if not values:
        return {"mean": None, "std": None, "abs_mean": None}
    fr = [Fraction(v) for v in values]
    n = len(fr)
    mean = sum(fr) / n
    var = sum((v - mean) ** 2 for v in fr) / n
    abs_mean = sum(abs(v) for v in fr) / n
    return {"mean": float(mean), "std": exact_sqrt(var), "abs_mean": float(abs_mean)}


def float_stats(x: list) -> dict:
    finite = [v for v in x if math.isfinite(v)]
    out = {
        "count": len(x),
        "nan": sum(1 for v in x if math.isnan(v)),
        "pos_inf": sum(1 for v in x if v == math.inf),
        "neg_inf": sum(1 for v in x if v == -math.inf),
        "zeros": sum(1 for v in x if v == 0),
        "min": (min(finite) + 0.0) if finite else None,  # -0 is reported as 0
        "max": (max(finite) + 0.0) if finite else None,
    }
    out.update(moments(finite))
    return out


def int_stats(vals: list) -> dict:
    out = {
        "count": len(vals), "nan": 0, "pos_inf": 0, "neg_inf": 0,
        "zeros": sum(1 for v in vals if v == 0),
        "min": min(vals) if vals else None,
        "max": max(vals) if vals else None,
    }
    out.update(moments(vals))
    return out


def magnitude(z: np.ndarray) -> list:
    re = z.real.astype(np.float64)
    im = z.imag.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.sqrt(re * re + im * im)
    return np.where(np.isinf(re) | np.isinf(im), np.inf, mag).tolist()


def stats(a: np.ndarray) -> dict:
    flat = np.ascontiguousarray(a).reshape(-1)
    name = st_dtype(a)
    if name == "BOOL":
        return int_stats([int(v) for v in flat.tolist()])
    if name in FLOATS:
        return float_stats(flat.astype(np.float64).tolist())  # exact for every float dtype
    if name == "C64":
        z = flat.astype(np.complex64)
        out = float_stats(magnitude(z))
        out["real"] = float_stats(z.real.astype(np.float64).tolist())
        out["imag"] = float_stats(z.imag.astype(np.float64).tolist())
        return out
    vals = [int(v) for v in flat.tolist()]
    return int_stats(vals)


def tensor_entry(name: str, a: np.ndarray, **extra) -> dict:
    a = np.asarray(a)
    raw = c_le_bytes(a)
    assert len(raw) == a.size * a.dtype.itemsize
    e = {
        "name": name,
        "dtype": st_dtype(a),
        "shape": [int(d) for d in a.shape],
        "numel": int(a.size),
        "nbytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "first": first_values(a),
    }
    if len(raw) < HEX_LIMIT:
        e["hex"] = raw.hex()
    e["stats"] = stats(a)
    e.update(extra)
    return e


def file_facts(path: pathlib.Path) -> dict:
    data = path.read_bytes()
    return {"size": len(data), "sha256_file": hashlib.sha256(data).hexdigest()}


# Values. Floats carry NaN, +-Inf, -0, subnormals and the extremes where the
# type has them; integers their extremes (u64 beyond 2^63 included).

def int_values(dtype: str, n: int, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    extremes = [lo, hi, 0, 1, lo + 1, hi - 1]
    if lo < 0:
        extremes += [-1, -2]
    r = rng(seed)
    span = hi - lo + 1
    rand = [lo + int(r.integers(0, 2**62)) * span // 2**62
            for _ in range(max(0, n - len(extremes)))]
    return np.array((extremes + rand)[:n], dtype=dtype)


def float_values(dtype, n: int, seed: int, specials: bool = True) -> np.ndarray:
    t = np.dtype(dtype)
    fi = ml_dtypes.finfo(t) if t.name in ML else np.finfo(t)
    r = rng(seed)
    head = [0.0, 1.0, -1.5, 0.5]
    if specials:
        head += [float("nan"), float(fi.max), -float(fi.max), float(fi.smallest_subnormal),
                 -float(fi.smallest_normal), -0.0]
        if t.name not in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz",
                          "float8_e8m0fnu"):
            head += [float("inf"), -float("inf")]
    rand = (r.standard_normal(max(0, n - len(head))) * 3.0).tolist()
    return np.array((head + rand)[:n], dtype=np.float64).astype(t)


TRIPLES = [(3, 4), (5, 12), (8, 15), (7, 24), (20, 21), (9, 40), (0, 2), (1, 0)]


def complex_values(n: int, seed: int, specials: bool = True) -> np.ndarray:
    r = rng(seed)
    vals = []
    for i in range(n):
        a, b = TRIPLES[i % len(TRIPLES)]
        scale = 2.0 ** int(r.integers(-6, 7))
        sa = -1.0 if r.integers(0, 2) else 1.0
        sb = -1.0 if r.integers(0, 2) else 1.0
        if i % 2:
            a, b = b, a
        vals.append(complex(sa * a * scale, sb * b * scale))
    if n:
        vals[0] = 0j
    if specials and n >= 4:
        vals[2] = complex(float("nan"), 1.0)
        vals[3] = complex(float("-inf"), 2.0)
    return np.array(vals, dtype=np.complex64)


def bool_values(n: int, seed: int) -> np.ndarray:
    a = rng(seed).integers(0, 2, n).astype(bool)
    if n >= 2:
        a[0], a[1] = False, True
    return a


def sample(dtype: str, shape, seed: int, specials: bool = True) -> np.ndarray:
    """`dtype` a numpy/ml_dtypes name; values of every interesting kind."""
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if dtype == "bool":
        a = bool_values(n, seed)
    elif dtype == "complex64":
        a = complex_values(n, seed, specials)
    elif dtype.startswith(("int", "uint")):
        a = int_values(dtype, n, seed)
    else:
        t = ML.get(dtype, dtype)
        a = float_values(t, n, seed, specials)
    return a.reshape(shape)


def all_bit_patterns(dtype: str) -> np.ndarray:
    """The 256 bit patterns of an 8-bit float, as a 16x16 array."""
    return np.arange(256, dtype=np.uint8).view(ML[dtype]).reshape(16, 16)


def clear(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for p in out.iterdir():
        if p.name == "README.md":
            continue
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def total_size(out: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def write_manifest(out: pathlib.Path, sub: str, libraries: dict, files: list,
                   conventions: dict | None = None, notes: list | None = None) -> None:
    for lib, ver in libraries.items():
        want = EXPECTED.get(lib)
        if want and not ver.startswith(want):
            print(f"warning: {lib} {ver}, the committed fixtures used {want}", file=sys.stderr)
    conv = dict(CONVENTIONS)
    conv.update(conventions or {})
    manifest = {
        "generator": {
            "script": SCRIPT,
            "command": f"python {SCRIPT} {sub}",
            "python": platform.python_version(),
            "libraries": libraries,
            "date": os.environ.get("FIXTURE_DATE", datetime.date.today().isoformat()),
            "platform": f"{platform.system()} {platform.machine()}",
        },
        "conventions": conv,
        "notes": notes or [],
        "total_bytes": 0,
        "files": files,
    }
    (out / "MANIFEST.json").write_text("{}")
    manifest["total_bytes"] = total_size(out)
    text = json.dumps(manifest, indent=1, allow_nan=False, ensure_ascii=True) + "\n"
    (out / "MANIFEST.json").write_text(text)
    ntensors = sum(len(f.get("tensors", [])) for f in files)
    print(f"{sub}: {len(files)} fixtures, {ntensors} tensors, "
          f"{total_size(out)} bytes in {out}")


# ------------------------------------------------------------------ ONNX


def cmd_onnx(out: pathlib.Path) -> None:
    import onnx
    from onnx import TensorProto as TP, helper, numpy_helper

    clear(out)
    files = []
    IR, OPSET = 11, 24  # FLOAT8E8M0 needs IR 11 / opset 24

    # TensorProto type of each numpy/ml_dtypes dtype name.
    TYPES = {
        "float32": TP.FLOAT, "float64": TP.DOUBLE, "float16": TP.FLOAT16,
        "bfloat16": TP.BFLOAT16, "float8_e4m3fn": TP.FLOAT8E4M3FN,
        "float8_e5m2": TP.FLOAT8E5M2, "float8_e4m3fnuz": TP.FLOAT8E4M3FNUZ,
        "float8_e5m2fnuz": TP.FLOAT8E5M2FNUZ, "int8": TP.INT8, "int16": TP.INT16,
        "int32": TP.INT32, "int64": TP.INT64, "uint8": TP.UINT8, "uint16": TP.UINT16,
        "uint32": TP.UINT32, "uint64": TP.UINT64, "bool": TP.BOOL, "complex64": TP.COMPLEX64,
    }
    has_e8m0 = hasattr(TP, "FLOAT8E8M0")
    if has_e8m0:
        TYPES["float8_e8m0fnu"] = TP.FLOAT8E8M0

    def storage_of(t) -> str:
        if t.data_location == TP.EXTERNAL:
            return "external"
        if t.HasField("raw_data"):
            return "raw_data"
        return helper.tensor_dtype_to_field(t.data_type)

    def raw_tensor(name: str, a: np.ndarray):
        t = numpy_helper.from_array(a, name)
        assert t.data_type == TYPES[np.dtype(a.dtype).name], (name, t.data_type)
        assert t.HasField("raw_data")
        return t

    def typed_tensor(name: str, dtype: str, shape, vals):
        """make_tensor(raw=False): the typed fields (float_data, double_data,
        int32_data (also the bit patterns of F16/BF16/F8), int64_data,
        uint64_data)."""
        if isinstance(vals, np.ndarray):
            vals = vals.reshape(-1)
        t = helper.make_tensor(name, TYPES[dtype], list(shape), vals, raw=False)
        assert not t.HasField("raw_data"), name
        return t

    def model_of(graph, producer="tensorscope-fixtures", extra_opsets=()):
        # The default domain is deliberately not the first opset import.
        opsets = [helper.make_opsetid(d, v) for d, v in extra_opsets]
        opsets.append(helper.make_opsetid("", OPSET))
        return helper.make_model(graph, producer_name=producer,
                                 producer_version=onnx.__version__, ir_version=IR,
                                 opset_imports=opsets)

    def checker(model) -> str:
        try:
            onnx.checker.check_model(model)
            return "ok"
        except Exception as e:  # recorded, informative only
            return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"

    def oracle(path: pathlib.Path) -> tuple[list, dict]:
        """Tensors as onnx reads them: the proto loaded without its external
        data, each tensor through numpy_helper.to_array(base_dir=model folder)."""
        m = onnx.load(str(path), load_external_data=False)
        base = str(path.parent)
        tensors = []

        def one(name, t, origin):
            a = numpy_helper.to_array(t, base_dir=base)
            extra = {"origin": origin, "onnx_type": TP.DataType.Name(t.data_type),
                     "storage": storage_of(t)}
            if t.data_location == TP.EXTERNAL:
                ext = {kv.key: kv.value for kv in t.external_data}
                extra["external"] = {"location": ext["location"],
                                     "offset": int(ext.get("offset", 0)),
                                     "length": int(ext["length"]),
                                     "keys": [kv.key for kv in t.external_data]}
                if t.name != name:
                    extra["proto_name"] = t.name
            elif t.name != name:
                extra["proto_name"] = t.name
            tensors.append(tensor_entry(name, a, **extra))

        for t in m.graph.initializer:
            one(t.name, t, "initializer")
        for node in m.graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for at in node.attribute:
                    if at.name == "value" and at.type == onnx.AttributeProto.TENSOR:
                        one(node.output[0], at.t, "Constant")
        opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
        meta = {"ir_version": m.ir_version, "opset": opset, "producer": m.producer_name}
        return tensors, meta

    def add(file: str, model, note: str, not_listed=(), save=None, data_files=()):
        path = out / file
        path.parent.mkdir(parents=True, exist_ok=True)
        check = checker(model)
        if save is None:
            onnx.save_model(model, str(path))
        else:
            save(path)
        tensors, meta = oracle(path)
        names = [t["name"] for t in tensors]
        assert len(names) == len(set(names)), names
        entry = {"file": file, "note": note, "refused": False, "onnx": meta,
                 "checker": check, **file_facts(path)}
        if data_files:
            entry["data_files"] = {d: file_facts(out / d) for d in data_files}
        entry["tensors"] = tensors
        entry["not_listed"] = list(not_listed)
        files.append(entry)

    def add_refused(file: str, model, note: str, kind, message_any: list):
        path = out / file
        onnx.save_model(model, str(path))
        files.append({"file": file, "note": note, "refused": True, "error_kind": kind,
                      "message_any": message_any, "checker": checker(model),
                      **file_facts(path)})

    # ---- dtypes.onnx: every dtype both as raw_data and through the typed field.
    inits = []
    shapes = {"float32": (3, 4), "float64": (2, 3), "float16": (12,), "bfloat16": (2, 6),
              "int8": (10,), "int16": (2, 5), "int32": (9,), "int64": (3, 3),
              "uint8": (11,), "uint16": (10,), "uint32": (8,), "uint64": (2, 4),
              "bool": (2, 5), "complex64": (6,)}
    seed = 1000
    for dt in TYPES:
        seed += 1
        if dt.startswith("float8"):
            # raw: all 256 bit patterns (NaNs, infinities, subnormals, -0 included).
            inits.append(raw_tensor(f"raw_{dt}", all_bit_patterns(dt)))
            if dt == "float8_e8m0fnu":
                vals = [1.0, 2.0, 0.5, 2.0**-127, 2.0**127, 0.25, 1024.0, float("nan")]
            else:
                fi = ml_dtypes.finfo(ML[dt])
                vals = [0.0, 1.0, -1.5, 0.125, float(fi.max), -float(fi.max),
                        float(fi.smallest_subnormal), float("nan"), -3.0, 0.0625]
            inits.append(typed_tensor(f"typed_{dt}", dt, (len(vals),), vals))
            continue
        shape = shapes[dt]
        a = sample(dt, shape, seed)
        inits.append(raw_tensor(f"raw_{dt}", a))
        b = sample(dt, shape, seed + 500)
        if dt == "bfloat16":
            b = b.astype(np.float32)  # make_tensor converts to bfloat16 itself
        inits.append(typed_tensor(f"typed_{dt}", dt, shape, b))
    inits += [
        typed_tensor("scalar_f64_typed", "float64", (), [-2.75]),
        raw_tensor("scalar_i32_raw", np.array(-123456, dtype=np.int32)),
        raw_tensor("empty_f32_raw", np.zeros((0, 3), dtype=np.float32)),
        typed_tensor("empty_i64_typed", "int64", (0,), []),
        raw_tensor("layer.0/weight:0", sample("float32", (2, 2), 1100)),  # punctuation
    ]
    const_value = numpy_helper.from_array(sample("float32", (2, 3), 1200, specials=False),
                                          "internal_name_of_constant_tensor")
    nodes = [
        helper.make_node("Constant", [], ["const_value"], value=const_value,
                         name="Constant_tensor"),
        helper.make_node("Constant", [], ["const_value_float"], value_float=2.5,
                         name="Constant_float"),
        helper.make_node("Mul", ["X", "const_value"], ["t0"], name="Mul_0"),
        helper.make_node("Mul", ["t0", "const_value_float"], ["Y"], name="Mul_1"),
    ]
    graph = helper.make_graph(
        nodes, "dtypes",
        [helper.make_tensor_value_info("X", TP.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("Y", TP.FLOAT, [2, 3])],
        initializer=inits)
    add("dtypes.onnx", model_of(graph, extra_opsets=[("ai.onnx.ml", 4)]),
        "initializers of every dtype twice: raw_<dtype> through raw_data (F8: all 256 bit "
        "patterns), typed_<dtype> through make_tensor(raw=False) (float_data, double_data, "
        "int32_data incl. F16/BF16/F8 bit patterns and BOOL/I8/U8/I16/U16 values, int64_data, "
        "uint64_data for U32/U64, C64 as float_data pairs); a 0-d and an empty tensor each "
        "way; a Constant node with a `value` tensor (listed under its output name "
        "const_value, its proto name differs) and one with value_float (not listed); "
        "opset_import lists ai.onnx.ml before the default domain",
        not_listed=[{"name": "const_value_float", "why": "Constant with value_float"}])

    # ---- not_listed.onnx: tensors FRAMEWORKS.md says are not listed.
    then_g = helper.make_graph(
        [helper.make_node("Constant", [], ["then_out"],
                          value=numpy_helper.from_array(np.array([1.0, 2.0], np.float32),
                                                        "then_tensor"))],
        "then_branch", [], [helper.make_tensor_value_info("then_out", TP.FLOAT, [2])])
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["else_init"], ["else_out"])],
        "else_branch", [], [helper.make_tensor_value_info("else_out", TP.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array([3.0, 4.0], np.float32), "else_init")])
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "sparse_w"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "sparse_w_indices"), [2, 3])
    sparse_c = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([7.0], np.float32), "sparse_c"),
        numpy_helper.from_array(np.array([2], np.int64), "sparse_c_indices"), [4])
    nodes = [
        helper.make_node("Constant", [], ["c_ints"], value_ints=[1, 2, 3]),
        helper.make_node("Constant", [], ["c_floats"], value_floats=[1.5, 2.5]),
        helper.make_node("Constant", [], ["c_int"], value_int=7),
        helper.make_node("Constant", [], ["c_string"], value_string="hello"),
        helper.make_node("Constant", [], ["c_strings"], value_strings=["a", "b"]),
        helper.make_node("Constant", [], ["c_sparse"], sparse_value=sparse_c),
        helper.make_node("If", ["cond"], ["branch_out"], then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Add", ["branch_out", "w"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes, "not_listed",
        [helper.make_tensor_value_info("cond", TP.BOOL, [])],
        [helper.make_tensor_value_info("Y", TP.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "w")],
        sparse_initializer=[sparse])
    add("not_listed.onnx", model_of(graph),
        "only the initializer w is a tensor: a sparse initializer, Constants with "
        "value_ints/value_floats/value_int/value_string/value_strings/sparse_value, and an "
        "If node whose branches hold a Constant tensor and an initializer are not listed",
        not_listed=[{"name": n, "why": w} for n, w in [
            ("sparse_w", "sparse initializer"), ("c_ints", "Constant value_ints"),
            ("c_floats", "Constant value_floats"), ("c_int", "Constant value_int"),
            ("c_string", "Constant value_string"), ("c_strings", "Constant value_strings"),
            ("c_sparse", "Constant sparse_value"),
            ("then_out", "Constant tensor inside an If subgraph"),
            ("else_init", "initializer of an If subgraph")]])

    # ---- external data: one file, and one file per tensor.
    def ext_graph(prefix: str, seed0: int):
        ts = [
            numpy_helper.from_array(sample("float32", (4, 3), seed0), f"{prefix}weight"),
            numpy_helper.from_array(sample("int64", (5,), seed0 + 1), f"{prefix}ids"),
            numpy_helper.from_array(sample("float16", (3,), seed0 + 2), f"{prefix}half"),
            numpy_helper.from_array(sample("bfloat16", (2, 2), seed0 + 3), f"{prefix}bf16"),
            numpy_helper.from_array(sample("bool", (7,), seed0 + 4), f"{prefix}mask"),
            numpy_helper.from_array(sample("complex64", (3,), seed0 + 5), f"{prefix}phase"),
            numpy_helper.from_array(sample("uint8", (3,), seed0 + 6), f"{prefix}odd"),
            numpy_helper.from_array(np.array(1.25, np.float64), f"{prefix}scalar"),
            numpy_helper.from_array(np.zeros((0,), np.float32), f"{prefix}empty"),
            helper.make_tensor(f"{prefix}typed", TP.FLOAT, [2], [9.0, -9.0]),  # stays inline
        ]
        cval = numpy_helper.from_array(sample("float32", (2,), seed0 + 7, specials=False),
                                       "const_tensor")
        nodes = [helper.make_node("Constant", [], [f"{prefix}const"], value=cval),
                 helper.make_node("Identity", [f"{prefix}const"], ["Y"])]
        return helper.make_graph(nodes, "ext", [],
                                 [helper.make_tensor_value_info("Y", TP.FLOAT, [2])],
                                 initializer=ts)

    def save_ext(one_file: bool, location=None, convert_attribute=False):
        def save(path: pathlib.Path):
            cwd = os.getcwd()
            os.chdir(path.parent)  # onnx checks `location` against the working folder
            try:
                onnx.save_model(model, path.name, save_as_external_data=True,
                                all_tensors_to_one_file=one_file, location=location,
                                size_threshold=0, convert_attribute=convert_attribute)
            finally:
                os.chdir(cwd)
        return save

    model = model_of(ext_graph("", 1300))
    add("external_one.onnx", model,
        "save_model(save_as_external_data=True, all_tensors_to_one_file=True, "
        "location='external_one.onnx_data', size_threshold=0, convert_attribute=True): every "
        "raw tensor (also the Constant's value tensor, and the 0-byte `empty` one) is in "
        "external_one.onnx_data at unaligned offsets, packed in order; `typed` (float_data) "
        "stays inline",
        save=save_ext(True, "external_one.onnx_data", convert_attribute=True),
        data_files=["external_one.onnx_data"])
    (out / "external_many").mkdir()
    model = model_of(ext_graph("", 1400))
    add("external_many/model.onnx", model,
        "save_model(save_as_external_data=True, all_tensors_to_one_file=False, "
        "size_threshold=0): one data file per initializer, named after the tensor, offset 0; "
        "the Constant's value tensor stays inline (convert_attribute=False)",
        save=save_ext(False))
    files[-1]["data_files"] = {p.name: file_facts(p)
                               for p in sorted((out / "external_many").iterdir())
                               if p.name != "model.onnx"}

    # ---- refused: types with no safetensors dtype, anywhere in the main graph.
    def refused_graph(bad, name="bad", as_constant=False):
        good = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "good")
        nodes = [helper.make_node("Identity", ["good"], ["Y"])]
        inits = [good]
        if as_constant:
            nodes.insert(0, helper.make_node("Constant", [], [name], value=bad))
        else:
            inits.append(bad)
        return helper.make_graph(nodes, "refused", [],
                                 [helper.make_tensor_value_info("Y", TP.FLOAT, [2])],
                                 initializer=inits)

    add_refused("refused_int4.onnx",
                model_of(refused_graph(helper.make_tensor("int4_weight", TP.INT4, [5],
                                                          [-8, -1, 0, 3, 7]))),
                "an INT4 initializer (int32_data, packed) beside a good FLOAT one: the whole "
                "model is refused", "UnsupportedDtype", ["int4_weight", "INT4"])
    a4 = np.array([-8, -1, 0, 3, 7, 2], dtype=ml_dtypes.int4)
    add_refused("refused_int4_raw.onnx",
                model_of(refused_graph(helper.make_tensor("int4_raw", TP.INT4, [6], a4,
                                                          raw=True))),
                "an INT4 initializer in raw_data (two per byte)", "UnsupportedDtype",
                ["int4_raw", "INT4"])
    add_refused("refused_uint4_constant.onnx",
                model_of(refused_graph(helper.make_tensor("u4", TP.UINT4, [3], [1, 2, 15]),
                                       name="uint4_const", as_constant=True)),
                "a main-graph Constant whose value tensor is UINT4", "UnsupportedDtype",
                ["uint4_const", "UINT4", "u4"])
    add_refused("refused_float4e2m1.onnx",
                model_of(refused_graph(helper.make_tensor("fp4", TP.FLOAT4E2M1, [4],
                                                          [0.5, 1.0, -6.0, 0.0]))),
                "a FLOAT4E2M1 initializer", "UnsupportedDtype", ["fp4", "FLOAT4E2M1"])
    add_refused("refused_complex128.onnx",
                model_of(refused_graph(numpy_helper.from_array(
                    np.array([1 + 2j, 3 - 4j], np.complex128), "c128"))),
                "a COMPLEX128 initializer (raw_data)", "UnsupportedDtype",
                ["c128", "COMPLEX128"])
    add_refused("refused_string.onnx",
                model_of(refused_graph(helper.make_tensor("labels", TP.STRING, [2],
                                                          [b"cat", b"dog"]))),
                "a STRING initializer (string_data)", "UnsupportedDtype",
                ["labels", "STRING"])
    dup = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["Y"])], "dup", [],
        [helper.make_tensor_value_info("Y", TP.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w"),
                     numpy_helper.from_array(np.array([3.0, 4.0], np.float32), "w")])
    add_refused("refused_duplicate_name.onnx", model_of(dup),
                "two initializers named w (FRAMEWORKS.md: two tensors of one name are "
                "refused)", None, ["w", "duplicate"])

    write_manifest(out, "onnx", {
        "onnx": onnx.__version__, "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__,
        "protobuf": __import__("google.protobuf").protobuf.__version__},
        files,
        conventions={
            "onnx": "ir_version, opset (the default domain's version) and producer "
                    "(producer_name) as info --json must report them",
            "origin/storage": "initializer or Constant; where the bytes are: raw_data, "
                              "external, or the typed field make_tensor used",
            "external": "the tensor's external_data keys as written by onnx",
            "checker": "onnx.checker.check_model's verdict on the model (informative)"},
        notes=[f"FLOAT8E8M0 available in this onnx: {has_e8m0}",
               "onnx.save_model writes external tensors back to back with no alignment "
               "(offsets are arbitrary), the 0-byte tensor too (offset = end, length 0)",
               "make_tensor(raw=False) stores F16/BF16 bit patterns in int32_data, F8 "
               "(after a saturating cast) likewise, BOOL as 0/1 in int32_data, UINT32/UINT64 "
               "in uint64_data, COMPLEX64 as (re, im) pairs in float_data"])


# ------------------------------------------------------------ TensorFlow


MASK_DELTA = 0xA282EAD8
_CRC32C_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + MASK_DELTA) & 0xFFFFFFFF


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def read_table(path: pathlib.Path) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a TensorBundle .index (a LevelDB-style table),
    every block's masked CRC-32C checked."""
    data = path.read_bytes()
    assert data[-8:] == struct.pack("<Q", 0xDB4775248B80FB57), "magic"
    foot = data[-48:]
    _meta_off, p = varint(foot, 0)
    _meta_size, p = varint(foot, p)
    idx_off, p = varint(foot, p)
    idx_size, p = varint(foot, p)

    def block(off: int, size: int) -> list:
        body = data[off:off + size]
        btype = data[off + size]
        assert btype == 0, "compressed block"
        (crc,) = struct.unpack("<I", data[off + size + 1:off + size + 5])
        assert crc == masked_crc(body + bytes([btype])), "block crc"
        (nrest,) = struct.unpack("<I", body[-4:])
        end = len(body) - 4 - 4 * nrest
        pos, key, out = 0, b"", []
        while pos < end:
            shared, pos = varint(body, pos)
            non_shared, pos = varint(body, pos)
            vlen, pos = varint(body, pos)
            key = key[:shared] + body[pos:pos + non_shared]
            pos += non_shared
            out.append((key, body[pos:pos + vlen]))
            pos += vlen
        return out

    entries = []
    for _k, handle in block(idx_off, idx_size):
        off, p = varint(handle, 0)
        size, p = varint(handle, p)
        entries.extend(block(off, size))
    return entries


def string_crc(blob: bytes, shape: list) -> int:
    """The masked CRC-32C TensorFlow stores for a DT_STRING entry: its data
    is n varint64 lengths, a 4-byte masked CRC of the lengths, then the
    bytes; the CRC runs over each length as a fixed 4-byte little-endian
    uint32 (8-byte uint64 above 2^32-1; not as its varint), the 4 checksum
    bytes, then the bytes."""
    n = math.prod(shape)
    pos, lengths = 0, []
    for _ in range(n):
        v, pos = varint(blob, pos)
        lengths.append(v)
    crc_input = b"".join(struct.pack("<I" if v <= 0xFFFFFFFF else "<Q", v) for v in lengths)
    (len_crc,) = struct.unpack("<I", blob[pos:pos + 4])
    assert len_crc == masked_crc(crc_input)
    assert len(blob) == pos + 4 + sum(lengths)
    return masked_crc(crc_input + blob[pos:])


def ordered_num_increasing(v: int) -> bytes:
    n = (v.bit_length() + 7) // 8
    return bytes([n]) + v.to_bytes(n, "big") if n else b"\x00"


def ordered_string(s: bytes) -> bytes:
    return s.replace(b"\x00", b"\x00\xff").replace(b"\xff", b"\xff\x00") + b"\x00\x01"


_HEADER_BITS = [(0, 0), (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0), (0xFC, 0),
                (0xFE, 0), (0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0)]


def ordered_signed_increasing(v: int) -> bytes:
    x = ~v if v < 0 else v
    n = (x.bit_length() + 7) // 7
    b = bytearray((v & ((1 << 80) - 1)).to_bytes(10, "big")[10 - n:])
    b[0] ^= _HEADER_BITS[n][0]
    if n >= 2:
        b[1] ^= _HEADER_BITS[n][1]
    return bytes(b)


def encode_tensor_name_slice(name: bytes, extents: list) -> bytes:
    """TensorFlow's EncodeTensorNameSlice (FRAMEWORKS.md): extents are
    (start, length) with length -1 for a whole dimension."""
    out = ordered_num_increasing(0) + ordered_string(name) + ordered_num_increasing(len(extents))
    for start, length in extents:
        out += ordered_signed_increasing(start) + ordered_signed_increasing(length)
    return out


def key_text(k: bytes) -> str:
    return k.decode("utf-8") if k and k[0] != 0 else k.hex()


def cmd_tensorflow(out: pathlib.Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tensorflow.core.protobuf import tensor_bundle_pb2
    from tensorflow.core.framework import types_pb2

    clear(out)
    files = []
    ASSEMBLED: dict = {}  # sliced tensors as this script assembles them from the index

    def index_facts(prefix: pathlib.Path) -> dict:
        """The .index read independently of TensorFlow: header, every entry
        (slice entries included), each key's data CRC checked against the
        shard, and the slice keys checked against EncodeTensorNameSlice."""
        index = pathlib.Path(str(prefix) + ".index")
        rows = read_table(index)
        keys = [k for k, _ in rows]
        assert keys == sorted(keys), "keys not sorted"
        header = tensor_bundle_pb2.BundleHeaderProto()
        entries = []
        expected_slice_keys = set()
        for k, v in rows:
            if k == b"":
                header.ParseFromString(v)
                continue
            e = tensor_bundle_pb2.BundleEntryProto()
            e.ParseFromString(v)
            row = {"key": key_text(k), "key_is_hex": bool(k[0] == 0),
                   "dtype": types_pb2.DataType.Name(e.dtype),
                   "shape": [d.size for d in e.shape.dim], "shard_id": e.shard_id,
                   "offset": e.offset, "size": e.size, "crc32c": e.crc32c}
            if e.slices:
                exts = []
                for s in e.slices:
                    exts.append([[x.start, x.length if x.HasField("length") else None]
                                 for x in s.extent])
                    expected_slice_keys.add(encode_tensor_name_slice(
                        k, [(x.start, x.length if x.HasField("length") else -1)
                            for x in s.extent]))
                row["slices"] = exts
                assert e.size == 0
            elif e.size or e.dtype != types_pb2.DT_STRING:
                nshards = header.num_shards
                shard = pathlib.Path(f"{prefix}.data-{e.shard_id:05d}-of-{nshards:05d}")
                blob = shard.read_bytes()[e.offset:e.offset + e.size]
                assert len(blob) == e.size
                if e.dtype == types_pb2.DT_STRING:
                    row["data_crc_ok"] = string_crc(blob, row["shape"]) == e.crc32c
                else:
                    row["data_crc_ok"] = masked_crc(blob) == e.crc32c
                assert row["data_crc_ok"], row
            entries.append(row)
        slice_keys = {k for k in keys if k and k[0] == 0}
        assert slice_keys == expected_slice_keys, (slice_keys, expected_slice_keys)
        # Assemble every sliced tensor from its slice entries, as FRAMEWORKS.md says.
        by_key = dict(rows)
        assembled = {}
        for k, v in rows:
            if not k or k[0] == 0:
                continue
            e = tensor_bundle_pb2.BundleEntryProto()
            e.ParseFromString(v)
            if not e.slices:
                continue
            shape = [d.size for d in e.shape.dim]
            npdt = np.dtype(tf.as_dtype(e.dtype).as_numpy_dtype)
            full = np.zeros(shape, npdt)
            covered = np.zeros(shape, np.int32)
            for sl in e.slices:
                ext = [(x.start, x.length if x.HasField("length") else -1) for x in sl.extent]
                se = tensor_bundle_pb2.BundleEntryProto()
                se.ParseFromString(by_key[encode_tensor_name_slice(k, ext)])
                idx = tuple(slice(st, st + ln) if ln >= 0 else slice(None) for st, ln in ext)
                sub_shape = full[idx].shape
                shard = pathlib.Path(
                    f"{prefix}.data-{se.shard_id:05d}-of-{header.num_shards:05d}")
                blob = shard.read_bytes()[se.offset:se.offset + se.size]
                assert masked_crc(blob) == se.crc32c
                full[idx] = np.frombuffer(blob, npdt).reshape(sub_shape)
                covered[idx] += 1
            assert (covered == 1).all(), k
            assembled[k.decode()] = full
        ASSEMBLED.clear()
        ASSEMBLED.update(assembled)
        return {
            "header": {"num_shards": header.num_shards,
                       "endianness": tensor_bundle_pb2.BundleHeaderProto.Endianness.Name(
                           header.endianness),
                       "version": {"producer": header.version.producer,
                                   "min_consumer": header.version.min_consumer}},
            "num_slice_entries": len(slice_keys),
            "index_entries": entries,
        }

    def add(prefix: pathlib.Path, note: str, known: dict | None = None, **extra):
        """The oracle: tf.train.list_variables + load_checkpoint().get_tensor.
        `known`: values for keys TensorFlow itself cannot read back (see
        tf_sharded_unreadable/), checked against this script's assembly."""
        facts = index_facts(prefix)
        reader = tf.train.load_checkpoint(str(prefix))
        dtypes = reader.get_variable_to_dtype_map()
        tensors, not_listed = [], []
        for name, shape in tf.train.list_variables(str(prefix)):
            if dtypes[name] == tf.string:
                v = reader.get_tensor(name)
                vals = np.asarray(v).reshape(-1).tolist()
                nl = {"name": name, "why": "DT_STRING entry (metadata)", "shape": list(shape)}
                if name == "_CHECKPOINTABLE_OBJECT_GRAPH":
                    nl["nbytes"] = len(vals[0])
                else:
                    nl["value"] = [x.decode("utf-8", "replace") for x in vals]
                not_listed.append(nl)
                continue
            extra = {"tf_dtype": dtypes[name].name}
            if known and name in known:
                try:
                    reader.get_tensor(name)
                    raise AssertionError(f"TF reads {name} after all")
                except ValueError as err:
                    tf_error = str(err)
                a = known[name]
                extra["oracle_source"] = (
                    "the value saved (TensorFlow cannot read it back: get_tensor says "
                    f"{tf_error!r}, and the RestoreV2 op fails alike); equal to the "
                    "slices assembled from the index by this script")
            else:
                a = reader.get_tensor(name)
            a = np.asarray(a)
            assert list(a.shape) == list(shape)
            if name in ASSEMBLED:
                assert c_le_bytes(ASSEMBLED[name]) == c_le_bytes(a), name
                extra["sliced"] = True
            tensors.append(tensor_entry(name, a, **extra))
        assert set(ASSEMBLED) <= {t["name"] for t in tensors}
        rel = pathlib.Path(str(prefix) + ".index").relative_to(out).as_posix()
        data_files = sorted(p for p in prefix.parent.iterdir()
                            if p.name.startswith(prefix.name + ".data-"))
        entry = {"file": rel, "note": note, "refused": False,
                 "tensorflow": {"num_shards": facts["header"]["num_shards"]},
                 **file_facts(out / rel),
                 "data_files": {p.relative_to(out).as_posix(): file_facts(p)
                                for p in data_files},
                 "tensors": tensors, "not_listed": not_listed, **extra,
                 "index": facts}
        files.append(entry)
        return entry

    # ---- tf_checkpoint: a tf.train.Checkpoint of a tf.Module with every dtype.
    tf.random.set_seed(7)
    dts = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "bool", "complex64"]
    m = tf.Module()
    m.dense = tf.Module()
    m.dense.kernel = tf.Variable(sample("float32", (4, 3), 2000, specials=False))
    m.dense.bias = tf.Variable(sample("float32", (3,), 2001, specials=False))
    for i, dt in enumerate(dts):
        setattr(m, f"v_{dt}", tf.Variable(tf.constant(sample(dt, (2, 3) if i % 2 else (7,),
                                                             2100 + i), dtype=dt)))
    m.scalar = tf.Variable(np.float64(-2.75))
    m.empty = tf.Variable(np.zeros((0, 3), np.float32))
    m.text = tf.Variable("a string variable")
    m.texts = tf.Variable(["x", "yz", ""])
    d = out / "tf_checkpoint"
    prefix = tf.train.Checkpoint(model=m).save(str(d / "ckpt"))
    assert prefix.endswith("ckpt-1"), prefix
    add(d / "ckpt-1", "tf.train.Checkpoint(model=tf.Module).save: variables of every "
        "TF dtype (NaN/Inf, int extremes), a 0-d and an empty one, a nested module; the "
        "string variables and _CHECKPOINTABLE_OBJECT_GRAPH are DT_STRING (not tensors); "
        "save_counter is I64 0-d")

    # ---- tf_sharded: MaxShardSizePolicy cuts variables into slices across shards.
    m2 = tf.Module()
    m2.big = tf.Variable(sample("float32", (10, 6), 2200, specials=False))  # 240 bytes
    m2.ids = tf.Variable(sample("int64", (20,), 2201))  # 160 bytes
    m2.cube = tf.Variable(sample("bfloat16", (3, 4, 5), 2202, specials=False))
    m2.c64 = tf.Variable(sample("complex64", (3, 5), 2205))
    m2.bytes = tf.Variable(sample("uint8", (100,), 2206))
    m2.small = tf.Variable(sample("int32", (3,), 2203))
    m2.flag = tf.Variable(sample("bool", (4,), 2204))
    m2.label = tf.Variable("sharded")
    opts = tf.train.CheckpointOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(
            max_shard_size=64))
    d = out / "tf_sharded"
    prefix = tf.train.Checkpoint(model=m2).save(str(d / "ckpt"), options=opts)
    e = add(pathlib.Path(prefix), "tf.train.Checkpoint.save with CheckpointOptions("
            "experimental_sharding_callback=MaxShardSizePolicy(max_shard_size=64)): several "
            "data shards; variables over 64 bytes are cut into slices (an entry with "
            "`slices` and no data, plus one \\x00-prefixed entry per slice)")
    e["sliced_tensors"] = sorted({r["key"] for r in e["index"]["index_entries"]
                                  if "slices" in r})
    assert e["index"]["num_slice_entries"] > 0, "this TF did not slice"
    assert e["tensorflow"]["num_shards"] > 1

    # ---- tf_sharded_unreadable: sliced F16/U16/U32/U64, which TF writes but cannot read.
    m4 = tf.Module()
    vals = {"half": sample("float16", (6, 8), 2250), "u16": sample("uint16", (40,), 2251),
            "u32": sample("uint32", (5, 6), 2252), "u64": sample("uint64", (12,), 2253),
            "ok": sample("float32", (20,), 2254, specials=False)}
    for k, v in vals.items():
        setattr(m4, k, tf.Variable(v))
    d = out / "tf_sharded_unreadable"
    prefix = tf.train.Checkpoint(model=m4).save(str(d / "ckpt"), options=opts)
    known = {f"model/{k}/.ATTRIBUTES/VARIABLE_VALUE": v for k, v in vals.items()
             if k != "ok"}
    e = add(pathlib.Path(prefix), "as tf_sharded, with variables of F16, U16, U32 and U64 "
            "cut into slices: TensorFlow writes them but its own readers "
            "(CheckpointReader.get_tensor, RestoreV2) refuse to assemble slices of these "
            "dtypes ('Dtype half not supported'); FRAMEWORKS.md assembles every table dtype, "
            "so the oracle is the saved value, checked equal to this script's own assembly "
            "of the slices", known=known)
    e["sliced_tensors"] = sorted({r["key"] for r in e["index"]["index_entries"]
                                  if "slices" in r})
    assert set(known) <= set(e["sliced_tensors"])

    # ---- v1_saver: graph-mode tf.compat.v1.train.Saver with partitioned variables.
    d = out / "v1_saver"
    d.mkdir()
    g = tf.Graph()
    with g.as_default():
        v1 = tf.compat.v1
        v1.set_random_seed(11)
        v1.get_variable("weights", shape=[7, 3], dtype=tf.float32,
                        initializer=v1.random_normal_initializer(seed=1),
                        partitioner=v1.fixed_size_partitioner(3))
        with v1.variable_scope("layer"):
            v1.get_variable("emb", shape=[4, 6], dtype=tf.float64,
                            initializer=v1.random_uniform_initializer(-1, 1, seed=2),
                            partitioner=v1.fixed_size_partitioner(3, axis=1))
            v1.get_variable("bias", shape=[3], dtype=tf.int32,
                            initializer=v1.constant_initializer([5, -6, 7]))
        v1.get_variable("step", shape=[], dtype=tf.int64,
                        initializer=v1.constant_initializer(42))
        saver = v1.train.Saver()
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            # No .meta graph and no `checkpoint` state file (it would hold absolute paths).
            saver.save(sess, str(d / "model.ckpt"), write_meta_graph=False, write_state=False)
    e = add(d / "model.ckpt", "tf.compat.v1.train.Saver (graph mode, V2 format, no .meta, "
            "no state file): `weights` [7,3] partitioned in 3 along axis 0 (3,2,2 rows) and `layer/emb` "
            "[4,6] in 3 along axis 1: each listed once, whole, assembled from its slices")
    e["sliced_tensors"] = sorted({r["key"] for r in e["index"]["index_entries"]
                                  if "slices" in r})
    assert e["index"]["num_slice_entries"] > 0, "v1 saver wrote no slices"

    # ---- saved_model: tf.saved_model.save of a small tf.Module.
    class Tiny(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(sample("float32", (3, 2), 2300, specials=False), name="w")
            self.b = tf.Variable(sample("float32", (2,), 2301, specials=False), name="b")
            self.steps = tf.Variable(np.int64(3), name="steps")

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            return tf.matmul(x, self.w) + self.b

    d = out / "saved_model"
    tf.saved_model.save(Tiny(), str(d))
    add(d / "variables" / "variables", "tf.saved_model.save(tf.Module): the bundle is "
        "variables/variables.index + variables/variables.data-00000-of-00001; "
        "saved_model.pb and fingerprint.pb beside it are not read")

    # ---- refused: a COMPLEX128 variable.
    m3 = tf.Module()
    m3.ok = tf.Variable(np.array([1.0, 2.0], np.float32))
    m3.c128 = tf.Variable(np.array([1 + 2j, -3j], np.complex128))
    d = out / "refused_complex128"
    prefix = tf.train.Checkpoint(model=m3).save(str(d / "ckpt"))
    rel = pathlib.Path(prefix + ".index").relative_to(out).as_posix()
    files.append({"file": rel, "note": "a COMPLEX128 variable beside a good one",
                  "refused": True, "error_kind": "UnsupportedDtype",
                  "message_any": ["complex128", "COMPLEX128", "c128"],
                  **file_facts(out / rel)})

    write_manifest(out, "tensorflow", {
        "tensorflow": tf.__version__, "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__}, files,
        conventions={
            "tensors": "names are the bundle keys exactly as stored, from "
                       "tf.train.list_variables; values from "
                       "tf.train.load_checkpoint(prefix).get_tensor(name) (TF assembles "
                       "sliced tensors)",
            "tf_dtype": "the entry's TF dtype (informative)",
            "index": "the .index read by this script's own table reader (block CRCs "
                     "checked): header, every entry in key order including the header-less "
                     "slice entries (key as hex when it starts with \\x00), dtype, shape, "
                     "shard_id, offset, size, crc32c; slices as [[start, length|null], ...] "
                     "per slice; data_crc_ok: the masked CRC-32C of the data matches. Every "
                     "\\x00 key equals EncodeTensorNameSlice of its tensor and extent as "
                     "FRAMEWORKS.md describes it (checked)",
            "sliced_tensors": "keys whose entry has slices (no data of its own)"},
        notes=["TensorFlow 2.21's MaxShardSizePolicy does slice variables: tf_sharded/ has "
               "slice entries; every extent it (and the v1 Saver) writes has an explicit "
               "length, none is a whole dimension (-1) even when it spans the dimension",
               "a sliced entry has offset 0, size 0, crc32c 0 and a shard_id that need not "
               "be 0; its slice entries are in any shard",
               "TensorFlow cannot read back sliced F16/U16/U32/U64 (CheckpointReader and "
               "RestoreV2: 'Dtype half not supported'): see tf_sharded_unreadable/",
               "DT_STRING entries live in the data shards too: n varint64 lengths, a 4-byte "
               "masked CRC-32C of the lengths (taken over each length as a fixed 4-byte "
               "uint32), then the bytes; the entry's crc32c covers the lengths (as uint32), "
               "the 4 bytes and the strings. They are metadata",
               "`checkpoint` files are TensorFlow's text state files, not part of a bundle",
               "the bundles come out byte-identical on every run; saved_model/fingerprint.pb "
               "does not (it is not read)"])


# ----------------------------------------------------------------- HDF5


def h5_dtype_text(dt: np.dtype) -> str:
    if dt.names:
        return "compound{" + ", ".join(f"{n}: {dt.fields[n][0].str}" for n in dt.names) + "}"
    return dt.str


def h5_is_tensor(ds) -> bool:
    import h5py
    dt = ds.dtype
    if h5py.check_string_dtype(dt) or h5py.check_vlen_dtype(dt) or h5py.check_ref_dtype(dt):
        return False
    if dt.names:
        return False  # compound: h5py reads {r, i} of F32 as complex64 (dt.kind 'c')
    if dt.kind == "b":
        return True
    enum = h5py.check_enum_dtype(dt)
    if enum is not None:
        return False
    if dt.kind == "c":
        return dt.itemsize == 8
    if dt.kind in "iu":
        return dt.itemsize in (1, 2, 4, 8)
    if dt.kind == "f":
        return dt.itemsize in (2, 4, 8)
    return False


def h5_why_skipped(ds) -> str:
    import h5py
    dt = ds.dtype
    if h5py.check_string_dtype(dt):
        return "string"
    if h5py.check_vlen_dtype(dt):
        return "variable-length"
    if h5py.check_ref_dtype(dt):
        return "reference"
    if h5py.check_enum_dtype(dt) is not None:
        return "enum (not h5py's bool)"
    if dt.kind == "c":
        return f"complex of {dt.itemsize} bytes (compound {{r, i}} of F{dt.itemsize * 4})"
    if dt.names:
        return "compound"
    if dt.kind == "V":
        return "opaque"
    if dt.kind == "f":
        return f"{dt.itemsize * 8}-bit float"
    return f"type {dt.str}"


def object_messages(f, obj) -> tuple[int, list]:
    """The object header version and its messages [(type, body)], read from
    the file itself (object header v1 or v2, continuation blocks followed)."""
    import h5py
    path = pathlib.Path(f.filename)
    data = path.read_bytes()
    base = f.id.get_create_plist().get_userblock()
    addr = h5py.h5o.get_info(obj.id).addr + base
    msgs = []

    def walk_v1(start: int, length: int):
        pos, end = start, start + length
        while pos + 8 <= end:
            mtype, msize, _flags = struct.unpack("<HHB", data[pos:pos + 5])
            msgs.append((mtype, data[pos + 8:pos + 8 + msize]))
            pos += 8 + msize

    def walk_v2(start: int, end: int, hflags: int):
        pos = start
        while pos + 4 <= end - 4:
            mtype = data[pos]
            msize, mflags = struct.unpack("<HB", data[pos + 1:pos + 4])
            pos += 4
            if hflags & 0x04:
                pos += 2
            msgs.append((mtype, data[pos:pos + msize]))
            pos += msize

    version = 1
    if data[addr:addr + 4] == b"OHDR":
        version = 2
        hflags = data[addr + 5]
        pos = addr + 6
        if hflags & 0x20:
            pos += 16
        if hflags & 0x10:
            pos += 4
        width = 1 << (hflags & 3)
        size0 = int.from_bytes(data[pos:pos + width], "little")
        pos += width
        walk_v2(pos, pos + size0 + 4, hflags)
    else:
        (hsize,) = struct.unpack("<I", data[addr + 8:addr + 12])
        walk_v1(addr + 16, hsize)
        hflags = 0
    i = 0
    while i < len(msgs):  # continuation messages (0x10)
        mtype, body = msgs[i]
        if mtype == 0x10:
            off, length = struct.unpack("<QQ", body[:16])
            off += base
            if version == 2:
                assert data[off:off + 4] == b"OCHK"
                walk_v2(off + 4, off + length, hflags)
            else:
                walk_v1(off, length)
        i += 1
    return version, msgs


UNDEF = 0xFFFFFFFFFFFFFFFF


def group_storage(f, obj) -> dict:
    """How a group keeps its links and attributes, from its object header."""
    version, msgs = object_messages(f, obj)
    res = {"object_header_version": version}
    types = [t for t, _ in msgs]
    if 0x11 in types:
        res["links"] = "symbol_table"  # v1 B-tree + local heap
    else:
        body = [b for t, b in msgs if t == 0x02][0]  # link info
        pos = 2 + (8 if body[1] & 1 else 0)
        (heap,) = struct.unpack("<Q", body[pos:pos + 8])
        res["links"] = "dense" if heap != UNDEF else "compact"
        res["link_creation_order_tracked"] = bool(body[1] & 1)
        res["link_messages"] = types.count(0x06)
    if 0x15 in types:
        body = [b for t, b in msgs if t == 0x15][0]  # attribute info
        pos = 2 + (2 if body[1] & 1 else 0)
        (heap,) = struct.unpack("<Q", body[pos:pos + 8])
        res["attributes"] = "dense" if heap != UNDEF else "compact"
    elif 0x0C in types:
        res["attributes"] = "compact"
    return res


def layout_message(f, obj) -> dict:
    """The object's data layout message: the layout class and, for chunked
    data, the message version and chunk index type."""
    version, msgs = object_messages(f, obj)
    for mtype, body in msgs:
        if mtype != 0x08:
            continue
        ver, cls = body[0], body[1]
        res = {"layout_message_version": ver,
               "layout": {0: "compact", 1: "contiguous", 2: "chunked", 3: "virtual"}[cls],
               "object_header_version": version}
        if cls == 2:
            if ver == 4:
                idx = body[2 + 1 + 1 + 1 + body[3] * body[4]]
                res["chunk_index"] = {1: "single_chunk", 2: "implicit", 3: "fixed_array",
                                      4: "extensible_array", 5: "btree_v2"}[idx]
            else:
                res["chunk_index"] = "btree_v1"
        if cls == 1:
            (caddr,) = struct.unpack("<Q", body[2:10])
            res["allocated"] = caddr != 0xFFFFFFFFFFFFFFFF
        return res
    raise AssertionError("no layout message")


def h5_facts(f, ds) -> dict:
    import h5py
    pl = ds.id.get_create_plist()
    filters = []
    for i in range(pl.get_nfilters()):
        code, _flags, values, name = pl.get_filter(i)
        filters.append({"id": code, "name": name.decode("latin-1"), "values": list(values)})
    facts = {"h5_dtype": h5_dtype_text(ds.dtype), **layout_message(f, ds)}
    if ds.chunks:
        facts["chunks"] = list(ds.chunks)
        facts["chunks_written"] = ds.id.get_num_chunks()
        facts["chunks_total"] = int(np.prod([-(-s // c) for s, c in zip(ds.shape, ds.chunks)]))
    if filters:
        facts["filters"] = filters
    fv = ds.fillvalue
    if fv is not None and h5_is_tensor(ds) and np.asarray(fv).any():
        facts["fillvalue"] = first_values(np.asarray(fv).reshape(1))[0]
    if ds.maxshape != ds.shape:
        facts["maxshape"] = [m if m is not None else None for m in ds.maxshape]
    return facts


def h5_attr_value(v):
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str):
        return v if len(v) <= 200 else f"<string of {len(v)} characters>"
    a = np.asarray(v)
    if a.dtype.kind in "biuf" and a.size <= 16:
        return a.tolist() if a.dtype.kind != "f" else [jnum(x) for x in
                                                       a.astype(float).reshape(-1).tolist()]
    if a.dtype.kind in "OSU" and a.size <= 16:
        return [x.decode() if isinstance(x, bytes) else str(x) for x in a.reshape(-1).tolist()]
    return f"<{a.dtype.str} array of shape {list(a.shape)}>"


def h5_oracle(f) -> tuple[list, list]:
    """Datasets in the order h5py's visititems (H5Ovisit by name, ascending:
    every object once, soft/external links not followed) gives them."""
    import h5py
    tensors, not_listed = [], []

    def attrs_of(name, obj):
        for k in obj.attrs:
            not_listed.append({"name": f"{name}@{k}" if name else f"@{k}",
                               "why": "attribute (metadata)",
                               "value": h5_attr_value(obj.attrs[k])})

    attrs_of("", f)

    def visit(name, obj):
        attrs_of(name, obj)
        if not isinstance(obj, h5py.Dataset):
            return
        if h5_is_tensor(obj):
            a = obj[()]
            a = np.asarray(a)
            tensors.append(tensor_entry(name, a, h5=h5_facts(f, obj)))
        else:
            not_listed.append({"name": name, "why": "dataset of a type that is not a "
                               "tensor: " + h5_why_skipped(obj),
                               "h5_dtype": h5_dtype_text(obj.dtype),
                               "shape": list(obj.shape)})

    f.visititems(visit)
    return tensors, not_listed


def walk_check(f, tensors: list) -> None:
    """An independent depth-first walk in ascending (byte) name order over
    hard links only, each object once: must give visititems' names."""
    import h5py
    seen, names = set(), []

    def rec(g, prefix):
        for k in sorted(g.keys(), key=lambda s: s.encode()):
            link = g.get(k, getlink=True)
            if not isinstance(link, h5py.HardLink):
                continue
            obj = g[k]
            addr = h5py.h5o.get_info(obj.id).addr
            if addr in seen:
                continue
            seen.add(addr)
            path = f"{prefix}{k}"
            if isinstance(obj, h5py.Dataset):
                names.append(path)
            else:
                rec(obj, path + "/")

    seen.add(h5py.h5o.get_info(f.id).addr)
    rec(f, "")
    listed = [t["name"] for t in tensors]
    assert [n for n in names if n in listed] == listed, (names, listed)


def h5_add(files: list, out: pathlib.Path, file: str, note: str, **extra) -> dict:
    import h5py
    path = out / file
    with h5py.File(path, "r") as f:
        tensors, not_listed = h5_oracle(f)
        walk_check(f, tensors)
        sb = f.id.get_create_plist().get_version()
        ub = f.id.get_create_plist().get_userblock()
        groups = {"": group_storage(f, f)}
        f.visititems(lambda n, o: groups.__setitem__(n, group_storage(f, o))
                     if isinstance(o, h5py.Group) else None)
    data = path.read_bytes()
    sig = data.find(b"\x89HDF\r\n\x1a\n")
    entry = {"file": file, "note": note, "refused": False,
             "hdf5": {"superblock_version": sb[0], "userblock_size": ub,
                      "signature_offset": sig},
             **file_facts(path), **extra, "groups": groups, "tensors": tensors,
             "not_listed": not_listed}
    files.append(entry)
    return entry


def cmd_hdf5(out: pathlib.Path) -> None:
    import h5py

    clear(out)
    files = []

    # ---- dtypes.h5
    with h5py.File(out / "dtypes.h5", "w") as f:
        f.attrs["title"] = "tensorscope dtypes"
        f.attrs["version"] = np.int32(3)
        num = f.create_group("numeric")
        num.attrs["scale"] = np.float64(0.5)
        num.attrs["dims"] = np.array([2, 3], np.int64)
        seed = 3000
        for dt in ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
                   "uint8", "uint16", "uint32", "uint64"]:
            seed += 1
            num.create_dataset(dt, data=sample(dt, (3, 4), seed))
        num["float32"].attrs["units"] = "m/s"
        be = f.create_group("big_endian")
        be.create_dataset("f4", data=sample("float32", (2, 5), 3100).astype(">f4"))
        be.create_dataset("i4", data=sample("int32", (7,), 3101).astype(">i4"))
        be.create_dataset("f8", data=sample("float64", (4,), 3102).astype(">f8"))
        be.create_dataset("u2", data=sample("uint16", (5,), 3103).astype(">u2"))
        be.create_dataset("i8", data=sample("int64", (3,), 3104).astype(">i8"))
        be.create_dataset("f2", data=sample("float16", (6,), 3105).astype(">f2"))
        f.create_dataset("bool", data=sample("bool", (9,), 3200))
        f.create_dataset("complex64", data=sample("complex64", (2, 3), 3201))
        f.create_dataset("scalar", data=np.float32(-1.25))
        f.create_dataset("empty", data=np.zeros((0, 3), np.float32))
        nested = f.create_group("a/b/c")
        nested.attrs["note"] = "nested groups"
        nested.create_dataset("leaf", data=sample("int16", (4,), 3202))
        sk = f.create_group("skipped")
        sk.create_dataset("complex128", data=np.array([1 + 2j, 3 - 4j], np.complex128))
        sk.create_dataset("vlen_str", data=["alpha", "be"], dtype=h5py.string_dtype())
        sk.create_dataset("fixed_str", data=np.array([b"abc", b"de"], dtype="S4"))
        vl = sk.create_dataset("vlen_i4", (2,), dtype=h5py.vlen_dtype(np.int32))
        vl[0] = np.arange(3, dtype=np.int32)
        vl[1] = np.arange(5, dtype=np.int32)
        sk.create_dataset("compound", data=np.array([(1, 2.0), (3, 4.0)],
                                                    dtype=[("a", "<i4"), ("b", "<f8")]))
        sk.create_dataset("enum", data=np.array([0, 1, 2], np.uint8),
                          dtype=h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 2},
                                                basetype="u1"))
        sk.create_dataset("opaque", data=np.array([b"\x01\x02\x03\x04"] * 2, dtype="V4"))
        # x87 long double: 10 bytes of value in 16; numpy leaves stray bytes in the
        # padding, zeroed here so that the file is the same on every run.
        raw = np.array([1.5, -2.25], np.longdouble).view(np.uint8).reshape(2, -1).copy()
        if np.finfo(np.longdouble).nmant == 63:
            raw[:, 10:] = 0
        sk.create_dataset("longdouble", data=raw.reshape(-1).view(np.longdouble))
        sk.create_dataset("ref", data=np.array([f.ref, nested.ref], dtype=h5py.ref_dtype))
    h5_add(files, out, "dtypes.h5",
           "default libver (superblock 0, v1 object headers, symbol-table groups), "
           "contiguous datasets of every HDF5 dtype in the table; big-endian f2/f4/f8/i4/i8/u2; "
           "h5py's bool enum; complex64 as compound {r, i}; 0-d and (0, 3) datasets; nested "
           "groups; attributes (metadata); skipped/: complex128, strings, vlen, other "
           "compound, a non-bool enum, opaque, long double, references (not tensors)")

    # ---- chunked.h5
    with h5py.File(out / "chunked.h5", "w") as f:
        f.create_dataset("gzip", data=sample("float32", (10, 7), 3300), chunks=(4, 3),
                         compression="gzip", compression_opts=6)
        f.create_dataset("shuffle_gzip", data=sample("int32", (9, 8), 3301), chunks=(4, 4),
                         shuffle=True, compression="gzip", compression_opts=9)
        f.create_dataset("fletcher32", data=sample("float64", (12,), 3302), chunks=(5,),
                         fletcher32=True)
        f.create_dataset("shuffle_gzip_fletcher32", data=sample("uint16", (6, 5), 3303),
                         chunks=(4, 2), shuffle=True, compression="gzip", fletcher32=True)
        f.create_dataset("lzf", data=sample("int64", (5, 5), 3304), chunks=(2, 2),
                         compression="lzf")
        f.create_dataset("lzf_shuffle_c64", data=sample("complex64", (7,), 3305),
                         chunks=(3,), compression="lzf", shuffle=True)
        f.create_dataset("edge_chunks", data=sample("float16", (5, 7, 3), 3306),
                         chunks=(2, 3, 2))
        f.create_dataset("bool_gzip", data=sample("bool", (20,), 3307), chunks=(6,),
                         compression="gzip")
        f.create_dataset("be_gzip", data=sample("float32", (9,), 3308).astype(">f4"),
                         chunks=(4,), compression="gzip")
        sp = f.create_dataset("sparse_fill7", shape=(12, 10), dtype="int32", chunks=(4, 4),
                              fillvalue=7)
        sp[0:4, 0:4] = sample("int32", (4, 4), 3309)
        sp[9, 9] = -1
        sz = f.create_dataset("sparse_default_fill", shape=(6, 6), dtype="float32",
                              chunks=(3, 3), compression="gzip")
        sz[4, 1] = 2.5
        f.create_dataset("never_written", shape=(5, 4), dtype="float64", chunks=(2, 2),
                         fillvalue=1.5)
        f.create_dataset("contiguous_never_written", shape=(3, 3), dtype="int16",
                         fillvalue=-3)
        f.create_dataset("many_chunks", data=sample("uint8", (300,), 3310), chunks=(2,))
        f.create_dataset("one_chunk_gzip", data=sample("float32", (4, 4), 3311),
                         chunks=(4, 4), compression="gzip")
        # Compact layout through the low-level API.
        pl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        pl.set_layout(h5py.h5d.COMPACT)
        pl.set_obj_track_times(False)  # no timestamps: the file is the same on every run
        sid = h5py.h5s.create_simple((3, 5))
        dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_FLOAT, sid, pl)
        h5py.Dataset(dsid)[...] = sample("float32", (3, 5), 3312)
        pl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        pl.set_layout(h5py.h5d.COMPACT)
        pl.set_obj_track_times(False)  # no timestamps: the file is the same on every run
        dsid = h5py.h5d.create(f.id, b"compact_be_i2", h5py.h5t.STD_I16BE,
                               h5py.h5s.create_simple((6,)), pl)
        h5py.Dataset(dsid)[...] = sample("int16", (6,), 3313)
    h5_add(files, out, "chunked.h5",
           "chunked datasets (v1 B-tree chunk index): gzip, shuffle+gzip, fletcher32, "
           "shuffle+gzip+fletcher32, lzf (32000), lzf+shuffle, chunk shapes that do not "
           "divide the shape (edge chunks), 150 chunks (a multi-level B-tree), chunks never "
           "written (fill value 7, default 0, 1.5 with no chunk at all), a contiguous "
           "dataset never written (no storage allocated: all fill value -3), and compact "
           "layout (F32 and big-endian I16)")

    # ---- latest.h5: superblock 3, v2 object headers, new-style groups, v4 layouts.
    # libver='latest', through the low-level API so that the root group's object
    # header carries no timestamps (the file is the same on every run).
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    fid = h5py.h5f.create(str(out / "latest.h5").encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl,
                          fapl=fapl)
    def group(parent, name, track_order=False):
        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(False)
        if track_order:
            flags = h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED
            gcpl.set_link_creation_order(flags)
            gcpl.set_attr_creation_order(flags)
        return h5py.Group(h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl))

    with h5py.File(fid) as f:
        dense = group(f, "dense_links")
        for i in range(12):
            dense.create_dataset(f"w{i}", data=np.arange(4, dtype=np.float32).reshape(2, 2)
                                 + np.float32(10 * i))
        dense.create_dataset("Zeta", data=np.arange(3, dtype=np.int8))
        dense.create_dataset("alpha", data=np.arange(2, dtype=np.uint32))
        compact = group(f, "compact_links")
        compact.create_dataset("b", data=sample("int32", (3,), 3420))
        compact.create_dataset("a", data=sample("int32", (2,), 3421))
        ordered = group(f, "track_order", track_order=True)
        for i, k in enumerate(["zz", "mm", "aa"]):  # created in this order; listed by name
            ordered.create_dataset(k, data=np.array([i, -i * 0.5], np.float64))
        ordered_dense = group(f, "track_order_dense", track_order=True)
        for i in range(10):  # over 8 links: dense, with a creation-order index
            ordered_dense.create_dataset(f"n{9 - i}", data=np.array([i], np.int16))
        many_attrs = group(f, "dense_attrs")
        for i in range(12):
            many_attrs.attrs[f"attr{i:02d}"] = np.int32(i)
        many_attrs.create_dataset("x", data=sample("uint8", (4,), 3440))
        ch = group(f, "chunk_index")
        ch.create_dataset("fixed_array", data=sample("float32", (8, 6), 3450), chunks=(3, 2))
        ch.create_dataset("fixed_array_gzip", data=sample("int16", (9,), 3451), chunks=(2,),
                          compression="gzip")
        ea = ch.create_dataset("extensible_array", shape=(0,), maxshape=(None,),
                               dtype="int32", chunks=(2,))
        vals = sample("int32", (90,), 3452)
        ea.resize((90,))
        ea[...] = vals
        bt = ch.create_dataset("btree_v2", shape=(0, 0), maxshape=(None, None),
                               dtype="float32", chunks=(2, 2), compression="gzip")
        bt.resize((7, 9))
        bt[...] = sample("float32", (7, 9), 3453)
        ch.create_dataset("single_chunk", data=sample("float64", (3, 3), 3454),
                          chunks=(3, 3))
        ch.create_dataset("single_chunk_gzip", data=sample("float64", (3, 3), 3455),
                          chunks=(3, 3), compression="gzip")
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((2, 2))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_obj_track_times(False)
        dsid = h5py.h5d.create(ch.id, b"implicit", h5py.h5t.NATIVE_INT32,
                               h5py.h5s.create_simple((5, 4)), dcpl)
        h5py.Dataset(dsid)[...] = sample("int32", (5, 4), 3456)
        ch.create_dataset("fixed_array_sparse", shape=(10,), dtype="int64", chunks=(2,),
                          fillvalue=7)[2:4] = [1, 2]
        f.create_dataset("contiguous", data=sample("complex64", (4,), 3460))
        f.create_dataset("bool", data=sample("bool", (5,), 3461))
        pl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        pl.set_layout(h5py.h5d.COMPACT)
        pl.set_obj_track_times(False)  # no timestamps: the file is the same on every run
        dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_UINT16,
                               h5py.h5s.create_simple((4,)), pl)
        h5py.Dataset(dsid)[...] = sample("uint16", (4,), 3462)
    e = h5_add(files, out, "latest.h5",
               "libver='latest': superblock 3, v2 object headers (OHDR), link messages; "
               "dense_links/ has 14 links (dense link storage: fractal heap + v2 B-tree; "
               "names sorted by bytes: Zeta < alpha < w0 < w1 < w10 < w11 < w2); "
               "track_order/ (creation order tracked and indexed, listed by name) and "
               "track_order_dense/ (10 links n9..n0 created in that order: dense storage "
               "with a creation-order index; listed by name n0..n9); "
               "dense_attrs/ has 12 attributes (dense attribute storage); chunk_index/ "
               "has one dataset per layout v4 chunk index (see each tensor's h5.chunk_index)")
    idx = {t["h5"].get("chunk_index") for t in e["tensors"]}
    assert {"single_chunk", "implicit", "fixed_array", "extensible_array",
            "btree_v2"} <= idx, idx

    # ---- cycle.h5: hard links making cycles, a dataset linked twice, soft/external links.
    with h5py.File(out / "cycle.h5", "w") as f:
        a = f.create_group("a")
        a.create_group("b").create_dataset("x", data=sample("int32", (3,), 3500))
        a.create_dataset("data", data=sample("float32", (2, 2), 3501))
        f["a/b/up"] = f["a"]  # to an ancestor
        f["a/self"] = f["a"]  # to itself
        f["A_first"] = f["a/b/x"]  # the same dataset, met first under this name
        f.create_group("z")["alias"] = f["a/data"]  # met second: not listed again
        f["z/loop"] = f["z"]
        f["soft"] = h5py.SoftLink("/a/data")
        f["dangling_soft"] = h5py.SoftLink("/nowhere")
        f["external"] = h5py.ExternalLink("dtypes.h5", "/bool")
        f.create_dataset("b_top", data=np.array([1.0, 2.0], np.float64))
    h5_add(files, out, "cycle.h5",
           "hard-link cycles (a/b/up -> a, a/self -> a, z/loop -> z), one dataset under two "
           "names (A_first and a/b/x: listed once as A_first, which the depth-first "
           "ascending-name walk meets first; a/data and z/alias: listed as a/data), soft "
           "links (one dangling) and an external link, never followed. The external link "
           "makes HDF5 store the root group's links as link messages (with a link info "
           "message) inside a v1 object header of a superblock-0 file, not a symbol table",
           links={"hard_cycles": ["a/b/up", "a/self", "z/loop"],
                  "second_names": {"a/b/x": "A_first", "z/alias": "a/data"},
                  "soft": ["soft", "dangling_soft"], "external": ["external"]})

    # ---- userblock.h5
    with h5py.File(out / "userblock.h5", "w", userblock_size=512) as f:
        f.create_dataset("w", data=sample("float32", (3, 3), 3600))
        f.create_dataset("g/ids", data=sample("uint64", (4,), 3601), chunks=(2,),
                         compression="gzip")
    with open(out / "userblock.h5", "r+b") as fh:
        fh.write(b"tensorscope user block: any bytes may go here.\n")
    h5_add(files, out, "userblock.h5",
           "userblock_size=512: the signature at offset 512 (text in the user block); all "
           "addresses are relative to the superblock")

    # ---- refused: a filter FRAMEWORKS.md does not list (scale-offset, id 6).
    with h5py.File(out / "refused_scaleoffset.h5", "w") as f:
        f.create_dataset("ok", data=np.arange(4, dtype=np.float32))
        f.create_dataset("scaled", data=np.arange(20, dtype=np.int32), chunks=(5,),
                         scaleoffset=0)
    files.append({"file": "refused_scaleoffset.h5",
                  "note": "a dataset with the scale-offset filter (id 6), which FRAMEWORKS.md "
                          "does not list: 'a filter the reader does not know' is refused",
                  "refused": True, "error_kind": None,
                  "message_any": ["filter", "scaleoffset", "scale-offset", "6"],
                  **file_facts(out / "refused_scaleoffset.h5")})

    write_manifest(out, "hdf5", {
        "h5py": h5py.version.version, "hdf5": h5py.version.hdf5_version,
        "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}, files,
        conventions=H5_CONVENTIONS,
        notes=["h5py's defaults: contiguous layout unless chunks/compression/maxshape is "
               "given; libver 'earliest' (superblock 0, v1 object headers, symbol-table "
               "groups with a v1 B-tree + local heap, layout message v3, v1 B-tree chunk "
               "index); data written at creation is allocated at once",
               "a dataset created with no data and never written has no storage "
               "(contiguous: address undefined; chunked: no chunk): every element reads as "
               "the fill value",
               "h5py writes bool as an 8-bit signed enum FALSE=0/TRUE=1 and complex64 as a "
               "compound {r, i} of two little-endian F32",
               "every file comes out byte-identical on every run (group timestamps turned off "
               "in latest.h5, where v2 object headers would carry them; the long-double "
               "padding zeroed)"])


H5_CONVENTIONS = {
    "tensors": "datasets in h5py's visititems order (H5Ovisit by name, ascending byte "
               "order, each object once, soft and external links not followed); checked "
               "against this script's own hard-link walk",
    "h5": "informative: h5_dtype (numpy's text of the file type: '>' big-endian), the "
          "layout message as read from the object header (version, layout class, chunk "
          "index type), chunks, chunks_written/chunks_total (H5Dget_num_chunks), filters "
          "(HDF5 id, name, client values), a non-zero fillvalue, maxshape",
    "not_listed": "attributes as 'path@name' (metadata; value when short) and datasets "
                  "of types that are not tensors, with the reason",
    "hdf5": "superblock version, user block size and the offset of the signature",
    "groups": "informative, read from each group's object header ('' the root): "
              "object header version; links kept in a symbol table (v1 B-tree + local "
              "heap), compact (link messages in the header) or dense (fractal heap + v2 "
              "B-tree); whether link creation order is tracked; attributes compact or dense",
}


# ---------------------------------------------------------------- Keras


def keras_file_entry(out: pathlib.Path, file: str, note: str, files: list) -> dict:
    """A .keras zip: members (and how they are stored) and the datasets of
    its model.weights.h5, read with h5py from the member's bytes."""
    import h5py
    path = out / file
    blob = path.read_bytes()
    members = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            m = {"name": info.filename, "compression": {0: "stored", 8: "deflated"}.get(
                info.compress_type, info.compress_type), "size": info.file_size}
            if info.compress_type == 0:
                lh = info.header_offset
                n, x = struct.unpack("<HH", blob[lh + 26:lh + 30])
                m["data_offset"] = lh + 30 + n + x
            members.append(m)
        inner = zf.read("model.weights.h5")
        config = json.loads(zf.read("config.json"))
    # h5_facts reads the file from disk: extract the member to a scratch file.
    scratch = out / ".scratch_model.weights.h5"
    scratch.write_bytes(inner)
    try:
        with h5py.File(scratch, "r") as f:
            tensors, not_listed = h5_oracle(f)
            walk_check(f, tensors)
    finally:
        scratch.unlink()
    entry = {"file": file, "note": note, "refused": False, "container": "keras",
             "members": members, "weights_member": "model.weights.h5",
             "layers": [l.get("class_name") for l in config.get("config", {}).get("layers", [])],
             **file_facts(path), "tensors": tensors, "not_listed": not_listed}
    files.append(entry)
    return entry


def cmd_keras(out: pathlib.Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import h5py
    import keras

    clear(out)
    files = []
    keras.utils.set_random_seed(1234)
    inp = keras.Input((4,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(10, 3, name="embed")(inp)
    x = keras.layers.LayerNormalization(name="norm")(x)
    x = keras.layers.Flatten(name="flat")(x)
    y = keras.layers.Dense(2, name="head")(x)
    model = keras.Model(inp, y, name="tiny")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    xs = (np.arange(32).reshape(8, 4) * 7) % 10
    ys = sample("float32", (8, 2), 4000, specials=False)
    model.fit(xs, ys, epochs=1, batch_size=4, verbose=0, shuffle=False)

    model.save(out / "model.keras")
    keras_file_entry(out, "model.keras",
                     "keras 3 model.save: a zip (metadata.json, config.json, "
                     "model.weights.h5); functional model Input -> Embedding -> "
                     "LayerNormalization -> Flatten -> Dense, compiled with Adam after one "
                     "epoch (optimizer/vars/* are datasets too: names sort as bytes, "
                     "0 1 10 11 2 ...); weights under layers/<snake_case class name>/vars/<i>",
                     files)
    model.save_weights(out / "model.weights.h5")
    h5_add(files, out, "model.weights.h5", "keras 3 model.save_weights: the same layout as "
           "the .keras member (layers/.../vars/i, optimizer/vars/i)")
    model.save(out / "legacy.h5")
    h5_add(files, out, "legacy.h5",
           "keras 3 model.save('legacy.h5'): the legacy HDF5 format: model_weights/<layer>/"
           "<layer>/<weight> by layer name, optimizer_weights/adam/*, the model config and "
           "training config as attributes of the root (metadata)")

    keras.utils.set_random_seed(99)
    lam = keras.Sequential([
        keras.Input((3,), name="x"),
        keras.layers.Lambda(lambda t: t * 2.0 + 1.0, name="double_plus_one"),
        keras.layers.Dense(2, name="dense"),
    ], name="with_lambda")
    lam.save(out / "lambda.keras")
    e = keras_file_entry(out, "lambda.keras",
                         "a Sequential with a Lambda layer (lambda t: t * 2.0 + 1.0): "
                         "config.json carries the lambda's Python bytecode (marshal, "
                         "base64); keras refuses to load it unless safe_mode=False. For the "
                         "security scan: a reader lists the weights and never runs code",
                         files)
    with zipfile.ZipFile(out / "lambda.keras") as zf:
        cfg = json.loads(zf.read("config.json"))
    lam_cfg = [l for l in cfg["config"]["layers"] if l["class_name"] == "Lambda"][0]
    fn = lam_cfg["config"]["function"]
    e["lambda_function"] = {"class_name": fn.get("class_name") if isinstance(fn, dict) else
                            None, "json_path": "config.layers[1].config.function"}

    write_manifest(out, "keras", {
        "keras": keras.__version__, "backend": keras.backend.backend(),
        "tensorflow": __import__("tensorflow").__version__, "h5py": h5py.version.version,
        "hdf5": h5py.version.hdf5_version, "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__}, files,
        conventions={**H5_CONVENTIONS,
                     "members": "a .keras zip's members: compression (stored or deflated), "
                                "size, and for a stored member the offset of its data in the "
                                "zip",
                     "tensors": "for a .keras: the datasets of its model.weights.h5 member, "
                                "read with h5py, path from the member's root; otherwise as "
                                "for HDF5"},
        notes=["keras 3 writes the .keras members stored (ZIP_STORED, no compression), "
               "so model.weights.h5 can be read in place at its data_offset",
               "the .keras h5 names layers by their snake_case class name (layers/dense, "
               "layers/layer_normalization; the layer's own name is the `name` attribute of "
               "its vars group); legacy.h5 names them by layer name (model_weights/head/head/"
               "kernel)",
               "the .keras files are not byte-identical between runs (metadata.json holds "
               "the save date); the .h5 files and every oracle are"])


# ----------------------------------------------------------------- Flax


def cmd_flax(out: pathlib.Path) -> None:
    import flax
    import jax
    import jax.numpy as jnp
    import msgpack
    from flax import serialization
    from flax.core import FrozenDict

    clear(out)
    files = []

    def raw_tree(blob: bytes):
        return msgpack.unpackb(blob, ext_hook=lambda c, d: msgpack.ExtType(c, d), raw=False,
                               strict_map_key=False)

    def oracle(blob: bytes) -> tuple[list, list]:
        restored = serialization.msgpack_restore(blob)
        raw = raw_tree(blob)
        tensors, not_listed = [], []

        def rec(val, rawv, path):
            name = "/".join(path)
            if isinstance(rawv, dict) and rawv.get("__msgpack_chunked_array__") is True:
                chunks = rawv["chunks"]
                tensors.append(tensor_entry(name, np.asarray(val), encoding="chunked",
                                            chunks=len(chunks)))
                return
            if isinstance(val, dict):
                assert list(map(str, val)) == list(map(str, rawv))
                for (k, v), rk in zip(val.items(), rawv):
                    rec(v, rawv[rk], path + [str(k)])
                return
            if isinstance(val, list):
                for i, (v, rv) in enumerate(zip(val, rawv)):
                    rec(v, rv, path + [str(i)])
                return
            if isinstance(rawv, msgpack.ExtType) and rawv.code in (1, 3):
                tensors.append(tensor_entry(name, np.asarray(val),
                                            encoding={1: "ndarray", 3: "npscalar"}[rawv.code]))
                return
            if isinstance(val, complex):
                not_listed.append({"name": name, "why": "Python complex (ext 2): metadata",
                                   "value": [val.real, val.imag]})
                return
            kind = {bool: "bool", int: "int", float: "float", str: "str",
                    type(None): "nil"}[type(val)]
            not_listed.append({"name": name, "why": f"msgpack {kind}: metadata",
                               "value": jnum(val) if kind == "float" else val})

        rec(restored, raw, [])
        return tensors, not_listed

    def add(file: str, blob: bytes, note: str, **extra):
        (out / file).write_bytes(blob)
        tensors, not_listed = oracle((out / file).read_bytes())
        files.append({"file": file, "note": note, "refused": False,
                      **file_facts(out / file), **extra, "tensors": tensors,
                      "not_listed": not_listed})
        return files[-1]

    # ---- params.msgpack: flax.serialization.to_bytes of a FrozenDict.
    tree = FrozenDict({
        "params": {
            "Dense_0": {"kernel": jnp.asarray(sample("float32", (3, 4), 5000, False)),
                        "bias": sample("float32", (4,), 5001)},
            "Embed_0": {"embedding": sample("bfloat16", (5, 2), 5002)},
            "half": sample("float16", (6,), 5003),
        },
        "stats": {"count": sample("int32", (2, 2), 5004), "bytes": sample("uint8", (7,), 5005),
                  "mask": sample("bool", (6,), 5006), "phase": sample("complex64", (4,), 5007)},
        "scalar": np.float32(3.5),
        "zero_d": np.array(-7, np.int64),
        "empty": np.zeros((0, 2), np.float32),
        "f8": {"e4m3": sample("float8_e4m3fn", (5,), 5008),
               "e5m2": sample("float8_e5m2", (5,), 5009),
               "e4m3fnuz": sample("float8_e4m3fnuz", (5,), 5010),
               "e5m2fnuz": sample("float8_e5m2fnuz", (5,), 5011),
               "e8m0": np.array([1.0, 2.0, 0.5, 2.0**-127, 2.0**127, float("nan")],
                                dtype=ml_dtypes.float8_e8m0fnu)},
        "more": {"i8": sample("int8", (5,), 5012), "i16": sample("int16", (5,), 5013),
                 "u16": sample("uint16", (5,), 5014), "u32": sample("uint32", (5,), 5015),
                 "u64": sample("uint64", (5,), 5016), "f64": sample("float64", (5,), 5017)},
        "meta": {"step": 7, "lr": 0.25, "name": "tiny", "nothing": None, "flag": True,
                 "z": complex(1.5, -2.0), "big": -(2**40)},
        "layers": [sample("float32", (2,), 5018), sample("int64", (3,), 5019)],
        3: sample("float32", (1,), 5020),
    })
    add("params.msgpack", serialization.to_bytes(tree),
        "flax.serialization.to_bytes(FrozenDict): float32 (one from a jax array), bfloat16, "
        "float16, all float8 kinds, ints, uints, bool, complex64; a numpy scalar "
        "np.float32(3.5) (ext 3: 0-d tensor `scalar`), a 0-d ndarray (ext 1), an empty one; "
        "meta/* plain values (int, float, str, nil, bool, a Python complex as ext 2) are "
        "metadata. to_bytes turns the list `layers` into a map with keys '0', '1' and the "
        "integer key 3 into the string '3' (to_state_dict), so both are map keys here")

    # ---- lists_and_int_keys.msgpack: flax's msgpack_serialize keeps lists and int keys.
    tree2 = {
        "list": [sample("float32", (2,), 5100), [sample("int32", (2,), 5101), 4.5],
                 sample("uint8", (3,), 5102)],
        "mixed": [sample("float64", (2,), 5103), "label", None],
        "ints": {0: sample("int16", (2,), 5104), 1: sample("bfloat16", (3,), 5105),
                 10: sample("float16", (1,), 5106), 2: np.int32(9)},
        "empty_map": {},
        "empty_list": [],
    }
    add("lists_and_int_keys.msgpack", serialization.msgpack_serialize(tree2),
        "flax.serialization.msgpack_serialize (the low-level writer to_bytes uses, without "
        "to_state_dict): msgpack arrays (a list, a nested list, a list mixing an array, a str "
        "and nil; msgpack_serialize refuses tuples) whose elements are "
        "named by index, a map with integer keys 0 1 2 10 (named in decimal; jax's "
        "tree_map sorted them), an empty map and an empty array (nothing listed)")

    # ---- chunked.msgpack: MAX_CHUNK_SIZE patched to 64 bytes.
    saved = serialization.MAX_CHUNK_SIZE
    serialization.MAX_CHUNK_SIZE = 64
    try:
        chunked_tree = {"big": sample("float32", (5, 8), 5200, False),  # 160 B: 16+16+8
                        "bf16": sample("bfloat16", (70,), 5201),  # 140 B: 32+32+6
                        "exact": sample("int64", (16,), 5202),  # 128 B: 8+8
                        "small": sample("float32", (4,), 5203),  # 16 B: not chunked
                        "nested": {"c64": sample("complex64", (3, 3), 5204)}}  # 72 B: 8+1
        blob = serialization.to_bytes(chunked_tree)
    finally:
        serialization.MAX_CHUNK_SIZE = saved
    restored = serialization.msgpack_restore(blob)
    for k in ["big", "bf16", "exact", "small"]:
        assert c_le_bytes(restored[k]) == c_le_bytes(chunked_tree[k]), k
    assert c_le_bytes(restored["nested"]["c64"]) == c_le_bytes(chunked_tree["nested"]["c64"])
    raw = raw_tree(blob)
    assert raw["big"]["__msgpack_chunked_array__"] is True
    assert isinstance(raw["small"], msgpack.ExtType)
    add("chunked.msgpack", blob,
        "to_bytes with flax.serialization.MAX_CHUNK_SIZE patched to 64 bytes: arrays over 64 "
        "bytes are written as {'__msgpack_chunked_array__': True, 'shape': {'0': d0, ...}, "
        "'chunks': {'0': 1-D ndarray, ...}} (one tensor each, restored exactly: checked); "
        "`small` stays a plain ndarray")

    # ---- linen.msgpack: a real flax.linen model's variables and its optax state.
    import flax.linen as nn
    import optax

    class Tiny(nn.Module):
        @nn.compact
        def __call__(self, tokens):
            x = nn.Embed(10, 4)(tokens)
            x = nn.LayerNorm()(x)
            x = nn.Dense(3)(x.reshape(x.shape[0], -1))
            return nn.BatchNorm(use_running_average=True)(x)

    variables = Tiny().init(jax.random.PRNGKey(0), jnp.zeros((1, 2), jnp.int32))
    opt_state = optax.adam(1e-3).init(variables["params"])
    add("linen.msgpack", serialization.to_bytes({"variables": variables,
                                                 "opt_state": opt_state}),
        "to_bytes of a flax.linen model's variables (params/Embed_0/embedding, "
        "params/LayerNorm_0/scale, params/Dense_0/kernel, batch_stats/BatchNorm_0/mean, ...) "
        "and optax.adam's state (a tuple -> map '0', '1'; ScaleByAdamState fields count "
        "(a 0-d int32 ndarray), mu, nu; EmptyState -> an empty map)")

    # ---- refused: dtypes outside the table.
    for file, arr, what, msg in [
        ("refused_int4.msgpack", np.array([-8, 0, 7], dtype=ml_dtypes.int4), "int4",
         ["int4"]),
        ("refused_complex128.msgpack", np.array([1 + 2j], np.complex128), "complex128",
         ["complex128"]),
    ]:
        blob = serialization.to_bytes({"ok": np.arange(3, dtype=np.float32), "bad": arr})
        serialization.msgpack_restore(blob)  # flax itself reads it back
        (out / file).write_bytes(blob)
        files.append({"file": file, "note": f"an ndarray ext of dtype name '{what}' beside a "
                      "good float32 one: refused (flax restores it)", "refused": True,
                      "error_kind": "UnsupportedDtype", "message_any": msg,
                      **file_facts(out / file)})

    write_manifest(out, "flax", {
        "flax": flax.__version__, "jax": jax.__version__, "msgpack": ".".join(
            map(str, msgpack.version)), "optax": optax.__version__, "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__}, files,
        conventions={
            "tensors": "from flax.serialization.msgpack_restore: nested keys joined with '/', "
                       "integer keys in decimal, array elements by index; encoding: ndarray "
                       "(ext 1), npscalar (ext 3, shape []), chunked (chunks: how many)",
            "not_listed": "plain msgpack values (int, float, str, bool, nil) and Python "
                          "complex (ext 2, value [re, im]) under their joined name"},
        notes=["to_bytes applies to_state_dict first: lists/tuples become maps with keys "
               "'0', '1', ... and every key becomes a string; msgpack arrays and integer "
               "keys only appear through msgpack_serialize",
               "dtype names are numpy's: 'bfloat16', 'float8_e4m3fn', 'float8_e8m0fnu', ...; "
               "flax restores float8 via np.dtype(name) (ml_dtypes registers the names)"])


# ------------------------------------------------------------------ main

COMMANDS = {"onnx": cmd_onnx, "tensorflow": cmd_tensorflow, "keras": cmd_keras,
            "hdf5": cmd_hdf5, "flax": cmd_flax}


def main(argv: list) -> int:
    if len(argv) not in (2, 3) or argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        print(f"usage: {argv[0]} {{{'|'.join(COMMANDS)}}} [OUTDIR]", file=sys.stderr)
        return 2
    sub = argv[1]
    out = pathlib.Path(argv[2]).resolve() if len(argv) == 3 else DATA / sub
    COMMANDS[sub](out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
