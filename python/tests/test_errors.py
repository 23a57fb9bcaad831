"""Errors: `TensorscopeError.kind` is the CLI's `error.kind`; malicious pickles raise
`UnsafePickleError` (with `.globals`) and are never executed, nothing imported."""

import os
import pickle
import subprocess
import sys
import uuid
import zipfile

import numpy as np
import pytest

import tensorscope
from conftest import DATA, cli_json, write_safetensors

# --------------------------------------------------------------------------- the classes


def test_exception_classes():
    assert issubclass(tensorscope.TensorscopeError, Exception)
    assert issubclass(tensorscope.UnsafePickleError, tensorscope.TensorscopeError)


def _error_kind_of_cli(verb, *args):
    return cli_json(verb, "--json", *args, codes=(2,))["error"]["kind"]


def test_header_too_small(tmp_path):
    p = tmp_path / "three.safetensors"
    p.write_bytes(b"abc")
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.safe_open(str(p), framework="np")
    e = ei.value
    assert e.kind == "HeaderTooSmall" == _error_kind_of_cli("info", str(p))
    assert isinstance(str(e), str) and str(e)
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.load_file(str(p))
    assert ei.value.kind == "HeaderTooSmall"


def test_missing_file_is_io(tmp_path):
    p = str(tmp_path / "does-not-exist.safetensors")
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.safe_open(p, framework="np")
    assert ei.value.kind == "Io" == _error_kind_of_cli("info", p)
    assert not isinstance(ei.value, tensorscope.UnsafePickleError)
    # The stub's attributes: the path concerned, and no globals.
    assert ei.value.path == cli_json("info", "--json", p, codes=(2,))["error"]["path"] == p
    assert ei.value.globals == []


def test_unknown_tensor(tmp_path):
    p = tmp_path / "x.safetensors"
    write_safetensors(p, {"a": np.zeros(3, np.float32)})
    out = tmp_path / "out.npy"
    want = cli_json("export", "--json", str(p), "nope", "-o", str(out), codes=(2,))["error"]["kind"]
    assert not out.exists()
    with tensorscope.safe_open(str(p), framework="np") as f:
        with pytest.raises(tensorscope.TensorscopeError) as ei:
            f.get_tensor("nope")
        assert ei.value.kind == want == "UnknownTensor"
        with pytest.raises(tensorscope.TensorscopeError) as ei:
            f.get_slice("nope")
        assert ei.value.kind == "UnknownTensor"
        # The object still works after an error.
        assert f.get_tensor("a").shape == (3,)


@pytest.mark.parametrize(
    "content, kind",
    [
        ((1000).to_bytes(8, "little") + b"{}", "InvalidHeaderLength"),
        ((8).to_bytes(8, "little") + b'{"a":1 }', "InvalidHeaderDeserialization"),
        ((2**62).to_bytes(8, "little") + b"{}      ", "HeaderTooLarge"),
    ],
)
def test_safetensors_header_kinds(tmp_path, content, kind):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(content)
    assert _error_kind_of_cli("info", str(p)) == kind
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        tensorscope.safe_open(str(p), framework="np")
    assert ei.value.kind == kind


@pytest.mark.parametrize("framework", ["pt", "tf", "flax", "jax", "torch", ""])
def test_other_frameworks_are_value_errors(framework):
    with pytest.raises(ValueError):
        tensorscope.safe_open(str(DATA / "numpy/le_f4.npy"), framework=framework)


def test_wrong_argument_types():
    with pytest.raises((TypeError, ValueError)):
        tensorscope.safe_open(12345, framework="np")
    with tensorscope.safe_open(str(DATA / "numpy/le_f4.npy"), framework="np") as f:
        with pytest.raises((TypeError, ValueError)):
            f.get_tensor(7)
    with pytest.raises((TypeError, ValueError)):
        tensorscope.stats(str(DATA / "numpy/le_f4.npy"), tensors=5)


