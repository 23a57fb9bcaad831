//! Tests: files built here by a minimal writer (superblock 0, symbol
//! tables, contiguous and chunked datasets) for every hostile class of
//! FRAMEWORKS.md, and the fixtures h5py wrote (`tests/data/hdf5`,
//! `tests/data/keras`), compared with their manifests.

#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::unreadable_literal,
    clippy::many_single_char_names,
    clippy::similar_names
)]

mod built;
mod fixtures;
mod writer;

use super::*;
use crate::dtype::Dtype;
use crate::format::decode::DecodeError;
use crate::jobs::CancelToken;

/// A tensor's bytes, C order, little-endian (a big-endian plain range
/// swapped per element part, as the format layer does).
pub(super) fn tensor_bytes(file: &[u8], t: &Tensor) -> Result<Vec<u8>, DecodeError> {
    match &t.data {
        Data::Plain {
            file: 0,
            range,
            big_endian,
        } => {
            let mut v = file[range.start as usize..range.end as usize].to_vec();
            if *big_endian {
                let unit = match t.dtype {
                    Dtype::C64 => 4,
                    d => (d.bits() / 8) as usize,
                };
                for e in v.chunks_exact_mut(unit) {
                    e.reverse();
                }
            }
            Ok(v)
        }
        Data::Plain { .. } => panic!("a second file"),
        Data::Decoded(d) => {
            let mut out = Vec::new();
            d.decode(&[file], &CancelToken::new(), &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })?;
            Ok(out)
        }
    }
}

/// SHA-256 (FIPS 180-4), for comparing with the manifests.
pub(super) fn sha256(data: &[u8]) -> String {
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
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[i * 4..i * 4 + 4].try_into().unwrap());
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
    h.iter().fold(String::new(), |mut s, x| {
        use std::fmt::Write;
        let _ = write!(s, "{x:08x}");
        s
    })
}

#[test]
fn sha256_of_known_strings() {
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
fn checksums_match_hdf5s() {
    // lookup3 of "" with seed 0 is 0xdeadbeef; "Four score and seven years ago"
    // is Bob Jenkins' own test vector (seed 0: 0x17770551).
    assert_eq!(io::lookup3(b""), 0xdead_beef);
    assert_eq!(io::lookup3(b"Four score and seven years ago"), 0x1777_0551);
    // Fletcher-32 of "abcde" over big-endian 16-bit words, odd byte high.
    assert_eq!(io::fletcher32(b"abcde"), 0x4ff0_29c7);
    assert_eq!(io::fletcher32(b"abcd"), 0x2629_c4c6);
    let long: Vec<u8> = (0..2560).map(|i| (i % 256) as u8).collect();
    assert_eq!(io::fletcher32(&long), 0xf0fa_827d);
}

/// Prints every tensor of the files in `HDF5_PROBE` (a folder), with the
/// sha256 of its bytes: a tool for comparing with h5py by hand.
#[test]
#[ignore = "a probe run by hand"]
fn probe() {
    let Ok(dir) = std::env::var("HDF5_PROBE") else {
        return;
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for p in paths {
        let bytes = std::fs::read(&p).unwrap();
        println!("== {}", p.display());
        match open(&bytes) {
            Err(e) => println!("  error {}: {e}", e.kind()),
            Ok(o) => {
                for t in &o.tensors {
                    let sum =
                        tensor_bytes(&bytes, t).map_or_else(|e| format!("{e:?}"), |b| sha256(&b));
                    println!("  {} {:?} {:?} {sum}", t.name, t.dtype, t.shape);
                }
                for (k, v) in &o.metadata {
                    let s = v.to_string();
                    println!("  meta {k} = {}", &s[..s.len().min(80)]);
                }
                for w in &o.warnings {
                    println!("  warning {w}");
                }
            }
        }
    }
}

/// Decodes every tensor of the file `HDF5_PERF` and prints the output
/// rate (run by hand, in release: `cargo test --release ... throughput
/// -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement run by hand"]
fn throughput() {
    let Ok(path) = std::env::var("HDF5_PERF") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let sample: Vec<u8> = (0..64u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for size in [2, 4, 8] {
        let start = std::time::Instant::now();
        let out = decode::unshuffle(&sample, size);
        let s = start.elapsed().as_secs_f64();
        println!(
            "unshuffle {size}: {:.0} MB/s ({})",
            out.len() as f64 / s / 1e6,
            out[12345]
        );
    }
    let o = open(&bytes).unwrap();
    for t in &o.tensors {
        let Data::Decoded(d) = &t.data else { continue };
        let start = std::time::Instant::now();
        let mut total = 0usize;
        d.decode(&[&bytes], &CancelToken::new(), &mut |b| {
            total += b.len();
            Ok(())
        })
        .unwrap();
        let s = start.elapsed().as_secs_f64();
        println!(
            "{}: {total} bytes in {s:.3} s: {:.0} MB/s",
            t.name,
            total as f64 / s / 1e6
        );
    }
}
