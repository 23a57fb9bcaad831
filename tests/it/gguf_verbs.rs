//! Every verb on the GGUF files gguf-py wrote (`tests/data/gguf`, see its
//! README), against what its manifest says gguf-py reads from them:
//! `info`'s tensors and `gguf` object, `stats` on the decoded values,
//! `export` (values, `--raw`, `.bin`), `resave` read back by the official
//! safetensors crate, `diff` of a file against itself.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::numpy::fixtures::assert_figures;
use crate::numpy::{read_exported_npy, unhex};
use crate::pytorch::build::run;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf")
}

fn manifest() -> &'static Value {
    static M: OnceLock<Value> = OnceLock::new();
    M.get_or_init(|| {
        let text = std::fs::read(data_dir().join("MANIFEST.json")).expect("manifest");
        serde_json::from_slice(&text).expect("manifest JSON")
    })
}

/// The single GGUF files (a split model's parts are tested as one model).
fn singles() -> Vec<&'static Value> {
    manifest()["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| {
            f["format"] == "gguf"
                && f.get("split_parts").is_none()
                && f["tensors"][0].get("shard").is_none()
        })
        .collect()
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

/// Equal as JSON, floats compared as float32 where the key is FLOAT32.
fn same_f32(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_f32(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| same_f32(v, w)))
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            x.as_f64().map(|v| v as f32) == y.as_f64().map(|v| v as f32)
        }
        _ => got == want,
    }
}

#[test]
fn info_gives_every_tensor_and_the_header_as_gguf_py_reads_them() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let files = singles();
    assert!(files.len() >= 3);
    for entry in files {
        let what = entry["file"].as_str().expect("file");
        let r = run(cwd.path(), &["info", &path_of(entry)]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        assert_eq!(r.doc["format"], "gguf", "{what}");
        let g = &r.doc["gguf"];
        for key in ["version", "alignment", "tensor_data_offset"] {
            assert_eq!(g[key], entry[key], "{what}: {key}");
        }
        let want = entry["metadata"].as_object().expect("metadata");
        let got = g["metadata"].as_object().expect("gguf.metadata");
        assert_eq!(got.len(), want.len(), "{what}: keys");
        for (k, w) in want {
            let v = got.get(k).unwrap_or_else(|| panic!("{what}: no key {k}"));
            let f32 = entry["metadata_types"][k]
                .as_str()
                .is_some_and(|t| t.contains("FLOAT32"));
            assert!(
                if f32 { same_f32(v, w) } else { v == w },
                "{what}: {k}: {v} against {w}"
            );
        }
        let listed = r.doc["tensors"].as_array().expect("tensors");
        assert_eq!(listed.len(), tensors(entry).len(), "{what}");
        for (t, w) in listed.iter().zip(tensors(entry)) {
            for key in ["name", "dtype", "shape", "numel", "nbytes", "data_offsets"] {
                assert_eq!(t[key], w[key], "{what}: {}: {key}", w["name"]);
            }
        }
    }
}

#[test]
fn stats_describe_the_decoded_values() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for entry in singles() {
        let what = entry["file"].as_str().expect("file");
        let r = run(cwd.path(), &["stats", &path_of(entry)]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        let got = r.doc["tensors"].as_array().expect("tensors");
        assert_eq!(got.len(), tensors(entry).len(), "{what}");
        for w in tensors(entry) {
            let name = w["name"].as_str().expect("name");
            let t = got
                .iter()
                .find(|t| t["name"] == name)
                .unwrap_or_else(|| panic!("{what}: no {name}"));
            assert_figures(t, &w["stats"], &format!("{what}: {name}"));
        }
    }
}

/// The stored bytes of a tensor, from the file.
fn stored(entry: &Value, t: &Value) -> Vec<u8> {
    let bytes = std::fs::read(path_of(entry)).expect("fixture");
    let base = entry["tensor_data_offset"].as_u64().expect("offset");
    let [b, e] = [0, 1].map(|i| (base + t["data_offsets"][i].as_u64().expect("o")) as usize);
    bytes[b..e].to_vec()
}

/// `export [--raw] FILE NAME -o OUT` in `cwd`.
fn export(
    cwd: &Path,
    entry: &Value,
    name: &str,
    out: &Path,
    raw: bool,
) -> crate::pytorch::build::Run {
    let file = path_of(entry);
    let out = out.to_str().expect("utf-8");
    let mut args = vec!["export"];
    if raw {
        args.push("--raw");
    }
    args.extend([file.as_str(), name, "-o", out]);
    run(cwd, &args)
}

