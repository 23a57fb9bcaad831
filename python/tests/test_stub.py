"""The type stub (tensorscope.pyi) names exactly the module's public API."""

import ast
import inspect
import types
from pathlib import Path

import pytest

import tensorscope
from conftest import REPO


def _stub_path():
    candidates = [
        REPO / "tensorscope.pyi",
        REPO / "python" / "tensorscope.pyi",
        REPO / "python" / "tensorscope" / "__init__.pyi",
        REPO / "python" / "tensorscope" / "tensorscope.pyi",
    ]
    mod_file = getattr(tensorscope, "__file__", None)
    if mod_file:
        here = Path(mod_file).parent
        candidates += [here / "tensorscope.pyi", here / "__init__.pyi"]
    for c in candidates:
        if c.is_file():
            return c
    return None


STUB = _stub_path()
pytestmark = pytest.mark.skipif(STUB is None, reason="no tensorscope.pyi yet")


def _stub_tree():
    return ast.parse(STUB.read_text(encoding="utf-8"), filename=str(STUB))


def _top_level(tree):
    """name -> node of every name the stub defines or re-exports at module level."""
    out = {}

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[node.name] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = node
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[node.target.id] = node
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.asname is not None and a.asname == a.name:  # explicit re-export
                        out[a.asname] = node
            elif isinstance(node, ast.If):  # sys.version_info branches
                visit(node.body)
                visit(node.orelse)

    visit(tree.body)
    return out


def _public(names):
    return {n for n in names if not n.startswith("_")}


def _runtime_public():
    return {
        n for n in _public(dir(tensorscope))
        if not isinstance(getattr(tensorscope, n), types.ModuleType)
    }


def test_stub_parses():
    _stub_tree()


def test_every_public_name_is_in_the_stub():
    stub = _public(_top_level(_stub_tree()))
    missing = _runtime_public() - stub
    assert not missing, f"in the module but not in {STUB.name}: {sorted(missing)}"


def test_every_stub_name_exists():
    stub = _public(_top_level(_stub_tree()))
    extra = stub - _runtime_public()
    assert not extra, f"in {STUB.name} but not in the module: {sorted(extra)}"


def test_documented_api_is_present():
    """PYTHON.md's names."""
    want = {"safe_open", "load_file", "info", "validate", "stats", "diff", "convert",
            "TensorscopeError", "UnsafePickleError"}
    from conftest import cli_has_verb
    if cli_has_verb("scan"):
        want.add("scan")
    assert want <= _runtime_public()
    assert want <= _public(_top_level(_stub_tree()))


def _class_members(node):
    names = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
        elif isinstance(item, ast.Assign):
            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return names


def test_class_members_match():
    top = _top_level(_stub_tree())
    problems = []
    for name, node in top.items():
        if not isinstance(node, ast.ClassDef) or not hasattr(tensorscope, name):
            continue
        cls = getattr(tensorscope, name)
        stub_members = _class_members(node)
        methods = {m for m in stub_members
                   if any(isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef)) and i.name == m
                          for i in node.body)}
        for m in methods - {"__init__", "__new__"}:
            if not hasattr(cls, m):
                problems.append(f"{name}.{m} is in the stub, not in the module")
        inherited = set(dir(BaseException)) if issubclass(cls, BaseException) else set(dir(object))
        own = {m for m in dir(cls) if m not in inherited and not m.startswith("_")}
        for m in own - stub_members:
            problems.append(f"{name}.{m} is in the module, not in the stub")
    assert not problems, problems


def _stub_params(fn):
    a = fn.args
    params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return [p for p in params if p not in ("self", "cls")]


def test_function_signatures_match():
    """Parameter names of module-level functions (where the runtime has a signature)."""
    top = _top_level(_stub_tree())
    problems = []
    for name, node in top.items():
        if name.startswith("_") or not hasattr(tensorscope, name):
            continue
        obj = getattr(tensorscope, name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stub_params = _stub_params(node)
        elif isinstance(node, ast.ClassDef):
            inits = [i for i in node.body if isinstance(i, ast.FunctionDef)
                     and i.name in ("__new__", "__init__")]
            if not inits or isinstance(obj, type) and issubclass(obj, BaseException):
                continue
            stub_params = _stub_params(inits[0])
        else:
            continue
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue  # no runtime signature to compare with
        runtime = [p for p in sig.parameters if p not in ("self", "cls")]
        if [p for p in runtime if sig.parameters[p].kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)] != \
                [p for p in stub_params]:
            problems.append(f"{name}: stub {stub_params} vs runtime {runtime}")
    assert not problems, problems


def test_the_version_is_the_installed_package_s():
    import importlib.metadata

    assert tensorscope.__version__ == importlib.metadata.version("tensorscope")
