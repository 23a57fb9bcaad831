#!/usr/bin/env python3
"""NumPy fixtures for Tensorscope's .npy/.npz reader, made by real numpy.

Writes small .npy and .npz files into tests/data/numpy/ with np.save,
np.lib.format.write_array, np.savez, np.savez_compressed and Python's
zipfile, and tests/data/numpy/MANIFEST.json: where they came from (python,
numpy and ml_dtypes versions, this script, the date) and, for every file and
every array in it, what Tensorscope must report (see ../shared/NUMPY.md):
the tensor's name, dtype, shape, the sha256 and (under 4 KB) the hex of its
bytes in C order little-endian, and its statistics in float64. Files numpy
can write but Tensorscope must refuse (object arrays holding a pickle,
structured, string, datetime, complex128, long double, ml_dtypes void) are
listed with "refused": true and the reason.

The Rust tests (tests/it/numpy/) read the committed files and the manifest:
they never need Python or numpy. Re-run this only to change the fixtures:

    python3 -m venv /tmp/npvenv
    /tmp/npvenv/bin/pip install numpy==2.4.6 ml_dtypes==0.6.0
    /tmp/npvenv/bin/python scripts/make_numpy_fixtures.py

(paths are relative to this file, so it runs from anywhere). The object-array
fixtures hold a pickle whose __reduce__ would create an empty file named
PWNED_BY_PICKLE in the working folder if anything unpickled them; this
script writes them and never loads them (their headers are read as text).
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import io
import json
import math
import os
import pathlib
import platform
import struct
import sys
import zipfile
from fractions import Fraction

import ml_dtypes
import numpy as np

EXPECTED_NUMPY = "2.4.6"
EXPECTED_ML_DTYPES = "0.6.0"
SCRIPT = "scripts/make_numpy_fixtures.py"
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "numpy"
HEX_LIMIT = 4096  # arrays of fewer bytes carry their bytes as hex

# numpy kind + itemsize -> Tensorscope's dtype name.
DTYPE_NAMES = {
    ("b", 1): "BOOL",
    ("u", 1): "U8",
    ("i", 1): "I8",
    ("u", 2): "U16",
    ("u", 4): "U32",
    ("u", 8): "U64",
    ("i", 2): "I16",
    ("i", 4): "I32",
    ("i", 8): "I64",
    ("f", 2): "F16",
    ("f", 4): "F32",
    ("f", 8): "F64",
    ("c", 8): "C64",
}


class PickleBomb:
    """Unpickling this calls open("PWNED_BY_PICKLE", "a"): an empty file in
    the working folder, harmless, and the proof that something ran a pickle.
    Pickling it (np.save) runs nothing."""

    def __reduce__(self):
        return (open, ("PWNED_BY_PICKLE", "a"))


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----------------------------------------------------------------- values


def int_values(dtype: str, n: int, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    extremes = [lo, hi, 0, 1, lo + 1, hi - 1]
    if lo < 0:
        extremes += [-1, -2]
    r = rng(seed)
    # Random values over the whole range (as Python ints: exact for 64 bits).
    span = hi - lo + 1
    rand = [lo + int(r.integers(0, 2**62)) * span // 2**62
            for _ in range(max(0, n - len(extremes)))]
    return np.array((extremes + rand)[:n], dtype=dtype)


def float_values(dtype: str, n: int, seed: int) -> np.ndarray:
    t = np.dtype(dtype)
    finfo = np.finfo(t)
    r = rng(seed)
    # Magnitudes are kept moderate for F64 so that sums of squares stay
    # finite in float64 (the std reference is exact otherwise).
    big = {2: 65504.0, 4: 3.0e38, 8: 1.0e150}[t.itemsize]
    special = [0.0, -0.0, 1.0, -1.0, 0.5, big, -big, float(finfo.smallest_subnormal),
               -float(finfo.smallest_normal), float(finfo.eps)]
    rand = (r.standard_normal(max(0, n - len(special))) * 3.0).tolist()
    return np.array((special + rand)[:n], dtype=dtype)


# Pythagorean magnitudes: |z| is exact in float64 whichever way it is taken.
TRIPLES = [(3, 4), (5, 12), (8, 15), (7, 24), (20, 21), (9, 40), (0, 2), (1, 0)]


def complex_values(n: int, seed: int) -> np.ndarray:
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
    vals[0] = 0j
    return np.array(vals, dtype=np.complex64)


def sample(descr: str, n: int, seed: int) -> np.ndarray:
    t = np.dtype(descr)
    le = t.newbyteorder("<") if t.itemsize > 1 else t
    if t.kind == "b":
        a = rng(seed).integers(0, 2, n).astype(bool)
        a[0], a[1] = False, True
        return a
    if t.kind in "iu":
        return int_values(le.str, n, seed).astype(t)
    if t.kind == "f":
        return float_values(le.str, n, seed).astype(t)
    if t.kind == "c":
        return complex_values(n, seed).astype(t)
    raise ValueError(descr)


def specials(descr: str) -> np.ndarray:
    t = np.dtype(descr)
    if t.kind == "c":
        nan, inf = float("nan"), float("inf")
        vals = [complex(3, 4), complex(nan, 1), complex(inf, nan), complex(-inf, 0),
                complex(0, -inf), 0j, complex(-0.0, -0.0), complex(1.5, -2),
                complex(nan, nan), complex(-6, 8)]
        return np.array(vals, dtype=np.complex64).astype(t)
    vals = [1.0, float("nan"), 2.5, float("inf"), -float("inf"), 0.0, -0.0, float("nan"),
            -3.25, float("inf"), 1e-3, -7.0]
    return np.array(vals, dtype=t)


# ------------------------------------------------------ expected figures


def tensorscope_dtype(a: np.ndarray) -> str:
    return DTYPE_NAMES[(a.dtype.kind, a.dtype.itemsize)]


def c_le_bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


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
    return {"mean": float(mean), "std": math.sqrt(var), "abs_mean": float(abs_mean)}


def float_stats(x: np.ndarray) -> dict:
    """x: float64 values in C order."""
    finite = x[np.isfinite(x)]
    vals = [float(v) for v in finite.tolist()]
    out = {
        "count": int(x.size),
        "nan": int(np.isnan(x).sum()),
        "pos_inf": int((x == np.inf).sum()),
        "neg_inf": int((x == -np.inf).sum()),
        "zeros": int((x == 0).sum()),
        "min": (float(min(vals)) + 0.0) if vals else None,  # -0 is reported as 0
        "max": (float(max(vals)) + 0.0) if vals else None,
    }
    out.update(moments(vals))
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


def magnitude(z: np.ndarray) -> np.ndarray:
    """|z| as NUMPY.md/Tensorscope define it: in float64 from the float32
    parts, +Inf when either part is infinite (as hypot), else NaN with NaN."""
    re = z.real.astype(np.float64)
    im = z.imag.astype(np.float64)
    with np.errstate(invalid="ignore"):
        mag = np.sqrt(re * re + im * im)
    return np.where(np.isinf(re) | np.isinf(im), np.inf, mag)


def stats(a: np.ndarray) -> dict:
    flat = np.ascontiguousarray(a).reshape(-1)
    kind = a.dtype.kind
    if kind == "b":
        return int_stats([int(v) for v in flat.tolist()])
    if kind in "iu":
        return int_stats([int(v) for v in flat.tolist()])
    if kind == "f":
        return float_stats(flat.astype(np.float64))
    if kind == "c":
        out = float_stats(magnitude(flat))
        out["real"] = float_stats(flat.real.astype(np.float64))
        out["imag"] = float_stats(flat.imag.astype(np.float64))
        return out
    raise ValueError(a.dtype)


def read_npy_header(data: bytes) -> dict:
    """The header of a .npy image as text, parsed with ast.literal_eval:
    never np.load, so an object array's pickle is never run."""
    assert data[:6] == b"\x93NUMPY", data[:6]
    major, minor = data[6], data[7]
    if major == 1:
        (hlen,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", data[8:12])
        start = 12
    text = data[start:start + hlen].decode("utf-8" if major == 3 else "latin-1")
    d = ast.literal_eval(text)
    return {
        "version": [major, minor],
        "descr": d["descr"] if isinstance(d["descr"], str) else repr(d["descr"]),
        "fortran_order": d["fortran_order"],
        "shape": list(d["shape"]),
        "header_end": start + hlen,
    }


def array_entry(name: str, a: np.ndarray, image: bytes) -> dict:
    """The manifest entry of array `a` (the value np.load gives), written as
    the .npy image `image`."""
    h = read_npy_header(image)
    raw = c_le_bytes(a)
    entry = {
        "name": name,
        "dtype": tensorscope_dtype(a),
        "shape": list(a.shape),
        "descr": h["descr"],
        "fortran_order": h["fortran_order"],
        "npy_version": h["version"],
        "numel": int(a.size),
        "nbytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "stats": stats(a),
    }
    if len(raw) < HEX_LIMIT:
        entry["c_le_hex"] = raw.hex()
    assert h["shape"] == list(a.shape)
    assert len(image) == h["header_end"] + len(raw), (name, len(image), h)
    return entry


def npy_image(a: np.ndarray, version=None) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=version, allow_pickle=False)
    return buf.getvalue()


