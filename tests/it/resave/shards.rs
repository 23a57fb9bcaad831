//! Sharded outputs and sharded sources: shards and an index as the
//! reference layout, a sharded model re-saved to one file or new shards.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use tensorscope::Dtype;
use tensorscope::format::{Checkpoint, INDEX_FILE_NAME};
use tensorscope::resave::ResaveOptions;

use super::{
    assert_reference_layout, listing, model, official, ours, run, source, two_shard_source,
};

fn index_of(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(INDEX_FILE_NAME)).expect("index")).expect("json")
}

#[test]
fn resharding_writes_shards_and_an_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("sharded");
    let opts = ResaveOptions {
        max_shard_bytes: Some(100),
        ..ResaveOptions::default()
    };
    let report = run(&ck, &out, &opts).expect("resave");
    let files = listing(&out);
    let m = report.files.len();
    assert!(m >= 3, "{files:?}");
    let mut expected_files: Vec<String> = (1..=m)
        .map(|i| format!("model-{i:05}-of-{m:05}.safetensors"))
        .collect();
    expected_files.push(INDEX_FILE_NAME.into());
    expected_files.sort();
    assert_eq!(files, expected_files);
    let index = index_of(&out);
    let source_total: u64 = model().iter().map(|(_, t)| t.data.len() as u64).sum();
    assert_eq!(index["metadata"]["total_size"], source_total);
    let weight_map = index["weight_map"].as_object().expect("weight_map");
    assert_eq!(weight_map.len(), model().len());
    let mut all = BTreeMap::new();
    for name in expected_files
        .iter()
        .filter(|n| n.ends_with(".safetensors"))
    {
        let path = out.join(name);
        let bytes = std::fs::read(&path).expect("shard");
        assert_reference_layout(&bytes);
        let (meta, tensors) = official(&bytes);
        assert_eq!(meta, Some(HashMap::from([("format".into(), "pt".into())])));
        let data: u64 = tensors.values().map(|t| t.data.len() as u64).sum();
        assert!(data <= 100 || tensors.len() == 1, "{name}: {data} bytes");
        for (tensor, loaded) in tensors {
            assert_eq!(weight_map[&tensor], name.as_str());
            all.insert(tensor, loaded);
        }
    }
    assert_eq!(all, official(&std::fs::read(&src).expect("src")).1);
    assert_eq!(ours(&out), all, "the folder opens as one model");
    assert_eq!(ours(&out.join(INDEX_FILE_NAME)), all);
}

#[test]
fn a_sharded_model_resaves_to_one_file_or_new_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src_dir = dir.path().join("src");
    let idx = two_shard_source(&src_dir);
    let ck = Checkpoint::open(&idx).expect("open");
    let before = ours(&idx);
    let out = dir.path().join("one.safetensors");
    let report = run(
        &ck,
        &out,
        &ResaveOptions {
            renames: vec![("c".into(), "a2".into())],
            ..ResaveOptions::default()
        },
    )
    .expect("resave");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let (meta, back) = official(&std::fs::read(&out).expect("read"));
    assert_eq!(
        meta,
        Some(HashMap::from([
            ("format".into(), "pt".into()),
            ("extra".into(), "1".into())
        ]))
    );
    assert_eq!(back["a"], before["a"]);
    assert_eq!(back["b"], before["b"]);
    assert_eq!(back["a2"], before["c"]);
    // Sharded to sharded, in another folder: the index keeps its other
    // metadata keys and gets a new total_size.
    let out_dir = dir.path().join("resharded");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let index_path = out_dir.join("custom.index.json");
    run(
        &ck,
        &index_path,
        &ResaveOptions {
            keep: vec!["^[ac]$".into()],
            conversions: vec![(Dtype::F32, Dtype::F16)],
            ..ResaveOptions::default()
        },
    )
    .expect("resave");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).expect("index")).expect("json");
    assert_eq!(index["metadata"]["total_size"], 8);
    assert_eq!(index["metadata"]["note"], "kept");
    assert_eq!(
        listing(&out_dir),
        ["custom.index.json", "model-00001-of-00001.safetensors"]
    );
    let back = ours(&index_path);
    assert_eq!(back.keys().collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(back["a"].dtype, "F16");
}
