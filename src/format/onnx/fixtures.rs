//! The models onnx itself wrote (`tests/data/onnx/`, MANIFEST.json): every
//! tensor's name, dtype, shape and the sha256 of its bytes as
//! `numpy_helper.to_array` gives them, the model's facts, and each refused
//! model's kind and message. SHA-256 is computed here (a few lines, no
//! dependency for one test).

use std::path::{Path, PathBuf};

use serde_json::Value as J;

use super::*;
use crate::jobs::CancelToken;

/// SHA-256 (FIPS 180-4), for the manifest's digests.
#[allow(
    clippy::unreadable_literal,
    reason = "the standard's constants, written as FIPS 180-4 prints them"
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
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks_exact(4).enumerate() {
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
        use std::fmt::Write;
        let _ = write!(out, "{x:08x}");
        out
    })
}

#[test]
fn sha256_of_known_vectors() {
    assert_eq!(
        sha256(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256(&[b'a'; 1000]),
        "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
    );
}

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx")
}

/// An external file's size, as the integrator asks it: inside the model's
/// folder, `NotFound` when absent.
fn size_in(dir: &Path) -> impl Fn(&str) -> std::io::Result<u64> + '_ {
    move |location| Ok(std::fs::metadata(dir.join(location))?.len())
}

fn bytes_of(t: &Tensor, files: &[&[u8]]) -> Vec<u8> {
    match &t.data {
        Data::Plain { file, range, .. } => {
            files[*file][range.start as usize..range.end as usize].to_vec()
        }
        Data::Decoded(d) => {
            let mut out = Vec::new();
            d.decode(files, &CancelToken::new(), &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            out
        }
    }
}

#[test]
fn every_fixture_reads_as_onnx_reads_it() {
    let dir = folder();
    let manifest: J =
        serde_json::from_slice(&std::fs::read(dir.join("MANIFEST.json")).unwrap()).unwrap();
    let entries = manifest["files"].as_array().unwrap();
    assert!(entries.len() >= 4);
    let mut checked = 0;
    for entry in entries {
        let file = entry["file"].as_str().unwrap();
        let path = dir.join(file);
        let model_dir = path.parent().unwrap().to_path_buf();
        let bytes = std::fs::read(&path).unwrap();
        let size = size_in(&model_dir);
        let result = open(&bytes, &size);
        if entry["refused"].as_bool().unwrap() {
            let e = result.expect_err(file);
            if let Some(kind) = entry["error_kind"].as_str() {
                assert_eq!(e.kind(), kind, "{file}: {e}");
            }
            let message = e.to_string().to_lowercase();
            let any = entry["message_any"].as_array().unwrap();
            assert!(
                any.iter()
                    .any(|m| message.contains(&m.as_str().unwrap().to_lowercase())),
                "{file}: {message:?} names none of {any:?}"
            );
            checked += 1;
            continue;
        }
        let o = result.unwrap_or_else(|e| panic!("{file}: {e}"));
        for key in ["ir_version", "opset", "producer"] {
            assert_eq!(o.facts[key], entry["onnx"][key], "{file}: {key}");
        }
        let data: Vec<Vec<u8>> = o
            .files
            .iter()
            .map(|f| std::fs::read(model_dir.join(f)).unwrap())
            .collect();
        let mut files: Vec<&[u8]> = vec![&bytes];
        files.extend(data.iter().map(Vec::as_slice));
        let want = entry["tensors"].as_array().unwrap();
        let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, want_names, "{file}: the tensors, in order");
        for (t, w) in o.tensors.iter().zip(want) {
            let what = format!("{file}: {}", t.name);
            assert_eq!(t.dtype.name(), w["dtype"], "{what}");
            assert_eq!(J::from(t.shape.clone()), w["shape"], "{what}");
            assert_eq!(sha256(&bytes_of(t, &files)), w["sha256"], "{what}");
            let plain = matches!(t.data, Data::Plain { .. });
            match w["storage"].as_str().unwrap() {
                "external" => {
                    let ext = &w["external"];
                    assert!(
                        t.facts.contains(&("location", ext["location"].clone())),
                        "{what}"
                    );
                    assert!(
                        t.facts.contains(&("offset", ext["offset"].clone())),
                        "{what}"
                    );
                    assert_eq!(plain, t.dtype != Dtype::Bool, "{what}");
                }
                "raw_data" => assert_eq!(plain, t.dtype != Dtype::Bool, "{what}"),
                _ => assert!(plain == (t.shape.contains(&0)), "{what}"),
            }
        }
        checked += 1;
    }
    assert_eq!(checked, entries.len());
}
