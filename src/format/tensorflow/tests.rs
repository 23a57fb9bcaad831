//! Bundles written in code (a small table writer below) and the hostile
//! inputs FRAMEWORKS.md lists, each refused with its kind; then the real
//! fixtures TensorFlow wrote, when present, against their manifest.

use super::proto::write as pw;
use super::proto::{Entry, Extent, Header};
use super::*;
use crate::format::decode::{Data, DecodeError};
use crate::jobs::CancelToken;

// ---------------------------------------------------------------- writer

fn varint(out: &mut Vec<u8>, v: u64) {
    pw::varint(out, v);
}

/// A block's contents: prefix-compressed entries, a restart point every
/// `interval` entries, the restart array and its count.
fn encode_block(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut restarts = Vec::new();
    let mut prev: &[u8] = &[];
    for (i, (k, v)) in entries.iter().enumerate() {
        let shared = if i % interval == 0 {
            restarts.push(out.len() as u32);
            0
        } else {
            prev.iter().zip(k).take_while(|(a, b)| a == b).count()
        };
        varint(&mut out, shared as u64);
        varint(&mut out, (k.len() - shared) as u64);
        varint(&mut out, v.len() as u64);
        out.extend_from_slice(&k[shared..]);
        out.extend_from_slice(v);
        prev = k;
    }
    if restarts.is_empty() {
        restarts.push(0);
    }
    for r in &restarts {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    out
}

/// Appends a block and its trailer (type 0 and the masked CRC) to `file`;
/// returns its handle.
fn put_block(file: &mut Vec<u8>, contents: &[u8]) -> (u64, u64) {
    let at = file.len() as u64;
    file.extend_from_slice(contents);
    file.push(0);
    let c = crc::mask(crc::extend(crc::value(contents), &[0]));
    file.extend_from_slice(&c.to_le_bytes());
    (at, contents.len() as u64)
}

fn handle_bytes((o, s): (u64, u64)) -> Vec<u8> {
    let mut v = Vec::new();
    varint(&mut v, o);
    varint(&mut v, s);
    v
}

/// A table of raw data blocks, each with its index key.
fn table_of_blocks(blocks: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut file = Vec::new();
    let mut index = Vec::new();
    for (contents, sep) in blocks {
        let h = put_block(&mut file, contents);
        index.push((sep.clone(), handle_bytes(h)));
    }
    let meta = put_block(&mut file, &encode_block(&[], 16));
    let idx = put_block(&mut file, &encode_block(&index, 1));
    let mut footer = handle_bytes(meta);
    footer.extend(handle_bytes(idx));
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    file.extend(footer);
    file
}

/// A table of `entries` (as given, sorted or not), `per_block` a block.
fn table(entries: &[(Vec<u8>, Vec<u8>)], per_block: usize) -> Vec<u8> {
    let blocks: Vec<_> = entries
        .chunks(per_block.max(1))
        .map(|c| (encode_block(c, 3), c[c.len() - 1].0.clone()))
        .collect();
    table_of_blocks(&blocks)
}

/// A bundle being written: entries by key and the shards' bytes.
struct Writer {
    header: Header,
    entries: Vec<(Vec<u8>, Entry)>,
    shards: Vec<Vec<u8>>,
}

impl Writer {
    fn new(num_shards: usize) -> Self {
        Writer {
            header: Header {
                num_shards: num_shards as i32,
                producer: 1,
                ..Header::default()
            },
            entries: Vec::new(),
            shards: vec![Vec::new(); num_shards],
        }
    }

    /// Stores `bytes` in `shard` and an entry for them under `key`.
    fn add(&mut self, key: &[u8], dtype: i32, dims: &[i64], shard: usize, bytes: &[u8]) {
        let data = &mut self.shards[shard];
        let e = Entry {
            dtype,
            dims: dims.to_vec(),
            shard_id: shard as i32,
            offset: data.len() as i64,
            size: bytes.len() as i64,
            crc32c: crc::mask(crc::value(bytes)),
            ..Entry::default()
        };
        data.extend_from_slice(bytes);
        self.entries.push((key.to_vec(), e));
    }

    /// A partitioned tensor of the full `bytes` (C order of `dims`,
    /// `element` bytes each), cut in `cuts`: (start, length) per dimension.
    fn add_sliced(
        &mut self,
        name: &str,
        dtype: i32,
        dims: &[i64],
        element: usize,
        bytes: &[u8],
        cuts: &[Vec<(i64, i64)>],
    ) {
        let mut full = Entry {
            dtype,
            dims: dims.to_vec(),
            ..Entry::default()
        };
        for (k, cut) in cuts.iter().enumerate() {
            let extents: Vec<Extent> = cut
                .iter()
                .map(|&(s, l)| Extent {
                    start: s,
                    length: Some(l),
                })
                .collect();
            full.slices.push(extents.clone());
            let part = gather(dims, element, bytes, cut);
            let key = slices::slice_key(name.as_bytes(), &extents);
            let shape: Vec<i64> = cut.iter().map(|c| c.1).collect();
            self.add(&key, dtype, &shape, k % self.shards.len(), &part);
        }
        self.entries.push((name.as_bytes().to_vec(), full));
    }

    fn index(&self) -> Vec<u8> {
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), pw::header(&self.header))];
        all.extend(self.entries.iter().map(|(k, e)| (k.clone(), pw::entry(e))));
        all.sort();
        table(&all, 4)
    }
}

