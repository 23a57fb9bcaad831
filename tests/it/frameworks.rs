//! The other frameworks' checkpoints (FRAMEWORKS.md) against the files
//! their own libraries wrote (`scripts/make_framework_fixtures.py`,
//! `tests/data/<container>/MANIFEST.json`): every tensor's name, dtype,
//! shape and bytes as the library reads them, the statistics, and every
//! verb: `validate`, `stats`, `resave` (read back by the official
//! safetensors crate), `diff` against the conversion (all identical),
//! `export`; the files the libraries refuse, refused by kind.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::Digest;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};

use crate::numpy::fixtures::assert_figures;
use crate::pytorch::build::run;

/// The containers whose fixtures are checked here.
const CONTAINERS: &[&str] = &["tensorflow", "flax", "onnx", "keras", "hdf5"];

fn data_dir(container: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(container)
}

fn manifest(container: &str) -> Value {
    let text = std::fs::read(data_dir(container).join("MANIFEST.json")).expect("manifest");
    serde_json::from_slice(&text).expect("manifest JSON")
}

/// Every fixture: (container, its entry, its path).
fn fixtures() -> Vec<(&'static str, Value, PathBuf)> {
    let mut out = Vec::new();
    for &c in CONTAINERS {
        for entry in manifest(c)["files"].as_array().expect("files") {
            let path = data_dir(c).join(entry["file"].as_str().expect("file"));
            out.push((c, entry.clone(), path));
        }
    }
    out
}

/// The `format` a fixture opens as: its folder's container, except the
/// HDF5 files beside the `.keras` archives.
fn format_of(container: &str, path: &Path) -> &'static str {
    match (container, path.extension().and_then(|e| e.to_str())) {
        ("keras", Some("keras")) => "keras",
        ("keras" | "hdf5", _) => "hdf5",
        ("onnx", _) => "onnx",
        ("flax", _) => "flax",
        _ => "tensorflow",
    }
}

fn tensors(entry: &Value) -> &[Value] {
    entry["tensors"].as_array().map_or(&[], Vec::as_slice)
}

fn refused(entry: &Value) -> bool {
    entry["refused"].as_bool().unwrap_or(false)
}

