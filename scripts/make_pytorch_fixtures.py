#!/usr/bin/env python3
"""PyTorch checkpoint fixtures for Tensorscope's torch reader, made by real torch.

Writes small checkpoints into tests/data/pytorch/ with torch.save (zip
format with pickle protocols 2, 4 and 5, the legacy non-zip format, a
Lightning-style nested checkpoint, a transformers-style sharded model with
its index, a tied-embedding pytorch_model.bin) and
tests/data/pytorch/MANIFEST.json: where they came from (python, torch and
numpy versions, this script, the date) and, for every file, what Tensorscope
must report (see ../shared/PICKLE.md): the pickle globals, the metadata
leaves and, per tensor, its name, dtype, shape, the sha256 and (under 4 KB)
the hex of its logical values in C order little-endian, its ties, whether it
is a view, and its statistics.

Every figure in the manifest is taken from what torch.load gives back for
the written file (weights_only=True wherever torch accepts the file), and is
asserted equal to the objects that were saved.

The Rust tests read the committed files and the manifest: they never need
Python or torch. Re-run this only to change the fixtures:

    python3 -m venv /work/venv-torch
    /work/venv-torch/bin/pip install torch==2.15.0 numpy==2.4.6
    /work/venv-torch/bin/python scripts/make_pytorch_fixtures.py

(paths are relative to this file, so it runs from anywhere; FIXTURE_DATE
overrides the date written in the manifest).
"""

from __future__ import annotations

import collections
import datetime
import hashlib
import io
import json
import math
import os
import pathlib
import pickle
import pickletools
import platform
import shutil
import sys
import warnings
import zipfile
from fractions import Fraction

import numpy as np
import torch
from torch import nn

EXPECTED_TORCH = "2.15.0"
EXPECTED_NUMPY = "2.4.6"
SCRIPT = "scripts/make_pytorch_fixtures.py"
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "pytorch"
KEEP = {"README.md"}  # hand-written, never deleted
HEX_LIMIT = 4096  # tensors of fewer bytes carry their bytes as hex

DTYPE_NAMES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
    torch.float8_e4m3fnuz: "F8_E4M3FNUZ",
    torch.float8_e5m2fnuz: "F8_E5M2FNUZ",
    torch.int8: "I8",
    torch.int16: "I16",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    torch.complex64: "C64",
}
# Newer dtypes: only when this torch has them.
for _attr, _name in [("float8_e8m0fnu", "F8_E8M0"), ("uint16", "U16"), ("uint32", "U32"),
                     ("uint64", "U64")]:
    if hasattr(torch, _attr):
        DTYPE_NAMES[getattr(torch, _attr)] = _name
FLOAT_DTYPES = {d for d in DTYPE_NAMES if d.is_floating_point}
INT_DTYPES = {d for d in DTYPE_NAMES if not d.is_floating_point and not d.is_complex}

# ------------------------------------------------------------------ allowlist
# PICKLE.md section 4: torch's weights_only allowlist plus the __builtin__
# spellings, exactly 147 names.
_X12 = "BFloat16 Bool Byte Char ComplexDouble ComplexFloat Double Float Half Int Long Short"
_X10 = "BFloat16 Bool Byte Char Double Float Half Int Long Short"
_X9 = "BFloat16 Byte Char Double Float Half Int Long Short"
_DT = ("bfloat16 bool complex32 complex64 complex128 bcomplex32 float16 float32 float64 "
       "float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu "
       "float4_e2m1fn_x2 int8 int16 int32 int64 uint8 uint16 uint32 uint64 "
       + " ".join(f"int{i}" for i in range(1, 8)) + " "
       + " ".join(f"uint{i}" for i in range(1, 8))
       + " bits1x8 bits2x4 bits4x2 bits8 bits16 qint8 qint32 quint8 quint2x4 quint4x2")
ALLOWLIST = set(
    """collections.OrderedDict collections.Counter builtins.set builtins.bytearray
    builtins.complex __builtin__.set __builtin__.bytearray __builtin__.complex _codecs.encode
    torch.Size torch.Tensor torch.device torch.nn.parameter.Parameter
    torch.serialization._get_layout torch.storage.TypedStorage torch.storage.UntypedStorage
    torch._tensor._rebuild_from_type_v2""".split())
ALLOWLIST |= {"torch._utils." + n for n in (
    "_rebuild_tensor _rebuild_tensor_v2 _rebuild_tensor_v3 _rebuild_parameter "
    "_rebuild_parameter_with_state _rebuild_qtensor _rebuild_sparse_tensor "
    "_rebuild_meta_tensor_no_storage _rebuild_wrapper_subclass "
    "_rebuild_device_tensor_from_numpy _rebuild_device_tensor_from_cpu_tensor").split()}
