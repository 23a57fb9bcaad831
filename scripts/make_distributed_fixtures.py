#!/usr/bin/env python3
"""Sharded distributed-training checkpoint fixtures for Tensorscope, written by
real PyTorch Distributed Checkpoint (DCP) and real DeepSpeed ZeRO runs (2 CPU
ranks over gloo on 127.0.0.1).

    python scripts/make_distributed_fixtures.py dcp        # tests/data/dcp
    python scripts/make_distributed_fixtures.py deepspeed  # tests/data/deepspeed
    python scripts/make_distributed_fixtures.py all

Each subcommand clears its folder (README.md is kept) and writes one
sub-folder per fixture plus MANIFEST.json (see ../shared/DISTRIBUTED.md):
per fixture its provenance (python, torch, deepspeed, numpy, safetensors
versions, the date, the exact save call, world size, backend) and, per
GLOBAL tensor, its name, dtype (safetensors spelling), global shape and the
sha256 (and hex, every fixture tensor being small) of the reassembled
tensor's logical C-order little-endian bytes. The reassembled tensors come
from the libraries themselves:

- DCP: torch.distributed.checkpoint.format_utils.dcp_to_torch_save(dir, f)
  then torch.load(f) (for the HuggingFace-writer folder: the same
  _load_state_dict with _EmptyStateDictLoadPlanner over a
  HuggingFaceStorageReader), flattened with DCP's own flatten_state_dict.
  Each is also checked equal to the full tensors the ranks gathered before
  saving (DTensor.full_tensor(), get_state_dict(full_state_dict=True)).
  Chunks ({offsets, sizes} and the storage entry) are as .metadata lists
  them (FileSystemReader.read_metadata()); non-tensor (bytes) entries carry
  their values as JSON. The pickle globals of .metadata and of every
  torch.save zip nested in the .distcp files are found with pickletools
  (make_pytorch_fixtures.scan_pickle), never by unpickling.
- DeepSpeed: deepspeed.utils.zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint
  on the parent folder (via `latest`), checked against the engine's own
  fp32 master weights gathered before saving; plus the pickle globals of
  every *.pt file and the layout facts (param_shapes, flat group sizes,
  partition counts, paddings).

Run it in a venv made outside the repository (torch from PyPI is large):

    python3 -m venv /work/venvs/dist
    /work/venvs/dist/bin/pip install torch==2.15.0 numpy==2.4.6 deepspeed==0.19.8 \\
        safetensors==0.8.0
    /work/venvs/dist/bin/python scripts/make_distributed_fixtures.py all

Paths are relative to this file, so it runs from anywhere; FIXTURE_DATE
overrides the date written in the manifests. The Rust tests read the
committed files and manifests: they never need Python.

Determinism: everything is seeded and the tensor bytes (and so every sha256
of a tensor) are the same on every run. Files are not all byte-identical:
DCP's .metadata holds a fresh uuid4 (StorageMeta.save_id) per save, so its
sha256/size may change; the DeepSpeed files hold no run-dependent values we
know of, but their sha256 is informative only.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import platform
import shutil
import socket
import struct
import sys
import tempfile
import traceback
import zipfile

# DeepSpeed picks its accelerator on import: CPU, never CUDA, here.
os.environ.setdefault("DS_ACCELERATOR", "cpu")
# One thread per rank on the 2-core machine; no deterministic-algorithm surprises.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_pytorch_fixtures import ALLOWLIST as PICKLE_ALLOWLIST  # noqa: E402
from make_pytorch_fixtures import scan_pickle  # noqa: E402

SCRIPT = "scripts/make_distributed_fixtures.py"
ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
KEEP = {"README.md"}  # hand-written, never deleted
HEX_LIMIT = 4096  # tensors of fewer bytes carry their bytes as hex
EXPECTED = {"torch": "2.15.0", "numpy": "2.4.6", "deepspeed": "0.19.8", "safetensors": "0.8.0"}
DATE = os.environ.get("FIXTURE_DATE", "2026-12-07")

DTYPE_NAMES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int8: "I8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
    torch.uint8: "U8", torch.bool: "BOOL",
}

# DISTRIBUTED.md section 2 and 6: the allowlist additions.
DCP_ALLOWLIST = PICKLE_ALLOWLIST | {
    "torch.distributed.checkpoint.metadata." + n for n in (
        "Metadata TensorStorageMetadata BytesStorageMetadata ChunkStorageMetadata "
        "TensorProperties MetadataIndex StorageMeta _MEM_FORMAT_ENCODING").split()
} | {"torch.distributed.checkpoint.filesystem._StorageInfo", "pathlib.PosixPath",
     "pathlib.PurePosixPath", "pathlib._local.PosixPath"}
DS_ALLOWLIST = PICKLE_ALLOWLIST | {
    "deepspeed.runtime.zero.config.ZeroStageEnum", "deepspeed.checkpoint.constants.ZeroStageEnum",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.utils.tensor_fragment.fragment_address",
}


# ------------------------------------------------------------------ common


def versions() -> dict:
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "numpy": np.__version__, "platform": f"{platform.system()} {platform.machine()}"}
    for mod in ("deepspeed", "safetensors"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent is recorded as null
            out[mod] = None
    return out


def st_dtype(t: torch.Tensor) -> str:
    return DTYPE_NAMES[t.dtype]


def c_le_bytes(t: torch.Tensor) -> bytes:
    assert sys.byteorder == "little"
    flat = t.detach().cpu().contiguous().reshape(-1)  # 0-d -> (1,)
    return flat.view(torch.uint8).numpy().tobytes()


def tensor_entry(name: str, t: torch.Tensor) -> dict:
    b = c_le_bytes(t)
    e = {"name": name, "dtype": st_dtype(t), "shape": list(t.shape),
         "nbytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
    if len(b) < HEX_LIMIT:
        e["hex"] = b.hex()
    return e


def jsonable(v):
    """The value as JSON (tuples as lists), or raise TypeError."""
    text = json.dumps(v, allow_nan=False)
    return json.loads(text), text


def file_list(folder: pathlib.Path) -> list:
    out = []
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            b = f.read_bytes()
            out.append({"file": f.relative_to(folder).as_posix(), "size": len(b),
                        "sha256": hashlib.sha256(b).hexdigest()})
    return out


def zip_pickle_report(blob: bytes) -> dict:
    """Globals, protocol and layout of one torch.save zip given as bytes."""
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        names = zf.namelist()
        roots = {n.split("/", 1)[0] for n in names}
        assert len(roots) == 1, roots
        root = roots.pop()
        pkl = zf.read(f"{root}/data.pkl")
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    f = io.BytesIO(pkl)
    opcodes: set = set()
    globs, proto = scan_pickle(f, opcodes)
    assert f.tell() == len(pkl)
    return {"zip_root": root, "zip_entries": names, "protocol": proto,
            "globals": sorted(globs), "opcodes": sorted(opcodes)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, world_size: int, *args) -> None:
    port = free_port()
    mp.spawn(fn, args=(world_size, port) + args, nprocs=world_size, join=True)


def init_pg(rank: int, world_size: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def clear(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for p in out.iterdir():
        if p.name in KEEP:
            continue
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


# ------------------------------------------------------------------ models


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.tanh(self.mlp(self.norm(x)))


class TinyLM(nn.Module):
    """embed [vocab, 8], two blocks (LayerNorm(8), Linear(8, 8) with bias), a
    final LayerNorm, a head Linear(8, out) with bias; buffers: an int64 0-d
    step counter, a bool causal mask [4, 4] (and optionally a BF16 rope
    table [4, 2])."""

    def __init__(self, vocab: int, out: int, bf16_buffer: bool = False):
        super().__init__()
        dim = 8
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Block(dim) for _ in range(2)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, out)
        self.register_buffer("step_count", torch.tensor(0, dtype=torch.int64))
        self.register_buffer("mask", torch.tril(torch.ones(4, 4, dtype=torch.bool)))
        if bf16_buffer:
            self.register_buffer("rope", torch.randn(4, 2).to(torch.bfloat16))

    def forward(self, tokens):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h))


def randomize_norms(model: nn.Module) -> None:
    """LayerNorm weights/biases start at 1/0: give them distinct values."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.add_(torch.randn_like(m.weight) * 0.1)
                m.bias.add_(torch.randn_like(m.bias) * 0.1)


