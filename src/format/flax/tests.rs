//! The Flax reader on files written in code by a tiny msgpack writer: the
//! naming rules, every dtype, chunked arrays, and every hostile class of
//! FRAMEWORKS.md. The real files Flax writes are in `fixtures.rs`.

use std::time::{Duration, Instant};

use super::msgpack::{MAX_DEPTH, Parser, Value};
use super::*;
use crate::dtype::Dtype;
use crate::format::decode::{Data, Decode, DecodeError};
use crate::jobs::CancelToken;

/// A msgpack value to write.
#[derive(Debug, Clone)]
pub(super) enum M {
    Nil,
    Bool(bool),
    U(u64),
    I(i64),
    F(f64),
    S(String),
    B(Vec<u8>),
    A(Vec<M>),
    Map(Vec<(M, M)>),
    Ext(i8, Vec<u8>),
}

pub(super) fn s(x: &str) -> M {
    M::S(x.to_owned())
}

pub(super) fn map(pairs: Vec<(&str, M)>) -> M {
    M::Map(pairs.into_iter().map(|(k, v)| (s(k), v)).collect())
}

fn len_head(out: &mut Vec<u8>, n: usize, fix: Option<(u8, usize)>, codes: [u8; 3]) {
    match fix {
        Some((base, max)) if n <= max => out.push(base | n as u8),
        _ if n <= 0xff && codes[0] != 0 => out.extend([codes[0], n as u8]),
        _ if n <= 0xffff => {
            out.push(codes[1]);
            out.extend((n as u16).to_be_bytes());
        }
        _ => {
            out.push(codes[2]);
            out.extend((n as u32).to_be_bytes());
        }
    }
}

/// Writes `m` in msgpack's shortest forms.
pub(super) fn enc(m: &M, out: &mut Vec<u8>) {
    match m {
        M::Nil => out.push(0xc0),
        M::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        M::U(u) if *u < 0x80 => out.push(*u as u8),
        M::U(u) if *u <= 0xff => out.extend([0xcc, *u as u8]),
        M::U(u) if *u <= 0xffff => {
            out.push(0xcd);
            out.extend((*u as u16).to_be_bytes());
        }
        M::U(u) if *u <= 0xffff_ffff => {
            out.push(0xce);
            out.extend((*u as u32).to_be_bytes());
        }
        M::U(u) => {
            out.push(0xcf);
            out.extend(u.to_be_bytes());
        }
        M::I(i) if (-32..0).contains(i) => out.push(*i as u8),
        M::I(i) => {
            out.push(0xd3);
            out.extend(i.to_be_bytes());
        }
        M::F(f) => {
            out.push(0xcb);
            out.extend(f.to_be_bytes());
        }
        M::S(x) => {
            len_head(out, x.len(), Some((0xa0, 31)), [0xd9, 0xda, 0xdb]);
            out.extend(x.as_bytes());
        }
        M::B(b) => {
            len_head(out, b.len(), None, [0xc4, 0xc5, 0xc6]);
            out.extend(b);
        }
        M::A(items) => {
            len_head(out, items.len(), Some((0x90, 15)), [0, 0xdc, 0xdd]);
            for i in items {
                enc(i, out);
            }
        }
        M::Map(pairs) => {
            len_head(out, pairs.len(), Some((0x80, 15)), [0, 0xde, 0xdf]);
            for (k, v) in pairs {
                enc(k, out);
                enc(v, out);
            }
        }
        M::Ext(code, data) => {
            match data.len() {
                1 => out.push(0xd4),
                2 => out.push(0xd5),
                4 => out.push(0xd6),
                8 => out.push(0xd7),
                16 => out.push(0xd8),
                n => len_head(out, n, None, [0xc7, 0xc8, 0xc9]),
            }
            out.push(*code as u8);
            out.extend(data);
        }
    }
}

pub(super) fn bytes_of(m: &M) -> Vec<u8> {
    let mut out = Vec::new();
    enc(m, &mut out);
    out
}

/// An ndarray ext (`code` 1, or 3 for a numpy scalar).
pub(super) fn nd_ext(code: i8, shape: &[u64], dtype: &str, data: &[u8]) -> M {
    let payload = M::A(vec![
        M::A(shape.iter().map(|&d| M::U(d)).collect()),
        s(dtype),
        M::B(data.to_vec()),
    ]);
    M::Ext(code, bytes_of(&payload))
}