ALLOWLIST |= {f"torch.{x}Storage" for x in _X12.split()}
ALLOWLIST |= {f"torch.cuda.{x}Storage" for x in _X12.split()}
ALLOWLIST |= {f"torch.{q}Storage" for q in "QInt32 QInt8 QUInt2x4 QUInt4x2 QUInt8".split()}
ALLOWLIST |= {f"torch.{x}Tensor" for x in _X10.split()}
ALLOWLIST |= {f"torch.cuda.{x}Tensor" for x in _X10.split()}
ALLOWLIST |= {f"torch.sparse.{x}Tensor" for x in _X9.split()}
ALLOWLIST |= {f"torch.cuda.sparse.{x}Tensor" for x in _X9.split()}
ALLOWLIST |= {"torch." + q for q in (
    "per_tensor_affine per_tensor_symmetric per_channel_affine "
    "per_channel_affine_float_qparams per_channel_symmetric").split()}
ALLOWLIST |= {"torch." + d for d in _DT.split()}
assert len(ALLOWLIST) == 147, len(ALLOWLIST)


# ------------------------------------------------------------ pickle globals

STRING_OPS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
              "SHORT_BINUNICODE", "BINUNICODE8"}
_MARK = object()
_ANY = object()


def scan_pickle(f: io.BytesIO, opcodes: set | None = None) -> tuple[set, int]:
    """Reads one pickle from f (up to and including STOP) with
    pickletools.genops, never unpickling it. Returns the "module.name" of
    every GLOBAL, INST and STACK_GLOBAL (PICKLE.md section 4; a STACK_GLOBAL
    whose operands are not both string literals gives "?.?") and the
    pickle's protocol. STACK_GLOBAL operands are followed through a small
    stack simulation with the memo and DUP."""
    names: set = set()
    stack: list = []
    memo: dict = {}
    proto = None
    for op, arg, _pos in pickletools.genops(f):
        n = op.name
        if opcodes is not None:
            opcodes.add(n)
        if n == "PROTO":
            proto = arg
            continue
        if n in ("GLOBAL", "INST"):
            module, name = arg.split(" ", 1)
            names.add(f"{module}.{name}")
        if n == "STACK_GLOBAL":
            name, module = stack.pop(), stack.pop()
            if isinstance(module, str) and isinstance(name, str):
                names.add(f"{module}.{name}")
            else:
                names.add("?.?")
            stack.append(_ANY)
            continue
        if n in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1]
            continue
        if n == "MEMOIZE":
            memo[len(memo)] = stack[-1]
            continue
        if n in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo[arg])
            continue
        if n == "DUP":
            stack.append(stack[-1])
            continue
        if n in STRING_OPS:
            stack.append(arg)
            continue
        # Generic stack effect from pickletools' opcode table.
        for item in reversed(op.stack_before):
            if item is pickletools.stackslice:
                while stack[-1] is not _MARK:
                    stack.pop()
            elif item is pickletools.markobject:
                assert stack.pop() is _MARK
            else:
                stack.pop()
        for item in op.stack_after:
            stack.append(_MARK if item is pickletools.markobject else _ANY)
    return names, proto