# ================================================================== DCP

DCP_OUT = DATA / "dcp"


def dcp_single_state() -> tuple[dict, str]:
    torch.manual_seed(1)
    model = TinyLM(vocab=16, out=16)
    randomize_norms(model)
    model.head.to(torch.bfloat16)  # BF16 head weight and bias
    with torch.no_grad():
        model.step_count.fill_(1200)
    state = {
        "model": model.state_dict(),
        "step": 1200,
        "run_name": "tiny-run",
        "config": {"betas": [0.9, 0.95], "warmup": None},
    }
    call = ('dcp.save({"model": model.state_dict(), "step": 1200, "run_name": "tiny-run", '
            '"config": {"betas": [0.9, 0.95], "warmup": None}}, checkpoint_id="single")  '
            "# no process group, cwd tests/data/dcp")
    return state, call


def dcp_fsdp2_worker(rank: int, world_size: int, port: int, out: str, ref: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_state_dict)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    init_pg(rank, world_size, port)
    torch.manual_seed(2)  # same init on every rank
    model = TinyLM(vocab=7, out=5, bf16_buffer=True)
    randomize_norms(model)
    mesh = init_device_mesh("cpu", (world_size,))
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    tokens = torch.randint(0, 7, (2, 4), generator=g)
    target = torch.randn(2, 4, 5, generator=g)
    loss = (model(tokens) - target).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        model.step_count.add_(1)
    msd, osd = get_state_dict(model, opt)
    os.chdir(out)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id="fsdp2_2rank")
    full_m, full_o = get_state_dict(model, opt, options=StateDictOptions(
        full_state_dict=True, cpu_offload=True))
    if rank == 0:
        torch.save({"model": full_m, "optim": full_o}, ref)
    dist.barrier()
    dist.destroy_process_group()


def dcp_dtensor_full_tensors() -> dict:
    torch.manual_seed(3)
    return {
        "col.weight": torch.randn(4, 7),  # Shard(1): columns 4 + 3
        "col_bf16": torch.randn(3, 5).to(torch.bfloat16),  # Shard(1): columns 3 + 2
        "cube": torch.randn(2, 5, 3),  # Shard(1) of a 3-d tensor: 3 + 2 in the middle
        "rows_i64": torch.arange(5 * 4, dtype=torch.int64).reshape(5, 4) * 1000003 - 7,  # Shard(0)
        "bias": torch.randn(6),  # Replicate(): saved once
        "flags": torch.rand(3, 3) > 0.5,  # BOOL, Replicate()
        "tiny": torch.tensor([[0.5, -1.25, 3.0]]),  # [1, 3] Shard(0): rank 1's chunk is [0, 3]
        "empty": torch.zeros(0, 4),  # [0, 4] Shard(0): one zero-volume chunk
    }


DTENSOR_PLACEMENTS = {"col.weight": "Shard(1)", "col_bf16": "Shard(1)", "cube": "Shard(1)",
                      "rows_i64": "Shard(0)", "bias": "Replicate()", "flags": "Replicate()",
                      "tiny": "Shard(0)", "empty": "Shard(0)"}


