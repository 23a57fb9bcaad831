//! Hostile inputs: no panic, no unbounded allocation, no hang.

use crate::exe::OutputOnceMore as _;
use std::fmt::Write as _;

use tensorscope::format::{Checkpoint, parse};

use crate::fixtures::{one_tensor, with_header, write};
use crate::oracle::assert_same_verdict;

#[test]
fn header_length_u64_max_and_near_the_limit() {
    for n in [u64::MAX, u64::MAX - 7, 1 << 63, 100_000_000, 100_000_001] {
        let mut bytes = n.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        assert_same_verdict(&bytes);
    }
}

#[test]
fn a_100_mb_header_is_parsed() {
    // The largest header the format allows: `{}` padded with spaces.
    let mut header = String::from("{}");
    header.push_str(&" ".repeat(100_000_000 - 2));
    let bytes = with_header(&header, 0);
    let h = parse(&bytes).expect("valid");
    assert_eq!(h.header_size(), 100_000_000);
    assert_same_verdict(&bytes);
}

#[test]
fn a_hundred_thousand_tensors() {
    let mut header = String::from("{");
    for i in 0..100_000u64 {
        if i > 0 {
            header.push(',');
        }
        let _ = write!(
            header,
            r#""layers.{i}.w":{{"dtype":"F16","shape":[2],"data_offsets":[{},{}]}}"#,
            i * 4,
            i * 4 + 4
        );
    }
    header.push('}');
    let bytes = with_header(&header, 400_000);
    let h = parse(&bytes).expect("valid");
    assert_eq!(h.tensors().len(), 100_000);
    assert_eq!(h.tensors()[99_999].data_offsets(), [399_996, 400_000]);
}

#[test]
fn a_one_megabyte_name() {
    let name = "n".repeat(1 << 20);
    let header = format!(r#"{{"{name}":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#);
    let bytes = with_header(&header, 1);
    let h = parse(&bytes).expect("valid");
    assert_eq!(h.tensors()[0].name().len(), 1 << 20);
    assert_same_verdict(&bytes);
}

#[test]
fn offsets_and_shapes_near_u64_max() {
    let max = u64::MAX;
    let cases = [
        one_tensor("U8", &[max], [0, max]),
        one_tensor("U8", &[1], [max, max]),
        one_tensor("F64", &[max / 64 + 1], [0, max]),
        one_tensor("F32", &[max, max], [0, 0]),
        one_tensor("F32", &[0, max, max], [0, 0]),
        one_tensor("BOOL", &[max / 2, 2], [0, max - 1]),
        format!(
            r#"{{"a":{{"dtype":"U8","shape":[{}],"data_offsets":[0,{}]}},"b":{{"dtype":"U8","shape":[{}],"data_offsets":[{},{max}]}}}}"#,
            max - 10,
            max - 10,
            10,
            max - 10
        ),
    ];
    for h in cases {
        let bytes = with_header(&h, 3);
        let _ = parse(&bytes);
        assert_same_verdict(&bytes);
    }
}

#[test]
fn scalars_and_zero_size_tensors_are_ordinary() {
    let h = r#"{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"z0":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"z1":{"dtype":"F64","shape":[3,0,2],"data_offsets":[4,4]},"b":{"dtype":"U8","shape":[1],"data_offsets":[4,5]},"z2":{"dtype":"U8","shape":[0],"data_offsets":[5,5]}}"#;
    let bytes = with_header(h, 5);
    let parsed = parse(&bytes).expect("valid");
    let names: Vec<&str> = parsed
        .tensors()
        .iter()
        .map(tensorscope::TensorInfo::name)
        .collect();
    assert_eq!(names, ["s", "z0", "z1", "b", "z2"]);
    assert_eq!(parsed.tensors()[0].numel(), 1);
    assert_eq!(parsed.tensors()[1].numel(), 0);
    assert_same_verdict(&bytes);
    // A zero-size tensor off a boundary is an error.
    let bad = r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"z":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}}"#;
    assert_same_verdict(&with_header(bad, 2));
    assert!(parse(&with_header(bad, 2)).is_err());
}

#[test]
fn tied_offsets_are_deterministic() {
    // Two tensors share [0, 4]: the reference's verdict kind varies; ours
    // breaks the tie by name.
    let h = r#"{"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
    let bytes = with_header(h, 4);
    let first = parse(&bytes).expect_err("overlap");
    for _ in 0..10 {
        assert_eq!(parse(&bytes).expect_err("overlap"), first);
    }
    assert_eq!(first.tensor(), Some("b"));
    assert_same_verdict(&bytes);
}

