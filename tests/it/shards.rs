//! Sharded checkpoints: a `model.safetensors.index.json` over several files.

use std::collections::HashMap;
use std::path::Path;

use safetensors::Dtype as RefDtype;
use tensorscope::format::Checkpoint;

use crate::fixtures::{RefTensor, reference_file, write};

fn shard(names: &[&str]) -> Vec<u8> {
    let tensors: Vec<(String, RefTensor)> = names
        .iter()
        .map(|n| {
            (
                (*n).to_owned(),
                RefTensor {
                    dtype: RefDtype::F32,
                    shape: vec![2],
                    data: vec![0; 8],
                },
            )
        })
        .collect();
    reference_file(
        &tensors,
        Some(HashMap::from([("format".into(), "pt".into())])),
    )
}

fn index(map: &[(&str, &str)], total_size: Option<u64>) -> String {
    let weight_map: serde_json::Map<String, serde_json::Value> = map
        .iter()
        .map(|(t, s)| ((*t).to_owned(), serde_json::Value::String((*s).to_owned())))
        .collect();
    let mut meta = serde_json::Map::new();
    if let Some(n) = total_size {
        meta.insert("total_size".into(), n.into());
    }
    serde_json::json!({"metadata": meta, "weight_map": weight_map}).to_string()
}

const S1: &str = "model-00001-of-00002.safetensors";
const S2: &str = "model-00002-of-00002.safetensors";

fn two_shards(dir: &Path) {
    write(dir, S1, &shard(&["a", "b"]));
    write(dir, S2, &shard(&["c"]));
}

#[test]
fn a_sharded_model_opens_as_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_shards(dir.path());
    let idx = write(
        dir.path(),
        "model.safetensors.index.json",
        index(&[("a", S1), ("b", S1), ("c", S2)], Some(24)).as_bytes(),
    );
    for path in [idx.clone(), dir.path().to_path_buf()] {
        let ck = Checkpoint::open(&path).expect("valid");
        assert!(ck.is_sharded());
        assert_eq!(ck.shards().len(), 2);
        let names: Vec<(&str, &str)> = ck
            .tensors()
            .iter()
            .map(|t| {
                (
                    ck.info(*t).expect("info").name(),
                    ck.shards()[t.shard()].name(),
                )
            })
            .collect();
        assert_eq!(names, [("a", S1), ("b", S1), ("c", S2)]);
        assert!(ck.warnings().is_empty(), "{:?}", ck.warnings());
        assert_eq!(ck.path(), idx);
    }
}

#[test]
fn warnings_for_unlisted_tensors_and_total_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_shards(dir.path());
    let idx = write(
        dir.path(),
        "model.safetensors.index.json",
        index(&[("a", S1), ("c", S2)], Some(999)).as_bytes(),
    );
    let ck = Checkpoint::open(&idx).expect("warnings only");
    let kinds: Vec<&str> = ck.warnings().iter().map(|w| w.kind).collect();
    assert!(kinds.contains(&"NotInWeightMap"), "{kinds:?}");
    assert!(kinds.contains(&"TotalSizeMismatch"), "{kinds:?}");
    let w = ck
        .warnings()
        .iter()
        .find(|w| w.kind == "NotInWeightMap")
        .expect("w");
    assert_eq!(w.tensor.as_deref(), Some("b"));
    assert!(
        ck.warnings()
            .iter()
            .any(|w| w.message.contains("999") && w.message.contains("24"))
    );
}

#[test]
fn errors_name_the_shard_and_tensor() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_shards(dir.path());
    let open = |json: String| {
        let p = write(dir.path(), "model.safetensors.index.json", json.as_bytes());
        Checkpoint::open(&p).expect_err("invalid")
    };
    let e = open(index(&[("a", S1), ("z", S2)], None));
    assert_eq!(e.kind(), "IndexMismatch");
    assert_eq!(e.tensor(), Some("z"));
    assert_eq!(e.shard(), Some(S2));
    let e = open(index(&[("a", S2), ("b", S1)], None));
    assert_eq!(e.kind(), "IndexMismatch");
    assert!(e.message().contains(S1), "{}", e.message());
    let e = open(index(&[("a", "model-00009-of-00009.safetensors")], None));
    assert_eq!(e.kind(), "ShardMissing");
    for bad in ["../model.safetensors", "/etc/passwd.safetensors", "x.bin"] {
        let e = open(index(&[("a", bad)], None));
        assert_eq!(e.kind(), "InvalidIndex", "{bad}");
        assert!(e.is_verdict());
    }
    let e = open("{\"weight_map\": [1]}".into());
    assert_eq!(e.kind(), "InvalidIndex");
    let e = open("not json".into());
    assert_eq!(e.kind(), "InvalidIndex");
    write(dir.path(), "broken.safetensors", b"\x02\0\0\0\0\0\0\0{x");
    let e = open(index(&[("a", "broken.safetensors")], None));
    assert_eq!(e.kind(), "ShardInvalid");
    assert_eq!(
        e.format_error().map(tensorscope::FormatError::kind),
        Some("InvalidHeaderDeserialization")
    );
}

#[cfg(unix)]
#[test]
fn hugging_face_snapshot_symlinks_into_blobs_open() {
    // models--x/snapshots/<rev>/model-0000N.safetensors -> ../../blobs/<sha>
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("models--org--name");
    let blobs = root.join("blobs");
    let snap = root.join("snapshots").join("abc123");
    std::fs::create_dir_all(&blobs).expect("blobs");
    std::fs::create_dir_all(&snap).expect("snapshot");
    write(&blobs, "sha1", &shard(&["a", "b"]));
    write(&blobs, "sha2", &shard(&["c"]));
    write(
        &blobs,
        "sha3",
        index(&[("a", S1), ("b", S1), ("c", S2)], Some(24)).as_bytes(),
    );
    std::os::unix::fs::symlink("../../blobs/sha1", snap.join(S1)).expect("link");
    std::os::unix::fs::symlink("../../blobs/sha2", snap.join(S2)).expect("link");
    std::os::unix::fs::symlink(
        "../../blobs/sha3",
        snap.join("model.safetensors.index.json"),
    )
    .expect("link");
    let ck = Checkpoint::open(&snap).expect("snapshot opens");
    assert_eq!(ck.tensors().len(), 3);
}
