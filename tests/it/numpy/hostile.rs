//! `.npy` files built here from bytes (NUMPY.md, "Header rules" and
//! "Hostile inputs"): broken headers and impossible sizes, which every verb
//! refuses with one error document and no output; and unusual headers that
//! numpy accepts and so must Tensorscope (quotes, key order, spacing, an odd
//! data offset, a 70 KB header, Fortran order).

use super::{
    assert_refused_by_every_verb, export, f32_data, info, npy_bytes, npy_file, read_exported_npy,
    resave, stats, validate, write_file,
};

/// The header of a one-dimensional `<f4` array of two elements, as numpy
/// writes it: the part every broken case keeps intact.
const GOOD_HEADER: &[u8] = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";

/// `(file stem, bytes)` of every hostile `.npy`.
fn hostile_npys() -> Vec<(&'static str, Vec<u8>)> {
    let data = f32_data(2);
    let v1 = |dict: &str| npy_bytes((1, 0), format!("{dict}\n").as_bytes(), &data);
    let mut bad_magic = npy_file("<f4", "(2,)", &data);
    bad_magic[5] = b'Z';
    // A 1.0 header length of 60,000 in a 100-byte file.
    let mut past_end = b"\x93NUMPY\x01\x00".to_vec();
    past_end.extend_from_slice(&60_000u16.to_le_bytes());
    past_end.extend_from_slice(GOOD_HEADER);
    past_end.resize(100, b' ');
    // A 2.0 header length of 4 GB in a 100-byte file.
    let mut four_gb = b"\x93NUMPY\x02\x00".to_vec();
    four_gb.extend_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    four_gb.extend_from_slice(GOOD_HEADER);
    four_gb.resize(100, b' ');
    let mut bad_utf8 = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }".to_vec();
    bad_utf8.extend_from_slice(b"  \xff\xfe\xc3 \n");
    vec![
        ("bad_magic", bad_magic),
        ("version_4_0", npy_bytes((4, 0), GOOD_HEADER, &data)),
        ("version_1_1", npy_bytes((1, 1), GOOD_HEADER, &data)),
        (
            "a_call_not_a_dict",
            v1("dict(descr='<f4', fortran_order=False, shape=(2,))"),
        ),
        ("missing_key", v1("{'descr': '<f4', 'shape': (2,)}")),
        (
            "extra_key",
            v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 0}"),
        ),
        (
            "fortran_order_1",
            v1("{'descr': '<f4', 'fortran_order': 1, 'shape': (2,)}"),
        ),
        (
            "fortran_order_a_string",
            v1("{'descr': '<f4', 'fortran_order': 'False', 'shape': (2,)}"),
        ),
        (
            "shape_a_list",
            v1("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}"),
        ),
        (
            "shape_of_floats",
            v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}"),
        ),
        (
            "header_not_closed",
            v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"),
        ),
        ("invalid_utf8_in_3_0", npy_bytes((3, 0), &bad_utf8, &data)),
        ("unknown_descr_z8", npy_file("<z8", "(2,)", &[0; 16])),
        ("truncated_data", npy_file("<f4", "(100,)", &data)),
        ("header_length_past_the_end", past_end),
        ("header_length_4_gb", four_gb),
        (
            "element_count_overflows",
            npy_file("<f4", "(4294967296, 4294967296, 2)", &data),
        ),
        (
            "byte_size_overflows",
            npy_file("<f8", "(4611686018427387904,)", &data),
        ),
        (
            "dimension_beyond_u64",
            npy_file("<f4", "(18446744073709551616,)", &data),
        ),
        ("negative_dimension", npy_file("<f4", "(-1, 2)", &data)),
        ("empty_file", Vec::new()),
        ("magic_cut_short", b"\x93NUM".to_vec()),
        ("no_header_length", b"\x93NUMPY\x01\x00".to_vec()),
    ]
}

#[test]
fn every_verb_refuses_each_hostile_npy() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (stem, bytes) in hostile_npys() {
        let path = write_file(dir.path(), &format!("{stem}.npy"), &bytes);
        assert_refused_by_every_verb(&path, stem, None);
    }
}

/// A `.npy` that numpy reads, and the tensor it holds.
struct Valid {
    stem: &'static str,
    bytes: Vec<u8>,
    dtype: &'static str,
    shape: Vec<u64>,
    /// The values in C order, little-endian.
    c_le: Vec<u8>,
}