/// The C-order bytes of the block `cut` of a tensor.
fn gather(dims: &[i64], element: usize, bytes: &[u8], cut: &[(i64, i64)]) -> Vec<u8> {
    let n: i64 = cut.iter().map(|c| c.1).product();
    let mut out = Vec::new();
    for flat in 0..n {
        let mut rest = flat;
        let mut idx = vec![0i64; dims.len()];
        for d in (0..dims.len()).rev() {
            idx[d] = cut[d].0 + rest % cut[d].1;
            rest /= cut[d].1;
        }
        let mut off = 0i64;
        for d in 0..dims.len() {
            off = off * dims[d] + idx[d];
        }
        let at = off as usize * element;
        out.extend_from_slice(&bytes[at..at + element]);
    }
    out
}

fn open_with(index: &[u8], shards: &[Vec<u8>]) -> Result<Opened, TensorflowError> {
    let n = shards.len() as u32;
    open(index, "ckpt", &|name: &str| {
        (0..n)
            .find(|&i| data_file_name("ckpt", i, n) == name)
            .map(|i| shards[i as usize].len() as u64)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, name.to_owned()))
    })
}

fn read(t: &Tensor, index: &[u8], shards: &[Vec<u8>]) -> Result<Vec<u8>, DecodeError> {
    let mut files: Vec<&[u8]> = vec![index];
    files.extend(shards.iter().map(Vec::as_slice));
    let Data::Decoded(d) = &t.data else {
        panic!("every TensorFlow tensor is decoded");
    };
    let mut out = Vec::new();
    d.decode(&files, &CancelToken::new(), &mut |b| {
        out.extend_from_slice(b);
        Ok(())
    })?;
    Ok(out)
}

fn f32s(xs: impl IntoIterator<Item = f32>) -> Vec<u8> {
    xs.into_iter().flat_map(f32::to_le_bytes).collect()
}

// ---------------------------------------------------------------- good bundles

