#!/usr/bin/env python3
"""`tensorscope scan` (shared/SCAN.md) against picklescan and modelscan on a
folder of 1,000 mixed checkpoint files, beside the machine's own memory
bandwidth (a numpy copy of 1 GiB) and its CPU model.

    cargo build --release --locked
    /work/venvs/scanbench/bin/python scripts/bench_scan.py \\
        [--tensorscope target/release/tensorscope] [--picklescan PATH] \\
        [--modelscan PATH] [--tools tensorscope,picklescan,modelscan] \\
        [--dir DIR] [--keep] [--runs 3] [--no-big]

It runs in a venv where numpy imports (the venv of picklescan and modelscan,
`pip install picklescan modelscan "numpy<2.3"`: neither needs torch for this;
modelscan 0.8.8 calls numpy.lib.format._check_version, which numpy 2.3 took
away, so with a newer numpy it fails on every .npy and .npz). The
files are written with numpy, pickle, zipfile and struct alone, and nothing is
ever unpickled or loaded. In a temporary folder under /tmp (or `--dir`, which
must be empty or new; about 360 MiB on disk plus 4 GiB of sparse files, removed
at the end unless `--keep`) it makes:

  tree/   1,000 files in 50 folders, seeded (the same bytes on each run):
            300 .safetensors: 277 small (1-16 tensors, F32/F16/BF16/I64/U8,
                up to 64 KiB), 20 medium (1-8 MiB) and 3 large (50, 100 and
                200 MB, the data written for real: a scanner that reads it
                pays for it);
              5 .safetensors that are broken (header length past the end,
                JSON cut, offsets past the end, overlapping offsets, 4 bytes);
            150 .npy (140 plain arrays, 10 object arrays: a pickle, 5 of
                plain dicts and 5 holding a __reduce__ object);
             58 .npz (50 plain, 5 with an object-array member, 3 with a
                member named ../../x.npy, /abs/x.npy or ..\\x.npy);
            180 bare pickles: 120 benign (dicts, lists, OrderedDict, protocols
                0-5; .pkl and .bin) and 60 malicious (.pkl, .bin, .pt, .ckpt)
                in 13 ways: GLOBAL / INST / STACK_GLOBAL (also through the
                memo), __reduce__ objects dumped by pickle (os.system, eval,
                exec, subprocess.Popen, runpy._run_code, webbrowser.open,
                pickle.loads of a nested pickle, _operator.methodcaller), a
                getattr(__import__('os'), 'system') chain, and a global of an
                unknown module (evilpkg.payload.run, which a denylist misses);
            153 torch zips (.bin/.pt/.pth, as torch.save lays them out:
                archive/data.pkl, a protocol-2 pickle of an OrderedDict of
                torch._utils._rebuild_tensor_v2 over persistent ids
                ('storage', torch.FloatStorage, '0', 'cpu', numel), written
                opcode by opcode, + archive/data/0.., byteorder, version):
                133 benign, 17 with one more entry calling posix.system,
                builtins.exec, subprocess.check_output, ..., and 3 with a
                member named archive/../../x or /abs/x;
             25 GGUF v3 files (one F32 tensor; 20 with no template or an
                ordinary ChatML / Llama 3 / Mistral chat template, 5 whose
                tokenizer.chat_template reaches __class__, __globals__, ...);
            129 other files: README.md, config.json, tokenizer.json,
                generation_config.json, *.safetensors.index.json, LICENSE.

          Per SCAN.md, 103 of them are unsafe, 5 invalid, 763 safe and 129
          unknown.
  big/    model.safetensors (one F32 tensor [131072, 4096], 2 GiB, its data a
          hole: truncate) and pytorch_model.bin (a torch zip of the same
          tensor, archive/data/0 a 2 GiB hole), unless `--no-big`.

Then, the page cache warm (every file was just written, and read once
more), it times whole processes, best of `--runs`:

  tensorscope scan --json tree/     (--tensorscope, default
                                     target/release/tensorscope; skipped when
                                     it is missing or has no `scan` verb)
  picklescan --path tree/           (and picklescan --strict: default-deny)
  modelscan -p tree/ -r json -o F   (run in a folder of its own, so no
                                     modelscan-settings.toml is found there)

whichever are there, and prints per tool: version, exit code (expected 1:
the folder holds unsafe files; picklescan's and modelscan's 2 means they met
errors), seconds, files/s (the folder's 1,000 files over the time, whatever
the tool looked at), the ratio of its time to
tensorscope's, the files it scanned, the files it flagged, how many of the
103 unsafe ones those are (caught), missed, and flagged files that are not
unsafe. Flagged files are read from each tool's own output: tensorscope's
JSON Lines (`verdict` "unsafe"; "invalid" counted apart), picklescan's
"<file>[:<member>]: dangerous import '<module> <name>' FOUND" lines, and
modelscan's JSON report (`issues[].source`). tensorscope's rows are also
checked: one JSON object per line, one line per file, each verdict against
the expected one (differences listed). Then the two 2 GiB files, one run
each tool (the best of --runs).

Exits 1 when tensorscope's output or exit code is wrong or a tool crashes,
not for what picklescan or modelscan miss.
"""

