//! The files `torch.save` wrote (`tests/data/pytorch`, see its README),
//! against what its manifest says torch reads from them: every tensor's
//! name, dtype, shape and bytes, the globals, the metadata leaves, the
//! statistics; exported, resaved (read back by the official safetensors
//! package) and diffed against the resave.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::build::run;
use crate::numpy::fixtures::assert_figures;
use crate::numpy::{export_descr, read_exported_npy, unhex};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pytorch")
}

fn manifest() -> &'static Value {
    static M: OnceLock<Value> = OnceLock::new();
    M.get_or_init(|| {
        let text = std::fs::read(data_dir().join("MANIFEST.json")).expect("manifest");
        serde_json::from_slice(&text).expect("manifest JSON")
    })
}

/// The manifest's files: every one, or those a verb opens on its own.
fn files() -> &'static [Value] {
    manifest()["files"].as_array().expect("files")
}

fn path_of(entry: &Value) -> String {
    data_dir()
        .join(entry["file"].as_str().expect("file"))
        .to_str()
        .expect("utf-8")
        .to_owned()
}

fn tensors(entry: &Value) -> &[Value] {
    entry["tensors"].as_array().map_or(&[], Vec::as_slice)
}

fn by_name<'a>(list: &'a Value, name: &str, what: &str) -> &'a Value {
    list.as_array()
        .and_then(|l| l.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("{what}: no tensor {name:?} in {list}"))
}

fn work() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn info_lists_every_tensor_global_and_leaf_as_torch_reads_them() {
    let cwd = work();
    for entry in files() {
        let what = entry["file"].as_str().expect("file");
        let r = run(cwd.path(), &["info", &path_of(entry)]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        let listed = r.doc["tensors"].as_array().expect("tensors");
        assert_eq!(listed.len(), tensors(entry).len(), "{what}: {}", r.doc);
        for t in tensors(entry) {
            let name = t["name"].as_str().expect("name");
            let got = by_name(&r.doc["tensors"], name, what);
            assert_eq!(got["dtype"], t["dtype"], "{what}: {name}");
            assert_eq!(got["shape"], t["shape"], "{what}: {name}");
        }
        if entry["container"] == "index" {
            continue;
        }
        assert_eq!(r.doc["format"], "pytorch", "{what}");
        assert_eq!(r.doc["pickle"]["globals"], entry["globals"], "{what}");
        assert_eq!(r.doc["pickle"]["unsafe_globals"], serde_json::json!([]));
        let metadata = r.doc["metadata"].as_object().expect("metadata");
        for (key, text) in entry["metadata"].as_object().expect("leaves") {
            let want: Value = serde_json::from_str(text.as_str().expect("text")).expect("JSON");
            let got = metadata
                .get(key)
                .unwrap_or_else(|| panic!("{what}: leaf {key:?} missing: {metadata:?}"));
            // The leaf's JSON value, or its JSON text (PICKLE.md §3).
            let got = match got {
                Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| got.clone()),
                other => other.clone(),
            };
            assert!(
                got == want || got.as_f64().zip(want.as_f64()).is_some_and(|(a, b)| a == b),
                "{what}: {key}: {got} against {want}"
            );
        }
        let r = run(cwd.path(), &["validate", &path_of(entry)]);
        assert_eq!(
            (r.code, &r.doc["valid"]),
            (0, &true.into()),
            "{what}: {}",
            r.doc
        );
    }
}

