//! Remote torch zips (PICKLE.md §9): `info` over HTTP gives what it gives
//! on the local copy (tensors, data offsets, `format`, `pickle`), reading
//! only the zip's end, its central directory and `data.pkl`, within
//! 2 × (data.pkl + directory) + 128 KiB of response bodies; the readers
//! then fetch storages as they need them, each checked against its local
//! header; a shard index URL gives every shard's tensors.

use std::io::Write as _;
use std::path::Path;

use super::server::{Server, without_paths};
use super::{json, run};
use crate::pytorch::build::{T, state_dict};

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pytorch")
}

#[test]
fn a_remote_torch_zip_reads_as_the_local_copy() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    for name in [
        "pytorch_model.bin",
        "lightning.ckpt",
        "views_p4.pt",
        "all_dtypes_p2.pt",
    ] {
        let local = fixtures().join(name);
        s.file(&format!("/{name}"), std::fs::read(&local).expect("fixture"));
        let url = s.url(&format!("/{name}"));
        super::same_as_local(&cache, &url, local.to_str().expect("utf-8"));
    }
    // Every shard of an index, by its URL.
    for name in [
        "pytorch_model.bin.index.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
    ] {
        let bytes = std::fs::read(fixtures().join("sharded").join(name)).expect("shard");
        s.file(&format!("/sharded/{name}"), bytes);
    }
    let (code, out, err) = run(
        &cache,
        &[],
        &[
            "info",
            "--json",
            &s.url("/sharded/pytorch_model.bin.index.json"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json(&out, &err)["tensors"].as_array().map(Vec::len),
        Some(5)
    );
}

/// A torch zip as `torch.save` lays it out (every entry's data on a
/// 64-byte boundary) of `n` F32 storages of `len` elements each.
fn aligned_torch_zip(n: usize, len: usize) -> (Vec<u8>, u64) {
    let keys: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let pairs: Vec<(String, Vec<u8>)> = keys
        .iter()
        .map(|k| {
            (
                format!("layers.{k}.weight"),
                T::f32(k, &[len as i128]).pickle(),
            )
        })
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let pickle = state_dict(&refs);
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .with_alignment(64);
    z.start_file("archive/data.pkl", options).expect("entry");
    z.write_all(&pickle).expect("write");
    for (i, k) in keys.iter().enumerate() {
        z.start_file(format!("archive/data/{k}"), options)
            .expect("entry");
        let values: Vec<u8> = (0..len)
            .flat_map(|j| ((i * len + j) as f32).to_le_bytes())
            .collect();
        z.write_all(&values).expect("write");
    }
    (
        z.finish().expect("finish").into_inner(),
        pickle.len() as u64,
    )
}

#[test]
fn info_reads_the_end_the_directory_and_data_pkl_only() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    // 64 storages of 256 KiB: 16 MiB of tensors behind a few KB of pickle.
    let (bytes, pickle_len) = aligned_torch_zip(64, 65_536);
    let local = dir.path().join("model.pt");
    std::fs::write(&local, &bytes).expect("write");
    let directory = {
        let end = bytes.len() - 22;
        let u32_at =
            |i: usize| u64::from(u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4")));
        u32_at(end + 12)
    };
    s.file("/model.pt", bytes);
    let url = s.url("/model.pt");
    let (code, out, err) = run(&cache, &[], &["info", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    let remote = json(&out, &err);
    let bound = 2 * (pickle_len + directory) + (128 << 10);
    assert!(
        s.body_bytes() <= bound,
        "info read {} bytes; the bound is {bound}",
        s.body_bytes()
    );
    let (code, out, err) = run(
        &cache,
        &[],
        &["info", "--json", local.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(remote), without_paths(json(&out, &err)));
    // One tensor's statistics fetch its storage, checked against its
    // local header, and give the local figures.
    let stats = |from: &str| {
        let (code, out, err) = run(
            &cache,
            &[],
            &["stats", "--json", "--tensor-regex", "^layers\\.63\\.", from],
        );
        assert_eq!(code, 0, "{err}");
        without_paths(json(&out, &err))
    };
    assert_eq!(stats(&url), stats(local.to_str().expect("utf-8")));
}

/// A Hub repository of PyTorch weights only opens by its name: its
/// `pytorch_model.bin.index.json`, else its `pytorch_model.bin`.
#[test]
fn a_hub_repository_of_pytorch_weights_opens_by_its_name() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let endpoint = s.url("/hub");
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let weights = std::fs::read(fixtures().join("pytorch_model.bin")).expect("fixture");
    s.file("/hub/org/one/resolve/main/pytorch_model.bin", weights);
    let (code, out, err) = run(&cache, &env, &["info", "--json", "hf://org/one"]);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["format"], "pytorch", "{doc}");
    assert_eq!(doc["tensors"].as_array().map(Vec::len), Some(12));
    for name in [
        "pytorch_model.bin.index.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
    ] {
        let bytes = std::fs::read(fixtures().join("sharded").join(name)).expect("shard");
        s.file(&format!("/hub/org/two/resolve/main/{name}"), bytes);
    }
    let (code, out, err) = run(&cache, &env, &["info", "--json", "hf://org/two"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json(&out, &err)["tensors"].as_array().map(Vec::len),
        Some(5)
    );
    let (code, out, err) = run(&cache, &env, &["info", "--json", "hf://org/none"]);
    assert_eq!(code, 2, "{out}");
    let doc = json(&out, &err);
    assert_eq!(doc["error"]["kind"], "NotFound", "{doc}");
}
