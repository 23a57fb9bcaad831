//! The `stats` verb: its JSON document, tensor selection, exit codes, and
//! a sharded model.

use crate::exe::OutputOnceMore as _;
use std::path::Path;

use super::f32_bytes;
use crate::fixtures::{RefTensor, reference_file, write};

fn run_cli(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value, String) {
    let out = crate::exe::command()
        .args(args)
        .output_once_more()
        .expect("run tensorscope");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn cli_json(path: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["stats".as_ref(), path.as_os_str(), "--json".as_ref()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    run_cli(&args)
}

#[test]
fn cli_stats_json_and_exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "m.safetensors", &crate::fixtures::small_model());
    let (code, doc, stderr) = cli_json(&path, &[]);
    assert_eq!(code, 0, "{stderr}");
    let tensors = doc["tensors"].as_array().expect("tensors");
    assert_eq!(tensors.len(), 6);
    let t = &tensors[0];
    for key in [
        "name",
        "dtype",
        "count",
        "nan",
        "pos_inf",
        "neg_inf",
        "zeros",
        "subnormals",
        "min",
        "max",
        "mean",
        "std",
        "abs_mean",
        "l2_norm",
        "outliers_6sigma",
        "max_abs_over_std",
        "quantiles",
        "histogram",
        "log2_histogram",
    ] {
        assert!(t.get(key).is_some(), "{key} missing: {t}");
    }
    for key in [
        "p0_1", "p1", "p5", "p25", "p50", "p75", "p95", "p99", "p99_9",
    ] {
        assert!(t["quantiles"].get(key).is_some(), "{key}");
    }
    for key in ["edges", "counts"] {
        assert!(t["histogram"][key].is_array());
    }
    for key in ["exponents", "counts", "zeros", "subnormals"] {
        assert!(t["log2_histogram"].get(key).is_some(), "{key}");
    }
    let packed = tensors.iter().find(|t| t["name"] == "packed").expect("F4");
    assert!(packed["code_histogram"]["values"].is_array());
    let empty = tensors
        .iter()
        .find(|t| t["name"] == "empty")
        .expect("empty");
    assert_eq!(empty["count"], 0);
    assert!(empty["min"].is_null());
    for key in [
        "tensor_count",
        "nonfinite_tensors",
        "all_zero_tensors",
        "max_abs",
        "max_abs_tensor",
    ] {
        assert!(doc["summary"].get(key).is_some(), "{key}");
    }

    // Selection: exact names and a regex.
    let (code, doc, _) = cli_json(
        &path,
        &[
            "--tensor",
            "scale",
            "--tensor-regex",
            "^layers\\.",
            "--bins",
            "8",
        ],
    );
    assert_eq!(code, 0);
    let names: Vec<&str> = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    // File (offset) order: the writer puts F64 first.
    assert_eq!(names, ["scale", "layers.0.attn.q", "layers.0.norm"]);
    assert!(
        doc["tensors"][0]["histogram"]["counts"]
            .as_array()
            .expect("counts")
            .len()
            <= 8
    );

    // An unknown tensor, a bad regex, an invalid file, a missing file: 2.
    let (code, doc, _) = cli_json(&path, &["--tensor", "nope"]);
    assert_eq!(
        (code, doc["error"]["kind"].as_str()),
        (2, Some("UnknownTensor"))
    );
    let (code, doc, _) = cli_json(&path, &["--tensor-regex", "("]);
    assert_eq!((code, doc["error"]["kind"].as_str()), (2, Some("Usage")));
    let bad = write(
        dir.path(),
        "bad.safetensors",
        &crate::fixtures::with_header(
            r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
            4,
        ),
    );
    let (code, doc, _) = cli_json(&bad, &[]);
    assert_eq!(
        (code, doc["error"]["kind"].as_str()),
        (2, Some("TensorInvalidInfo"))
    );
    let (code, doc, _) = cli_json(&dir.path().join("missing.safetensors"), &[]);
    assert_eq!((code, doc["error"]["kind"].as_str()), (2, Some("Io")));
    let (code, _, _) = run_cli(&[
        "stats".as_ref(),
        path.as_os_str(),
        "--bins".as_ref(),
        "0".as_ref(),
    ]);
    assert_eq!(code, 2);

    // Human output ends with the summary.
    let (code, _, _) = run_cli(&["stats".as_ref(), path.as_os_str()]);
    assert_eq!(code, 0);
}

#[test]
fn cli_stats_on_a_sharded_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shard = |name: &str, value: f32| {
        reference_file(
            &[(
                name.to_owned(),
                RefTensor {
                    dtype: safetensors::Dtype::F32,
                    shape: vec![2],
                    data: f32_bytes([value, f32::NAN]),
                },
            )],
            None,
        )
    };
    let s1 = "model-00001-of-00002.safetensors";
    let s2 = "model-00002-of-00002.safetensors";
    write(dir.path(), s1, &shard("a", 1.0));
    write(dir.path(), s2, &shard("b", -7.0));
    let index =
        serde_json::json!({"metadata": {"total_size": 16}, "weight_map": {"a": s1, "b": s2}});
    write(
        dir.path(),
        "model.safetensors.index.json",
        index.to_string().as_bytes(),
    );
    let (code, doc, stderr) = cli_json(dir.path(), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(doc["tensors"][1]["shard"], s2);
    assert_eq!(doc["summary"]["max_abs"], 7.0);
    assert_eq!(doc["summary"]["max_abs_tensor"], "b");
    assert_eq!(
        doc["summary"]["nonfinite_tensors"],
        serde_json::json!(["a", "b"])
    );
}
