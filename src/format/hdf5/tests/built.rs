//! Files built here by [`super::writer`]: every layout and filter, and
//! every hostile class FRAMEWORKS.md lists for HDF5 (a truncated
//! superblock, hard-link cycles, a chunk past the end, a dataspace over
//! too small a storage, an unknown filter, a Fletcher-32 mismatch, a
//! deflate bomb), plus the reader's own bounds.

#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::many_single_char_names
)]

use super::super::*;
use super::{tensor_bytes, writer};
use crate::dtype::Dtype;
use crate::format::decode::DecodeError;
use crate::jobs::CancelToken;
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