pub(super) fn nd(shape: &[u64], dtype: &str, data: &[u8]) -> M {
    nd_ext(1, shape, dtype, data)
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// A tensor's bytes: the plain range, or the decoder's output.
pub(super) fn tensor_bytes(file: &[u8], t: &Tensor) -> Vec<u8> {
    match &t.data {
        Data::Plain {
            file: 0,
            range,
            big_endian: false,
        } => file[range.start as usize..range.end as usize].to_vec(),
        Data::Plain { .. } => panic!("{}: an unexpected plain form", t.name),
        Data::Decoded(d) => {
            let mut out = Vec::new();
            d.decode(&[file], &CancelToken::new(), &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .expect("decodes");
            out
        }
    }
}

fn refused(bytes: &[u8]) -> FlaxError {
    let start = Instant::now();
    let e = open(bytes).expect_err("refused");
    assert!(start.elapsed() < Duration::from_secs(2), "{e}: slow");
    e
}

fn meta<'o>(o: &'o Opened, name: &str) -> &'o serde_json::Value {
    &o.metadata
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no metadata {name}"))
        .1
}

#[test]
fn a_state_dict_is_named_by_joined_keys() {
    let kernel = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let bias = f32s(&[0.5, -0.5, 0.0]);
    let file = bytes_of(&map(vec![
        (
            "params",
            map(vec![(
                "Dense_0",
                map(vec![
                    ("kernel", nd(&[2, 3], "float32", &kernel)),
                    ("bias", nd(&[3], "float32", &bias)),
                ]),
            )]),
        ),
        ("step", M::U(5)),
        ("neg", M::I(-3)),
        ("lr", M::F(0.25)),
        ("nan", M::F(f64::NAN)),
        ("name", s("adam")),
        ("flag", M::Bool(true)),
        ("none", M::Nil),
        ("blob", M::B(vec![1, 2, 3])),
        ("c", M::Ext(2, bytes_of(&M::A(vec![M::F(1.5), M::F(-2.0)])))),
        ("scalar", nd_ext(3, &[], "int32", &7i32.to_le_bytes())),
        (
            "ints",
            M::Map(vec![(M::U(7), map(vec![("w", nd(&[1], "uint8", &[9]))]))]),
        ),
        (
            "layers",
            M::A(vec![
                map(vec![("w", nd(&[2], "int16", &[1, 0, 2, 0]))]),
                M::U(3),
            ]),
        ),
    ]));
    let o = open(&file).expect("opens");
    let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "params/Dense_0/kernel",
            "params/Dense_0/bias",
            "scalar",
            "ints/7/w",
            "layers/0/w"
        ]
    );
    let k = &o.tensors[0];
    assert_eq!((k.dtype, k.shape.as_slice()), (Dtype::F32, &[2u64, 3][..]));
    assert_eq!(tensor_bytes(&file, k), kernel);
    assert_eq!(tensor_bytes(&file, &o.tensors[1]), bias);
    let sc = &o.tensors[2];
    assert_eq!((sc.dtype, sc.shape.len()), (Dtype::I32, 0));
    assert_eq!(tensor_bytes(&file, sc), 7i32.to_le_bytes());
    assert_eq!(tensor_bytes(&file, &o.tensors[3]), [9]);
    assert_eq!(o.tensors[4].dtype, Dtype::I16);
    assert_eq!(meta(&o, "step"), &serde_json::json!(5));
    assert_eq!(meta(&o, "neg"), &serde_json::json!(-3));
    assert_eq!(meta(&o, "lr"), &serde_json::json!(0.25));
    assert_eq!(meta(&o, "nan"), &serde_json::Value::Null);
    assert_eq!(meta(&o, "name"), &serde_json::json!("adam"));
    assert_eq!(meta(&o, "flag"), &serde_json::json!(true));
    assert_eq!(meta(&o, "none"), &serde_json::Value::Null);
    assert_eq!(meta(&o, "blob"), &serde_json::json!("<3 bytes>"));
    assert_eq!(meta(&o, "c"), &serde_json::json!([1.5, -2.0]));
    assert_eq!(meta(&o, "layers/1"), &serde_json::json!(3));
    let Data::Plain { range, .. } = &k.data else {
        panic!("plain")
    };
    assert_eq!(o.header_len, range.start);
    assert!(o.warnings.is_empty());
}