def check_roundtrip(path: pathlib.Path, expected: dict) -> None:
    """Loads a good file with numpy (allow_pickle=False) and checks it holds
    exactly the arrays the manifest says."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            # np.load lists non-.npy members (a README.txt) too, under their full name.
            arrays = {n[: -len(".npy")] for n in z.zip.namelist() if n.endswith(".npy")}
            got = {k: z[k] for k in z.files if k in arrays}
    else:
        got = {None: np.load(path, allow_pickle=False)}
    assert set(got) == set(expected), (path, set(got), set(expected))
    for k, a in got.items():
        b = expected[k]
        assert a.dtype == b.dtype and a.shape == b.shape, (path, k)
        assert c_le_bytes(a) == c_le_bytes(b), (path, k)


# ---------------------------------------------------------------- writers

FILES: list[dict] = []


def add_npy(file: str, a: np.ndarray, note: str, version=None, name: str | None = None,
            also_accepted_names: list | None = None) -> None:
    """A .npy written by np.save (or write_array when a version is forced)."""
    path = OUT / file
    if version is None:
        with open(path, "wb") as f:
            np.save(f, a, allow_pickle=False)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version, allow_pickle=False)
    image = path.read_bytes()
    loaded = np.load(path, allow_pickle=False)
    if name is None:
        name = file[: -len(".npy")] if file.endswith(".npy") else file
    entry = array_entry(name, loaded, image)
    entry["member"] = None
    entry["data_offsets"] = [read_npy_header(image)["header_end"], len(image)]
    if also_accepted_names:
        entry["also_accepted_names"] = also_accepted_names
    check_roundtrip(path, {None: a})
    FILES.append({"file": file, "container": "npy", "refused": False, "note": note,
                  "arrays": [entry]})


def member_entries(path: pathlib.Path, arrays: dict) -> list:
    """Manifest entries of every .npy member of the zip at `path`; `arrays`
    maps np.load's key to the array it must give."""
    blob = path.read_bytes()
    entries = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            image = zf.read(info)
            key = info.filename[: -len(".npy")]
            e = array_entry(key, arrays[key], image)
            e["member"] = info.filename
            e["compression"] = {zipfile.ZIP_STORED: "stored",
                                zipfile.ZIP_DEFLATED: "deflated"}[info.compress_type]
            if info.compress_type == zipfile.ZIP_STORED:
                lh = info.header_offset
                assert blob[lh:lh + 4] == b"PK\x03\x04"
                n, m = struct.unpack("<HH", blob[lh + 26:lh + 30])
                start = lh + 30 + n + m + read_npy_header(image)["header_end"]
                e["data_offsets"] = [start, start + e["nbytes"]]
                assert blob[start:start + e["nbytes"]] == image[-e["nbytes"]:] or e["nbytes"] == 0
            else:
                e["data_offsets"] = None
            entries.append(e)
    return entries


