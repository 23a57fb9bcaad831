"""The module inside Ray Data workers, on a local Ray cluster.

Ray is large, so it is installed only by scripts/test-ray (its own virtual
environment); elsewhere this test is skipped, with the reason printed by
`pytest -rs`. With TENSORSCOPE_REQUIRE_RAY=1 (scripts/test-ray) a missing
Ray is a failure, not a skip.
"""

import os

import numpy as np
import pytest

import tensorscope

try:
    import ray
except ImportError:  # pragma: no cover - depends on the environment
    ray = None


def _write(path, arrays):
    """A .safetensors file of little-endian float32/int32 arrays."""
    import json
    import struct

    names = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}
    header, data = {}, b""
    for name, a in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


@pytest.fixture(scope="module")
def cluster():
    if ray is None:
        if os.environ.get("TENSORSCOPE_REQUIRE_RAY") == "1":
            pytest.fail("ray is not importable, yet scripts/test-ray installed it")
        pytest.skip("ray is not installed here (scripts/test-ray installs it and runs this test)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_stats_and_info_over_many_checkpoints_in_ray_workers(cluster, tmp_path):
    rng = np.random.default_rng(7)
    paths = []
    for i in range(24):
        p = tmp_path / f"ckpt_{i:02}.safetensors"
        _write(
            p,
            {
                "w": rng.standard_normal((16, 8)).astype(np.float32),
                "b": np.full((8,), i, dtype=np.int32),
            },
        )
        paths.append(str(p))
    ds = ray.data.from_items([{"path": p} for p in paths])
    stats_rows = ds.map(lambda r: {"path": r["path"], "doc": tensorscope.stats(r["path"], moments=True)}).take_all()
    got = {r["path"]: r["doc"] for r in stats_rows}
    assert got == {p: tensorscope.stats(p, moments=True) for p in paths}
    info_rows = ds.map(lambda r: tensorscope.info(r["path"])).take_all()
    assert sorted(r["path"] for r in info_rows) == sorted(paths)
    for r in info_rows:
        assert {t["name"] for t in r["tensors"]} == {"w", "b"}


def test_arrays_read_in_workers(cluster, tmp_path):
    p = tmp_path / "one.safetensors"
    w = np.arange(64, dtype=np.float32).reshape(8, 8)
    _write(p, {"w": w})

    @ray.remote
    def total(path):
        with tensorscope.safe_open(path) as f:
            return float(f.get_tensor("w").sum())

    assert ray.get([total.remote(str(p)) for _ in range(4)]) == [float(w.sum())] * 4


def test_scan_over_many_files_in_ray_workers(cluster, tmp_path):
    # PYTHON.md's example: safe, unsafe, invalid and unknown rows in one
    # dataset give the rows of scan() called here, order aside.
    rng = np.random.default_rng(3)
    paths = []
    for i in range(12):
        p = tmp_path / f"ok_{i:02}.safetensors"
        _write(p, {"w": rng.standard_normal((4, 4)).astype(np.float32)})
        paths.append(str(p))
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(b"cos\nsystem\n(S'echo never run'\ntR.")
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    readme = tmp_path / "README.md"
    readme.write_text("# a model\n")
    paths += [str(evil), str(broken), str(readme)]
    rows = (
        ray.data.from_items([{"path": p} for p in paths])
        .map(lambda r: tensorscope.scan(r["path"]))
        .take_all()
    )
    key = lambda r: r["path"]
    assert sorted(rows, key=key) == sorted((tensorscope.scan(p) for p in paths), key=key)
    verdicts = {r["path"]: r["verdict"] for r in rows}
    assert verdicts[str(evil)] == "unsafe"
    assert verdicts[str(broken)] == "invalid"
    assert verdicts[str(readme)] == "unknown"