#[test]
fn every_dtype_of_the_table_is_read() {
    let table = [
        ("float32", Dtype::F32),
        ("float64", Dtype::F64),
        ("float16", Dtype::F16),
        ("bfloat16", Dtype::BF16),
        ("float8_e4m3fn", Dtype::F8E4M3),
        ("float8_e5m2", Dtype::F8E5M2),
        ("float8_e4m3fnuz", Dtype::F8E4M3Fnuz),
        ("float8_e5m2fnuz", Dtype::F8E5M2Fnuz),
        ("float8_e8m0fnu", Dtype::F8E8M0),
        ("int8", Dtype::I8),
        ("int16", Dtype::I16),
        ("int32", Dtype::I32),
        ("int64", Dtype::I64),
        ("uint8", Dtype::U8),
        ("uint16", Dtype::U16),
        ("uint32", Dtype::U32),
        ("uint64", Dtype::U64),
        ("bool", Dtype::Bool),
        ("complex64", Dtype::C64),
    ];
    for (name, dtype) in table {
        let data: Vec<u8> = (0..dtype.bits() / 8 * 3).map(|i| i as u8).collect();
        let file = bytes_of(&map(vec![("t", nd(&[3], name, &data))]));
        let o = open(&file).expect(name);
        assert_eq!(o.tensors[0].dtype, dtype, "{name}");
        assert_eq!(tensor_bytes(&file, &o.tensors[0]), data, "{name}");
    }
}

fn chunked(shape: &[u64], chunks: Vec<(&str, M)>) -> M {
    map(vec![
        ("__msgpack_chunked_array__", M::Bool(true)),
        (
            "shape",
            M::Map(
                shape
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| (s(&i.to_string()), M::U(d)))
                    .collect(),
            ),
        ),
        ("chunks", map(chunks)),
    ])
}

#[test]
fn a_chunked_array_is_one_tensor_streamed_from_its_chunks() {
    let all: Vec<u8> = (0..24u8).collect();
    // Key order in the file need not be index order.
    let file = bytes_of(&map(vec![(
        "emb",
        chunked(
            &[2, 3],
            vec![
                ("1", nd(&[2], "float32", &all[12..20])),
                ("0", nd(&[3], "float32", &all[..12])),
                ("2", nd(&[1], "float32", &all[20..])),
            ],
        ),
    )]));
    let o = open(&file).expect("opens");
    assert_eq!(o.tensors.len(), 1);
    let t = &o.tensors[0];
    assert_eq!((t.name.as_str(), t.dtype), ("emb", Dtype::F32));
    assert_eq!(t.shape, [2, 3]);
    assert!(matches!(t.data, Data::Decoded(_)));
    assert_eq!(tensor_bytes(&file, t), all);
    assert!(o.metadata.is_empty());
    assert_eq!(o.facts["chunked_arrays"], 1);
    // One chunk is one slice of the file.
    let file = bytes_of(&map(vec![(
        "emb",
        chunked(&[3, 2], vec![("0", nd(&[6], "uint8", &[1, 2, 3, 4, 5, 6]))]),
    )]));
    let o = open(&file).expect("opens");
    assert!(matches!(o.tensors[0].data, Data::Plain { .. }));
    assert_eq!(tensor_bytes(&file, &o.tensors[0]), [1, 2, 3, 4, 5, 6]);
}

#[test]
fn a_chunked_map_inside_a_list_stays_a_map_as_flax_leaves_it() {
    let file = bytes_of(&map(vec![(
        "l",
        M::A(vec![chunked(&[1], vec![("0", nd(&[1], "uint8", &[1]))])]),
    )]));
    let o = open(&file).expect("opens");
    assert_eq!(o.tensors[0].name, "l/0/chunks/0");
    assert_eq!(meta(&o, "l/0/shape/0"), &serde_json::json!(1));
}

#[test]
fn chunked_arrays_that_make_no_tensor_are_refused() {
    let one = || nd(&[2], "uint8", &[1, 2]);
    let cases = [
        chunked(&[4], vec![("0", one()), ("2", one())]),
        chunked(&[4], vec![("0", one()), ("1", nd(&[1], "uint16", &[1, 2]))]),
        chunked(&[5], vec![("0", one()), ("1", one())]),
        chunked(&[4], vec![("0", one()), ("01", one())]),
        chunked(&[4], vec![]),
        chunked(&[4], vec![("0", one()), ("1", M::U(3))]),
        chunked(&[2, 2], vec![("0", nd(&[2, 2], "uint8", &[1, 2, 3, 4]))]),
        map(vec![("__msgpack_chunked_array__", M::Bool(true))]),
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let e = refused(&bytes_of(&map(vec![("x", c)])));
        assert_eq!(
            (e.kind(), e.tensor()),
            ("BadChunkedArray", Some("x")),
            "{i}: {e}"
        );
    }
    let e = refused(&bytes_of(&map(vec![(
        "x",
        chunked(&[4], vec![("0", one())]),
    )])));
    assert!(e.to_string().contains("2 elements"), "{e}");
}

