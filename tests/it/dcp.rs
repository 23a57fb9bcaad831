//! PyTorch Distributed Checkpoints (DISTRIBUTED.md) against the folders
//! torch itself wrote (`scripts/make_distributed_fixtures.py`,
//! `tests/data/dcp/MANIFEST.json`): every global tensor's name, dtype,
//! shape, chunks and bytes as torch reassembles them, the bytes entries as
//! metadata, the pickle report, every verb; and hostile folders refused.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::Digest;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};

use crate::pytorch::build::run;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dcp")
}

fn manifest() -> Value {
    let text = std::fs::read(data_dir().join("MANIFEST.json")).expect("manifest");
    serde_json::from_slice(&text).expect("manifest JSON")
}

/// Every fixture: the folders written through `.metadata`, and the HF
/// writer's (`hf_writer`: safetensors shards, no `.metadata`).
fn fixtures() -> Vec<(Value, PathBuf)> {
    manifest()["fixtures"]
        .as_array()
        .expect("fixtures")
        .iter()
        .map(|f| {
            (
                f.clone(),
                data_dir().join(f["folder"].as_str().expect("folder")),
            )
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[test]
fn every_global_tensor_reads_as_torch_reassembles_it() {
    for (entry, dir) in fixtures() {
        let what = entry["folder"].to_string();
        let ck = Checkpoint::open_readable(&dir).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(ck.container().id(), "dcp", "{what}");
        let want = entry["tensors"].as_array().expect("tensors");
        let mut names: Vec<&str> = ck.entries().map(|(_, i)| i.name()).collect();
        let mut want_names: Vec<&str> = want
            .iter()
            .map(|t| t["name"].as_str().expect("name"))
            .collect();
        // `.metadata`'s order is kept; the HF writer's is its files'.
        if entry["folder"] == "hf_writer" {
            names.sort_unstable();
            want_names.sort_unstable();
        }
        assert_eq!(names, want_names, "{what}: names in .metadata's order");
        let all = ck.tensors().to_vec();
        let _fetched = ck
            .fetch(&all, &CancelToken::new(), &Progress::new())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for t in want {
            let name = t["name"].as_str().expect("name");
            let r = ck.find(name).expect("found");
            let info = ck.info(r).expect("info");
            assert_eq!(info.dtype().name(), t["dtype"], "{what}: {name}");
            assert_eq!(
                serde_json::json!(info.shape()),
                t["shape"],
                "{what}: {name}"
            );
            let bytes = ck.bytes(r);
            assert_eq!(
                hex(&sha2::Sha256::digest(bytes)),
                t["sha256"].as_str().expect("sha256"),
                "{what}: {name}: bytes"
            );
        }
    }
}

#[test]
fn info_lists_each_chunk_the_metadata_and_the_pickle() {
    for (entry, dir) in fixtures() {
        let what = entry["folder"].to_string();
        let tmp = tempfile::tempdir().expect("tmp");
        let r = run(tmp.path(), &["info", dir.to_str().expect("utf-8")]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        assert_eq!(r.doc["format"], "dcp", "{what}");
        let got_tensors = r.doc["tensors"].as_array().expect("tensors");
        for t in entry["tensors"].as_array().expect("tensors") {
            let got = got_tensors
                .iter()
                .find(|g| g["name"] == t["name"])
                .unwrap_or_else(|| panic!("{what}: {} listed", t["name"]));
            let want: Vec<Value> = t["chunks"]
                .as_array()
                .expect("chunks")
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "offsets": c["offsets"],
                        "sizes": c["sizes"],
                        "file": c["storage"]["file"],
                    })
                })
                .collect();
            let mut got_chunks = got["chunks"].as_array().cloned().unwrap_or_default();
            let mut want = want;
            // The HF writer's chunks come in its files' order.
            if entry["folder"] == "hf_writer" {
                let key = |c: &Value| c["offsets"].to_string();
                got_chunks.sort_by_key(key);
                want.sort_by_key(key);
            }
            assert_eq!(got_chunks, want, "{what}: {}", t["name"]);
        }
        // Each bytes entry under its key, its value as JSON (the text the
        // manifest keeps, parsed).
        for (key, text) in entry["metadata"].as_object().expect("metadata") {
            let want: Value =
                serde_json::from_str(text.as_str().expect("text")).expect("JSON text");
            assert_eq!(r.doc["metadata"][key], want, "{what}: metadata {key}");
        }
        if entry["folder"] == "hf_writer" {
            assert!(r.doc["pickle"].is_null(), "{what}: no pickle is read");
            continue;
        }
        let mut globals: Vec<String> = entry["pickle"]["globals"]
            .as_array()
            .expect("globals")
            .iter()
            .map(|g| g.as_str().expect("global").to_owned())
            .collect();
        globals.sort();
        assert_eq!(
            r.doc["pickle"]["globals"],
            serde_json::json!(globals),
            "{what}"
        );
        assert_eq!(
            r.doc["pickle"]["unsafe_globals"],
            serde_json::json!([]),
            "{what}"
        );
    }
}

