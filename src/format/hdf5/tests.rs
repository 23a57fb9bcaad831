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

use writer::{W, chunked, compact, contiguous, dataset, f32t, int, string};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn names(o: &Opened) -> Vec<&str> {
    o.tensors.iter().map(|t| t.name.as_str()).collect()
}

/// A file of one dataset `x` under the root.
fn one(build: impl FnOnce(&mut W) -> u64) -> Vec<u8> {
    let mut w = W::new();
    let d = build(&mut w);
    let (root, _) = w.group(&[("x", d)]);
    w.finish(root)
}

#[test]
fn contiguous_compact_and_big_endian_datasets() {
    let mut w = W::new();
    let values = f32s(&[1.0, -2.5, 3.25, 0.0, 5.0, 6.5]);
    let a_data = w.put(&values);
    let a = dataset(&mut w, &[2, 3], f32t(false), contiguous(a_data, 24), &[]);
    let be: Vec<u8> = [1i16, -2, 300]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let b_data = w.put(&be);
    let b = dataset(&mut w, &[3], int(2, true, true), contiguous(b_data, 6), &[]);
    let c = dataset(&mut w, &[], int(1, false, false), compact(&[7]), &[]);
    let s = dataset(&mut w, &[2], string(4), compact(b"abcdefgh"), &[]);
    let (root, _) = w.group(&[("b", b), ("a", a), ("c", c), ("s", s)]);
    let file = w.finish(root);
    let o = open(&file).unwrap();
    assert_eq!(names(&o), ["a", "b", "c"]);
    assert_eq!(o.tensors[0].dtype, Dtype::F32);
    assert_eq!(o.tensors[0].shape, [2, 3]);
    assert!(matches!(
        o.tensors[0].data,
        Data::Plain {
            big_endian: false,
            ..
        }
    ));
    assert_eq!(tensor_bytes(&file, &o.tensors[0]).unwrap(), values);
    assert_eq!(o.tensors[1].dtype, Dtype::I16);
    assert!(matches!(
        o.tensors[1].data,
        Data::Plain {
            big_endian: true,
            ..
        }
    ));
    let le: Vec<u8> = [1i16, -2, 300]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(tensor_bytes(&file, &o.tensors[1]).unwrap(), le);
    assert_eq!(o.tensors[2].shape, Vec::<u64>::new());
    assert_eq!(tensor_bytes(&file, &o.tensors[2]).unwrap(), [7]);
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
    assert!(o.warnings[0].contains("\"s\""));
}

#[test]
fn groups_are_walked_depth_first_by_name() {
    let mut w = W::new();
    let data = w.put(&[1, 2]);
    let mut d = || dataset(&mut w, &[2], int(1, false, false), contiguous(data, 2), &[]);
    let (x, y, b, c) = (d(), d(), d(), d());
    let (g, _) = w.group(&[("y", y), ("x", x)]);
    let (root, _) = w.group(&[("c", c), ("b", b), ("a", g), ("B", b)]);
    let o = open(&w.finish(root)).unwrap();
    // "B" (0x42) sorts before "a"; "b" is the same dataset as "B".
    assert_eq!(names(&o), ["B", "a/x", "a/y", "c"]);
}

#[test]
fn hard_link_cycles_visit_each_object_once() {
    let mut w = W::new();
    let data = w.put(&[1, 2]);
    let d = dataset(&mut w, &[2], int(1, false, false), contiguous(data, 2), &[]);
    // g links to itself and to the root (patched once the root exists).
    let (g, fields) = w.group(&[("d", d), ("self", 0), ("up", 0)]);
    w.patch(fields[1], g);
    let (root, _) = w.group(&[("g", g), ("e", d)]);
    w.patch(fields[2], root);
    let o = open(&w.finish(root)).unwrap();
    assert_eq!(names(&o), ["e"]);
}