@pytest.mark.parametrize("rel", [
    "numpy/savez_names.npz", "numpy/le_f4.npy", "pytorch/pytorch_model.bin", "pytorch/sharded",
    "gguf/types.gguf", "onnx/dtypes.onnx", "tensorflow/tf_checkpoint/ckpt-1.index",
    "keras/model.keras", "hdf5/dtypes.h5", "flax/params.msgpack",
])
def test_unknown_tensor_every_container(rel, tmp_path):
    path = str(DATA / rel)
    out = tmp_path / "out.npy"
    want = cli_json("export", "--json", path, "no.such.tensor", "-o", str(out), codes=(2,))
    with tensorscope.safe_open(path, framework="np") as f:
        with pytest.raises(tensorscope.TensorscopeError) as ei:
            f.get_tensor("no.such.tensor")
    assert ei.value.kind == want["error"]["kind"]


# --------------------------------------------------------------------------- .npz object arrays


def test_npz_object_array_is_refused(tmp_path):
    p = tmp_path / "obj.npz"
    marker = tmp_path / "npz-marker"
    np.savez(p, good=np.arange(3, dtype=np.float32),
             payload=np.array([{"a": 1}, _Evil(f"touch {marker}")], dtype=object))
    want = _error_kind_of_cli("info", str(p))
    with pytest.raises(tensorscope.TensorscopeError) as ei:
        with tensorscope.safe_open(str(p), framework="np") as f:
            for k in f.keys():
                f.get_tensor(k)
    assert ei.value.kind == want
    with pytest.raises(tensorscope.TensorscopeError):
        tensorscope.load_file(str(p))
    assert not marker.exists()


def test_npy_object_array_fixture(tmp_path):
    for rel in ("numpy/refused_object_pickle.npy", "numpy/refused_npz_object_member.npz"):
        p = str(DATA / rel)
        with pytest.raises(tensorscope.TensorscopeError) as ei:
            tensorscope.load_file(p)
        assert ei.value.kind == _error_kind_of_cli("info", p)


# --------------------------------------------------------------------------- malicious pickles


