//! The command line's contract under bad input: with `--json` every verb
//! prints exactly one JSON document on stdout, also for usage errors found
//! after parsing, and exits with the documented code; an output that cannot
//! be written is an error (exit 2), not a success.

use crate::exe::OutputOnceMore as _;
use std::path::Path;
use std::process::Stdio;

use crate::fixtures::{small_model, write};

/// Runs the binary with `args` and `--json`; returns the exit code and stdout.
fn run_json(args: &[&str]) -> (i32, String) {
    let out = crate::exe::command()
        .args(args)
        .arg("--json")
        .stdin(Stdio::null())
        .output_once_more()
        .expect("run tensorscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Asserts that `stdout` is exactly one JSON document holding an error.
fn one_error_document(args: &[&str], stdout: &str) -> serde_json::Value {
    let mut docs = serde_json::Deserializer::from_str(stdout).into_iter::<serde_json::Value>();
    let doc = docs
        .next()
        .unwrap_or_else(|| panic!("{args:?}: no JSON document on stdout"))
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {stdout:?}"));
    assert!(docs.next().is_none(), "{args:?}: more than one document");
    assert!(
        doc["error"]["kind"].is_string() && doc["error"]["message"].is_string(),
        "{args:?}: not an error document: {doc}"
    );
    doc
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

#[test]
fn every_verb_answers_bad_arguments_with_one_json_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = write(dir.path(), "m.safetensors", &small_model());
    let m = p(&m);
    let missing = dir.path().join("missing.safetensors");
    let missing = p(&missing);
    let out = dir.path().join("out.safetensors");
    let out = p(&out);
    let npy = dir.path().join("x.npy");
    let npy = p(&npy);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["info"], "Usage"),
        (vec!["info", missing], "Io"),
        (vec!["info", m, "--bogus"], "Usage"),
        (vec!["validate"], "Usage"),
        (vec!["stats", m, "--bins", "0"], "Usage"),
        (vec!["stats", m, "--tensor-regex", "("], "Usage"),
        (vec!["stats", m, "--f6-order", "sideways"], "Usage"),
        (vec!["stats", missing], "Io"),
        (vec!["diff", m], "Usage"),
        (vec!["diff", "--atol", "nan", m, m], "Usage"),
        (vec!["diff", "--rtol", "nan", m, m], "Usage"),
        (vec!["diff", "--atol=-1", m, m], "Usage"),
        (vec!["diff", "--rtol=-0.5", m, m], "Usage"),
        (vec!["diff", "--atol", "abc", m, m], "Usage"),
        (vec!["diff", "--rename", "no-equals-sign", m, m], "Usage"),
        (vec!["diff", m, missing], "Io"),
        (vec!["export", m, "embed.weight"], "Usage"),
        (
            vec!["export", m, "no.such.tensor", "-o", npy],
            "UnknownTensor",
        ),
        (vec!["resave", m], "Usage"),
        (vec!["resave", m, "-o", out, "--rename", "x"], "Usage"),
        (
            vec!["resave", m, "-o", out, "--max-shard-size", "lots"],
            "Usage",
        ),
        (vec!["resave", m, "-o", out, "--dtype", "F32=NOPE"], "Usage"),
        (vec!["resave", m, "-o", out, "--overflow", "wrap"], "Usage"),
        (vec!["resave", m, "-o", out, "--keep", "("], "InvalidRegex"),
    ];
    for (args, kind) in &cases {
        let (code, stdout) = run_json(args);
        assert_eq!(code, 2, "{args:?}: exit code");
        let doc = one_error_document(args, &stdout);
        assert_eq!(doc["error"]["kind"], *kind, "{args:?}: {doc}");
    }
    // The diff tolerances say which argument and value were refused.
    let (_, stdout) = run_json(&["diff", "--atol", "nan", m, m]);
    let doc = one_error_document(&["diff"], &stdout);
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--atol") && message.contains("nan"),
        "{message}"
    );
}

/// `/dev/full` takes no byte: every write fails with "no space left".
#[cfg(target_os = "linux")]
#[test]
fn an_output_that_cannot_be_written_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = write(dir.path(), "m.safetensors", &small_model());
    for json in [false, true] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("open /dev/full");
        let mut cmd = crate::exe::command();
        cmd.arg("info").arg(&m);
        if json {
            cmd.arg("--json");
        }
        let status = cmd
            .stdout(full)
            .stderr(Stdio::null())
            .status()
            .expect("run tensorscope");
        assert_eq!(status.code(), Some(2), "json: {json}");
    }
    // A reader that closes the pipe early is not an error.
    let mut child = crate::exe::command()
        .arg("info")
        .arg(&m)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run tensorscope");
    drop(child.stdout.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
}