def dcp_dtensor_worker(rank: int, world_size: int, port: int, out: str, ref: str,
                       mode: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    init_pg(rank, world_size, port)
    mesh = init_device_mesh("cpu", (world_size,))
    full = dcp_dtensor_full_tensors()
    places = {"Shard(0)": [Shard(0)], "Shard(1)": [Shard(1)], "Replicate()": [Replicate()]}
    sd = {k: distribute_tensor(v, mesh, places[DTENSOR_PLACEMENTS[k]]) for k, v in full.items()}
    os.chdir(out)
    if mode == "shard1":
        sd["plain"] = torch.arange(6, dtype=torch.float32) / 4  # a plain tensor, same everywhere
        sd["epoch"] = 3
        dcp.save(sd, checkpoint_id="shard1_dtensor")
    else:
        from torch.distributed.checkpoint import HuggingFaceStorageWriter
        dcp.save(sd, storage_writer=HuggingFaceStorageWriter(path="hf_writer",
                                                             save_distributed=True))
    gathered = {k: v.full_tensor() for k, v in sd.items() if hasattr(v, "full_tensor")}
    if rank == 0:
        torch.save({"full": gathered}, ref)
    dist.barrier()
    dist.destroy_process_group()


def flatten_dcp(sd: dict) -> dict:
    from torch.distributed.checkpoint._nested_dict import flatten_state_dict
    flat, _mapping = flatten_state_dict(sd)
    return flat


def dcp_reassemble(folder: pathlib.Path, hf: bool = False) -> dict:
    """The checkpoint loaded back by torch into a full, flattened state dict."""
    from torch.distributed.checkpoint.format_utils import (_EmptyStateDictLoadPlanner,
                                                           dcp_to_torch_save)
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
    if hf:
        from torch.distributed.checkpoint import HuggingFaceStorageReader
        sd: dict = {}
        _load_state_dict(sd, storage_reader=HuggingFaceStorageReader(str(folder)),
                         planner=_EmptyStateDictLoadPlanner(), no_dist=True)
        return flatten_dcp(sd)
    with tempfile.TemporaryDirectory() as td:
        f = pathlib.Path(td) / "full.pt"
        dcp_to_torch_save(folder, f)
        sd = torch.load(f, weights_only=False)
    return flatten_dcp(sd)


def safetensors_header(path: pathlib.Path) -> dict:
    b = path.read_bytes()
    (n,) = struct.unpack("<Q", b[:8])
    return json.loads(b[8:8 + n])


def describe_dcp(folder: pathlib.Path, call: str, world_size: int, ref: dict | None,
                 hf: bool = False, notes: list | None = None) -> dict:
    """The manifest entry of one DCP folder."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import (BytesStorageMetadata,
                                                       TensorStorageMetadata)

    full = dcp_reassemble(folder, hf=hf)
    if hf:
        from torch.distributed.checkpoint import HuggingFaceStorageReader
        reader = HuggingFaceStorageReader(str(folder))
    else:
        reader = FileSystemReader(folder)
    md = reader.read_metadata()
    storage = md.storage_data

    entry = {
        "folder": folder.name,
        "provenance": dict(versions(), date=DATE, script=SCRIPT, call=call,
                           world_size=world_size,
                           launcher=("single process, no process group" if world_size == 1 else
                                     "torch.multiprocessing.spawn, gloo, MASTER_ADDR 127.0.0.1"),
                           oracle=("_load_state_dict(sd, storage_reader=HuggingFaceStorageReader"
                                   "(dir), planner=_EmptyStateDictLoadPlanner(), no_dist=True)"
                                   if hf else "torch.distributed.checkpoint.format_utils."
                                   "dcp_to_torch_save(dir, f); torch.load(f, weights_only=False)")
                           + "; flatten_state_dict"),
        "files": file_list(folder),
    }
    if notes:
        entry["notes"] = notes

    # .metadata pickle and nested torch.save zips.
    all_globals: set = set()
    if not hf:
        blob = (folder / ".metadata").read_bytes()
        f = io.BytesIO(blob)
        opcodes: set = set()
        mglobs, proto = scan_pickle(f, opcodes)
        assert f.tell() == len(blob)
        all_globals |= mglobs
        entry["metadata_pickle"] = {"protocol": proto, "globals": sorted(mglobs),
                                    "opcodes": sorted(opcodes)}
        sm = md.storage_meta
        entry["storage_meta"] = {"checkpoint_id": str(sm.checkpoint_id) if sm else None,
                                 "checkpoint_id_type": type(sm.checkpoint_id).__qualname__
                                 if sm else None,
                                 "save_id_is_uuid4": bool(sm and sm.save_id and
                                                          len(sm.save_id) == 36),
                                 "modules": list(sm.modules) if sm else None}
        entry["planner_data_type"] = type(md.planner_data).__name__
        entry["metadata_version"] = md.version
    else:
        headers = {}
        for p in sorted(folder.glob("*.safetensors")):
            h = safetensors_header(p)
            meta = h.get("__metadata__", {})
            headers[p.name] = {"__metadata__": meta,
                               "DCP_SHARDING_INFO": json.loads(meta["DCP_SHARDING_INFO"])
                               if "DCP_SHARDING_INFO" in meta else None,
                               "tensors": {k: {"dtype": v["dtype"], "shape": v["shape"],
                                               "data_offsets": v["data_offsets"]}
                                           for k, v in h.items() if k != "__metadata__"}}
        entry["safetensors_headers"] = headers

    nested_globals: set = set()
    zip_roots: set = set()

    def storage_of(index) -> dict:
        info = storage[index]
        rel = info.relative_path
        if hf:
            rel = pathlib.Path(rel).name
            return {"file": rel}
        out = {"file": rel, "offset": info.offset, "length": info.length,
               "transform_descriptors": getattr(info, "transform_descriptors", None)}
        data = (folder / rel).read_bytes()[info.offset:info.offset + info.length]
        rep = zip_pickle_report(data)
        nested_globals.update(rep["globals"])
        zip_roots.add(rep["zip_root"])
        out["nested_zip"] = {"root": rep["zip_root"], "entries": rep["zip_entries"],
                             "protocol": rep["protocol"], "globals": rep["globals"]}
        obj = torch.load(io.BytesIO(data), weights_only=False)
        if isinstance(obj, torch.Tensor):  # how the chunk is stored: whole storage or a view
            out["nested_zip"]["tensor"] = {
                "storage_offset": obj.storage_offset(), "strides": list(obj.stride()),
                "storage_nbytes": obj.untyped_storage().nbytes()}
        return out

    tensors, metadata, byte_entries = [], {}, []
    by_fqn: dict = {}
    for idx in storage:
        by_fqn.setdefault(idx.fqn, []).append(idx)
    for key, item in md.state_dict_metadata.items():
        if isinstance(item, TensorStorageMetadata):
            t = full[key]
            assert isinstance(t, torch.Tensor), key
            assert list(t.shape) == list(item.size), (key, t.shape, item.size)
            assert t.dtype == item.properties.dtype, key
            e = tensor_entry(key, t)
            pr = item.properties
            if not hf:  # .metadata's TensorProperties as pickled (strides: a rank's local ones)
                e["properties"] = {"dtype": str(pr.dtype), "requires_grad": pr.requires_grad,
                                   "memory_format": str(pr.memory_format),
                                   "pin_memory": pr.pin_memory,
                                   "strides": list(pr.strides) if pr.strides is not None
                                   else None,
                                   "build_state_len": len(pr.__getstate__())}
            chunks = []
            for c in item.chunks:
                idx = [i for i in by_fqn[key] if list(i.offset) == list(c.offsets)]
                assert len(idx) == 1, (key, c)
                chunks.append({"offsets": list(c.offsets), "sizes": list(c.sizes),
                               "storage": storage_of(idx[0])})
            vol = sum(int(np.prod(c["sizes"])) for c in chunks)
            assert vol == t.numel(), (key, vol)
            e["chunks"] = chunks
            tensors.append(e)
        else:
            assert isinstance(item, BytesStorageMetadata), (key, type(item))
            v = full[key]
            idx = by_fqn[key]
            assert len(idx) == 1 and idx[0].offset is None, (key, idx)
            be = {"name": key, "python_type": type(v).__name__, "storage": storage_of(idx[0])}
            try:
                be["value"], metadata[key] = jsonable(v)
            except TypeError:
                be["value"], be["repr"] = None, repr(v)
            byte_entries.append(be)

    # Everything torch gives back is accounted for and equals what was saved.
    assert set(full) == set(md.state_dict_metadata), set(full) ^ set(md.state_dict_metadata)
    if ref is not None:
        for k, v in full.items():
            r = ref[k]
            if isinstance(v, torch.Tensor):
                assert v.dtype == r.dtype and v.shape == r.shape and torch.equal(v, r), k
            else:
                assert v == r, (k, v, r)
    contract_check_dcp(folder, entry_tensors=tensors, byte_entries=byte_entries, full=full,
                       hf=hf)
    all_globals |= nested_globals
    entry["pickle"] = {"globals": sorted(all_globals),
                       "unsafe_globals": sorted(all_globals - DCP_ALLOWLIST),
                       "nested_zip_globals": sorted(nested_globals),
                       "nested_zip_roots": sorted(zip_roots)}
    entry["tensors"] = tensors
    entry["metadata"] = metadata
    entry["bytes_entries"] = byte_entries
    return entry


def contract_check_dcp(folder: pathlib.Path, entry_tensors: list, byte_entries: list,
                       full: dict, hf: bool) -> None:
    """DISTRIBUTED.md sections 3-4 redone from the manifest's chunks alone: each
    chunk's bytes (a nested torch.save zip, or a safetensors entry) hold a
    tensor of the chunk's sizes and the entry's dtype; placed at the chunk's
    offsets (boxes disjoint, volumes adding up) they give torch's reassembly."""
    dtypes = {v: k for k, v in DTYPE_NAMES.items()}
    if hf:
        from safetensors.torch import load_file
        files = {p.name: load_file(p) for p in folder.glob("*.safetensors")}
    for e in entry_tensors:
        out = torch.empty(e["shape"], dtype=dtypes[e["dtype"]])
        filled = torch.zeros(e["shape"], dtype=torch.int32)
        for c in e["chunks"]:
            st = c["storage"]
            if hf:
                t = files[st["file"]][e["name"]]
            else:
                data = (folder / st["file"]).read_bytes()
                assert st["offset"] + st["length"] <= len(data)
                t = torch.load(io.BytesIO(data[st["offset"]:st["offset"] + st["length"]]),
                               weights_only=True)
            assert isinstance(t, torch.Tensor) and st_dtype(t) == e["dtype"], e["name"]
            assert list(t.shape) == c["sizes"], (e["name"], t.shape, c["sizes"])
            assert all(o + n <= g for o, n, g in zip(c["offsets"], c["sizes"], e["shape"]))
            idx = tuple(slice(o, o + n) for o, n in zip(c["offsets"], c["sizes"]))
            out[idx] = t
            filled[idx] += 1
        assert bool((filled == 1).all()), e["name"]  # no hole, no overlap
        assert torch.equal(out, full[e["name"]]), e["name"]
    for b in byte_entries:
        st = b["storage"]
        data = (folder / st["file"]).read_bytes()[st["offset"]:st["offset"] + st["length"]]
        v = torch.load(io.BytesIO(data), weights_only=False)
        assert v == full[b["name"]], b["name"]


def ref_flat(ref_obj: dict) -> dict:
    return flatten_dcp(ref_obj)


def make_dcp() -> int:
    import torch.distributed.checkpoint as dcp
    out = DCP_OUT
    clear(out)
    fixtures: list = []
    skipped: list = []

    # 1. single process, no process group.
    state, call = dcp_single_state()
    cwd = os.getcwd()
    os.chdir(out)
    try:
        dcp.save(state, checkpoint_id="single")
    finally:
        os.chdir(cwd)
    fixtures.append(describe_dcp(out / "single", call, 1, flatten_dcp(state), notes=[
        "model.head.* are BF16 (model.head.to(torch.bfloat16)); model.step_count is a 0-d I64 "
        "buffer (chunk offsets [] sizes []); model.mask a BOOL buffer",
    ]))

    with tempfile.TemporaryDirectory() as td:
        ref = pathlib.Path(td) / "ref.pt"

        # 2. FSDP2, 2 ranks.
        spawn(dcp_fsdp2_worker, 2, str(out), str(ref))
        r = torch.load(ref, weights_only=False)
        fixtures.append(describe_dcp(
            out / "fsdp2_2rank",
            "fully_shard(block, mesh=init_device_mesh('cpu', (2,))) per block, then "
            "fully_shard(model); AdamW(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1), one step; "
            "msd, osd = get_state_dict(model, opt); "
            'dcp.save({"model": msd, "optim": osd}, checkpoint_id="fsdp2_2rank")  '
            "# 2 ranks, cwd tests/data/dcp", 2, ref_flat(r), notes=[
                "TinyLM(vocab=7, out=5): model.embed.weight [7, 8] is sharded 4 + 3 rows, "
                "model.head.weight [5, 8] 3 + 2, model.head.bias [5] 3 + 2; buffers (I64 0-d "
                "step_count, BOOL mask, BF16 rope) are plain tensors saved once",
                "reference: get_state_dict(model, opt, options=StateDictOptions("
                "full_state_dict=True, cpu_offload=True)) on rank 0, equal to the reassembly",
            ]))

        # 3. DTensors with Shard(1) / Shard(0) / Replicate().
        spawn(dcp_dtensor_worker, 2, str(out), str(ref), "shard1")
        r = torch.load(ref, weights_only=False)
        want = dict(r["full"])
        want["plain"] = torch.arange(6, dtype=torch.float32) / 4
        want["epoch"] = 3
        assert all(torch.equal(want[k], v) for k, v in dcp_dtensor_full_tensors().items())
        fixtures.append(describe_dcp(
            out / "shard1_dtensor",
            "sd = {name: distribute_tensor(full, init_device_mesh('cpu', (2,)), [placement])} "
            "(placements: " + json.dumps(DTENSOR_PLACEMENTS) + ') plus sd["plain"] = '
            'torch.arange(6.) / 4 and sd["epoch"] = 3; dcp.save(sd, checkpoint_id='
            '"shard1_dtensor")  # 2 ranks, cwd tests/data/dcp', 2, want, notes=[
                "placements: " + json.dumps(DTENSOR_PLACEMENTS),
                "col.weight [4, 7] Shard(1): columns 4 + 3; col_bf16 [3, 5] BF16 Shard(1): 3 + 2; "
                "cube [2, 5, 3] Shard(1): middle dimension 3 + 2; rows_i64 [5, 4] Shard(0); "
                "bias and flags Replicate() (one chunk); plain: a plain tensor (one chunk); "
                "epoch: a bytes entry",
                "tiny [1, 3] Shard(0): rank 0 holds the row, rank 1 a zero-volume chunk "
                "(offsets [1, 0], sizes [0, 3]: offsets reach the global size); empty [0, 4] "
                "Shard(0): an empty global tensor with one zero-volume chunk",
            ]))

        # 4. HuggingFaceStorageWriter(save_distributed=True).
        try:
            from torch.distributed.checkpoint import HuggingFaceStorageWriter  # noqa: F401
            have_hf = True
        except ImportError:
            have_hf = False
        if have_hf:
            spawn(dcp_dtensor_worker, 2, str(out), str(ref), "hf")
            r = torch.load(ref, weights_only=False)
            fixtures.append(describe_dcp(
                out / "hf_writer",
                "sd = {name: distribute_tensor(full, init_device_mesh('cpu', (2,)), [placement])} "
                "(placements: " + json.dumps(DTENSOR_PLACEMENTS) + "); dcp.save(sd, "
                'storage_writer=HuggingFaceStorageWriter(path="hf_writer", '
                "save_distributed=True))  # 2 ranks, cwd tests/data/dcp", 2, r["full"], hf=True,
                notes=["the same tensors as shard1_dtensor (without plain and epoch: the "
                       "safetensors writer takes tensors only)",
                       "no .metadata and no index: each rank's shard-0000R-model-00001-of-00001"
                       ".safetensors holds its chunks, __metadata__.DCP_SHARDING_INFO their "
                       "saved_offsets; Replicate() tensors appear in one file only"]))
        else:
            skipped.append({"folder": "hf_writer", "why": "this torch has no "
                            "torch.distributed.checkpoint.HuggingFaceStorageWriter"})

    write_manifest(out, "dcp", fixtures, skipped, {
        "tensors": "every global tensor, each once, in .metadata's state_dict_metadata order "
                   "(HF writer: the HuggingFaceStorageReader's order); name verbatim; dtype "
                   "safetensors spelling; shape the GLOBAL shape ([] for 0-d)",
        "sha256/hex": f"of the reassembled tensor's logical C-order little-endian bytes, as "
                      f"torch reassembles it (provenance.oracle); hex when under {HEX_LIMIT} "
                      f"bytes (BOOL as 0/1 bytes, BF16 as bit patterns)",
        "chunks": "[{offsets, sizes, storage}] as .metadata lists them (HF writer: one per "
                  "safetensors entry, offsets = saved_offsets). storage: the _StorageInfo "
                  "(relative_path as file, offset, length in bytes) and facts of the torch.save "
                  "zip found at those bytes (root folder, entries, pickle protocol, globals)",
        "metadata": "each bytes (non-tensor) entry's value as JSON text (json.dumps; tuples "
                    "become lists): what info --json reports under metadata",
        "bytes_entries": "each bytes entry: name, python_type, value (as JSON), storage",
        "pickle": "globals: every GLOBAL/STACK_GLOBAL in .metadata and in every nested "
                  "data.pkl, found with pickletools (no unpickling); unsafe_globals: those "
                  "outside DISTRIBUTED.md's DCP allowlist (must be empty); nested_zip_globals: "
                  "the nested data.pkl part alone",
        "metadata_pickle": ".metadata's own pickle: protocol, globals and the opcode names used",
        "storage_meta": "StorageMeta facts (checkpoint_id is the path given to dcp.save, "
                        "relative; save_id a fresh uuid4 per save, so .metadata's bytes differ "
                        "between runs)",
        "files/size/sha256": "every file of the fixture folder; informative (.metadata changes "
                             "from run to run)",
    })
    return 0


# ================================================================== DeepSpeed

DS_OUT = DATA / "deepspeed"


class DSTiny(nn.Module):
    """embed [16, 8]; one block (LayerNorm(8), Linear(8, 8) with bias);
    pos_scale [9] (odd numel: padding); proj Linear(8, 5) with bias ([5, 8]
    and [5], odd; 270 trainable elements in all, not a multiple of 2 * 2); optionally a frozen Linear(8, 3) without bias (frozen.weight,
    requires_grad False) and a head tied to the embedding (head.weight is
    embed.weight); buffers: an int64 0-d step counter, a float inv_freq [4]."""

    def __init__(self, frozen: bool, tied: bool):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.block = Block(8)
        self.pos_scale = nn.Parameter(torch.randn(9))
        self.proj = nn.Linear(8, 5)
        self.has_frozen, self.has_tied = frozen, tied
        if frozen:
            self.frozen = nn.Linear(8, 3, bias=False)
            self.frozen.weight.requires_grad_(False)
        if tied:
            self.head = nn.Linear(8, 16, bias=False)
            self.head.weight = self.embed.weight
        self.register_buffer("step_count", torch.tensor(0, dtype=torch.int64))
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)))

    def forward(self, tokens):
        h = self.embed(tokens)
        h = h * (1 + self.pos_scale[: tokens.shape[1]]).unsqueeze(-1).to(h.dtype)
        h = self.block(h)
        out = self.proj(h).sum()
        if self.has_frozen:
            out = out + self.frozen(h).pow(2).sum()
        if self.has_tied:
            out = out + self.head(h).pow(2).mean()
        return out