def other_members(path: pathlib.Path) -> list:
    with zipfile.ZipFile(path) as zf:
        return [i.filename for i in zf.infolist() if not i.filename.endswith(".npy")]


def add_npz(file: str, writer, arrays: dict, note: str) -> None:
    path = OUT / file
    writer(path)
    check_roundtrip(path, arrays)
    FILES.append({"file": file, "container": "npz", "refused": False, "note": note,
                  "non_array_members": other_members(path),
                  "arrays": member_entries(path, arrays)})


def add_refused(file: str, writer, reason: str, message_any: list, member: str | None = None
                ) -> None:
    """A file numpy writes that Tensorscope must refuse. Its header is read
    as text; the file is never loaded."""
    path = OUT / file
    writer(path)
    if member is None:
        h = read_npy_header(path.read_bytes())
    else:
        with zipfile.ZipFile(path) as zf:
            h = read_npy_header(zf.read(member))
    entry = {"file": file, "container": "npz" if member else "npy", "refused": True,
             "reason": reason, "descr": h["descr"], "npy_version": h["version"],
             "message_any": message_any}
    if member:
        entry["refused_member"] = member
    FILES.append(entry)


def save_to(a: np.ndarray, allow_pickle: bool = False):
    def write(path: pathlib.Path) -> None:
        with open(path, "wb") as f:
            np.save(f, a, allow_pickle=allow_pickle)
    return write


