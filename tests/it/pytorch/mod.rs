//! `torch.save` zips through the command line, built here byte by byte
//! (protocol 2, as torch writes): tensors with views and tied weights read
//! by every verb; an unsafe pickle reported by `info` and `validate` and
//! refused by the readers, with nothing executed.

pub(crate) mod build;
mod fixtures;
mod hostile;
mod payloads;

use std::path::Path;

use build::{T, legacy, su, torch_zip};
use serde_json::Value;

/// `_rebuild_tensor_v2` of an F32 view of storage `key`.
fn tensor(key: &str, numel: u8, offset: u8, size: &[u8], stride: &[u8]) -> Vec<u8> {
    let wide = |v: &[u8]| v.iter().map(|&x| i128::from(x)).collect();
    T {
        key,
        class: "FloatStorage",
        numel: numel.into(),
        offset: offset.into(),
        size: wide(size),
        stride: wide(stride),
    }
    .pickle()
}

fn run(cwd: &Path, args: &[&str]) -> (i32, Value) {
    let r = build::run(cwd, args);
    (r.code, r.doc)
}

#[test]
fn a_torch_zip_is_read_by_every_verb() {
    let dir = tempfile::tempdir().expect("tempdir");
    // {'a': 2x3 F32 0..5, 'b': its column 1 (a view), 'c': 'a' (tied)}.
    let pickle = [
        &b"\x80\x02ccollections\nOrderedDict\n)R("[..],
        &su("a"),
        &tensor("0", 6, 0, &[2, 3], &[3, 1]),
        b"q\x07",
        &su("b"),
        &tensor("0", 6, 1, &[2], &[3]),
        &su("c"),
        b"h\x07u.",
    ]
    .concat();
    let values: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let file = dir.path().join("pytorch_model.bin");
    std::fs::write(&file, torch_zip(&pickle, &[("0", values)])).expect("write");
    let path = file.to_str().expect("utf-8");
    let (code, info) = run(dir.path(), &["info", path]);
    assert_eq!(code, 0, "{info}");
    assert_eq!(info["format"], "pytorch");
    assert_eq!(info["pickle"]["unsafe_globals"], serde_json::json!([]));
    assert_eq!(
        info["pickle"]["globals"],
        serde_json::json!([
            "collections.OrderedDict",
            "torch.FloatStorage",
            "torch._utils._rebuild_tensor_v2"
        ])
    );
    let tensors = info["tensors"].as_array().expect("tensors");
    let names: Vec<&str> = tensors.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(tensors[1]["strides"], serde_json::json!([3]));
    assert_eq!(tensors[0]["storage"], tensors[2]["storage"]);
    let (code, verdict) = run(dir.path(), &["validate", path]);
    assert_eq!(
        (code, &verdict["valid"]),
        (0, &Value::Bool(true)),
        "{verdict}"
    );
    let (code, stats) = run(dir.path(), &["stats", path]);
    assert_eq!(code, 0, "{stats}");
    let b = &stats["tensors"][1];
    assert_eq!(
        (&b["name"], &b["min"], &b["max"]),
        (&"b".into(), &1.0.into(), &4.0.into())
    );
    // Resaved: tied weights under both names; diff finds it identical.
    let out = dir.path().join("model.safetensors");
    let (code, r) = run(
        dir.path(),
        &["resave", path, "-o", out.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{r}");
    let bytes = std::fs::read(&out).expect("resaved");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("official reader");
    let col: Vec<u8> = [1.0f32, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(st.tensor("b").expect("b").data(), col.as_slice());
    assert_eq!(
        st.tensor("c").expect("c").data(),
        st.tensor("a").expect("a").data()
    );
    let (code, diffed) = run(dir.path(), &["diff", path, out.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{diffed}");
}

#[test]
fn an_unsafe_pickle_is_reported_and_never_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("work");
    let evil = [
        &b"\x80\x02cposix\nsystem\n"[..],
        &su("touch PWNED"),
        b"\x85R.",
    ]
    .concat();
    let file = dir.path().join("weights.pt");
    std::fs::write(&file, build::zip_of(&[("m/data.pkl", evil)], false)).expect("write");
    let path = file.to_str().expect("utf-8");
    let (code, info) = run(&work, &["info", path]);
    assert!(code == 0 || code == 1, "{info}");
    assert_eq!(
        info["pickle"]["unsafe_globals"],
        serde_json::json!(["posix.system"])
    );
    let (code, verdict) = run(&work, &["validate", path]);
    assert_eq!(code, 1, "{verdict}");
    assert_eq!(verdict["valid"], false);
    assert_eq!(verdict["error"]["kind"], "UnsafePickle");
    assert_eq!(
        verdict["error"]["globals"],
        serde_json::json!(["posix.system"])
    );
    for args in [
        vec!["stats", path],
        vec!["export", path, "x", "-o", "x.npy"],
        vec!["resave", path, "-o", "x.safetensors"],
        vec!["diff", path, path],
    ] {
        let (code, doc) = run(&work, &args);
        assert_eq!(code, 2, "{args:?}: {doc}");
        assert_eq!(doc["error"]["kind"], "UnsafePickle", "{args:?}");
    }
    let left: Vec<_> = std::fs::read_dir(&work).expect("list").collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `{'a': 2x3 F32, 'b': its column 1}` with the legacy six-field ids.
fn legacy_object() -> Vec<u8> {
    let column = T {
        offset: 1,
        size: vec![2],
        stride: vec![3],
        ..T::f32("0", &[2, 3])
    };
    build::legacy_object(&[("a", T::f32("0", &[2, 3])), ("b", column)])
}

#[test]
fn a_legacy_torch_file_is_read_in_both_byte_orders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = build::legacy_keys(&["0"]);
    let le: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let be: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_be_bytes()).collect();
    for (name, little, data) in [("le.pt", true, le), ("be.pt", false, be)] {
        let file = dir.path().join(name);
        std::fs::write(&file, legacy(little, &legacy_object(), &keys, &[(6, data)]))
            .expect("write");
        let path = file.to_str().expect("utf-8");
        let (code, info) = run(dir.path(), &["info", path]);
        assert_eq!(code, 0, "{name}: {info}");
        assert_eq!(info["format"], "pytorch");
        assert_eq!(info["tensors"][1]["shape"], serde_json::json!([2]));
        let (code, stats) = run(dir.path(), &["stats", path]);
        assert_eq!(code, 0, "{name}: {stats}");
        let column = &stats["tensors"][1];
        assert_eq!(
            (&column["min"], &column["max"]),
            (&1.0.into(), &4.0.into()),
            "{name}: {stats}"
        );
        let out = dir.path().join(format!("{name}.safetensors"));
        let out_text = out.to_str().expect("utf-8");
        let (code, resaved) = run(dir.path(), &["resave", path, "-o", out_text]);
        assert_eq!(code, 0, "{name}: {resaved}");
        let (code, diffed) = run(dir.path(), &["diff", path, out_text]);
        assert_eq!(code, 0, "{name}: {diffed}");
    }
}

#[test]
fn a_legacy_file_hides_nothing_and_states_no_size_it_cannot_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The payload in the storage-key list, after a clean object.
    let evil_keys = [&b"\x80\x02](cposix\nsystem\n"[..], &su("id"), b"\x85Re."].concat();
    let file = dir.path().join("evil.pt");
    std::fs::write(&file, legacy(true, &legacy_object(), &evil_keys, &[])).expect("write");
    let path = file.to_str().expect("utf-8");
    let (code, verdict) = run(dir.path(), &["validate", path]);
    assert_eq!(code, 1, "{verdict}");
    assert_eq!(
        verdict["error"]["globals"],
        serde_json::json!(["posix.system"])
    );
    // A storage whose count says 2^61 elements.
    let keys = build::legacy_keys(&["0"]);
    let file = dir.path().join("huge.pt");
    std::fs::write(
        &file,
        legacy(true, &legacy_object(), &keys, &[(1 << 61, vec![0; 24])]),
    )
    .expect("write");
    let path = file.to_str().expect("utf-8");
    for verb in ["info", "stats"] {
        let (code, doc) = run(dir.path(), &[verb, path]);
        assert_eq!(code, 2, "{verb}: {doc}");
        assert_eq!(doc["error"]["kind"], "ViewOutOfBounds", "{doc}");
    }
}
