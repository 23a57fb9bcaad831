//! Remote GGUF files (GGUF.md, "Remote"): `info` over HTTP gives what it
//! gives on the local copy, reading the header in bounded steps and never
//! the tensor data (at most the data section's start + 128 KiB of
//! response bodies, a 150k-token vocabulary included); the other verbs
//! then fetch what they read; a Hub location opens a GGUF by its path.

use std::path::Path;

use super::server::{Server, without_paths};
use super::{json, run};

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf")
}

fn string(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

/// A GGUF of a `vocab`-token vocabulary and `tensors` F32 tensors of
/// `len` elements each (seeded values); returns it and its data section's
/// start.
fn big_gguf(vocab: usize, tensors: usize, len: usize) -> (Vec<u8>, u64) {
    let mut kv = Vec::new();
    kv.extend(string("general.architecture"));
    kv.extend(8u32.to_le_bytes());
    kv.extend(string("llama"));
    kv.extend(string("tokenizer.ggml.tokens"));
    kv.extend(9u32.to_le_bytes());
    kv.extend(8u32.to_le_bytes());
    kv.extend((vocab as u64).to_le_bytes());
    for i in 0..vocab {
        kv.extend(string(&format!("▁token{i}")));
    }
    let mut infos = Vec::new();
    for t in 0..tensors {
        infos.extend(string(&format!("blk.{t}.ffn_up.weight")));
        infos.extend(2u32.to_le_bytes());
        infos.extend(((len / 64) as u64).to_le_bytes());
        infos.extend(64u64.to_le_bytes());
        infos.extend(0u32.to_le_bytes());
        infos.extend(((t * len * 4) as u64).to_le_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors as u64).to_le_bytes());
    out.extend(2u64.to_le_bytes());
    out.extend(kv);
    out.extend(infos);
    let start = out.len().div_ceil(32) * 32;
    out.resize(start, 0);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..tensors * len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend(((x >> 40) as f32 / 1e6 - 8.0).to_le_bytes());
    }
    (out, start as u64)
}

#[test]
fn remote_gguf_files_read_as_their_local_copies() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    for name in [
        "types.gguf",
        "llama_tiny.gguf",
        "llama_tiny_q4_0.gguf",
        "v2.gguf",
    ] {
        let local = fixtures().join(name);
        s.file(&format!("/{name}"), std::fs::read(&local).expect("fixture"));
        super::same_as_local(
            &cache,
            &s.url(&format!("/{name}")),
            local.to_str().expect("utf-8"),
        );
    }
    // By the Hub's path of the file.
    let endpoint = s.url("/hub");
    let bytes = std::fs::read(fixtures().join("llama_tiny_q4_0.gguf")).expect("fixture");
    s.file("/hub/org/quant/resolve/main/model-Q4_0.gguf", bytes);
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let (code, out, err) = run(
        &cache,
        &env,
        &["info", "--json", "hf://org/quant/model-Q4_0.gguf"],
    );
    assert_eq!(code, 0, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["format"], "gguf", "{doc}");
    assert_eq!(doc["tensors"].as_array().map(Vec::len), Some(21));
}

#[test]
fn info_reads_the_header_in_bounded_steps_and_no_tensor_data() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    // A 150k-token vocabulary (about 3 MB of header) before 16 MiB of data.
    let (bytes, start) = big_gguf(150_000, 16, 1 << 18);
    let local = dir.path().join("big.gguf");
    std::fs::write(&local, &bytes).expect("write");
    s.file("/big.gguf", bytes);
    let url = s.url("/big.gguf");
    let (code, out, err) = run(&cache, &[], &["info", "--json", &url]);
    assert_eq!(code, 0, "{err}");
    let remote = json(&out, &err);
    let bound = start + (128 << 10);
    assert!(
        s.body_bytes() <= bound,
        "info read {} bytes; the bound is {bound} (data at {start})",
        s.body_bytes()
    );
    assert!(s.log().len() <= 12, "{} requests", s.log().len());
    assert_eq!(remote["gguf"]["tensor_data_offset"], start);
    assert_eq!(
        remote["gguf"]["metadata"]["tokenizer.ggml.tokens"]["len"],
        150_000
    );
    let (code, out, err) = run(
        &cache,
        &[],
        &["info", "--json", local.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_paths(remote), without_paths(json(&out, &err)));
    // One tensor's statistics fetch its bytes, and give the local figures.
    let stats = |from: &str| {
        let (code, out, err) = run(
            &cache,
            &[],
            &["stats", "--json", "--tensor", "blk.9.ffn_up.weight", from],
        );
        assert_eq!(code, 0, "{err}");
        without_paths(json(&out, &err))
    };
    assert_eq!(stats(&url), stats(local.to_str().expect("utf-8")));
}

/// A split model by the URL of its first part: every part, by the URLs
/// beside it; a missing part is an error.
#[test]
fn a_remote_split_model_opens_every_part() {
    let s = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let names = ["tiny-00001-of-00002.gguf", "tiny-00002-of-00002.gguf"];
    for name in names {
        let bytes = std::fs::read(fixtures().join("split").join(name)).expect("part");
        s.file(&format!("/split/{name}"), bytes);
    }
    let local = fixtures().join("split").join(names[0]);
    super::same_as_local(
        &cache,
        &s.url(&format!("/split/{}", names[0])),
        local.to_str().expect("utf-8"),
    );
    let (code, out, err) = run(
        &cache,
        &[],
        &["info", "--json", &s.url(&format!("/split/{}", names[0]))],
    );
    assert_eq!(code, 0, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["tensors"].as_array().map(Vec::len), Some(5), "{doc}");
    assert_eq!(doc["tensors"][4]["shard"], names[1]);
    // Only the first part on the server.
    let bytes = std::fs::read(&local).expect("part");
    s.file("/alone/tiny-00001-of-00002.gguf", bytes);
    let (code, out, err) = run(
        &cache,
        &[],
        &["info", "--json", &s.url("/alone/tiny-00001-of-00002.gguf")],
    );
    assert_eq!(code, 2, "{out}");
    assert_eq!(json(&out, &err)["error"]["kind"], "NotFound", "{out}");
}