fn unusual_valid_npys() -> Vec<Valid> {
    let f64s: Vec<u8> = [1.5f64, -2.0, 0.25]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    // Double quotes, other key order, no trailing comma, no padding: the F64
    // data starts at an odd offset.
    let mut odd = String::from(r#"{"shape": (3,), "fortran_order": False, "descr": "<f8"}"#);
    if (10 + odd.len() + 1).is_multiple_of(2) {
        odd.push(' ');
    }
    odd.push('\n');
    assert!(!(10 + odd.len()).is_multiple_of(2));

    // Spaces everywhere and Fortran order: [[1, 2, 3], [4, 5, 6]] stored by columns.
    let i16s = |v: &[i16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let spaced = "{ 'descr' : '<i2' ,  'fortran_order' : True , 'shape' : ( 2 , 3 ) , }   \n";

    // A 70 KB header (format 2.0), big-endian U32.
    let u32s = [1u32, 256, 65_536, u32::MAX];
    let mut long = String::from("{'descr': '>u4', 'fortran_order': False, 'shape': (2, 2), }");
    long.push_str(&" ".repeat(70_000));
    long.push('\n');

    vec![
        Valid {
            stem: "double_quotes_odd_offset",
            bytes: npy_bytes((1, 0), odd.as_bytes(), &f64s),
            dtype: "F64",
            shape: vec![3],
            c_le: f64s.clone(),
        },
        Valid {
            stem: "spaced_fortran",
            bytes: npy_bytes((1, 0), spaced.as_bytes(), &i16s(&[1, 4, 2, 5, 3, 6])),
            dtype: "I16",
            shape: vec![2, 3],
            c_le: i16s(&[1, 2, 3, 4, 5, 6]),
        },
        Valid {
            stem: "long_header_2_0",
            bytes: npy_bytes(
                (2, 0),
                long.as_bytes(),
                &u32s
                    .iter()
                    .flat_map(|x| x.to_be_bytes())
                    .collect::<Vec<u8>>(),
            ),
            dtype: "U32",
            shape: vec![2, 2],
            c_le: u32s.iter().flat_map(|x| x.to_le_bytes()).collect(),
        },
        Valid {
            stem: "scalar_3_0",
            bytes: npy_bytes(
                (3, 0),
                b"{'descr': '<f4', 'fortran_order': False, 'shape': ()}\n",
                &(-0.5f32).to_le_bytes(),
            ),
            dtype: "F32",
            shape: vec![],
            c_le: (-0.5f32).to_le_bytes().to_vec(),
        },
        Valid {
            stem: "empty_u8_2_0",
            bytes: npy_bytes(
                (2, 0),
                b"{'descr': '|u1', 'fortran_order': True, 'shape': (2, 0), }\n",
                &[],
            ),
            dtype: "U8",
            shape: vec![2, 0],
            c_le: Vec::new(),
        },
    ]
}

#[test]
fn unusual_but_valid_headers_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    for case in unusual_valid_npys() {
        let what = case.stem;
        let path = write_file(dir.path(), &format!("{what}.npy"), &case.bytes);

        let o = info(&path);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        let tensors = o.doc["tensors"].as_array().expect("tensors");
        assert_eq!(tensors.len(), 1, "{what}: {}", o.doc);
        assert_eq!(tensors[0]["name"], what, "{what}: {}", o.doc);
        assert_eq!(tensors[0]["dtype"], case.dtype, "{what}: {}", o.doc);
        assert_eq!(tensors[0]["shape"], serde_json::json!(case.shape), "{what}");

        let o = validate(&path);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        assert_eq!(o.doc["valid"], true, "{what}: {}", o.doc);

        let o = stats(&path, &[]);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        let numel: u64 = case.shape.iter().product();
        assert_eq!(o.doc["tensors"][0]["count"], numel, "{what}: {}", o.doc);

        let out = dir.path().join(format!("{what}.out.npy"));
        let o = export(&path, what, &out);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        let npy = read_exported_npy(&out);
        assert_eq!(npy.shape, case.shape, "{what}");
        assert!(npy.data == case.c_le, "{what}: exported values differ");

        let out = dir.path().join(format!("{what}.safetensors"));
        let o = resave(&path, &out);
        assert_eq!(o.code, 0, "{what}: {}", o.doc);
        let bytes = std::fs::read(&out).expect("read the resaved file");
        let st = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors reads it");
        let view = st.tensor(what).expect("the tensor");
        assert_eq!(view.dtype().to_string(), case.dtype, "{what}");
        assert!(
            view.data() == case.c_le.as_slice(),
            "{what}: resaved bytes differ"
        );
    }
}