def write_array_to(a: np.ndarray, version):
    def write(path: pathlib.Path) -> None:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version, allow_pickle=False)
    return write


# ------------------------------------------------------------------ main


LE = ["|b1", "|u1", "|i1", "<u2", "<u4", "<u8", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8",
      "<c8"]
SHORT = {"|b1": "bool", "|u1": "u1", "|i1": "i1"}


def main() -> int:
    if np.__version__ != EXPECTED_NUMPY or ml_dtypes.__version__ != EXPECTED_ML_DTYPES:
        print(f"warning: numpy {np.__version__} / ml_dtypes {ml_dtypes.__version__}, "
              f"expected {EXPECTED_NUMPY} / {EXPECTED_ML_DTYPES}", file=sys.stderr)
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if old.is_file():
            old.unlink()

    # Every supported dtype, little-endian, 1-D (np.save: format 1.0).
    for i, d in enumerate(LE):
        short = SHORT.get(d, d[1:])
        add_npy(f"le_{short}.npy", sample(d, 24 + i, 100 + i), f"{d} little-endian, np.save")
    # Every multi-byte one big-endian: same values, '>' descr.
    for i, d in enumerate(x for x in LE if x[0] == "<"):
        be = ">" + d[1:]
        add_npy(f"be_{d[1:]}.npy", sample(be, 20 + i, 200 + i), f"{be} big-endian, np.save")

    # Storage order: Fortran 2-D and 3-D, and big-endian Fortran.
    add_npy("fortran_2d_f4.npy", np.asfortranarray(sample("<f4", 12, 300).reshape(3, 4)),
            "Fortran order 3x4 F32")
    add_npy("fortran_3d_i2.npy", np.asfortranarray(sample("<i2", 24, 301).reshape(2, 3, 4)),
            "Fortran order 2x3x4 I16")
    add_npy("fortran_3d_c8.npy", np.asfortranarray(sample("<c8", 30, 302).reshape(2, 5, 3)),
            "Fortran order 2x5x3 C64")
    add_npy("fortran_be_f8.npy", np.asfortranarray(sample(">f8", 15, 303).reshape(3, 5)),
            "Fortran order 3x5 big-endian F64")
    add_npy("fortran_be_u4_3d.npy", np.asfortranarray(sample(">u4", 60, 304).reshape(3, 4, 5)),
            "Fortran order 3x4x5 big-endian U32")
    add_npy("c_order_3d_f2.npy", sample("<f2", 24, 305).reshape(2, 3, 4), "C order 2x3x4 F16")

    # Shapes: 0-d, 0 elements.
    add_npy("scalar_0d_f8.npy", np.array(-2.75, dtype="<f8"), "0-d F64 (shape ())")
    add_npy("scalar_0d_be_i4.npy", np.array(-123456, dtype=">i4"), "0-d big-endian I32")
    add_npy("empty_3x0_f4.npy", np.zeros((3, 0), dtype="<f4"), "shape (3, 0): no element")
    add_npy("empty_0_i8.npy", np.zeros((0,), dtype="<i8"), "shape (0,) I64")

    # NaN and infinities.
    for d in ["<f2", "<f4", "<f8", "<c8", ">f4"]:
        tag = ("be_" if d[0] == ">" else "") + d[1:]
        add_npy(f"specials_{tag}.npy", specials(d), f"{d} with NaN, +Inf, -Inf, +-0")

    # Format versions.
    v = sample("<f4", 10, 400).reshape(2, 5)
    add_npy("version_1_0_f4.npy", v, "format 1.0 forced", version=(1, 0))
    add_npy("version_2_0_f4.npy", v, "format 2.0 forced (4-byte header length)", version=(2, 0))
    add_npy("version_3_0_f4.npy", v, "format 3.0 forced (UTF-8 header)", version=(3, 0))
    add_npy("version_2_0_be_c8.npy", sample(">c8", 6, 401), "format 2.0, big-endian C64",
            version=(2, 0))

    # Naming and detection.
    add_npy("model.embed.weight.npy", sample("<f4", 8, 500).reshape(2, 4),
            "dotted file name: tensor model.embed.weight")
    add_npy("renamed_npy.bin", sample("<i4", 9, 501).reshape(3, 3),
            "a .npy under a .bin name: detected by its magic. NUMPY.md names a .npy's tensor "
            "by the file name less '.npy', so with no '.npy' suffix the whole name stays; "
            "the bare stem is accepted too",
            also_accepted_names=["renamed_npy"])

    # .npz from np.savez: positional arrays and keyword names with '/' and '.'.
    pos0 = sample("<f4", 6, 600)
    pos1 = sample("<i8", 4, 601).reshape(2, 2)
    kw = {"layer/0/weight": sample("<f2", 12, 602).reshape(3, 4),
          "model.embed.weight": sample("<f8", 10, 603).reshape(5, 2),
          "flags": sample("|b1", 7, 604)}
    add_npz("savez_names.npz", lambda p: np.savez(p, pos0, pos1, **kw),
            {"arr_0": pos0, "arr_1": pos1, **kw},
            "np.savez: positional arr_0/arr_1, names with '/' and '.', stored, zip64")

    # .npz from np.savez_compressed: deflated, mixed dtypes, Fortran and big-endian members.
    comp = {
        "weight": sample("<f4", 64, 700).reshape(8, 8),
        "fortran": np.asfortranarray(sample("<f8", 12, 701).reshape(3, 4)),
        "big_endian": sample(">i4", 10, 702),
        "be_fortran": np.asfortranarray(sample(">f2", 12, 703).reshape(4, 3)),
        "mask": sample("|b1", 9, 704),
        "codes": sample("|u1", 33, 705),
        "phase": sample("<c8", 8, 706),
        "scalar": np.array(7, dtype="<u8"),
        "empty": np.zeros((0, 4), dtype="<f4"),
        "specials": specials("<f4"),
    }
    add_npz("savez_compressed_mixed.npz", lambda p: np.savez_compressed(p, **comp), comp,
            "np.savez_compressed: deflated members of mixed dtypes")

    # Stored and deflated members in one archive, plus a README.txt.
    mixed = {
        "stored/f4": sample("<f4", 20, 800).reshape(4, 5),
        "deflated/i2": sample("<i2", 30, 801).reshape(5, 6),
        "stored/be_u2": sample(">u2", 8, 802),
        "deflated/fortran_c8": np.asfortranarray(sample("<c8", 6, 803).reshape(2, 3)),
        "zip64/f8": sample("<f8", 5, 804),
    }

    def write_mixed(path: pathlib.Path) -> None:
        with zipfile.ZipFile(path, "w") as zf:
            for key, a in mixed.items():
                method = zipfile.ZIP_DEFLATED if key.startswith("deflated") else zipfile.ZIP_STORED
                if key.startswith("zip64"):
                    # As np.savez does: zip64 extra fields forced on a small member.
                    with zf.open(zipfile.ZipInfo(key + ".npy", (2024, 1, 1, 0, 0, 0)), "w",
                                 force_zip64=True) as f:
                        f.write(npy_image(a))
                    continue
                info = zipfile.ZipInfo(key + ".npy", (2024, 1, 1, 0, 0, 0))
                info.compress_type = method
                zf.writestr(info, npy_image(a))
            info = zipfile.ZipInfo("README.txt", (2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, "Not an array: a .npz may carry other files.\n")

    add_npz("zipfile_stored_and_deflated.npz", write_mixed, mixed,
            "Python zipfile: stored and deflated .npy members, one with zip64 extras, "
            "and a README.txt that is not a tensor")

    # ---------------------------------------------------------- refused
    obj = np.array([1, "two", PickleBomb(), 4.5], dtype=object)
    add_refused("refused_object_pickle.npy", save_to(obj, allow_pickle=True),
                "object array: its data is a pickle (whose __reduce__ would create "
                "PWNED_BY_PICKLE in the working folder)", ["object", "|O", "pickle"])
    structured = np.zeros(4, dtype=[("a", "<f4"), ("b", "<i2")])
    add_refused("refused_structured.npy", save_to(structured),
                "structured (record) dtype: a list descr",
                ["structured", "record", "struct", "field", "compound", "[("])
    structured3 = np.zeros(2, dtype=[("\u00e9t\u00e9", "<f4"), ("b", "<u1")])
    add_refused("refused_structured_utf8_v3.npy", write_array_to(structured3, (3, 0)),
                "structured dtype with a non-latin-1 field name: format 3.0 (UTF-8 header)",
                ["structured", "record", "struct", "field", "compound", "[("])
    add_refused("refused_unicode_U5.npy", save_to(np.array(["abc", "hello"], dtype="<U5")),
                "unicode strings <U5", ["<U5", "unicode", "string", "str"])
    add_refused("refused_bytes_S3.npy", save_to(np.array([b"ab", b"xyz"], dtype="|S3")),
                "byte strings |S3", ["|S3", "S3", "bytes", "string"])
    add_refused("refused_datetime64.npy",
                save_to(np.array(["2024-01-01", "2025-06-30"], dtype="datetime64[D]")),
                "datetime64", ["<M8", "datetime"])
    add_refused("refused_timedelta64.npy",
                save_to(np.array([1, 2, 3], dtype="timedelta64[ms]")),
                "timedelta64", ["<m8", "timedelta"])
    add_refused("refused_complex128.npy", save_to(np.array([1 + 2j, 3 - 4j], dtype="<c16")),
                "complex128: no safetensors dtype", ["<c16", "complex128", "c16"])
    ld = np.array([1.5, -2.25], dtype=np.longdouble)
    add_refused("refused_longdouble.npy", save_to(ld),
                f"long double ({ld.dtype.str}): no safetensors dtype",
                [ld.dtype.str, ld.dtype.str[1:], "longdouble", "long double", "float128",
                 "float96"])
    bf = np.array([1.0, -2.0, 0.5], dtype=ml_dtypes.bfloat16)
    add_refused("refused_bfloat16_void.npy", save_to(bf),
                "ml_dtypes bfloat16 under np.save: a void descr (V2), the bytes' meaning lost",
                ["V2", "void"])
    f8 = np.array([1.0, -2.0, 0.5], dtype=ml_dtypes.float8_e4m3fn)
    add_refused("refused_float8_void.npy", save_to(f8),
                "ml_dtypes float8_e4m3fn under np.save: a void descr (V1)", ["V1", "void"])
    good = sample("<f4", 5, 900)
    add_refused("refused_npz_object_member.npz",
                lambda p: np.savez(p, good=good, payload=obj),
                "an .npz with one good member and one object (pickle) member: the whole "
                "archive is refused", ["object", "|O", "pickle"], member="payload.npy")

    total = sum(f.stat().st_size for f in OUT.iterdir() if f.is_file())
    manifest = {
        "generator": {
            "script": SCRIPT,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "ml_dtypes": ml_dtypes.__version__,
            "date": os.environ.get("FIXTURE_DATE", datetime.date.today().isoformat()),
            "platform": f"{platform.system()} {platform.machine()}",
        },
        "conventions": {
            "bytes": "c_le_hex / sha256: the array as np.load(allow_pickle=False) gives it, "
                     "in C order, little-endian: "
                     "np.ascontiguousarray(a).astype(a.dtype.newbyteorder('<')).tobytes(); "
                     f"c_le_hex only under {HEX_LIMIT} bytes",
            "stats": "over the finite values; min/max exact (integers as integers, -0 as 0); "
                     "mean, std (population) and abs_mean exact, rounded once to float64; "
                     "C64: figures of |z| in float64 from the float32 parts (+Inf when a "
                     "part is infinite), real and imag of each part; BOOL as 0/1 integers",
            "data_offsets": "absolute byte range of the data in the file for a .npy or a "
                            "stored member, null for a deflated member",
            "message_any": "a refusal's message names the type: it contains one of these "
                           "(case-insensitive)",
        },
        "total_bytes": total,
        "files": FILES,
    }
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(FILES)} files, {total} bytes in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
