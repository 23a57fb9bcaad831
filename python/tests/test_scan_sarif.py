"""`tensorscope scan` (SCAN.md) on a small tree: `--sarif` is one SARIF 2.1.0 document valid
against the official schema (tests/data/scan-sarif/, see its PROVENANCE.md), `--json` is
JSON Lines (one object per file), the exit codes are 0 / 1 / 2 as SCAN.md says, and the
tree is byte-for-byte and mtime-for-mtime unchanged afterwards, with nothing written in the
working directory.

The tree: a safe safetensors file written by hand, a malicious bare pickle (protocol 0,
`os.system('echo hi')`; never loaded), a plain `.npy` array and a README.md.
"""

import hashlib
import json
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from conftest import DATA, cli_has_verb, run_cli, write_safetensors

SCHEMA = DATA / "scan-sarif" / "sarif-schema-2.1.0.json"
EVIL = b"cos\nsystem\n(S'echo hi'\ntR."


@pytest.fixture(autouse=True, scope="module")
def _needs_scan():
    if not cli_has_verb("scan"):
        pytest.skip("this tensorscope CLI has no `scan` verb (SCAN.md)")


def make_tree(root):
    """The four files under `root`; returns {name: Path}."""
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "model.safetensors": write_safetensors(
            root / "model.safetensors",
            {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.float16)},
            metadata={"format": "pt"},
        ),
        "evil.pkl": root / "evil.pkl",
        "arr.npy": root / "arr.npy",
        "README.md": root / "README.md",
    }
    files["evil.pkl"].write_bytes(EVIL)
    np.save(files["arr.npy"], np.arange(10, dtype=np.int32), allow_pickle=False)
    files["README.md"].write_text("# a model\n\nNot a checkpoint.\n")
    return files


def scan(*args, cwd):
    return run_cli("scan", *[str(a) for a in args], cwd=cwd)


def describe(proc):
    return f"exit {proc.returncode}\nstdout: {proc.stdout[:3000]}\nstderr: {proc.stderr[:3000]}"


def sarif_of(proc):
    try:
        return json.loads(proc.stdout)
    except ValueError as e:
        pytest.fail(f"`scan --sarif` stdout is not one JSON document ({e})\n{describe(proc)}")