class _Evil:
    """Pickles as a call of os.system(cmd); pickling does not run it."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class _Reduce:
    """Pickles as a call of an arbitrary callable with arguments."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def _torch_zip(path, pkl, root="archive"):
    """A torch.save-style zip around the pickle `pkl`."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{root}/data.pkl", pkl)
        z.writestr(f"{root}/byteorder", "little")
        z.writestr(f"{root}/data/0", b"\0" * 16)
        z.writestr(f"{root}/version", "3\n")
    return path


def _legacy(path, pkl):
    """A legacy (pre-1.6) torch file: magic, protocol version, sys_info, the object
    pickle `pkl`, the storage keys; no storages."""
    with open(path, "wb") as f:
        pickle.dump(0x1950A86A20F9469CFC6C, f, protocol=2)
        pickle.dump(1001, f, protocol=2)
        pickle.dump({"protocol_version": 1001, "little_endian": True,
                     "type_sizes": {"short": 2, "int": 4, "long": 4}}, f, protocol=2)
        f.write(pkl)
        pickle.dump([], f, protocol=2)
    return path


def _hand_protocol2(module, name, arg):
    """PROTO 2, GLOBAL module name, the string arg, TUPLE1, REDUCE, STOP (by hand)."""
    a = arg.encode()
    return (
        b"\x80\x02"
        + b"}q\x00X\x01\x00\x00\x00wq\x01"
        + b"c" + module.encode() + b"\n" + name.encode() + b"\n"
        + b"X" + len(a).to_bytes(4, "little") + a
        + b"\x85R"
        + b"s."
    )


def _cases(tmp_path):
    """(id, protocol, pickle bytes, the global it names, marker path) of each pickle.

    Names are verbatim (PICKLE.md): protocol 2 with Python 2 import fixing writes
    `__builtin__.exec` and `commands.Popen`; without it, the Python 3 names.
    """
    cases = []
    system = f"{os.system.__module__}.system"  # posix.system on Linux
    for proto in range(6):
        m = tmp_path / f"m-os-{proto}"
        pkl = pickle.dumps({"w": _Evil(f"touch {m}")}, protocol=proto, fix_imports=False)
        cases.append((f"os.system-p{proto}", proto, pkl, system, m))
    m = tmp_path / "m-posix"
    cases.append(("posix.system-hand", 2, _hand_protocol2("posix", "system", f"touch {m}"),
                  "posix.system", m))
    m = tmp_path / "m-exec"
    code = f"open({str(m)!r}, 'w').close()"
    cases.append(("builtins.exec-p2-fixed", 2, pickle.dumps({"w": _Reduce(exec, (code,))}, protocol=2),
                  "__builtin__.exec", m))
    for proto in (2, 3, 4, 5):
        pkl = pickle.dumps({"w": _Reduce(exec, (code,))}, protocol=proto, fix_imports=False)
        cases.append((f"builtins.exec-p{proto}", proto, pkl, "builtins.exec", m))
    m = tmp_path / "m-popen"
    popen = _Reduce(subprocess.Popen, (["touch", str(m)],))
    cases.append(("subprocess.Popen-p2-fixed", 2, pickle.dumps({"w": popen}, protocol=2), None, m))
    for proto in (2, 4):
        pkl = pickle.dumps({"w": popen}, protocol=proto, fix_imports=False)
        cases.append((f"subprocess.Popen-p{proto}", proto, pkl, "subprocess.Popen", m))
    return cases


def _assert_unsafe(path, global_name, marker, cli_globals):
    with pytest.raises(tensorscope.UnsafePickleError) as ei:
        tensorscope.safe_open(str(path), framework="np")
    e = ei.value
    assert isinstance(e, tensorscope.TensorscopeError)
    assert e.kind == "UnsafePickle"
    assert isinstance(e.globals, list) and all(isinstance(g, str) for g in e.globals)
    assert e.globals == cli_globals
    if global_name is not None:
        assert global_name in e.globals
    assert str(e)
    with pytest.raises(tensorscope.UnsafePickleError) as ei2:
        tensorscope.load_file(str(path))
    assert ei2.value.globals == cli_globals
    assert not marker.exists(), "the pickle was executed"


@pytest.mark.parametrize("container", ["bare", "torch-zip", "legacy"])
def test_malicious_pickles_raise_unsafe_pickle_error(tmp_path, container):
    for case_id, proto, pkl, global_name, marker in _cases(tmp_path):
        if container == "bare":
            if proto < 2:  # a bare pickle is recognised by its PROTO opcode (0x80)
                continue
            path = tmp_path / f"{case_id}.pkl"
            path.write_bytes(pkl)
        elif container == "legacy":
            path = _legacy(tmp_path / f"{case_id}.legacy.pt", pkl)
        else:
            path = _torch_zip(tmp_path / f"{case_id}.pt", pkl)
        doc = cli_json("validate", "--json", str(path), codes=(1,))
        assert doc["error"]["kind"] == "UnsafePickle", (case_id, doc)
        cli_globals = doc["error"]["globals"]
        if global_name is not None:
            assert global_name in cli_globals, (case_id, cli_globals)
        _assert_unsafe(path, global_name, marker, cli_globals)


def test_pickle_global_is_never_imported(tmp_path, monkeypatch):
    """A pickle naming a global of a real, importable module: the module is not imported
    (its import would create a marker file)."""
    modname = f"tensorscope_evil_{uuid.uuid4().hex[:12]}"
    marker = tmp_path / "imported-marker"
    pkgdir = tmp_path / "site"
    pkgdir.mkdir()
    (pkgdir / f"{modname}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        f"def run(*a):\n    open({str(marker)!r} + '-called', 'w').close()\n"
    )
    monkeypatch.syspath_prepend(str(pkgdir))
    pkl = _hand_protocol2(modname, "run", "x")
    for path in (tmp_path / "evil.pkl", _torch_zip(tmp_path / "evil.pt", pkl)):
        if path.suffix == ".pkl":
            path.write_bytes(pkl)
        with pytest.raises(tensorscope.UnsafePickleError) as ei:
            tensorscope.load_file(str(path))
        assert ei.value.globals == [f"{modname}.run"]
    assert modname not in sys.modules
    assert not marker.exists()
    assert not (tmp_path / "imported-marker-called").exists()


def test_legacy_style_fixture_globals_are_safe():
    """The fixtures' pickles only name allowlisted globals: they open."""
    for rel in ("pytorch/all_dtypes_p2.pt", "pytorch/legacy.pt", "pytorch/views_p5.pt"):
        with tensorscope.safe_open(str(DATA / rel), framework="np") as f:
            assert f.keys()
