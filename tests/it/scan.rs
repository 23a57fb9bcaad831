//! `tensorscope scan` (SCAN.md) on the sample tree `tests/data/scan`
//! (`scripts/make_scan_fixtures.py`: pickles, torch files, NumPy object
//! arrays, hostile zips, Keras configs and GGUF chat templates made by the
//! real libraries, with the expected row of each file in its manifest),
//! and on the other containers' fixtures: every row, the three outputs,
//! the exit codes, and a tree left exactly as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::exe::OutputOnceMore as _;
use serde_json::Value;

fn data(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(sub)
}

fn scan(args: &[&str]) -> (i32, String, String) {
    scan_in(None, args)
}

/// `tensorscope scan ARGS`, in the working folder `cwd` when given.
fn scan_in(cwd: Option<&Path>, args: &[&str]) -> (i32, String, String) {
    let mut cmd = crate::exe::command();
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let out = cmd
        .arg("scan")
        .args(args)
        .output_once_more()
        .expect("run tensorscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a line is no JSON object ({e}): {l:?}"))
        })
        .collect()
}

/// (rule, evidence) of each finding, sorted.
fn findings(row: &Value) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = row["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            assert!(f["message"].as_str().is_some_and(|m| !m.is_empty()), "{f}");
            (
                f["rule"].as_str().expect("rule").to_owned(),
                f["evidence"].as_str().map(str::to_owned),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_sample_gets_the_row_its_manifest_gives() {
    let root = data("scan");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("MANIFEST.json")).expect("manifest"))
            .expect("json");
    let root_text = root.to_str().expect("utf-8");
    let (code, out, err) = scan(&["--json", root_text]);
    assert_eq!(code, 1, "{err}");
    let rows = lines(&out);
    let by_path: BTreeMap<String, &Value> = rows
        .iter()
        .map(|r| {
            let p = r["path"].as_str().expect("path");
            let rel = p
                .strip_prefix(root_text)
                .expect("the argument joined with the file")
                .trim_start_matches(['/', '\\'])
                .replace('\\', "/");
            (rel, r)
        })
        .collect();
    // One row per file, in sorted order.
    let paths: Vec<&String> = by_path.keys().collect();
    let listed: Vec<String> = rows
        .iter()
        .map(|r| {
            r["path"].as_str().expect("path")[root_text.len()..]
                .trim_start_matches(['/', '\\'])
                .replace('\\', "/")
        })
        .collect();
    assert_eq!(
        listed.iter().collect::<Vec<_>>(),
        paths,
        "rows in sorted order"
    );
    let files = manifest["files"].as_array().expect("files");
    assert_eq!(rows.len(), files.len(), "{out}");
    for want in files {
        let path = want["path"].as_str().expect("path");
        let got = by_path
            .get(path)
            .unwrap_or_else(|| panic!("no row for {path}"));
        assert_eq!(got["format"], want["format"], "{path}: {got}");
        assert_eq!(got["verdict"], want["verdict"], "{path}: {got}");
        let mut expected: Vec<(String, Option<String>)> = want["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| {
                (
                    f["rule"].as_str().expect("rule").to_owned(),
                    f["evidence"].as_str().map(str::to_owned),
                )
            })
            .collect();
        expected.sort();
        assert_eq!(findings(got), expected, "{path}: {got}");
        let size = std::fs::metadata(root.join(path)).expect("file").len();
        assert_eq!(got["bytes"], size, "{path}");
        match got["verdict"].as_str() {
            Some("safe") => assert!(
                got["tensors"].is_u64() || got["format"] == "pickle",
                "{got}"
            ),
            _ => assert!(got["tensors"].is_null(), "{got}"),
        }
    }
}

