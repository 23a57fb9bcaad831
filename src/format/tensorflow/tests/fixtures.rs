//! The fixtures TensorFlow itself wrote (`tests/data/tensorflow/`): every
//! file opens (or is refused with the kind the manifest names), lists the
//! tensors the manifest lists, by name, dtype and shape, and each
//! tensor's bytes have the manifest's SHA-256 (and hex, where given).

use crate::format::test_support::sha256;
use std::path::Path;

use super::*;
use crate::format::decode::Data;
use crate::jobs::CancelToken;

fn hex(words: impl IntoIterator<Item = impl std::fmt::LowerHex>, width: usize) -> String {
    use std::fmt::Write;
    words.into_iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:0width$x}");
        s
    })
}

#[test]
fn the_fixtures_tensorflow_wrote() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tensorflow");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.json")).expect("the manifest");
    let manifest: serde_json::Value = serde_json::from_str(&manifest).expect("JSON");
    let files = manifest["files"].as_array().expect("files");
    assert!(files.len() >= 5);
    let mut tensors_checked = 0;
    for f in files {
        let rel = f["file"].as_str().expect("file");
        let path = dir.join(rel);
        let folder = path.parent().expect("a folder");
        let index = std::fs::read(&path).expect("the index");
        let prefix = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".index"))
            .expect("a .index");
        assert!(is_index(&index), "{rel}");
        let size = |name: &str| std::fs::metadata(folder.join(name)).map(|m| m.len());
        let opened = open(&index, prefix, &size);
        if f["refused"].as_bool() == Some(true) {
            let e = opened.expect_err(rel);
            if let Some(k) = f["error_kind"].as_str() {
                assert_eq!(e.kind(), k, "{rel}: {e}");
            }
            let msg = e.to_string().to_lowercase();
            if let Some(any) = f["message_any"].as_array() {
                assert!(
                    any.iter()
                        .any(|m| msg.contains(&m.as_str().unwrap_or("").to_lowercase())),
                    "{rel}: {msg}"
                );
            }
            continue;
        }
        let o = opened.unwrap_or_else(|e| panic!("{rel}: {e} ({})", e.kind()));
        assert_eq!(
            o.facts["num_shards"], f["tensorflow"]["num_shards"],
            "{rel}"
        );
        let data: Vec<Vec<u8>> = o
            .files
            .iter()
            .map(|n| std::fs::read(folder.join(n)).expect("a data file"))
            .collect();
        let mut all: Vec<&[u8]> = vec![&index];
        all.extend(data.iter().map(Vec::as_slice));
        let want = f["tensors"].as_array().expect("tensors");
        let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want_names: Vec<&str> = want.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names, want_names, "{rel}");
        for (t, w) in o.tensors.iter().zip(want) {
            assert_eq!(
                Some(t.dtype.name()),
                w["dtype"].as_str(),
                "{rel} {}",
                t.name
            );
            let shape: Vec<u64> = w["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .filter_map(serde_json::Value::as_u64)
                .collect();
            assert_eq!(t.shape, shape, "{rel} {}", t.name);
            let Data::Decoded(d) = &t.data else {
                panic!("{rel} {}: every TensorFlow tensor is decoded", t.name)
            };
            let mut bytes = Vec::new();
            d.decode(&all, &CancelToken::new(), &mut |b| {
                bytes.extend_from_slice(b);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{rel} {}: {e:?}", t.name));
            assert_eq!(
                Some(sha256(&bytes).as_str()),
                w["sha256"].as_str(),
                "{rel} {}",
                t.name
            );
            if let Some(h) = w["hex"].as_str() {
                assert_eq!(hex(&bytes, 2), h, "{rel} {}", t.name);
            }
            tensors_checked += 1;
        }
        for n in f["not_listed"].as_array().into_iter().flatten() {
            let name = n["name"].as_str().expect("name");
            assert!(
                o.metadata.iter().any(|(k, _)| k == name),
                "{rel}: {name} is not in the metadata"
            );
        }
    }
    assert!(tensors_checked >= 30, "{tensors_checked}");
}
