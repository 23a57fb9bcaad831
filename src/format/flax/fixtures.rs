//! The reader on files Flax itself wrote (`tests/data/flax/`, made by
//! `scripts/make_framework_fixtures.py`): every tensor's name, dtype, shape
//! and the SHA-256 of its bytes, and every plain value, against
//! `MANIFEST.json`; the refused files refused with the kind it names.

use crate::format::test_support::sha256;
use std::collections::HashMap;
use std::path::PathBuf;

use super::open;
use super::tests::tensor_bytes;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/flax")
}

#[test]
fn every_fixture_reads_as_flax_restores_it() {
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir().join("MANIFEST.json")).expect("the manifest is there"),
    )
    .expect("the manifest is JSON");
    let files = manifest["files"].as_array().expect("files");
    assert!(files.len() >= 4);
    for f in files {
        let name = f["file"].as_str().expect("file");
        let bytes = std::fs::read(dir().join(name)).expect("the fixture is there");
        if f["refused"] == true {
            let e = open(&bytes).expect_err(name);
            if let Some(kind) = f["error_kind"].as_str() {
                assert_eq!(e.kind(), kind, "{name}: {e}");
            }
            let message = e.to_string().to_lowercase();
            if let Some(any) = f["message_any"].as_array() {
                assert!(
                    any.iter()
                        .any(|m| message.contains(&m.as_str().unwrap_or("").to_lowercase())),
                    "{name}: {message}"
                );
            }
            continue;
        }
        let o = open(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = f["tensors"].as_array().expect("tensors");
        let got: HashMap<&str, &crate::format::decode::Tensor> =
            o.tensors.iter().map(|t| (t.name.as_str(), t)).collect();
        let order: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want_order: Vec<&str> = want.iter().filter_map(|w| w["name"].as_str()).collect();
        assert_eq!(order, want_order, "{name}: tensors in file order");
        for w in want {
            let tname = w["name"].as_str().expect("name");
            let t = got
                .get(tname)
                .unwrap_or_else(|| panic!("{name}: no tensor {tname}"));
            assert_eq!(t.dtype.name(), w["dtype"], "{name}: {tname}");
            assert_eq!(
                serde_json::json!(t.shape),
                w["shape"],
                "{name}: {tname} shape"
            );
            let data = tensor_bytes(&bytes, t);
            assert_eq!(sha256(&data), w["sha256"], "{name}: {tname} bytes");
            if let Some(chunks) = w.get("chunks") {
                let fact = t.facts.iter().find(|(k, _)| *k == "chunks");
                assert_eq!(fact.map(|(_, v)| v), Some(chunks), "{name}: {tname}");
            }
        }
        let not_listed = f["not_listed"].as_array().expect("not_listed");
        assert_eq!(o.metadata.len(), not_listed.len(), "{name}: metadata");
        for m in not_listed {
            let key = m["name"].as_str().expect("name");
            let v = o
                .metadata
                .iter()
                .find(|(k, _)| k == key)
                .unwrap_or_else(|| panic!("{name}: no metadata {key}"));
            assert_eq!(v.1, m["value"], "{name}: {key}");
        }
        assert!(o.warnings.is_empty(), "{name}: {:?}", o.warnings);
    }
}