#[test]
fn every_tensor_reads_as_its_library_reads_it() {
    for (c, entry, path) in fixtures() {
        let what = format!("{c}/{}", entry["file"]);
        if refused(&entry) {
            continue;
        }
        let ck = Checkpoint::open_readable(&path).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(ck.container().id(), format_of(c, &path), "{what}");
        let want = tensors(&entry);
        assert_eq!(ck.tensors().len(), want.len(), "{what}: tensor count");
        let all: Vec<_> = ck.tensors().to_vec();
        let _fetched = ck
            .fetch(&all, &CancelToken::new(), &Progress::new())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for t in want {
            let name = t["name"].as_str().expect("name");
            let r = ck
                .find(name)
                .unwrap_or_else(|| panic!("{what}: {name:?} not listed"));
            let info = ck.info(r).expect("info");
            assert_eq!(info.dtype().name(), t["dtype"], "{what}: {name}");
            assert_eq!(
                serde_json::to_value(info.shape()).expect("shape"),
                t["shape"],
                "{what}: {name}"
            );
            let sha = hex(&sha2::Sha256::digest(ck.bytes(r)));
            assert_eq!(sha, t["sha256"], "{what}: {name}: bytes");
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[test]
fn the_verbs_agree_with_the_libraries() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, (c, entry, path)) in fixtures().into_iter().enumerate() {
        let what = format!("{c}/{}", entry["file"]);
        let file = path.to_str().expect("utf-8");
        if refused(&entry) {
            let o = run(dir.path(), &["info", file]);
            assert_eq!(o.code, 2, "{what}: {}", o.doc);
            if let Some(kind) = entry["error_kind"].as_str() {
                assert_eq!(o.doc["error"]["kind"], kind, "{what}: {}", o.doc);
            }
            let o = run(dir.path(), &["validate", file]);
            assert!(o.code == 1 || o.code == 2, "{what}: {}", o.doc);
            assert_eq!(o.doc["valid"], false, "{what}");
            continue;
        }
        let o = run(dir.path(), &["info", file]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        assert_eq!(o.doc["format"], format_of(c, &path), "{what}");
        let o = run(dir.path(), &["validate", file]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        assert_eq!(o.doc["valid"], true, "{what}");
        let o = run(dir.path(), &["stats", file]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        for t in tensors(&entry) {
            let Some(want) = t.get("stats") else {
                continue;
            };
            let got = o.doc["tensors"]
                .as_array()
                .expect("tensors")
                .iter()
                .find(|g| g["name"] == t["name"])
                .unwrap_or_else(|| panic!("{what}: {} has no stats", t["name"]));
            if t["dtype"] != "C64" {
                assert_figures(got, want, &format!("{what}: {}", t["name"]));
            }
        }
        let out = dir.path().join(format!("out{i}.safetensors"));
        let out_text = out.to_str().expect("utf-8");
        let o = run(dir.path(), &["resave", file, "-o", out_text]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        let bytes = std::fs::read(&out).expect("resaved");
        let st = safetensors::SafeTensors::deserialize(&bytes).expect("the official reader");
        assert_eq!(st.len(), tensors(&entry).len(), "{what}");
        let o = run(dir.path(), &["diff", file, out_text]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        for row in o.doc["tensors"].as_array().expect("rows") {
            assert_eq!(row["status"], "identical", "{what}: {row}");
        }
        if let Some(t) = tensors(&entry).first() {
            let npy = dir.path().join(format!("t{i}.npy"));
            let name = t["name"].as_str().expect("name");
            let o = run(
                dir.path(),
                &["export", file, name, "-o", npy.to_str().expect("utf-8")],
            );
            assert_eq!(o.code, 0, "{what}: {}", o.doc);
            assert!(npy.is_file(), "{what}");
        }
    }
}

/// External data that resolves outside the model's folder through a
/// symlink is refused before a byte of it is read, though the file exists.
#[cfg(unix)]
#[test]
fn onnx_external_data_behind_a_symlink_out_of_the_folder_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = dir.path().join("model");
    std::fs::create_dir(&model).expect("folder");
    let src = data_dir("onnx");
    std::fs::copy(
        src.join("external_one.onnx"),
        model.join("external_one.onnx"),
    )
    .expect("copy");
    let outside = dir.path().join("secret.bin");
    std::fs::copy(src.join("external_one.onnx_data"), &outside).expect("copy");
    std::os::unix::fs::symlink(&outside, model.join("external_one.onnx_data")).expect("symlink");
    let file = model.join("external_one.onnx");
    for verb in ["info", "validate", "stats"] {
        let o = run(dir.path(), &[verb, file.to_str().expect("utf-8")]);
        assert!(
            o.code == 2 || (verb == "validate" && o.code == 1),
            "{verb}: {}",
            o.doc
        );
        assert_eq!(
            o.doc["error"]["kind"], "ExternalDataOutside",
            "{verb}: {}",
            o.doc
        );
    }
}

/// A TensorFlow data shard whose bytes no longer match their CRC-32C:
/// `info` (which reads no data) answers, the verbs that read it refuse.
#[test]
fn a_tensorflow_data_crc_mismatch_is_found_by_the_verbs_that_read_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = data_dir("tensorflow").join("tf_checkpoint");
    for entry in std::fs::read_dir(&src).expect("folder") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    let shard = dir.path().join("ckpt-1.data-00000-of-00001");
    let mut bytes = std::fs::read(&shard).expect("shard");
    // The first tensor's first byte (every entry's data is CRC-checked).
    bytes[0] ^= 0x55;
    std::fs::write(&shard, bytes).expect("write");
    let index = dir.path().join("ckpt-1.index");
    let file = index.to_str().expect("utf-8");
    let o = run(dir.path(), &["info", file]);
    assert_eq!(o.code, 0, "{}", o.doc);
    let o = run(dir.path(), &["validate", file]);
    assert_eq!(o.code, 1, "{}", o.doc);
    assert_eq!(o.doc["valid"], false);
    assert_eq!(o.doc["error"]["kind"], "ChecksumMismatch", "{}", o.doc);
    let out = dir.path().join("out.safetensors");
    let o = run(
        dir.path(),
        &["resave", file, "-o", out.to_str().expect("utf-8")],
    );
    assert_eq!(o.code, 2, "{}", o.doc);
    assert!(!out.exists(), "a refused resave leaves no file");
}