DS_FIXTURES = {
    # name: (stage, bf16, frozen, tied)
    "zero1": (1, True, True, True),
    "zero2": (2, False, True, False),
    "zero3": (3, False, True, True),
}


def ds_config(stage: int, bf16: bool) -> dict:
    cfg = {
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1000,
        "wall_clock_breakdown": False,
    }
    if bf16:
        cfg["bf16"] = {"enabled": True}
    return cfg


def ds_worker(rank: int, world_size: int, port: int, name: str, out: str, ref: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    import deepspeed
    import deepspeed.ops
    # The CPU accelerator's shared-memory allreduce helper is JIT-compiled with ninja: off.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo")
    stage, bf16, frozen, tied = DS_FIXTURES[name]
    torch.manual_seed(5)
    model = DSTiny(frozen, tied)
    randomize_norms(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2,
                            betas=(0.9, 0.95), weight_decay=0.1)
    engine, _opt, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                              config=ds_config(stage, bf16))
    g = torch.Generator().manual_seed(200 + rank)
    tokens = torch.randint(0, 16, (2, 5), generator=g)
    loss = engine(tokens)
    engine.backward(loss)
    engine.step()
    with torch.no_grad():
        engine.module.step_count.add_(1)
    engine.save_checkpoint(out)
    # Reference: the full fp32 masters and buffers as the live engine has them.
    refd = {}
    if stage == 3:
        from deepspeed.utils import safe_get_full_fp32_param
        for n, p in engine.module.named_parameters(remove_duplicate=False):
            if p.requires_grad:
                refd[n] = safe_get_full_fp32_param(p).detach().clone()
            else:
                with deepspeed.zero.GatheredParameters([p]):
                    refd[n] = p.detach().clone()
    else:
        from deepspeed.utils import safe_get_full_fp32_param
        for n, p in engine.module.named_parameters(remove_duplicate=False):
            full = safe_get_full_fp32_param(p) if p.requires_grad else None
            refd[n] = (full if full is not None else p).detach().clone()
    for n, b in engine.module.named_buffers():
        refd[n] = b.detach().clone()
    if rank == 0:
        torch.save(refd, ref)
    dist.barrier()


