#!/usr/bin/env python3
"""The ONNX and HDF5 readers against safetensors, onnx and h5py: `tensorscope
stats` and `tensorscope info` on 1 GiB of F32, beside the machine's own
memory bandwidth (a numpy copy of 1 GiB) and its CPU model.

    cargo build --release --locked
    /work/venvs/onnx/bin/python scripts/bench_frameworks.py \\
        [--bin target/release/tensorscope] [--h5-python /work/venvs/tf/bin/python] \\
        [--dir DIR] [--keep] [--reuse] [--runs 3] [--onnx-only]

It runs in the venv that has onnx and numpy (the one above) and calls the
same script in the venv that has h5py and numpy (`--h5-python`) for what
needs h5py: the subcommands `h5-make DIR`, `h5-list FILE` and `h5-read FILE`
(internal; each prints one JSON line).

It makes, in a temporary folder (or `--dir`; ~4 GiB, removed at the end
unless `--keep`; `--reuse` keeps files already there):

  model.onnx + model.onnx_data   4 F32 initializers [8192, 8192] (random
                                 normal, seeded), all in one external file;
  same.safetensors               `tensorscope resave model.onnx -o` it;
  contiguous.h5                  the same tensors as contiguous datasets;
  gzip.h5, shuffle_gzip.h5       4 chunked datasets of normal values * 0.02
                                 rounded to 3 decimals (compressible), chunks
                                 of 1 MiB ([32, 8192]), gzip level 4, without
                                 and with the shuffle filter.

Then it drops every file from the page cache and reads it back (so each
sits there the same way, whoever wrote it) and times, best of `--runs`
after one warm run, whole runs of `tensorscope stats FILE --json >
/dev/null` on each file (GB/s of tensor bytes, as `info` counts them),
also with RAYON_NUM_THREADS=1 (the
CLI runs on rayon's global pool, one thread per logical CPU unless
RAYON_NUM_THREADS says otherwise; `stats` has no thread option, and
src/jobs/pool.rs only sizes the GUI's job pool); and `tensorscope info
--json` against onnx.load(load_external_data=False) and h5py's visititems
listing every initializer's / dataset's name, dtype and shape, timed both
in-process (time.perf_counter) and as a whole `python -c` process.

Targets: ONNX and contiguous HDF5 within 10% of safetensors' time; the
chunked files at least 1 GB/s of output per thread; `info` faster than the
Python listings. Exits 1 when a command fails, not when a target is missed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

SEED = 20261206
COUNT = 4
SHAPE = (8192, 8192)  # 64 Mi F32 elements, 256 MiB a tensor, 1 GiB in all
CHUNK = (32, 8192)  # 1 MiB of F32
HERE = os.path.abspath(__file__)


def names():
    return [f"layers.{i}.mlp.weight" for i in range(COUNT)]


def normal(rng):
    return rng.standard_normal(SHAPE, dtype=np.float32)


def compressible(rng):
    return np.round(rng.standard_normal(SHAPE, dtype=np.float32) * np.float32(0.02), 3)


# ---------------------------------------------------------------- h5py side


def h5_make(folder):
    import h5py

    rng = np.random.default_rng(SEED)
    with h5py.File(os.path.join(folder, "contiguous.h5"), "w") as f:
        for name in names():
            f.create_dataset(name.replace(".", "/"), data=normal(rng))
    rng = np.random.default_rng(SEED + 1)
    with h5py.File(os.path.join(folder, "gzip.h5"), "w") as plain, \
            h5py.File(os.path.join(folder, "shuffle_gzip.h5"), "w") as shuffled:
        for name in names():
            x = compressible(rng)
            key = name.replace(".", "/")
            plain.create_dataset(key, data=x, chunks=CHUNK, compression="gzip",
                                 compression_opts=4)
            shuffled.create_dataset(key, data=x, chunks=CHUNK, compression="gzip",
                                    compression_opts=4, shuffle=True)
    print(json.dumps({"made": ["contiguous.h5", "gzip.h5", "shuffle_gzip.h5"]}))


H5_LIST = """
import h5py
def listing(path):
    out = []
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out.append((name, str(obj.dtype), obj.shape))
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return out
"""


def h5_list(path, runs):
    scope = {}
    exec(H5_LIST, scope)
    listing = scope["listing"]
    got = listing(path)
    best = best_of(runs, lambda: listing(path))
    print(json.dumps({"seconds": best, "datasets": len(got)}))


def h5_read(path, runs):
    import h5py

    def read():
        total = 0
        with h5py.File(path, "r") as f:
            def visit(_, obj):
                nonlocal total
                if isinstance(obj, h5py.Dataset):
                    total += obj[...].nbytes
            f.visititems(visit)
        return total

    nbytes = read()
    print(json.dumps({"seconds": best_of(runs, read), "bytes": nbytes}))


# ---------------------------------------------------------------- onnx side


def onnx_make(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED)
    inits, nodes, outputs = [], [], []
    for i, name in enumerate(names()):
        inits.append(numpy_helper.from_array(normal(rng), name))
        nodes.append(helper.make_node("Identity", [name], [f"out{i}"]))
        outputs.append(helper.make_tensor_value_info(f"out{i}", TensorProto.FLOAT, list(SHAPE)))
    graph = helper.make_graph(nodes, "bench", [], outputs, initializer=inits)
    model = helper.make_model(graph, producer_name="bench_frameworks")
    onnx.save_model(model, os.path.join(folder, "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.onnx_data",
                    size_threshold=0)


ONNX_LIST = """
import onnx
def listing(path):
    m = onnx.load(path, load_external_data=False)
    return [(t.name, t.data_type, list(t.dims)) for t in m.graph.initializer]