import argparse
import collections
import json
import os
import pickle
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib

import numpy as np

# The measures and the hand-written torch pickles of the Python module's
# benchmark, which runs where numpy does (this folder is on sys.path).
from bench_python import (  # noqa: E402
    cpu_model,
    memory_bandwidth,
    p_state_dict,
    p_str,
    p_tensor,
    pkg_version,
)

SEED = 20261207
FOLDERS = 50
BIG_SHAPE = (131072, 4096)  # 2 GiB of F32
HERE = os.path.abspath(__file__)
REPO = os.path.dirname(os.path.dirname(HERE))


# ---------------------------------------------------------------- pickles by hand


def p_call(module, name, arg):
    """GLOBAL module.name, MARK, arg, TUPLE, REDUCE: module.name(arg) (protocol 2)."""
    return f"c{module}\n{name}\n(".encode() + p_str(arg) + b"tR"


class Reduce:
    """An object whose pickle calls `func(*args)` when loaded; it is only ever dumped."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def short_str(s):  # SHORT_BINUNICODE
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def evil_pickles():
    """The 12 malicious bare pickles, as (name, bytes). Nothing is executed:
    __reduce__ objects are dumped, never loaded."""
    import operator
    import runpy
    import subprocess as sp
    import webbrowser

    cmd = "echo pwned"
    nested = pickle.dumps(Reduce(os.system, (cmd,)), protocol=2)
    return [
        ("p0_global_os_system", b"cos\nsystem\n(S'" + cmd.encode() + b"'\ntR."),
        ("p0_inst_os_system", b"(S'" + cmd.encode() + b"'\nios\nsystem\n."),
        ("p2_reduce_posix_system", pickle.dumps(Reduce(os.system, (cmd,)), protocol=2)),
        ("p4_reduce_eval", pickle.dumps(Reduce(eval, ("print('pwned')",)), protocol=4)),
        ("p5_reduce_exec", pickle.dumps(Reduce(exec, ("print('pwned')",)), protocol=5)),
        ("p3_reduce_popen", pickle.dumps(Reduce(sp.Popen, ((["echo", "pwned"],))), protocol=3)),
        ("p4_reduce_runpy", pickle.dumps(Reduce(runpy._run_code, ("print(1)", {})), protocol=4)),
        ("p2_reduce_webbrowser", pickle.dumps(Reduce(webbrowser.open, ("http://127.0.0.1/",)),
                                              protocol=2)),
        ("p4_nested_pickle_loads", pickle.dumps(Reduce(pickle.loads, (nested,)), protocol=4)),
        ("p4_methodcaller", pickle.dumps(Reduce(operator.methodcaller, ("system", cmd)),
                                         protocol=4)),
        # STACK_GLOBAL whose strings come from the memo, after a list that is popped.
        ("p4_stack_global_memo", b"".join([
            b"\x80\x04(", short_str("subprocess"), b"\x94", short_str("getoutput"), b"\x94",
            b"l\x940", b"h\x00h\x01\x93\x94", short_str(cmd), b"\x94\x85\x94R\x94.",
        ])),
        # getattr(__import__('os'), 'system')('echo pwned')
        ("p2_getattr_import_chain", b"".join([
            b"\x80\x02c__builtin__\ngetattr\n(c__builtin__\n__import__\n(", p_str("os"),
            b"tR", p_str("system"), b"tR(", p_str(cmd), b"tR.",
        ])),
        # A module no denylist knows.
        ("p2_unknown_module", b"\x80\x02cevilpkg.payload\nrun\n)R."),
    ]


EVIL_ZIP_CALLS = [
    ("posix", "system"),
    ("builtins", "exec"),
    ("subprocess", "check_output"),
    ("__builtin__", "eval"),
    ("webbrowser", "open"),
    ("runpy", "_run_code"),
    ("evilpkg.hooks", "on_load"),
    ("os", "popen"),
]


# ---------------------------------------------------------------- writers


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def st_bytes(tensors, metadata=None):
    """A safetensors file: `tensors` [(name, dtype string, shape, bytes)]."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


ST_DTYPES = [("F32", np.float32), ("F16", np.float16), ("I64", np.int64), ("U8", np.uint8),
             ("BF16", np.uint16)]