#[test]
fn a_bundle_of_every_dtype_over_two_shards() {
    let mut w = Writer::new(2);
    let cases: [(&str, i32, Dtype, usize); 14] = [
        ("f32", 1, Dtype::F32, 4),
        ("f64", 2, Dtype::F64, 8),
        ("i32", 3, Dtype::I32, 4),
        ("u8", 4, Dtype::U8, 1),
        ("i16", 5, Dtype::I16, 2),
        ("i8", 6, Dtype::I8, 1),
        ("c64", 8, Dtype::C64, 8),
        ("i64", 9, Dtype::I64, 8),
        ("bool", 10, Dtype::Bool, 1),
        ("bf16", 14, Dtype::BF16, 2),
        ("u16", 17, Dtype::U16, 2),
        ("f16", 19, Dtype::F16, 2),
        ("u32", 22, Dtype::U32, 4),
        ("u64", 23, Dtype::U64, 8),
    ];
    let mut want = Vec::new();
    for (i, (name, dt, _, size)) in cases.iter().enumerate() {
        let key = format!("model/{name}/.ATTRIBUTES/VARIABLE_VALUE");
        let bytes: Vec<u8> = (0..2 * 3 * size).map(|k| (k * 7 + i) as u8 % 2).collect();
        w.add(key.as_bytes(), *dt, &[2, 3], i % 2, &bytes);
        want.push((key, bytes));
    }
    w.add(b"scalar", 1, &[], 0, &f32s([2.5]));
    w.add(b"empty", 1, &[0, 4], 1, &[]);
    w.add(
        b"_CHECKPOINTABLE_OBJECT_GRAPH",
        DT_STRING,
        &[],
        0,
        b"\x05hello",
    );
    let index = w.index();
    assert!(is_index(&index));
    let o = open_with(&index, &w.shards).unwrap();
    assert_eq!(
        o.files,
        ["ckpt.data-00000-of-00002", "ckpt.data-00001-of-00002"]
    );
    assert_eq!(o.facts["num_shards"], json!(2));
    assert_eq!(o.header_len, index.len() as u64);
    let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "tensors come in key order");
    assert_eq!(names.len(), cases.len() + 2);
    for (key, bytes) in &want {
        let t = o.tensors.iter().find(|t| &t.name == key).unwrap();
        let dt = cases
            .iter()
            .find(|c| key.contains(&format!("/{}/", c.0)))
            .unwrap()
            .2;
        assert_eq!(t.dtype, dt, "{key}");
        assert_eq!(t.shape, [2, 3]);
        assert_eq!(&read(t, &index, &w.shards).unwrap(), bytes, "{key}");
    }
    let scalar = o.tensors.iter().find(|t| t.name == "scalar").unwrap();
    assert!(scalar.shape.is_empty());
    assert_eq!(read(scalar, &index, &w.shards).unwrap(), f32s([2.5]));
    let empty = o.tensors.iter().find(|t| t.name == "empty").unwrap();
    assert_eq!(empty.shape, [0, 4]);
    assert!(read(empty, &index, &w.shards).unwrap().is_empty());
    let graph = o
        .metadata
        .iter()
        .find(|(k, _)| k == "_CHECKPOINTABLE_OBJECT_GRAPH")
        .unwrap();
    assert!(
        graph.1.as_str().unwrap().contains("6 bytes"),
        "{:?}",
        graph.1
    );
    assert!(o.metadata.iter().any(|(k, _)| k == "bundle_version"));
}

#[test]
fn partitioned_tensors_are_assembled_from_their_slices() {
    let mut w = Writer::new(2);
    // [5, 3] cut in rows 0..2 and 2..5; [4, 6] in a 2 x 2 grid of uneven cells.
    let a: Vec<u8> = f32s((0..15).map(|x| x as f32));
    w.add_sliced(
        "a",
        1,
        &[5, 3],
        4,
        &a,
        &[vec![(0, 2), (0, 3)], vec![(2, 3), (0, 3)]],
    );
    let b: Vec<u8> = (0..24).flat_map(|x: i64| x.to_le_bytes()).collect();
    let grid = [
        vec![(0, 1), (0, 4)],
        vec![(0, 1), (4, 2)],
        vec![(1, 3), (0, 4)],
        vec![(1, 3), (4, 2)],
    ];
    w.add_sliced("b", 9, &[4, 6], 8, &b, &grid);
    let index = w.index();
    let o = open_with(&index, &w.shards).unwrap();
    let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"], "slice entries are not tensors");
    assert_eq!(o.tensors[0].shape, [5, 3]);
    assert_eq!(read(&o.tensors[0], &index, &w.shards).unwrap(), a);
    assert_eq!(o.tensors[1].dtype, Dtype::I64);
    assert_eq!(read(&o.tensors[1], &index, &w.shards).unwrap(), b);
    let Data::Decoded(d) = &o.tensors[1].data else {
        unreachable!()
    };
    assert_eq!(d.ranges().len(), 4);
}

