//! The diff engine and `tensorscope diff`, on files written in the test.
#![allow(
    clippy::many_single_char_names,
    reason = "a and b are the two sides of every comparison"
)]

use crate::exe::OutputOnceMore as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tensorscope::diff::{DiffOptions, Status, diff};
use tensorscope::dtype::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::format::write::{TensorSource, write_file};
use tensorscope::jobs::{CancelToken, Progress};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn save(
    path: &Path,
    tensors: &[(&str, Dtype, Vec<u64>, Vec<u8>)],
    meta: &[(&str, &str)],
) -> PathBuf {
    let sources: Vec<TensorSource<'_>> = tensors
        .iter()
        .map(|(n, d, s, b)| TensorSource {
            name: (*n).to_owned(),
            dtype: *d,
            shape: s.clone(),
            data: b,
        })
        .collect();
    let m: BTreeMap<String, String> = meta
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    write_file(
        path,
        &sources,
        Some(&m),
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("write");
    path.to_path_buf()
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 + seed as f32) * 0.37).sin() * 3.0)
        .collect()
}

fn run(a: &Path, b: &Path, opts: &DiffOptions) -> tensorscope::diff::DiffReport {
    let a = Checkpoint::open(a).expect("a");
    let b = Checkpoint::open(b).expect("b");
    diff(&a, &b, opts, &CancelToken::new(), &Progress::new()).expect("diff")
}

#[test]
fn identical_files_are_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = vec![
        ("w", Dtype::F32, vec![4, 8], f32s(&values(32, 1))),
        ("b", Dtype::I64, vec![3], vec![7; 24]),
    ];
    let a = save(&dir.path().join("a.safetensors"), &t, &[("format", "pt")]);
    let b = save(&dir.path().join("b.safetensors"), &t, &[("format", "pt")]);
    let r = run(&a, &b, &DiffOptions::default());
    assert!(r.tensors.iter().all(|t| t.status == Status::Identical));
    assert!(r.summary.same);
    assert!(r.only_in_a.is_empty() && r.only_in_b.is_empty() && r.metadata.is_empty());
}

#[test]
fn one_changed_element_is_found_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = values(1000, 2);
    let mut w = v.clone();
    w[417] += 0.25;
    let a = save(
        &dir.path().join("a.safetensors"),
        &[
            ("x", Dtype::F32, vec![1000], f32s(&v)),
            ("y", Dtype::F32, vec![2], f32s(&[1.0, 2.0])),
        ],
        &[],
    );
    let b = save(
        &dir.path().join("b.safetensors"),
        &[
            ("x", Dtype::F32, vec![1000], f32s(&w)),
            ("y", Dtype::F32, vec![2], f32s(&[1.0, 2.0])),
        ],
        &[],
    );
    let r = run(&a, &b, &DiffOptions::default());
    let x = r.tensors.iter().find(|t| t.name == "x").expect("x");
    assert_eq!(x.status, Status::Changed);
    assert_eq!(x.changed_elements, Some(1));
    assert_eq!(x.changed_fraction, Some(0.001));
    assert_eq!(
        x.max_abs_diff,
        Some((f64::from(v[417]) - f64::from(w[417])).abs())
    );
    let y = r.tensors.iter().find(|t| t.name == "y").expect("y");
    assert_eq!(y.status, Status::Identical);
    assert!(!r.summary.same);
    // Within a tolerance the change is not one.
    let tol = run(
        &a,
        &b,
        &DiffOptions {
            atol: 0.3,
            ..DiffOptions::default()
        },
    );
    assert_eq!(
        tol.tensors
            .iter()
            .find(|t| t.name == "x")
            .expect("x")
            .status,
        Status::Equal
    );
}

#[test]
fn signed_zeros_and_nan_payloads_are_equal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = save(
        &dir.path().join("a.safetensors"),
        &[("x", Dtype::F32, vec![3], f32s(&[0.0, f32::NAN, 1.0]))],
        &[],
    );
    let nan2 = f32::from_bits(0x7fc0_0001);
    let b = save(
        &dir.path().join("b.safetensors"),
        &[("x", Dtype::F32, vec![3], f32s(&[-0.0, nan2, 1.0]))],
        &[],
    );
    let r = run(&a, &b, &DiffOptions::default());
    assert_eq!(r.tensors[0].status, Status::Equal);
    let c = save(
        &dir.path().join("c.safetensors"),
        &[("x", Dtype::F32, vec![3], f32s(&[0.0, 5.0, 1.0]))],
        &[],
    );
    let r = run(&a, &c, &DiffOptions::default());
    assert_eq!(r.tensors[0].status, Status::Changed);
    assert_eq!(r.tensors[0].nan_mismatches, Some(1));
    assert_eq!(r.tensors[0].changed_elements, Some(1));
}

#[test]
fn f32_against_its_bf16_conversion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = values(4096, 3);
    let bf: Vec<u8> = v
        .iter()
        .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
        .collect();
    let a = save(
        &dir.path().join("a.safetensors"),
        &[("w", Dtype::F32, vec![64, 64], f32s(&v))],
        &[],
    );
    let b = save(
        &dir.path().join("b.safetensors"),
        &[("w", Dtype::BF16, vec![64, 64], bf)],
        &[],
    );
    let r = run(&a, &b, &DiffOptions::default());
    let t = &r.tensors[0];
    assert_eq!(t.status, Status::DtypeChanged);
    // Round to nearest with 8 significant bits: relative error ≤ 2^-9 per element.
    let rel = t.rel_l2.expect("rel");
    assert!(rel > 0.0 && rel <= 2f64.powi(-9), "{rel}");
    assert!(t.cosine.expect("cos") > 0.9999);
}