def ds_file_facts(path: pathlib.Path) -> dict:
    rep = zip_pickle_report(path.read_bytes())
    return {"protocol": rep["protocol"], "globals": rep["globals"], "zip_root": rep["zip_root"],
            "unsafe_globals": sorted(set(rep["globals"]) - DS_ALLOWLIST)}


def shape_list(s) -> list:
    return [int(x) for x in s]


def contract_reassemble_ds(step: pathlib.Path) -> dict:
    """DISTRIBUTED.md section 6 redone from the files (torch.load, our own
    files): the global tensors as the contract derives them."""
    import re

    def natural(name: str) -> list:
        return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]

    optim = sorted((p for p in step.iterdir() if p.name.endswith("optim_states.pt")),
                   key=lambda p: natural(p.name))
    models = sorted((p for p in step.iterdir() if p.name.endswith("model_states.pt")),
                    key=lambda p: natural(p.name))
    osds = [torch.load(p, weights_only=False)["optimizer_state_dict"] for p in optim]
    stage = int(osds[0]["zero_stage"])
    pcs = [max(o["partition_count"]) if isinstance(o["partition_count"], list)
           else o["partition_count"] for o in osds]
    w = pcs[0]
    assert all(pc == w for pc in pcs) and len(optim) == w
    mss = [torch.load(p, weights_only=False) for p in models]
    ms = mss[0]
    out = {}
    for n in ms["buffer_names"]:
        b = ms["module"][n]
        out[n] = b.float() if b.is_floating_point() else b
    fshapes = ms.get("frozen_param_shapes") or {}
    for n, shape in fshapes.items():
        if stage <= 2:
            out[n] = ms["frozen_param_fragments"][n]
        else:
            frags = [m["frozen_param_fragments"][n] for m in mss]
            out[n] = torch.cat(frags)[: shape.numel()].view(shape)
    if stage <= 2:
        pads = osds[0].get("param_alignment_paddings")
        for g, shapes in enumerate(ms["param_shapes"]):
            vec = torch.cat([o["single_partition_of_fp32_groups"][g] for o in osds])
            off = 0
            for i, (n, shape) in enumerate(shapes.items()):
                out[n] = vec[off:off + shape.numel()].view(shape)
                off += shape.numel() + (pads[g][i] if pads else 0)
            assert off <= vec.numel()
            align = 2 * w
            assert -(-off // align) * align == -(-vec.numel() // align) * align
    else:
        flat = [torch.cat(list(o["fp32_flat_groups"])) for o in osds]
        off = 0
        for shapes in ms["param_shapes"]:
            for n, shape in shapes.items():
                part = -(-shape.numel() // w)
                out[n] = torch.cat([f[off:off + part] for f in flat])[: shape.numel()].view(shape)
                off += part
        assert all(off == f.numel() for f in flat), (off, [f.numel() for f in flat])
    for alias, target in ms["shared_params"].items():
        out[alias] = out[target]
    return out


def describe_ds(folder: pathlib.Path, name: str, call: str, ref: dict) -> dict:
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    stage, bf16, frozen, tied = DS_FIXTURES[name]
    tag = (folder / "latest").read_text().strip()
    step = folder / tag
    full = get_fp32_state_dict_from_zero_checkpoint(str(folder))
    mine = contract_reassemble_ds(step)
    assert list(mine) == list(full) or set(mine) == set(full), set(mine) ^ set(full)
    for k, v in full.items():
        assert v.dtype == mine[k].dtype and torch.equal(v, mine[k]), k
    pt_files = sorted(p.name for p in step.glob("*.pt"))
    facts = {p: ds_file_facts(step / p) for p in pt_files}

    # Layout facts, read back with torch.load (the files are ours).
    model_files = [p for p in pt_files if p.endswith("model_states.pt")]
    optim_files = [p for p in pt_files if p.endswith("optim_states.pt")]
    ms = torch.load(step / model_files[0], weights_only=False)
    layout = {
        "model_files": model_files,
        "optim_files": optim_files,
        "model_state_keys": sorted(ms.keys()),
        "buffer_names": list(ms["buffer_names"]),
        "param_shapes": [[[k, shape_list(v)] for k, v in g.items()] for g in ms["param_shapes"]],
        "shared_params": dict(ms.get("shared_params") or {}),
        "frozen_param_shapes": [[k, shape_list(v)] for k, v in
                                (ms.get("frozen_param_shapes") or {}).items()],
        "module": {k: {"dtype": st_dtype(v), "shape": list(v.shape)}
                   for k, v in ms["module"].items()},
        "ds_version": ms.get("ds_version"),
    }
    frag, shared = {}, {}
    for mf in model_files:
        m = torch.load(step / mf, weights_only=False)
        frag[mf] = {k: {"dtype": st_dtype(v), "shape": list(v.shape)}
                    for k, v in (m.get("frozen_param_fragments") or {}).items()}
        shared[mf] = dict(m.get("shared_params") or {})
    layout["frozen_param_fragments"] = frag
    layout["shared_params_per_model_file"] = shared
    per_rank = []
    for of in optim_files:
        o = torch.load(step / of, weights_only=False)
        osd = o["optimizer_state_dict"]
        key = "fp32_flat_groups" if stage == 3 else "single_partition_of_fp32_groups"
        groups = osd[key]
        per_rank.append({
            "file": of,
            "top_keys": sorted(o.keys()),
            "optimizer_state_dict_keys": sorted(osd.keys()),
            "zero_stage": int(osd["zero_stage"]),
            "zero_stage_type": f"{type(osd['zero_stage']).__module__}."
                               f"{type(osd['zero_stage']).__qualname__}",
            "partition_count": osd["partition_count"],
            "flat_key": key,
            "flat_groups": [{"dtype": st_dtype(t), "shape": list(t.shape),
                             "python_type": f"{type(t).__module__}.{type(t).__qualname__}"}
                            for t in groups],
            "param_alignment_paddings": osd.get("param_alignment_paddings"),
            "group_paddings": osd.get("group_paddings"),
            "ds_version": o.get("ds_version"),
        })
    layout["optim_per_rank"] = per_rank

    buffer_names = set(ms["buffer_names"])
    frozen_names = {k for k, _ in layout["frozen_param_shapes"]}
    tensors = []
    for k, v in full.items():
        e = tensor_entry(k, v)
        e["kind"] = ("buffer" if k in buffer_names else "frozen" if k in frozen_names
                     else "shared" if k in layout["shared_params"] else "param")
        if e["kind"] == "shared":
            e["alias_of"] = layout["shared_params"][k]
        r = ref[k]
        expect = r.float() if r.is_floating_point() and e["kind"] in ("param", "buffer") else r
        assert v.shape == expect.shape, (k, v.shape, expect.shape)
        assert v.dtype == expect.dtype, (k, v.dtype, expect.dtype)
        assert torch.equal(v, expect), k
        tensors.append(e)
    # What the live model has and deepspeed does not give back: only frozen parameters,
    # and only when the checkpoint records none (BF16_Optimizer, ZeRO-1 with bf16).
    assert set(full) <= set(ref), set(full) - set(ref)
    missing = sorted(set(ref) - set(full))
    if missing:
        assert not layout["frozen_param_shapes"] and set(missing) == {"frozen.weight"}, missing

    ws = per_rank[0]["partition_count"]
    ws = max(ws) if isinstance(ws, list) else ws
    all_globals = sorted(set().union(*(set(f["globals"]) for f in facts.values())))
    return {
        "folder": folder.name,
        "provenance": dict(versions(), date=DATE, script=SCRIPT, call=call, world_size=2,
                           launcher="torch.multiprocessing.spawn, deepspeed.init_distributed("
                                    "dist_backend='gloo'), MASTER_ADDR 127.0.0.1, "
                                    "DS_ACCELERATOR=cpu, deepspeed.ops.__compatible_ops__"
                                    "['deepspeed_shm_comm'] = False",
                           ds_config=ds_config(stage, bf16),
                           oracle="deepspeed.utils.zero_to_fp32."
                                  "get_fp32_state_dict_from_zero_checkpoint(dir)"),
        "latest": tag,
        "step_folder": tag,
        "zero": {"stage": stage, "world_size": ws},
        "training_dtype": "BF16" if bf16 else "F32",
        "features": {"frozen": frozen, "tied": tied},
        "not_reconstructed": [{"name": n, "in_module": layout["module"].get(n),
                               "why": "a frozen parameter; this checkpoint records no "
                                      "frozen_param_shapes/frozen_param_fragments (DeepSpeed's "
                                      "BF16_Optimizer, ZeRO-1 with bf16), so zero_to_fp32 "
                                      "does not return it: it is only in module, as BF16"}
                              for n in missing],
        "files": file_list(folder),
        "pt_files": facts,
        "pickle": {"globals": all_globals,
                   "unsafe_globals": sorted(set(all_globals) - DS_ALLOWLIST)},
        "layout": layout,
        "tensors": tensors,
    }


def make_deepspeed() -> int:
    out = DS_OUT
    clear(out)
    fixtures = []
    with tempfile.TemporaryDirectory() as td:
        ref = pathlib.Path(td) / "ref.pt"
        for name, (stage, bf16, frozen, tied) in DS_FIXTURES.items():
            folder = out / name
            spawn(ds_worker, 2, name, str(folder), str(ref))
            r = torch.load(ref, weights_only=False)
            call = (f"engine, *_ = deepspeed.initialize(model=DSTiny(frozen={frozen}, "
                    f"tied={tied}), optimizer=torch.optim.AdamW(trainable, lr=1e-2, "
                    f"betas=(0.9, 0.95), weight_decay=0.1), config=" +
                    json.dumps(ds_config(stage, bf16)) + "); one engine.backward/step; "
                    f"engine.save_checkpoint({name!r})  # 2 ranks")
            fixtures.append(describe_ds(folder, name, call, r))
    write_manifest(out, "deepspeed", fixtures, [], {
        "tensors": "every tensor of get_fp32_state_dict_from_zero_checkpoint(folder), in its "
                   "order (buffers, frozen parameters, trainable parameters, shared aliases); "
                   "kind: param, buffer, frozen or shared (alias_of: the target); dtype "
                   "safetensors spelling; shape the global shape",
        "sha256/hex": f"of the tensor's logical C-order little-endian bytes as deepspeed "
                      f"returns it; hex when under {HEX_LIMIT} bytes. Checked equal to the "
                      f"live engine's full fp32 masters (safe_get_full_fp32_param) and buffers",
        "latest/step_folder": "the content of `latest` (stripped): the step folder",
        "zero": "what info --json reports: stage and world size (partition_count)",
        "pt_files": "per *.pt in the step folder: pickle protocol and globals of data.pkl "
                    "(pickletools, no unpickling); unsafe_globals: outside DISTRIBUTED.md's "
                    "DeepSpeed allowlist",
        "layout": "what the files hold (read with torch.load): buffer_names, param_shapes per "
                  "group, shared_params (of the first model file; shared_params_per_model_file: "
                  "each file's), frozen_param_shapes and per model file the frozen fragments' "
                  "shapes, and per optimizer file the zero stage, partition_count, the flat fp32 "
                  "groups' shapes, param_alignment_paddings and group_paddings",
        "files/size/sha256": "every file of the fixture folder (latest, zero_to_fp32.py, "
                             "zero_to_torch.py, global_step1/*); informative",
    })
    return 0


# ================================================================== manifest


def write_manifest(out: pathlib.Path, kind: str, fixtures: list, skipped: list,
                   conventions: dict) -> None:
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file() and f.name not in KEEP)
    manifest = {
        "generator": dict(versions(), script=SCRIPT, date=DATE,
                          command=f"python {SCRIPT} {kind}"),
        "conventions": conventions,
        "total_bytes": total,
        "skipped": skipped,
        "fixtures": fixtures,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for fx in fixtures:
        size = sum(f["size"] for f in fx["files"])
        print(f"{size:8d}  {kind}/{fx['folder']}  ({len(fx['tensors'])} tensors)")
    print(f"{total} bytes in {out}")


def main(argv: list) -> int:
    if len(argv) != 2 or argv[1] not in ("dcp", "deepspeed", "all"):
        print(__doc__)
        return 2
    for mod, want in EXPECTED.items():
        have = versions().get(mod)
        if have is None or not str(have).startswith(want):
            print(f"warning: {mod} {have}, the committed fixtures were made with {want}",
                  file=sys.stderr)
    rc = 0
    if argv[1] in ("dcp", "all"):
        rc |= make_dcp()
    if argv[1] in ("deepspeed", "all"):
        rc |= make_deepspeed()
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception:
        traceback.print_exc()
        sys.exit(1)