#[test]
fn a_truncated_superblock_is_refused_and_no_prefix_panics() {
    let file = one(|w| {
        let data = w.put(&f32s(&[1.0, 2.0]));
        dataset(w, &[2], f32t(false), contiguous(data, 8), &[])
    });
    assert!(open(&file).is_ok());
    let e = open(&file[..60]).unwrap_err();
    assert_eq!(e.kind(), "Truncated", "{e}");
    assert_eq!(open(&file[..7]).unwrap_err().kind(), "BadMagic");
    for n in 0..file.len() {
        let _ = open(&file[..n]);
    }
    // Every byte flipped: refused or read, never a panic.
    for i in 0..file.len() {
        let mut m = file.clone();
        m[i] ^= 0xff;
        if let Ok(o) = open(&m) {
            for t in &o.tensors {
                if let Data::Decoded(d) = &t.data {
                    let _ = d.decode(&[&m], &CancelToken::new(), &mut |_| Ok(()));
                }
            }
        }
    }
}

#[test]
fn a_user_block_moves_the_base_address() {
    let file = one(|w| {
        let data = w.put(&f32s(&[1.0, 2.0]));
        dataset(w, &[2], f32t(false), contiguous(data, 8), &[])
    });
    let mut moved = vec![0u8; 512];
    moved.extend_from_slice(&file);
    assert_eq!(find_superblock(&moved), Some(512));
    let o = open(&moved).unwrap();
    assert_eq!(
        tensor_bytes(&moved, &o.tensors[0]).unwrap(),
        f32s(&[1.0, 2.0])
    );
    assert_eq!(o.facts["user_block"], 512);
}

#[test]
fn a_huge_dataspace_over_small_storage_is_refused() {
    // 2^62 elements: over 2^40 bytes.
    let file = one(|w| {
        let data = w.put(&[0; 4096]);
        dataset(
            w,
            &[1 << 62],
            int(1, false, false),
            contiguous(data, 4096),
            &[],
        )
    });
    let e = open(&file).unwrap_err();
    assert_eq!(e.kind(), "TensorTooLarge", "{e}");
    assert_eq!(e.tensor(), Some("x"));
    // 2^20 elements over a 4 KiB storage: the layout says so.
    let file = one(|w| {
        let data = w.put(&[0; 4096]);
        dataset(
            w,
            &[1 << 20],
            int(1, false, false),
            contiguous(data, 4096),
            &[],
        )
    });
    assert_eq!(open(&file).unwrap_err().kind(), "StorageTooSmall");
    // The layout lies about its size: the file's end says so.
    let file = one(|w| {
        let data = w.put(&[0; 4096]);
        dataset(
            w,
            &[1 << 20],
            int(1, false, false),
            contiguous(data, 1 << 20),
            &[],
        )
    });
    assert_eq!(open(&file).unwrap_err().kind(), "Truncated");
}

/// A chunked dataset of `dims` (u8 elements unless `element`) whose
/// chunks are `(origin, stored bytes, mask)`.
fn chunked_file(
    dims: &[u64],
    chunk: &[u32],
    dtype: Vec<u8>,
    element: u32,
    pipeline: &[(u16, Vec<u32>)],
    chunks: Vec<(Vec<u64>, Vec<u8>, u32)>,
    more: &[(u16, Vec<u8>)],
) -> Vec<u8> {
    let mut w = W::new();
    let mut entries = Vec::new();
    for (origin, bytes, mask) in chunks {
        let at = w.put(&bytes);
        entries.push((origin, at, bytes.len() as u32, mask));
    }
    let tree = w.chunk_tree(dims.len(), &entries);
    let mut extra = more.to_vec();
    if !pipeline.is_empty() {
        extra.push((0x0B, writer::filters(pipeline)));
    }
    let d = dataset(&mut w, dims, dtype, chunked(tree, chunk, element), &extra);
    let (root, _) = w.group(&[("x", d)]);
    w.finish(root)
}

