#!/usr/bin/env python3
"""Checks Tensorscope's exports with numpy itself, and its dtype conversions
with numpy and ml_dtypes.

1. Writes a safetensors file holding every dtype (every code of the 4/6/8-bit
   floats, specials of BF16/F16/F32/F64, integer extremes, BOOL bytes other
   than 0/1, complex values, a scalar, an empty tensor).
2. Runs `tensorscope export` on every tensor to .npy, with and without
   --raw, and loads each file with numpy.load: dtype, shape and every value
   must be what numpy / ml_dtypes compute from the same codes.
3. Loads .csv exports with numpy.loadtxt (float and complex).
4. Runs `tensorscope resave --dtype ...` and compares the converted tensors
   with numpy (float64 -> float16, which numpy rounds directly) and ml_dtypes
   (float32 -> bfloat16 / float8_e4m3fn / float8_e5m2). ml_dtypes converts
   float64 through float32 (double rounding), so float64 sources are checked
   against numpy only, and one value shows the difference.

The Rust tests do not need Python; run this where Python is present:

    pip install numpy ml_dtypes==0.6.0
    cargo build
    python3 scripts/check_npy.py [path/to/tensorscope]

Exit status 0 when every check passes; each failure is printed.
"""

from __future__ import annotations

import json
import pathlib
import struct
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAILURES: list[str] = []
CHECKS = 0

SMALL = {
    "F8_E5M2": (ml_dtypes.float8_e5m2, 8),
    "F8_E4M3": (ml_dtypes.float8_e4m3fn, 8),
    "F8_E8M0": (ml_dtypes.float8_e8m0fnu, 8),
    "F8_E4M3FNUZ": (ml_dtypes.float8_e4m3fnuz, 8),
    "F8_E5M2FNUZ": (ml_dtypes.float8_e5m2fnuz, 8),
    "F6_E2M3": (ml_dtypes.float6_e2m3fn, 6),
    "F6_E3M2": (ml_dtypes.float6_e3m2fn, 6),
    "F4": (ml_dtypes.float4_e2m1fn, 4),
}
NATIVE = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "U16": np.uint16,
    "I16": np.int16,
    "U32": np.uint32,
    "I32": np.int32,
    "U64": np.uint64,
    "I64": np.int64,
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "C64": np.complex64,
}


def check(ok: bool, what: str) -> None:
    global CHECKS
    CHECKS += 1
    if not ok:
        FAILURES.append(what)
        print("FAIL:", what)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN equal to NaN, sign of zero included."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind not in "biufc":
        # ml_dtypes types (kind "V"): compare their exact float32 values.
        a, b = a.astype(np.float32), b.astype(np.float32)
    if a.dtype.kind in "fc":
        a64 = a.astype(np.complex128).ravel()
        b64 = b.astype(np.complex128).ravel()
        for part in (np.real, np.imag):
            x, y = part(a64), part(b64)
            nan = np.isnan(x) & np.isnan(y)
            if not np.all(nan | ((x == y) & (np.signbit(x) == np.signbit(y)))):
                return False
        return True
    return bool(np.array_equal(a, b))


def pack_bits(codes: np.ndarray, bits: int) -> bytes:
    """Packs codes LSB-first: element k in stream bits bits*k .. bits*k+bits-1."""
    stream = 0
    for k, c in enumerate(codes.astype(np.uint64).tolist()):
        stream |= int(c) << (bits * k)
    nbytes = len(codes) * bits // 8
    return stream.to_bytes(nbytes, "little")