#[test]
fn a_whole_dimension_slice_has_no_length() {
    let mut w = Writer::new(1);
    let a: Vec<u8> = f32s((0..6).map(|x| x as f32));
    // Rows 0..1 and 1..2, each of every column (no length: the whole dimension).
    let mut full = Entry {
        dtype: 1,
        dims: vec![2, 3],
        ..Entry::default()
    };
    for r in 0..2 {
        let extents = vec![
            Extent {
                start: r,
                length: Some(1),
            },
            Extent {
                start: 0,
                length: None,
            },
        ];
        let key = slices::slice_key(b"v", &extents);
        w.add(&key, 1, &[1, 3], 0, &a[r as usize * 12..][..12]);
        full.slices.push(extents);
    }
    w.entries.push((b"v".to_vec(), full));
    let index = w.index();
    let o = open_with(&index, &w.shards).unwrap();
    assert_eq!(read(&o.tensors[0], &index, &w.shards).unwrap(), a);
}

#[test]
fn many_entries_over_many_blocks() {
    let mut w = Writer::new(1);
    for i in 0..500 {
        w.add(
            format!("layer_{i:04}/kernel").as_bytes(),
            3,
            &[1],
            0,
            &(i as i32).to_le_bytes(),
        );
    }
    let index = w.index();
    let o = open_with(&index, &w.shards).unwrap();
    assert_eq!(o.tensors.len(), 500);
    assert_eq!(
        read(&o.tensors[321], &index, &w.shards).unwrap(),
        321i32.to_le_bytes()
    );
}

// ---------------------------------------------------------------- hostile bundles

fn one_tensor() -> Writer {
    let mut w = Writer::new(1);
    w.add(b"w", 1, &[2], 0, &f32s([1.0, 2.0]));
    w
}

fn kind(r: Result<Opened, TensorflowError>) -> &'static str {
    match r {
        Ok(_) => "opened",
        Err(e) => {
            // Every message names something.
            assert!(!e.to_string().is_empty());
            e.kind()
        }
    }
}

#[test]
fn empty_and_short_indexes_are_refused() {
    assert_eq!(kind(open_with(&[], &[])), "TooShort");
    assert_eq!(kind(open_with(&[0; 47], &[])), "TooShort");
    assert!(!is_index(&[]));
    assert!(!is_index(&MAGIC.to_le_bytes()));
}

#[test]
fn a_bad_footer_magic_is_refused() {
    let w = one_tensor();
    let mut index = w.index();
    let n = index.len();
    index[n - 1] ^= 1;
    assert!(!is_index(&index));
    assert_eq!(kind(open_with(&index, &w.shards)), "BadMagic");
}

#[test]
fn an_index_handle_past_the_end_is_refused() {
    let w = one_tensor();
    let index = w.index();
    let n = index.len();
    let mut bad = index[..n - 48].to_vec();
    let mut footer = handle_bytes((0, 0));
    footer.extend(handle_bytes((10, 1 << 40)));
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    bad.extend(footer);
    let e = open_with(&bad, &w.shards).unwrap_err();
    assert_eq!(e.kind(), "BlockOutOfBounds");
    assert!(e.to_string().contains("index block"), "{e}");
    // Offset plus size overflowing u64.
    let mut bad = index[..n - 48].to_vec();
    let mut footer = handle_bytes((0, 0));
    footer.extend(handle_bytes((u64::MAX - 2, 10)));
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    bad.extend(footer);
    assert_eq!(kind(open_with(&bad, &w.shards)), "BlockOutOfBounds");
}

#[test]
fn a_block_whose_crc_does_not_match_is_refused() {
    let w = one_tensor();
    let mut index = w.index();
    // The first data block starts at 0; its first entry's key byte is at 3.
    index[3] ^= 0x20;
    let e = open_with(&index, &w.shards).unwrap_err();
    assert_eq!(e.kind(), "ChecksumMismatch");
    assert!(e.to_string().contains("data block at bytes 0.."), "{e}");
}

