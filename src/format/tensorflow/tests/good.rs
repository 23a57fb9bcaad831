//! Bundles written in code and read back exactly.

use super::*;

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
#[allow(
    clippy::many_single_char_names,
    reason = "tensors a and b, as the comment names them"
)]
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
    for i in 0..500i32 {
        w.add(
            format!("layer_{i:04}/kernel").as_bytes(),
            3,
            &[1],
            0,
            &i.to_le_bytes(),
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
