//! `scan` over HTTP (SCAN.md): a file by its URL and every file of a Hub
//! repository (listed through the Hub's API) give the rows of the same
//! files read locally, path aside; no tensor data is read; a repository
//! that cannot be listed is an error (exit 2).

use std::path::Path;

use super::run;
use super::server::{Route, Server};

fn sample(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/scan")
        .join(path)
}

/// The samples served, each a kind of row: safe, unsafe by each rule that
/// reads a remote file, invalid, unknown.
const SERVED: &[&str] = &[
    "safe/model.safetensors",
    "pickles/posix_system_p4_memo.pkl",
    "pickles/two_pickles.pkl",
    "torch/evil_data_pkl.pt",
    "torch/model.pt",
    "torch/archive_path_dotdot.pt",
    "numpy/object_array.npy",
    "numpy/plain.npy",
    "numpy/plain.npz",
    "numpy/object_member.npz",
    "numpy/archive_path_dotdot.npz",
    "keras/model.keras",
    "keras/lambda.keras",
    "keras/custom_layer.keras",
    "gguf/ssti_tool_use.gguf",
    "gguf/llama3_template.gguf",
    "invalid/truncated.gguf",
    "invalid/broken_header.safetensors",
    "other/README.md",
];

fn rows(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

fn without_path(mut v: serde_json::Value) -> serde_json::Value {
    v.as_object_mut().expect("row").remove("path");
    v
}

#[test]
fn a_hub_repository_and_a_url_give_the_local_rows() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let mut siblings = Vec::new();
    for name in SERVED {
        let flat = name.replace('/', "_");
        s.file(
            &format!("/hub/org/repo/resolve/main/{flat}"),
            std::fs::read(sample(name)).expect("sample"),
        );
        siblings.push(serde_json::json!({ "rfilename": flat }));
    }
    s.file(
        "/hub/api/models/org/repo/revision/main",
        serde_json::to_vec(&serde_json::json!({ "id": "org/repo", "siblings": siblings }))
            .expect("json"),
    );
    let endpoint = s.url("/hub");
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let (code, out, err) = run(&cache, &env, &["scan", "--json", "hf://org/repo"]);
    assert_eq!(code, 1, "{err}");
    let remote = rows(&out);
    assert_eq!(remote.len(), SERVED.len(), "{out}");
    let mut sorted: Vec<&str> = SERVED.to_vec();
    sorted.sort_by_key(|n| n.replace('/', "_"));
    for (row, name) in remote.iter().zip(&sorted) {
        let flat = name.replace('/', "_");
        assert_eq!(row["path"], format!("hf://org/repo/{flat}"), "{row}");
        let local = sample(name);
        let (code, out, err) = run(
            &cache,
            &[],
            &["scan", "--json", local.to_str().expect("utf-8")],
        );
        assert!(code <= 1, "{err}");
        assert_eq!(
            without_path(row.clone()),
            without_path(rows(&out).remove(0)),
            "{name}"
        );
    }
    // The tensors' data was not read: the safetensors file's data section
    // and the torch zip's storages are never asked for.
    let total: u64 = SERVED
        .iter()
        .map(|n| std::fs::metadata(sample(n)).expect("sample").len())
        .sum();
    assert!(
        s.body_bytes() < total * 4,
        "{} bytes for {total}",
        s.body_bytes()
    );
    // One file by its URL: the same row, its path the URL.
    let url = s.url("/hub/org/repo/resolve/main/torch_evil_data_pkl.pt");
    let (code, out, err) = run(&cache, &[], &["scan", "--json", &url]);
    assert_eq!(code, 1, "{err}");
    let row = rows(&out).remove(0);
    assert_eq!(row["path"], url);
    assert_eq!(row["verdict"], "unsafe");
    assert_eq!(row["findings"][0]["evidence"], "posix.system", "{row}");
    // SARIF names a remote file by its URL.
    let (code, out, err) = run(&cache, &[], &["scan", "--sarif", &url]);
    assert_eq!(code, 1, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("sarif");
    assert_eq!(
        doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        url
    );
}

#[test]
fn a_repository_that_cannot_be_listed_is_an_error() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    s.route("/hub/api/models/org/gone/revision/main", Route::Status(404));
    s.file(
        "/hub/api/models/org/bad/revision/main",
        b"{\"siblings\": [{\"rfilename\": \"../x\"}]}".to_vec(),
    );
    let endpoint = s.url("/hub");
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    for (repo, says) in [
        ("hf://org/gone", "cannot be listed"),
        ("hf://org/bad", "no path inside"),
    ] {
        let (code, out, err) = run(&cache, &env, &["scan", "--json", repo]);
        assert_eq!(code, 2, "{repo}: {out} {err}");
        assert!(out.is_empty(), "{out}");
        assert!(err.contains(says), "{repo}: {err}");
    }
}

#[test]
fn a_large_remote_checkpoint_costs_its_header_not_its_data() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    // 32 MiB of tensor data behind a small header.
    s.file("/big.safetensors", super::model(&[("w", 8 << 20)], 7));
    let url = s.url("/big.safetensors");
    let (code, out, err) = run(&cache, &[], &["scan", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    let row = rows(&out).remove(0);
    assert_eq!(row["verdict"], "safe", "{row}");
    assert_eq!(row["tensors"], 1, "{row}");
    assert!(row["bytes"].as_u64().is_some_and(|b| b > 32 << 20), "{row}");
    assert!(
        s.body_bytes() <= 256 << 10,
        "{} bytes received for a header",
        s.body_bytes()
    );
}

#[test]
fn a_folder_of_a_hub_repository_is_its_files() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    for (name, sample_path) in [
        ("sub/evil.pkl", "pickles/posix_system_p2.pkl"),
        ("sub/deeper/model.safetensors", "safe/model.safetensors"),
        ("top.safetensors", "safe/model.safetensors"),
    ] {
        s.file(
            &format!("/hub/org/repo/resolve/main/{name}"),
            std::fs::read(sample(sample_path)).expect("sample"),
        );
    }
    s.file(
        "/hub/api/models/org/repo/revision/main",
        br#"{"siblings": [{"rfilename": "top.safetensors"}, {"rfilename": "sub/evil.pkl"},
            {"rfilename": "sub/deeper/model.safetensors"}]}"#
            .to_vec(),
    );
    let endpoint = s.url("/hub");
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let (code, out, err) = run(&cache, &env, &["scan", "--json", "hf://org/repo/sub"]);
    assert_eq!(code, 1, "{err}");
    let paths: Vec<String> = rows(&out)
        .iter()
        .map(|r| r["path"].as_str().expect("path").to_owned())
        .collect();
    assert_eq!(
        paths,
        [
            "hf://org/repo/sub/deeper/model.safetensors",
            "hf://org/repo/sub/evil.pkl"
        ]
    );
    // A file of the repository is that file alone.
    let (code, out, err) = run(
        &cache,
        &env,
        &["scan", "--json", "hf://org/repo/top.safetensors"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(rows(&out).len(), 1);
}