#[test]
fn export_writes_values_raw_blocks_and_stored_bytes() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for entry in singles() {
        let what = entry["file"].as_str().expect("file");
        for w in tensors(entry) {
            let name = w["name"].as_str().expect("name");
            let dtype = w["dtype"].as_str().expect("dtype");
            let shape: Vec<u64> = serde_json::from_value(w["shape"].clone()).expect("shape");
            let npy = cwd.path().join("v.npy");
            let r = export(cwd.path(), entry, name, &npy, false);
            assert_eq!(r.code, 0, "{what}: {name}: {}", r.doc);
            let got = read_exported_npy(&npy);
            assert_eq!(got.shape, shape, "{what}: {name}");
            let want_descr = match dtype {
                "F16" => "<f2",
                "F64" => "<f8",
                "I8" => "|i1",
                "I16" => "<i2",
                "I32" => "<i4",
                "I64" => "<i8",
                _ => "<f4",
            };
            assert_eq!(got.descr, want_descr, "{what}: {name}");
            if let Some(hex) = w["hex_values"].as_str() {
                assert!(
                    got.data == unhex(hex),
                    "{what}: {name}: values differ from gguf-py's"
                );
                checked += 1;
            }
            // --raw: a block type's bytes shaped as GGUFReader gives them.
            let r = export(cwd.path(), entry, name, &npy, true);
            assert_eq!(r.code, 0, "{what}: {name}: {}", r.doc);
            let raw = read_exported_npy(&npy);
            let block = manifest()["types"]
                .as_array()
                .and_then(|ts| ts.iter().find(|t| t["name"] == dtype))
                .map(|t| {
                    (
                        t["block_elements"].as_u64().expect("e"),
                        t["block_bytes"].as_u64().expect("b"),
                    )
                });
            match block {
                Some((e, b)) if e > 1 => {
                    let mut want = shape.clone();
                    *want.last_mut().expect("rows") = shape[shape.len() - 1] / e * b;
                    assert_eq!(raw.shape, want, "{what}: {name} --raw");
                    assert_eq!(raw.descr, "|u1", "{what}: {name} --raw");
                    assert_eq!(raw.data, stored(entry, w), "{what}: {name} --raw");
                }
                _ if dtype == "BF16" => {
                    assert_eq!(raw.descr, "<u2", "{what}: {name} --raw");
                    assert_eq!(raw.data, stored(entry, w), "{what}: {name} --raw");
                }
                _ => {}
            }
            let bin = cwd.path().join("s.bin");
            let r = export(cwd.path(), entry, name, &bin, false);
            assert_eq!(r.code, 0, "{what}: {name}: {}", r.doc);
            assert_eq!(
                std::fs::read(&bin).expect("bin"),
                stored(entry, w),
                "{what}: {name} .bin"
            );
        }
    }
    assert!(checked >= 30, "{checked} tensors checked value by value");
}

#[test]
fn resave_writes_every_tensor_that_the_official_crate_reads() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for entry in singles() {
        let what = entry["file"].as_str().expect("file");
        let out = cwd.path().join("r.safetensors");
        let r = run(
            cwd.path(),
            &["resave", &path_of(entry), "-o", out.to_str().expect("p")],
        );
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        let bytes = std::fs::read(&out).expect("resaved");
        let st =
            safetensors::SafeTensors::deserialize(&bytes).expect("the official crate reads it");
        assert_eq!(st.len(), tensors(entry).len(), "{what}");
        for w in tensors(entry) {
            let name = w["name"].as_str().expect("name");
            let dtype = w["dtype"].as_str().expect("dtype");
            let t = st
                .tensor(name)
                .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).expect("shape");
            assert_eq!(t.shape(), shape.as_slice(), "{what}: {name}");
            let want = match dtype {
                "F32" | "F16" | "BF16" | "F64" | "I8" | "I16" | "I32" | "I64" => dtype.to_owned(),
                _ => "F32".to_owned(),
            };
            assert_eq!(format!("{:?}", t.dtype()), want, "{what}: {name}");
            if want == dtype {
                assert_eq!(t.data(), stored(entry, w).as_slice(), "{what}: {name}");
            } else if let Some(hex) = w["hex_values"].as_str() {
                assert!(t.data() == unhex(hex).as_slice(), "{what}: {name}: values");
            }
        }
    }
}

#[test]
fn diff_of_a_file_against_itself_is_identical_row_by_row() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for entry in singles() {
        let what = entry["file"].as_str().expect("file");
        let p = path_of(entry);
        let r = run(cwd.path(), &["diff", &p, &p]);
        assert_eq!(r.code, 0, "{what}: {}", r.doc);
        let rows = r.doc["tensors"].as_array().expect("rows");
        assert_eq!(rows.len(), tensors(entry).len(), "{what}");
        for row in rows {
            assert_eq!(row["status"], "identical", "{what}: {row}");
        }
        let r = run(cwd.path(), &["validate", &p]);
        assert_eq!(
            (r.code, &r.doc["valid"]),
            (0, &json!(true)),
            "{what}: {}",
            r.doc
        );
    }
}

