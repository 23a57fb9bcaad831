//! The Flax reader on files written in code by a tiny msgpack writer (used
//! by `hostile.rs` too): the naming rules, every dtype, every msgpack
//! encoding, chunked arrays. The real files Flax writes are in
//! `fixtures.rs`.

use super::msgpack::{Parser, Value};
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

pub(super) fn chunked(shape: &[u64], chunks: Vec<(&str, M)>) -> M {
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
