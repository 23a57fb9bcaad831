#!/usr/bin/env python3
"""Samples for `tensorscope scan` (../shared/SCAN.md): safe, unsafe, invalid and
unknown files of every kind the spec names, written by the real libraries
where one exists (torch, numpy, keras, gguf-py, safetensors) and by hand
(pickle opcodes, zip members) where the hostile form is the point.

Writes tests/data/scan/ and tests/data/scan/MANIFEST.json: per file (its
path relative to tests/data/scan, sorted) the row a scan must give (format,
verdict, findings: rule and evidence), how it was made and why it is there,
and the library versions at the top (`provenance`).

Nothing written here is ever loaded, unpickled, rendered or imported by
this script: the malicious pickles are hand-written opcodes or the pickles
of `__reduce__` objects that are only pickled; each file's expected
findings are computed from its bytes by a small reference scanner below
(pickletools.genops for pickles, with STACK_GLOBAL operands followed
through the memo; never pickle.load), and checked against what each
sample was meant to hold.

The files come from three libraries that live in three venvs (made outside
the repository), so the script runs in three parts; each part clears only
its own folders and merges its rows into MANIFEST.json, so the parts may
run in any order:

    # base: pickles/ numpy/ gguf/ safe/ invalid/ other/  (numpy, safetensors, gguf-py)
    python3 -m venv /work/venvs/py45
    /work/venvs/py45/bin/pip install numpy==2.4.6 safetensors==0.8.0 gguf==0.19.0 \\
        ml_dtypes==0.7.0
    /work/venvs/py45/bin/python scripts/make_scan_fixtures.py --part base

    # torch: torch/  (torch.save, legacy and zip)
    python3 -m venv /work/venvs/dist
    /work/venvs/dist/bin/pip install torch==2.15.0 numpy==2.4.6
    /work/venvs/dist/bin/python scripts/make_scan_fixtures.py --part torch

    # keras: keras/  (keras 3 Model.save, TensorFlow backend)
    python3 -m venv /work/venvs/tf
    /work/venvs/tf/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1 h5py==3.14.0 \\
        numpy==2.4.6
    /work/venvs/tf/bin/python scripts/make_scan_fixtures.py --part keras

Paths are relative to this file, so it runs from anywhere; FIXTURE_DATE
overrides the date written in the manifest. tests/data/scan/README.md is
hand-written and kept. The Rust tests read the committed files and the
manifest: they never need Python.

Determinism: everything the base part writes (np.savez dates its members
1980-01-01 too) and the torch.save zips come out byte-identical on every
run; torch's legacy format (storage keys are memory addresses) and keras
(the zip's weights member date, `shared_object_id` in config.json) do not,
so those rows' sha256 (and a legacy file's size) are informative only. The
verdicts and findings never change.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import io
import json
import os
import pathlib
import pickle
import pickletools
import platform
import re
import shutil
import struct
import sys
import zipfile
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in scripts/

SCRIPT = "scripts/make_scan_fixtures.py"
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "scan"
KEEP = {"README.md"}  # hand-written, never deleted
MANIFEST = "MANIFEST.json"
EXPECTED = {  # the versions the committed fixtures were made with
    "numpy": "2.4.6", "safetensors": "0.8.0", "gguf": "0.19.0", "torch": "2.15.0",
    "keras": "3.15.1", "tensorflow": "2.21.0", "h5py": "3.14.0",
}
PART_DIRS = {
    "base": ["pickles", "numpy", "gguf", "safe", "invalid", "other"],
    "torch": ["torch"],
    "keras": ["keras"],
}
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # zips written by this script: fixed member dates
CMD = "echo pwned"  # the payloads' command (never run)

CONVENTIONS = {
    "path": "relative to tests/data/scan, '/'-separated; files sorted by path. A scan of the "
            "whole folder lists every file here, MANIFEST.json and README.md included",
    "format": "SCAN.md's format: safetensors, numpy (.npy/.npz), pytorch (torch zip, legacy "
              "torch file, .ckpt), pickle (a bare pickle that is no torch file, whatever its "
              "extension: the kind comes from the bytes, PICKLE.md section 1), gguf, keras, or "
              "null for a file that is not a checkpoint. An invalid file has the format of the "
              "container its name or magic claims",
    "verdict": "safe | unsafe | invalid | unknown (SCAN.md)",
    "findings": "one {rule, evidence} per expected finding: pickles one per distinct global "
                "outside the allowlist (src/format/pytorch/allowlist.rs, PICKLE.md section 4), "
                "evidence the global as the pickle names it ('module.name', verbatim: "
                "'posix.system', '__builtin__.eval'); keras-lambda evidence 'Lambda'; "
                "keras-custom-module evidence the offending 'module' value or the whole "
                "'registered_name' ('pkg>Name'); gguf-chat-template one finding per template "
                "key, evidence the first of SCAN.md's tokens (in SCAN.md's order: __class__, "
                "__globals__, __subclasses__, __builtins__, __import__, mro, os., popen) the "
                "template holds, which in every sample here is also the leftmost one; "
                "evidence_any: every token the template holds; archive-path evidence the member "
                "name exactly as the zip stores it; invalid: evidence null. Order: order of "
                "appearance in the file (informative: compare as a multiset)",
    "rules/evidence": "the findings' rule ids and evidence, flattened (one entry per finding)",
    "globals": "pickle-bearing files: every global the file's pickles name (allowed or not), "
               "in order of first appearance, found with pickletools.genops (STACK_GLOBAL "
               "operands followed through the memo and DUP); informative",
    "tensors": "the tensor count where it is certain and the file is safe (SCAN.md: optional "
               "in a row); null otherwise",
    "bytes": "the file's size (null for MANIFEST.json itself)",
    "sha256": "of the file as written; informative (see notes on determinism)",
    "made_by": "the library and version (or hand-written opcodes / zipfile) that wrote it",
    "why": "what the sample is for",
    "part": "the --part of scripts/make_scan_fixtures.py that writes it",
}

# ------------------------------------------------------------ the allowlist
# PICKLE.md section 4 / src/format/pytorch/allowlist.rs: torch 2.15's
# weights_only allowlist plus the __builtin__ spellings, 147 names.
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

# ------------------------------------------------- reference pickle scanner

STRING_OPS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
              "SHORT_BINUNICODE", "BINUNICODE8"}
_MARK = object()
_ANY = object()


def walk_pickle(data: bytes, start: int = 0) -> dict:
    """One pickle from data[start:] with pickletools.genops (never
    unpickled): the 'module.name' of every GLOBAL, INST and STACK_GLOBAL in
    order of first appearance (a STACK_GLOBAL whose operands are not both
    strings gives '?.?'), the opcode names, where it ended (after STOP), or
    the error that stopped it (a truncated pickle still names the globals
    before the cut: pickle.load would have imported them)."""
    f = io.BytesIO(data[start:])
    names: list = []
    ops: list = []
    stack: list = []
    memo: dict = {}
    proto = None
    error = None

    def add(n):
        if n not in names:
            names.append(n)

    try:
        for op, arg, _pos in pickletools.genops(f):
            n = op.name
            ops.append(n)
            if n == "PROTO":
                proto = arg
                continue
            if n in ("GLOBAL", "INST"):
                module, name = arg.split(" ", 1)
                add(f"{module}.{name}")
            if n == "STACK_GLOBAL":
                name, module = stack.pop(), stack.pop()
                ok = isinstance(module, str) and isinstance(name, str)
                add(f"{module}.{name}" if ok else "?.?")
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
    except (ValueError, IndexError, KeyError) as e:  # truncated or not a pickle
        error = f"{type(e).__name__}: {e}"
    end = None if error else start + f.tell()
    return {"globals": names, "ops": ops, "protocol": proto, "end": end, "error": error}


def starts_pickle(rest: bytes) -> bool:
    return len(rest) >= 2 and rest[0] == 0x80 and 2 <= rest[1] <= 5


def stream_globals(data: bytes, start: int = 0, count: int | None = None) -> dict:
    """Pickles back to back from `start`: `count` of them (a legacy torch
    file's five), or, when count is None, the first and then each one after
    it while the bytes go on as a protocol-2+ pickle does (a bare file of
    several pickles). Globals of all of them, in order of first appearance."""
    names: list = []
    pickles = []
    at = start
    while True:
        if count is not None and len(pickles) == count:
            break
        if count is None and pickles and not starts_pickle(data[at:]):
            break
        p = walk_pickle(data, at)
        pickles.append({"at": at, "end": p["end"], "protocol": p["protocol"],
                        "error": p["error"], "ops": p["ops"]})
        for n in p["globals"]:
            if n not in names:
                names.append(n)
        if p["error"]:
            break
        at = p["end"]
        if at >= len(data):
            break
    return {"globals": names, "pickles": pickles}


def unsafe(names: list) -> list:
    return [n for n in names if n not in ALLOWLIST]


def pickle_findings(names: list) -> list:
    return [{"rule": "pickle-unsafe-global", "evidence": n} for n in unsafe(names)]


# ------------------------------------------------- other reference rules

def archive_path_bad(name: str) -> bool:
    """SCAN.md Archives: an absolute name (/x, \\x, C:...) or a '..' component
    ('/' or '\\' separated)."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return True
    return ".." in re.split(r"[/\\]", name)


def zip_names(data: bytes) -> list:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [i.filename for i in zf.infolist()]


def zip_member(data: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return zf.read(name)


def archive_findings(data: bytes) -> list:
    return [{"rule": "archive-path", "evidence": n} for n in zip_names(data)
            if archive_path_bad(n)]


def npy_header(data: bytes) -> dict:
    """The .npy header (ast.literal_eval of its dict literal: no code runs)
    and the offset of the data."""
    assert data[:6] == b"\x93NUMPY", data[:8]
    major = data[6]
    if major == 1:
        hlen, off = struct.unpack("<H", data[8:10])[0], 10
    else:
        hlen, off = struct.unpack("<I", data[8:12])[0], 12
    header = ast.literal_eval(data[off:off + hlen].decode("latin1"))
    return {**header, "data_offset": off + hlen}


def npy_pickle_globals(data: bytes) -> list | None:
    """The globals of an object array's pickle, or None for a plain array."""
    h = npy_header(data)
    if h["descr"] != "|O":
        return None
    s = stream_globals(data, h["data_offset"], count=1)
    assert not s["pickles"][0]["error"], s
    return s["globals"]


TEMPLATE_TOKENS = ["__class__", "__globals__", "__subclasses__", "__builtins__", "__import__",
                   "mro", "os.", "popen"]


def template_tokens(text: str) -> list:
    """SCAN.md's tokens a chat template holds, as (position, token): `mro`
    as a word (no letter or digit on either side, so `__mro__` and `.mro()`
    count), `os.` with no word character before it."""
    found = []
    for tok in TEMPLATE_TOKENS:
        if tok == "mro":
            pat = r"(?<![A-Za-z0-9])mro(?![A-Za-z0-9])"
        elif tok == "os.":
            pat = r"(?<![A-Za-z0-9_])os\."
        elif tok == "popen":
            pat = r"(?i)popen"
        else:
            pat = re.escape(tok)
        m = re.search(pat, text)
        if m:
            found.append((m.start(), tok))
    return found


def template_finding(key: str, text: str) -> dict | None:
    found = template_tokens(text)
    if not found:
        return None
    first_listed = found[0][1]
    leftmost = min(found)[1]
    assert first_listed == leftmost, (key, found)  # the sample reads the same either way
    return {"rule": "gguf-chat-template", "evidence": first_listed, "key": key,
            "evidence_any": [t for _, t in sorted(found)]}


def keras_config_findings(config) -> list:
    """SCAN.md Keras: every object of config.json, in document order."""
    out = []

    def walk(v, path):
        if isinstance(v, dict):
            if v.get("class_name") == "Lambda":
                out.append({"rule": "keras-lambda", "evidence": "Lambda", "json_path": path})
            m = v.get("module")
            if isinstance(m, str) and not (m == "keras" or m.startswith("keras.")):
                out.append({"rule": "keras-custom-module", "evidence": m,
                            "json_path": path + ".module"})
            r = v.get("registered_name")
            if isinstance(r, str) and ">" in r and r.split(">", 1)[0] != "keras":
                out.append({"rule": "keras-custom-module", "evidence": r,
                            "json_path": path + ".registered_name"})
            for k, x in v.items():
                walk(x, f"{path}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")

    walk(config, "$")
    return out


# ------------------------------------------------------------ rows

ROWS: list = []


def rel(path: pathlib.Path) -> str:
    return path.relative_to(OUT).as_posix()


def row(path: pathlib.Path, fmt, verdict: str, findings: list, made_by: str, why: str,
        part: str, tensors=None, globals_=None, expect=None, **extra) -> dict:
    """Adds the expected row of `path`. `expect`, when given, is the list of
    evidence the sample was meant to produce: the computed findings must
    hold exactly these (as a multiset)."""
    assert verdict in ("safe", "unsafe", "invalid", "unknown")
    if verdict in ("safe", "unknown"):
        assert findings == [], (path, findings)
    if verdict == "unsafe":
        assert findings and all(f["rule"] != "invalid" for f in findings), (path, findings)
    if verdict == "invalid":
        assert [f["rule"] for f in findings] == ["invalid"], (path, findings)
    if verdict == "unknown":
        assert fmt is None
    else:
        assert fmt in ("safetensors", "numpy", "pytorch", "pickle", "gguf", "keras"), fmt
    if expect is not None:
        got = sorted(str(f.get("evidence")) for f in findings)
        assert got == sorted(str(e) for e in expect), (path, got, expect)
    data = path.read_bytes()
    r = {"path": rel(path), "format": fmt, "verdict": verdict, "findings": findings,
         "rules": [f["rule"] for f in findings], "evidence": [f.get("evidence") for f in findings],
         "tensors": tensors, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
         "made_by": made_by, "why": why, "part": part}
    if globals_ is not None:
        r["globals"] = globals_
    r.update(extra)
    ROWS.append(r)
    return r


def write(path: pathlib.Path, data: bytes) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_zip(path: pathlib.Path, members: list) -> pathlib.Path:
    """A stored zip of (name, bytes), names kept exactly (ZipInfo is used
    directly, so zipfile strips no '/' and keeps '\\' and 'C:'), fixed dates."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=ZIP_DATE), data)
    assert zip_names(path.read_bytes()) == [n for n, _ in members]
    return path


def clear(part: str) -> None:
    for d in PART_DIRS[part]:
        shutil.rmtree(OUT / d, ignore_errors=True)


def py() -> str:
    return f"CPython {platform.python_version()}"


# ------------------------------------------------------------ pickles (base)

class Reduce:
    """An object whose pickle is `func(*args)`. It is only ever pickled by
    this script (never unpickled): its pickle names `func` as a global and
    applies it with REDUCE. Callable only so that it may itself be the
    `func` of another Reduce (pickle requires a callable there)."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)

    def __call__(self, *a, **k):
        raise RuntimeError("never called")


def binunicode(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def dumps(obj, protocol: int) -> bytes:
    return pickle.dumps(obj, protocol=protocol)


def make_pickles(part: str) -> None:
    import atexit
    import functools
    import importlib
    import operator
    import runpy
    import subprocess
    import threading
    import webbrowser

    d = OUT / "pickles"
    dumps_by = f"pickle.dumps ({py()})"

    def bare(name, data, why, made_by, expect, ops=None):
        p = write(d / name, data)
        s = stream_globals(data)
        for q in s["pickles"][:-1]:
            assert not q["error"], (name, q)
        all_ops = {o for q in s["pickles"] for o in q["ops"]}
        assert set(ops or []) <= all_ops, (name, ops, all_ops)
        f = pickle_findings(s["globals"])
        verdict = "unsafe" if f else "safe"
        row(p, "pickle", verdict, f, made_by, why, part, globals_=s["globals"], expect=expect,
            pickles=len(s["pickles"]))
        return s

    os_system = os.system  # pickles as posix.system on Linux
    assert os_system.__module__ == "posix"

    bare("posix_system_p2.pkl", dumps(Reduce(os_system, (CMD,)), 2),
         "os.system through __reduce__, protocol 2: GLOBAL 'posix system' then REDUCE",
         f"{dumps_by}, protocol 2, a __reduce__ object", ["posix.system"], ops=["GLOBAL"])
    bare("posix_system_p4.pkl", dumps(Reduce(os_system, (CMD,)), 4),
         "os.system through __reduce__, protocol 4: STACK_GLOBAL of two memoized strings",
         f"{dumps_by}, protocol 4, a __reduce__ object", ["posix.system"],
         ops=["STACK_GLOBAL", "MEMOIZE", "FRAME"])
    # pickle.dumps never fetches STACK_GLOBAL's operands from the memo here
    # (a builtin's __qualname__ is a new str each time), so: the pickler's
    # protocol-4 output for {'posix': 1, 'system': 2, 'run': os.system(cmd)}
    # written by hand, with the global's two operands BINGET from the keys.
    def u(x: str) -> bytes:
        return b"\x8c" + bytes([len(x)]) + x.encode() + b"\x94"

    memo = (b"\x80\x04" + b"}\x94(" + u("posix") + b"K\x01" + u("system") + b"K\x02"
            + u("run") + b"h\x01h\x02\x93\x94" + u(CMD) + b"\x85\x94R\x94u.")
    s = bare("posix_system_p4_memo.pkl", memo,
             "protocol 4 where STACK_GLOBAL's operands 'posix' and 'system' come from the memo "
             "(BINGET of the dict keys written earlier), not from string pushes before it",
             "hand-written opcodes (the protocol-4 pickle of a dict whose keys are the "
             "global's parts, its operands fetched by BINGET)", ["posix.system"],
             ops=["STACK_GLOBAL", "BINGET", "MEMOIZE"])
    sg = s["pickles"][0]["ops"].index("STACK_GLOBAL")
    assert s["pickles"][0]["ops"][sg - 2: sg] == ["BINGET", "BINGET"], s["pickles"][0]["ops"]
    bare("os_system_p0.pkl", f"cos\nsystem\n(S'{CMD}'\ntR.".encode(),
         "protocol 0 text pickle: GLOBAL 'os system' (the module as written, not posix)",
         "hand-written opcodes", ["os.system"], ops=["GLOBAL"])
    bare("inst_p0.pkl", f"(S'{CMD}'\nios\nsystem\n.".encode(),
         "INST opcode: imports os.system and calls it in one opcode (protocol 0)",
         "hand-written opcodes", ["os.system"], ops=["INST"])
    bare("builtins_eval_p2.pkl",
         dumps(Reduce(eval, ("__import__('os').system('echo pwned')",)), 2),
         "eval through __reduce__, protocol 2, which spells builtins as __builtin__",
         f"{dumps_by}, protocol 2, a __reduce__ object", ["__builtin__.eval"])
    bare("builtins_exec_p4.pkl",
         dumps(Reduce(exec, ("import os; os.system('echo pwned')",)), 4),
         "exec through __reduce__, protocol 4 (builtins.exec)",
         f"{dumps_by}, protocol 4, a __reduce__ object", ["builtins.exec"])
    code = compile("import os\nos.system('echo pwned')\n", "<payload>", "exec")
    import marshal
    raw = marshal.dumps(code)
    mf = (b"\x80\x04" + b"ctypes\nFunctionType\n" + b"cmarshal\nloads\n"
          + b"B" + struct.pack("<I", len(raw)) + raw + b"\x85R" + b"}" + b"\x86R" + b")R.")
    bare("marshal_function.pkl", mf,
         "the picklescan-evasion payload: types.FunctionType(marshal.loads(<code>), {})() "
         "(GLOBAL types.FunctionType and marshal.loads; the code object is CPython "
         f"{platform.python_version()} marshal data)",
         "hand-written opcodes (protocol 4, GLOBAL, BINBYTES; marshal.dumps of compiled code)",
         ["types.FunctionType", "marshal.loads"])
    bare("operator_methodcaller.pkl",
         dumps(Reduce(operator.methodcaller("system", CMD),
                      (Reduce(importlib.import_module, ("os",)),)), 4),
         "operator.methodcaller('system', cmd)(importlib.import_module('os')): no os global "
         "at all, two unsafe globals",
         f"{dumps_by}, protocol 4, nested __reduce__ objects",
         ["operator.methodcaller", "importlib.import_module"])
    bare("functools_partial.pkl",
         dumps(Reduce(functools.partial(os_system, CMD), ()), 2),
         "functools.partial(os.system, cmd)() (partial pickled with its BUILD state)",
         f"{dumps_by}, protocol 2, a __reduce__ object around a partial",
         ["functools.partial", "posix.system"])
    bare("atexit_register.pkl", dumps(Reduce(atexit.register, (os_system, CMD)), 2),
         "atexit.register(os.system, cmd): the command runs when the loading process exits",
         f"{dumps_by}, protocol 2, a __reduce__ object", ["atexit.register", "posix.system"])
    bare("threading_thread.pkl",
         dumps(Reduce(threading.Thread, (None, os_system, None, (CMD,))), 2),
         "threading.Thread(target=os.system, args=(cmd,)) built by the unpickler",
         f"{dumps_by}, protocol 2, a __reduce__ object", ["threading.Thread", "posix.system"])
    popen = Reduce(subprocess.Popen, (["sh", "-c", CMD],))
    bare("subprocess_popen_p2.pt", dumps(popen, 2),
         "subprocess.Popen through __reduce__ at protocol 2, which writes it as commands.Popen "
         "(pickle's Python 2 name mapping); a bare pickle named .pt (format pickle: no torch "
         "zip or legacy magic)",
         f"{dumps_by}, protocol 2, a __reduce__ object", ["commands.Popen"])
    bare("subprocess_popen_p4.pkl", dumps(popen, 4),
         "subprocess.Popen through __reduce__, protocol 4 (subprocess.Popen as is)",
         f"{dumps_by}, protocol 4, a __reduce__ object", ["subprocess.Popen"])
    bare("runpy_run_code.pkl",
         dumps(Reduce(runpy._run_code, ("import os; os.system('echo pwned')", {})), 4),
         "runpy._run_code(source, globals): exec under another name",
         f"{dumps_by}, protocol 4, a __reduce__ object", ["runpy._run_code"])
    bare("webbrowser_open.pkl",
         dumps(Reduce(webbrowser.open, ("https://example.invalid/pwned",)), 2),
         "webbrowser.open(url) through __reduce__",
         f"{dumps_by}, protocol 2, a __reduce__ object", ["webbrowser.open"])
    getattr_call = Reduce(Reduce(getattr, (Reduce(__import__, ("os",)), "system")), (CMD,))
    bare("getattr_p0.pkl", dumps(getattr_call, 0),
         "getattr(__import__('os'), 'system')(cmd), protocol 0: GLOBAL '__builtin__ getattr' "
         "and '__builtin__ __import__' (the Python 2 spelling)",
         f"{dumps_by}, protocol 0, nested __reduce__ objects",
         ["__builtin__.getattr", "__builtin__.__import__"], ops=["GLOBAL"])
    bare("getattr_p2.pkl", dumps(getattr_call, 2),
         "the same getattr(__import__('os'), 'system') payload, protocol 2",
         f"{dumps_by}, protocol 2, nested __reduce__ objects",
         ["__builtin__.getattr", "__builtin__.__import__"])
    sd = {"weight": [0.25, -0.5, 1.0], "bias": [0.0], "_": Reduce(os_system, (CMD,))}
    bare("weights.bin", dumps(sd, 2),
         "a bare pickle named weights.bin that looks like a state dict (lists of floats) with "
         "an os.system entry (format pickle)",
         f"{dumps_by}, protocol 2, a dict holding a __reduce__ object", ["posix.system"])
    two = dumps({"step": 1, "name": "tiny"}, 2) + dumps(Reduce(os_system, (CMD,)), 2)
    s = bare("two_pickles.pkl", two,
             "a benign protocol-2 pickle followed by a second, malicious one in the same file "
             "(pickle.load twice, as legacy torch loading does, runs it)",
             f"{dumps_by} twice, protocol 2, concatenated", ["posix.system"])
    assert len(s["pickles"]) == 2 and not s["pickles"][0]["ops"].count("GLOBAL"), s
    full = dumps(Reduce(os_system, (CMD,)), 2)
    cut = None
    for op, _arg, pos in pickletools.genops(full):
        if op.name == "REDUCE":
            cut = pos + 1
    s = bare("truncated_after_reduce.pkl", full[:cut],
             "os.system pickle cut right after REDUCE (no STOP): pickle.load runs the payload "
             "before it fails on the missing bytes, so the verdict is unsafe, not invalid",
             f"{dumps_by}, protocol 2, a __reduce__ object, cut after REDUCE", ["posix.system"])
    assert s["pickles"][0]["error"] and s["pickles"][0]["ops"][-1] == "REDUCE", s

    benign = {"name": "tiny", "step": 3, "sizes": [3, 2], "tags": ["a", "b"],
              "nested": {"x": [1, 2, 3], "ok": True}}
    bare("benign_p2.pkl", dumps(benign, 2),
         "a dict of ints, strings, lists: no global at all, protocol 2",
         f"{dumps_by}, protocol 2", [])
    bare("benign_p4.pkl", dumps(benign, 4),
         "the same dict, protocol 4 (FRAME, MEMOIZE, no STACK_GLOBAL)",
         f"{dumps_by}, protocol 4", [])
    import collections
    od = collections.OrderedDict([("lr", 1), ("name", "tiny"), ("dims", [3, 2])])
    s = bare("ordered_dict_p2.pkl", dumps(od, 2),
             "collections.OrderedDict of plain values: an allowlisted global (torch "
             "weights_only allows it)", f"{dumps_by}, protocol 2", [])
    assert s["globals"] == ["collections.OrderedDict"], s
    s = bare("benign_set_bytes_p2.pkl", dumps({"ids": {1, 2, 3}, "raw": b"\x00\x01"}, 2),
             "a set and bytes at protocol 2: globals __builtin__.set and _codecs.encode, both "
             "on the allowlist", f"{dumps_by}, protocol 2", [])
    assert sorted(s["globals"]) == ["__builtin__.set", "_codecs.encode"], s


# ------------------------------------------------------------ numpy (base)

def make_numpy(part: str) -> None:
    import numpy as np

    d = OUT / "numpy"
    d.mkdir(parents=True, exist_ok=True)
    nv = f"numpy {np.__version__}"
    plain = np.arange(6, dtype="<f4").reshape(2, 3)

    def npy_bytes(a, allow_pickle=False) -> bytes:
        b = io.BytesIO()
        np.save(b, a, allow_pickle=allow_pickle)
        return b.getvalue()

    def npz_row(p, why, made_by, expect, tensors=None):
        data = p.read_bytes()
        findings, globs = [], []
        for name in zip_names(data):
            if archive_path_bad(name):
                findings.append({"rule": "archive-path", "evidence": name})
            g = npy_pickle_globals(zip_member(data, name))
            if g is not None:
                globs += [x for x in g if x not in globs]
                findings += [{**f, "member": name} for f in pickle_findings(g)]
        row(p, "numpy", "unsafe" if findings else "safe", findings, made_by, why, part,
            tensors=None if findings else tensors, globals_=globs or None, expect=expect,
            members=zip_names(data))

    p = d / "plain.npy"
    np.save(p, plain)
    assert npy_pickle_globals(p.read_bytes()) is None
    row(p, "numpy", "safe", [], f"{nv} np.save", "a plain float32 (2, 3) array", part,
        tensors=1)
    p = d / "plain.npz"
    np.savez(p, weight=plain, bias=np.zeros(3, dtype="<f4"))
    npz_row(p, "np.savez of two plain arrays", f"{nv} np.savez", [], tensors=2)

    obj = np.array([1, "two", [3, 4]], dtype=object)
    p = d / "object_array.npy"
    np.save(p, obj, allow_pickle=True)
    g = npy_pickle_globals(p.read_bytes())
    assert g == ["numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype"], g
    row(p, "numpy", "unsafe", pickle_findings(g),
        f"{nv} np.save(allow_pickle=True) of an object array",
        "an object array (descr |O): its data is a pickle naming numpy's own reconstruct "
        "globals (numpy.dtype through a memoized 'numpy'), none of them on the allowlist",
        part, globals_=g, expect=g)

    # numpy 1.x spelled the reconstruct module numpy.core.multiarray: the
    # same pickle with that one string (and its FRAME length) rewritten.
    data = p.read_bytes()
    h = npy_header(data)
    head, pk = data[:h["data_offset"]], data[h["data_offset"]:]
    new, old = b"numpy.core.multiarray", b"numpy._core.multiarray"
    assert pk[2] == 0x95 and pk.count(b"\x8c" + bytes([len(old)]) + old) == 1
    pk2 = pk.replace(b"\x8c" + bytes([len(old)]) + old, b"\x8c" + bytes([len(new)]) + new)
    flen = struct.unpack("<Q", pk[3:11])[0]
    pk2 = pk2[:3] + struct.pack("<Q", flen - 1) + pk2[11:]
    p = write(d / "object_array_numpy1.npy", head + pk2)
    g = npy_pickle_globals(p.read_bytes())
    assert g == ["numpy.core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype"], g
    row(p, "numpy", "unsafe", pickle_findings(g),
        f"{nv} np.save(allow_pickle=True), then the module string rewritten to numpy 1.x's "
        "'numpy.core.multiarray' (SHORT_BINUNICODE and FRAME lengths fixed)",
        "an object array as numpy 1.x pickles it (numpy.core.multiarray._reconstruct)",
        part, globals_=g, expect=g)

    p = d / "object_member.npz"
    np.savez(p, weight=plain, meta=obj)
    npz_row(p, "an .npz whose member meta.npy is an object array (weight.npy is plain): "
            "the member's pickle globals are findings", f"{nv} np.savez",
            ["numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype"])

    a = npy_bytes(plain)
    zb = f"zipfile ({py()}) of {nv} np.save members"
    npz_row(write_zip(d / "archive_path_dotdot.npz", [("weight.npy", a), ("../evil.npy", a)]),
            "an .npz with a member named ../evil.npy (zip slip); both members plain arrays",
            zb, ["../evil.npy"])
    npz_row(write_zip(d / "archive_path_abs.npz", [("weight.npy", a), ("/abs/x.npy", a)]),
            "an .npz with an absolute member name /abs/x.npy; both members plain arrays",
            zb, ["/abs/x.npy"])
    npz_row(write_zip(d / "archive_path_windows.npz",
                      [("weight.npy", a), ("C:\\x.npy", a), ("..\\x.npy", a)]),
            "an .npz with Windows-style names: a drive-absolute C:\\x.npy and a backslash "
            "..\\x.npy (two findings); all members plain arrays", zb, ["C:\\x.npy", "..\\x.npy"])


# ------------------------------------------------------------ gguf (base)

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] "
          "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content "
          "%}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
          "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
          "%}{{ '<|im_start|>assistant\n' }}{% endif %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
           "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
           "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
           "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
           "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only "
           "user and assistant roles are supported!') }}{% endif %}{% endfor %}")
SSTI_MRO = CHATML + "{{ ''.__class__.__mro__[1].__subclasses__() }}"
# CVE-2024-34359 (llama-cpp-python), its published payload with a harmless command.
SSTI_CVE = ("{% for x in ().__class__.__base__.__subclasses__() %}{% if \"warning\" in "
            "x.__name__ %}{{x()._module.__builtins__['__import__']('os').popen(\"id\")}}"
            "{%endif%}{% endfor %}")
SSTI_CYCLER = CHATML + "{{ cycler.__init__.__globals__.os.popen('id').read() }}"


def make_gguf(part: str, invalid_out: dict) -> None:
    import gguf
    import numpy as np

    d = OUT / "gguf"
    d.mkdir(parents=True, exist_ok=True)
    gv = f"gguf-py {lib_version('gguf')}"

    def make(name, template, why, expect):
        p = d / name
        w = gguf.GGUFWriter(None, "llama")
        w.add_name("scan-sample")
        w.add_chat_template(template)
        w.add_tensor("token_embd.weight", np.arange(8, dtype=np.float32).reshape(4, 2))
        w.write_header_to_file(p)
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        r = gguf.GGUFReader(p)
        findings, keys = [], []
        for key, field in r.fields.items():
            if key == "tokenizer.chat_template" or key.startswith("tokenizer.chat_template."):
                keys.append(key)
                f = template_finding(key, field.contents())
                if f:
                    findings.append(f)
        assert keys, name
        ntensors = len(r.tensors)
        row(p, "gguf", "unsafe" if findings else "safe", findings, f"{gv} GGUFWriter", why,
            part, tensors=None if findings else ntensors, expect=expect, template_keys=keys)
        return p

    for t in (LLAMA3, CHATML, MISTRAL):
        assert template_tokens(t) == [], t
    make("llama3_template.gguf", LLAMA3,
         "Meta-Llama-3-8B-Instruct's chat template (messages, bos_token, loop.index0, trim)", [])
    safe = make("chatml_template.gguf", CHATML, "the ChatML template (messages, <|im_start|>)", [])
    make("mistral_template.gguf", MISTRAL,
         "Mistral-7B-Instruct's template (bos_token, loop.index0, raise_exception)", [])
    make("ssti_chat_template.gguf", SSTI_MRO,
         "ChatML followed by {{ ''.__class__.__mro__[1].__subclasses__() }} in "
         "tokenizer.chat_template (the server-side template injection class of CVE-2024-34359)",
         ["__class__"])
    make("ssti_tool_use.gguf",
         [{"name": "default", "template": CHATML}, {"name": "tool_use", "template": SSTI_CVE}],
         "a clean tokenizer.chat_template and CVE-2024-34359's payload (with 'id' as the "
         "command) in tokenizer.chat_template.tool_use (gguf-py writes it with a "
         "tokenizer.chat_templates name list)", ["__class__"])
    make("ssti_cycler.gguf", SSTI_CYCLER,
         "ChatML followed by {{ cycler.__init__.__globals__.os.popen('id').read() }}",
         ["__globals__"])
    invalid_out["gguf"] = (safe.read_bytes(), gv)


def lib_version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


# ----------------------------------------------- safetensors, invalid, other (base)

def png_1x1() -> bytes:
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    idat = zlib.compress(b"\x00\x20\x40\x60\xff", 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def make_safe_invalid_other(part: str, gguf_src: tuple) -> None:
    import numpy as np
    import safetensors
    from safetensors.numpy import save_file

    sv = f"safetensors {safetensors.__version__}"
    p = OUT / "safe" / "model.safetensors"
    p.parent.mkdir(parents=True, exist_ok=True)
    save_file({"weight": np.arange(6, dtype=np.float32).reshape(2, 3),
               "bias": np.zeros(2, dtype=np.float32)}, str(p), metadata={"format": "np"})
    row(p, "safetensors", "safe", [], f"{sv} safetensors.numpy.save_file",
        "a valid two-tensor safetensors file", part, tensors=2)
    good = p.read_bytes()

    inv = OUT / "invalid"
    n = struct.unpack("<Q", good[:8])[0]
    header = good[8:8 + n]
    assert header.startswith(b"{") and b'"dtype"' in header
    broken = header.replace(b'"dtype"', b'"dtype', 1)  # unbalanced quote: not JSON
    assert len(broken) == n - 1
    bad = good[:8] + broken + b" " + good[8 + n:]  # same length, header no longer parses
    p = write(inv / "broken_header.safetensors", bad)
    row(p, "safetensors", "invalid", [{"rule": "invalid", "evidence": None}],
        f"{sv} safetensors.numpy.save_file, then a quote removed from the header JSON",
        "a .safetensors whose header is not JSON (the length field is intact)", part)
    p = write(inv / "header_too_long.safetensors",
              struct.pack("<Q", len(good) * 4) + good[8:])
    row(p, "safetensors", "invalid", [{"rule": "invalid", "evidence": None}],
        f"{sv} safetensors.numpy.save_file, then the header length set past the end",
        "a .safetensors whose 8-byte header length is larger than the file", part)

    gbytes, gv = gguf_src
    assert gbytes[:4] == b"GGUF"
    p = write(inv / "truncated.gguf", gbytes[:100])
    row(p, "gguf", "invalid", [{"rule": "invalid", "evidence": None}],
        f"{gv} GGUFWriter (gguf/chatml_template.gguf), cut to its first 100 bytes",
        "a GGUF cut inside its key/value table", part)

    full = io.BytesIO()
    np.save(full, np.arange(6, dtype="<f4"))
    fb = full.getvalue()
    hl = struct.unpack("<H", fb[8:10])[0]
    p = write(inv / "cut_header.npy", fb[:10 + hl // 3])
    row(p, "numpy", "invalid", [{"rule": "invalid", "evidence": None}],
        f"numpy {np.__version__} np.save, cut inside its header dict",
        "a .npy whose header is cut (magic and header length intact)", part)

    rng = np.random.default_rng(20261207)
    rnd = bytearray(rng.integers(0, 256, 512, dtype=np.uint8).tobytes())
    rnd[0] = 0x1F  # not 0x80 (pickle), not 'P' (zip)
    p = write(inv / "random.pt", bytes(rnd))
    row(p, "pytorch", "invalid", [{"rule": "invalid", "evidence": None}],
        f"numpy {np.__version__} default_rng(20261207), 512 random bytes (first set to 0x1f)",
        "a .pt that is random bytes: no zip, no pickle (format pytorch by its name)", part)
    p = write(inv / "not_a_pickle.pkl", b"\x80\x02" + b"\xff\xfe\x00garbage")
    assert stream_globals(p.read_bytes())["pickles"][0]["error"]
    row(p, "pickle", "invalid", [{"rule": "invalid", "evidence": None}], "hand-written bytes",
        "PROTO 2 followed by bytes that are no opcode (PICKLE.md section 7): a .pkl that is "
        "not a pickle, naming no global", part)

    o = OUT / "other"
    texts = {
        "README.md": "# tiny-model\n\nA sample model card. Load `model.safetensors`.\n",
        "config.json": json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
                                   "num_hidden_layers": 2, "model_type": "llama",
                                   "torch_dtype": "float32"}, indent=2) + "\n",
        "tokenizer.json": json.dumps({
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2},
                      "unk_token": "[UNK]"}}, indent=2) + "\n",
        "model.safetensors.index.json": json.dumps({
            "metadata": {"total_size": 32},
            "weight_map": {"bias": "model-00002-of-00002.safetensors",
                           "weight": "model-00001-of-00002.safetensors"}}, indent=2) + "\n",
    }
    for name, text in texts.items():
        p = write(o / name, text.encode())
        row(p, None, "unknown", [], f"hand-written ({py()})",
            {"README.md": "a model card", "config.json": "a transformers config.json",
             "tokenizer.json": "a tokenizers WordLevel tokenizer.json",
             "model.safetensors.index.json":
                 "a shard index: unknown itself; its shards (not in this folder) would be "
                 "judged as the files they are"}[name], part)
    p = write(o / "pixel.png", png_1x1())
    row(p, None, "unknown", [], f"hand-written PNG ({py()} zlib)", "a 1x1 RGBA PNG image", part)