#[test]
fn a_chunked_array_missing_a_chunk_is_refused() {
    let file = bytes_of(&map(vec![(
        "emb",
        chunked(
            &[6],
            vec![
                ("0", nd(&[2], "uint8", &[1, 2])),
                ("1", nd(&[2], "uint8", &[3, 4])),
                ("3", nd(&[2], "uint8", &[5, 6])),
            ],
        ),
    )]));
    let e = refused(&file);
    assert_eq!(e.kind(), "BadChunkedArray");
    assert!(e.to_string().contains("\"2\""), "{e}");
}

#[test]
fn a_bin_of_2_gib_in_a_small_file_is_refused() {
    let mut file = vec![0x81, 0xa1, b'a', 0xc6, 0x80, 0, 0, 0];
    file.extend([0u8; 16]);
    let e = refused(&file);
    assert_eq!(e.kind(), "Truncated");
    assert!(e.to_string().contains("2147483648"), "{e}");
    // Inside an ndarray ext too.
    let mut payload = vec![0x93, 0x91, 0x10, 0xa5];
    payload.extend(b"uint8");
    payload.extend([0xc6, 0x80, 0, 0, 0]);
    let file = bytes_of(&map(vec![("t", M::Ext(1, payload))]));
    assert_eq!(refused(&file).kind(), "Truncated");
}

#[test]
fn a_count_of_2_pow_32_minus_1_is_refused_before_allocating() {
    for head in [0xdf, 0xdd] {
        let mut file = vec![0x81, 0xa1, b'a', head, 0xff, 0xff, 0xff, 0xff];
        file.extend([0u8; 64]);
        let e = refused(&file);
        assert_eq!(e.kind(), "CountTooLarge", "{e}");
    }
    let mut file = vec![0xdf, 0xff, 0xff, 0xff, 0xff];
    file.extend([0u8; 64]);
    assert_eq!(refused(&file).kind(), "CountTooLarge");
}

#[test]
fn nesting_deeper_than_1000_is_refused() {
    let mut file = Vec::new();
    for _ in 0..100_000 {
        file.extend([0x81, 0xa1, b'a']);
    }
    file.push(0xc0);
    let e = refused(&file);
    assert_eq!(e.kind(), "NestingTooDeep");
    // Arrays as well.
    let mut file = vec![0x81, 0xa1, b'a'];
    file.extend(std::iter::repeat_n(0x91, 100_000));
    file.push(0xc0);
    assert_eq!(refused(&file).kind(), "NestingTooDeep");
    // 1000 deep is read.
    let mut file = Vec::new();
    for _ in 0..MAX_DEPTH {
        file.extend([0x81, 0xa1, b'a']);
    }
    file.push(0x01);
    let o = open(&file).expect("1000 deep opens");
    assert_eq!(o.metadata[0].0.len(), 2 * MAX_DEPTH - 1);
}

#[test]
fn an_ext_of_an_unknown_code_is_refused() {
    for code in [0i8, 4, 42, -1] {
        let file = bytes_of(&map(vec![("x", M::Ext(code, vec![0; 4]))]));
        let e = refused(&file);
        assert_eq!((e.kind(), e.tensor()), ("UnknownExt", Some("x")), "{code}");
    }
}

#[test]
fn ndarray_bytes_other_than_the_shape_needs_are_refused() {
    let file = bytes_of(&map(vec![("t", nd(&[2, 3], "float32", &[0; 20]))]));
    let e = refused(&file);
    assert_eq!((e.kind(), e.tensor()), ("SizeMismatch", Some("t")));
    assert!(e.to_string().contains("needs 24 bytes"), "{e}");
    let file = bytes_of(&map(vec![("t", nd(&[2], "float32", &[0; 12]))]));
    assert_eq!(refused(&file).kind(), "SizeMismatch");
}