class _Anything:
    """Stands for every global while a pickle is replayed by
    globals_by_unpickling: accepts any call, item and state, runs nothing."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __setitem__(self, key, value):
        pass

    def __setstate__(self, state):
        pass


class _RecordingUnpickler(pickle.Unpickler):
    def __init__(self, f, seen: set, pids: list):
        super().__init__(f)
        self.seen = seen
        self.pids = pids

    def find_class(self, module, name):  # raw names, before any __builtin__ mapping
        self.seen.add(f"{module}.{name}")
        return _Anything

    def persistent_load(self, pid):
        self.pids.append(pid)
        return _Anything()


def replay(data: bytes, count: int) -> tuple[set, list, object]:
    """A second, independent reading of the globals: Python's own
    unpickler replays the pickle(s) with find_class recording each name and
    returning a stand-in (nothing is imported). Also gives the persistent
    ids in pickle order and the last pickle's value (for a legacy file: the
    storage-key list)."""
    seen: set = set()
    pids: list = []
    f = io.BytesIO(data)
    value = None
    for _ in range(count):
        value = _RecordingUnpickler(f, seen, pids).load()
    return seen, pids, value


def zip_pickle(path: pathlib.Path) -> tuple[str, bytes, list]:
    """(root folder, data.pkl bytes, entry names) of a torch zip."""
    with zipfile.ZipFile(path) as zf:
        entries = zf.namelist()
        roots = {e.split("/", 1)[0] for e in entries}
        assert len(roots) == 1, roots
        root = roots.pop()
        return root, zf.read(f"{root}/data.pkl"), entries


def file_globals(path: pathlib.Path) -> dict:
    """The pickle report of one torch file (zip: data.pkl; legacy: all five
    pickles) and container facts."""
    blob = path.read_bytes()
    if blob[:4] == b"PK\x03\x04":
        root, pkl, entries = zip_pickle(path)
        f = io.BytesIO(pkl)
        opcodes: set = set()
        names, proto = scan_pickle(f, opcodes)
        assert f.tell() == len(pkl)
        assert names == replay(pkl, 1)[0], path
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
            records = {e[len(root) + 1:]: zf.read(e).decode("ascii")
                       for e in entries if not e.startswith(f"{root}/data/")
                       and e != f"{root}/data.pkl"}
        return {"container": "zip", "protocol": proto, "globals": sorted(names),
                "opcodes": sorted(opcodes), "zip_root": root, "zip_entries": entries,
                "zip_records": records}
    assert blob[:4] == b"\x80\x02\x8a\x0a", blob[:4]
    f = io.BytesIO(blob)
    names: set = set()
    opcodes: set = set()
    protos = []
    for _ in range(5):
        n, p = scan_pickle(f, opcodes)
        names |= n
        protos.append(p)
    assert len(set(protos)) == 1, protos
    seen, pids, keys = replay(blob, 5)
    assert names == seen, path
    in_pickle_order = list(dict.fromkeys(pid[2] for pid in pids))
    assert sorted(keys) == sorted(in_pickle_order) and all(pid[5] is None for pid in pids)
    return {"container": "legacy", "protocol": protos[0], "globals": sorted(names),
            "opcodes": sorted(opcodes), "pickles_end": f.tell(),
            "legacy_storage_keys": keys, "legacy_keys_in_pickle_order": in_pickle_order}


# ------------------------------------------------------------ object walking

SCALARS = (int, float, str, bool, type(None))


def walk(obj, path: str, tensors: list, leaves: dict, optional: dict) -> None:
    """PICKLE.md section 3: tensors and non-tensor leaves by joined path."""
    def join(k) -> str:  # int keys and indices in decimal
        return str(k) if not path else f"{path}.{k}"

    if isinstance(obj, torch.Tensor):
        tensors.append((path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            assert isinstance(k, (str, int)) and not isinstance(k, bool), k
            walk(v, join(k), tensors, leaves, optional)
    elif isinstance(obj, (list, tuple)):
        if all(isinstance(v, SCALARS) for v in obj):
            text = json.dumps(list(obj), allow_nan=False)
            (optional if not obj else leaves)[path] = text
        else:
            for i, v in enumerate(obj):
                walk(v, join(i), tensors, leaves, optional)
    elif isinstance(obj, SCALARS):
        leaves[path] = json.dumps(obj, allow_nan=False)
    else:
        raise TypeError(f"{path}: {type(obj)}")


def flatten(obj) -> tuple[dict, dict, dict]:
    tensors: list = []
    leaves: dict = {}
    optional: dict = {}
    walk(obj, "", tensors, leaves, optional)
    names = [n for n, _ in tensors]
    assert len(names) == len(set(names)), names
    return dict(tensors), leaves, optional


# ------------------------------------------------------ expected figures


def c_le_bytes(t: torch.Tensor) -> bytes:
    assert sys.byteorder == "little"
    flat = t.detach().contiguous().reshape(-1)  # 0-d -> (1,), empty -> (0,)
    return flat.view(torch.uint8).numpy().tobytes()


def exact_sqrt(x: Fraction) -> float:
    """sqrt of a non-negative Fraction, correct to ~2^-120 before the final
    rounding to float64 (no float64 overflow on the way)."""
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
    """Mean, population std and mean |x| of exact values (ints or floats),
    computed exactly with fractions and rounded once to float64."""
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
        "count": len(vals),
        "nan": 0,
        "pos_inf": 0,
        "neg_inf": 0,
        "zeros": sum(1 for v in vals if v == 0),
        "min": min(vals) if vals else None,
        "max": max(vals) if vals else None,
    }
    out.update(moments(vals))
    return out


def magnitude(z: np.ndarray) -> list:
    """|z| in float64 from the float32 parts, +Inf when either part is
    infinite (as hypot), else NaN with NaN."""
    re = z.real.astype(np.float64)
    im = z.imag.astype(np.float64)
    with np.errstate(invalid="ignore"):
        mag = np.sqrt(re * re + im * im)
    return np.where(np.isinf(re) | np.isinf(im), np.inf, mag).tolist()


def stats(t: torch.Tensor) -> dict:
    flat = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        return int_stats([int(v) for v in flat.tolist()])
    if t.dtype in INT_DTYPES:
        vals = flat.tolist()
        assert all(type(v) is int for v in vals)
        return int_stats(vals)
    if t.dtype in FLOAT_DTYPES:
        return float_stats(flat.double().tolist())  # exact for every float dtype
    if t.dtype == torch.complex64:
        z = flat.numpy()
        out = float_stats(magnitude(z))
        out["real"] = float_stats(z.real.astype(np.float64).tolist())
        out["imag"] = float_stats(z.imag.astype(np.float64).tolist())
        return out
    raise ValueError(t.dtype)


def storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def tie_key(t: torch.Tensor) -> tuple:
    return (storage_id(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def is_view(t: torch.Tensor) -> bool:
    whole = (t.storage_offset() == 0 and t.is_contiguous()
             and t.numel() * t.element_size() == t.untyped_storage().nbytes())
    return not whole


def tensor_entries(tensors: dict) -> list:
    groups = collections.defaultdict(list)
    for name, t in tensors.items():
        groups[tie_key(t)].append(name)
    entries = []
    for name, t in tensors.items():
        raw = c_le_bytes(t)
        assert len(raw) == t.numel() * t.element_size()
        e = {
            "name": name,
            "dtype": DTYPE_NAMES[t.dtype],
            "shape": list(t.shape),
            "numel": t.numel(),
            "nbytes": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
        if len(raw) < HEX_LIMIT:
            e["hex"] = raw.hex()
        e["tied_with"] = sorted(n for n in groups[tie_key(t)] if n != name)
        e["view"] = is_view(t)
        e["storage_offset"] = t.storage_offset()
        e["strides"] = list(t.stride())
        e["storage_nbytes"] = t.untyped_storage().nbytes()
        e["parameter"] = isinstance(t, nn.Parameter)
        e["stats"] = stats(t)
        entries.append(e)
    return entries


def ties(tensors: dict) -> list:
    groups = collections.defaultdict(list)
    for name, t in tensors.items():
        groups[tie_key(t)].append(name)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def same_storage_groups(tensors: dict) -> list:
    groups = collections.defaultdict(list)
    for name, t in tensors.items():
        if t.untyped_storage().nbytes():
            groups[storage_id(t)].append(name)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


# ---------------------------------------------------------------- loading


def load_back(path: pathlib.Path, report: dict) -> tuple[object, bool]:
    """torch.load of a written file: weights_only=True; if torch's
    weights_only unpickler refuses the file (it does not know FRAME, the
    protocol 4/5 opcode), the file's globals are checked against the
    allowlist first and it is loaded with weights_only=False (the file was
    written by this script a moment ago)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, weights_only=True), True
    except Exception as exc:  # noqa: BLE001 - torch raises UnpicklingError
        assert report["protocol"] >= 4, (path, exc)
        assert "Unsupported operand 149" in str(exc), exc  # 149 = 0x95 FRAME
        unsafe = set(report["globals"]) - ALLOWLIST
        assert not unsafe, unsafe
        return torch.load(path, weights_only=False), False


