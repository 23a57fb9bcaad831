#!/usr/bin/env python3
"""GGUF fixtures for Tensorscope's GGUF reader, made by the real gguf-py.

Writes small GGUF files into tests/data/gguf/ with gguf-py's GGUFWriter
(PyPI `gguf` 0.19.0, the reference named in ../shared/GGUF.md), block data
made by gguf.quants.quantize wherever gguf-py can quantize a type (random
but valid raw blocks where it cannot), and tests/data/gguf/MANIFEST.json:
where they came from (python, gguf, numpy and safetensors versions, this
script, the date) and, for every file, what Tensorscope must report: the
version, alignment, absolute tensor_data_offset, the metadata by GGUF.md's
`info` rules, and per tensor its name, ggml type, dims, row-major shape,
stored bytes and offsets, the sha256 of the stored bytes, the sha256 (and,
under 4 KB, the hex) of the values a reader must give, and their statistics.

Every figure in the manifest is gguf-py's own reading of the written file
(GGUFReader for the layout and metadata, gguf.quants.dequantize for block
values), and is asserted equal to what was written.

Files:
  types.gguf                    one tensor per ggml type of GGUF.md, metadata of
                                every value type, default alignment (32)
  llama_tiny.gguf               a tiny Llama as convert_hf_to_gguf.py lays it out
                                (Q/K permuted), general.alignment 64
  llama_tiny_q4_0.gguf          the same model quantized Q4_0 (norms F32, embeddings Q8_0)
  llama_tiny_hf/                its Hugging Face original (model.safetensors,
                                config.json)
  split/tiny-0000N-of-00002.gguf  a two-part split model (GGUFWriter's splitter)
  v2.gguf                       a version-2 file (a v3 file with its version patched)

The Rust tests read the committed files and the manifest: they never need
Python or gguf-py. Re-run this only to change the fixtures:

    python3 -m venv /work/venv-gguf
    /work/venv-gguf/bin/pip install gguf==0.19.0 numpy==2.4.6 safetensors==0.8.0
    /work/venv-gguf/bin/python scripts/make_gguf_fixtures.py

(paths are relative to this file, so it runs from anywhere; FIXTURE_DATE
overrides the date written in the manifest). The output is byte-identical
from run to run (fixed seeds) except for the manifest's date.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import shutil
import struct
import sys
from fractions import Fraction

import gguf
import numpy as np
import safetensors
import safetensors.numpy
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf.constants import GGML_QUANT_SIZES

EXPECTED_GGUF = "0.19.0"
EXPECTED_NUMPY = "2.4.6"
EXPECTED_SAFETENSORS = "0.8.0"
SCRIPT = "scripts/make_gguf_fixtures.py"
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "gguf"
KEEP = {"README.md"}  # hand-written, never deleted
HEX_LIMIT = 4096  # values of fewer bytes carry their bytes as hex
SUMMARY_OVER = 64  # GGUF.md: arrays longer than this are summarised
SUMMARY_HEAD = 16

assert sys.byteorder == "little"

# GGUF.md's type tables, in its order.
STORED_TYPES = ["F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"]
BLOCK_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
               "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
               "IQ1_M", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4"]
# Valid ids that gguf-py cannot decode (GGUF.md): not in the fixtures.
UNDECODABLE = ["Q8_1", "Q8_K", "Q1_0"]
# GGUFReader gives these with their own numpy type; everything else as uint8
# blocks (BF16 included) that gguf.quants.dequantize turns into float32.
NATIVE = {QT.F32: np.float32, QT.F16: np.float16, QT.F64: np.float64, QT.I8: np.int8,
          QT.I16: np.int16, QT.I32: np.int32, QT.I64: np.int64}

# Where the f16 scale fields of a block sit (byte offsets), for the block
# types whose data is made as random raw bytes (gguf-py 0.19.0 has no
# quantizer for them): the layouts of gguf/quants.py's dequantize_blocks.
F16_FIELDS = {
    "Q2_K": [80, 82],     # scales[16] qs[64] d dmin
    "Q3_K": [108],        # hmask[32] qs[64] scales[12] d
    "Q4_K": [0, 2],       # d dmin scales[12] qs[128]
    "Q5_K": [0, 2],       # d dmin scales[12] qh[32] qs[128]
    "Q6_K": [208],        # ql[128] qh[64] scales[16] d
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ3_XXS": [0], "IQ1_S": [0], "IQ4_NL": [0],
    "IQ3_S": [0], "IQ2_S": [0], "IQ4_XS": [0],
    "IQ1_M": [],          # d in the top nibbles of the four u16 words at 48..56
    "NVFP4": [],          # four ue4m3 scale bytes at 0..4, no f16
}

FILES: list[dict] = []
MADE_BY: dict[str, str] = {}


# ------------------------------------------------------------------ stats
# As scripts/make_pytorch_fixtures.py: exact, rounded once to float64.


def exact_sqrt(x: Fraction) -> float:
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


def stats(values: np.ndarray) -> dict:
    flat = values.reshape(-1)
    if flat.dtype.kind in "iu":
        vals = [int(v) for v in flat.tolist()]
        out = {"count": len(vals), "nan": 0, "pos_inf": 0, "neg_inf": 0,
               "zeros": sum(1 for v in vals if v == 0),
               "min": min(vals) if vals else None, "max": max(vals) if vals else None}
        out.update(moments(vals))
        return out
    x = flat.astype(np.float64).tolist()  # exact for f16/f32/f64
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


# --------------------------------------------------------------- metadata


def scalar(part: np.ndarray, vtype: VT):
    v = part[0]
    if vtype == VT.BOOL:
        return bool(v)
    if vtype in (VT.FLOAT32, VT.FLOAT64):
        return float(v)  # float32 widened exactly; json writes its shortest repr
    return int(v)


def decode_parts(parts: list, i: int, vtype: VT):
    """The value starting at parts[i], from GGUFReader's parsed parts (the
    reader keeps every inner array's own [type, length] parts, although its
    ReaderField.contents() flattens nested arrays). Returns (value, next i)."""
    if vtype == VT.STRING:
        return bytes(parts[i + 1]).decode("utf-8"), i + 2
    if vtype == VT.ARRAY:
        itype = VT(int(parts[i][0]))
        n = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(n):
            v, i = decode_parts(parts, i, itype)
            items.append(v)
        return {"__array__": itype.name, "items": items}, i
    return scalar(parts[i], vtype), i + 1


def info_value(v):
    """GGUF.md's `info` rules: arrays in full up to 64 elements, longer ones
    as {type, len, head (first 16)}, recursively."""
    if isinstance(v, dict) and "__array__" in v:
        items = v["items"]
        if len(items) > SUMMARY_OVER:
            return {"type": v["__array__"], "len": len(items),
                    "head": [info_value(x) for x in items[:SUMMARY_HEAD]]}
        return [info_value(x) for x in items]
    return v


def plain(v):
    """A decoded value with the array markers removed (for comparisons)."""
    if isinstance(v, dict) and "__array__" in v:
        return [plain(x) for x in v["items"]]
    return v


def leaf_types(v) -> list:
    if isinstance(v, dict) and "__array__" in v:
        if v["__array__"] != "ARRAY":
            return [v["__array__"]]
        return [t for x in v["items"] for t in leaf_types(x)]
    return []


def flat(v):
    if isinstance(v, list):
        return [y for x in v for y in flat(x)]
    return [v]


def read_metadata(reader: gguf.GGUFReader) -> tuple[dict, dict, dict]:
    """(info metadata, type of each key, plain values) in file order; the
    GGUF.version / GGUF.tensor_count / GGUF.kv_count pseudo-fields that
    GGUFReader puts first are not keys of the file."""
    meta, types, values = {}, {}, {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") and field.offset < 24:
            continue
        vtype = VT(int(field.parts[2][0]))
        v, end = decode_parts(field.parts, 3, vtype)
        assert end == len(field.parts), name
        # The reader's own reading agrees (contents() flattens nested arrays,
        # and reads every inner array with the first one's element type).
        if vtype != VT.ARRAY or v["__array__"] != "ARRAY":
            assert plain(v) == field.contents(), name
        elif len({t for t in leaf_types(v)}) == 1:
            assert flat(plain(v)) == field.contents(), name
        meta[name] = info_value(v)
        types[name] = f"ARRAY[{v['__array__']}]" if vtype == VT.ARRAY else vtype.name
        values[name] = plain(v)
    return meta, types, values


def expected_value(v, vtype: VT, sub=None):
    """What a written Python value reads back as (FLOAT32 rounded)."""
    if vtype == VT.FLOAT32:
        return float(np.float32(v))
    if vtype == VT.ARRAY:
        if sub is None:
            sub = VT.get_type(v[0])
        return [expected_value(x, sub) for x in v]
    return v


# ----------------------------------------------------------------- files


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def values_of(t) -> np.ndarray:
    """The values a reader must give for tensor t: stored types as they are
    (gguf-py keeps their numpy type), block types and BF16 as gguf-py's
    dequantize (float32), row-major."""
    if t.tensor_type in NATIVE:
        v = np.asarray(t.data)
        assert v.dtype == NATIVE[t.tensor_type]
    else:
        with np.errstate(all="ignore"):
            v = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
        assert v.dtype == np.float32, (t.name, v.dtype)
    assert list(v.shape) == [int(d) for d in reversed(t.shape.tolist())], (t.name, v.shape)
    return np.ascontiguousarray(v)


def describe(rel: str, note: str, written: dict, meta_expected: dict | None = None,
             shard: str | None = None) -> dict:
    """The manifest entry of one GGUF file, from GGUFReader. `written`: name
    -> (type name, stored bytes as written) to check against."""
    path = OUT / rel
    blob = path.read_bytes()
    reader = gguf.GGUFReader(path)
    version = int(reader.fields["GGUF.version"].parts[0][0])
    assert version == struct.unpack_from("<I", blob, 4)[0]
    n_tensors = int(reader.fields["GGUF.tensor_count"].parts[0][0])
    n_kv = int(reader.fields["GGUF.kv_count"].parts[0][0])
    meta, types, values = read_metadata(reader)
    assert len(meta) == n_kv
    if meta_expected is not None:
        assert list(values) == list(meta_expected), (rel, list(values), list(meta_expected))
        for k, v in meta_expected.items():
            assert json.dumps(values[k]) == json.dumps(v), (rel, k, values[k], v)
    data_offset = int(reader.data_offset)
    alignment = int(reader.alignment)
    last = reader.tensors[-1].field if reader.tensors else None
    infos_end = last.offset + sum(int(p.nbytes) for p in last.parts)
    assert data_offset % alignment == 0 and 0 <= data_offset - infos_end < alignment
    tensors = []
    for t in reader.tensors:
        qt = QT(int(t.tensor_type))
        block, type_size = GGML_QUANT_SIZES[qt]
        dims = [int(d) for d in t.shape.tolist()]
        numel = math.prod(dims)
        nbytes = numel // block * type_size
        assert nbytes == int(t.n_bytes) and numel == int(t.n_elements)
        start = int(t.data_offset) - data_offset
        stored = blob[int(t.data_offset):int(t.data_offset) + nbytes]
        assert len(stored) == nbytes and stored == np.asarray(t.data).tobytes(), t.name
        wtype, wbytes = written[t.name]
        assert wtype == qt.name and wbytes == stored, (rel, t.name)
        vals = values_of(t)
        vbytes = vals.tobytes()
        e = {"name": t.name, "dtype": qt.name, "type_id": int(qt), "ggml_dims": dims,
             "shape": list(reversed(dims)), "numel": numel, "nbytes": nbytes,
             "data_offsets": [start, start + nbytes], "sha256_stored": sha(stored),
             "values_dtype": str(vals.dtype), "sha256_values": sha(vbytes)}
        if len(vbytes) < HEX_LIMIT:
            e["hex_values"] = vbytes.hex()
        e["stats"] = stats(vals)
        if shard is not None:
            e["shard"] = shard
        tensors.append(e)
    assert len(tensors) == n_tensors == len(written)
    return {"file": rel, "note": note, "size": len(blob), "sha256_file": sha(blob),
            "format": "gguf", "version": version, "n_tensors": n_tensors, "n_kv": n_kv,
            "alignment": alignment, "tensor_infos_end": infos_end,
            "tensor_data_offset": data_offset,
            "metadata": meta, "metadata_types": types, "tensors": tensors}


def write_gguf(path: pathlib.Path, writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file(path)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def add(writer: gguf.GGUFWriter, written: dict, name: str, arr: np.ndarray,
        qtype: QT | None = None) -> None:
    """writer.add_tensor, remembering the stored bytes and type."""
    arr = np.ascontiguousarray(arr)
    if qtype is None:
        writer.add_tensor(name, arr)
        qtype = {np.dtype(v): k for k, v in NATIVE.items()}[arr.dtype]
    else:
        writer.add_tensor(name, arr, raw_dtype=qtype)
    written[name] = (qtype.name, arr.tobytes())


# ------------------------------------------------------------ types.gguf


def f16_code(x: float) -> int:
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


def f32_bits(u: int) -> float:
    return float(np.array([u], dtype=np.uint32).view(np.float32)[0])


def stored_tensors(rng: np.random.Generator) -> dict:
    f32 = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, -1e-45, 1.1754944e-38,
                    3.4028235e38, -3.4028235e38, 1.0, -2.5, 0.1, 1e-40], dtype=np.float32)
    # NaNs with a payload and a sign: the bytes must come through unchanged.
    f32 = np.concatenate([f32, np.array([0x7FC00001, 0xFFC00000], dtype=np.uint32).view(np.float32)])
    f32 = np.concatenate([f32, rng.standard_normal(16).astype(np.float32)]).reshape(2, 16)
    f16 = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0, 2.0 ** -24, -(2.0 ** -24),
                    2.0 ** -14, 65504.0, -65504.0, 1.0, -2.5, 0.1, 6.1e-5], dtype=np.float16)
    f16 = np.concatenate([f16, np.array([0x7E01, 0xFE00], dtype=np.uint16).view(np.float16)])
    f16 = np.concatenate([f16, rng.standard_normal(16).astype(np.float16)]).reshape(2, 16)
    # BF16 through gguf-py's own converter (round to nearest even, NaN made
    # quiet); values chosen exactly representable in bf16.
    bf = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0, 2.0 ** -133, -(2.0 ** -133),
                   2.0 ** -126, f32_bits(0x7F7F0000), -f32_bits(0x7F7F0000), 1.0, -2.5,
                   0.09375, 2.0 ** -130, f32_bits(0xFFC00000), 3.0], dtype=np.float32)
    bf = np.concatenate([bf, rng.standard_normal(16).astype(np.float32)]).reshape(2, 16)
    f64 = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, -5e-324,
                    2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
                    1.0, 1 / 3], dtype=np.float64).reshape(2, 6)
    i8 = np.array([-128, 127, 0, -1, 1, 42, -42, 100] + list(range(-4, 4)), dtype=np.int8)
    i16 = np.concatenate([np.array([-32768, 32767, 0, -1], dtype=np.int16),
                          rng.integers(-1000, 1000, 20).astype(np.int16)]).reshape(2, 3, 4)
    i32 = np.array([-2**31, 2**31 - 1, 0, -1, 1, 16777217, -16777217, 123456789],
                   dtype=np.int32).reshape(2, 4)
    i64 = np.array([-2**63, 2**63 - 1, 0, -1, 2**53 + 1, -(2**53 + 1), 1, 2**62],
                   dtype=np.int64).reshape(2, 4)
    return {"F32": f32, "F16": f16, "BF16": bf, "F64": f64, "I8": i8, "I16": i16, "I32": i32,
            "I64": i64}


def quantizable(qt: QT) -> bool:
    try:
        gguf.quants.quantize(np.zeros((1, GGML_QUANT_SIZES[qt][0]), dtype=np.float32), qt)
        return True
    except NotImplementedError:
        return False


def quantized_block_data(name: str, qt: QT, rng: np.random.Generator) -> np.ndarray:
    """gguf.quants.quantize of random float32 data (TQ1_0/TQ2_0: noisy
    ternary data), with one all-zero block; MXFP4 also gets blocks small enough for its e8m0 exponents 0 and 1 (the
    subnormal scales)."""
    block = GGML_QUANT_SIZES[qt][0]
    cols = 256 if block == 256 else 2 * block
    x = rng.standard_normal((2, cols)).astype(np.float32)
    if name in ("TQ1_0", "TQ2_0"):  # ternary data, so that -1, 0 and 1 are all common
        x = (rng.integers(-1, 2, size=(2, cols)) * 0.75
             + rng.uniform(-0.1, 0.1, size=(2, cols))).astype(np.float32)
    x[1, :block] = 0.0
    if name == "MXFP4":  # e = floor(log2(max|x|)) + 125: 1 and 0
        for row, scale in [(0, 1.5 * 2.0 ** -124), (1, 1.5 * 2.0 ** -125)]:
            blk = x[row, block:2 * block]
            x[row, block:2 * block] = blk / np.abs(blk).max() * np.float32(scale)
    if name == "Q8_0":  # a 3-D block tensor: shape [2, 2, 32]
        x = x.reshape(2, 2, cols // 2)
    with np.errstate(all="ignore"):
        q = gguf.quants.quantize(x, qt)
    assert q.dtype == np.uint8
    if name == "MXFP4":
        es = sorted({int(b) for b in q.reshape(-1, GGML_QUANT_SIZES[qt][1])[:, 0]})
        assert 0 in es and 1 in es, es
    return q


def raw_block_data(name: str, qt: QT, rng: np.random.Generator) -> np.ndarray:
    """Random bytes in the type's block layout with the scale fields set to
    small finite values, so that every decoded value is finite."""
    block, type_size = GGML_QUANT_SIZES[qt]
    cols = {256: 256, 64: 128, 32: 64}[block]
    n_blocks = 2 * cols // block
    b = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    mags = rng.uniform(0.002, 0.03, size=(n_blocks, 2))
    # d: alternately positive and negative; a 32-element type also gets an f16
    # subnormal and a -0.0 scale (decoded values then all ±0).
    d = [f16_code(m if i % 2 == 0 else -m) for i, m in enumerate(mags[:, 0])]
    if n_blocks >= 4:
        d[2], d[3] = 0x0155, 0x8000
    dmin = [f16_code(m) for m in mags[:, 1]]
    fields = F16_FIELDS[name]
    for i in range(n_blocks):
        for j, off in enumerate(fields):
            code = d[i] if j == 0 else dmin[i]
            b[i, off:off + 2] = np.array([code], dtype=np.uint16).view(np.uint8)
    if name == "IQ1_M":
        words = b[:, 48:56].copy().view(np.uint16)  # (n_blocks, 4)
        for i in range(n_blocks):
            for k in range(4):
                nib = (d[i] >> (4 * k)) & 0xF
                words[i, k] = (int(words[i, k]) & 0x0FFF) | (nib << 12)
        b[:, 48:56] = words.view(np.uint8)
    if name == "NVFP4":
        # ue4m3 scale bytes: zero, the 0x7F "zero" code, subnormals, the
        # smallest and largest normals, codes with the top bit set, random.
        special = [0x00, 0x7F, 0x01, 0x07, 0x08, 0x7E, 0x80, 0xFF]
        scales = b[:, :4].reshape(-1)
        scales[:len(special)] = special
        b[:, :4] = scales.reshape(n_blocks, 4)
    return b.reshape(2, -1)


def make_types() -> None:
    rng = np.random.default_rng(1001)
    w = gguf.GGUFWriter(None, "tensorscope_test")
    meta: dict = {"general.architecture": "tensorscope_test"}

    def kv(key, val, vtype, sub=None):
        w.add_key_value(key, val, vtype, sub_type=sub)
        meta[key] = expected_value(val, vtype, sub)

    kv("general.name", "Tensorscope GGUF types fixture", VT.STRING)
    kv("test.uint8", 255, VT.UINT8)
    kv("test.int8", -128, VT.INT8)
    kv("test.uint16", 65535, VT.UINT16)
    kv("test.int16", -32768, VT.INT16)
    kv("test.uint32", 4294967295, VT.UINT32)
    kv("test.int32", -2147483648, VT.INT32)
    kv("test.float32", 0.1, VT.FLOAT32)
    kv("test.float32_neg_zero", -0.0, VT.FLOAT32)
    kv("test.float32_subnormal", 1e-45, VT.FLOAT32)
    kv("test.float32_max", 3.4028234663852886e38, VT.FLOAT32)
    kv("test.bool_true", True, VT.BOOL)
    kv("test.bool_false", False, VT.BOOL)
    kv("test.string", "h\u00e9llo w\u00f6rld \u2014 \u65e5\u672c\u8a9e \U0001F999 tab\t nl\n "
       "cr\r nul\x00 bell\x07 esc\x1b del\x7f quote\" backslash\\ end", VT.STRING)
    kv("test.string_empty", "", VT.STRING)
    kv("test.uint64", 18446744073709551615, VT.UINT64)
    kv("test.uint64_2p53_plus_1", 9007199254740993, VT.UINT64)
    kv("test.int64", -9223372036854775808, VT.INT64)
    kv("test.int64_neg", -9007199254740993, VT.INT64)
    kv("test.float64", 0.1, VT.FLOAT64)
    kv("test.float64_max", 1.7976931348623157e308, VT.FLOAT64)
    kv("test.float64_subnormal", 5e-324, VT.FLOAT64)
    kv("test.array.int32", [1, -2, 3, 2147483647], VT.ARRAY)
    kv("test.array.uint8", [0, 1, 255], VT.ARRAY, VT.UINT8)
    kv("test.array.int8", [-128, 0, 127], VT.ARRAY, VT.INT8)
    kv("test.array.uint16", [0, 65535], VT.ARRAY, VT.UINT16)
    kv("test.array.int16", [-32768, 32767], VT.ARRAY, VT.INT16)
    kv("test.array.uint32", [0, 4294967295], VT.ARRAY, VT.UINT32)
    kv("test.array.uint64", [0, 9007199254740993, 18446744073709551615], VT.ARRAY, VT.UINT64)
    kv("test.array.int64", [-9223372036854775808, 9223372036854775807], VT.ARRAY, VT.INT64)
    kv("test.array.float32", [0.5, -1.25, 0.1, 3.4028234663852886e38, -0.0], VT.ARRAY)
    kv("test.array.float64", [0.1, -1e-300, 1.7976931348623157e308], VT.ARRAY, VT.FLOAT64)
    kv("test.array.bool", [True, False, True], VT.ARRAY)
    kv("test.array.string", ["a", "\u00fcn\u00ef", "\U0001F999", "", "line\nbreak", "tab\t\x00"],
       VT.ARRAY)
    kv("test.array.nested", [[1, 2], [3, 4, 5]], VT.ARRAY, VT.ARRAY)
    kv("test.array.nested_strings", [["a", "b"], ["\u00e7"]], VT.ARRAY, VT.ARRAY)
    kv("test.array.nested3", [[[1], [2, 3]], [[4]]], VT.ARRAY, VT.ARRAY)
    # Each inner array carries its own element type: they may differ.
    kv("test.array.nested_mixed", [[1, 2], ["x"], [True, False], [0.5]], VT.ARRAY, VT.ARRAY)
    kv("test.array.len64", list(range(64)), VT.ARRAY)
    kv("test.array.len65", [i / 3 for i in range(65)], VT.ARRAY)
    kv("test.array.len70_strings", [f"s{i}\u00b7" for i in range(70)], VT.ARRAY)
    kv("test.array.nested_inner_long", [list(range(100, 170)), [7]], VT.ARRAY, VT.ARRAY)
    kv("test.array.nested_outer_long", [[i, -i] for i in range(66)], VT.ARRAY, VT.ARRAY)

    written: dict = {}
    for name, arr in stored_tensors(rng).items():
        if name == "BF16":
            add(w, written, f"t.{name}", gguf.quants.quantize(arr, QT.BF16), QT.BF16)
            MADE_BY[name] = "gguf.quants.quantize (from float32 values exact in bf16)"
        else:
            add(w, written, f"t.{name}", arr)
            MADE_BY[name] = "stored (numpy array as written)"
    for name in BLOCK_TYPES:
        if not hasattr(QT, name):
            MADE_BY[name] = "missing: this gguf-py has no such GGMLQuantizationType"
            continue
        qt = QT[name]
        if quantizable(qt):
            data = quantized_block_data(name, qt, rng)
            MADE_BY[name] = "gguf.quants.quantize"
        else:
            data = raw_block_data(name, qt, rng)
            MADE_BY[name] = "random raw bytes (gguf-py 0.19.0 cannot quantize it)"
        add(w, written, f"t.{name}", data, qt)

    write_gguf(OUT / "types.gguf", w)
    FILES.append(describe(
        "types.gguf",
        "one tensor per ggml type of GGUF.md (stored F32 F16 BF16 F64 I8 I16 I32 I64 with NaN, "
        "±Inf, -0, subnormals, extremes; every block type, 2 rows); metadata of every value type, "
        "nested arrays, arrays of 64 and more than 64; general.alignment absent (32)",
        written, meta))


# ------------------------------------------------------- llama_tiny.gguf

H, H_KV, N_EMBD, N_FF, N_LAYER, VOCAB = 4, 2, 64, 128, 2, 300
HEAD_DIM = N_EMBD // H

# llama.cpp's tensor mapping for Llama (gguf-py tensor_mapping.py), HF -> GGUF.
HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
for _n in range(N_LAYER):
    for _hf, _gg in [("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
                     ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
                     ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
                     ("mlp.down_proj", "ffn_down"), ("input_layernorm", "attn_norm"),
                     ("post_attention_layernorm", "ffn_norm")]:
        HF_TO_GGUF[f"model.layers.{_n}.{_hf}.weight"] = f"blk.{_n}.{_gg}.weight"


def permute(weights: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute, in numpy (GGUF.md)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def unpermute(weights: np.ndarray, n: int) -> np.ndarray:
    """GGUF.md's inverse, applied to the row-major data."""
    return (weights.reshape(n, weights.shape[0] // n // 2, 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def hf_state_dict() -> dict:
    rng = np.random.default_rng(2002)
    sd = {}

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) * 0.05).astype(np.float16)

    def norm():
        return (1.0 + rng.standard_normal(N_EMBD) * 0.1).astype(np.float32)

    sd["model.embed_tokens.weight"] = mat(VOCAB, N_EMBD)
    for n in range(N_LAYER):
        p = f"model.layers.{n}."
        sd[p + "self_attn.q_proj.weight"] = mat(H * HEAD_DIM, N_EMBD)
        sd[p + "self_attn.k_proj.weight"] = mat(H_KV * HEAD_DIM, N_EMBD)
        sd[p + "self_attn.v_proj.weight"] = mat(H_KV * HEAD_DIM, N_EMBD)
        sd[p + "self_attn.o_proj.weight"] = mat(N_EMBD, H * HEAD_DIM)
        sd[p + "mlp.gate_proj.weight"] = mat(N_FF, N_EMBD)
        sd[p + "mlp.up_proj.weight"] = mat(N_FF, N_EMBD)
        sd[p + "mlp.down_proj.weight"] = mat(N_EMBD, N_FF)
        sd[p + "input_layernorm.weight"] = norm()
        sd[p + "post_attention_layernorm.weight"] = norm()
    sd["model.norm.weight"] = norm()
    sd["lm_head.weight"] = mat(VOCAB, N_EMBD)
    return sd