#[test]
fn stats_match_the_float64_reference() {
    let cwd = work();
    for entry in files() {
        let what = entry["file"].as_str().expect("file");
        let r = run(cwd.path(), &["stats", &path_of(entry)]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        for t in tensors(entry) {
            let name = t["name"].as_str().expect("name");
            let got = by_name(&r.doc["tensors"], name, what);
            assert_figures(got, &t["stats"], &format!("{what}: {name}"));
        }
    }
}

#[test]
fn export_writes_each_logical_tensor() {
    let cwd = work();
    let out = work();
    for (i, entry) in files().iter().enumerate() {
        let what = entry["file"].as_str().expect("file");
        for (j, t) in tensors(entry).iter().enumerate() {
            let name = t["name"].as_str().expect("name");
            let npy = out.path().join(format!("{i}-{j}.npy"));
            let r = run(
                cwd.path(),
                &[
                    "export",
                    &path_of(entry),
                    name,
                    "-o",
                    npy.to_str().expect("utf-8"),
                ],
            );
            assert_eq!(r.code, 0, "{what}: {name}: {}", r.doc);
            let got = read_exported_npy(&npy);
            let shape: Vec<u64> = t["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("dim"))
                .collect();
            assert_eq!(got.shape, shape, "{what}: {name}");
            let dtype = t["dtype"].as_str().expect("dtype");
            if dtype == "BF16" || dtype.starts_with("F8") {
                // Widened to float32, exactly.
                assert_eq!(got.descr, "<f4", "{what}: {name}");
                assert_eq!(
                    got.data.len() as u64,
                    4 * t["numel"].as_u64().expect("numel")
                );
            } else {
                assert_eq!(got.descr, export_descr(dtype), "{what}: {name}");
                if let Some(hex) = t["hex"].as_str() {
                    assert!(got.data == unhex(hex), "{what}: {name}: values differ");
                }
            }
        }
    }
}

#[test]
fn resave_is_read_by_safetensors_with_the_same_tensors_and_diff_finds_it_identical() {
    let cwd = work();
    let out = work();
    for (i, entry) in files().iter().enumerate() {
        let what = entry["file"].as_str().expect("file");
        let st_path = out.path().join(format!("{i}.safetensors"));
        let st_text = st_path.to_str().expect("utf-8");
        let r = run(cwd.path(), &["resave", &path_of(entry), "-o", st_text]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        let bytes = std::fs::read(&st_path).expect("resaved");
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{what}: the official reader refuses the resave: {e}"));
        assert_eq!(st.len(), tensors(entry).len(), "{what}: {:?}", st.names());
        for t in tensors(entry) {
            let name = t["name"].as_str().expect("name");
            let view = st
                .tensor(name)
                .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
            assert_eq!(view.dtype().to_string(), t["dtype"], "{what}: {name}");
            let shape: Vec<Value> = view.shape().iter().map(|&d| d.into()).collect();
            assert_eq!(Value::from(shape), t["shape"], "{what}: {name}");
            if let Some(hex) = t["hex"].as_str() {
                assert!(
                    view.data() == unhex(hex).as_slice(),
                    "{what}: {name}: bytes differ"
                );
            }
        }
        let r = run(cwd.path(), &["diff", &path_of(entry), st_text]);
        assert!(r.code == 0 || r.code == 1, "{what}: diff: {}", r.doc);
        assert_eq!(r.doc["only_in_a"], serde_json::json!([]), "{what}");
        assert_eq!(r.doc["only_in_b"], serde_json::json!([]), "{what}");
        for row in r.doc["tensors"].as_array().expect("rows") {
            assert_eq!(row["status"], "identical", "{what}: {row}");
        }
    }
}

/// The fixtures hold what PICKLE.md's "Done means" lists: protocols 2, 4
/// and 5, a legacy file, a Lightning checkpoint, tied weights, views,
/// every dtype of the table, a shard index.
#[test]
fn the_fixtures_cover_the_cases_pickle_md_lists() {
    let protocols: Vec<u64> = files()
        .iter()
        .filter_map(|f| f["protocol"].as_u64())
        .collect();
    for p in [2, 4, 5] {
        assert!(protocols.contains(&p), "no protocol {p} file");
    }
    for container in ["zip", "legacy", "index"] {
        assert!(
            files().iter().any(|f| f["container"] == container),
            "{container}"
        );
    }
    let all: Vec<&Value> = files().iter().flat_map(tensors).collect();
    assert!(all.iter().any(|t| t["view"] == true), "no view");
    assert!(
        all.iter()
            .any(|t| t["tied_with"].as_array().is_some_and(|a| !a.is_empty())),
        "no tied weights"
    );
    for dtype in [
        "F64",
        "F32",
        "F16",
        "BF16",
        "F8_E4M3",
        "F8_E5M2",
        "F8_E4M3FNUZ",
        "F8_E5M2FNUZ",
        "F8_E8M0",
        "I8",
        "I16",
        "I32",
        "I64",
        "U8",
        "U16",
        "U32",
        "U64",
        "BOOL",
        "C64",
    ] {
        assert!(all.iter().any(|t| t["dtype"] == dtype), "no {dtype} tensor");
    }
    assert!(
        files().iter().any(|f| f["file"] == "lightning.ckpt"),
        "no Lightning checkpoint"
    );
}

/// A folder opens as its PyTorch shard index, or as its
/// `pytorch_model.bin` beside a Trainer's other pickles (which are not
/// the model, and may be unsafe).
#[test]
fn a_folder_opens_as_its_index_or_its_pytorch_model_bin() {
    let cwd = work();
    let sharded = data_dir().join("sharded");
    let r = run(cwd.path(), &["info", sharded.to_str().expect("utf-8")]);
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_eq!(r.doc["kind"], "sharded", "{}", r.doc);
    assert_eq!(r.doc["tensors"].as_array().map(Vec::len), Some(5));
    let trainer = work();
    std::fs::copy(
        data_dir().join("pytorch_model.bin"),
        trainer.path().join("pytorch_model.bin"),
    )
    .expect("copy");
    let unsafe_args = b"\x80\x02cposix\nsystem\n\x8c\x02id\x85R.";
    std::fs::write(trainer.path().join("training_args.bin"), unsafe_args).expect("write");
    std::fs::write(trainer.path().join("optimizer.pt"), unsafe_args).expect("write");
    let r = run(
        cwd.path(),
        &["info", trainer.path().to_str().expect("utf-8")],
    );
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_eq!(r.doc["pickle"]["unsafe_globals"], serde_json::json!([]));
    assert_eq!(r.doc["tensors"].as_array().map(Vec::len), Some(12));
}

/// A shard index is scanned file by file: one unsafe shard makes the
/// model unsafe, named by `info` and `validate`, refused by the readers.
#[test]
fn an_index_with_an_unsafe_shard_is_reported_not_read() {
    let cwd = work();
    let dir = work();
    for name in [
        "pytorch_model.bin.index.json",
        "pytorch_model-00001-of-00002.bin",
    ] {
        std::fs::copy(data_dir().join("sharded").join(name), dir.path().join(name)).expect("copy");
    }
    let evil = super::build::zip_of(
        &[(
            "archive/data.pkl",
            b"\x80\x02csubprocess\nPopen\n\x8c\x02id\x85R.".to_vec(),
        )],
        false,
    );
    std::fs::write(dir.path().join("pytorch_model-00002-of-00002.bin"), evil).expect("write");
    let index = dir.path().join("pytorch_model.bin.index.json");
    let index = index.to_str().expect("utf-8");
    let r = run(cwd.path(), &["info", index]);
    assert!(r.code == 0 || r.code == 1, "{}", r.doc);
    assert_eq!(
        r.doc["pickle"]["unsafe_globals"],
        serde_json::json!(["subprocess.Popen"]),
        "{}",
        r.doc
    );
    let r = run(cwd.path(), &["validate", index]);
    assert_eq!((r.code, &r.doc["valid"]), (1, &false.into()), "{}", r.doc);
    assert_eq!(r.doc["error"]["kind"], "UnsafePickle", "{}", r.doc);
    assert!(r.doc.to_string().contains("subprocess.Popen"));
    let r = run(cwd.path(), &["stats", index]);
    assert_eq!(r.code, 2, "{}", r.doc);
    assert_eq!(r.doc["error"]["kind"], "UnsafePickle");
}