"""


def onnx_list(path, runs):
    scope = {}
    exec(ONNX_LIST, scope)
    listing = scope["listing"]
    got = listing(path)
    return best_of(runs, lambda: listing(path)), len(got)


# ---------------------------------------------------------------- timing


def best_of(runs, work):
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def run(cmd, env=None, stdout=subprocess.DEVNULL):
    out = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.decode(errors='replace')}")
    return out.stdout


def time_process(cmd, runs, env=None):
    """Best wall time of a whole process over `runs`, after one warm run."""
    run(cmd, env)
    return best_of(runs, lambda: run(cmd, env))


def settle(path):
    """Writes the file out, drops it from the page cache and reads it back
    with read(): every file then sits in the cache the same way, whoever
    wrote it and how (same.safetensors as `resave` left it in the cache was
    stat'ed ~30% slower than after this, and a `cp` of it in between)."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while f.read(16 << 20):
            pass


def memory_bandwidth(runs):
    src = np.ones(1 << 28, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return best_of(runs, lambda: np.copyto(dst, src)), src.nbytes


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "unknown CPU"


# ---------------------------------------------------------------- main


class Table:
    def __init__(self):
        self.rows = []
        self.misses = []

    def row(self, label, seconds, gbs=None, note=""):
        self.rows.append((label, seconds, gbs, note))

    def rule(self, title):
        self.rows.append((title, None, None, None))

    def target(self, ok, what):
        if not ok:
            self.misses.append(what)
        return ("ok: " if ok else "MISSED: ") + what

    def print(self):
        print(f"{'':<66} {'ms':>9} {'GB/s':>6}  note")
        for label, seconds, gbs, note in self.rows:
            if seconds is None:
                print(label)
                continue
            g = f"{gbs:6.2f}" if gbs is not None else f"{'-':>6}"
            print(f"  {label:<64} {seconds * 1e3:9.3f} {g}  {note}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("h5-make", "h5-list", "h5-read"):
        verb, path = sys.argv[1], sys.argv[2]
        runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
        {"h5-make": lambda: h5_make(path), "h5-list": lambda: h5_list(path, runs),
         "h5-read": lambda: h5_read(path, runs)}[verb]()
        return

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default="target/release/tensorscope")
    p.add_argument("--h5-python", default="/work/venvs/tf/bin/python")
    p.add_argument("--dir", help="where the files go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--reuse", action="store_true", help="keep files already in --dir")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--onnx-only", action="store_true", help="no HDF5 (no h5py, or no reader)")
    a = p.parse_args()
    binary = os.path.abspath(a.bin)
    if not os.path.isfile(binary):
        sys.exit(f"{binary} is missing: cargo build --release --locked")
    runs = max(1, a.runs)

    folder = a.dir or tempfile.mkdtemp(prefix="bench_frameworks.")
    os.makedirs(folder, exist_ok=True)
    made = []

    def path(name):
        return os.path.join(folder, name)

    def fresh(*files):
        made.extend(files)
        return not (a.reuse and all(os.path.exists(path(f)) for f in files))

    try:
        if fresh("model.onnx", "model.onnx_data"):
            print("making model.onnx + model.onnx_data ...", file=sys.stderr)
            onnx_make(folder)
        if fresh("same.safetensors"):
            print("tensorscope resave model.onnx -o same.safetensors ...", file=sys.stderr)
            run([binary, "resave", path("model.onnx"), "-o", path("same.safetensors")])
        if not a.onnx_only and fresh("contiguous.h5", "gzip.h5", "shuffle_gzip.h5"):
            print("making contiguous.h5, gzip.h5, shuffle_gzip.h5 (h5py) ...", file=sys.stderr)
            run([a.h5_python, HERE, "h5-make", folder], stdout=subprocess.PIPE)
        bench(a, binary, runs, path)
    finally:
        if a.keep:
            print(f"files kept in {folder}", file=sys.stderr)
        elif a.dir:
            for f in made:
                if os.path.exists(path(f)):
                    os.remove(path(f))
        else:
            shutil.rmtree(folder, ignore_errors=True)


def bench(a, binary, runs, path):
    t = Table()
    version = run([binary, "--version"], stdout=subprocess.PIPE).decode().strip().splitlines()
    version = version[0] + "".join(f", {v.strip().replace(': ', ' ')}" for v in version[1:2])
    copy, copied = memory_bandwidth(runs)

    def info(file):
        doc = json.loads(run([binary, "info", path(file), "--json"], stdout=subprocess.PIPE))
        return doc["data_bytes"], doc["tensor_count"]

    files = [("same.safetensors", "safetensors (same.safetensors)"),
             ("model.onnx", "ONNX, external data (model.onnx + model.onnx_data)")]
    if not a.onnx_only:
        files += [("contiguous.h5", "HDF5 contiguous (contiguous.h5)"),
                  ("gzip.h5", "HDF5 chunks of 1 MiB, gzip 4 (gzip.h5)"),
                  ("shuffle_gzip.h5", "HDF5 chunks of 1 MiB, shuffle + gzip 4 (shuffle_gzip.h5)")]
    sizes = {}
    for file, _ in files:
        sizes[file] = info(file)
        if sizes[file][1] != COUNT:
            sys.exit(f"{file}: tensorscope sees {sizes[file][1]} tensors, not {COUNT}")

    for file, _ in files:
        settle(path(file))
        if file == "model.onnx":
            settle(path("model.onnx_data"))

    def disk(file):
        total = os.path.getsize(path(file))
        if file == "model.onnx":
            total += os.path.getsize(path("model.onnx_data"))
        return total

    one = dict(os.environ, RAYON_NUM_THREADS="1")
    threads = os.cpu_count()
    t.rule("the machine's memory bandwidth")
    t.row("numpy: np.copyto of 1 GiB, one thread (GB/s of bytes copied)", copy, copied / copy / 1e9)
    t.rule(f"tensorscope stats FILE --json > /dev/null, {threads} threads (one a logical CPU), "
           "GB/s of tensor bytes")
    stats, stats1 = {}, {}
    for file, _ in files:
        stats[file] = time_process([binary, "stats", path(file), "--json"], runs)
        stats1[file] = time_process([binary, "stats", path(file), "--json"], runs, env=one)
    base = stats["same.safetensors"]
    base1 = stats1["same.safetensors"]
    for file, label in files:
        nbytes = sizes[file][0]
        note = f"{disk(file) / 2**20:.0f} MiB on disk"
        if file in ("model.onnx", "contiguous.h5"):
            ratio = stats[file] / base
            note += "; " + t.target(ratio <= 1.10, f"{file}: {ratio:.3f}x safetensors' time "
                                    "(<= 1.10)")
        t.row(label, stats[file], nbytes / stats[file] / 1e9, note)
    t.rule("the same, RAYON_NUM_THREADS=1")
    for file, label in files:
        nbytes = sizes[file][0]
        gbs = nbytes / stats1[file] / 1e9
        note = ""
        if file in ("model.onnx", "contiguous.h5"):
            ratio = stats1[file] / base1
            note = f"{ratio:.3f}x safetensors' time"
        elif file.endswith("gzip.h5"):
            per = nbytes / stats[file] / 1e9 / threads
            note = t.target(gbs >= 1.0, f"{file}: {gbs:.2f} GB/s output on one thread (>= 1)")
            note += f"; {per:.2f} a thread with {threads}"
        t.row(label, stats1[file], gbs, note)
    if not a.onnx_only:
        t.rule("for reference: h5py reads every dataset in-process (one thread, C zlib)")
        for file, _ in files[2:]:
            got = json.loads(run([a.h5_python, HERE, "h5-read", path(file), str(runs)],
                                 stdout=subprocess.PIPE))
            t.row(f"h5py: {file}", got["seconds"], got["bytes"] / got["seconds"] / 1e9)

    t.rule("tensorscope info FILE --json > /dev/null (a whole process) against Python listings")
    start = time_process([binary, "--version"], runs)
    t.row("tensorscope --version (a process's start and end, for scale)", start)
    onnx_info = time_process([binary, "info", path("model.onnx"), "--json"], runs)
    in_proc, listed = onnx_list(path("model.onnx"), runs)
    code = ONNX_LIST + f"\nprint(len(listing({path('model.onnx')!r})))"
    whole = time_process([sys.executable, "-c", code], runs)
    t.row("tensorscope info model.onnx", onnx_info, None,
          t.target(onnx_info < in_proc, f"info model.onnx {in_proc / onnx_info:.3f}x as fast "
                   "as onnx in-process")
          + "; " + t.target(onnx_info < whole, f"{whole / onnx_info:.0f}x as fast as python -c"))
    t.row(f"onnx.load(load_external_data=False) + {listed} inits listed, in-process", in_proc)
    t.row("the same, a whole `python -c` process (import onnx included)", whole)
    if not a.onnx_only:
        for file, _ in files[2:4]:
            ts = time_process([binary, "info", path(file), "--json"], runs)
            got = json.loads(run([a.h5_python, HERE, "h5-list", path(file), str(runs)],
                                 stdout=subprocess.PIPE))
            code = H5_LIST + f"\nprint(len(listing({path(file)!r})))"
            whole = time_process([a.h5_python, "-c", code], runs)
            t.row(f"tensorscope info {file}", ts, None,
                  t.target(ts < got["seconds"], f"info {file} {got['seconds'] / ts:.3f}x as fast "
                           "as h5py in-process")
                  + "; " + t.target(ts < whole, f"{whole / ts:.0f}x as fast as python -c"))
            t.row(f"h5py visititems: {got['datasets']} names, dtypes, shapes, in-process",
                  got["seconds"])
            t.row("the same, a whole `python -c` process (import h5py included)", whole)

    gib = sizes["same.safetensors"][0] / 2**30
    print(f"{version} on {cpu_model()}, {threads} logical CPUs")
    print(f"{gib:.2f} GiB of F32 tensors a file ({COUNT} x {list(SHAPE)}), best of {runs} "
          f"after a warm run, page cache warm (each file dropped from it and read back first)"
          f"{'; ONNX only' if a.onnx_only else ''}")
    t.print()
    if t.misses:
        print("missed: " + "; ".join(t.misses))
    else:
        print("every target met")


if __name__ == "__main__":
    main()