def vocab() -> tuple[list, list, list]:
    """A sentencepiece-style vocabulary: <unk> <s> </s>, 256 byte tokens,
    then pieces (some non-ASCII)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, BYTE (gguf.TokenType)
    pieces = ["\u2581the", "\u2581a", "ing", "\u2581of", "\u2581and", "er", "\u2581to", "ed",
              "\u2581in", "es", "\u2581caf\u00e9", "\u2581\u65e5\u672c", "\U0001F999", "\u00df",
              "\u2581\u0414\u0430", "tion", "\u2581is", "ly", "\u2581that", "\u2581it", "re",
              "\u2581for", "on", "\u2581be", "\u2581with", "\u2581as", "\u2581on", "al", "st",
              "\u2581was", "\u2581he", "\u2581at", "\u2581by", "\u2581we", "le", "\u2581this",
              "\u2581you", "nt", "\u2581or", "\u2581are", "ent"]
    tokens += pieces
    types += [1] * len(pieces)  # NORMAL
    scores = [0.0] * 259 + [-(i + 1) * 0.37 for i in range(len(pieces))]
    assert len(tokens) == len(set(tokens)) == VOCAB
    return tokens, scores, types


def llama_writer(name: str, file_type) -> gguf.GGUFWriter:
    """The tiny Llama's metadata, as convert_hf_to_gguf.py writes it."""
    w = gguf.GGUFWriter(None, "llama")
    w.add_type("model")
    # (The name's length puts the end of the tensor infos where rounding up
    # to 32 and to 64 differ, so a reader that ignores general.alignment
    # finds the wrong data section.)
    w.add_name(name)
    w.add_custom_alignment(64)
    w.add_block_count(N_LAYER)
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(H)
    w.add_head_count_kv(H_KV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-05)
    w.add_file_type(file_type)
    w.add_vocab_size(VOCAB)
    w.add_rope_dimension_count(HEAD_DIM)
    tokens, scores, ttypes = vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(ttypes)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    return w