#[test]
fn a_compressed_block_is_refused() {
    let contents = encode_block(&[(Vec::new(), pw::header(&one_tensor().header))], 16);
    let mut file = Vec::new();
    file.extend_from_slice(&contents);
    file.push(1); // snappy
    let c = crc::mask(crc::extend(crc::value(&contents), &[1]));
    file.extend_from_slice(&c.to_le_bytes());
    let meta = put_block(&mut file, &encode_block(&[], 16));
    let idx = put_block(
        &mut file,
        &encode_block(
            &[(b"\xff".to_vec(), handle_bytes((0, contents.len() as u64)))],
            1,
        ),
    );
    let mut footer = handle_bytes(meta);
    footer.extend(handle_bytes(idx));
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    file.extend(footer);
    assert_eq!(kind(open_with(&file, &[])), "UnsupportedCompression");
}

#[test]
fn a_shard_id_past_num_shards_is_refused() {
    let mut w = one_tensor();
    w.entries[0].1.shard_id = 1;
    let e = open_with(&w.index(), &w.shards).unwrap_err();
    assert_eq!(e.kind(), "ShardOutOfRange");
    assert_eq!(e.tensor(), Some("w"));
    w.entries[0].1.shard_id = -1;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "ShardOutOfRange");
}

#[test]
fn data_past_the_end_of_its_file_is_refused() {
    let mut w = one_tensor();
    w.entries[0].1.offset = 4;
    let e = open_with(&w.index(), &w.shards).unwrap_err();
    assert_eq!(e.kind(), "DataOutsideFile");
    assert!(
        e.to_string()
            .contains("bytes 4..12 of ckpt.data-00000-of-00001, which is 8 bytes"),
        "{e}"
    );
    w.entries[0].1.offset = i64::MAX;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "DataOutsideFile");
    w.entries[0].1.offset = -8;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "SizeMismatch");
}

#[test]
fn a_missing_data_file_is_refused() {
    let w = one_tensor();
    assert_eq!(kind(open_with(&w.index(), &[])), "DataFileMissing");
    let index = w.index();
    let r = open(&index, "ckpt", &|_| Err(std::io::Error::other("gone")));
    assert_eq!(kind(r), "DataFileMissing");
}

#[test]
fn a_size_other_than_the_shape_needs_is_refused() {
    let mut w = one_tensor();
    w.entries[0].1.dims = vec![3];
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "SizeMismatch");
    w.entries[0].1.dims = vec![-1];
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadShape");
    w.entries[0].1.dims = vec![2];
    w.entries[0].1.unknown_rank = true;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadShape");
    w.entries[0].1.unknown_rank = false;
    w.entries[0].1.dims = vec![1 << 62, 1 << 62];
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadShape");
}

#[test]
fn a_data_crc_mismatch_opens_but_does_not_decode() {
    let mut w = one_tensor();
    w.shards[0][5] ^= 1;
    let index = w.index();
    let o = open_with(&index, &w.shards).unwrap();
    let e = read(&o.tensors[0], &index, &w.shards).unwrap_err();
    let DecodeError::Invalid { kind, message } = e else {
        panic!("{e:?}")
    };
    assert_eq!(kind, "ChecksumMismatch");
    assert!(
        message.contains("\"w\"") && message.contains("bytes 0..8 of shard 0"),
        "{message}"
    );
    // Given fewer files than the tensor needs, or a shorter one.
    let Data::Decoded(d) = &o.tensors[0].data else {
        unreachable!()
    };
    let sink = &mut |_: &[u8]| Ok(());
    assert!(d.decode(&[&index], &CancelToken::new(), sink).is_err());
    assert!(
        d.decode(&[&index, &[0u8; 4]], &CancelToken::new(), sink)
            .is_err()
    );
    let cancel = CancelToken::new();
    cancel.cancel();
    assert!(matches!(
        d.decode(&[&index, &w.shards[0]], &cancel, sink),
        Err(DecodeError::Cancelled)
    ));
}

#[test]
fn keys_out_of_order_are_refused() {
    let w = one_tensor();
    let h = pw::header(&w.header);
    let e = pw::entry(&w.entries[0].1);
    let unsorted = [
        (Vec::new(), h.clone()),
        (b"b".to_vec(), e.clone()),
        (b"a".to_vec(), e.clone()),
    ];
    assert_eq!(
        kind(open_with(&table(&unsorted, 8), &w.shards)),
        "KeysOutOfOrder"
    );
    // Across blocks, and a repeated key.
    assert_eq!(
        kind(open_with(&table(&unsorted, 2), &w.shards)),
        "KeysOutOfOrder"
    );
    let repeated = [
        (Vec::new(), h),
        (b"a".to_vec(), e.clone()),
        (b"a".to_vec(), e),
    ];
    assert_eq!(
        kind(open_with(&table(&repeated, 8), &w.shards)),
        "KeysOutOfOrder"
    );
}