def part_base() -> dict:
    import numpy as np
    import safetensors
    clear("base")
    make_pickles("base")
    make_numpy("base")
    gsrc: dict = {}
    make_gguf("base", gsrc)
    make_safe_invalid_other("base", gsrc["gguf"])
    return {"numpy": np.__version__, "safetensors": safetensors.__version__,
            "gguf": lib_version("gguf")}


# ------------------------------------------------------------ torch

def inject(pkl: bytes, payload: bytes) -> bytes:
    """A protocol-2 pickle with `payload` (ops that leave one value) run
    and POPped right after PROTO, then the original ops: loading it runs the
    payload and still returns the original object (fickling's injection)."""
    assert pkl[:2] == b"\x80\x02", pkl[:4]
    return pkl[:2] + payload + b"0" + pkl[2:]


SYSTEM_OPS = b"cposix\nsystem\n" + binunicode(CMD) + b"\x85R"
EVAL_OPS = (b"c__builtin__\neval\n" + binunicode("__import__('os').system('echo pwned')")
            + b"\x85R")


def part_torch() -> dict:
    import collections

    import numpy as np
    import torch

    clear("torch")
    d = OUT / "torch"
    d.mkdir(parents=True, exist_ok=True)
    tv = f"torch {torch.__version__}"
    torch.manual_seed(0)
    sd = collections.OrderedDict([("linear.weight", torch.randn(2, 3)),
                                  ("linear.bias", torch.zeros(2))])

    def zip_pickle_findings(data: bytes) -> tuple:
        names = zip_names(data)
        pk = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
        assert len(pk) == 1, names
        s = stream_globals(zip_member(data, pk[0]), count=1)
        assert not s["pickles"][0]["error"], s
        return s["globals"], pk[0]

    def torch_zip_row(p, why, made_by, expect, tensors=None):
        data = p.read_bytes()
        g, member = zip_pickle_findings(data)
        findings = [{**f, "member": member} for f in pickle_findings(g)]
        # pickles in any other member (a .pkl planted beside data.pkl)
        for n in zip_names(data):
            if n.endswith(".pkl") and n != member:
                s = stream_globals(zip_member(data, n), count=1)
                assert not s["pickles"][0]["error"]
                findings += [{**f, "member": n} for f in pickle_findings(s["globals"])]
        findings = archive_findings(data) + findings
        row(p, "pytorch", "unsafe" if findings else "safe", findings, made_by, why, "torch",
            tensors=None if findings else tensors, globals_=g, expect=expect,
            members=zip_names(data))

    def legacy_row(p, why, made_by, expect, tensors=None):
        data = p.read_bytes()
        assert data[:4] == b"\x80\x02\x8a\x0a", data[:4]
        s = stream_globals(data, count=5)
        assert all(not q["error"] for q in s["pickles"]) and len(s["pickles"]) == 5, s
        findings = pickle_findings(s["globals"])
        row(p, "pytorch", "unsafe" if findings else "safe", findings, made_by, why, "torch",
            tensors=None if findings else tensors, globals_=s["globals"], expect=expect,
            pickle_ends=[q["end"] for q in s["pickles"]])
        return s

    p = d / "model.pt"
    torch.save(sd, p)
    torch_zip_row(p, "an ordinary torch.save zip of a state_dict (OrderedDict, "
                  "_rebuild_tensor_v2, FloatStorage: all allowlisted)", f"{tv} torch.save",
                  [], tensors=2)
    assert set(torch.load(p, weights_only=True)) == set(sd)  # torch agrees: safe
    good_zip = p.read_bytes()

    p = d / "legacy.pth"
    torch.save(sd, p, _use_new_zipfile_serialization=False)
    s = legacy_row(p, "the legacy format (_use_new_zipfile_serialization=False): five pickles "
                   "then raw storages; every global allowlisted",
                   f"{tv} torch.save(_use_new_zipfile_serialization=False)", [], tensors=2)
    assert set(torch.load(p, weights_only=True)) == set(sd)
    legacy = p.read_bytes()

    ckpt = {"epoch": 3, "global_step": 30, "pytorch-lightning_version": "2.5.0",
            "state_dict": collections.OrderedDict(
                [("model.linear.weight", torch.randn(2, 3)),
                 ("model.linear.bias", torch.zeros(2))]),
            "hyper_parameters": {"lr": 0.001, "hidden": [3, 2], "name": "tiny",
                                 "use_bias": True}}
    p = d / "model.ckpt"
    torch.save(ckpt, p)
    torch_zip_row(p, "a Lightning-style .ckpt: torch.save of a dict with a nested state_dict "
                  "and plain hyper-parameters", f"{tv} torch.save", [], tensors=2)
    assert set(torch.load(p, weights_only=True)) == set(ckpt)

    def rebuild(out: pathlib.Path, data: bytes, replace: dict | None = None,
                extra: list | None = None) -> pathlib.Path:
        """The zip `data` rewritten by zipfile: the same members in the same
        order (names, dates, stored), some replaced, some appended."""
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            members = [(i, zf.read(i.filename)) for i in infos]
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zo:
            for i, b in members:
                b = (replace or {}).get(i.filename, b)
                zo.writestr(zipfile.ZipInfo(i.filename, date_time=i.date_time), b)
            for name, b in extra or []:
                zo.writestr(zipfile.ZipInfo(name, date_time=ZIP_DATE), b)
        names = zip_names(out.read_bytes())
        assert names == [i.filename for i, _ in members] + [n for n, _ in extra or []], names
        return out

    zv = f"{tv} torch.save, rebuilt by zipfile ({py()})"
    pk_name = [n for n in zip_names(good_zip) if n.endswith("/data.pkl")][0]
    evil_pkl = inject(zip_member(good_zip, pk_name), SYSTEM_OPS)
    p = rebuild(d / "evil_data_pkl.pt", good_zip, replace={pk_name: evil_pkl})
    torch_zip_row(p, "model.pt with data.pkl replaced (same members, same order): os.system "
                  "run and popped right after PROTO, then the original state_dict pickle "
                  "(torch.load without weights_only runs it and still loads the weights)",
                  f"{zv}, data.pkl injected with hand-written opcodes", ["posix.system"])

    benign_pkl = pickle.dumps({"note": "not extracted"}, protocol=2)
    p = rebuild(d / "archive_path_dotdot.pt", good_zip, extra=[("../escape.pkl", benign_pkl)])
    torch_zip_row(p, "model.pt plus a member named ../escape.pkl (a benign pickle): "
                  "archive-path only", f"{zv}, a member appended", ["../escape.pkl"])
    p = rebuild(d / "archive_path_abs.pt", good_zip, extra=[("/abs/evil.pkl", benign_pkl)])
    torch_zip_row(p, "model.pt plus a member named /abs/evil.pkl (a benign pickle): "
                  "archive-path only", f"{zv}, a member appended", ["/abs/evil.pkl"])

    ends = [q["end"] for q in s["pickles"]]
    starts = [0] + ends[:-1]
    pk = [legacy[a:b] for a, b in zip(starts, ends)]
    rest = legacy[ends[-1]:]
    lv = f"{tv} torch.save(_use_new_zipfile_serialization=False), pickle rewritten by hand"
    p = write(d / "legacy_evil_object.pth",
              b"".join(pk[:3]) + inject(pk[3], SYSTEM_OPS) + pk[4] + rest)
    legacy_row(p, "legacy.pth with os.system injected into pickle 4 (the object); the "
               "storages follow unchanged", lv, ["posix.system"])
    p = write(d / "legacy_evil_keys.pth",
              b"".join(pk[:4]) + inject(pk[4], EVAL_OPS) + rest)
    legacy_row(p, "legacy.pth with __builtin__.eval injected into pickle 5 (the storage-key "
               "list, which a scanner of the object pickle alone misses)", lv,
               ["__builtin__.eval"])
    return {"torch": torch.__version__, "numpy": np.__version__}


