//! The GGUF header reader on the files gguf-py 0.19.0 wrote
//! (`tests/data/gguf`, see its README): version, alignment, the data
//! section's start, every metadata value as `info` will print it, every
//! tensor's name, ggml type, row-major shape and byte range, as gguf-py's
//! `GGUFReader` reads them.

use std::path::Path;

use serde_json::Value;
use tensorscope::format::gguf::header::{parse, stored_bytes};

fn data_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf")
}

fn manifest() -> Value {
    let text = std::fs::read(data_dir().join("MANIFEST.json")).expect("manifest");
    serde_json::from_slice(&text).expect("manifest JSON")
}

/// Equal as JSON; with `f32`, numbers that read back to the same float32
/// are equal (GGUF.md: FLOAT32 as any text that reads back to it).
fn same(got: &Value, want: &Value, f32: bool) -> bool {
    match (got, want) {
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y, f32))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| same(v, w, f32)))
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64(), y.as_f64());
            x == y || (f32 && x.map(|v| v as f32) == y.map(|v| v as f32))
        }
        _ => got == want,
    }
}

#[test]
fn every_gguf_fixture_header_reads_as_gguf_py_reads_it() {
    let m = manifest();
    let mut files = 0;
    for entry in m["files"].as_array().expect("files") {
        let name = entry["file"].as_str().expect("file");
        if entry["format"] != "gguf" {
            continue;
        }
        files += 1;
        let bytes = std::fs::read(data_dir().join(name)).expect("fixture");
        let h = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            u64::from(h.version),
            entry["version"].as_u64().expect("v"),
            "{name}"
        );
        assert_eq!(
            h.alignment,
            entry["alignment"].as_u64().expect("a"),
            "{name}"
        );
        assert_eq!(
            h.tensor_data_offset,
            entry["tensor_data_offset"].as_u64().expect("o"),
            "{name}"
        );
        let want = entry["metadata"].as_object().expect("metadata");
        assert_eq!(h.metadata.len(), want.len(), "{name}: keys");
        for (key, value) in &h.metadata {
            let w = want
                .get(key)
                .unwrap_or_else(|| panic!("{name}: extra key {key}"));
            let got = value.to_json();
            let f32 = entry["metadata_types"][key]
                .as_str()
                .is_some_and(|t| t.contains("FLOAT32"));
            assert!(same(&got, w, f32), "{name}: {key}: {got} against {w}");
        }
        let tensors = entry["tensors"].as_array().expect("tensors");
        assert_eq!(h.tensors.len(), tensors.len(), "{name}");
        for (t, w) in h.tensors.iter().zip(tensors) {
            let what = format!("{name}: {}", t.name);
            assert_eq!(t.name, w["name"].as_str().expect("name"), "{what}");
            assert_eq!(
                t.ggml_type.name(),
                w["dtype"].as_str().expect("dtype"),
                "{what}"
            );
            assert_eq!(serde_json::json!(t.shape()), w["shape"], "{what}");
            let n = stored_bytes(t).expect("size");
            assert_eq!(
                serde_json::json!([t.offset, t.offset + n]),
                w["data_offsets"],
                "{what}"
            );
        }
    }
    assert!(files >= 5, "{files} GGUF fixtures");
}

/// Every block type of `types.gguf` whose manifest entry carries its
/// values decodes to gguf-py's values byte for byte.
#[test]
fn every_block_type_decodes_as_gguf_py_decodes_it() {
    use tensorscope::format::gguf::dequant::dequantize;
    let m = manifest();
    let entry = m["files"]
        .as_array()
        .and_then(|f| f.iter().find(|e| e["file"] == "types.gguf"))
        .expect("types.gguf");
    let bytes = std::fs::read(data_dir().join("types.gguf")).expect("fixture");
    let h = parse(&bytes).expect("parses");
    let tensors = entry["tensors"].as_array().expect("tensors");
    assert_eq!(h.tensors.len(), tensors.len());
    let (mut expected, mut decoded) = (Vec::new(), Vec::new());
    for (t, w) in h.tensors.iter().zip(tensors) {
        let Some(hex) = w["hex_values"].as_str() else {
            continue;
        };
        if t.ggml_type.is_stored() {
            continue;
        }
        expected.push(t.ggml_type.name());
        let start = (h.tensor_data_offset + t.offset) as usize;
        let stored = &bytes[start..start + stored_bytes(t).expect("size") as usize];
        let mut values = Vec::new();
        if let Err(e) = dequantize(t.ggml_type, stored, &mut values) {
            eprintln!("{}: {e}", t.name);
            continue;
        }
        let got: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let want: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        assert!(got == want, "{}: values differ from gguf-py's", t.name);
        decoded.push(t.ggml_type.name());
    }
    let missing: Vec<_> = expected.iter().filter(|n| !decoded.contains(n)).collect();
    assert!(missing.is_empty(), "not decoded: {missing:?}");
    assert_eq!(decoded.len(), expected.len());
    assert!(
        decoded.len() >= 23,
        "{} block types: {decoded:?}",
        decoded.len()
    );
}
