//! The fixtures h5py and Keras wrote (`tests/data/hdf5`, `tests/data/keras`),
//! each opened and every tensor compared with its manifest: name, order,
//! dtype, shape and the sha256 of its bytes; attributes with their
//! values; refused files refused with the manifest's words.

use serde_json::Value;

use super::tensor_bytes;
use crate::format::hdf5::open;
use crate::format::test_support::sha256;

fn manifest(folder: &str) -> (std::path::PathBuf, Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(folder);
    let text = std::fs::read_to_string(dir.join("MANIFEST.json")).unwrap();
    (dir, serde_json::from_str(&text).unwrap())
}

/// The HDF5 bytes of a fixture: the file, or a `.keras` archive's
/// (stored) `model.weights.h5` member at the offset the manifest gives.
fn hdf5_bytes(dir: &std::path::Path, entry: &Value) -> Vec<u8> {
    let name = entry["file"].as_str().unwrap();
    let bytes = std::fs::read(dir.join(name)).unwrap();
    let Some(members) = entry["members"].as_array() else {
        return bytes;
    };
    let m = members
        .iter()
        .find(|m| m["name"] == "model.weights.h5")
        .unwrap();
    assert_eq!(m["compression"], "stored");
    let at = m["data_offset"].as_u64().unwrap() as usize;
    let size = m["size"].as_u64().unwrap() as usize;
    bytes[at..at + size].to_vec()
}

fn check_folder(folder: &str) -> usize {
    let (dir, m) = manifest(folder);
    let mut checked = 0;
    for entry in m["files"].as_array().unwrap() {
        let name = entry["file"].as_str().unwrap();
        let bytes = hdf5_bytes(&dir, entry);
        if entry["refused"] == true {
            let e = open(&bytes).expect_err(name);
            if let Some(kind) = entry["error_kind"].as_str() {
                assert_eq!(e.kind(), kind, "{name}: {e}");
            }
            let text = e.to_string().to_lowercase();
            let words = entry["message_any"].as_array().unwrap();
            assert!(
                words
                    .iter()
                    .any(|w| text.contains(&w.as_str().unwrap().to_lowercase())),
                "{name}: {text}"
            );
            checked += 1;
            continue;
        }
        let o = open(&bytes).unwrap_or_else(|e| panic!("{name}: {} {e}", e.kind()));
        let want = entry["tensors"].as_array().unwrap();
        let got: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(got, want_names, "{name}: the tensors and their order");
        for (t, w) in o.tensors.iter().zip(want) {
            let what = format!("{name}: {}", t.name);
            assert_eq!(t.dtype.name(), w["dtype"].as_str().unwrap(), "{what}");
            let shape: Vec<u64> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(t.shape, shape, "{what}");
            let data = tensor_bytes(&bytes, t).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(data.len() as u64, w["nbytes"].as_u64().unwrap(), "{what}");
            assert_eq!(sha256(&data), w["sha256"].as_str().unwrap(), "{what}");
            checked += 1;
        }
        // Attributes: each listed one is in the metadata, with its value
        // where the manifest gives it whole.
        for n in entry["not_listed"].as_array().into_iter().flatten() {
            let key = n["name"].as_str().unwrap();
            if n["why"] != "attribute (metadata)" {
                assert!(
                    !o.tensors.iter().any(|t| t.name == key),
                    "{name}: {key} is no tensor"
                );
                assert!(
                    o.warnings.iter().any(|w| w.contains(&format!("{key:?}"))),
                    "{name}: no warning for {key}: {:?}",
                    o.warnings
                );
                continue;
            }
            let Some((_, value)) = o.metadata.iter().find(|(k, _)| k == key) else {
                // Attributes of types kept as no metadata (references,
                // compounds) may be missing.
                continue;
            };
            match n["value"].as_str() {
                Some(s) if s.starts_with("<string of ") => {
                    let chars: usize = s["<string of ".len()..]
                        .split(' ')
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert_eq!(
                        value.as_str().unwrap().chars().count(),
                        chars,
                        "{name}: {key}"
                    );
                }
                // h5py reads a scalar attribute as a 0-d value, which the
                // manifest writes as a list of one (dtypes.h5's
                // numeric@scale): the scalar is kept.
                _ if !n["value"].is_null() => assert!(
                    value == &n["value"] || Value::Array(vec![value.clone()]) == n["value"],
                    "{name}: {key}: {value} against {}",
                    n["value"]
                ),
                _ => {}
            }
        }
    }
    checked
}

#[test]
fn every_hdf5_fixture_reads_as_h5py_reads_it() {
    assert!(check_folder("hdf5") > 50);
}

#[test]
fn every_keras_fixture_reads_as_h5py_reads_it() {
    assert!(check_folder("keras") > 40);
}
