"""`info`, `validate`, `stats`, `diff`, `convert` and `scan` return what the CLI's
`--json` documents say (PYTHON.md: the same dict, floats equal exactly, the same `path`
string as passed)."""

import json
import os
import pickle
import shutil
import zipfile

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy as stnp

import tensorscope
from conftest import DATA, cli_has_verb, cli_json, run_cli, write_safetensors


def assert_doc_equal(got, want, where="$"):
    """Deep equality with the first differing path in the message (floats exactly)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {type(got).__name__} is not a dict"
        assert set(got) == set(want), (
            f"{where}: keys differ: only module {sorted(set(got) - set(want))}, "
            f"only CLI {sorted(set(want) - set(got))}"
        )
        for k in want:
            assert_doc_equal(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list), f"{where}: {type(got).__name__} is not a list"
        assert len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_doc_equal(g, w, f"{where}[{i}]")
    elif isinstance(want, bool) or want is None:
        assert got is want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, float):
        assert isinstance(got, (int, float)) and not isinstance(got, bool), f"{where}: {got!r}"
        assert got == want, f"{where}: {got!r} != {want!r} (floats must be equal exactly)"
    elif isinstance(want, int):
        assert type(got) is int, f"{where}: {got!r} ({type(got).__name__}) is not an int"
        assert got == want, f"{where}: {got!r} != {want!r}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


# --------------------------------------------------------------------------- inputs

FIXTURES = [
    "numpy/le_f4.npy",
    "numpy/fortran_be_f8.npy",
    "numpy/savez_compressed_mixed.npz",
    "pytorch/all_dtypes_p2.pt",
    "pytorch/lightning.ckpt",
    "pytorch/legacy.pt",
    "pytorch/sharded/pytorch_model.bin.index.json",
    "gguf/types.gguf",
    "gguf/llama_tiny_q4_0.gguf",
    "gguf/split/tiny-00001-of-00002.gguf",
    "gguf/llama_tiny_hf",
    "onnx/dtypes.onnx",
    "onnx/external_many/model.onnx",
    "tensorflow/tf_sharded/ckpt-1.index",
    "keras/model.keras",
    "hdf5/chunked.h5",
    "flax/params.msgpack",
]


@pytest.fixture(scope="module")
def st_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("verbs")
    rng = np.random.default_rng(11)
    a = {
        "w": rng.standard_normal((16, 8)).astype(np.float32),
        "h": rng.standard_normal((4, 4)).astype(np.float16),
        "b": rng.standard_normal((8,)).astype(ml_dtypes.bfloat16),
        "i": rng.integers(-(2**40), 2**40, size=(5,), dtype=np.int64),
        "m": np.array([True, False, True]),
        "c": (rng.standard_normal(6) + 1j).astype(np.complex64),
        "s": np.array(2.5, dtype=np.float64),
        "e": np.zeros((0, 3), dtype=np.float32),
        "f8": np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn),
    }
    specials = a["w"].copy()
    specials.flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    a["x"] = specials
    b = dict(a)
    b["w"] = a["w"] + np.float32(1e-3)
    b["h"] = a["h"].astype(np.float32)  # dtype_changed
    del b["i"]  # only in a
    b["new"] = np.ones(3, dtype=np.float32)  # only in b
    pa, pb = d / "a.safetensors", d / "b.safetensors"
    stnp.save_file(a, str(pa), metadata={"format": "np", "step": "1"})
    stnp.save_file(b, str(pb), metadata={"format": "np", "step": "2"})
    pc = d / "c.safetensors"
    shutil.copyfile(pa, pc)
    return {"a": str(pa), "b": str(pb), "copy_of_a": str(pc)}


def _corrupt_files(d):
    """Files that `validate` judges invalid (exit 1): name -> path."""
    out = {}
    p = d / "three_bytes.safetensors"
    p.write_bytes(b"abc")
    out["HeaderTooSmall"] = p
    p = d / "header_too_long.safetensors"
    p.write_bytes((1000).to_bytes(8, "little") + b"{}")
    out["InvalidHeaderLength"] = p
    p = d / "bad_json.safetensors"
    p.write_bytes((8).to_bytes(8, "little") + b'{"a":1 }')
    out["InvalidHeaderDeserialization"] = p
    good = d / "good.safetensors"
    write_safetensors(good, {"x": np.arange(10, dtype=np.float32)})
    data = good.read_bytes()
    p = d / "truncated.safetensors"
    p.write_bytes(data[:-4])
    out["MetadataIncompleteBuffer"] = p
    p = d / "offsets.safetensors"
    write_safetensors(p, {"x": ("F32", [10], b"\0" * 40), "y": ("F32", [2], b"\0" * 8)})
    raw = bytearray(p.read_bytes())
    raw = raw.replace(b'"data_offsets":[40,48]', b'"data_offsets":[44,52]')
    p.write_bytes(bytes(raw))
    out["InvalidOffset"] = p
    p = d / "truncated.gguf"
    p.write_bytes((DATA / "gguf/types.gguf").read_bytes()[:5000])
    out["gguf"] = p
    p = d / "truncated.npy"
    p.write_bytes((DATA / "numpy/le_f8.npy").read_bytes()[:-8])
    out["npy"] = p

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    p = d / "evil.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": Evil()}, protocol=2))
        z.writestr("archive/version", "3\n")
    out["UnsafePickle"] = p
    return {k: str(v) for k, v in out.items()}


# --------------------------------------------------------------------------- info


@pytest.mark.parametrize("rel", FIXTURES)
def test_info_equals_cli(rel):
    path = str(DATA / rel)
    assert_doc_equal(tensorscope.info(path), cli_json("info", "--json", path, codes=(0,)))


def test_info_safetensors_equals_cli(st_files):
    for p in st_files.values():
        assert_doc_equal(tensorscope.info(p), cli_json("info", "--json", p, codes=(0,)))


def test_info_keeps_relative_path_string(monkeypatch):
    monkeypatch.chdir(DATA / "numpy")
    doc = tensorscope.info("le_f4.npy")
    assert doc["path"] == "le_f4.npy"
    assert_doc_equal(doc, cli_json("info", "--json", "le_f4.npy", cwd=DATA / "numpy", codes=(0,)))


def test_info_of_unsafe_pickle_is_a_document(tmp_path):
    """`info` names the unsafe globals (CLI exit 0): a document, not an exception."""
    path = _corrupt_files(tmp_path)["UnsafePickle"]
    doc = tensorscope.info(path)
    assert_doc_equal(doc, cli_json("info", "--json", path, codes=(0,)))
    assert doc["pickle"]["unsafe_globals"] == ["posix.system"]


def test_info_missing_file_raises_io(tmp_path):
    path = str(tmp_path / "missing.safetensors")
    want = cli_json("info", "--json", path, codes=(2,))["error"]["kind"]
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.info(path)
    assert ei.value.kind == want == "Io"


# --------------------------------------------------------------------------- validate


@pytest.mark.parametrize("rel", FIXTURES)
def test_validate_equals_cli(rel):
    path = str(DATA / rel)
    assert_doc_equal(tensorscope.validate(path), cli_json("validate", "--json", path))


def test_validate_invalid_files_return_document(tmp_path):
    for name, path in _corrupt_files(tmp_path).items():
        want = cli_json("validate", "--json", path, codes=(1,))
        got = tensorscope.validate(path)
        assert_doc_equal(got, want, f"validate({name})")
        assert got["valid"] is False
        if name[0].isupper():
            assert got["error"]["kind"] == name


def test_validate_missing_file_raises(tmp_path):
    path = str(tmp_path / "nope.safetensors")
    want = cli_json("validate", "--json", path, codes=(2,))["error"]["kind"]
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.validate(path)
    assert ei.value.kind == want


# --------------------------------------------------------------------------- stats

STATS_FIXTURES = [
    "numpy/savez_compressed_mixed.npz",
    "numpy/specials_c8.npy",
    "pytorch/all_dtypes_p2.pt",
    "gguf/types.gguf",
    "onnx/dtypes.onnx",
    "hdf5/dtypes.h5",
    "flax/params.msgpack",
    "tensorflow/tf_checkpoint/ckpt-1.index",
]


@pytest.mark.parametrize("rel", STATS_FIXTURES)
def test_stats_equals_cli(rel):
    path = str(DATA / rel)
    assert_doc_equal(tensorscope.stats(path), cli_json("stats", "--json", path, codes=(0,)))


def test_stats_safetensors_all_forms(st_files):
    p = st_files["a"]
    assert_doc_equal(tensorscope.stats(p), cli_json("stats", "--json", p, codes=(0,)))
    assert_doc_equal(tensorscope.stats(p, moments=True),
                     cli_json("stats", "--json", p, "--moments", codes=(0,)))
    assert_doc_equal(tensorscope.stats(p, tensors=["x", "b"]),
                     cli_json("stats", "--json", p, "--tensor", "x", "--tensor", "b", codes=(0,)))
    assert_doc_equal(
        tensorscope.stats(p, tensors=["x", "b"], moments=True),
        cli_json("stats", "--json", p, "--tensor", "x", "--tensor", "b", "--moments", codes=(0,)),
    )
    assert_doc_equal(tensorscope.stats(p, None, False), cli_json("stats", "--json", p, codes=(0,)))


def test_stats_tensors_and_moments_on_gguf():
    p = str(DATA / "gguf/types.gguf")
    names = ["t.Q4_K", "t.BF16", "t.I64"]
    args = [a for n in names for a in ("--tensor", n)]
    assert_doc_equal(tensorscope.stats(p, tensors=names, moments=True),
                     cli_json("stats", "--json", p, *args, "--moments", codes=(0,)))


def test_stats_unknown_tensor_raises(st_files):
    p = st_files["a"]
    want = cli_json("stats", "--json", p, "--tensor", "nope", codes=(2,))["error"]["kind"]
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.stats(p, tensors=["nope"])
    assert ei.value.kind == want == "UnknownTensor"


# --------------------------------------------------------------------------- diff


def test_diff_equals_cli_safetensors(st_files):
    for a, b in [("a", "copy_of_a"), ("a", "b"), ("b", "a"), ("a", "a")]:
        pa, pb = st_files[a], st_files[b]
        want = cli_json("diff", "--json", pa, pb)
        got = tensorscope.diff(pa, pb)
        assert_doc_equal(got, want, f"diff({a}, {b})")
    assert tensorscope.diff(st_files["a"], st_files["b"])["summary"]["same"] is False


DIFF_PAIRS = [
    ("gguf/llama_tiny_hf/model.safetensors", "gguf/llama_tiny.gguf"),
    ("gguf/llama_tiny.gguf", "gguf/llama_tiny_q4_0.gguf"),
    ("keras/model.keras", "keras/model.weights.h5"),
    ("pytorch/views_p4.pt", "pytorch/views_p5.pt"),
    ("numpy/savez_names.npz", "numpy/savez_compressed_mixed.npz"),
]


@pytest.mark.parametrize("pair", DIFF_PAIRS, ids=lambda p: f"{p[0]}~{p[1]}")
def test_diff_equals_cli_fixtures(pair):
    a, b = (str(DATA / x) for x in pair)
    assert_doc_equal(tensorscope.diff(a, b), cli_json("diff", "--json", a, b))


def test_diff_against_own_conversion_is_same(tmp_path):
    src = str(DATA / "numpy/savez_compressed_mixed.npz")
    dst = str(tmp_path / "conv.safetensors")
    tensorscope.convert(src, dst)
    doc = tensorscope.diff(src, dst)
    assert_doc_equal(doc, cli_json("diff", "--json", src, dst, codes=(0,)))
    assert doc["summary"]["same"] is True


# --------------------------------------------------------------------------- convert

CONVERT_SOURCES = [
    "numpy/savez_compressed_mixed.npz",
    "numpy/fortran_be_u4_3d.npy",
    "pytorch/lightning.ckpt",
    "pytorch/all_dtypes_p2.pt",
    "pytorch/sharded",
    "gguf/types.gguf",
    "gguf/split/tiny-00001-of-00002.gguf",
    "onnx/dtypes.onnx",
    "tensorflow/tf_sharded/ckpt-1.index",
    "keras/model.keras",
    "hdf5/chunked.h5",
    "flax/params.msgpack",
]


@pytest.mark.parametrize("rel", CONVERT_SOURCES)
def test_convert_writes_resave_bytes(rel, tmp_path):
    src = str(DATA / rel)
    dst = tmp_path / "module.safetensors"
    ref = tmp_path / "cli.safetensors"
    tensorscope.convert(src, str(dst))
    proc = run_cli("resave", src, "-o", ref)
    assert proc.returncode == 0, proc.stderr
    assert dst.read_bytes() == ref.read_bytes()
    # Nothing else was written beside it (no temporary files left).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.safetensors", "module.safetensors"]


@pytest.mark.parametrize("rel", ["numpy/savez_names.npz", "pytorch/lightning.ckpt", "gguf/types.gguf"])
def test_convert_returns_resave_document(rel, tmp_path):
    """The stub: convert returns the `resave --json` document (same src and dst)."""
    src = str(DATA / rel)
    dst = str(tmp_path / "out.safetensors")
    doc = tensorscope.convert(src, dst)
    module_bytes = (tmp_path / "out.safetensors").read_bytes()
    want = cli_json("resave", "--json", src, "-o", dst, codes=(0,))
    assert (tmp_path / "out.safetensors").read_bytes() == module_bytes
    assert_doc_equal(doc, want)


def test_convert_safetensors(st_files, tmp_path):
    dst = tmp_path / "m.safetensors"
    ref = tmp_path / "c.safetensors"
    tensorscope.convert(st_files["a"], str(dst))
    assert run_cli("resave", st_files["a"], "-o", ref).returncode == 0
    assert dst.read_bytes() == ref.read_bytes()
    with tensorscope.safe_open(str(dst)) as f, tensorscope.safe_open(st_files["a"]) as g:
        assert f.keys() == g.keys()
        assert f.metadata() == g.metadata()


def test_convert_unsafe_pickle_raises(tmp_path):
    src = _corrupt_files(tmp_path)["UnsafePickle"]
    dst = tmp_path / "out.safetensors"
    with pytest.raises(tensorscope.UnsafePickleError):
        tensorscope.convert(src, str(dst))
    assert not dst.exists()


# --------------------------------------------------------------------------- scan


def _scan_inputs(tmp_path, st_files):
    corrupt = _corrupt_files(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("# not a checkpoint\n")
    return [
        st_files["a"],
        corrupt["UnsafePickle"],
        corrupt["HeaderTooSmall"],
        str(readme),
        str(DATA / "numpy/savez_names.npz"),
        str(DATA / "numpy/refused_object_pickle.npy"),
        str(DATA / "keras/lambda.keras"),
        str(DATA / "gguf/types.gguf"),
        str(DATA / "pytorch/pytorch_model.bin"),
    ]


def test_scan_equals_cli(tmp_path, st_files):
    if not cli_has_verb("scan"):
        pytest.skip("this tensorscope CLI has no `scan` verb (SCAN.md), nothing to compare with")
    assert callable(getattr(tensorscope, "scan", None)), "PYTHON.md: tensorscope.scan(path)"
    for path in _scan_inputs(tmp_path, st_files):
        proc = run_cli("scan", "--json", path)
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        assert len(lines) == 1, proc.stdout
        assert_doc_equal(tensorscope.scan(path), json.loads(lines[0]), f"scan({path})")