# ------------------------------------------------------------ keras

def part_keras() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import h5py
    import keras
    import numpy as np
    import tensorflow as tf

    clear("keras")
    d = OUT / "keras"
    d.mkdir(parents=True, exist_ok=True)
    kv = f"keras {keras.__version__} Model.save ({keras.backend.backend()} {tf.__version__})"

    def keras_row(p, why, made_by, expect):
        data = p.read_bytes()
        names = zip_names(data)
        assert "config.json" in names, names
        config = json.loads(zip_member(data, "config.json"))
        findings = archive_findings(data) + keras_config_findings(config)
        row(p, "keras", "unsafe" if findings else "safe", findings, made_by, why, "keras",
            expect=expect, members=names)

    keras.utils.set_random_seed(7)
    m = keras.Sequential([keras.Input((3,), name="x"), keras.layers.Dense(2, name="dense")],
                         name="tiny")
    p = d / "model.keras"
    m.save(p)
    keras_row(p, "an ordinary model: Input(3) -> Dense(2); every module keras/keras.*, no "
              "registered package", kv, [])

    keras.utils.set_random_seed(7)
    m = keras.Sequential([keras.Input((3,), name="x"),
                          keras.layers.Lambda(lambda t: t * 2.0 + 1.0, name="double_plus_one"),
                          keras.layers.Dense(2, name="dense")], name="with_lambda")
    p = d / "lambda.keras"
    m.save(p)
    keras_row(p, "a Lambda layer (lambda t: t * 2.0 + 1.0): config.json carries its marshalled "
              "bytecode, which load_model(safe_mode=False) runs", kv, ["Lambda"])

    @keras.saving.register_keras_serializable(package="evilpkg")
    class Scale(keras.layers.Layer):
        def __init__(self, factor=2.0, **kw):
            super().__init__(**kw)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    Scale.__module__ = "evilpkg.layers"  # as if imported from a package evilpkg
    keras.utils.set_random_seed(7)
    m = keras.Sequential([keras.Input((3,), name="x"), Scale(name="scale"),
                          keras.layers.Dense(2, name="dense")], name="with_custom")
    p = d / "custom_layer.keras"
    m.save(p)
    keras_row(p, "a custom layer registered with @register_keras_serializable(package="
              "'evilpkg'): its config object has \"module\": \"evilpkg.layers\" and "
              "\"registered_name\": \"evilpkg>Scale\", one keras-custom-module finding each "
              "(loading imports evilpkg.layers)", kv, ["evilpkg.layers", "evilpkg>Scale"])

    src = (d / "model.keras").read_bytes()
    with zipfile.ZipFile(io.BytesIO(src)) as zf:
        members = [(i, zf.read(i.filename)) for i in zf.infolist()]
    p = d / "archive_path.keras"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as zo:
        for i, b in members:
            zo.writestr(zipfile.ZipInfo(i.filename, date_time=i.date_time), b)
        zo.writestr(zipfile.ZipInfo("../escape.txt", date_time=ZIP_DATE), b"not extracted\n")
    keras_row(p, "model.keras plus a member named ../escape.txt: archive-path only",
              f"{kv}, rebuilt by zipfile ({py()}) with a member appended", ["../escape.txt"])
    return {"keras": keras.__version__, "backend": keras.backend.backend(),
            "tensorflow": tf.__version__, "h5py": h5py.version.version,
            "numpy": np.__version__}


