#!/usr/bin/env python3
"""The statistics scan a user would write with the Python stack, timed.

For every tensor of a safetensors file: count NaN, +Inf, -Inf and zeros,
then min, max, mean and std (float64 accumulation) of the finite values and
a 256-bin histogram over [min, max] -- the figures `tensorscope stats`
gives, minus the quantiles and the log2 histogram.

    python3 bench/python_baseline.py FILE [--json] [--no-torch]

numpy is required (`pip install numpy ml_dtypes safetensors`); the
safetensors package loads F32 and F16 where it supports them, and the
header is parsed here for the dtypes it does not (BF16 and the F8/F4
formats, through ml_dtypes). torch is optional: when it imports, the same
scan runs with it too (float32 math, as users write it). `pip install torch`
takes about 5 GB with the CUDA libraries its Linux wheel pulls (only the CPU
is used); into a side folder it is
`pip install --target /tmp/torchenv torch`, then run with
`PYTHONPATH=/tmp/torchenv`. The examples'
`bench_stats` runs this script on its own files and prints the ratios.

Prints seconds per framework (and the peak resident memory), or with
--json one object: {"numpy": s, "torch": s | null, "max_rss_mb": mb}.
"""

import json
import resource
import struct
import sys
import time

import numpy as np

try:
    import ml_dtypes
except ImportError:  # BF16/F8/F4 need it
    ml_dtypes = None

try:
    import safetensors
    import safetensors.numpy  # noqa: F401
except ImportError:
    safetensors = None


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n))
    meta.pop("__metadata__", None)
    return 8 + n, meta


def numpy_dtype(name):
    table = {"F64": np.float64, "F32": np.float32, "F16": np.float16}
    if name in table:
        return table[name]
    if ml_dtypes is None:
        raise SystemExit(f"{name} needs ml_dtypes (pip install ml_dtypes)")
    return {
        "BF16": ml_dtypes.bfloat16,
        "F8_E4M3": ml_dtypes.float8_e4m3fn,
        "F8_E5M2": ml_dtypes.float8_e5m2,
        "F4": ml_dtypes.float4_e2m1fn,
    }[name]


def numpy_tensors(path):
    """Yields (name, float32 array) the way a numpy user would load them."""
    start, meta = header(path)
    if safetensors is not None and all(v["dtype"] in ("F32", "F16") for v in meta.values()):
        with safetensors.safe_open(path, framework="numpy") as f:
            for name in f.keys():
                yield name, f.get_tensor(name).astype(np.float32, copy=False)
        return
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in meta.items():
        b, e = info["data_offsets"]
        data = raw[start + b : start + e]
        if info["dtype"] == "F4":
            # Two codes per byte, low nibble first (unpacked by the user).
            codes = np.empty(data.size * 2, dtype=np.uint8)
            codes[0::2] = data & 0x0F
            codes[1::2] = data >> 4
            values = codes.view(numpy_dtype("F4"))
        else:
            values = data.view(numpy_dtype(info["dtype"]))
        yield name, values.astype(np.float32)


def numpy_scan(path):
    out = {}
    for name, x in numpy_tensors(path):
        nan = int(np.isnan(x).sum())
        pos_inf = int(np.isposinf(x).sum())
        neg_inf = int(np.isneginf(x).sum())
        zeros = int((x == 0).sum())
        finite = x[np.isfinite(x)] if nan + pos_inf + neg_inf else x
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
            mean = float(finite.mean(dtype=np.float64))
            std = float(finite.std(dtype=np.float64))
            counts, _ = np.histogram(finite, bins=256, range=(lo, hi))
        else:
            lo = hi = mean = std = None
            counts = []
        out[name] = (nan, pos_inf, neg_inf, zeros, lo, hi, mean, std, len(counts))
    return out


def torch_scan(path):
    import torch
    from safetensors.torch import safe_open

    out = {}
    with safe_open(path, framework="pt") as f:
        for name in f.keys():
            x = f.get_tensor(name).float()
            nan = int(torch.isnan(x).sum())
            pos_inf = int(torch.isposinf(x).sum())
            neg_inf = int(torch.isneginf(x).sum())
            zeros = int((x == 0).sum())
            finite = x[torch.isfinite(x)] if nan + pos_inf + neg_inf else x
            if finite.numel():
                lo, hi = float(finite.min()), float(finite.max())
                mean = float(finite.double().mean())
                std = float(finite.double().std(unbiased=False))
                torch.histc(finite, bins=256, min=lo, max=hi)
            else:
                lo = hi = mean = std = None
            out[name] = (nan, pos_inf, neg_inf, zeros, lo, hi, mean, std)
    return out


def timed(fn, path):
    t = time.perf_counter()
    fn(path)
    return time.perf_counter() - t


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        raise SystemExit(__doc__)
    path = args[0]
    result = {"numpy": timed(numpy_scan, path), "torch": None}
    if "--no-torch" not in sys.argv:
        try:
            import torch  # noqa: F401

            result["torch"] = timed(torch_scan, path)
        except ImportError:
            pass
        except (RuntimeError, TypeError, KeyError) as e:  # e.g. F4 in torch
            print(f"torch: {e}", file=sys.stderr)
    result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v if v is None else round(v, 3)}")


if __name__ == "__main__":
    main()