def make_llama_q4_0() -> None:
    """The tiny Llama quantized as llama-quantize's Q4_0 lays it out: the
    layers' matrices Q4_0, token_embd and output Q8_0, norms F32 (values
    from gguf.quants.quantize of the float32 weights)."""
    sd = hf_state_dict()
    w = llama_writer("Tensorscope Tiny Llama Q4_0", gguf.LlamaFileType.MOSTLY_Q4_0)
    written: dict = {}
    for hf_name in sorted(sd):
        data = sd[hf_name].astype(np.float32)
        if hf_name.endswith("q_proj.weight"):
            data = permute(data, H, H)
        elif hf_name.endswith("k_proj.weight"):
            data = permute(data, H, H_KV)
        name = HF_TO_GGUF[hf_name]
        if data.ndim == 1:
            add(w, written, name, data)
            continue
        qt = QT.Q8_0 if name in ("token_embd.weight", "output.weight") else QT.Q4_0
        add(w, written, name, gguf.quants.quantize(np.ascontiguousarray(data), qt), qt)
    write_gguf(OUT / "llama_tiny_q4_0.gguf", w)
    e = describe("llama_tiny_q4_0.gguf",
                 "llama_tiny.gguf's model quantized as llama-quantize Q4_0 lays it out: the "
                 "layers' matrices Q4_0, token_embd and output Q8_0, norms F32 (gguf.quants."
                 "quantize of the float32 weights, attn_q/attn_k permuted first)", written)
    gguf_to_hf = {v: k for k, v in HF_TO_GGUF.items()}
    for t in e["tensors"]:
        t["hf_name"] = gguf_to_hf[t["name"]]
    e["hf_original"] = "llama_tiny_hf/model.safetensors"
    FILES.append(e)