#[test]
fn every_verb_works_on_the_global_tensors() {
    for (entry, dir) in fixtures() {
        let what = entry["folder"].to_string();
        let path = dir.to_str().expect("utf-8");
        let tmp = tempfile::tempdir().expect("tmp");
        let r = run(tmp.path(), &["validate", path]);
        assert_eq!(
            (r.code, &r.doc["valid"]),
            (0, &Value::Bool(true)),
            "{what}: {}",
            r.doc
        );
        let r = run(tmp.path(), &["stats", path]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        let out = tmp.path().join("consolidated.safetensors");
        let r = run(
            tmp.path(),
            &["resave", path, "-o", out.to_str().expect("utf-8")],
        );
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        // The consolidated file, read by the official crate: torch's bytes.
        let bytes = std::fs::read(&out).expect("read");
        let st = safetensors::SafeTensors::deserialize(&bytes).expect("oracle");
        for t in entry["tensors"].as_array().expect("tensors") {
            let name = t["name"].as_str().expect("name");
            let view = st
                .tensor(name)
                .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
            assert_eq!(
                hex(&sha2::Sha256::digest(view.data())),
                t["sha256"].as_str().expect("sha256"),
                "{what}: {name}"
            );
        }
        let r = run(tmp.path(), &["diff", path, out.to_str().expect("utf-8")]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        // One tensor cut across ranks, exported.
        let cut = entry["tensors"]
            .as_array()
            .expect("tensors")
            .iter()
            .find(|t| t["chunks"].as_array().is_some_and(|c| c.len() > 1));
        if let Some(t) = cut {
            let npy = tmp.path().join("t.npy");
            let name = t["name"].as_str().expect("name");
            let r = run(
                tmp.path(),
                &["export", path, name, "-o", npy.to_str().expect("utf-8")],
            );
            assert_eq!(r.code, 0, "{what}: {name}: {}", r.doc);
        }
    }
}

/// A copy of fixture `folder` in a temporary folder, with `edit` applied
/// to its `.metadata` bytes.
fn edited(folder: &str, edit: impl Fn(&mut Vec<u8>)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("ckpt");
    std::fs::create_dir(&dir).expect("mkdir");
    for e in std::fs::read_dir(data_dir().join(folder)).expect("read_dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), dir.join(e.file_name())).expect("copy");
    }
    let mut meta = std::fs::read(dir.join(".metadata")).expect("metadata");
    edit(&mut meta);
    std::fs::write(dir.join(".metadata"), meta).expect("write");
    tmp
}

fn replace(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut found = false;
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            found = true;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(found, "{:?} not found", String::from_utf8_lossy(from));
}

/// Every verb ends cleanly with the kind, and no output file is left.
fn assert_refused(tmp: &tempfile::TempDir, kind: &str) {
    let dir = tmp.path().join("ckpt");
    let path = dir.to_str().expect("utf-8");
    let out = tmp.path().join("out.safetensors");
    for args in [
        vec!["stats", path],
        vec!["resave", path, "-o", out.to_str().expect("utf-8")],
    ] {
        let r = run(tmp.path(), &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.doc);
        assert_eq!(r.doc["error"]["kind"], kind, "{args:?}: {}", r.doc);
    }
    let r = run(tmp.path(), &["validate", path]);
    match r.code {
        1 => assert_eq!(r.doc["valid"], false, "{}", r.doc),
        2 => assert_eq!(r.doc["error"]["kind"], kind, "{}", r.doc),
        other => panic!("validate exited {other}: {}", r.doc),
    }
    assert!(!out.exists(), "no output is left");
}

#[test]
fn storage_paths_outside_the_folder_are_refused_and_not_opened() {
    // Same lengths as `__0_0.distcp`: a path up, an absolute one.
    for to in [&b"../_0.distcp"[..], b"/tmp/0.distc", b"..\\_0.distcp"] {
        let tmp = edited("single", |m| replace(m, b"__0_0.distcp", to));
        assert_refused(&tmp, "PathOutsideFolder");
    }
}

#[test]
fn missing_and_short_storage_files_are_refused() {
    let tmp = edited("single", |m| replace(m, b"__0_0.distcp", b"__9_0.distcp"));
    assert_refused(&tmp, "Io");
    let tmp = edited("fsdp2_2rank", |_| {});
    let data = tmp.path().join("ckpt/__1_0.distcp");
    let len = std::fs::metadata(&data).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .and_then(|f| f.set_len(len / 2))
        .expect("cut");
    assert_refused(&tmp, "StoragePastEnd");
}

#[test]
fn a_metadata_naming_an_unsafe_global_is_reported_and_nothing_is_read() {
    // `pathlib.PosixPath` (StorageMeta's checkpoint_id) becomes
    // `os.path.PosixPath`, outside every allowlist.
    let tmp = edited("single", |m| {
        replace(m, b"\x8c\x07pathlib", b"\x8c\x07os.path");
    });
    let dir = tmp.path().join("ckpt");
    let r = run(tmp.path(), &["info", dir.to_str().expect("utf-8")]);
    assert!(r.code == 0 || r.code == 1, "{}", r.doc);
    assert_eq!(
        r.doc["pickle"]["unsafe_globals"],
        serde_json::json!(["os.path.PosixPath"])
    );
    assert_eq!(r.doc["tensors"], serde_json::json!([]));
    assert_refused(&tmp, "UnsafePickle");
}

#[test]
fn a_metadata_cut_short_is_refused() {
    let tmp = edited("single", |m| m.truncate(m.len() / 2));
    assert_refused(&tmp, "InvalidMetadata");
}

#[test]
fn a_run_of_dcp_step_folders_is_a_series_with_the_optimizer_moments() {
    let tmp = tempfile::tempdir().expect("tmp");
    let run_dir = tmp.path().join("checkpoint");
    for step in ["step-100", "step-200"] {
        let dir = run_dir.join(step);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for e in std::fs::read_dir(data_dir().join("fsdp2_2rank")).expect("read_dir") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), dir.join(e.file_name())).expect("copy");
        }
    }
    let r = run(tmp.path(), &["series", run_dir.to_str().expect("utf-8")]);
    assert_eq!(r.code, 0, "{}", r.doc);
    let steps = r.doc["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{}", r.doc);
    assert_eq!(steps[0]["step"], 100);
    assert_eq!(
        steps[1]["path"],
        run_dir.join("step-200").to_str().expect("utf-8"),
        "the step folder names the step"
    );
    let names: Vec<&str> = r.doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".exp_avg")), "{names:?}");
    assert!(
        names.iter().any(|n| n.ends_with(".exp_avg_sq")),
        "{names:?}"
    );
}

#[test]
fn an_hf_writer_folder_whose_chunks_leave_a_hole_is_refused() {
    // Rank 1's shard alone: its chunks start past the tensors' origins.
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("ckpt");
    std::fs::create_dir(&dir).expect("mkdir");
    let from = data_dir().join("hf_writer");
    let name = "shard-00002-model-00001-of-00001.safetensors";
    std::fs::copy(from.join(name), dir.join(name)).expect("copy");
    assert_refused(&tmp, "InvalidLayout");
}
