#!/usr/bin/env python3
"""The Python module (`import tensorscope`) against the libraries it stands in
for, on this machine: safetensors' numpy API, gguf-py's dequantization and
torch.load, beside the machine's own memory bandwidth (a numpy copy of 1 GiB).

    python scripts/bench_python.py [--mib 1024] [--dir DIR] [--keep] [--runs 3]
                                   [--torch-python PATH]

It runs in a venv where tensorscope, numpy, safetensors (0.8) and gguf
(gguf-py) import. It makes, in a temporary folder under /tmp (or `--dir`;
about 2.5 x MiB on disk, removed at the end unless `--keep`):

  one.safetensors    one F32 tensor of MiB ([MiB * 64, 4096]);
  eight.safetensors  eight F32 tensors of MiB / 8 each ([MiB * 8, 4096]);
  q4_k.gguf          one Q4_K tensor [4096, 4096] (gguf-py's GGUFWriter;
                     random blocks, their scales d and dmin finite, small);
  pytorch_model.bin  a torch.save zip of the first four tensors of
                     eight.safetensors (MiB / 2), written byte by byte as
                     torch writes it (tests/it/pytorch/build.rs does the
                     same in Rust): archive/data.pkl, a protocol-2 pickle
                     of an OrderedDict of torch._utils._rebuild_tensor_v2
                     over persistent-id storages, archive/data/0..3 (each
                     stored, 64-byte aligned), archive/version, byteorder.

and times, the page cache warm (every file was just written):

  (a) get_tensor of the one tensor, in a fresh process each run (best of
      --runs), with the growth of the process's resident memory
      (/proc/self/statm) across the call: tensorscope.safe_open against
      safetensors.safe_open(framework="np");
  (b) tensorscope.load_file against safetensors.numpy.load_file on
      eight.safetensors (best of --runs), alone and then with every value
      read (np.sum of each array); target: load_file >= 2x as fast;
  (c) get_tensor of the Q4_K tensor (dequantized float32) against
      gguf.quants.dequantize of the same blocks (GGUFReader's data), the
      values checked equal, beside the time of filling a fresh float32
      array of the output's shape (np.ones); target >= 20x;
  (d) tensorscope.load_file of pytorch_model.bin against
      torch.load(weights_only=True), run by `--torch-python`, else by the
      first interpreter that imports torch (this one, then
      /work/venvs/*/bin/python); without one, tensorscope's time alone,
      "torch not installed" beside it. Its values are checked equal to
      eight.safetensors' (and torch's to tensorscope's, by sha256).

Exits 1 when values differ or a step fails, not when a target is missed.
"""

import argparse
import glob
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

SEED = 20261207
COLS = 4096  # every F32 tensor is [rows, 4096]
GGUF_SHAPE = (4096, 4096)
GGUF_NAME = "blk.0.attn_q.weight"
HERE = os.path.abspath(__file__)
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------- measures


def statm():
    """Resident and file-backed (shared) bytes of this process."""
    with open("/proc/self/statm") as f:
        fields = f.read().split()
    return int(fields[1]) * PAGE, int(fields[2]) * PAGE


def mapping_of(address):
    """The file mapped at `address` in this process ('' for anonymous memory)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start <= address < end:
                return parts[5].strip() if len(parts) > 5 else ""
    return ""


def best_of(runs, work):
    """The least time `work()` takes; what it returns is let go of (arrays
    freed, files unmapped) after the clock stops."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        out = work()
        best = min(best, time.perf_counter() - start)
        del out
    return best


def memory_bandwidth(runs):
    src = np.ones(1 << 28, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return src.nbytes / best_of(runs, lambda: np.copyto(dst, src)) / 1e9


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def child_get(lib, path, name):
    """(a) in a fresh process: one get_tensor, its time and the RSS it adds."""
    if lib == "tensorscope":
        import tensorscope

        f = tensorscope.safe_open(path, framework="np")
    else:
        import safetensors

        f = safetensors.safe_open(path, framework="np")
    before, shared_before = statm()
    start = time.perf_counter()
    arr = f.get_tensor(name)
    seconds = time.perf_counter() - start
    after, shared_after = statm()
    mapped = mapping_of(arr.ctypes.data)
    print(json.dumps({
        "seconds": seconds,
        "rss": after - before,
        "file_rss": shared_after - shared_before,
        "writeable": bool(arr.flags.writeable),
        "view": mapped == os.path.realpath(path),
        "shape": list(arr.shape),
    }))


TORCH_CHILD = """
import hashlib, json, sys, time, torch
path, runs = sys.argv[1], int(sys.argv[2])
best = float("inf")
for _ in range(runs):
    sd = None
    start = time.perf_counter()
    sd = torch.load(path, weights_only=True)
    best = min(best, time.perf_counter() - start)
sha = {k: hashlib.sha256(v.contiguous().view(torch.uint8).numpy()).hexdigest() for k, v in sd.items()}
print(json.dumps({"seconds": best, "sha256": sha, "version": torch.__version__}))
"""


def sha256(arr):
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(arr).view(np.uint8)).hexdigest()


