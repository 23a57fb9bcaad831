//! The other frameworks' checkpoints over HTTP (FRAMEWORKS.md, "Remote"):
//! `info` of a TensorFlow index reads the index and asks each data shard
//! for its size only (one byte); the other verbs read the shards by
//! ranges and answer as on the local copy.

use std::path::Path;

use super::server::Server;
use super::{json, run, same_as_local};

fn data(container: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(container)
}

/// Serves every file of `dir` under `/prefix/`.
fn serve_folder(s: &Server, dir: &Path, prefix: &str) {
    for entry in std::fs::read_dir(dir).expect("folder") {
        let entry = entry.expect("entry");
        if entry.path().is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            s.file(
                &format!("/{prefix}/{name}"),
                std::fs::read(entry.path()).expect("file"),
            );
        }
    }
}

#[test]
fn a_remote_tensorflow_index_reads_its_shards_by_ranges_only() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let local = data("tensorflow").join("tf_sharded");
    serve_folder(&s, &local, "tf");
    let url = s.url("/tf/ckpt-1.index");
    let (code, out, err) = run(&cache, &[], &["info", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out, &err)["format"], "tensorflow");
    // The data shards: their size asked, none of their bytes read.
    for logged in s.log() {
        if logged.path.contains(".data-") {
            assert_eq!(logged.range.as_deref(), Some("bytes=0-0"), "{logged:?}");
        }
    }
    let index_len = std::fs::metadata(local.join("ckpt-1.index"))
        .expect("index")
        .len();
    let shards = s.log().iter().filter(|l| l.path.contains(".data-")).count() as u64;
    assert!(
        s.body_bytes() <= index_len + shards,
        "{} bytes received for an index of {index_len} and {shards} shard sizes",
        s.body_bytes()
    );
    let local_index = local.join("ckpt-1.index");
    same_as_local(&cache, &url, local_index.to_str().expect("utf-8"));
}

#[test]
fn a_remote_onnx_model_asks_its_external_data_for_sizes_only() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    for (local, prefix) in [
        (data("onnx"), "one"),
        (data("onnx").join("external_many"), "many"),
    ] {
        serve_folder(&s, &local, prefix);
    }
    for (url, local) in [
        (
            s.url("/one/external_one.onnx"),
            data("onnx").join("external_one.onnx"),
        ),
        (
            s.url("/many/model.onnx"),
            data("onnx").join("external_many").join("model.onnx"),
        ),
    ] {
        s.reset_counts();
        let (code, out, err) = run(&cache, &[], &["info", "--json", &url]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(json(&out, &err)["format"], "onnx");
        for logged in s.log() {
            if std::path::Path::new(&logged.path)
                .extension()
                .is_none_or(|e| e != "onnx")
            {
                assert!(
                    logged.range.as_deref().is_none_or(|r| r == "bytes=0-0"),
                    "info read external data: {logged:?}"
                );
            }
        }
        same_as_local(&cache, &url, local.to_str().expect("utf-8"));
    }
}
