//! The command line as a user runs it: JSON documents and exit codes.

use crate::exe::OutputOnceMore as _;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;

use crate::fixtures::{small_model, with_header, write};

/// `tensorscope ARGS...`: exit code, stdout, stderr.
pub fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = crate::exe::command()
        .args(args)
        .output_once_more()
        .expect("run tensorscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_json(args: &[&str], path: &Path) -> (i32, serde_json::Value) {
    let mut full: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    full.push(path.as_os_str());
    full.push(std::ffi::OsStr::new("--json"));
    let (code, stdout, stderr) = run(&full);
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {stdout:?} / {stderr}"));
    (code, doc)
}

#[test]
fn info_json_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "m.safetensors", &small_model());
    let (code, doc) = run_json(&["info"], &p);
    assert_eq!(code, 0);
    for key in [
        "path",
        "file_size",
        "header_size",
        "metadata",
        "tensors",
        "warnings",
    ] {
        assert!(doc.get(key).is_some(), "{key} missing: {doc}");
    }
    assert_eq!(doc["metadata"]["format"], "pt");
    assert_eq!(doc["file_size"], std::fs::metadata(&p).expect("meta").len());
    let tensors = doc["tensors"].as_array().expect("array");
    assert_eq!(tensors.len(), 6);
    let scale = tensors
        .iter()
        .find(|t| t["name"] == "scale")
        .expect("scale");
    assert_eq!(scale["dtype"], "F64");
    assert_eq!(scale["shape"], serde_json::json!([]));
    assert_eq!(scale["numel"], 1);
    assert_eq!(scale["nbytes"], 8);
    let packed = tensors
        .iter()
        .find(|t| t["name"] == "packed")
        .expect("packed");
    assert_eq!(packed["nbytes"], 4);
    assert!(packed.get("shard").is_none());
    // Offset order.
    let begins: Vec<u64> = tensors
        .iter()
        .map(|t| t["data_offsets"][0].as_u64().expect("u64"))
        .collect();
    assert!(begins.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn info_json_integers_are_exact_above_2_pow_53() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = (1u64 << 63) + 1;
    let h = format!(r#"{{"t":{{"dtype":"F32","shape":[0,{big}],"data_offsets":[0,0]}}}}"#);
    let p = write(dir.path(), "z.safetensors", &with_header(&h, 0));
    let (code, stdout, _) = run(&[
        std::ffi::OsStr::new("info"),
        p.as_os_str(),
        std::ffi::OsStr::new("--json"),
    ]);
    assert_eq!(code, 0);
    assert!(stdout.contains(&big.to_string()), "{stdout}");
}

#[test]
fn validate_exit_codes_and_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = write(dir.path(), "good.safetensors", &small_model());
    let (code, doc) = run_json(&["validate"], &good);
    assert_eq!(code, 0);
    assert_eq!(doc["valid"], true);
    assert!(doc["error"].is_null());

    let bad = write(
        dir.path(),
        "bad.safetensors",
        &with_header(
            r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
            4,
        ),
    );
    let (code, doc) = run_json(&["validate"], &bad);
    assert_eq!(code, 1);
    assert_eq!(doc["valid"], false);
    assert_eq!(doc["error"]["kind"], "TensorInvalidInfo");
    assert_eq!(doc["error"]["tensor"], "t");
    assert!(
        doc["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("needs 8")
    );

    let zip = write(
        dir.path(),
        "model.bin",
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl",
    );
    let (code, doc) = run_json(&["validate"], &zip);
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["kind"], "HeaderTooLarge");
    assert_eq!(doc["error"]["detected_format"], "pytorch-zip");

    let missing = dir.path().join("missing.safetensors");
    let (code, doc) = run_json(&["validate"], &missing);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "Io");
    assert!(
        doc["error"]["path"]
            .as_str()
            .expect("path")
            .ends_with("missing.safetensors")
    );

    // info on an invalid file is an error (2) with the error document.
    let (code, doc) = run_json(&["info"], &bad);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "TensorInvalidInfo");
}

#[test]
fn human_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = write(dir.path(), "good.safetensors", &small_model());
    let (code, stdout, _) = run(&[std::ffi::OsStr::new("info"), good.as_os_str()]);
    assert_eq!(code, 0);
    assert!(stdout.contains("embed.weight  F32  [4, 3]"), "{stdout}");
    assert!(stdout.contains("format = pt"), "{stdout}");
    let (code, stdout, _) = run(&[std::ffi::OsStr::new("validate"), good.as_os_str()]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("valid: "), "{stdout}");
}