#[test]
fn broken_blocks_are_refused() {
    let w = one_tensor();
    let h = pw::header(&w.header);
    let good = encode_block(&[(Vec::new(), h.clone())], 16);
    let with = |contents: Vec<u8>| table_of_blocks(&[(contents, b"\xff".to_vec())]);
    assert_eq!(kind(open_with(&with(good.clone()), &w.shards)), "opened");
    // A truncated varint in the entry's lengths.
    let mut b = vec![0x80];
    b.extend(0u32.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    let e = open_with(&with(b), &w.shards).unwrap_err();
    assert_eq!(e.kind(), "BadBlock");
    assert!(e.to_string().contains("truncated varint"), "{e}");
    // A restart count larger than the block.
    let mut b = good.clone();
    let n = b.len();
    b[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
    assert_eq!(kind(open_with(&with(b), &w.shards)), "BadBlock");
    // A restart point past the entries, or not at an entry.
    for r in [200u32, 1] {
        let mut b = good.clone();
        let n = b.len();
        b[n - 8..n - 4].copy_from_slice(&r.to_le_bytes());
        let e = open_with(&with(b), &w.shards).unwrap_err();
        assert!(e.to_string().contains("restart point"), "{e}");
    }
    // A value longer than the block.
    let mut b = vec![0, 0, 100];
    b.extend(0u32.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    assert_eq!(kind(open_with(&with(b), &w.shards)), "BadBlock");
    // A key sharing more than the previous key has.
    let mut b = vec![0, 1, 0, b'a', 5, 1, 0, b'b'];
    b.extend(0u32.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    assert_eq!(kind(open_with(&with(b), &w.shards)), "BadBlock");
    // Shorter than a restart count; an empty data block.
    assert_eq!(kind(open_with(&with(vec![1, 2]), &w.shards)), "BadBlock");
    assert_eq!(
        kind(open_with(&with(encode_block(&[], 16)), &w.shards)),
        "BadBlock"
    );
    // Entries and no restart point.
    let mut b = good[..good.len() - 8].to_vec();
    b.extend(0u32.to_le_bytes());
    assert_eq!(kind(open_with(&with(b), &w.shards)), "BadBlock");
}

#[test]
fn index_entries_must_agree_with_their_blocks() {
    let w = one_tensor();
    let h = pw::header(&w.header);
    let e = pw::entry(&w.entries[0].1);
    let b1 = encode_block(&[(Vec::new(), h)], 16);
    let b2 = encode_block(&[(b"w".to_vec(), e)], 16);
    // An index key below its block's last key.
    let t = table_of_blocks(&[(b1.clone(), Vec::new()), (b2.clone(), b"a".to_vec())]);
    assert_eq!(kind(open_with(&t, &w.shards)), "BadBlock");
    assert_eq!(
        kind(open_with(
            &table_of_blocks(&[(b1.clone(), Vec::new()), (b2, b"w".to_vec())]),
            &w.shards
        )),
        "opened"
    );
    // Two index entries pointing at one block.
    let mut file = Vec::new();
    let h1 = put_block(&mut file, &b1);
    let meta = put_block(&mut file, &encode_block(&[], 16));
    let idx = put_block(
        &mut file,
        &encode_block(
            &[
                (b"a".to_vec(), handle_bytes(h1)),
                (b"b".to_vec(), handle_bytes(h1)),
            ],
            1,
        ),
    );
    let mut footer = handle_bytes(meta);
    footer.extend(handle_bytes(idx));
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    file.extend(footer);
    assert_eq!(kind(open_with(&file, &w.shards)), "BadBlock");
}

#[test]
fn header_rules() {
    let mut w = one_tensor();
    w.header.endianness = 1;
    assert_eq!(
        kind(open_with(&w.index(), &w.shards)),
        "UnsupportedEndianness"
    );
    w.header.endianness = 0;
    w.header.min_consumer = 2;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "UnsupportedVersion");
    w.header.min_consumer = 0;
    w.header.bad_consumers = vec![1];
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "UnsupportedVersion");
    w.header.bad_consumers = vec![];
    w.header.num_shards = -3;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadShardCount");
    w.header.num_shards = i32::MAX;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadShardCount");
    // No header at all.
    let e = pw::entry(&w.entries[0].1);
    assert_eq!(
        kind(open_with(&table(&[(b"w".to_vec(), e)], 4), &w.shards)),
        "MissingHeader"
    );
    // A header that is not a message.
    assert_eq!(
        kind(open_with(&table(&[(Vec::new(), vec![0x0b])], 4), &w.shards)),
        "BadProto"
    );
}

#[test]
fn refused_dtypes_name_the_tensor() {
    for (dt, name) in [
        (18, "DT_COMPLEX128"),
        (11, "DT_QINT8"),
        (20, "DT_RESOURCE"),
        (21, "DT_VARIANT"),
        (0, "DT_INVALID"),
        (99, "unknown"),
    ] {
        let mut w = one_tensor();
        w.entries[0].1.dtype = dt;
        let e = open_with(&w.index(), &w.shards).unwrap_err();
        assert_eq!(e.kind(), "UnsupportedDtype");
        assert_eq!(e.tensor(), Some("w"));
        assert!(e.to_string().contains(name), "{e}");
    }
}

#[test]
fn a_binary_key_that_is_not_a_slice_is_refused() {
    let mut w = one_tensor();
    w.entries[0].0 = b"w\xff".to_vec();
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "KeyNotUtf8");
}

#[test]
fn slice_faults_are_refused() {
    let a: Vec<u8> = f32s((0..15).map(|x| x as f32));
    let two = [vec![(0, 2), (0, 3)], vec![(2, 3), (0, 3)]];
    // A slice missing.
    let mut w = Writer::new(1);
    w.add_sliced("a", 1, &[5, 3], 4, &a, &two);
    w.entries.remove(0);
    let e = open_with(&w.index(), &w.shards).unwrap_err();
    assert_eq!(e.kind(), "SliceMissing");
    assert!(e.to_string().contains("0,2:0,3"), "{e}");
    // Overlap, an incomplete cover, a slice outside the shape.
    for cuts in [
        vec![vec![(0, 3), (0, 3)], vec![(2, 3), (0, 3)]],
        vec![vec![(0, 2), (0, 3)]],
        vec![vec![(0, 2), (0, 3)], vec![(2, 4), (0, 3)]],
    ] {
        let mut w = Writer::new(1);
        let big: Vec<u8> = f32s((0..18).map(|x| x as f32));
        w.add_sliced("a", 1, &[6, 3], 4, &big, &cuts);
        w.entries.last_mut().unwrap().1.dims = vec![5, 3];
        assert_eq!(
            kind(open_with(&w.index(), &w.shards)),
            "BadSlice",
            "{cuts:?}"
        );
    }
    // A slice entry of another dtype.
    let mut w = Writer::new(1);
    w.add_sliced("a", 1, &[5, 3], 4, &a, &two);
    w.entries[0].1.dtype = 3;
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadSlice");
    // A slice with the wrong number of extents; a partitioned scalar.
    let mut w = Writer::new(1);
    w.add_sliced("a", 1, &[5, 3], 4, &a, &two);
    w.entries.last_mut().unwrap().1.slices[0].pop();
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadSlice");
    w.entries.last_mut().unwrap().1.dims = vec![];
    assert_eq!(kind(open_with(&w.index(), &w.shards)), "BadSlice");
    // A slice whose data CRC is wrong opens, and fails to decode.
    let mut w = Writer::new(1);
    w.add_sliced("a", 1, &[5, 3], 4, &a, &two);
    w.shards[0][30] ^= 4;
    let index = w.index();
    let o = open_with(&index, &w.shards).unwrap();
    assert!(matches!(
        read(&o.tensors[0], &index, &w.shards),
        Err(DecodeError::Invalid {
            kind: "ChecksumMismatch",
            ..
        })
    ));
}