def safetensors_file(tensors: dict[str, tuple[str, list[int], bytes]]) -> bytes:
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def fixtures() -> tuple[dict, dict]:
    """Tensors to write, and for each the expected arrays (values, raw)."""
    rng = np.random.default_rng(7)
    tensors: dict[str, tuple[str, list[int], bytes]] = {}
    expected: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, (mldt, bits) in SMALL.items():
        codes = np.arange(2**bits, dtype=np.uint8)
        side = 2 ** (bits // 2)
        shape = [2**bits // side, side]
        raw = codes.tobytes() if bits == 8 else pack_bits(codes, bits)
        values = codes.view(mldt) if bits == 8 else codes.astype(np.uint8).view(mldt)
        tensors[name] = (name, shape, raw)
        expected[name] = (
            values.astype(np.float32).reshape(shape),
            codes.reshape(shape),
        )
    bf = np.concatenate(
        [
            np.array([0x0000, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x7F7F], dtype=np.uint16),
            rng.integers(0, 2**16, 56, dtype=np.uint16),
        ]
    )
    tensors["BF16"] = ("BF16", [8, 8], bf.tobytes())
    expected["BF16"] = (bf.view(ml_dtypes.bfloat16).astype(np.float32).reshape(8, 8), bf.reshape(8, 8))
    arrays = {
        "BOOL": np.array([0, 1, 2, 255, 0, 1], dtype=np.uint8),
        "U8": np.array([0, 1, 255, 128], dtype=np.uint8),
        "I8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "U16": np.array([0, 65535, 1234], dtype=np.uint16),
        "I16": np.array([-32768, 32767, -5], dtype=np.int16),
        "U32": np.array([0, 2**32 - 1, 7], dtype=np.uint32),
        "I32": np.array([-(2**31), 2**31 - 1, 0], dtype=np.int32),
        "U64": np.array([0, 2**64 - 1, 2**53 + 1], dtype=np.uint64),
        "I64": np.array([-(2**63), 2**63 - 1, 2**53 + 1], dtype=np.int64),
        "F16": np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 6e-8], dtype=np.float16), rng.standard_normal(9).astype(np.float16)]),
        "F32": np.concatenate([np.array([0.0, -0.0, np.inf, np.nan, 3.4e38, 1e-45], dtype=np.float32), rng.standard_normal(10).astype(np.float32)]),
        "F64": np.concatenate([np.array([0.0, -0.0, np.inf, np.nan, 1e308, 5e-324]), rng.standard_normal(10)]),
        "C64": (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex64),
    }
    for name, a in arrays.items():
        shape = [2, len(a) // 2] if len(a) % 2 == 0 else [len(a)]
        tensors[name] = (name, shape, a.tobytes())
        native = a.astype(np.bool_) if name == "BOOL" else a
        expected[name] = (native.reshape(shape), native.reshape(shape))
    tensors["scalar"] = ("F32", [], np.float32(2.5).tobytes())
    expected["scalar"] = (np.array(2.5, dtype=np.float32), np.array(2.5, dtype=np.float32))
    tensors["scalar_f8"] = ("F8_E4M3", [], bytes([0x38]))
    expected["scalar_f8"] = (np.array(1.0, dtype=np.float32), np.array(0x38, dtype=np.uint8))
    tensors["empty"] = ("BF16", [0, 3], b"")
    expected["empty"] = (np.zeros((0, 3), np.float32), np.zeros((0, 3), np.uint16))
    return tensors, expected


def tensorscope(exe: str, *args: str) -> dict:
    r = subprocess.run([exe, *args, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tensorscope {' '.join(args)} failed ({r.returncode}): {r.stdout} {r.stderr}")
    return json.loads(r.stdout)


def check_exports(exe: str, folder: pathlib.Path) -> None:
    tensors, expected = fixtures()
    src = folder / "every.safetensors"
    src.write_bytes(safetensors_file(tensors))
    for name in tensors:
        values, raw = expected[name]
        for mode, want in (("values", values), ("raw", raw)):
            out = folder / f"{name}.{mode}.npy"
            args = ["export", str(src), name, "-o", str(out)] + (["--raw"] if mode == "raw" else [])
            doc = tensorscope(exe, *args)
            got = np.load(out, allow_pickle=False)
            check(doc["npy_descr"] == got.dtype.str, f"{name} {mode}: descr {doc['npy_descr']} vs {got.dtype.str}")
            check(got.flags["C_CONTIGUOUS"], f"{name} {mode}: C order")
            check(same(got, want), f"{name} {mode}: {got!r} != {want!r}")
    # CSV through numpy.loadtxt.
    # Parsed at the tensor's own precision: the CSV holds the shortest text
    # that reads back to the same float32.
    for name, dtype in (("F32", np.float32), ("BF16", np.float32), ("C64", np.complex64), ("I64", np.int64), ("F8_E4M3", np.float32)):
        out = folder / f"{name}.csv"
        tensorscope(exe, "export", str(src), name, "-o", str(out))
        got = np.loadtxt(out, delimiter=",", dtype=dtype, ndmin=2)
        want = expected[name][0]
        want = want.reshape(want.shape[0], -1).astype(dtype)
        check(same(got, want), f"{name}.csv: {got!r} != {want!r}")


def check_conversions(exe: str, folder: pathlib.Path) -> None:
    rng = np.random.default_rng(11)
    f32 = np.concatenate(
        [
            np.array([0.0, -0.0, 1.0, np.nan, np.inf, -np.inf, 448.0, 464.0, 465.0, 57344.0, 61440.0, 3.4e38, 1e-40], dtype=np.float32),
            (rng.standard_normal(2000) * np.exp(rng.uniform(-25, 25, 2000))).astype(np.float32),
        ]
    )
    # 1 + 2^-11 + 2^-40 (for F16) and 1 + 2^-4 + 2^-40 (for F8_E4M3) are
    # where rounding through float32 goes wrong.
    f64 = np.concatenate([np.array([1 + 2**-11 + 2**-40, 1 + 2**-4 + 2**-40, 65520.0, 1e300, -1e-300, np.nan]), rng.standard_normal(2000) * np.exp(rng.uniform(-30, 30, 2000))])
    src = folder / "conv.safetensors"
    src.write_bytes(safetensors_file({"a": ("F32", [len(f32)], f32.tobytes()), "b": ("F64", [len(f64)], f64.tobytes())}))

    def resave(*dtypes: str, overflow: str = "saturate") -> dict[str, np.ndarray]:
        out = folder / "conv-out.safetensors"
        args = ["resave", str(src), "-o", str(out), "--overflow", overflow]
        for d in dtypes:
            args += ["--dtype", d]
        tensorscope(exe, *args)
        raw = out.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8 : 8 + n])
        data = raw[8 + n :]
        result = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            result[name] = np.frombuffer(data[begin:end], dtype=np.uint8)
        return result

    got = resave("F64=F16", "F32=BF16")
    with np.errstate(over="ignore"):
        want16 = f64.astype(np.float16)
    check(same(got["b"].view(np.float16), want16), "F64 -> F16 equals numpy's direct rounding")
    check(same(got["a"].view(ml_dtypes.bfloat16), f32.astype(ml_dtypes.bfloat16)), "F32 -> BF16 equals ml_dtypes")
    check(got["b"].view(np.float16)[0] == np.float16(1 + 2**-10), "F64 -> F16 is not rounded through F32")
    got = resave("F32=F8_E4M3", overflow="nan")
    check(same(got["a"].view(ml_dtypes.float8_e4m3fn), f32.astype(ml_dtypes.float8_e4m3fn)), "F32 -> F8_E4M3 (overflow nan) equals ml_dtypes")
    got = resave("F32=F8_E5M2", overflow="saturate")
    ref = f32.astype(ml_dtypes.float8_e5m2)
    ours = got["a"].view(ml_dtypes.float8_e5m2)
    # ml_dtypes overflows finite values to Inf; ours saturates them to 57344.
    overflow = np.isinf(ref.astype(np.float32)) & np.isfinite(f32)
    check(same(ours[~overflow], ref[~overflow]), "F32 -> F8_E5M2 equals ml_dtypes where nothing overflows")
    check(bool(np.all(np.abs(ours[overflow].astype(np.float32)) == 57344.0)), "F8_E5M2 overflow saturates to 57344")
    got = resave("F64=F8_E4M3", overflow="nan")
    direct = got["b"].view(ml_dtypes.float8_e4m3fn)
    with np.errstate(over="ignore"):
        via_f32 = f64.astype(ml_dtypes.float8_e4m3fn)
    differs = ~(np.isnan(direct.astype(np.float32)) & np.isnan(via_f32.astype(np.float32))) & (direct.astype(np.float32) != via_f32.astype(np.float32))
    # Where ours and ml_dtypes differ, ours must be the nearest value.
    for x, d in zip(f64[differs], direct[differs]):
        grid = np.arange(0, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        best = np.abs(grid - abs(x)).min()
        check(abs(abs(float(d)) - abs(x)) == best, f"F64 {x!r} -> F8_E4M3 {float(d)!r} is the nearest value")
    check(bool(differs[1]) and float(direct[1]) == 1.125, "F64 1 + 2^-4 + 2^-40 -> F8_E4M3 is 1.125, not ml_dtypes' 1.0")
    print(f"F64 -> F8_E4M3: {int(differs.sum())} of {len(f64)} values differ from ml_dtypes (which rounds through float32); each is the nearest")


def main() -> int:
    exe = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "debug" / "tensorscope")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        check_exports(exe, folder)
        check_conversions(exe, folder)
    print(f"{CHECKS - len(FAILURES)} of {CHECKS} checks passed (numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__})")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