#[test]
fn usage_errors_exit_2_with_a_json_document() {
    let (code, stdout, _) = run(&[
        std::ffi::OsStr::new("validate"),
        std::ffi::OsStr::new("--json"),
    ]);
    assert_eq!(code, 2);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(doc["error"]["kind"], "Usage");
    let (code, _, _) = run(&[
        std::ffi::OsStr::new("frobnicate"),
        std::ffi::OsStr::new("x"),
        std::ffi::OsStr::new("--bogus"),
    ]);
    assert_eq!(code, 2);
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut header = String::from("{");
    for i in 0..20_000u64 {
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            r#""t{i}":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#
        );
    }
    header.push('}');
    let p = write(dir.path(), "many.safetensors", &with_header(&header, 0));
    let mut child = crate::exe::command()
        .arg("info")
        .arg(&p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[cfg(unix)]
#[test]
fn paths_need_not_be_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let name = std::ffi::OsStr::from_bytes(b"m\xff.safetensors");
    let p = dir.path().join(name);
    std::fs::write(&p, small_model()).expect("write");
    let (code, doc) = run_json(&["validate"], &p);
    assert_eq!(code, 0);
    assert_eq!(doc["valid"], true);
}

#[test]
fn sharded_info_has_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "model-00001-of-00001.safetensors",
        &small_model(),
    );
    let names = [
        "embed.weight",
        "layers.0.attn.q",
        "layers.0.norm",
        "scale",
        "packed",
        "empty",
    ];
    let map: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| ((*n).to_owned(), "model-00001-of-00001.safetensors".into()))
        .collect();
    let idx = serde_json::json!({"metadata": {"total_size": 84}, "weight_map": map});
    write(
        dir.path(),
        "model.safetensors.index.json",
        idx.to_string().as_bytes(),
    );
    let (code, doc) = run_json(&["info"], dir.path());
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["kind"], "sharded");
    assert_eq!(doc["metadata"]["total_size"], 84);
    assert!(doc["header_size"].is_null());
    let shards = doc["shards"].as_array().expect("shards");
    assert_eq!(shards.len(), 1);
    assert_eq!(shards[0]["metadata"]["format"], "pt");
    assert!(
        doc["tensors"]
            .as_array()
            .expect("t")
            .iter()
            .all(|t| t["shard"] == "model-00001-of-00001.safetensors")
    );
    let (code, doc) = run_json(&["validate"], dir.path());
    assert_eq!(code, 0, "{doc}");
}

/// `stats --moments` is one pass without histograms or quantiles, and
/// `--fail-on` exits 1 naming what it found, 0 when nothing.
#[test]
fn stats_moments_and_fail_on() {
    use crate::fixtures::{RefTensor, reference_file, write};
    let dir = tempfile::tempdir().expect("tempdir");
    let f32s = |v: &[f32]| RefTensor {
        dtype: safetensors::Dtype::F32,
        shape: vec![v.len()],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    let tensors = [
        (
            "a.norm".to_owned(),
            f32s(&[1.0, f32::NAN, f32::INFINITY, 2.0]),
        ),
        ("b.zeros".to_owned(), f32s(&[0.0, -0.0, 0.0])),
        ("c.ok".to_owned(), f32s(&[0.5, -0.25])),
    ];
    let demo = write(
        dir.path(),
        "bad.safetensors",
        &reference_file(&tensors, None),
    );
    let (code, doc) = run_json(
        &["stats", "--moments", "--fail-on", "nan,inf,zero-tensor"],
        &demo,
    );
    assert_eq!(code, 1, "{doc}");
    let f = &doc["summary"]["fail_on"];
    assert_eq!(
        f["checked"],
        serde_json::json!(["nan", "inf", "zero-tensor"])
    );
    assert_eq!(
        f["failed"],
        serde_json::json!(["nan", "inf", "zero-tensor"])
    );
    assert_eq!(f["tensors"], serde_json::json!(["a.norm", "b.zeros"]));
    for t in doc["tensors"].as_array().expect("tensors") {
        assert!(t["histogram"].is_null() && t["quantiles"].is_null(), "{t}");
        assert!(t["count"].is_u64());
    }
    // A checkpoint with neither: exit 0, and the summary says so.
    let plain = write(
        dir.path(),
        "plain.safetensors",
        &crate::fixtures::small_model(),
    );
    let (code, doc) = run_json(&["stats", "--fail-on", "nan,inf"], &plain);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["summary"]["fail_on"]["failed"], serde_json::json!([]));
    // Without --fail-on there is no verdict, and NaN does not fail.
    let (code, doc) = run_json(&["stats", "--moments"], &demo);
    assert_eq!(code, 0);
    assert!(doc["summary"].get("fail_on").is_none());
    let (code, _, err) = run(&[
        std::ffi::OsStr::new("stats"),
        std::ffi::OsStr::new("--fail-on"),
        std::ffi::OsStr::new("nope"),
        demo.as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
}
