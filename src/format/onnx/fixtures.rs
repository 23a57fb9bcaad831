//! The models onnx itself wrote (`tests/data/onnx/`, MANIFEST.json): every
//! tensor's name, dtype, shape and the sha256 of its bytes as
//! `numpy_helper.to_array` gives them, the model's facts, and each refused
//! model's kind and message. SHA-256 is computed here (a few lines, no
//! dependency for one test).

use crate::format::test_support::sha256;
use std::path::{Path, PathBuf};

use serde_json::Value as J;

use super::*;
use crate::jobs::CancelToken;

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx")
}

/// An external file's size, as the integrator asks it: inside the model's
/// folder, `NotFound` when absent.
fn size_in(dir: &Path) -> impl Fn(&str) -> std::io::Result<u64> + '_ {
    move |location| Ok(std::fs::metadata(dir.join(location))?.len())
}

fn bytes_of(t: &Tensor, files: &[&[u8]]) -> Vec<u8> {
    match &t.data {
        Data::Plain { file, range, .. } => {
            files[*file][range.start as usize..range.end as usize].to_vec()
        }
        Data::Decoded(d) => {
            let mut out = Vec::new();
            d.decode(files, &CancelToken::new(), &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            out
        }
    }
}

#[test]
fn every_fixture_reads_as_onnx_reads_it() {
    let dir = folder();
    let manifest: J =
        serde_json::from_slice(&std::fs::read(dir.join("MANIFEST.json")).unwrap()).unwrap();
    let entries = manifest["files"].as_array().unwrap();
    assert!(entries.len() >= 4);
    let mut checked = 0;
    for entry in entries {
        let file = entry["file"].as_str().unwrap();
        let path = dir.join(file);
        let model_dir = path.parent().unwrap().to_path_buf();
        let bytes = std::fs::read(&path).unwrap();
        let size = size_in(&model_dir);
        let result = open(&bytes, &size);
        if entry["refused"].as_bool().unwrap() {
            let e = result.expect_err(file);
            if let Some(kind) = entry["error_kind"].as_str() {
                assert_eq!(e.kind(), kind, "{file}: {e}");
            }
            let message = e.to_string().to_lowercase();
            let any = entry["message_any"].as_array().unwrap();
            assert!(
                any.iter()
                    .any(|m| message.contains(&m.as_str().unwrap().to_lowercase())),
                "{file}: {message:?} names none of {any:?}"
            );
            checked += 1;
            continue;
        }
        let o = result.unwrap_or_else(|e| panic!("{file}: {e}"));
        for key in ["ir_version", "opset", "producer"] {
            assert_eq!(o.facts[key], entry["onnx"][key], "{file}: {key}");
        }
        let data: Vec<Vec<u8>> = o
            .files
            .iter()
            .map(|f| std::fs::read(model_dir.join(f)).unwrap())
            .collect();
        let mut files: Vec<&[u8]> = vec![&bytes];
        files.extend(data.iter().map(Vec::as_slice));
        let want = entry["tensors"].as_array().unwrap();
        let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, want_names, "{file}: the tensors, in order");
        for (t, w) in o.tensors.iter().zip(want) {
            let what = format!("{file}: {}", t.name);
            assert_eq!(t.dtype.name(), w["dtype"], "{what}");
            assert_eq!(J::from(t.shape.clone()), w["shape"], "{what}");
            assert_eq!(sha256(&bytes_of(t, &files)), w["sha256"], "{what}");
            let plain = matches!(t.data, Data::Plain { .. });
            match w["storage"].as_str().unwrap() {
                "external" => {
                    let ext = &w["external"];
                    assert!(
                        t.facts.contains(&("location", ext["location"].clone())),
                        "{what}"
                    );
                    assert!(
                        t.facts.contains(&("offset", ext["offset"].clone())),
                        "{what}"
                    );
                    assert_eq!(plain, t.dtype != Dtype::Bool, "{what}");
                }
                "raw_data" => assert_eq!(plain, t.dtype != Dtype::Bool, "{what}"),
                _ => assert!(plain == (t.shape.contains(&0)), "{what}"),
            }
        }
        checked += 1;
    }
    assert_eq!(checked, entries.len());
}