def torch_python(given):
    """The first interpreter that imports torch, or None."""
    if given:
        return given
    candidates = [sys.executable] + sorted(glob.glob("/work/venvs/*/bin/python"))
    for exe in candidates:
        ok = subprocess.run([exe, "-c", "import torch"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode == 0
        if ok:
            return exe
    return None


# ---------------------------------------------------------------- files


def chunks(nbytes, seed_offset):
    """`nbytes` of F32 values in 64 MiB chunks: one normal draw, shifted by the
    chunk's number, so no two chunks are alike (cheaper than a fresh draw each)."""
    base = np.random.default_rng(SEED + seed_offset).standard_normal(
        min(nbytes, 64 << 20) // 4, dtype=np.float32)
    done, i = 0, 0
    while done < nbytes:
        n = min(base.nbytes, nbytes - done)
        yield (base[: n // 4] + np.float32(i)).tobytes()
        done += n
        i += 1


def write_safetensors(path, tensors, seed_offset):
    """`tensors`: [(name, shape)] of F32, written in that order."""
    header, offset = {}, 0
    for name, shape in tensors:
        nbytes = 4 * int(np.prod(shape))
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks(offset, seed_offset):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def write_gguf(path):
    """One Q4_K tensor: random blocks of 144 bytes a 256 elements, each
    block's f16 scales d and dmin (its first 4 bytes) finite and small."""
    import gguf
    from gguf import GGMLQuantizationType

    block, size = gguf.GGML_QUANT_SIZES[GGMLQuantizationType.Q4_K]
    rows, cols = GGUF_SHAPE
    count = rows * cols // block
    rng = np.random.default_rng(SEED + 2)
    blocks = rng.integers(0, 256, size=(count, size), dtype=np.uint8)
    scales = rng.uniform(1e-3, 2e-2, size=(count, 2)).astype(np.float16)
    blocks[:, :4] = scales.view(np.uint8).reshape(count, 4)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor(GGUF_NAME, blocks.reshape(rows, cols // block * size),
                      raw_dtype=GGMLQuantizationType.Q4_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# A torch.save pickle, opcode by opcode (protocol 2, as torch writes it).


def p_str(s):  # BINUNICODE
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def p_int(v):  # BININT1, BININT2, BININT, LONG1
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(1 << 31) <= v < 1 << 31:
        return b"J" + struct.pack("<i", v)
    n = v.bit_length() // 8 + 1
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def p_tuple(items):  # MARK ... TUPLE
    return b"(" + b"".join(p_int(x) for x in items) + b"t"


def p_tensor(key, shape, storage="FloatStorage"):
    """`_rebuild_tensor_v2(persistent_id(('storage', torch.FloatStorage, key,
    'cpu', numel)), 0, shape, stride, False, OrderedDict())`, C-contiguous."""
    stride = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        stride[d] = stride[d + 1] * shape[d + 1]
    numel = int(np.prod(shape))
    return b"".join([
        b"ctorch._utils\n_rebuild_tensor_v2\n(",
        b"(", p_str("storage"), f"ctorch\n{storage}\n".encode(), p_str(key), p_str("cpu"),
        p_int(numel), b"tQ",
        p_int(0), p_tuple(shape), p_tuple(stride),
        b"\x89",  # requires_grad False
        b"ccollections\nOrderedDict\n)R",  # backward hooks
        b"tR",
    ])


def p_state_dict(pairs):
    """PROTO 2, OrderedDict(), MARK key value ... SETITEMS, STOP."""
    body = b"".join(p_str(k) + v for k, v in pairs)
    return b"\x80\x02ccollections\nOrderedDict\n)R(" + body + b"u."


def write_torch_zip(path, pickle, storages):
    """`storages`: [(key, nbytes, chunk iterator)]. Entries stored, each
    one's data 64-byte aligned by an extra field, as torch's writer pads."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        def entry(name, nbytes, parts):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.file_size = nbytes
            zip64 = nbytes * 1.05 > zipfile.ZIP64_LIMIT  # as ZipFile decides
            fixed = 30 + len(name.encode()) + 4 + (20 if zip64 else 0)
            pad = -(z.fp.tell() + fixed) % 64
            info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            with z.open(info, "w", force_zip64=zip64) as w:
                for part in parts:
                    w.write(part)

        entry("archive/data.pkl", len(pickle), [pickle])
        entry("archive/byteorder", 6, [b"little"])
        for key, nbytes, parts in storages:
            entry(f"archive/data/{key}", nbytes, parts)
        entry("archive/version", 2, [b"3\n"])
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def stored_ranges(path):
    """{entry: (offset, size)} of the torch zip's storages, read back."""
    out = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            f.seek(info.header_offset)
            head = f.read(30)
            name_len, extra_len = struct.unpack("<HH", head[26:30])
            out[info.filename] = (info.header_offset + 30 + name_len + extra_len, info.file_size)
    return out


def safetensors_ranges(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return 8 + n, header


def copy_range(path, start, nbytes):
    with open(path, "rb") as f:
        f.seek(start)
        left = nbytes
        while left:
            part = f.read(min(left, 64 << 20))
            if not part:
                raise OSError(f"{path}: short read")
            left -= len(part)
            yield part


# ---------------------------------------------------------------- the table


def fmt_time(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 10:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_mib(nbytes):
    return "-" if nbytes is None else f"{nbytes / 2**20:+.1f} MiB"


class Table:
    def __init__(self):
        self.rows = []
        self.misses = []
        self.failures = []

    def rule(self, title):
        self.rows.append((title,))

    def row(self, label, seconds, rss=None, note=""):
        self.rows.append((label, seconds, rss, note))

    def target(self, ratio, want, what):
        ok = ratio >= want
        if not ok:
            self.misses.append(f"{what}: {ratio:.1f}x (target >= {want}x)")
        return f"{ratio:.1f}x as fast ({'ok' if ok else 'MISSED'}: target >= {want}x)"

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
        return what if ok else f"FAILED: {what}"

    def print(self):
        print(f"{'':<58} {'time':>10} {'RSS growth':>12}  note")
        for r in self.rows:
            if len(r) == 1:
                print(r[0])
                continue
            label, seconds, rss, note = r
            print(f"  {label:<56} {fmt_time(seconds):>10} {fmt_mib(rss):>12}  {note}")


# ---------------------------------------------------------------- main


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child-get":
        child_get(*sys.argv[2:])
        return

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=1024, help="MiB of the F32 files (default 1024)")
    p.add_argument("--dir", help="where the files go (default: a temporary folder under /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--runs", type=int, default=3, help="best of how many runs (default 3)")
    p.add_argument("--torch-python", help="an interpreter that imports torch")
    a = p.parse_args()
    if a.mib < 1:
        p.error("--mib must be at least 1")
    runs = max(1, a.runs)

    folder = a.dir or tempfile.mkdtemp(prefix="bench_python.", dir="/tmp")
    os.makedirs(folder, exist_ok=True)
    names = ["one.safetensors", "eight.safetensors", "q4_k.gguf", "pytorch_model.bin"]
    try:
        t = bench(a, runs, folder)
    finally:
        if a.keep:
            print(f"files kept in {folder}", file=sys.stderr)
        elif a.dir:
            for name in names:
                if os.path.exists(os.path.join(folder, name)):
                    os.remove(os.path.join(folder, name))
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if t.misses:
        print("targets missed: " + "; ".join(t.misses))
    if t.failures:
        print("FAILED: " + "; ".join(t.failures))
        sys.exit(1)


def bench(a, runs, folder):
    import gguf
    import safetensors
    import safetensors.numpy
    import tensorscope
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    def path(name):
        return os.path.join(folder, name)

    t = Table()
    mib = a.mib
    one_shape = (mib * 64, COLS)
    eight = [(f"model.layers.{i}.mlp.weight", (mib * 8, COLS)) for i in range(8)]

    def log(text):
        print(text, file=sys.stderr, flush=True)

    log(f"writing {folder}/one.safetensors ({mib} MiB) ...")
    write_safetensors(path("one.safetensors"), [("weight", one_shape)], 0)
    log(f"writing eight.safetensors ({mib} MiB) ...")
    write_safetensors(path("eight.safetensors"), eight, 1)
    log("writing q4_k.gguf ...")
    write_gguf(path("q4_k.gguf"))
    log(f"writing pytorch_model.bin ({mib / 2:g} MiB, from eight.safetensors) ...")
    data_start, header = safetensors_ranges(path("eight.safetensors"))
    half = eight[:4]
    pickle = p_state_dict([(name, p_tensor(str(i), list(shape)))
                           for i, (name, shape) in enumerate(half)])
    storages = []
    for i, (name, _) in enumerate(half):
        begin, end = header[name]["data_offsets"]
        parts = copy_range(path("eight.safetensors"), data_start + begin, end - begin)
        storages.append((str(i), end - begin, parts))
    write_torch_zip(path("pytorch_model.bin"), pickle, storages)
    misaligned = [n for n, (off, _) in stored_ranges(path("pytorch_model.bin")).items()
                  if n.startswith("archive/data/") and off % 64]
    if misaligned:
        raise SystemExit(f"pytorch_model.bin: storages not 64-byte aligned: {misaligned}")

    log("memory bandwidth ...")
    bandwidth = memory_bandwidth(runs)

    # (a) get_tensor, zero-copy: a fresh process a run.
    log("(a) get_tensor ...")
    one = path("one.safetensors")
    t.rule(f"(a) get_tensor of one F32 tensor of {mib} MiB {list(one_shape)}, a fresh process "
           f"each run, best of {runs}")
    for lib, label in (("tensorscope", 'tensorscope.safe_open(p).get_tensor'),
                       ("safetensors", 'safetensors.safe_open(p, "np").get_tensor')):
        got = []
        for _ in range(runs):
            out = subprocess.run([sys.executable, HERE, "--child-get", lib, one, "weight"],
                                 stdout=subprocess.PIPE, check=True)
            got.append(json.loads(out.stdout))
        seconds = min(g["seconds"] for g in got)
        rss = max(g["rss"] for g in got)
        file_rss = max(g["file_rss"] for g in got)
        g = got[0]
        if g["view"]:
            what = "a view of the mapped file"
        else:
            what = "a copy"
        what += ", read-only" if not g["writeable"] else ", writeable"
        note = f"{what}; of the growth, {file_rss / 2**20:.1f} MiB file pages"
        if lib == "tensorscope":
            note = t.check(g["view"] and not g["writeable"] and rss < 16 << 20, note)
        t.row(label, seconds, rss, note)
    with tensorscope.safe_open(one) as f, safetensors.safe_open(one, framework="np") as g:
        same = np.array_equal(f.get_tensor("weight"), g.get_tensor("weight"))
    t.row("  values", None, None, t.check(same, "equal (np.array_equal)"))

    # (b) load_file of eight tensors.
    log("(b) load_file ...")
    eight_path = path("eight.safetensors")
    t.rule(f"(b) load_file of {mib} MiB, 8 F32 tensors of {list(eight[0][1])}, best of {runs}")

    def read_all(d):
        return sum(float(x.sum()) for x in d.values())

    ts_load = best_of(runs, lambda: tensorscope.load_file(eight_path))
    st_load = best_of(runs, lambda: safetensors.numpy.load_file(eight_path))
    ts_read = best_of(runs, lambda: read_all(tensorscope.load_file(eight_path)))
    st_read = best_of(runs, lambda: read_all(safetensors.numpy.load_file(eight_path)))
    d_ts = tensorscope.load_file(eight_path)
    d_st = safetensors.numpy.load_file(eight_path)
    same = sorted(d_ts) == sorted(d_st) and all(np.array_equal(d_ts[k], d_st[k]) for k in d_st)
    views = all(mapping_of(x.ctypes.data) == os.path.realpath(eight_path) for x in d_ts.values())
    del d_st
    t.row("tensorscope.load_file", ts_load, None,
          t.target(st_load / ts_load, 2, "(b) load_file")
          + ("; views of the mapped file" if views else "; copies"))
    t.row("safetensors.numpy.load_file", st_load, None, "copies")
    t.row("  values", None, None, t.check(same, "equal (np.array_equal)"))
    t.row("tensorscope.load_file, then np.sum of every array", ts_read, None,
          f"{st_read / ts_read:.1f}x as fast")
    t.row("safetensors.numpy.load_file, then np.sum of every array", st_read)

    # (c) GGUF Q4_K.
    log("(c) GGUF Q4_K ...")
    q = path("q4_k.gguf")
    t.rule(f"(c) GGUF Q4_K {list(GGUF_SHAPE)} dequantized to float32 "
           f"({os.path.getsize(q) / 2**20:.1f} MiB file), best of {runs}")
    reader = gguf.GGUFReader(q)
    blocks = reader.tensors[0].data

    def ts_dequant():
        with tensorscope.safe_open(q) as f:
            start = time.perf_counter()
            out = f.get_tensor(GGUF_NAME)
            elapsed = time.perf_counter() - start
            del out
            return elapsed

    ts_q = min(ts_dequant() for _ in range(runs))
    py_q = best_of(runs, lambda: dequantize(blocks, GGMLQuantizationType.Q4_K))
    with tensorscope.safe_open(q) as f:
        mine = f.get_tensor(GGUF_NAME)
        dtype = f.get_slice(GGUF_NAME).get_dtype()
    ref = dequantize(blocks, GGMLQuantizationType.Q4_K)
    exact = mine.shape == ref.shape and mine.dtype == ref.dtype and np.array_equal(mine, ref)
    t.row(f"tensorscope get_tensor (get_dtype() {dtype!r})", ts_q, None,
          t.target(py_q / ts_q, 20, "(c) Q4_K"))
    t.row("gguf.quants.dequantize(GGUFReader data, Q4_K)", py_q)
    floor = best_of(runs, lambda: np.ones(GGUF_SHAPE, dtype=np.float32))
    out_mib = 4 * GGUF_SHAPE[0] * GGUF_SHAPE[1] / 2**20
    t.row(f"for scale: np.ones of the output's shape ({out_mib:.0f} MiB)", floor, None,
          f"filling a fresh array: gguf-py's time is {py_q / floor:.0f}x this")
    t.row("  values", None, None, t.check(exact, "equal, bit for bit (np.array_equal)"))

    # (d) PyTorch .bin.
    log("(d) PyTorch .bin ...")
    binp = path("pytorch_model.bin")
    t.rule(f"(d) load_file of a PyTorch zip ({os.path.getsize(binp) / 2**20:.0f} MiB, "
           f"4 F32 tensors of {list(half[0][1])}), best of {runs}")
    ts_bin = best_of(runs, lambda: tensorscope.load_file(binp))
    ts_bin_read = best_of(runs, lambda: read_all(tensorscope.load_file(binp)))
    d_bin = tensorscope.load_file(binp)
    with tensorscope.safe_open(eight_path) as f:
        same = sorted(d_bin) == sorted(n for n, _ in half) and all(
            np.array_equal(d_bin[n], f.get_tensor(n)) for n, _ in half)
    views = all(mapping_of(x.ctypes.data) == os.path.realpath(binp) for x in d_bin.values())
    hashes = {k: sha256(v) for k, v in d_bin.items()}
    del d_bin
    exe = torch_python(a.torch_python)
    if exe:
        log(f"(d) torch.load in {exe} ...")
        out = subprocess.run([exe, "-c", TORCH_CHILD, binp, str(runs)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if out.returncode == 0:
            got = json.loads(out.stdout)
            t.row("tensorscope.load_file", ts_bin, None,
                  f"{got['seconds'] / ts_bin:.1f}x as fast"
                  + ("; views of the mapped file" if views else "; copies"))
            t.row(f"torch.load(weights_only=True), torch {got['version']}", got["seconds"],
                  None, exe)
            t.row("  values", None, None,
                  t.check(got["sha256"] == hashes, "torch's equal to tensorscope's (sha256)"))
        else:
            last = (out.stderr.strip().splitlines() or ["no message"])[-1]
            t.row("tensorscope.load_file", ts_bin, None,
                  ("views of the mapped file" if views else "copies"))
            t.row("torch.load(weights_only=True)", None, None,
                  t.check(False, f"{exe} failed: {last}"))
    else:
        t.row("tensorscope.load_file", ts_bin, None,
              "torch not installed" + ("; views of the mapped file" if views else "; copies"))
    t.row("tensorscope.load_file, then np.sum of every array", ts_bin_read)
    t.row("  values", None, None, t.check(same, "equal to eight.safetensors' (np.array_equal)"))

    import ml_dtypes
    version = getattr(tensorscope, "__version__", None) or pkg_version("tensorscope")
    print(f"tensorscope {version} ({tensorscope.__file__}) on {cpu_model()}, "
          f"{os.cpu_count()} logical CPUs")
    print(f"Python {platform.python_version()}, numpy {np.__version__}, ml_dtypes "
          f"{ml_dtypes.__version__}, safetensors {safetensors.__version__}, gguf-py "
          f"{pkg_version('gguf')}; page cache warm")
    print(f"memory bandwidth: {bandwidth:.1f} GB/s (np.copyto of a 1 GiB float32 array, "
          f"one thread, bytes copied per second, best of {runs})")
    t.print()
    return t


def pkg_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return "?"


if __name__ == "__main__":
    main()