#[test]
fn chunks_with_shuffle_deflate_fletcher_and_holes() {
    let values: Vec<f32> = (0..30).map(|i| i as f32 * 0.5).collect();
    // A 5x6 dataset in 2x4 chunks; chunk (2, 4) is never written.
    let mut chunks = Vec::new();
    for r in (0..5).step_by(2) {
        for c in (0..6).step_by(4) {
            if (r, c) == (2, 4) {
                continue;
            }
            let mut raw = Vec::new();
            for i in r..r + 2 {
                for j in c..c + 4 {
                    let v = if i < 5 && j < 6 {
                        values[i * 6 + j]
                    } else {
                        0.0
                    };
                    raw.extend_from_slice(&v.to_le_bytes());
                }
            }
            let stored = writer::with_fletcher(&writer::zlib(&writer::shuffle(&raw, 4)));
            chunks.push((vec![r as u64, c as u64], stored, 0));
        }
    }
    let pipeline = [(2, vec![4]), (1, vec![6]), (3, vec![])];
    let fill = writer::fill(&(-1.0f32).to_le_bytes());
    let file = chunked_file(
        &[5, 6],
        &[2, 4],
        f32t(false),
        4,
        &pipeline,
        chunks,
        &[(5, fill)],
    );
    let o = open(&file).unwrap();
    let got = tensor_bytes(&file, &o.tensors[0]).unwrap();
    let mut want = Vec::new();
    for i in 0..5 {
        for j in 0..6 {
            let v = if (2..4).contains(&i) && j >= 4 {
                -1.0
            } else {
                values[i * 6 + j]
            };
            want.extend_from_slice(&f32::to_le_bytes(v));
        }
    }
    assert_eq!(got, want);
}

