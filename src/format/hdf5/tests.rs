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
use crate::format::test_support::sha256;
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
