//! The hostile inputs, each refused with its kind (or, for a data CRC,
//! opened and refused when decoded).

use super::*;

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
#[allow(
    clippy::many_single_char_names,
    reason = "short-lived blocks in a row of cases"
)]
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

/// A small deterministic generator (xorshift64*), for mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Flips, sets, inserts or removes a few bytes of `v`.
fn mutate(rng: &mut Rng, v: &mut Vec<u8>) {
    for _ in 0..=rng.below(3) {
        let at = rng.below(v.len());
        match rng.below(5) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.below(8),
            1 if !v.is_empty() => v[at] = [0, 0x7f, 0x80, 0xff][rng.below(4)],
            2 => v.insert(at.min(v.len()), rng.next() as u8),
            3 if !v.is_empty() => {
                v.remove(at);
            }
            _ => v.truncate(at),
        }
    }
}

/// Opens `index` over `shards` and decodes every tensor: never a panic.
fn open_and_read_all(index: &[u8], shards: &[Vec<u8>]) -> bool {
    let Ok(o) = open_with(index, shards) else {
        return false;
    };
    for t in &o.tensors {
        let n = t.dtype.byte_len(&t.shape).unwrap_or(u64::MAX);
        if let Ok(bytes) = read(t, index, shards) {
            assert_eq!(bytes.len() as u64, n, "{}", t.name);
        }
    }
    true
}

#[test]
fn mutated_entries_and_blocks_never_panic() {
    let mut w = Writer::new(2);
    w.add(b"w", 1, &[2], 0, &f32s([1.0, 2.0]));
    w.add(b"s", DT_STRING, &[], 1, b"\x01x");
    let a: Vec<u8> = f32s((0..15).map(|x| x as f32));
    w.add_sliced(
        "a",
        1,
        &[5, 3],
        4,
        &a,
        &[vec![(0, 2), (0, 3)], vec![(2, 3), (0, 3)]],
    );
    let mut all: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), pw::header(&w.header))];
    all.extend(w.entries.iter().map(|(k, e)| (k.clone(), pw::entry(e))));
    all.sort();
    assert!(open_and_read_all(&table(&all, 2), &w.shards));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut opened = 0;
    for round in 0..3000 {
        let mut entries = all.clone();
        let i = rng.below(entries.len());
        if round % 3 == 0 {
            mutate(&mut rng, &mut entries[i].0);
            entries.sort();
        } else {
            mutate(&mut rng, &mut entries[i].1);
        }
        let index = if round % 5 == 0 {
            // The block's bytes themselves, re-checksummed.
            let mut b = encode_block(&entries, 2);
            mutate(&mut rng, &mut b);
            table_of_blocks(&[(b, b"\xff".to_vec())])
        } else {
            table(&entries, 1 + rng.below(4))
        };
        let mut shards = w.shards.clone();
        if round % 7 == 0 {
            let s = rng.below(2);
            mutate(&mut rng, &mut shards[s]);
        }
        opened += usize::from(open_and_read_all(&index, &shards));
    }
    // Some mutations keep the bundle readable (an unknown field, a value).
    assert!(opened > 100, "{opened}");
}