# ------------------------------------------------------------ manifest

NOTES = [
    "Expected rows follow ../shared/SCAN.md; the allowlist is PICKLE.md section 4 "
    "(src/format/pytorch/allowlist.rs, 147 names).",
    "Every expected finding is computed from the written bytes by this script's reference "
    "scanner (pickletools.genops, zipfile's member names, the .keras config.json, "
    "GGUFReader's key/value table) and checked against the evidence each sample was built "
    "to hold; nothing was unpickled, rendered or imported. The safe torch files were also "
    "loaded by torch.load(weights_only=True), which accepts them.",
    "A pickle cut after REDUCE (pickles/truncated_after_reduce.pkl) is unsafe, not invalid: "
    "pickle.load imports and calls the global before it reaches the missing bytes.",
    "A bare pickle is format 'pickle' whatever its extension (pickles/subprocess_popen_p2.pt, "
    "pickles/weights.bin): the kind of a file comes from its bytes (PICKLE.md section 1).",
    "Templates with several of SCAN.md's tokens give one gguf-chat-template finding per "
    "template key; its evidence is the first token in SCAN.md's order, which in these "
    "samples is also the leftmost token; evidence_any lists every token found.",
    "keras/custom_layer.keras: two keras-custom-module findings on one config object (its "
    "'module' and its 'registered_name'); evidence the module text and the whole "
    "registered name.",
    "Files not byte-identical from run to run: torch/legacy*.pth (storage keys are memory "
    "addresses), keras/*.keras (the weights member's date, shared_object_id). Every other "
    "file is. Verdicts and findings never change.",
]


