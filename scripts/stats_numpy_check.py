#!/usr/bin/env python3
"""Cross-checks `tensorscope stats --json` against numpy.

Writes a safetensors file with tensors of several dtypes (random normal
values with NaN, Inf, zeros and subnormals mixed in, integer extremes,
every F8_E4M3 code, odd BOOL bytes), runs the binary on it, and compares
every figure with numpy / ml_dtypes: counts, min/max, mean and std within
1e-9 * mean(|x|), nearest-rank quantiles and the linear histogram exactly.

    cargo build --release
    python3 scripts/stats_numpy_check.py [--bin target/release/tensorscope]

Needs numpy and ml_dtypes (pip install numpy ml_dtypes). Exits 1 on any
mismatch. The Rust tests do not need Python: this is an extra, independent
check.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

QUANTILES = [("p0_1", 1), ("p1", 10), ("p5", 50), ("p25", 250), ("p50", 500),
             ("p75", 750), ("p95", 950), ("p99", 990), ("p99_9", 999)]
BINS = 256


def tensors():
    rng = np.random.default_rng(20260101)
    mixed = rng.standard_normal(200_000).astype(np.float32) * 0.02
    mixed[::97] = np.nan
    mixed[1::101] = np.inf
    mixed[2::103] = -np.inf
    mixed[3::89] = 0.0
    mixed[4::83] = np.float32(1e-40)
    normal = rng.standard_normal(100_000)
    return {
        "f32_mixed": ("F32", mixed),
        "f64": ("F64", normal * 1e3 + 5.0),
        "f16": ("F16", normal.astype(np.float16)),
        "bf16": ("BF16", normal.astype(ml_dtypes.bfloat16)),
        "f8_all_codes": ("F8_E4M3", np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)),
        "f8": ("F8_E4M3", (normal * 30).astype(ml_dtypes.float8_e4m3fn)),
        "i64": ("I64", np.array([np.iinfo(np.int64).min, -1, 0, 7, np.iinfo(np.int64).max], dtype=np.int64)),
        "u64": ("U64", np.array([0, 2**53 + 1, 2**64 - 1], dtype=np.uint64)),
        "i32": ("I32", rng.integers(-(2**31), 2**31 - 1, 50_000, dtype=np.int32)),
        "u8": ("U8", rng.integers(0, 256, 10_000, dtype=np.uint8)),
        "bool": ("BOOL", np.array([0, 1, 2, 255, 0, 128], dtype=np.uint8)),
    }


def write(path, items):
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in items.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": [int(array.size)],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def values(dtype, array):
    """(float64 values, exact Python ints or None)."""
    if dtype in ("I64", "U64", "I32", "U8"):
        ints = [int(v) for v in array]
        return np.array([float(v) for v in ints]), ints
    if dtype == "BOOL":
        ints = [int(v != 0) for v in array]
        return np.array(ints, dtype=np.float64), ints
    return array.astype(np.float64), None


def check(name, dtype, array, got, failures):
    def fail(what, want, have):
        failures.append(f"{name}: {what}: numpy {want!r}, tensorscope {have!r}")

    x, ints = values(dtype, array)
    finite = x[np.isfinite(x)]
    for key, want in [("count", x.size), ("nan", int(np.isnan(x).sum())),
                      ("pos_inf", int(np.isposinf(x).sum())),
                      ("neg_inf", int(np.isneginf(x).sum())),
                      ("zeros", int((x == 0).sum())), ("finite", finite.size)]:
        if got[key] != want:
            fail(key, want, got[key])
    if finite.size == 0:
        return
    order = sorted(ints) if ints is not None else np.sort(finite)
    lo, hi = order[0], order[-1]
    if got["min"] != (lo if ints is not None else float(lo)) or got["max"] != (hi if ints is not None else float(hi)):
        fail("min/max", (lo, hi), (got["min"], got["max"]))
    abs_mean = float(np.abs(finite).mean())
    tol = 1e-9 * abs_mean + 1e-300
    if abs(got["mean"] - float(finite.mean())) > tol:
        fail("mean", float(finite.mean()), got["mean"])
    if abs(got["std"] - float(finite.std())) > tol:
        fail("std", float(finite.std()), got["std"])
    n = len(order)
    for key, permille in QUANTILES:
        rank = max(1, -(-permille * n // 1000))
        want = order[rank - 1]
        want = want if ints is not None else float(want) + 0.0
        if got["quantiles"][key] != want:
            fail(key, want, got["quantiles"][key])
    edges = np.array(got["histogram"]["edges"], dtype=np.float64)
    counts = got["histogram"]["counts"]
    if ints is not None:
        bins = len(counts)
        span = hi - lo
        want_counts = [0] * bins
        for v in ints:
            want_counts[0 if span == 0 else min(bins - 1, (v - lo) * bins // span)] += 1
    else:
        bins = 1 if lo == hi else BINS
        step = (float(hi) - float(lo)) / bins
        inner = np.array([min(float(lo) + i * step, float(hi)) for i in range(1, bins)])
        if not np.array_equal(edges[1:-1], inner):
            fail("edges", inner[:3], edges[1:4])
        idx = np.searchsorted(inner, finite, side="right")
        want_counts = np.bincount(idx, minlength=bins).tolist()
    if counts != want_counts:
        fail("histogram", want_counts[:8], counts[:8])


def main():
    binary = "target/release/tensorscope"
    if "--bin" in sys.argv:
        binary = sys.argv[sys.argv.index("--bin") + 1]
    items = tensors()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "check.safetensors")
        write(path, items)
        out = subprocess.run([binary, "stats", path, "--json"], capture_output=True, check=True)
    doc = json.loads(out.stdout)
    by_name = {t["name"]: t for t in doc["tensors"]}
    failures = []
    for name, (dtype, array) in items.items():
        check(name, dtype, array, by_name[name], failures)
    for f in failures:
        print("MISMATCH", f)
    print(f"{len(items)} tensors checked against numpy, {len(failures)} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