#[test]
fn renamed_added_removed_and_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = f32s(&[1.0, 2.0]);
    let a = save(
        &dir.path().join("a.safetensors"),
        &[
            ("model.w", Dtype::F32, vec![2], d.clone()),
            ("model.old", Dtype::F32, vec![2], d.clone()),
            ("s", Dtype::F32, vec![2], d.clone()),
        ],
        &[("format", "pt"), ("step", "1"), ("gone", "x")],
    );
    let b = save(
        &dir.path().join("b.safetensors"),
        &[
            ("w", Dtype::F32, vec![2], d.clone()),
            ("new", Dtype::F32, vec![2], d.clone()),
            ("s", Dtype::F32, vec![1, 2], d.clone()),
        ],
        &[("format", "pt"), ("step", "2"), ("added", "y")],
    );
    let plain = run(&a, &b, &DiffOptions::default());
    assert_eq!(plain.only_in_a, ["model.old", "model.w"]);
    assert_eq!(plain.only_in_b, ["new", "w"]);
    let opts = DiffOptions {
        strip_prefixes: vec!["model.".into()],
        renames: vec![("old".into(), "new".into())],
        ..DiffOptions::default()
    };
    let r = run(&a, &b, &opts);
    assert!(
        r.only_in_a.is_empty() && r.only_in_b.is_empty(),
        "{:?} {:?}",
        r.only_in_a,
        r.only_in_b
    );
    let s = r.tensors.iter().find(|t| t.name == "s").expect("s");
    assert_eq!(s.status, Status::ShapeChanged);
    assert!(
        r.tensors
            .iter()
            .find(|t| t.name == "new")
            .expect("new")
            .name_a
            .as_deref()
            == Some("model.old")
    );
    assert_eq!(r.metadata.added.keys().collect::<Vec<_>>(), ["added"]);
    assert_eq!(r.metadata.removed.keys().collect::<Vec<_>>(), ["gone"]);
    assert_eq!(r.metadata.changed["step"].b, "2");
}

#[test]
fn sharded_against_single_is_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (x, y) = (f32s(&values(10, 4)), f32s(&values(20, 5)));
    let single = save(
        &dir.path().join("single.safetensors"),
        &[
            ("x", Dtype::F32, vec![10], x.clone()),
            ("y", Dtype::F32, vec![20], y.clone()),
        ],
        &[],
    );
    let shards = dir.path().join("sharded");
    std::fs::create_dir_all(&shards).expect("mkdir");
    save(
        &shards.join("model-00001-of-00002.safetensors"),
        &[("x", Dtype::F32, vec![10], x)],
        &[],
    );
    save(
        &shards.join("model-00002-of-00002.safetensors"),
        &[("y", Dtype::F32, vec![20], y)],
        &[],
    );
    std::fs::write(
        shards.join("model.safetensors.index.json"),
        r#"{"metadata":{"total_size":120},"weight_map":{"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"}}"#,
    )
    .expect("index");
    let r = run(&single, &shards, &DiffOptions::default());
    assert_eq!(r.tensors.len(), 2);
    assert!(r.tensors.iter().all(|t| t.status == Status::Identical));
    // The index's metadata (total_size) is a metadata difference.
    assert_eq!(r.metadata.added.keys().collect::<Vec<_>>(), ["total_size"]);
}

#[test]
fn cli_exit_codes_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = save(
        &dir.path().join("a.safetensors"),
        &[("x", Dtype::F32, vec![2], f32s(&[1.0, 2.0]))],
        &[],
    );
    let b = save(
        &dir.path().join("b.safetensors"),
        &[("x", Dtype::F32, vec![2], f32s(&[1.0, 2.5]))],
        &[],
    );
    let same = crate::exe::command()
        .args(["diff".as_ref(), a.as_os_str(), a.as_os_str()])
        .output_once_more()
        .expect("run");
    assert_eq!(same.status.code(), Some(0));
    let out = crate::exe::command()
        .args([
            "diff".as_ref(),
            a.as_os_str(),
            b.as_os_str(),
            "--json".as_ref(),
        ])
        .output_once_more()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for k in ["only_in_a", "only_in_b", "tensors", "metadata"] {
        assert!(doc.get(k).is_some(), "{k}");
    }
    let t = &doc["tensors"][0];
    assert_eq!(t["status"], "changed");
    assert_eq!(t["max_abs_diff"], 0.5);
    assert_eq!(t["changed_elements"], 1);
    for k in [
        "mean_abs_diff",
        "rms_diff",
        "rel_l2",
        "cosine",
        "changed_fraction",
        "nan_mismatches",
    ] {
        assert!(t.get(k).is_some(), "{k}");
    }
    let tol = crate::exe::command()
        .args([
            "diff".as_ref(),
            a.as_os_str(),
            b.as_os_str(),
            "--rtol".as_ref(),
            "0.25".as_ref(),
        ])
        .output_once_more()
        .expect("run");
    assert_eq!(
        tol.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&tol.stdout)
    );
    let missing = dir.path().join("missing.safetensors");
    let bad = crate::exe::command()
        .args([
            "diff".as_ref(),
            a.as_os_str(),
            missing.as_os_str(),
            "--json".as_ref(),
        ])
        .output_once_more()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&bad.stdout).expect("json");
    assert_eq!(doc["error"]["kind"], "Io");
    let only = crate::exe::command()
        .args([
            "diff".as_ref(),
            a.as_os_str(),
            a.as_os_str(),
            "--only-changed".as_ref(),
            "--json".as_ref(),
        ])
        .output_once_more()
        .expect("run");
    let doc: serde_json::Value = serde_json::from_slice(&only.stdout).expect("json");
    assert_eq!(doc["tensors"].as_array().map(Vec::len), Some(0));
}