#[test]
fn a_split_model_opens_from_its_first_part_and_a_missing_part_is_an_error() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let parts: Vec<&Value> = manifest()["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f["file"].as_str().is_some_and(|n| n.starts_with("split/")))
        .collect();
    assert_eq!(parts.len(), 2);
    let first = path_of(parts[0]);
    let r = run(cwd.path(), &["info", &first]);
    assert_eq!(r.code, 0, "{}", r.doc);
    assert_eq!(r.doc["format"], "gguf");
    assert_eq!(
        r.doc["gguf"]["tensor_data_offset"],
        parts[0]["tensor_data_offset"]
    );
    let listed = r.doc["tensors"].as_array().expect("tensors");
    let want: Vec<&Value> = parts.iter().flat_map(|p| tensors(p)).collect();
    assert_eq!(listed.len(), want.len());
    for (t, w) in listed.iter().zip(&want) {
        for key in ["name", "dtype", "shape", "nbytes", "data_offsets", "shard"] {
            assert_eq!(t[key], w[key], "{}: {key}", w["name"]);
        }
    }
    let r = run(cwd.path(), &["stats", &first]);
    assert_eq!(r.code, 0, "{}", r.doc);
    for w in &want {
        let t = r.doc["tensors"]
            .as_array()
            .and_then(|l| l.iter().find(|t| t["name"] == w["name"]))
            .expect("every part's tensors");
        assert_figures(t, &w["stats"], w["name"].as_str().expect("name"));
    }
    let r = run(cwd.path(), &["validate", &first]);
    assert_eq!(r.code, 0, "{}", r.doc);
    let out = cwd.path().join("all.safetensors");
    let r = run(
        cwd.path(),
        &["resave", &first, "-o", out.to_str().expect("p")],
    );
    assert_eq!(r.code, 0, "{}", r.doc);
    let bytes = std::fs::read(&out).expect("resaved");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("reads");
    assert_eq!(st.len(), want.len());
    // The first part alone: the second is missing.
    let alone = cwd.path().join("tiny-00001-of-00002.gguf");
    std::fs::copy(&first, &alone).expect("copy");
    for verb in ["info", "validate", "stats"] {
        let r = run(cwd.path(), &[verb, alone.to_str().expect("p")]);
        assert_ne!(r.code, 0, "{verb}: {}", r.doc);
        assert_eq!(r.doc["error"]["kind"], "ShardMissing", "{verb}: {}", r.doc);
    }
}

fn hf_original() -> String {
    data_dir()
        .join("llama_tiny_hf/model.safetensors")
        .to_str()
        .expect("utf-8")
        .to_owned()
}

