//! PICKLE.md §7: hostile torch files, built here, through `info`,
//! `validate`, `stats`, `export` and `resave` with `--json`, each in an
//! empty working folder under a bounded address space: no signal, no
//! panic, one JSON document, nothing written but the requested output.
//! Files torch refuses are refused (exit 2 with an error object, `validate`
//! 1 or 2, no output left); files torch loads (deep nesting, memo bombs,
//! deflated entries, odd entry names, big-endian storages) are refused
//! cleanly or read right.

use std::path::Path;

use super::build::{T, f32s, int, legacy, legacy_keys, legacy_object, run, state_dict, zip_of};

/// The good tensor every file holds: `w`, 2x3 F32 `0..6`, storage `0`.
fn good() -> T<'static> {
    T::f32("0", &[2, 3])
}

/// A torch zip of `{'w': t}` (plus `extra` pairs) over storage `0` = `data`.
fn zip_with(t: &T<'_>, data: Vec<u8>) -> Vec<u8> {
    super::build::torch_zip(&state_dict(&[("w", t.pickle())]), &[("0", data)])
}

fn good_zip() -> Vec<u8> {
    zip_with(&good(), f32s(6))
}

/// Where `needle` starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle")
}

fn cut(bytes: &[u8], len: usize) -> Vec<u8> {
    bytes[..len].to_vec()
}

/// Runs every verb on `bytes` (written as `name`): each must refuse it.
fn assert_refused(name: &str, bytes: &[u8]) {
    let setup = Setup::new(name, bytes);
    let (work, out) = (&setup.work, &setup.out);
    let path = setup.file.to_str().expect("utf-8");
    for verb in ["info", "stats"] {
        let r = run(work.path(), &[verb, path]);
        assert_eq!(r.code, 2, "{name}: {verb}: {}", r.doc);
        assert_error_object(name, verb, &r.doc);
    }
    let r = run(work.path(), &["validate", path]);
    assert!(r.code == 1 || r.code == 2, "{name}: validate: {}", r.doc);
    assert_eq!(r.doc["valid"], false, "{name}: validate: {}", r.doc);
    let npy = out.path().join("w.npy");
    let st = out.path().join("w.safetensors");
    for (verb, args) in [
        (
            "export",
            vec!["export", path, "w", "-o", npy.to_str().expect("utf-8")],
        ),
        (
            "resave",
            vec!["resave", path, "-o", st.to_str().expect("utf-8")],
        ),
    ] {
        let r = run(work.path(), &args);
        assert_eq!(r.code, 2, "{name}: {verb}: {}", r.doc);
        assert_error_object(name, verb, &r.doc);
    }
    setup.check(name);
    assert_empty(name, out.path());
}

/// Runs every verb on `bytes`, which torch loads: each either refuses it
/// cleanly or reads `w` right.
fn assert_refused_or_read(name: &str, bytes: &[u8]) {
    let setup = Setup::new(name, bytes);
    let (work, out) = (&setup.work, &setup.out);
    let path = setup.file.to_str().expect("utf-8");
    let r = run(work.path(), &["info", path]);
    let read = r.code == 0;
    if read {
        let w = r.doc["tensors"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == "w"))
            .unwrap_or_else(|| panic!("{name}: info lists no w: {}", r.doc));
        assert_eq!(w["shape"], serde_json::json!([2, 3]), "{name}");
        assert_eq!(w["dtype"], "F32", "{name}");
    } else {
        assert_eq!(r.code, 2, "{name}: info: {}", r.doc);
        assert_error_object(name, "info", &r.doc);
    }
    let r = run(work.path(), &["validate", path]);
    assert_eq!(r.doc["valid"], read, "{name}: validate: {}", r.doc);
    assert_eq!(r.code, if read { 0 } else { r.code.max(1) }, "{name}");
    let r = run(work.path(), &["stats", path]);
    if read {
        assert_eq!(r.code, 0, "{name}: stats: {}", r.doc);
        let w = r.doc["tensors"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == "w"))
            .unwrap_or_else(|| panic!("{name}: stats of no w: {}", r.doc));
        assert_eq!((&w["min"], &w["max"]), (&0.0.into(), &5.0.into()), "{name}");
        assert_eq!(w["count"], 6, "{name}");
    } else {
        assert_eq!(r.code, 2, "{name}: stats: {}", r.doc);
    }
    let npy = out.path().join("w.npy");
    let r = run(
        work.path(),
        &["export", path, "w", "-o", npy.to_str().expect("utf-8")],
    );
    if read {
        assert_eq!(r.code, 0, "{name}: export: {}", r.doc);
        let bytes = std::fs::read(&npy).expect("exported");
        assert!(bytes.ends_with(&f32s(6)), "{name}: exported values");
    } else {
        assert_eq!(r.code, 2, "{name}: export: {}", r.doc);
        assert!(!npy.exists(), "{name}: export left {}", npy.display());
    }
    let st = out.path().join("w.safetensors");
    let r = run(
        work.path(),
        &["resave", path, "-o", st.to_str().expect("utf-8")],
    );
    if read {
        assert_eq!(r.code, 0, "{name}: resave: {}", r.doc);
        let bytes = std::fs::read(&st).expect("resaved");
        let s = safetensors::SafeTensors::deserialize(&bytes).expect("official reader");
        assert_eq!(
            s.tensor("w").expect("w").data(),
            f32s(6).as_slice(),
            "{name}"
        );
    } else {
        assert_eq!(r.code, 2, "{name}: resave: {}", r.doc);
        assert!(!st.exists(), "{name}: resave left {}", st.display());
    }
    setup.check(name);
}