def check_same(saved_obj, loaded_obj, path) -> None:
    """The loaded object holds exactly the saved tensors (names, dtypes,
    shapes, strides, offsets, bytes), leaves and ties."""
    st, sl, so = flatten(saved_obj)
    lt, ll, lo = flatten(loaded_obj)
    assert list(st) == list(lt), (path, list(st), list(lt))
    assert sl == ll and so == lo, (path, sl, ll)
    for name in st:
        a, b = st[name], lt[name]
        assert a.dtype == b.dtype and a.shape == b.shape, (path, name)
        assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset(), (path, name)
        assert c_le_bytes(a) == c_le_bytes(b), (path, name)
        assert isinstance(a, nn.Parameter) == isinstance(b, nn.Parameter), (path, name)
    assert ties(st) == ties(lt), (path, ties(st), ties(lt))
    assert same_storage_groups(st) == same_storage_groups(lt), path


FILES: list[dict] = []


def add_file(rel: str, obj, note: str, save_kwargs: dict) -> dict:
    """torch.save(obj) to OUT/rel, then the manifest entry from torch.load."""
    path = OUT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path, **save_kwargs)
    report = file_globals(path)
    loaded, weights_only = load_back(path, report)
    check_same(obj, loaded, rel)
    tensors, leaves, optional = flatten(loaded)
    for t in tensors.values():
        assert t.dtype in DTYPE_NAMES, t.dtype
    entry = {"file": rel, "note": note, "size": path.stat().st_size,
             "sha256_file": hashlib.sha256(path.read_bytes()).hexdigest()}
    entry.update(report)
    entry["unsafe_globals"] = sorted(set(report["globals"]) - ALLOWLIST)
    assert entry["unsafe_globals"] == []
    entry["torch_save"] = {k: v for k, v in save_kwargs.items()}
    entry["weights_only_loads"] = weights_only
    entry["metadata"] = leaves
    entry["metadata_optional"] = optional
    entry["tensors"] = tensor_entries(tensors)
    FILES.append(entry)
    return entry


# ------------------------------------------------------------------ values


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def from_bits(bits: list, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.uint8).view(dtype)