def random_tensors(rng, count, max_bytes):
    out = []
    for i in range(count):
        dtype, np_type = ST_DTYPES[int(rng.integers(len(ST_DTYPES)))]
        itemsize = np.dtype(np_type).itemsize
        cols = int(rng.integers(1, 65))
        rows = max(1, int(rng.integers(1, max(2, max_bytes // (itemsize * cols)))))
        if np_type in (np.float32, np.float16):
            arr = rng.standard_normal((rows, cols)).astype(np_type)
        else:
            arr = rng.integers(0, 255, size=(rows, cols)).astype(np_type)
        out.append((f"model.layers.{i}.weight", dtype, (rows, cols), arr.tobytes()))
    return out


def write_large_safetensors(path, nbytes, rng):
    """One F32 tensor of `nbytes`, written for real (a 1 MiB block, shifted by its number)."""
    cols = 4096
    rows = nbytes // (4 * cols)
    header = {"__metadata__": {"format": "pt"},
              "lm_head.weight": {"dtype": "F32", "shape": [rows, cols],
                                 "data_offsets": [0, rows * cols * 4]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    block = rng.standard_normal(1 << 18).astype(np.float32)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        left, i = rows * cols * 4, 0
        while left:
            part = (block + np.float32(i)).tobytes()[:left]
            f.write(part)
            left -= len(part)
            i += 1


def broken_safetensors(kind, rng):
    good = st_bytes(random_tensors(rng, 2, 4096))
    n = struct.unpack("<Q", good[:8])[0]
    if kind == 0:  # header length past the end of the file
        return struct.pack("<Q", len(good) * 4) + good[8:]
    if kind == 1:  # JSON cut short
        return good[:8 + n // 2]
    if kind == 2:  # data offsets past the end
        return st_bytes([("w", "F32", (1024,), b"\0" * 4096)])[:-1024]
    if kind == 3:  # overlapping offsets
        header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                  "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text + b"\0" * 24
    return b"\x10\0\0\0"  # 4 bytes


def npy_bytes(arr):
    import io

    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=arr.dtype.hasobject)
    return buf.getvalue()


def write_torch_zip(path, pickle_bytes, storages, extra_members=()):
    """`storages`: [(key, bytes)]. Entries stored, each one's data 64-byte
    aligned by an extra field, as torch's writer pads."""
    stem = "archive"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        def entry(name, data):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            fixed = 30 + len(name.encode()) + 4
            pad = -(z.fp.tell() + fixed) % 64
            info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            z.writestr(info, data)

        entry(f"{stem}/data.pkl", pickle_bytes)
        entry(f"{stem}/byteorder", b"little")
        for key, data in storages:
            entry(f"{stem}/data/{key}", data)
        for name, data in extra_members:
            entry(name, data)
        entry(f"{stem}/version", b"3\n")


def torch_zip_parts(rng, count):
    pairs, storages = [], []
    for i in range(count):
        shape = (int(rng.integers(1, 33)), int(rng.integers(1, 65)))
        arr = rng.standard_normal(shape).astype(np.float32)
        pairs.append((f"layers.{i}.weight", p_tensor(str(i), shape)))
        storages.append((str(i), arr.tobytes()))
    return pairs, storages


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_bytes(name, template, rng):
    """GGUF v3, alignment 32: general.architecture, general.name, the chat
    template (if any), one F32 tensor token_embd.weight [rows, cols]."""
    kvs = [("general.architecture", "llama"), ("general.name", name)]
    if template is not None:
        kvs.append(("tokenizer.chat_template", template))
    rows, cols = int(rng.integers(2, 17)), 32
    out = [b"GGUF", struct.pack("<IQQ", 3, 1, len(kvs))]
    for key, value in kvs:
        out += [gguf_string(key), struct.pack("<I", 8), gguf_string(value)]
    out += [gguf_string("token_embd.weight"), struct.pack("<IQQIQ", 2, cols, rows, 0, 0)]
    head = b"".join(out)
    head += b"\0" * (-len(head) % 32)
    return head + rng.standard_normal((rows, cols)).astype(np.float32).tobytes()


SAFE_TEMPLATES = [
    None,
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant"
    "\\n' }}{% endif %}",
    "{{ bos_token }}{% for message in messages %}{% if loop.index0 == 0 %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | "
    "trim + '<|eot_id|>' %}{% endif %}{{ content }}{% endfor %}",
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
]

EVIL_TEMPLATES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{% for m in messages %}{{ m.content }}{% endfor %}{{ self.__init__.__globals__.__builtins__"
    "['__import__']('os').system('id') }}",
    "{{ joiner.__init__.__globals__['os'].popen('id').read() }}",
    "{{ namespace.__init__.__globals__.__builtins__.eval('1') }}",
]


def write_sparse_torch_zip(path, pickle_bytes, key, nbytes):
    """A torch zip whose storage `key` is `nbytes` of zeros left as a hole
    (written by hand: zipfile would write every byte). No ZIP64: < 4 GiB."""
    zero = bytes(64 << 20)
    crc, left = 0, nbytes
    while left:
        n = min(left, len(zero))
        crc = zlib.crc32(memoryview(zero)[:n], crc)
        left -= n
    members = [("archive/data.pkl", pickle_bytes, zlib.crc32(pickle_bytes), len(pickle_bytes)),
               ("archive/byteorder", b"little", zlib.crc32(b"little"), 6),
               (f"archive/data/{key}", None, crc, nbytes),
               ("archive/version", b"3\n", zlib.crc32(b"3\n"), 2)]
    central = []
    with open(path, "wb") as f:
        for name, data, crc32, size in members:
            offset = f.tell()
            raw = name.encode()
            pad = -(offset + 30 + len(raw) + 4) % 64
            extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 33, crc32, size, size,
                                len(raw), len(extra)) + raw + extra)
            if data is None:
                f.seek(size, os.SEEK_CUR)
            else:
                f.write(data)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 33,
                                       crc32, size, size, len(raw), 0, 0, 0, 0, 0, offset) + raw)
        start = f.tell()
        cd = b"".join(central)
        f.write(cd)
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(cd),
                            start, 0))


# ---------------------------------------------------------------- the tree


Item = collections.namedtuple("Item", "rel verdict format kind")


def build_tree(tree):
    """Writes the 1,000 files; returns [Item] with the verdict SCAN.md gives each
    (format None where SCAN.md leaves it open)."""
    rng = np.random.default_rng(SEED)
    items = []
    counters = collections.Counter()

    def place(stem, ext, data, verdict, fmt, kind, folder=None):
        i = len(items)
        folder = f"repo_{(i * 7) % FOLDERS:03d}" if folder is None else folder
        sub = os.path.join(folder, "checkpoints") if i % 5 == 0 else folder
        counters[stem] += 1
        rel = os.path.join(sub, f"{stem}-{counters[stem]:05d}{ext}")
        os.makedirs(os.path.join(tree, sub), exist_ok=True)
        path = os.path.join(tree, rel)
        if callable(data):
            data(path)
        else:
            write_bytes(path, data)
        items.append(Item(rel, verdict, fmt, kind))

    # safetensors: 277 small, 20 medium, 3 large, 5 broken
    for i in range(277):
        meta = {"format": "pt"} if i % 2 else None
        place("model", ".safetensors",
              st_bytes(random_tensors(rng, int(rng.integers(1, 17)), 4096), meta),
              "safe", "safetensors", "safetensors small")
    for i in range(20):
        count = int(rng.integers(1, 9))
        place("model", ".safetensors",
              st_bytes(random_tensors(rng, count, int(rng.integers(1, 9)) * (1 << 20) // count)),
              "safe", "safetensors", "safetensors 1-8 MiB")
    for mb in (50, 100, 200):
        place("large", ".safetensors",
              lambda p, mb=mb: write_large_safetensors(p, mb * 1000 * 1000, rng),
              "safe", "safetensors", "safetensors 50-200 MB")
    for k in range(5):
        place("broken", ".safetensors", broken_safetensors(k, rng), "invalid", "safetensors",
              "safetensors broken")

    # numpy
    np_types = [np.float32, np.float64, np.int32, np.uint8, np.float16, np.complex64, np.bool_]
    for i in range(140):
        t = np_types[i % len(np_types)]
        shape = tuple(int(x) for x in rng.integers(1, 40, size=int(rng.integers(1, 4))))
        arr = (rng.standard_normal(shape) * 10).astype(t)
        if i % 9 == 0:
            arr = np.asfortranarray(arr)
        place("array", ".npy", npy_bytes(arr), "safe", "numpy", "npy plain")
    for i in range(10):
        if i < 5:
            obj = np.array([{"step": i, "lr": 0.001}, "text", None, [1, 2, 3]], dtype=object)
        else:
            obj = np.empty(2, dtype=object)
            obj[0] = Reduce(os.system, ("echo pwned",))
            obj[1] = {"k": i}
        place("objects", ".npy", npy_bytes(obj), "unsafe", "numpy", "npy object array")
    for i in range(50):
        def savez(path, i=i):
            arrays = {f"arr_{j}": rng.standard_normal((int(rng.integers(1, 30)), 8))
                      .astype(np.float32) for j in range(int(rng.integers(1, 5)))}
            (np.savez_compressed if i % 3 == 0 else np.savez)(path, **arrays)
        place("arrays", ".npz", savez, "safe", "numpy", "npz plain")
    for i in range(5):
        def savez_obj(path, i=i):
            obj = np.array([{"i": i}, "x"], dtype=object)
            np.savez(path, weights=np.arange(10, dtype=np.float32), meta=obj)
        place("arrays_obj", ".npz", savez_obj, "unsafe", "numpy", "npz object member")
    for i, member in enumerate(["../../evil.npy", "/tmp/evil.npy", "..\\evil.npy"]):
        def savez_path(path, member=member):
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("ok.npy", npy_bytes(np.arange(4, dtype=np.float32)))
                z.writestr(zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0)),
                           npy_bytes(np.ones(4, dtype=np.float32)))
        place("arrays_path", ".npz", savez_path, "unsafe", "numpy", "npz member path")

    # bare pickles: 120 benign, 60 malicious
    for i in range(120):
        proto = i % 6
        value = {"step": int(rng.integers(1 << 20)), "lr": float(rng.random()),
                 "names": [f"layer{j}" for j in range(int(rng.integers(1, 20)))],
                 "shape": (3, 4), "nested": {"ok": True, "none": None, "neg": -1}}
        if i % 4 == 0:
            value = collections.OrderedDict(value)
        if proto >= 3:
            value["blob"] = bytes(rng.integers(0, 256, size=32, dtype=np.uint8))
        ext = ".pkl" if i % 3 else ".bin"
        place("state", ext, pickle.dumps(value, protocol=proto), "safe",
              "pickle", f"bare pickle benign {ext}")
    evil = evil_pickles()
    exts = [".pkl", ".pkl", ".bin", ".pt", ".ckpt"]
    for i in range(60):
        name, data = evil[i % len(evil)]
        ext = exts[i % len(exts)]
        fmt = "pickle" if ext in (".pkl", ".bin") else None
        place(f"evil_{name}", ext, data, "unsafe", fmt, f"bare pickle {name}")

    # torch zips: 133 benign, 17 malicious, 3 member paths
    zip_exts = [".bin", ".pt", ".pth"]
    for i in range(133):
        pairs, storages = torch_zip_parts(rng, int(rng.integers(1, 6)))
        ext = zip_exts[i % 3]
        place("pytorch_model", ext,
              lambda p, pairs=pairs, storages=storages: write_torch_zip(
                  p, p_state_dict(pairs), storages),
              "safe", "pytorch", "torch zip benign")
    for i in range(17):
        pairs, storages = torch_zip_parts(rng, int(rng.integers(1, 4)))
        module, name = EVIL_ZIP_CALLS[i % len(EVIL_ZIP_CALLS)]
        pairs.insert(int(rng.integers(0, len(pairs) + 1)),
                     ("_metadata_hook", p_call(module, name, "echo pwned")))
        place("pytorch_model_evil", zip_exts[i % 3],
              lambda p, pairs=pairs, storages=storages: write_torch_zip(
                  p, p_state_dict(pairs), storages),
              "unsafe", "pytorch", f"torch zip calling {module}.{name}")
    for member in ["archive/../../evil.sh", "/etc/cron.d/evil", "archive/data/../../../x"]:
        pairs, storages = torch_zip_parts(rng, 2)
        place("pytorch_model_path", ".bin",
              lambda p, pairs=pairs, storages=storages, member=member: write_torch_zip(
                  p, p_state_dict(pairs), storages, [(member, b"#!/bin/sh\necho pwned\n")]),
              "unsafe", "pytorch", "torch zip member path")

    # GGUF: 20 ordinary, 5 with a template reaching Python internals
    for i in range(20):
        place("model", ".gguf", gguf_bytes(f"tiny-{i}", SAFE_TEMPLATES[i % len(SAFE_TEMPLATES)],
                                           rng), "safe", "gguf", "gguf")
    for i, template in enumerate(EVIL_TEMPLATES):
        place("model_evil", ".gguf", gguf_bytes(f"evil-{i}", template, rng), "unsafe", "gguf",
              "gguf chat template")

    # 129 files that are not checkpoints, one set per folder until the count is reached
    others = [
        ("README", ".md", lambda i: f"# model {i}\n\nNot a checkpoint.\n".encode()),
        ("config", ".json", lambda i: json.dumps({"model_type": "llama", "hidden_size": 64,
                                                   "num_hidden_layers": i % 7 + 1}).encode()),
        ("tokenizer", ".json", lambda i: json.dumps({"version": "1.0", "model": {
            "type": "BPE", "vocab": {f"t{j}": j for j in range(50)}}}).encode()),
        ("model.safetensors", ".index.json", lambda i: json.dumps({
            "metadata": {"total_size": 1024},
            "weight_map": {"a": "model-00001-of-00002.safetensors"}}).encode()),
        ("generation_config", ".json", lambda i: b'{"do_sample": false}'),
        ("LICENSE", ".txt", lambda i: b"Apache-2.0\n"),
    ]
    k = 0
    while len(items) < 1000:
        stem, ext, make = others[k % len(others)]
        place(stem, ext, make(k), "unknown", None, "not a checkpoint",
              folder=f"repo_{(k // len(others)) % FOLDERS:03d}")
        k += 1
    assert len(items) == 1000
    return items


def build_big(big):
    """2 GiB safetensors and torch zip, their tensor data holes."""
    os.makedirs(big, exist_ok=True)
    rows, cols = BIG_SHAPE
    nbytes = rows * cols * 4
    st = os.path.join(big, "model.safetensors")
    header = {"__metadata__": {"format": "pt"},
              "lm_head.weight": {"dtype": "F32", "shape": [rows, cols],
                                 "data_offsets": [0, nbytes]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + nbytes)
    pt = os.path.join(big, "pytorch_model.bin")
    write_sparse_torch_zip(pt, p_state_dict([("lm_head.weight", p_tensor("0", BIG_SHAPE))]),
                           "0", nbytes)
    return [st, pt]


def warm(tree):
    for base, _, files in os.walk(tree):
        for name in files:
            with open(os.path.join(base, name), "rb") as f:
                while f.read(16 << 20):
                    pass


# ---------------------------------------------------------------- the tools


def find_tool(given, name):
    if given:
        return given
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.isfile(beside) else shutil.which(name)


def has_scan_verb(binary):
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    lines = out.stdout.split("Commands:", 1)[-1].split("\n\n", 1)[0].splitlines()
    return any(line.split()[:1] == ["scan"] for line in lines)


def version_of(cmd, package):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        text = (out.stdout or out.stderr).strip().splitlines()
        if out.returncode == 0 and text:
            return text[0].split()[-1]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return pkg_version(package)


def timed(cmd, runs, cwd):
    """Best wall time of a whole process over `runs`; the first run's output."""
    best, first = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        best = min(best, time.perf_counter() - start)
        if first is None:
            first = out
    return best, first


def owner(ident, known):
    """The file of `known` (absolute paths) that `ident` names: the path
    itself or path:member."""
    if ident in known:
        return ident
    cut = ident
    while ":" in cut:
        cut = cut.rsplit(":", 1)[0]
        if cut in known:
            return cut
    return None


def parse_tensorscope(out, root, known):
    flagged, invalid, verdicts, problems = set(), set(), {}, []
    for n, line in enumerate(out.stdout.splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError:
            problems.append(f"stdout line {n} is not JSON: {line[:80]!r}")
            continue
        if not isinstance(row, dict):
            problems.append(f"stdout line {n} is not an object")
            continue
        path = os.path.join(root, row.get("path", "")) if not os.path.isabs(
            row.get("path", "")) else row["path"]
        if path in verdicts:
            problems.append(f"{path} has two rows")
        verdicts[path] = (row.get("verdict"), row.get("format"))
        if row.get("verdict") == "unsafe":
            flagged.add(path)
        elif row.get("verdict") == "invalid":
            invalid.add(path)
    missing = known - set(verdicts)
    if missing:
        problems.append(f"{len(missing)} files have no row, e.g. {sorted(missing)[0]}")
    return {"scanned": len(verdicts), "flagged": flagged, "invalid": invalid,
            "verdicts": verdicts, "problems": problems}


PICKLESCAN_LINE = re.compile(r"^(?P<id>.+?): (?P<level>dangerous|suspicious) import "
                             r"'(?P<glob>[^']*)' FOUND")


def parse_picklescan(out, root, known):
    flagged, unknown_ids = set(), set()
    for line in out.stdout.splitlines():
        m = PICKLESCAN_LINE.match(line)
        if not m or m.group("level") != "dangerous":
            continue
        path = owner(m.group("id"), known)
        if path is None:
            unknown_ids.add(m.group("id"))
        else:
            flagged.add(path)
    scanned = re.search(r"^Scanned files: (\d+)", out.stdout, re.M)
    errors = len(re.findall(r"^ERROR: parsing pickle", out.stdout, re.M))
    return {"scanned": int(scanned.group(1)) if scanned else None, "flagged": flagged,
            "invalid": set(), "errors": errors, "problems": [
                f"finding for an unknown file {i!r}" for i in sorted(unknown_ids)[:3]]}


def parse_modelscan(out, root, known, report_path):
    """modelscan's JSON report, from the file `-o` wrote (its stdout copy is
    printed by rich, which wraps it at the terminal's width)."""
    try:
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        return {"scanned": None, "flagged": set(), "invalid": set(), "errors": None,
                "problems": [f"no JSON report ({e})"]}
    base = report.get("summary", {}).get("absolute_path", root)
    flagged, unknown_ids = set(), set()
    for issue in report.get("issues", []):
        path = owner(os.path.join(base, issue.get("source", "")), known)
        if path is None:
            unknown_ids.add(issue.get("source"))
        else:
            flagged.add(path)
    # Files (not zip members) it skipped, by reason.
    skipped = collections.Counter(
        s.get("description", "?") for s in report.get("summary", {}).get("skipped", {})
        .get("skipped_files", []) if ":" not in s.get("source", ""))
    notes = [f"skipped {n} files: {why}" for why, n in skipped.most_common()
             if why != "Model Scan did not scan file"]
    return {"scanned": report.get("summary", {}).get("scanned", {}).get("total_scanned"),
            "flagged": flagged, "invalid": set(), "errors": len(report.get("errors", [])),
            "notes": notes,
            "problems": [f"finding for an unknown file {i!r}" for i in sorted(unknown_ids)[:3]]}


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tensorscope", default=os.path.join(REPO, "target/release/tensorscope"),
                   help="the tensorscope binary (default target/release/tensorscope)")
    p.add_argument("--picklescan", help="the picklescan command (default: beside this "
                   "interpreter, else on PATH)")
    p.add_argument("--modelscan", help="the modelscan command (likewise)")
    p.add_argument("--tools", default="tensorscope,picklescan,modelscan",
                   help="which tools to time, comma-separated")
    p.add_argument("--dir", help="where the files go (empty or new; default: a temporary "
                   "folder under /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--runs", type=int, default=3, help="best of how many runs (default 3)")
    p.add_argument("--no-big", action="store_true", help="skip the two 2 GiB files")
    a = p.parse_args()
    runs = max(1, a.runs)
    tools = {t.strip() for t in a.tools.split(",") if t.strip()}
    unknown_tools = tools - {"tensorscope", "picklescan", "modelscan"}
    if unknown_tools:
        p.error(f"unknown tools: {', '.join(sorted(unknown_tools))}")

    if a.dir:
        if os.path.isdir(a.dir) and os.listdir(a.dir):
            p.error(f"--dir {a.dir} is not empty")
        os.makedirs(a.dir, exist_ok=True)
        folder = os.path.abspath(a.dir)
    else:
        folder = tempfile.mkdtemp(prefix="bench_scan.", dir="/tmp")
    try:
        failures = bench(a, runs, tools, folder)
    finally:
        if a.keep:
            print(f"files kept in {folder}", file=sys.stderr)
        elif a.dir:
            for name in ("tree", "big", "cwd"):
                shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)


def bench(a, runs, tools, folder):
    def log(text):
        print(text, file=sys.stderr, flush=True)

    tree = os.path.join(folder, "tree")
    cwd = os.path.join(folder, "cwd")  # an empty working directory for every tool
    os.makedirs(tree)
    os.makedirs(cwd)
    log(f"writing 1,000 files under {tree} ...")
    start = time.perf_counter()
    items = build_tree(tree)
    big_files = []
    if not a.no_big:
        log("writing the two 2 GiB files (sparse) ...")
        big_files = build_big(os.path.join(folder, "big"))
    made = time.perf_counter() - start
    warm(tree)
    total_bytes = sum(os.path.getsize(os.path.join(tree, it.rel)) for it in items)
    known = {os.path.join(tree, it.rel) for it in items}
    expected = {os.path.join(tree, it.rel): it for it in items}
    unsafe = {p for p, it in expected.items() if it.verdict == "unsafe"}
    invalid = {p for p, it in expected.items() if it.verdict == "invalid"}
    counts = collections.Counter(it.verdict for it in items)
    failures = []

    # Which tools are there.
    plan = []  # (label, version, cmd builder, parser, expected exit)
    notes = []
    if "tensorscope" in tools:
        binary = a.tensorscope
        if not os.path.isfile(binary):
            notes.append(f"tensorscope: {binary} does not exist (cargo build --release); skipped")
        elif not has_scan_verb(binary):
            notes.append(f"tensorscope: {binary} has no `scan` verb (built before SCAN.md); "
                         "skipped")
        else:
            version = version_of([binary, "--version"], "tensorscope")
            plan.append(("tensorscope scan --json", version,
                         lambda path: [binary, "scan", "--json", path], parse_tensorscope, 1))
    if "picklescan" in tools:
        exe = find_tool(a.picklescan, "picklescan")
        if exe is None:
            notes.append("picklescan: not installed (pip install picklescan); skipped")
        else:
            version = pkg_version("picklescan")
            plan.append(("picklescan --path", version,
                         lambda path: [exe, "--path", path], parse_picklescan, 1))
            plan.append(("picklescan --strict --path", version,
                         lambda path: [exe, "--strict", "--path", path], parse_picklescan, 1))
    if "modelscan" in tools:
        exe_m = find_tool(a.modelscan, "modelscan")
        if exe_m is None:
            notes.append("modelscan: not installed (pip install modelscan); skipped")
        else:
            version = version_of([exe_m, "--version"], "modelscan")
            report = os.path.join(cwd, "modelscan.json")
            plan.append(("modelscan -p -r json", version,
                         lambda path: [exe_m, "-p", path, "-r", "json", "-o", report],
                         lambda out, root, known: parse_modelscan(out, root, known, report), 1))

    results = []
    for label, version, cmd, parse, want in plan:
        log(f"timing {label} on the 1,000 files (best of {runs}) ...")
        seconds, out = timed(cmd(tree), runs, cwd)
        if label.startswith("modelscan"):
            # Once more, untimed, for the files it skipped and why (printing
            # them costs it time).
            out = subprocess.run(cmd(tree) + ["--show-skipped"], capture_output=True, text=True,
                                 cwd=cwd)
        if out.returncode not in (0, 1, 2, 3) or \
                "Traceback (most recent call last)" in out.stdout + out.stderr:
            failures.append(f"{label} exited {out.returncode}: "
                            f"{(out.stderr.strip().splitlines() or [''])[-1][:200]}")
        got = parse(out, tree, known)
        results.append((label, version, seconds, out.returncode, want, got))
        if label.startswith("tensorscope"):
            if out.returncode != want:
                failures.append(f"tensorscope scan exited {out.returncode}, not {want} "
                                "(the folder has unsafe and invalid files)")
            failures += [f"tensorscope: {x}" for x in got["problems"]]

    ts = next((r for r in results if r[0].startswith("tensorscope")), None)
    ts_seconds = ts[2] if ts else None

    # The 2 GiB files.
    big_rows = []
    for path in big_files:
        for label, version, cmd, parse, want in plan:
            log(f"timing {label} on {os.path.basename(path)} ...")
            seconds, out = timed(cmd(path), runs, cwd)
            note = ""
            if label.startswith("tensorscope"):
                rows = [ln for ln in out.stdout.splitlines() if ln.strip()]
                try:
                    row = json.loads(rows[0]) if len(rows) == 1 else None
                except ValueError:
                    row = None
                note = f"verdict {row.get('verdict')}" if isinstance(row, dict) else (
                    f"{len(rows)} lines on stdout")
                if out.returncode != 0 or not isinstance(row, dict) or \
                        row.get("verdict") != "safe":
                    failures.append(f"tensorscope scan {os.path.basename(path)}: exit "
                                    f"{out.returncode}, {note} (want 0, verdict safe)")
            else:
                got = parse(out, os.path.dirname(path), {path})
                note = f"{got['scanned'] if got['scanned'] is not None else '?'} file(s) scanned"
            big_rows.append((os.path.basename(path), label, seconds, out.returncode, note))

    bandwidth = memory_bandwidth(runs)

    # ---- print
    print(f"on {cpu_model()}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}, "
          f"numpy {np.__version__}")
    print(f"memory bandwidth: {bandwidth:.1f} GB/s (np.copyto of a 1 GiB float32 array, one "
          f"thread, bytes copied per second, best of {runs})")
    print(f"folder: {len(items)} files, {total_bytes / 2**20:.1f} MiB ({counts['unsafe']} unsafe, "
          f"{counts['invalid']} invalid, {counts['safe']} safe, {counts['unknown']} unknown per "
          f"SCAN.md), written in {made:.1f} s; best of {runs} whole processes, page cache warm")
    for note in notes:
        print(note)
    head = (f"  {'tool':<28} {'version':<10} {'exit':>8} {'seconds':>8} {'files/s':>8} "
            f"{'vs ts':>7} {'scanned':>7} {'flagged':>7} {'caught':>7} {'missed':>6} "
            f"{'not unsafe':>10}")
    print(head)
    for label, version, seconds, code, want, got in results:
        flagged = got["flagged"]
        caught = len(flagged & unsafe)
        ratio = f"{seconds / ts_seconds:6.1f}x" if ts_seconds else f"{'-':>7}"
        exit_text = f"{code}" + ("" if code == want else f"≠{want}")
        scanned = "?" if got["scanned"] is None else str(got["scanned"])
        print(f"  {label:<28} {version:<10} {exit_text:>8} {seconds:8.3f} "
              f"{len(items) / seconds:8.0f} {ratio} {scanned:>7} {len(flagged):>7} "
              f"{caught:>7} {len(unsafe) - caught:>6} {len(flagged - unsafe):>10}")
    print(f"  (vs ts: the tool's time over tensorscope's; flagged: files with a finding; caught: "
          f"of the {len(unsafe)} unsafe files; exit a≠b: a where b was expected)")
    for label, version, seconds, code, want, got in results:
        extra = []
        if got.get("errors"):
            extra.append(f"{got['errors']} scan errors reported")
        if got["invalid"]:
            extra.append(f"{len(got['invalid'])} invalid ({len(got['invalid'] & invalid)} of the "
                         f"{len(invalid)} broken files)")
        missed = sorted(unsafe - got["flagged"])
        if missed:
            kinds = collections.Counter(expected[p].kind for p in missed)
            extra.append("missed: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
        wrong = sorted(got["flagged"] - unsafe)
        if wrong:
            kinds = collections.Counter(expected[p].kind for p in wrong)
            extra.append("flagged but not unsafe: " + ", ".join(
                f"{n} {k}" for k, n in kinds.most_common()))
        extra += got.get("notes", []) + got["problems"]
        if extra:
            print(f"  {label}: " + "; ".join(extra))
    if ts:
        verdicts = ts[5]["verdicts"]
        differ = []
        for path, it in sorted(expected.items()):
            if path not in verdicts:
                continue
            verdict, fmt = verdicts[path]
            if verdict != it.verdict or (it.format is not None and fmt != it.format) or (
                    it.verdict == "unknown" and fmt is not None):
                differ.append(f"{it.rel}: {verdict}/{fmt}, expected {it.verdict}/{it.format} "
                              f"({it.kind})")
        if differ:
            print(f"  tensorscope rows that differ from SCAN.md's verdict/format "
                  f"({len(differ)}):")
            for line in differ[:15]:
                print(f"    {line}")
            if len(differ) > 15:
                print(f"    ... {len(differ) - 15} more")
        else:
            print("  tensorscope: every verdict and format as SCAN.md says")
    if big_rows:
        print(f"2 GiB checkpoints (tensor data a hole in the file), best of {runs}:")
        ts_big = {n: s for n, lab, s, _, _ in big_rows if lab.startswith("tensorscope")}
        for name, label, seconds, code, note in big_rows:
            ratio = f"{seconds / ts_big[name]:6.1f}x" if name in ts_big else f"{'-':>7}"
            print(f"  {name:<20} {label:<28} exit {code:<3} {seconds:8.3f} s {ratio}  {note}")
    return failures


if __name__ == "__main__":
    main()
