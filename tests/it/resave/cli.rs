//! The `resave` verb: its JSON report, and its errors as one JSON document
//! with exit code 2.

use super::{official, source, tricky_f32};
use crate::exe::OutputOnceMore as _;

fn cli(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value, String) {
    let out = crate::exe::command()
        .args(args)
        .output_once_more()
        .expect("run tensorscope");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("one JSON document ({e}): {stdout:?} / {stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

#[test]
fn the_resave_verb_reports_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt"), ("old", "1")]);
    let out = dir.path().join("out.safetensors");
    let os = |s: &str| std::ffi::OsString::from(s);
    let flags: Vec<std::ffi::OsString> = vec![
        os("resave"),
        src.clone().into_os_string(),
        os("-o"),
        out.clone().into_os_string(),
        os("--keep"),
        os("^(embed|mask|layers)"),
        os("--drop"),
        os("norm"),
        os("--rename"),
        os("mask=attention_mask"),
        os("--meta"),
        os("author=me"),
        os("--del-meta"),
        os("old"),
        os("--dtype"),
        os("F32=F8_E4M3"),
        os("--overflow"),
        os("nan"),
        os("--json"),
    ];
    let argv: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsString::as_os_str).collect();
    let (code, doc, stderr) = cli(&argv);
    assert_eq!(code, 0, "{doc} {stderr}");
    for key in [
        "path",
        "output",
        "files",
        "index",
        "tensor_count",
        "data_bytes",
        "bytes_written",
        "tensors",
        "conversions",
        "conversion_totals",
        "metadata",
        "warnings",
    ] {
        assert!(doc.get(key).is_some(), "{key} missing: {doc}");
    }
    assert_eq!(doc["tensor_count"], 4);
    assert_eq!(
        doc["metadata"],
        serde_json::json!({"format": "pt", "author": "me"})
    );
    assert_eq!(
        doc["files"][0]["file_size"],
        std::fs::metadata(&out).expect("out").len()
    );
    let conv = doc["conversions"].as_array().expect("array");
    assert_eq!(conv.len(), 2);
    assert_eq!(conv[0]["from"], "F32");
    assert_eq!(conv[0]["to"], "F8_E4M3");
    for key in [
        "elements",
        "saturated",
        "overflow_nan",
        "overflow_inf",
        "underflow_zero",
        "nan",
    ] {
        assert!(conv[0].get(key).is_some(), "{key}");
    }
    // Every non-NaN value above 464 in magnitude overflows E4M3: NaN with
    // --overflow nan.
    let tricky = tricky_f32();
    let over = tricky
        .iter()
        .chain(&tricky[..16])
        .filter(|v| v.abs() > 464.0)
        .count();
    assert_eq!(doc["conversion_totals"]["overflow_nan"], over as u64);
    assert_eq!(doc["conversion_totals"]["nan"], 2);
    let renamed = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .find(|t| t["source_name"] == "mask")
        .expect("mask");
    assert_eq!(renamed["name"], "attention_mask");
    let (_, back) = official(&std::fs::read(&out).expect("out"));
    assert!(back.contains_key("attention_mask"));

    // Errors: one JSON document, exit 2.
    let bad: Vec<std::ffi::OsString> = vec![
        os("resave"),
        src.clone().into_os_string(),
        os("-o"),
        src.clone().into_os_string(),
        os("--json"),
    ];
    let argv: Vec<&std::ffi::OsStr> = bad.iter().map(std::ffi::OsString::as_os_str).collect();
    let (code, doc, _) = cli(&argv);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "WouldOverwriteSource");
    let bad: Vec<std::ffi::OsString> = vec![
        os("resave"),
        src.into_os_string(),
        os("-o"),
        dir.path().join("x").into_os_string(),
        os("--dtype"),
        os("F32"),
        os("--json"),
    ];
    let argv: Vec<&std::ffi::OsStr> = bad.iter().map(std::ffi::OsString::as_os_str).collect();
    let (code, doc, _) = cli(&argv);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "Usage");
}

/// A valid checkpoint of metadata only is written as it is, without filters.
#[test]
fn a_checkpoint_of_metadata_only_is_resaved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = crate::fixtures::write(
        dir.path(),
        "meta.safetensors",
        &crate::fixtures::with_header(r#"{"__metadata__":{"format":"pt","k":"v"}}      "#, 0),
    );
    let out = dir.path().join("out.safetensors");
    let argv = [
        std::ffi::OsStr::new("resave"),
        src.as_os_str(),
        std::ffi::OsStr::new("-o"),
        out.as_os_str(),
        std::ffi::OsStr::new("--json"),
    ];
    let (code, doc, stderr) = cli(&argv);
    assert_eq!(code, 0, "{doc} {stderr}");
    let bytes = std::fs::read(&out).expect("written");
    let header = tensorscope::format::parse(&bytes).expect("valid");
    assert!(header.tensors().is_empty());
    assert_eq!(
        header
            .metadata()
            .and_then(|m| m.get("k"))
            .map(String::as_str),
        Some("v")
    );
    // A filter that leaves nothing of a checkpoint with tensors stays an error.
    let src = super::source(dir.path(), &[("format", "pt")]);
    let argv = [
        std::ffi::OsStr::new("resave"),
        src.as_os_str(),
        std::ffi::OsStr::new("-o"),
        out.as_os_str(),
        std::ffi::OsStr::new("--keep"),
        std::ffi::OsStr::new("^nothing$"),
        std::ffi::OsStr::new("--json"),
    ];
    let (code, doc, _) = cli(&argv);
    assert_eq!(
        (code, doc["error"]["kind"].as_str()),
        (2, Some("NothingSelected"))
    );
}