def same_file(uri, path):
    """True when `uri` is a file:// URI of `path` (absolute, percent-encoded)."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return False
    return os.path.realpath(unquote(parts.path)) == os.path.realpath(path)


# --------------------------------------------------------------------------- --sarif


def test_sarif_valid_against_the_official_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    make_tree(tmp_path / "tree")
    proc = scan("--sarif", tmp_path / "tree", cwd=tmp_path)
    assert proc.returncode == 1, describe(proc)
    doc = sarif_of(proc)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "not valid SARIF 2.1.0:\n" + "\n".join(
        f"  at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:20]
    )


def test_sarif_contents(tmp_path):
    files = make_tree(tmp_path / "tree")
    proc = scan("--sarif", tmp_path / "tree", cwd=tmp_path)
    assert proc.returncode == 1, describe(proc)
    doc = sarif_of(proc)
    assert doc["version"] == "2.1.0"
    assert len(doc["runs"]) == 1, f"{len(doc['runs'])} runs"
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "tensorscope"
    version = driver.get("version")
    assert isinstance(version, str) and version, f"tool.driver.version is {version!r}"
    assert version in run_cli("--version").stdout, "tool.driver.version is not the CLI's version"

    rules = driver.get("rules", [])
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids)), f"rule ids repeat: {ids}"
    for rule in rules:
        assert rule["shortDescription"]["text"], f"rule {rule['id']} has no shortDescription"

    results = run["results"]
    assert results, "no result for the malicious pickle"
    for r in results:
        assert r["level"] == "error", r
        assert r["message"]["text"], r
        index = r.get("ruleIndex")
        assert isinstance(index, int) and 0 <= index < len(rules), f"ruleIndex {index!r}: {r}"
        assert rules[index]["id"] == r["ruleId"], (
            f"ruleIndex {index} is {rules[index]['id']!r}, ruleId {r['ruleId']!r}"
        )
    # One rule entry per rule id that occurs, no more.
    assert set(ids) == {r["ruleId"] for r in results}, f"rules {ids}"

    # The pickle's one unsafe global is the one finding: pickle-unsafe-global, on its file.
    assert [r["ruleId"] for r in results] == ["pickle-unsafe-global"], results
    uri = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file://"), uri
    assert same_file(uri, files["evil.pkl"]), f"{uri} is not a file:// URI of {files['evil.pkl']}"


def test_sarif_uri_is_percent_encoded(tmp_path):
    """A path with a space and a non-ASCII letter: the URI encodes them (RFC 3986)."""
    folder = tmp_path / "my models é"
    folder.mkdir()
    (folder / "evil.pkl").write_bytes(EVIL)
    proc = scan("--sarif", folder, cwd=tmp_path)
    assert proc.returncode == 1, describe(proc)
    results = sarif_of(proc)["runs"][0]["results"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    assert uris, "no result"
    for uri in uris:
        assert " " not in uri and uri.isascii(), f"{uri!r} is not percent-encoded"
        assert same_file(uri, folder / "evil.pkl"), uri


def test_sarif_of_safe_files_has_no_result(tmp_path):
    files = make_tree(tmp_path / "tree")
    safe = [files[n] for n in ("model.safetensors", "arr.npy", "README.md")]
    proc = scan("--sarif", *safe, cwd=tmp_path)
    assert proc.returncode == 0, describe(proc)
    doc = sarif_of(proc)
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1
    assert doc["runs"][0].get("results", []) == [], doc["runs"][0].get("results")


# --------------------------------------------------------------------------- --json


def test_json_lines_one_object_per_file(tmp_path):
    tree = tmp_path / "tree"
    files = make_tree(tree)
    proc = scan("--json", tree, cwd=tmp_path)
    assert proc.returncode == 1, describe(proc)
    lines = proc.stdout.split("\n")
    assert lines[-1] == "", "stdout does not end with a newline"
    rows = []
    for n, line in enumerate(lines[:-1], 1):
        try:
            row = json.loads(line)
        except ValueError:
            pytest.fail(f"stdout line {n} is not one JSON object: {line[:300]!r}")
        assert isinstance(row, dict), f"line {n} is a {type(row).__name__}"
        rows.append(row)
    assert len(rows) == len(files), f"{len(rows)} rows for {len(files)} files\n{proc.stdout}"
    by_path = {row["path"]: row for row in rows}
    want_paths = {os.path.join(str(tree), name) for name in files}
    assert set(by_path) == want_paths, f"paths {sorted(by_path)}"

    def row(name):
        return by_path[os.path.join(str(tree), name)]

    for name, path in files.items():
        assert row(name)["bytes"] == path.stat().st_size, row(name)
    assert row("evil.pkl")["verdict"] == "unsafe"
    assert row("evil.pkl")["format"] == "pickle"
    findings = row("evil.pkl")["findings"]
    assert [f["rule"] for f in findings] == ["pickle-unsafe-global"], findings
    assert "os.system" in findings[0].get("evidence", ""), findings
    assert row("model.safetensors")["verdict"] == "safe"
    assert row("model.safetensors")["format"] == "safetensors"
    assert row("arr.npy")["verdict"] == "safe"
    assert row("arr.npy")["format"] == "numpy"
    assert row("README.md")["verdict"] == "unknown"
    assert row("README.md")["format"] is None
    for name in ("model.safetensors", "arr.npy", "README.md"):
        assert row(name)["findings"] == [], row(name)


def test_safe_files_exit_0(tmp_path):
    files = make_tree(tmp_path / "tree")
    safe = [files[n] for n in ("model.safetensors", "arr.npy", "README.md")]
    for mode in ([], ["--json"], ["--sarif"]):
        proc = scan(*mode, *safe, cwd=tmp_path)
        assert proc.returncode == 0, f"scan {' '.join(mode)}: {describe(proc)}"
    proc = scan("--json", *safe, cwd=tmp_path)
    assert len(proc.stdout.splitlines()) == 3, proc.stdout


def test_unsafe_exits_1_in_every_mode(tmp_path):
    make_tree(tmp_path / "tree")
    for mode in ([], ["--json"], ["--sarif"]):
        proc = scan(*mode, tmp_path / "tree", cwd=tmp_path)
        assert proc.returncode == 1, f"scan {' '.join(mode)}: {describe(proc)}"
    text = scan(tmp_path / "tree", cwd=tmp_path).stdout
    for name in ("model.safetensors", "evil.pkl", "arr.npy", "README.md"):
        assert name in text, f"the text output does not name {name}:\n{text}"


def test_missing_path_exits_2(tmp_path):
    missing = tmp_path / "no-such-model.safetensors"
    for mode in ([], ["--json"], ["--sarif"]):
        proc = scan(*mode, missing, cwd=tmp_path)
        assert proc.returncode == 2, f"scan {' '.join(mode)} of a missing path: {describe(proc)}"
        assert proc.stderr.strip(), "no message on stderr"
    make_tree(tmp_path / "tree")
    proc = scan("--json", tmp_path / "tree", missing, cwd=tmp_path)
    assert proc.returncode == 2, f"an existing and a missing PATH: {describe(proc)}"


# --------------------------------------------------------------------------- never writes


def snapshot(root):
    """{relative path: (kind, size, mtime_ns, sha256)} of everything under `root`,
    folders included."""
    out = {}
    for base, dirs, names in os.walk(root):
        for d in dirs:
            p = Path(base) / d
            out[str(p.relative_to(root))] = ("dir", None, p.stat().st_mtime_ns, None)
        for n in names:
            p = Path(base) / n
            st = p.stat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(root))] = ("file", st.st_size, st.st_mtime_ns, digest)
    return out


def test_tree_and_cwd_unchanged(tmp_path):
    tree = tmp_path / "tree"
    files = make_tree(tree)
    # Old mtimes, so a rewrite in the same clock tick would show too.
    for i, path in enumerate(sorted(files.values())):
        os.utime(path, ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    tree_mtime = tree.stat().st_mtime_ns
    before = snapshot(tree)
    for mode in ([], ["--json"], ["--sarif"]):
        proc = scan(*mode, tree, cwd=cwd)
        assert proc.returncode == 1, describe(proc)
        for path in files.values():
            proc = scan(*mode, path, cwd=cwd)
            assert proc.returncode in (0, 1), describe(proc)
    after = snapshot(tree)
    assert after == before, (
        f"the tree changed: added {sorted(set(after) - set(before))}, removed "
        f"{sorted(set(before) - set(after))}, changed "
        f"{sorted(k for k in set(before) & set(after) if before[k] != after[k])}"
    )
    assert tree.stat().st_mtime_ns == tree_mtime, "the tree's folder was written to"
    assert list(cwd.iterdir()) == [], f"files written in the cwd: {list(cwd.iterdir())}"