def float_tensor(dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Specials (NaN, +-Inf, +-0, subnormals, +-max finite, 1, -1) and
    random normals, 4x6 (F16, F32, BF16)."""
    fi = torch.finfo(dtype)
    bits_dtype = {2: torch.int16, 4: torch.int32}[fi.bits // 8]
    tiny_sub = torch.tensor([1], dtype=bits_dtype).view(dtype).item()  # smallest subnormal
    special = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, tiny_sub, -3 * tiny_sub,
               fi.max, -fi.max, fi.smallest_normal, 1.0, -1.0, fi.eps, 0.1]
    rand = (torch.randn(24 - len(special), generator=gen(seed), dtype=torch.float64) * 3)
    t = torch.tensor(special + rand.tolist(), dtype=torch.float64).to(dtype).reshape(4, 6)
    assert t.reshape(-1)[7].item() == fi.max
    assert t.reshape(-1)[5].item() == tiny_sub and tiny_sub < fi.smallest_normal
    return t


def float8_tensor(dtype: torch.dtype, special_bits: list, seed: int) -> torch.Tensor:
    rand = (torch.randn(16 - len(special_bits), generator=gen(seed), dtype=torch.float32) * 4)
    rand = rand.to(dtype).view(torch.uint8).tolist()
    return from_bits(special_bits + rand, dtype).reshape(2, 8)


def int_tensor(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    if dtype == torch.uint64:
        lo, hi = 0, 2**64 - 1
    elif dtype == torch.uint32:
        lo, hi = 0, 2**32 - 1
    elif dtype == torch.uint16:
        lo, hi = 0, 2**16 - 1
    else:
        ii = torch.iinfo(dtype)
        lo, hi = ii.min, ii.max
    extremes = [lo, hi, 0, 1, lo + 1, hi - 1]
    if lo < 0:
        extremes += [-1, -2]
    if hi > 2**53:
        extremes += [2**53 + 1, 2**53 + 3, hi // 3]
    g = gen(seed)
    span = hi - lo + 1
    rand = [lo + int(torch.randint(0, 2**62, (1,), generator=g).item()) * span // 2**62
            for _ in range(n - len(extremes))]
    vals = extremes + rand
    np_dtype = {torch.uint64: np.uint64, torch.uint32: np.uint32, torch.uint16: np.uint16,
                torch.int64: np.int64, torch.int32: np.int32, torch.int16: np.int16,
                torch.int8: np.int8, torch.uint8: np.uint8}[dtype]
    t = torch.from_numpy(np.array(vals, dtype=np_dtype))
    assert t.dtype == dtype and t.tolist() == vals
    return t


# Pythagorean magnitudes: |z| is exact in float64 whichever way it is taken.
TRIPLES = [(3, 4), (5, 12), (8, 15), (7, 24), (20, 21), (9, 40), (0, 2), (1, 0)]


def complex_tensor() -> torch.Tensor:
    nan, inf = float("nan"), float("inf")
    vals = [complex(a * s, -b * s) if i % 2 else complex(-b * s, a * s)
            for i, ((a, b), s) in enumerate(zip(TRIPLES, [1, 0.5, 4, 0.25, 2, 8, 1, 16]))]
    vals += [0j, complex(-0.0, -0.0), complex(nan, 1), complex(inf, nan), complex(-inf, 0),
             complex(0, -inf), complex(nan, nan), complex(1e-45, 0)]
    return torch.tensor(vals, dtype=torch.complex64).reshape(2, 8)


def all_dtypes() -> tuple[dict, list]:
    skipped = []
    d: dict = {}
    d["f64"] = torch.tensor(
        [0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), -float("inf"), 5e-324, -1e-310,
         2.2250738585072014e-308, 1e-300, -3.0, 0.1, 12345.678, -1e10, 7.0],
        dtype=torch.float64).reshape(4, 4)
    # Max finite F64 on its own: its sum of squares overflows float64.
    d["f64_extremes"] = torch.tensor([1.7976931348623157e308, -1.7976931348623157e308, 1.0,
                                      float("nan"), -0.5], dtype=torch.float64)
    d["f32"] = float_tensor(torch.float32, 1)
    d["f16"] = float_tensor(torch.float16, 2)
    d["bf16"] = float_tensor(torch.bfloat16, 3)
    d["i64"] = int_tensor(torch.int64, 16, 10)
    d["i32"] = int_tensor(torch.int32, 12, 11)
    d["i16"] = int_tensor(torch.int16, 12, 12)
    d["i8"] = int_tensor(torch.int8, 12, 13)
    d["u8"] = int_tensor(torch.uint8, 12, 14)
    d["bool"] = torch.tensor([[True, False, True], [False, False, True]])
    d["c64"] = complex_tensor()
    # Float8 specials by bit pattern.
    d["f8_e4m3"] = float8_tensor(torch.float8_e4m3fn, [
        0x7F, 0xFF, 0x00, 0x80, 0x01, 0x81, 0x7E, 0xFE, 0x38, 0x08], 20)  # NaN x2, +-0, sub, max
    d["f8_e5m2"] = float8_tensor(torch.float8_e5m2, [
        0x7D, 0x7C, 0xFC, 0x00, 0x80, 0x01, 0x7B, 0xFB, 0x3C, 0x04], 21)  # NaN, +-Inf, max
    d["f8_e4m3fnuz"] = float8_tensor(torch.float8_e4m3fnuz, [
        0x80, 0x00, 0x01, 0x81, 0x7F, 0xFF, 0x40, 0x08], 22)  # 0x80 is the only NaN
    d["f8_e5m2fnuz"] = float8_tensor(torch.float8_e5m2fnuz, [
        0x80, 0x00, 0x01, 0x81, 0x7F, 0xFF, 0x40, 0x04], 23)
    if hasattr(torch, "float8_e8m0fnu"):
        # Powers of two 2^(b-127); 0xFF NaN; no zero, no sign.
        d["f8_e8m0"] = from_bits([0xFF, 0x00, 0xFE, 0x7F, 0x80, 0x7E, 0x01, 0x85,
                                  0x70, 0x90, 0x7F, 0x7F], torch.float8_e8m0fnu).reshape(3, 4)
    else:
        skipped.append({"dtype": "F8_E8M0", "reason": "torch has no float8_e8m0fnu"})
    for attr, key, n, seed in [("uint16", "u16", 12, 30), ("uint32", "u32", 12, 31),
                               ("uint64", "u64", 14, 32)]:
        if hasattr(torch, attr):
            d[key] = int_tensor(getattr(torch, attr), n, seed)
        else:
            skipped.append({"dtype": key.upper(), "reason": f"torch has no {attr}"})
    d["scalar"] = torch.tensor(3.5)
    d["scalar_i64"] = torch.tensor(-(2**62) - 7)
    d["empty"] = torch.zeros(0, 3)
    d["empty_bf16"] = torch.zeros(2, 0, dtype=torch.bfloat16)
    return d, skipped


def views() -> dict:
    base = (torch.arange(48, dtype=torch.float32) * 0.5 - 7.0).reshape(6, 8)
    bf = (torch.arange(12, dtype=torch.float32) * 0.25 - 1.0).reshape(3, 4).to(torch.bfloat16)
    embed = torch.randn(5, 4, generator=gen(40))
    i64 = torch.arange(20, dtype=torch.int64).reshape(4, 5) * 1000 - 7000
    return {
        "base": base,
        "transposed": base.t(),
        "narrowed": base.narrow(1, 2, 3),
        "stepped": base[::2, 1::3],
        "expanded": torch.arange(4.0).reshape(4, 1).expand(4, 5),
        "row": base[3],
        "element": base[5, 7],  # 0-d view at the storage's last element
        "embed.weight": embed,
        "lm_head.weight": embed,  # the same tensor object: tied
        "param": nn.Parameter(torch.linspace(-1.0, 1.0, 6).reshape(2, 3)),
        "bf16_t": bf.t(),
        "i64_cols": i64[:, 1:4],
    }


def legacy() -> dict:
    w = torch.randn(3, 4, generator=gen(50))
    return {
        "f32": torch.randn(2, 3, generator=gen(51)),
        "f16": torch.tensor([1.0, -2.5, float("inf"), float("nan"), 65504.0, -0.0],
                            dtype=torch.float16),
        "i64": torch.tensor([-(2**63), 2**63 - 1, 0, 42], dtype=torch.int64),
        "bool": torch.tensor([True, False, False, True]),
        "bf16": torch.tensor([[0.5, -1.0], [3.0e38, float("-inf")]], dtype=torch.bfloat16),
        "w": w,
        "w_t": w.t(),
        "tied.a": w,
        "nested": {"tied.b": w, "step": 7, "names": ["x", "y"]},
    }


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)

    def forward(self, x):
        return self.norm(self.proj(x))


def lightning() -> dict:
    torch.manual_seed(60)
    lm = nn.Module()  # stands for the LightningModule: its attribute "model"
    lm.model = TinyNet()
    opt = torch.optim.Adam(lm.parameters(), lr=0.001)
    x = torch.randn(5, 4, generator=gen(61))
    target = torch.randn(5, 3, generator=gen(62))
    loss = (lm.model(x) - target).pow(2).mean()
    loss.backward()
    opt.step()
    sd = lm.state_dict()
    assert list(sd) == ["model.proj.weight", "model.proj.bias", "model.norm.weight",
                        "model.norm.bias"], list(sd)
    ck = "ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, " \
         "'every_n_epochs': 1, 'train_time_interval': None}"
    return {
        "epoch": 3,
        "global_step": 1200,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": sd,
        "loops": {
            "fit_loop": {
                "state_dict": {},
                "epoch_loop.state_dict": {"_batches_that_stepped": 1200},
                "epoch_progress": {"total": {"ready": 4, "started": 4, "processed": 4,
                                             "completed": 3},
                                   "current": {"ready": 4, "started": 4, "processed": 4,
                                               "completed": 3}},
                "epoch_loop.batch_progress": {"total": {"ready": 1200, "completed": 1200},
                                              "is_last_batch": False},
            },
            "validate_loop": {"state_dict": {}, "batch_progress": {"total": {"ready": 40}}},
        },
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [],
        "callbacks": {ck: {"monitor": "val_loss", "best_model_score": torch.tensor(0.25),
                           "best_model_path": "/ckpt/epoch=3.ckpt", "save_last": None}},
        "hyper_parameters": {"name": "tiny", "layers": [16, 8, 4], "lr": 0.001,
                             "use_bias": True},
    }


class ShardNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.fc1 = nn.Linear(4, 6)
        self.fc2 = nn.Linear(6, 3)


class TinyGPT(nn.Module):
    """A Llama-shaped model: vocab 32, hidden 8, one layer, tied head."""

    def __init__(self):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(32, 8)
        layer = nn.Module()
        layer.input_layernorm = nn.RMSNorm(8)
        layer.self_attn = nn.Module()
        for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(layer.self_attn, p, nn.Linear(8, 8, bias=False))
        layer.post_attention_layernorm = nn.RMSNorm(8)
        layer.mlp = nn.Module()
        layer.mlp.gate_proj = nn.Linear(8, 16, bias=False)
        layer.mlp.up_proj = nn.Linear(8, 16, bias=False)
        layer.mlp.down_proj = nn.Linear(16, 8, bias=False)
        self.model.layers = nn.ModuleList([layer])
        self.model.norm = nn.RMSNorm(8)
        self.lm_head = nn.Linear(8, 32, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied
        with torch.no_grad():  # norms away from all-ones, so their stats say something
            for norm in (layer.input_layernorm, layer.post_attention_layernorm, self.model.norm):
                norm.weight.copy_(1.0 + 0.125 * torch.arange(8.0) - 0.5)


# ------------------------------------------------------------------ main


def main() -> int:
    if torch.__version__.split("+")[0] != EXPECTED_TORCH or np.__version__ != EXPECTED_NUMPY:
        print(f"warning: torch {torch.__version__} / numpy {np.__version__}, "
              f"expected {EXPECTED_TORCH} / {EXPECTED_NUMPY}", file=sys.stderr)
    torch.use_deterministic_algorithms(True)
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if old.name in KEEP:
            continue
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()

    # 1. Every dtype, protocol 2.
    dt, skipped = all_dtypes()
    add_file("all_dtypes_p2.pt", dt,
             "one small tensor per dtype with NaN/Inf/-0/subnormal/max, int extremes, 0-d and "
             "empty tensors; torch.save(pickle_protocol=2)", {"pickle_protocol": 2})

    # 2. Views, protocols 4 and 5.
    torch.manual_seed(0)
    v = views()
    for proto in (4, 5):
        add_file(f"views_p{proto}.pt", v,
                 "views (transposed, narrowed, stepped, stride-0 expand, offset row, 0-d "
                 "element), tied pair, nn.Parameter, bf16 and i64 views; "
                 f"torch.save(pickle_protocol={proto}); torch's weights_only loader refuses "
                 "it (FRAME opcode), it was checked against the allowlist and loaded with "
                 "weights_only=False", {"pickle_protocol": proto})

    # 3. Legacy format. Its storage keys are memory addresses (str(storage._cdata))
    # and the key list is sorted as strings: the storage records' order is not the
    # pickle's order. Saved again (fresh tensors, other addresses) until the two
    # orders differ, so that a reader following the pickle's order fails.
    for _attempt in range(20):
        torch.manual_seed(0)
        e = add_file("legacy.pt", legacy(),
                     "torch.save(_use_new_zipfile_serialization=False): five pickles then the "
                     "storages; f32/f16/i64/bool/bf16, a transposed view, a tied triple (one "
                     "nested). NOT byte-identical between runs: torch names legacy storages by "
                     "memory address", {"_use_new_zipfile_serialization": False})
        if e["legacy_storage_keys"] != e["legacy_keys_in_pickle_order"]:
            break
        FILES.pop()
    else:
        raise AssertionError("legacy storage order always equals the pickle order")

    # 4. Lightning-style checkpoint.
    add_file("lightning.ckpt", lightning(),
             "Lightning-style nested checkpoint (no Lightning installed): state_dict with "
             "'model.' prefix, one real Adam step's optimizer state, callbacks, "
             "hyper_parameters, loops", {})

    # 5. Sharded model + index.
    torch.manual_seed(70)
    sd = ShardNet().state_dict()
    shard_names = ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
    halves = [{k: t for k, t in sd.items() if not k.startswith("fc2.")},
              {k: t for k, t in sd.items() if k.startswith("fc2.")}]
    weight_map = {}
    shard_entries = []
    for name, half in zip(shard_names, halves):
        shard_entries.append(add_file(f"sharded/{name}", half,
                                      "one shard of a transformers-style sharded model", {}))
        weight_map.update({k: name for k in half})
    total = sum(t.numel() * t.element_size() for t in sd.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    rel = "sharded/pytorch_model.bin.index.json"
    # As transformers' save_pretrained writes it.
    (OUT / rel).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    idx_tensors = []
    for se in shard_entries:
        for te in se["tensors"]:
            idx_tensors.append(dict(te, shard=se["file"].split("/", 1)[1]))
    assert [t["name"] for t in idx_tensors] == list(sd)
    assert sum(t["nbytes"] for t in idx_tensors) == total
    FILES.append({
        "file": rel,
        "note": "shard index {metadata: {total_size}, weight_map} as transformers writes it; "
                "tensors: every shard's tensors under their names (shard: the file)",
        "size": (OUT / rel).stat().st_size,
        "sha256_file": hashlib.sha256((OUT / rel).read_bytes()).hexdigest(),
        "container": "index",
        "protocol": 2,
        "globals": sorted(set().union(*(se["globals"] for se in shard_entries))),
        "unsafe_globals": [],
        "globals_note": "the union of the shards' globals (PICKLE.md: optional for an index)",
        "total_size": total,
        "shards": shard_names,
        "metadata": {},
        "metadata_optional": {},
        "tensors": idx_tensors,
    })

    # 6. Tiny GPT with tied embedding / head.
    torch.manual_seed(80)
    gpt = TinyGPT()
    gsd = gpt.state_dict()
    assert gsd["lm_head.weight"] is not None
    assert gsd["lm_head.weight"].data_ptr() == gsd["model.embed_tokens.weight"].data_ptr()
    e = add_file("pytorch_model.bin", gsd,
                 "tiny Llama-shaped state_dict (vocab 32, hidden 8, one layer) with "
                 "lm_head.weight tied to model.embed_tokens.weight; torch.save defaults", {})
    tied = {t["name"]: t["tied_with"] for t in e["tensors"] if t["tied_with"]}
    assert tied == {"lm_head.weight": ["model.embed_tokens.weight"],
                    "model.embed_tokens.weight": ["lm_head.weight"]}, tied

    # Every present dtype appears in all_dtypes_p2.pt.
    present = {t["dtype"] for t in FILES[0]["tensors"]}
    assert present == set(DTYPE_NAMES.values()), set(DTYPE_NAMES.values()) - present

    total_bytes = sum(f.stat().st_size for f in OUT.rglob("*")
                      if f.is_file() and f.name not in KEEP)
    manifest = {
        "generator": {
            "script": SCRIPT,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "date": os.environ.get("FIXTURE_DATE", datetime.date.today().isoformat()),
            "platform": f"{platform.system()} {platform.machine()}",
        },
        "conventions": {
            "file": "path relative to tests/data/pytorch",
            "container": "zip (torch.save since 1.6), legacy (_use_new_zipfile_serialization="
                         "False: five pickles then storages), index (pytorch_model.bin."
                         "index.json)",
            "protocol": "the pickle protocol (PROTO) of data.pkl, or of the legacy pickles",
            "opcodes": "the pickle opcode names present (pickletools names); informative",
            "pickles_end": "legacy: the byte offset where the five pickles end and the "
                           "storage records begin",
            "legacy_storage_keys": "legacy: pickle 5, the storage keys in the order of the "
                                   "storage records (torch sorts them as strings; the keys are "
                                   "memory addresses, so they change on every run); "
                                   "legacy_keys_in_pickle_order: the keys in order of first "
                                   "appearance in pickle 4 (differs, on purpose)",
            "globals": "PICKLE.md section 4: sorted, duplicate-free 'module.name' of every "
                       "GLOBAL, INST and STACK_GLOBAL (operands followed through the memo and "
                       "DUP), found with pickletools.genops over data.pkl (zip) or all five "
                       "pickles (legacy), and checked against a replay by Python's unpickler "
                       "whose find_class records each name; names verbatim. unsafe_globals: globals minus the "
                       "147-name allowlist",
            "metadata": "PICKLE.md section 3: every non-tensor leaf (int, float, str, bool, "
                        "None, or a list/tuple of only these) by its '.'-joined path, value as "
                        "json.dumps text (compare as parsed JSON; tuples are lists). An "
                        "OrderedDict's _metadata attribute is not a leaf. metadata_optional: "
                        "empty lists/tuples, which may be reported or not",
            "tensors": "PICKLE.md section 3 naming, in the order of the unpickled object; "
                       "dtype as safetensors names it; shape [] for 0-d",
            "bytes": f"sha256 / hex: the logical values in C order, little-endian "
                     f"(t.contiguous() viewed as uint8); hex only under {HEX_LIMIT} bytes",
            "tied_with": "the other names on the same storage, offset, shape and strides",
            "view": "true unless the tensor is its whole storage, contiguous, from offset 0",
            "storage_offset/strides/storage_nbytes": "as torch.load gives them, in elements "
                                                      "(storage_nbytes in bytes); informative",
            "parameter": "the tensor was saved as an nn.Parameter (_rebuild_parameter)",
            "stats": "over the finite values; count, nan, pos_inf, neg_inf, zeros exact; "
                     "min/max exact (integers as JSON integers, also beyond 2^53; -0 as 0; "
                     "BOOL as 0/1; BF16 and F8 through .double(), exact); mean, population std "
                     "and abs_mean exact, rounded once to float64; null without a finite "
                     "value. C64: figures of |z| in float64 from the float32 parts (+Inf when "
                     "a part is infinite), real and imag of each part",
            "weights_only_loads": "torch.load(weights_only=True) accepts the file; when false "
                                  "(protocol 4/5: torch's weights_only unpickler refuses "
                                  "FRAME, opcode 0x95) the figures come from "
                                  "torch.load(weights_only=False) after the globals were "
                                  "checked against the allowlist",
            "zip_root/zip_entries/zip_records": "the archive's root folder (torch names it "
                                                "after the file), its entries in order, and "
                                                "the small text records",
            "sha256_file/size": "of the file as written. Zip files are byte-identical between "
                                "runs of this script (same torch version); legacy.pt is not "
                                "(storage keys are memory addresses)",
        },
        "skipped_dtypes": skipped,
        "total_bytes": total_bytes,
        "files": FILES,
    }
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for f in FILES:
        print(f"{f['size']:8d}  {f['file']}")
    print(f"{len(FILES)} files, {total_bytes} bytes in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