#[test]
fn resave_hf_names_gives_back_the_original_file_byte_for_byte() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let gguf = data_dir().join("llama_tiny.gguf");
    let out = cwd.path().join("hf.safetensors");
    let r = run(
        cwd.path(),
        &[
            "resave",
            "--hf-names",
            gguf.to_str().expect("p"),
            "-o",
            out.to_str().expect("p"),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.doc);
    let original = std::fs::read(hf_original()).expect("original");
    assert!(
        std::fs::read(&out).expect("resaved") == original,
        "not the original's bytes"
    );
    // A quantized GGUF: the HF names, block types as F32 values.
    let q = data_dir().join("llama_tiny_q4_0.gguf");
    let r = run(
        cwd.path(),
        &[
            "resave",
            "--hf-names",
            q.to_str().expect("p"),
            "-o",
            out.to_str().expect("p"),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.doc);
    let bytes = std::fs::read(&out).expect("resaved");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("reads");
    let orig = safetensors::SafeTensors::deserialize(&original).expect("reads");
    let mut names: Vec<String> = st.names().into_iter().map(str::to_owned).collect();
    let mut want: Vec<String> = orig.names().into_iter().map(str::to_owned).collect();
    names.sort();
    want.sort();
    assert_eq!(names, want);
    // Un-permuted: Q's rows line up with the original's (a Q4_0 error of a
    // few percent, not a shuffle's 100 %+).
    let got = st
        .tensor("model.layers.0.self_attn.q_proj.weight")
        .expect("q");
    let was = orig
        .tensor("model.layers.0.self_attn.q_proj.weight")
        .expect("q");
    let f32s: Vec<f32> = got
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let f16s: Vec<f32> = was
        .data()
        .chunks_exact(2)
        .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    let (mut err, mut norm) = (0f64, 0f64);
    for (x, y) in f32s.iter().zip(&f16s) {
        err += f64::from(x - y).powi(2);
        norm += f64::from(*y).powi(2);
    }
    assert!((err / norm).sqrt() < 0.2, "rel L2 {}", (err / norm).sqrt());
    // A GGUF of another architecture, or a file that is no GGUF, is refused.
    let r = run(
        cwd.path(),
        &[
            "resave",
            "--hf-names",
            &hf_original(),
            "-o",
            out.to_str().expect("p"),
        ],
    );
    assert_eq!(
        (r.code, r.doc["error"]["kind"].as_str()),
        (2, Some("HfNames")),
        "{}",
        r.doc
    );
}

#[test]
fn diff_against_the_original_matches_every_tensor_and_measures_the_quantization() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let f16 = data_dir().join("llama_tiny.gguf");
    let r = run(
        cwd.path(),
        &["diff", f16.to_str().expect("p"), &hf_original()],
    );
    assert!(r.code == 0 || r.code == 1, "{}", r.doc);
    assert_eq!(r.doc["only_in_a"], json!([]), "{}", r.doc);
    assert_eq!(r.doc["only_in_b"], json!([]), "{}", r.doc);
    let rows = r.doc["tensors"].as_array().expect("rows");
    assert_eq!(rows.len(), 21);
    for row in rows {
        assert!(
            row["status"] == "identical" || row["status"] == "equal",
            "{row}"
        );
    }
    // The metadata tables differ: exit 1, and the document says so.
    assert_eq!(r.code, 1, "{}", r.doc["metadata"]);
    let q = data_dir().join("llama_tiny_q4_0.gguf");
    let r = run(
        cwd.path(),
        &["diff", &hf_original(), q.to_str().expect("p")],
    );
    assert_eq!(r.doc["only_in_a"], json!([]), "{}", r.doc);
    assert_eq!(r.doc["only_in_b"], json!([]), "{}", r.doc);
    let rows = r.doc["tensors"].as_array().expect("rows");
    assert_eq!(rows.len(), 21);
    let mut quantized = 0;
    for row in rows {
        if row["dequantized"] == "b" {
            quantized += 1;
            let rel = row["rel_l2"].as_f64().expect("rel_l2");
            let snr = row["snr_db"].as_f64().expect("snr_db");
            assert!(rel > 0.0 && rel < 0.2, "{row}");
            assert!(snr > 15.0 && snr < 60.0, "{row}");
        }
    }
    assert_eq!(quantized, 16, "14 Q4_0 matrices and 2 Q8_0");
    let layers = r.doc["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 2, "{}", r.doc["layers"]);
    for l in layers {
        assert_eq!(l["tensors"], 7, "{l}");
        assert!(l["snr_db"].as_f64().is_some_and(|s| s > 15.0), "{l}");
    }
    // The GGUF against its own resave (GGUF names): matched by name.
    let out = cwd.path().join("own.safetensors");
    let r = run(
        cwd.path(),
        &[
            "resave",
            q.to_str().expect("p"),
            "-o",
            out.to_str().expect("p"),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.doc);
    let r = run(
        cwd.path(),
        &["diff", q.to_str().expect("p"), out.to_str().expect("p")],
    );
    assert_eq!(r.doc["only_in_a"], json!([]), "{}", r.doc);
    for row in r.doc["tensors"].as_array().expect("rows") {
        assert!(
            row["status"] == "identical" || row["status"] == "equal",
            "{row}"
        );
    }
}

#[test]
fn hf_names_without_the_head_count_and_a_split_part_renamed_are_refused() {
    let cwd = tempfile::tempdir().expect("tempdir");
    // llama.attention.head_count renamed away: Q and K cannot be
    // un-permuted, so nothing is written under Hugging Face's names.
    let mut bytes = std::fs::read(data_dir().join("llama_tiny.gguf")).expect("fixture");
    let key = [&26u64.to_le_bytes()[..], b"llama.attention.head_count"].concat();
    let at = bytes
        .windows(key.len())
        .position(|w| w == key.as_slice())
        .expect("the key");
    bytes[at + 8 + 16] = b'H';
    let file = cwd.path().join("m.gguf");
    std::fs::write(&file, &bytes).expect("write");
    let out = cwd.path().join("o.safetensors");
    let r = run(
        cwd.path(),
        &[
            "resave",
            "--hf-names",
            file.to_str().expect("p"),
            "-o",
            out.to_str().expect("p"),
        ],
    );
    assert_eq!(
        (r.code, r.doc["error"]["kind"].as_str()),
        (2, Some("HfNames")),
        "{}",
        r.doc
    );
    assert!(!out.exists());
    // A split model's first part under another name: its parts cannot be
    // found, which is an error, not a model of one part.
    let part = data_dir().join("split/tiny-00001-of-00002.gguf");
    let renamed = cwd.path().join("tiny.gguf");
    std::fs::copy(part, &renamed).expect("copy");
    let r = run(cwd.path(), &["info", renamed.to_str().expect("p")]);
    assert_eq!(
        (r.code, r.doc["error"]["kind"].as_str()),
        (2, Some("GgufInvalid")),
        "{}",
        r.doc
    );
}
