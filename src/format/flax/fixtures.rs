//! The reader on files Flax itself wrote (`tests/data/flax/`, made by
//! `scripts/make_framework_fixtures.py`): every tensor's name, dtype, shape
//! and the SHA-256 of its bytes, and every plain value, against
//! `MANIFEST.json`; the refused files refused with the kind it names.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::open;
use super::tests::tensor_bytes;

/// SHA-256 (FIPS 180-4), enough for a test's few kilobytes.
#[allow(
    clippy::unreadable_literal,
    reason = "the constants as FIPS 180-4 prints them"
)]
fn sha256(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend((data.len() as u64 * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().fold(String::new(), |mut out, x| {
        let _ = write!(out, "{x:08x}");
        out
    })
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/flax")
}

#[test]
fn sha256_is_right() {
    assert_eq!(
        sha256(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn every_fixture_reads_as_flax_restores_it() {
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir().join("MANIFEST.json")).expect("the manifest is there"),
    )
    .expect("the manifest is JSON");
    let files = manifest["files"].as_array().expect("files");
    assert!(files.len() >= 4);
    for f in files {
        let name = f["file"].as_str().expect("file");
        let bytes = std::fs::read(dir().join(name)).expect("the fixture is there");
        if f["refused"] == true {
            let e = open(&bytes).expect_err(name);
            if let Some(kind) = f["error_kind"].as_str() {
                assert_eq!(e.kind(), kind, "{name}: {e}");
            }
            let message = e.to_string().to_lowercase();
            if let Some(any) = f["message_any"].as_array() {
                assert!(
                    any.iter()
                        .any(|m| message.contains(&m.as_str().unwrap_or("").to_lowercase())),
                    "{name}: {message}"
                );
            }
            continue;
        }
        let o = open(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = f["tensors"].as_array().expect("tensors");
        let got: HashMap<&str, &crate::format::decode::Tensor> =
            o.tensors.iter().map(|t| (t.name.as_str(), t)).collect();
        let order: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want_order: Vec<&str> = want.iter().filter_map(|w| w["name"].as_str()).collect();
        assert_eq!(order, want_order, "{name}: tensors in file order");
        for w in want {
            let tname = w["name"].as_str().expect("name");
            let t = got
                .get(tname)
                .unwrap_or_else(|| panic!("{name}: no tensor {tname}"));
            assert_eq!(t.dtype.name(), w["dtype"], "{name}: {tname}");
            assert_eq!(
                serde_json::json!(t.shape),
                w["shape"],
                "{name}: {tname} shape"
            );
            let data = tensor_bytes(&bytes, t);
            assert_eq!(sha256(&data), w["sha256"], "{name}: {tname} bytes");
            if let Some(chunks) = w.get("chunks") {
                let fact = t.facts.iter().find(|(k, _)| *k == "chunks");
                assert_eq!(fact.map(|(_, v)| v), Some(chunks), "{name}: {tname}");
            }
        }
        let not_listed = f["not_listed"].as_array().expect("not_listed");
        assert_eq!(o.metadata.len(), not_listed.len(), "{name}: metadata");
        for m in not_listed {
            let key = m["name"].as_str().expect("name");
            let v = o
                .metadata
                .iter()
                .find(|(k, _)| k == key)
                .unwrap_or_else(|| panic!("{name}: no metadata {key}"));
            assert_eq!(v.1, m["value"], "{name}: {key}");
        }
        assert!(o.warnings.is_empty(), "{name}: {:?}", o.warnings);
    }
}