/// A file's folders: the one holding it (and nothing else, ever), an empty
/// working folder, an output folder.
struct Setup {
    holder: tempfile::TempDir,
    file: std::path::PathBuf,
    work: tempfile::TempDir,
    out: tempfile::TempDir,
}

impl Setup {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let holder = tempfile::tempdir().expect("tempdir");
        let file = holder.path().join(name);
        std::fs::write(&file, bytes).expect("write");
        Setup {
            holder,
            file,
            work: tempfile::tempdir().expect("work"),
            out: tempfile::tempdir().expect("out"),
        }
    }

    /// The file is still all its folder holds; the working folder is empty.
    fn check(&self, name: &str) {
        let beside: Vec<_> = std::fs::read_dir(self.holder.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            beside.len(),
            1,
            "{name}: written beside the file: {beside:?}"
        );
        assert_empty(name, self.work.path());
    }
}

fn assert_error_object(name: &str, verb: &str, doc: &serde_json::Value) {
    let e = &doc["error"];
    assert!(
        e["kind"].is_string() && e["message"].is_string() && e["path"].is_string(),
        "{name}: {verb}: not an error object {{kind, message, path}}: {doc}"
    );
}

fn assert_empty(name: &str, dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(
        left.is_empty(),
        "{name}: files left in {}: {left:?}",
        dir.display()
    );
}

#[test]
fn truncated_files_are_refused() {
    let zip = good_zip();
    let storage = find(&zip, &f32s(6));
    let pickle = find(&zip, b"\x80\x02}(");
    let directory = zip
        .windows(4)
        .position(|w| w == b"PK\x01\x02")
        .expect("central directory");
    for (name, bytes) in [
        ("cut_in_local_header.pt", cut(&zip, 20)),
        ("cut_in_data_pkl.pt", cut(&zip, pickle + 20)),
        ("cut_in_storage.pt", cut(&zip, storage + 9)),
        ("cut_in_directory.pt", cut(&zip, directory + 30)),
        ("last_10_bytes_missing.pt", cut(&zip, zip.len() - 10)),
    ] {
        assert_refused(name, &bytes);
    }
    let whole = legacy(
        true,
        &legacy_object(&[("w", good())]),
        &legacy_keys(&["0"]),
        &[(6, f32s(6))],
    );
    assert_refused("legacy_cut_in_storage.pt", &cut(&whole, whole.len() - 10));
}

#[test]
fn storages_that_are_missing_or_short_and_views_past_them_are_refused() {
    let view = |offset: i128, size: &[i128], stride: &[i128]| T {
        offset,
        size: size.to_vec(),
        stride: stride.to_vec(),
        ..good()
    };
    let cases = [
        (
            "missing_key.pt",
            zip_with(&T { key: "7", ..good() }, f32s(6)),
        ),
        ("storage_short.pt", zip_with(&good(), f32s(3))),
        (
            "offset_past_end.pt",
            zip_with(&view(4, &[2, 3], &[3, 1]), f32s(6)),
        ),
        (
            "strides_past_end.pt",
            zip_with(&view(0, &[2, 3], &[4, 1]), f32s(6)),
        ),
        (
            "negative_size.pt",
            zip_with(&view(0, &[-1, 3], &[3, 1]), f32s(6)),
        ),
        (
            "negative_stride.pt",
            zip_with(&view(0, &[2, 3], &[3, -1]), f32s(6)),
        ),
        (
            "negative_offset.pt",
            zip_with(&view(-1, &[2, 3], &[3, 1]), f32s(6)),
        ),
        (
            "count_overflows.pt",
            zip_with(&view(0, &[1 << 40, 1 << 40], &[1 << 40, 1]), f32s(6)),
        ),
        (
            "stride_overflows.pt",
            zip_with(&view(0, &[2, 3], &[1 << 62, 1]), f32s(6)),
        ),
        (
            "size_past_64_bits.pt",
            zip_with(&view(0, &[(1 << 64) + 3], &[1]), f32s(6)),
        ),
        (
            "numel_past_64_bits.pt",
            zip_with(
                &T {
                    numel: (1 << 64) + 6,
                    ..good()
                },
                f32s(6),
            ),
        ),
    ];
    for (name, bytes) in cases {
        assert_refused(name, &bytes);
    }
    assert!(int((1 << 64) + 3).len() == 11, "a 9-byte LONG1");
    // A legacy storage whose count says 2^61 elements.
    let huge = legacy(
        true,
        &legacy_object(&[("w", good())]),
        &legacy_keys(&["0"]),
        &[(1 << 61, f32s(6))],
    );
    assert_refused("legacy_count_2_61.pt", &huge);
}