def make_llama() -> None:
    sd = hf_state_dict()
    hf_dir = OUT / "llama_tiny_hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    safetensors.numpy.save_file(sd, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": N_EMBD, "intermediate_size": N_FF, "num_hidden_layers": N_LAYER,
        "num_attention_heads": H, "num_key_value_heads": H_KV, "head_dim": HEAD_DIM,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "vocab_size": VOCAB, "bos_token_id": 1, "eos_token_id": 2,
        "tie_word_embeddings": False, "torch_dtype": "float16", "hidden_act": "silu",
    }
    (hf_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    w = llama_writer("Tensorscope Tiny Llama (alignment 64 fixture)",
                     gguf.LlamaFileType.MOSTLY_F16)

    # convert_hf_to_gguf.py iterates the safetensors names in sorted order.
    written: dict = {}
    permuted: dict = {}
    for hf_name in sorted(sd):
        data = sd[hf_name]
        if hf_name.endswith("q_proj.weight"):
            data = permute(data, H, H)
            permuted[HF_TO_GGUF[hf_name]] = H
        elif hf_name.endswith("k_proj.weight"):
            data = permute(data, H, H_KV)
            permuted[HF_TO_GGUF[hf_name]] = H_KV
        add(w, written, HF_TO_GGUF[hf_name], data)
    write_gguf(OUT / "llama_tiny.gguf", w)

    e = describe("llama_tiny.gguf",
                 "a tiny Llama (2 blocks, n_embd 64, n_ff 128, 4 heads, 2 KV heads, vocab 300) "
                 "as convert_hf_to_gguf.py --outtype f16 lays it out: matrices F16, norms F32, "
                 "attn_q/attn_k permuted; general.alignment 64; converted from "
                 "llama_tiny_hf/model.safetensors", written)
    gguf_to_hf = {v: k for k, v in HF_TO_GGUF.items()}
    for t in e["tensors"]:
        t["hf_name"] = gguf_to_hf[t["name"]]
        t["permuted"] = t["name"] in permuted
        if t["permuted"]:
            t["permute_n_head"] = permuted[t["name"]]
    e["hf_original"] = "llama_tiny_hf/model.safetensors"
    assert e["alignment"] == 64 and e["tensor_data_offset"] % 64 == 0
    assert -(-e["tensor_infos_end"] // 32) * 32 != e["tensor_data_offset"]
    assert e["metadata_types"]["general.alignment"] == "UINT32"
    assert e["metadata"]["tokenizer.ggml.tokens"]["len"] == VOCAB
    assert e["metadata_types"]["tokenizer.ggml.scores"] == "ARRAY[FLOAT32]"
    assert e["metadata_types"]["tokenizer.ggml.token_type"] == "ARRAY[INT32]"
    FILES.append(e)

    # The HF original, read back by the official safetensors library and by
    # hand (8-byte header length, JSON header, data).
    rel = "llama_tiny_hf/model.safetensors"
    blob = (OUT / rel).read_bytes()
    (hlen,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + hlen])
    st_meta = header.pop("__metadata__", {})
    loaded = safetensors.numpy.load_file(str(OUT / rel))
    base = 8 + hlen
    reader = gguf.GGUFReader(OUT / "llama_tiny.gguf")
    by_name = {t.name: t for t in reader.tensors}
    st_tensors = []
    for name, h in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = h["data_offsets"]
        raw = blob[base + a:base + b]
        arr = loaded[name]
        assert raw == np.ascontiguousarray(arr).tobytes() == sd[name].tobytes(), name
        assert h["dtype"] == {np.float16: "F16", np.float32: "F32"}[arr.dtype.type]
        gname = HF_TO_GGUF[name]
        gdata = np.asarray(by_name[gname].data)
        if gname in permuted:
            # Un-permuting the GGUF data gives the original byte for byte.
            assert unpermute(gdata, permuted[gname]).tobytes() == raw, name
            assert gdata.tobytes() != raw, name
        else:
            assert gdata.tobytes() == raw, name
        te = {"name": name, "dtype": h["dtype"], "shape": h["shape"],
              "numel": int(math.prod(h["shape"])), "nbytes": b - a, "data_offsets": [a, b],
              "sha256": sha(raw)}
        if len(raw) < HEX_LIMIT:
            te["hex"] = raw.hex()
        te["stats"] = stats(arr)
        te["gguf_name"] = gname
        te["permuted_in_gguf"] = gname in permuted
        st_tensors.append(te)
    FILES.append({
        "file": rel,
        "note": "the Hugging Face original of llama_tiny.gguf (written by the safetensors "
                "library; config.json beside it): HF names, q_proj/k_proj unpermuted",
        "size": len(blob), "sha256_file": sha(blob), "format": "safetensors",
        "hf_original_of": "llama_tiny.gguf", "config": "llama_tiny_hf/config.json",
        "header_len": hlen, "metadata": st_meta, "tensors": st_tensors,
    })


# -------------------------------------------------------------- split/


def make_split() -> None:
    rng = np.random.default_rng(3003)
    w = gguf.GGUFWriter(None, "llama", split_max_tensors=3)
    meta = {"general.architecture": "llama"}
    w.add_name("Tensorscope split fixture")
    meta["general.name"] = "Tensorscope split fixture"
    w.add_block_count(1)
    meta["llama.block_count"] = 1
    w.add_embedding_length(64)
    meta["llama.embedding_length"] = 64

    def q8(rows, cols):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        return gguf.quants.quantize(x, QT.Q8_0)

    written: dict = {}
    plan = [("token_embd.weight", q8(32, 64), QT.Q8_0),
            ("blk.0.attn_norm.weight", (1 + rng.standard_normal(64) * 0.1).astype(np.float32), None),
            ("blk.0.ffn_down.weight", q8(64, 64), QT.Q8_0),
            ("output_norm.weight", (1 + rng.standard_normal(64) * 0.1).astype(np.float32), None),
            ("output.weight", q8(32, 64), QT.Q8_0)]
    for name, arr, qt in plan:
        add(w, written, name, arr, qt)
    (OUT / "split").mkdir(parents=True, exist_ok=True)
    write_gguf(OUT / "split" / "tiny.gguf", w)
    parts = ["tiny-00001-of-00002.gguf", "tiny-00002-of-00002.gguf"]
    assert sorted(p.name for p in (OUT / "split").iterdir()) == parts
    names = [n for n, _, _ in plan]
    chunks = [names[:3], names[3:]]
    for i, (part, chunk) in enumerate(zip(parts, chunks)):
        split_kv = {"split.no": i, "split.count": 2, "split.tensors.count": len(names)}
        expected = (dict(meta, **split_kv) if i == 0 else split_kv)
        e = describe(f"split/{part}",
                     f"part {i + 1} of 2 of a split model (GGUFWriter split_max_tensors=3, as "
                     "convert_hf_to_gguf.py --split-max-tensors; gguf-split's layout): "
                     + ("all the metadata plus split.*" if i == 0 else "only split.* metadata"),
                     {n: written[n] for n in chunk}, expected, shard=part)
        assert e["metadata_types"]["split.no"] == "UINT16"
        assert e["metadata_types"]["split.count"] == "UINT16"
        assert e["metadata_types"]["split.tensors.count"] == "INT32"
        if i == 0:
            e["split_parts"] = [f"split/{p}" for p in parts]
        FILES.append(e)


# ------------------------------------------------------------- v2.gguf


def make_v2() -> None:
    rng = np.random.default_rng(4004)
    w = gguf.GGUFWriter(None, "tensorscope_test")
    w.add_name("Tensorscope GGUF v2 fixture")
    w.add_uint32("test.answer", 42)
    written: dict = {}
    add(w, written, "a", np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5)
    add(w, written, "b", gguf.quants.quantize(rng.standard_normal((2, 32)).astype(np.float32),
                                              QT.Q8_0), QT.Q8_0)
    path = OUT / "v2.gguf"
    write_gguf(path, w)
    blob = bytearray(path.read_bytes())
    assert blob[:4] == b"GGUF" and struct.unpack_from("<I", blob, 4)[0] == 3
    struct.pack_into("<I", blob, 4, 2)  # v2 and v3 share the layout (GGUF.md)
    path.write_bytes(bytes(blob))
    e = describe("v2.gguf", "a version-2 file: a GGUFWriter v3 file with its version field "
                 "(bytes 4..8) patched to 2; two small tensors (F32, Q8_0)", written,
                 {"general.architecture": "tensorscope_test",
                  "general.name": "Tensorscope GGUF v2 fixture", "test.answer": 42})
    assert e["version"] == 2
    FILES.append(e)


# ------------------------------------------------------------------ main


def main() -> int:
    gguf_version = importlib.metadata.version("gguf")
    if (gguf_version != EXPECTED_GGUF or np.__version__ != EXPECTED_NUMPY
            or safetensors.__version__ != EXPECTED_SAFETENSORS):
        print(f"warning: gguf {gguf_version} / numpy {np.__version__} / safetensors "
              f"{safetensors.__version__}, expected {EXPECTED_GGUF} / {EXPECTED_NUMPY} / "
              f"{EXPECTED_SAFETENSORS}", file=sys.stderr)
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if old.name in KEEP:
            continue
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()

    make_types()
    make_llama()
    make_llama_q4_0()
    make_split()
    make_v2()

    known = {t.name for t in QT}
    types = []
    for name in STORED_TYPES + BLOCK_TYPES:
        if name not in known:
            continue
        qt = QT[name]
        block, size = GGML_QUANT_SIZES[qt]
        types.append({"name": name, "id": int(qt), "block_elements": block, "block_bytes": size,
                      "tensor": f"t.{name}", "made_by": MADE_BY[name]})
    total_bytes = sum(f.stat().st_size for f in OUT.rglob("*")
                      if f.is_file() and f.name not in KEEP)
    manifest = {
        "generator": {
            "script": SCRIPT,
            "python": platform.python_version(),
            "gguf": gguf_version,
            "numpy": np.__version__,
            "safetensors": safetensors.__version__,
            "date": os.environ.get("FIXTURE_DATE", datetime.date.today().isoformat()),
            "platform": f"{platform.system()} {platform.machine()}",
        },
        "conventions": {
            "file": "path relative to tests/data/gguf",
            "size/sha256_file": "of the file as written; every file is byte-identical from run "
                                "to run of this script (same gguf-py, numpy, safetensors)",
            "format": "gguf, or safetensors for the Hugging Face original",
            "version": "the header's u32 version (2 or 3)",
            "n_tensors/n_kv": "the header's counts",
            "alignment": "general.alignment when present (a UINT32), else 32 (GGUFReader's "
                         "alignment)",
            "tensor_infos_end": "informative: the absolute offset where the tensor infos end "
                                "(in llama_tiny.gguf, rounding it up to 32 instead of the file's "
                                "64 gives a wrong data section)",
            "tensor_data_offset": "absolute byte offset of the tensor data section "
                                  "(GGUFReader's data_offset): the end of the tensor infos "
                                  "rounded up to the alignment",
            "metadata": "GGUF.md info rules, every key of the file in file order (GGUFReader's "
                        "GGUF.version/tensor_count/kv_count pseudo-fields are not keys): "
                        "integers exact; FLOAT32 as float(np.float32) written by Python's repr "
                        "(reads back to the same float32); FLOAT64 exact; BOOL true/false; "
                        "STRING as a JSON string; ARRAY as a JSON array, nested arrays nested; "
                        f"an array of more than {SUMMARY_OVER} elements as {{type, len, head}} "
                        f"(head: its first {SUMMARY_HEAD} elements by the same rules; type: the "
                        "element type's name). Values decoded from GGUFReader's parsed field "
                        "parts (its ReaderField.contents() flattens nested arrays)",
            "metadata_types": "informative: each key's value type name (UINT8 ... FLOAT64, "
                              "BOOL, STRING), ARRAY[T] with T the array's declared element "
                              "type (inner arrays of a nested array declare their own)",
            "tensors": "in file order (tensor-info order)",
            "dtype/type_id": "the ggml type, named as gguf-py's GGMLQuantizationType",
            "ggml_dims": "the dims as stored, ne[0] (the row length) first",
            "shape": "row-major: ggml_dims reversed",
            "nbytes": "stored bytes: numel / block elements x block bytes",
            "data_offsets": "[offset, offset + nbytes] relative to the tensor data section of "
                            "the tensor's own file",
            "sha256_stored": "of the stored bytes",
            "values_dtype": "numpy dtype of the values a reader gives: stored types keep "
                            "theirs (F32 float32, F16 float16, F64 float64, I8..I64 int8..int64); "
                            "BF16 and every block type are float32",
            "sha256_values/hex_values": "the values in C (row-major) order, little-endian: "
                                        "block types and BF16 as gguf.quants.dequantize's "
                                        "float32 (sign of zero and NaN bits included); stored "
                                        f"types their own bytes. hex only under {HEX_LIMIT} "
                                        "bytes",
            "stats": "over the values above: count, nan, pos_inf, neg_inf, zeros (±0) exact; "
                     "min/max over the finite values, exact (integers as JSON integers; -0 as "
                     "0); mean, population std and abs_mean over the finite values, computed "
                     "exactly and rounded once to float64; null without a finite value",
            "shard": "split parts: the tensor's part file name (GGUF.md split models)",
            "split_parts": "on the first part: every part in order",
            "hf_name/permuted/permute_n_head": "llama_tiny.gguf: the Hugging Face name "
                                               "(GGUF.md's table), and for attn_q/attn_k that "
                                               "the data is permute(W, n, n) of the original "
                                               "with n = permute_n_head (4 for q, 2 for k)",
            "safetensors entry": "tensors in data order with the safetensors dtype name, shape, "
                                 "data_offsets relative to the data after the header, sha256 and "
                                 "hex (under 4096 bytes) of their bytes, stats, gguf_name and "
                                 "permuted_in_gguf",
        },
        "types": types,
        "types_missing_in_gguf_py": [n for n in STORED_TYPES + BLOCK_TYPES if n not in known],
        "types_not_in_fixtures": {n: "valid id that gguf-py 0.19.0 cannot dequantize "
                                     "(GGUF.md: listed by name, decoding not required)"
                                  for n in UNDECODABLE},
        "total_bytes": total_bytes,
        "files": FILES,
    }
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, allow_nan=False) + "\n")
    for f in FILES:
        print(f"{f['size']:8d}  {f['file']}")
    print(f"{len(FILES)} files, {total_bytes} bytes in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