#[test]
fn a_fletcher_mismatch_opens_but_does_not_decode() {
    let mut stored = writer::with_fletcher(&[1, 2, 3, 4]);
    stored[0] ^= 1;
    let file = chunked_file(
        &[4],
        &[4],
        int(1, false, false),
        1,
        &[(3, vec![])],
        vec![(vec![0], stored, 0)],
        &[],
    );
    let o = open(&file).unwrap();
    match tensor_bytes(&file, &o.tensors[0]) {
        Err(DecodeError::Invalid { kind, message }) => {
            assert_eq!(kind, "ChecksumMismatch");
            assert!(message.contains("\"x\""), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unknown_filter_is_refused_at_open() {
    let file = chunked_file(
        &[4],
        &[4],
        int(1, false, false),
        1,
        &[(307, vec![])],
        vec![(vec![0], vec![1, 2, 3, 4], 0)],
        &[],
    );
    let e = open(&file).unwrap_err();
    assert_eq!(e.kind(), "UnknownFilter");
    assert_eq!(e.tensor(), Some("x"));
    assert!(e.to_string().contains("307"), "{e}");
}

#[test]
fn a_chunk_past_the_end_is_refused_at_open() {
    let mut file = chunked_file(
        &[4],
        &[4],
        int(1, false, false),
        1,
        &[],
        vec![(vec![0], vec![1, 2, 3, 4], 0)],
        &[],
    );
    // The B-tree's child address (after the 24-byte node head and the
    // 24-byte first key) moved past the file's end.
    let tree = file.windows(4).position(|w| w == b"TREE").unwrap();
    let len = file.len() as u64;
    file[tree + 48..tree + 56].copy_from_slice(&(len - 2).to_le_bytes());
    let e = open(&file).unwrap_err();
    assert_eq!(e.kind(), "Truncated", "{e}");
    assert_eq!(e.tensor(), Some("x"));
}

#[test]
fn a_deflate_bomb_streams_the_exact_answer_in_bands() {
    // 16 MiB of zeros in 1 MiB deflate chunks (the 128 MiB case of
    // FRAMEWORKS.md is the same file, 8 times longer).
    const MIB: usize = 1 << 20;
    let z = writer::zlib(&vec![0u8; MIB]);
    let chunks = (0..16)
        .map(|i| (vec![(i * MIB) as u64], z.clone(), 0))
        .collect();
    let file = chunked_file(
        &[16 * MIB as u64],
        &[MIB as u32],
        int(1, false, false),
        1,
        &[(1, vec![6])],
        chunks,
        &[],
    );
    assert!(file.len() < 64 << 10, "{}", file.len());
    let o = open(&file).unwrap();
    let Data::Decoded(d) = &o.tensors[0].data else {
        panic!()
    };
    let (mut total, mut largest, mut nonzero) = (0usize, 0usize, false);
    d.decode(&[&file], &CancelToken::new(), &mut |b| {
        total += b.len();
        largest = largest.max(b.len());
        nonzero |= b.iter().any(|&x| x != 0);
        Ok(())
    })
    .unwrap();
    assert_eq!(total, 16 * MIB);
    assert!(!nonzero);
    assert!(largest as u64 <= crate::format::blocks::MAX_BAND);
    // A chunk that inflates past its declared size is refused.
    let big = writer::zlib(&vec![0u8; 2 * MIB]);
    let file = chunked_file(
        &[MIB as u64],
        &[MIB as u32],
        int(1, false, false),
        1,
        &[(1, vec![6])],
        vec![(vec![0], big, 0)],
        &[],
    );
    let o = open(&file).unwrap();
    match tensor_bytes(&file, &o.tensors[0]) {
        Err(DecodeError::Invalid { kind, .. }) => assert_eq!(kind, "BadDeflate"),
        other => panic!("{:?}", other.map(|v| v.len())),
    }
}

#[test]
fn lzf_and_masked_filters() {
    // LZF: a literal run of 4, then a back-reference of 6 bytes 4 back.
    let lzf = vec![3, 1, 2, 3, 4, 4 << 5, 3];
    assert_eq!(
        decode::lzf(&lzf, 10).unwrap(),
        [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    );
    assert!(decode::lzf(&lzf, 9).is_err());
    assert!(decode::lzf(&[0x20, 9], 10).is_err());
    let file = chunked_file(
        &[10],
        &[10],
        int(1, false, false),
        1,
        &[(32000, vec![0, 0, 10])],
        vec![(vec![0], lzf, 0)],
        &[],
    );
    let o = open(&file).unwrap();
    assert_eq!(
        tensor_bytes(&file, &o.tensors[0]).unwrap(),
        [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    );
    // An optional filter that failed when writing: masked, stored raw.
    let file = chunked_file(
        &[4],
        &[4],
        int(1, false, false),
        1,
        &[(32000, vec![])],
        vec![(vec![0], vec![9, 8, 7, 6], 1)],
        &[],
    );
    let o = open(&file).unwrap();
    assert_eq!(tensor_bytes(&file, &o.tensors[0]).unwrap(), [9, 8, 7, 6]);
}

#[test]
fn deep_nesting_is_bounded() {
    let mut w = W::new();
    let data = w.put(&[1]);
    let mut child = dataset(&mut w, &[1], int(1, false, false), contiguous(data, 1), &[]);
    for _ in 0..(MAX_DEPTH + 5) {
        child = w.group(&[("g", child)]).0;
    }
    let e = open(&w.finish(child)).unwrap_err();
    assert_eq!(e.kind(), "LimitExceeded", "{e}");
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

#[test]
fn other_address_sizes_and_versions_are_refused_cleanly() {
    let file = one(|w| {
        let data = w.put(&f32s(&[1.0]));
        dataset(w, &[1], f32t(false), contiguous(data, 4), &[])
    });
    let mut small = file.clone();
    small[13] = 4;
    let e = open(&small).unwrap_err();
    assert_eq!(e.kind(), "Hdf5Unsupported", "{e}");
    assert!(e.to_string().contains("4-byte addresses"), "{e}");
    let mut v9 = file.clone();
    v9[8] = 9;
    assert_eq!(open(&v9).unwrap_err().kind(), "Hdf5Unsupported");
    // A superblock version 2 whose checksum does not match.
    let mut v2 = file;
    v2[8..11].copy_from_slice(&[2, 8, 8]);
    assert_eq!(open(&v2).unwrap_err().kind(), "ChecksumMismatch");
}

#[test]
fn a_shared_continuation_block_is_read_within_bounds() {
    // Many datasets whose headers all continue into one block: each
    // header is read once, the walk ends in bounded time.
    let mut w = W::new();
    let data = w.put(&[5]);
    let body = dataset(&mut w, &[1], int(1, false, false), contiguous(data, 1), &[]);
    let body_len = (w.buf.len() as u64) - body - 16;
    let mut entries = Vec::new();
    let names: Vec<String> = (0..300).map(|i| format!("d{i:03}")).collect();
    for name in &names {
        let mut cont = Vec::new();
        cont.extend_from_slice(&(body + 16).to_le_bytes());
        cont.extend_from_slice(&body_len.to_le_bytes());
        let h = w.header(&[(0x10, cont)]);
        // The header counts the messages of its continuation too.
        w.buf[h as usize + 2] = 4;
        entries.push((name.as_str(), h));
    }
    let (root, _) = w.group(&entries);
    let file = w.finish(root);
    let o = open(&file).unwrap();
    assert_eq!(o.tensors.len(), 300);
    assert_eq!(tensor_bytes(&file, &o.tensors[299]).unwrap(), [5]);
}