#[test]
fn a_shape_of_2_pow_64_elements_is_refused() {
    for shape in [&[1u64 << 32, 1 << 32][..], &[u64::MAX, 2], &[1 << 62, 8]] {
        let file = bytes_of(&map(vec![("t", nd(shape, "float32", &[0; 8]))]));
        let e = refused(&file);
        assert_eq!(
            (e.kind(), e.tensor()),
            ("ShapeOverflow", Some("t")),
            "{shape:?}"
        );
    }
    let file = bytes_of(&map(vec![(
        "t",
        chunked(&[1 << 32, 1 << 32], vec![("0", nd(&[1], "uint8", &[1]))]),
    )]));
    assert_eq!(refused(&file).kind(), "ShapeOverflow");
}

#[test]
fn an_unknown_dtype_name_is_refused_naming_the_key() {
    for name in ["object", "complex128", "int4", "<U3", "float", "f4", ""] {
        let file = bytes_of(&map(vec![("p", map(vec![("w", nd(&[1], name, &[0]))]))]));
        let e = refused(&file);
        assert_eq!(
            (e.kind(), e.tensor()),
            ("UnsupportedDtype", Some("p/w")),
            "{name}"
        );
    }
}

#[test]
fn trailing_bytes_after_the_top_level_map_are_refused() {
    let mut file = bytes_of(&map(vec![("a", M::U(1))]));
    file.push(0xc0);
    let e = refused(&file);
    assert_eq!(e.kind(), "TrailingBytes");
    // Inside an ext payload as well.
    let mut payload = bytes_of(&M::A(vec![M::A(vec![]), s("uint8"), M::B(vec![1])]));
    payload.push(0);
    let file = bytes_of(&map(vec![("t", M::Ext(1, payload))]));
    assert_eq!(refused(&file).kind(), "BadExt");
}

#[test]
fn duplicate_joined_names_are_refused() {
    let cases = [
        map(vec![("a/b", M::U(1)), ("a", map(vec![("b", M::U(2))]))]),
        M::Map(vec![(M::U(1), M::U(1)), (s("1"), M::U(2))]),
        map(vec![("a", M::U(1)), ("a", M::U(2))]),
        map(vec![("a", nd(&[1], "uint8", &[1])), ("a", M::U(2))]),
    ];
    for c in cases {
        let e = refused(&bytes_of(&c));
        assert_eq!(e.kind(), "DuplicateName", "{e}");
    }
}

#[test]
fn other_malformed_files_are_refused() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "NotAMap"),
        (vec![0x91, 0xc0], "NotAMap"),
        (bytes_of(&nd(&[1], "uint8", &[1])), "NotAMap"),
        (vec![0x81, 0xa1, b'a', 0xc1], "BadMsgpack"),
        (vec![0x81, 0xa1, 0xff, 0xc0], "BadUtf8"),
        (vec![0x81, 0xa1, b'a', 0xa1, 0xff], "BadUtf8"),
        (vec![0x81, 0xc0, 0xc0], "BadKey"),
        (vec![0x81, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0], "BadKey"),
        (vec![0x82, 0xa1, b'a', 0xc0, 0xa1], "Truncated"),
        (vec![0x82, 0xa1, b'a', 0xc0], "CountTooLarge"),
        (vec![0x81, 0xa1, b'a', 0xcf, 0, 0], "Truncated"),
        (vec![0x81, 0xa1, b'a', 0xc7, 0x10, 0x01, 0], "Truncated"),
        (
            bytes_of(&map(vec![(
                "c",
                M::Ext(2, bytes_of(&M::A(vec![M::F(1.0)]))),
            )])),
            "BadExt",
        ),
        (bytes_of(&map(vec![("t", M::Ext(1, vec![0xc0]))])), "BadExt"),
        (
            bytes_of(&map(vec![(
                "t",
                M::Ext(
                    1,
                    bytes_of(&M::A(vec![M::A(vec![M::I(-1)]), s("uint8"), M::B(vec![1])])),
                ),
            )])),
            "BadExt",
        ),
        (
            bytes_of(&map(vec![(
                "t",
                M::Ext(1, bytes_of(&M::A(vec![M::A(vec![]), s("uint8"), M::U(1)]))),
            )])),
            "BadExt",
        ),
        (
            bytes_of(&map(vec![("t", nd(&[1; 65], "uint8", &[1]))])),
            "BadExt",
        ),
    ];
    for (i, (file, kind)) in cases.iter().enumerate() {
        let e = refused(file);
        assert_eq!(e.kind(), *kind, "case {i}: {e}");
    }
}