#[test]
fn bytes_that_are_no_pickle_are_refused() {
    let garbage = b"\x80\x02\xff\xfe\x00\x01garbage".to_vec();
    assert_refused("not_a_pickle.bin", &garbage);
    assert_refused(
        "not_a_pickle_in_a_zip.pt",
        &super::build::torch_zip(&garbage, &[("0", f32s(6))]),
    );
    // A pickle that ends before STOP.
    let open = state_dict(&[("w", good().pickle())]);
    assert_refused(
        "pickle_without_stop.pt",
        &super::build::torch_zip(&open[..open.len() - 1], &[("0", f32s(6))]),
    );
}

#[test]
fn deep_nesting_beside_a_tensor_is_refused_or_read() {
    let depth = 100_000;
    let mut list = vec![b']'; depth];
    list.extend(std::iter::repeat_n(b'a', depth - 1));
    let mut tuple = vec![b')'];
    tuple.extend(std::iter::repeat_n(0x85, depth));
    for (name, deep) in [("deep_list.pt", list), ("deep_tuple.pt", tuple)] {
        let pickle = state_dict(&[("w", good().pickle()), ("deep", deep)]);
        assert_refused_or_read(name, &super::build::torch_zip(&pickle, &[("0", f32s(6))]));
    }
}

#[test]
fn memo_and_dup_bombs_are_refused_or_read() {
    // Each level a list of 16 references to the level below: 16^14 paths.
    let mut memo = b"]q\x00".to_vec();
    for _ in 0..14 {
        memo.push(b'(');
        for _ in 0..16 {
            memo.extend_from_slice(b"h\x00");
        }
        memo.extend_from_slice(b"lq\x00");
    }
    let mut dup = vec![b'('; 13];
    dup.push(b']');
    for _ in 0..13 {
        dup.extend(std::iter::repeat_n(b'2', 15));
        dup.push(b'l');
    }
    for (name, bomb) in [("memo_bomb.pt", memo), ("dup_bomb.pt", dup)] {
        assert!(bomb.len() < 1024, "{name}: {} bytes", bomb.len());
        let pickle = state_dict(&[("w", good().pickle()), ("bomb", bomb)]);
        assert_refused_or_read(name, &super::build::torch_zip(&pickle, &[("0", f32s(6))]));
    }
}

#[test]
fn deflated_odd_named_and_big_endian_files_are_refused_or_read() {
    let pickle = state_dict(&[("w", good().pickle())]);
    let deflated = zip_of(
        &[
            ("archive/data.pkl", pickle.clone()),
            ("archive/byteorder", b"little".to_vec()),
            ("archive/data/0", f32s(6)),
        ],
        true,
    );
    assert_refused_or_read("deflated.pt", &deflated);
    let traversal = zip_of(
        &[
            ("archive/data.pkl", pickle.clone()),
            ("archive/data/0", f32s(6)),
            ("archive/../../../escaped.txt", b"never written".to_vec()),
        ],
        false,
    );
    assert_refused_or_read("traversal_entry.pt", &traversal);
    let absolute = zip_of(
        &[
            ("archive/data.pkl", pickle),
            ("archive/data/0", f32s(6)),
            ("/absolute.txt", b"never written".to_vec()),
        ],
        false,
    );
    assert_refused_or_read("absolute_entry.pt", &absolute);
    let key = state_dict(&[(
        "w",
        T {
            key: "../../x",
            ..good()
        }
        .pickle(),
    )]);
    let by_name = zip_of(
        &[("archive/data.pkl", key), ("archive/data/../../x", f32s(6))],
        false,
    );
    assert_refused_or_read("traversal_key.pt", &by_name);
    let big: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_be_bytes()).collect();
    let big_endian = zip_of(
        &[
            ("archive/data.pkl", state_dict(&[("w", good().pickle())])),
            ("archive/byteorder", b"big".to_vec()),
            ("archive/data/0", big),
        ],
        false,
    );
    assert_refused_or_read("big_endian.pt", &big_endian);
}