#[test]
fn the_other_containers_fixtures_are_safe_and_their_refusals_say_why() {
    // Every fixture a framework's own library wrote: safe, or (for the
    // files made to be refused) invalid or unsafe with a finding.
    for sub in [
        "pytorch",
        "numpy",
        "gguf",
        "onnx",
        "tensorflow",
        "keras",
        "hdf5",
        "flax",
        "dcp",
        "deepspeed",
    ] {
        let dir = data(sub);
        let (code, out, err) = scan(&["--json", dir.to_str().expect("utf-8")]);
        assert!(code == 0 || code == 1, "{sub}: {code} {err}");
        for row in lines(&out) {
            let path = row["path"].as_str().expect("path");
            let name = Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            let verdict = row["verdict"].as_str().expect("verdict");
            let made_to_fail = name.contains("refused")
                || name.contains("hostile")
                || name.contains("lambda")
                || name.contains("unsafe")
                || name.contains("evil")
                || path.contains("hostile");
            if made_to_fail {
                continue;
            }
            let extension = Path::new(name).extension().and_then(|e| e.to_str());
            if matches!(extension, Some("json" | "md" | "py")) {
                assert_eq!(verdict, "unknown", "{row}");
            } else {
                assert!(verdict == "safe" || verdict == "unknown", "{sub}: {row}");
            }
        }
    }
}