def write_manifest(part: str, libraries: dict) -> None:
    for lib, ver in libraries.items():
        want = EXPECTED.get(lib)
        if want and not str(ver).startswith(want):
            print(f"warning: {lib} {ver}, the committed fixtures used {want}", file=sys.stderr)
    mp = OUT / MANIFEST
    old = json.loads(mp.read_text()) if mp.exists() else {}
    rows = [r for r in old.get("files", []) if r.get("part") not in (part, "meta")]
    rows += ROWS
    prov = old.get("provenance", {})
    prov[part] = {"command": f"python {SCRIPT} --part {part}",
                  "python": platform.python_version(), "libraries": libraries,
                  "date": os.environ.get("FIXTURE_DATE", datetime.date.today().isoformat()),
                  "platform": f"{platform.system()} {platform.machine()}"}
    # the folder's own two files are files a folder scan lists too
    readme = OUT / "README.md"
    if readme.exists():
        data = readme.read_bytes()
        rows.append({"path": "README.md", "format": None, "verdict": "unknown", "findings": [],
                     "rules": [], "evidence": [], "tensors": None, "bytes": len(data),
                     "sha256": hashlib.sha256(data).hexdigest(), "made_by": "hand-written",
                     "why": "this folder's provenance note (a folder scan lists it)",
                     "part": "meta"})
    rows.append({"path": MANIFEST, "format": None, "verdict": "unknown", "findings": [],
                 "rules": [], "evidence": [], "tensors": None, "bytes": None, "sha256": None,
                 "made_by": SCRIPT, "why": "this manifest (a folder scan lists it)",
                 "part": "meta"})
    rows.sort(key=lambda r: r["path"])
    paths = [r["path"] for r in rows]
    assert len(paths) == len(set(paths)), paths
    on_disk = sorted(q.relative_to(OUT).as_posix() for q in OUT.rglob("*") if q.is_file())
    missing = [x for x in paths if x not in on_disk and x != MANIFEST]
    assert not missing, missing
    total = sum(q.stat().st_size for q in OUT.rglob("*") if q.is_file() and q != OUT / MANIFEST)
    counts: dict = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    manifest = {
        "generator": {"script": SCRIPT,
                      "commands": [f"python {SCRIPT} --part {x}" for x in PART_DIRS]},
        "provenance": dict(sorted(prov.items())),
        "conventions": CONVENTIONS,
        "notes": NOTES,
        "verdicts": dict(sorted(counts.items())),
        "total_bytes_without_manifest": total,
        "files": rows,
    }
    mp.write_text(json.dumps(manifest, indent=1, ensure_ascii=True, allow_nan=False) + "\n")
    unlisted = [x for x in on_disk if x not in paths]
    if unlisted:
        print(f"note: on disk but not yet in the manifest (another part's): {unlisted}",
              file=sys.stderr)
    print(f"{part}: {len(ROWS)} files; manifest {len(rows)} rows; "
          f"{total} bytes in {OUT} (without the manifest)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", required=True, choices=sorted(PART_DIRS))
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    libraries = {"base": part_base, "torch": part_torch, "keras": part_keras}[args.part]()
    write_manifest(args.part, libraries)


if __name__ == "__main__":
    main()