#[test]
fn every_msgpack_encoding_is_read() {
    let mut file = vec![0xdc, 0, 22];
    file.extend([0x05, 0xe0, 0xc0, 0xc2, 0xc3]);
    file.extend([0xcc, 0xff, 0xcd, 1, 0, 0xce, 0, 1, 0, 0]);
    file.extend([0xcf, 0, 0, 0, 1, 0, 0, 0, 0]);
    file.extend([0xd0, 0xfe, 0xd1, 0xff, 0xfd, 0xd2, 0, 0, 0, 4, 0xd3]);
    file.extend((-5i64).to_be_bytes());
    file.push(0xca);
    file.extend(1.5f32.to_be_bytes());
    file.extend([0xd9, 1, b'x', 0xda, 0, 1, b'y', 0xdb, 0, 0, 0, 1, b'z']);
    file.extend([0xc4, 1, 7, 0xc5, 0, 1, 8, 0xc6, 0, 0, 0, 1, 9]);
    file.extend([
        0xd4, 5, 0, 0xd5, 5, 0, 0, 0xc8, 0, 1, 5, 0, 0xc9, 0, 0, 0, 0, 5,
    ]);
    file.extend([0xde, 0, 0]);
    let mut budget = 100;
    let v = Parser::new(&file, 0..file.len(), &mut budget)
        .value()
        .expect("reads");
    let Value::Array(items) = v else {
        panic!("an array")
    };
    let want = [
        Value::UInt(5),
        Value::Int(-32),
        Value::Nil,
        Value::Bool(false),
        Value::Bool(true),
        Value::UInt(255),
        Value::UInt(256),
        Value::UInt(65536),
        Value::UInt(1 << 32),
        Value::Int(-2),
        Value::Int(-3),
        Value::UInt(4),
        Value::Int(-5),
        Value::Float(1.5),
    ];
    assert_eq!(items[..want.len()], want);
    assert!(matches!(items[14], Value::Str(ref r) if file[r.clone()] == *b"x"));
    assert!(matches!(items[16], Value::Str(ref r) if file[r.clone()] == *b"z"));
    assert!(matches!(items[18], Value::Bin(ref r) if file[r.clone()] == [8]));
    assert!(matches!(items[20], Value::Ext { code: 5, ref data } if data.len() == 1));
    assert!(matches!(items[21], Value::Ext { code: 5, ref data } if data.len() == 2));
    assert_eq!(items.len(), 22);
    // The last four items were read past the array's 22.
    assert_eq!(budget, 100 - 22);
}

#[test]
fn values_over_the_budget_are_refused() {
    // The budget bounds what a file may declare, whatever its size.
    let mut file = vec![0xdd, 0, 0, 0, 10];
    file.extend([0xc0; 10]);
    let mut budget = 9;
    let e = Parser::new(&file, 0..file.len(), &mut budget)
        .value()
        .expect_err("over budget");
    assert_eq!(e.kind(), "TooLarge");
}

#[test]
fn the_chunk_decoder_checks_the_file_and_cancellation() {
    let d = ChunksDecoder {
        name: "t".to_owned(),
        ranges: vec![0..4, 6..10],
    };
    let file = [0u8; 8];
    let e = d
        .decode(&[&file], &CancelToken::new(), &mut |_| Ok(()))
        .expect_err("past the end");
    assert!(matches!(
        e,
        DecodeError::Invalid {
            kind: "Truncated",
            ..
        }
    ));
    let cancel = CancelToken::new();
    cancel.cancel();
    let e = d
        .decode(&[&[0u8; 16]], &cancel, &mut |_| Ok(()))
        .expect_err("cancelled");
    assert!(matches!(e, DecodeError::Cancelled));
    assert_eq!(d.ranges(), [(0, 0..4), (0, 6..10)]);
}

#[test]
fn looks_like_takes_map_markers_only() {
    for b in [0x80, 0x8f, 0xde, 0xdf] {
        assert!(looks_like(&[b]));
    }
    for b in [0x90, 0x00, 0xc0, 0xdc, 0x89 ^ 0xff] {
        assert!(!looks_like(&[b]));
    }
    assert!(!looks_like(&[]));
}

#[test]
fn a_file_of_no_tensor_has_all_of_it_as_header() {
    let file = bytes_of(&map(vec![("a", M::U(1)), ("e", map(vec![]))]));
    let o = open(&file).expect("opens");
    assert_eq!(o.header_len, file.len() as u64);
    assert!(o.tensors.is_empty());
}