#[test]
fn a_distributed_checkpoint_is_judged_by_its_own_records() {
    let (code, out, err) = scan(&[
        "--json",
        data("dcp/fsdp2_2rank").to_str().expect("utf-8"),
        data("deepspeed/zero3").to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    for row in lines(&out) {
        let path = row["path"].as_str().expect("path");
        if path.ends_with(".distcp") || path.ends_with(".metadata") {
            assert_eq!(row["format"], "dcp", "{row}");
        }
        if path.ends_with("_states.pt") {
            assert_eq!(row["format"], "pytorch", "{row}");
        }
        assert_ne!(row["verdict"], "unsafe", "{row}");
        assert_ne!(row["verdict"], "invalid", "{row}");
    }
}

#[test]
fn an_unsafe_value_in_a_distcp_file_is_found() {
    // A copy of a DCP folder whose bytes entry's pickle names a global
    // outside the allowlists: the value's `.distcp` file is unsafe.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = data("dcp/single");
    for e in std::fs::read_dir(&src).expect("dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), dir.path().join(e.file_name())).expect("copy");
    }
    let distcp = dir.path().join("__0_0.distcp");
    let mut bytes = std::fs::read(&distcp).expect("distcp");
    // An allowlisted global of the same length, renamed in place: every
    // pickle of the file names `collections\nOrderedDict` or
    // `torch._utils\n_rebuild_tensor_v2`; the first is replaced.
    let from = b"collections\nOrderedDict\n";
    let to = b"subprocess\nPopenxxxxxxx\n";
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("an OrderedDict in a pickle of the file");
    bytes[at..at + to.len()].copy_from_slice(to);
    std::fs::write(&distcp, bytes).expect("write");
    let (code, out, err) = scan(&["--json", distcp.to_str().expect("utf-8")]);
    let row = &lines(&out)[0];
    assert_eq!(code, 1, "{row} {err}");
    assert_eq!(row["verdict"], "unsafe", "{row}");
    assert_eq!(row["format"], "dcp", "{row}");
    assert_eq!(
        findings(row),
        [(
            "pickle-unsafe-global".into(),
            Some("subprocess.Popenxxxxxxx".into())
        )]
    );
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            let meta = std::fs::symlink_metadata(&p).expect("meta");
            if meta.is_dir() {
                stack.push(p);
            } else {
                let bytes = if meta.is_file() {
                    std::fs::read(&p).expect("read")
                } else {
                    Vec::new()
                };
                out.push((p, bytes, meta.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn text_json_and_sarif_exit_alike_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).expect("mkdir");
    std::fs::copy(
        data("scan/pickles/posix_system_p4.pkl"),
        tree.join("sub/evil.pkl"),
    )
    .expect("copy");
    std::fs::copy(
        data("scan/safe/model.safetensors"),
        tree.join("model.safetensors"),
    )
    .expect("copy");
    std::fs::write(tree.join("README.md"), "# a model\n").expect("write");
    let cwd = dir.path().join("cwd");
    std::fs::create_dir_all(&cwd).expect("mkdir");
    let before = snapshot(dir.path());
    let tree_text = tree.to_str().expect("utf-8");
    let run_in = |args: &[&str]| scan_in(Some(&cwd), args);
    // Text: one line a file, its findings indented, a summary.
    let (code, out, err) = run_in(&[tree_text]);
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("unsafe  pickle"), "{out}");
    assert!(out.contains("    pickle-unsafe-global: "), "{out}");
    assert!(out.contains("posix.system"), "{out}");
    assert!(out.contains("safe    safetensors"), "{out}");
    assert!(out.contains("unknown -"), "{out}");
    assert!(
        out.contains("3 files: 1 safe, 1 unsafe, 0 invalid, 1 not checkpoints"),
        "{out}"
    );
    // JSON Lines: one object a line, one line a file.
    let (code, out, err) = run_in(&["--json", tree_text]);
    assert_eq!(code, 1, "{err}");
    let rows = lines(&out);
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows.iter().all(Value::is_object));
    // SARIF.
    let (code, out, err) = run_in(&["--sarif", tree_text]);
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("one SARIF document");
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    assert_eq!(doc["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(run["tool"]["driver"]["name"], "tensorscope");
    assert!(run["tool"]["driver"]["version"].is_string());
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "{doc}");
    assert_eq!(rules[0]["id"], "pickle-unsafe-global");
    assert!(rules[0]["shortDescription"]["text"].is_string());
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{doc}");
    let r = &results[0];
    assert_eq!(r["ruleId"], "pickle-unsafe-global");
    assert_eq!(r["ruleIndex"], 0);
    assert_eq!(r["level"], "error");
    let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        .as_str()
        .expect("uri");
    assert!(uri.starts_with("file://"), "{uri}");
    assert!(uri.ends_with("/tree/sub/evil.pkl"), "{uri}");
    // Clean files alone: 0; a missing PATH or an unknown option: 2.
    let safe = tree.join("model.safetensors");
    let (code, _, err) = run_in(&[
        safe.to_str().expect("utf-8"),
        tree.join("README.md").to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run_in(&[tree.join("missing").to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("missing"), "{err}");
    let (code, _, _) = run_in(&["--frobnicate", tree_text]);
    assert_eq!(code, 2);
    let (code, _, _) = run_in(&[]);
    assert_eq!(code, 2);
    // Not a byte, not an mtime changed; nothing made in the working folder.
    assert_eq!(before, snapshot(dir.path()));
}

#[cfg(unix)]
#[test]
fn symlinks_are_not_followed_out_of_the_tree() {
    // Unix symlinks are no Windows links to a program under the emulator.
    if crate::exe::foreign() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = dir.path().join("tree");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&tree).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::copy(
        data("scan/pickles/posix_system_p4.pkl"),
        outside.join("evil.pkl"),
    )
    .expect("copy");
    std::fs::copy(
        data("scan/safe/model.safetensors"),
        tree.join("a.safetensors"),
    )
    .expect("copy");
    std::os::unix::fs::symlink(outside.join("evil.pkl"), tree.join("link.pkl")).expect("link");
    std::os::unix::fs::symlink(&outside, tree.join("linked_dir")).expect("link");
    std::os::unix::fs::symlink(tree.join("a.safetensors"), tree.join("b.safetensors"))
        .expect("link");
    let (code, out, err) = scan(&["--json", tree.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out} {err}");
    let paths: Vec<String> = lines(&out)
        .iter()
        .map(|r| r["path"].as_str().expect("path").to_owned())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths[0].ends_with("a.safetensors") && paths[1].ends_with("b.safetensors"));
    assert!(
        err.contains("link.pkl") && err.contains("linked_dir"),
        "{err}"
    );
}