#[test]
fn a_sparse_ten_gigabyte_file_opens_without_reading_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let size: u64 = 10 * 1000 * 1000 * 1000;
    let header = one_tensor("U8", &[size], [0, size]);
    let path = write(dir.path(), "big.safetensors", &with_header(&header, 0));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(8 + header.len() as u64 + size)
        .expect("sparse file");
    drop(f);
    let ck = Checkpoint::open(&path).expect("valid");
    assert_eq!(ck.data_bytes(), size);
    let t = ck.tensors()[0];
    // The view is a slice of the mapping, not a copy.
    let view = ck.bytes(t);
    assert_eq!(view.len() as u64, size);
    let map_start = ck.shards()[0]
        .file()
        .tensor_bytes(ck.info(t).expect("info"))
        .as_ptr();
    assert_eq!(view.as_ptr(), map_start);
}

#[test]
fn files_that_are_not_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Checkpoint::open(&dir.path().join("missing.safetensors")).expect_err("missing");
    assert_eq!(e.kind(), "Io");
    assert!(!e.is_verdict());
    let e = Checkpoint::open(dir.path()).expect_err("empty folder");
    assert_eq!(e.kind(), "Io");
    let empty = write(dir.path(), "empty.safetensors", b"");
    let e = Checkpoint::open(&empty).expect_err("empty file");
    assert_eq!(e.kind(), "HeaderTooSmall");
}

/// A repeated tensor name: the reference keeps the last entry, so a tensor
/// can vanish from a valid file, or a file fail over a gap the reader of
/// the header does not see. Both say which name, and both entries.
#[test]
fn repeated_tensor_names_are_told_with_both_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Valid: the second "a" replaces the first.
    let valid = r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
    let bytes = with_header(valid, 4);
    assert_same_verdict(&bytes);
    let p = write(dir.path(), "valid.safetensors", &bytes);
    let ck = Checkpoint::open(&p).expect("valid");
    let w = ck
        .warnings()
        .iter()
        .find(|w| w.kind == "DuplicateTensor")
        .expect("a warning");
    assert_eq!(w.tensor.as_deref(), Some("a"));
    assert!(
        w.message.contains("U8 [4], bytes 0..4") && w.message.contains("F32 [1], bytes 0..4"),
        "{}",
        w.message
    );
    // Invalid: keeping the last "a" leaves a gap where the first one was.
    let gap = r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}"#;
    let bytes = with_header(gap, 12);
    assert_same_verdict(&bytes);
    let p = write(dir.path(), "gap.safetensors", &bytes);
    let e = Checkpoint::open(&p).expect_err("a gap");
    assert_eq!(e.kind(), "InvalidOffset");
    assert_eq!(e.repeated().len(), 1);
    let message = e.message();
    assert!(
        message.contains("note:")
            && message.contains("bytes 8..12")
            && message.contains("bytes 0..4"),
        "{message}"
    );
    // The CLI says so too.
    let out = crate::exe::command()
        .arg("validate")
        .arg(&p)
        .arg("--json")
        .output_once_more()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("appears 2 times")),
        "{doc}"
    );
}

/// A FIFO, a device or a folder where a file is expected is refused at
/// once, never waited on (a FIFO's open blocks for a writer) nor read
/// without end (`/dev/zero`): the checkpoint file, a shard index, a config.
#[test]
fn fifos_and_devices_are_refused_not_waited_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("m.safetensors");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    let zero_index = dir.path().join("model.safetensors.index.json");
    std::os::unix::fs::symlink("/dev/zero", &zero_index).expect("symlink");
    let zero_file = dir.path().join("z.safetensors");
    std::os::unix::fs::symlink("/dev/zero", &zero_file).expect("symlink");
    let mut paths = vec![zero_index, zero_file];
    if made {
        paths.push(fifo);
    }
    for path in paths {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::Builder::new()
            .name("open-special-file".into())
            .spawn(move || {
                let _ = tx.send(Checkpoint::open(&p).map(|_| ()).map_err(|e| e.to_string()));
            })
            .expect("thread");
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{}: opening it hangs", path.display()));
        let e = got.expect_err("refused");
        assert!(e.contains("not a regular file"), "{}: {e}", path.display());
    }
    // The folder itself opens its index: refused the same way.
    let e = Checkpoint::open(dir.path())
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
}
