//! Models built in code by a tiny protobuf writer: every dtype raw and
//! typed, Constant nodes, external data, and each hostile input of
//! FRAMEWORKS.md ("ONNX").

use std::cell::Cell;
use std::io;

use super::*;
use crate::jobs::CancelToken;

/// A protobuf message being written.
#[derive(Default, Clone)]
struct W(Vec<u8>);

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

impl W {
    fn key(&mut self, n: u32, wt: u8) -> &mut Self {
        put_varint(&mut self.0, (u64::from(n) << 3) | u64::from(wt));
        self
    }
    fn varint(&mut self, n: u32, v: u64) -> &mut Self {
        self.key(n, 0);
        put_varint(&mut self.0, v);
        self
    }
    fn bytes(&mut self, n: u32, b: &[u8]) -> &mut Self {
        self.key(n, 2);
        put_varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, n: u32, s: &str) -> &mut Self {
        self.bytes(n, s.as_bytes())
    }
    fn msg(&mut self, n: u32, m: &W) -> &mut Self {
        self.bytes(n, &m.0)
    }
    fn fixed32(&mut self, n: u32, v: u32) -> &mut Self {
        self.key(n, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn packed_varints(&mut self, n: u32, vs: &[u64]) -> &mut Self {
        let mut p = Vec::new();
        for &v in vs {
            put_varint(&mut p, v);
        }
        self.bytes(n, &p)
    }
    fn done(&mut self) -> W {
        self.clone()
    }
}

/// A TensorProto: name, data_type, dims (packed).
fn tensor(name: &str, data_type: u64, dims: &[i64]) -> W {
    let mut t = W::default();
    t.packed_varints(1, &dims.iter().map(|&d| d as u64).collect::<Vec<_>>())
        .varint(2, data_type)
        .str(8, name);
    t
}

fn raw(name: &str, data_type: u64, dims: &[i64], data: &[u8]) -> W {
    tensor(name, data_type, dims).bytes(9, data).done()
}

fn external(name: &str, data_type: u64, dims: &[i64], entries: &[(&str, &str)]) -> W {
    let mut t = tensor(name, data_type, dims);
    for (k, v) in entries {
        t.msg(13, W::default().str(1, k).str(2, v));
    }
    t.varint(14, 1);
    t
}

/// A model: ir_version 9, producer, opset 17, a graph of `initializers`
/// and `nodes`.
fn model(initializers: &[W], nodes: &[W]) -> Vec<u8> {
    let mut g = W::default();
    for n in nodes {
        g.msg(1, n);
    }
    g.str(2, "main");
    for t in initializers {
        g.msg(5, t);
    }
    let mut m = W::default();
    m.varint(1, 9)
        .str(2, "tensorscope-test")
        .str(3, "1.0")
        .msg(7, &g)
        .msg(8, W::default().str(1, "").varint(2, 17))
        .msg(8, W::default().str(1, "com.microsoft").varint(2, 1))
        .msg(14, W::default().str(1, "author").str(2, "me"));
    m.0
}

fn constant(output: &str, value: &W) -> W {
    let mut a = W::default();
    a.str(1, "value").msg(5, value).varint(20, 4);
    let mut n = W::default();
    n.str(1, "x")
        .str(2, output)
        .str(2, "second")
        .str(4, "Constant")
        .msg(5, &a);
    n
}

fn no_files(_: &str) -> io::Result<u64> {
    panic!("no external file should be asked for")
}

fn open_local(bytes: &[u8]) -> Result<Opened, OnnxError> {
    open(bytes, &no_files)
}

/// A tensor's bytes, through its plain range or its decoder.
fn read(t: &Tensor, files: &[&[u8]]) -> Vec<u8> {
    match &t.data {
        Data::Plain {
            file,
            range,
            big_endian,
        } => {
            assert!(!big_endian);
            files[*file][range.start as usize..range.end as usize].to_vec()
        }
        Data::Decoded(d) => {
            let mut out = Vec::new();
            d.decode(files, &CancelToken::new(), &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            out
        }
    }
}

fn find<'a>(o: &'a Opened, name: &str) -> &'a Tensor {
    o.tensors.iter().find(|t| t.name == name).unwrap()
}

#[test]
fn raw_data_is_a_plain_range_of_the_model() {
    let data: Vec<u8> = [1.0f32, -2.5, 3.25, 0.0, 7.0, 8.0]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .collect();
    let bytes = model(&[raw("w", 1, &[2, 3], &data)], &[]);
    let o = open_local(&bytes).unwrap();
    assert_eq!(o.tensors.len(), 1);
    let t = &o.tensors[0];
    assert_eq!(
        (t.name.as_str(), t.dtype, &t.shape[..]),
        ("w", Dtype::F32, &[2u64, 3][..])
    );
    assert!(matches!(t.data, Data::Plain { file: 0, .. }));
    assert_eq!(read(t, &[&bytes]), data);
    assert_eq!(o.facts["ir_version"], 9);
    assert_eq!(o.facts["opset"], 17);
    assert_eq!(o.facts["producer"], "tensorscope-test");
    assert_eq!(o.facts["producer_version"], "1.0");
    assert!(o.files.is_empty());
    let meta: HashMap<_, _> = o.metadata.iter().cloned().collect();
    assert_eq!(meta["author"], "me");
    assert_eq!(meta["graph.name"], "main");
    assert_eq!(meta["opset_import"], json!([":17", "com.microsoft:1"]));
}

#[test]
fn every_dtype_raw_maps_to_its_safetensors_dtype() {
    let table = [
        (1, Dtype::F32),
        (2, Dtype::U8),
        (3, Dtype::I8),
        (4, Dtype::U16),
        (5, Dtype::I16),
        (6, Dtype::I32),
        (7, Dtype::I64),
        (9, Dtype::Bool),
        (10, Dtype::F16),
        (11, Dtype::F64),
        (12, Dtype::U32),
        (13, Dtype::U64),
        (14, Dtype::C64),
        (16, Dtype::BF16),
        (17, Dtype::F8E4M3),
        (18, Dtype::F8E4M3Fnuz),
        (19, Dtype::F8E5M2),
        (20, Dtype::F8E5M2Fnuz),
        (24, Dtype::F8E8M0),
    ];
    let inits: Vec<W> = table
        .iter()
        .map(|&(n, d)| {
            let len = d.byte_len(&[3]).unwrap() as usize;
            let data: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            raw(&format!("t{n}"), n, &[3], &data)
        })
        .collect();
    let bytes = model(&inits, &[]);
    let o = open_local(&bytes).unwrap();
    for &(n, d) in &table {
        let t = find(&o, &format!("t{n}"));
        assert_eq!(t.dtype, d);
        let len = d.byte_len(&[3]).unwrap() as usize;
        let data: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
        let want: Vec<u8> = if d == Dtype::Bool {
            data.iter().map(|&b| u8::from(b != 0)).collect()
        } else {
            data
        };
        assert_eq!(read(t, &[&bytes]), want, "{d}");
    }
}

#[test]
fn typed_fields_decode_as_numpy_helper_does() {
    let f = |name, dt, dims: &[i64]| tensor(name, dt, dims);
    let inits = [
        // FLOAT, packed.
        f("f32", 1, &[2])
            .bytes(4, &[1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat())
            .done(),
        // FLOAT, unpacked (one key per element).
        f("f32u", 1, &[2])
            .fixed32(4, 1.5f32.to_bits())
            .fixed32(4, 3.0f32.to_bits())
            .done(),
        // COMPLEX64: interleaved pairs, two per element.
        f("c64", 14, &[1])
            .bytes(4, &[1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat())
            .done(),
        f("f64", 11, &[1]).bytes(10, &2.5f64.to_le_bytes()).done(),
        f("i64", 7, &[2]).packed_varints(7, &[u64::MAX, 5]).done(),
        f("u64", 13, &[1]).packed_varints(11, &[u64::MAX]).done(),
        // UINT32 from uint64_data: the low 32 bits.
        f("u32", 12, &[2])
            .packed_varints(11, &[0x1_0000_0005, 7])
            .done(),
        // INT8 from int32_data: 300 -> 44, -1 -> -1 (astype wraps).
        f("i8", 3, &[2]).packed_varints(5, &[300, u64::MAX]).done(),
        f("u8", 2, &[1]).varint(5, 258).done(),
        f("i16", 5, &[1])
            .packed_varints(5, &[(-2i64) as u64])
            .done(),
        f("u16", 4, &[1]).packed_varints(5, &[0x1_fffe]).done(),
        f("i32", 6, &[1])
            .packed_varints(5, &[(-7i64) as u64])
            .done(),
        // BOOL: the low byte, non-zero as 1 (256 -> 0, 2 -> 1).
        f("bool", 9, &[3]).packed_varints(5, &[0, 2, 256]).done(),
        // FLOAT16, BFLOAT16: bit patterns.
        f("f16", 10, &[1]).packed_varints(5, &[0x3c00]).done(),
        f("bf16", 16, &[1]).packed_varints(5, &[0x3f80]).done(),
        f("f8", 17, &[2]).packed_varints(5, &[0x38, 0x17f]).done(),
        f("e8m0", 24, &[1]).packed_varints(5, &[127]).done(),
        // An empty tensor with no data field.
        f("empty", 1, &[0, 4]).done(),
    ];
    let bytes = model(&inits, &[]);
    let o = open_local(&bytes).unwrap();
    let got = |n| read(find(&o, n), &[&bytes]);
    assert_eq!(
        got("f32"),
        [1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()
    );
    assert_eq!(
        got("f32u"),
        [1.5f32.to_le_bytes(), 3.0f32.to_le_bytes()].concat()
    );
    assert_eq!(
        got("c64"),
        [1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat()
    );
    assert_eq!(got("f64"), 2.5f64.to_le_bytes());
    assert_eq!(
        got("i64"),
        [(-1i64).to_le_bytes(), 5i64.to_le_bytes()].concat()
    );
    assert_eq!(got("u64"), u64::MAX.to_le_bytes());
    assert_eq!(
        got("u32"),
        [5u32.to_le_bytes(), 7u32.to_le_bytes()].concat()
    );
    assert_eq!(got("i8"), [44, 0xff]);
    assert_eq!(got("u8"), [2]);
    assert_eq!(got("i16"), (-2i16).to_le_bytes());
    assert_eq!(got("u16"), 0xfffeu16.to_le_bytes());
    assert_eq!(got("i32"), (-7i32).to_le_bytes());
    assert_eq!(got("bool"), [0, 1, 0]);
    assert_eq!(got("f16"), 0x3c00u16.to_le_bytes());
    assert_eq!(got("bf16"), 0x3f80u16.to_le_bytes());
    assert_eq!(got("f8"), [0x38, 0x7f]);
    assert_eq!(got("e8m0"), [127]);
    assert_eq!(got("empty"), Vec::<u8>::new());
    assert_eq!(find(&o, "empty").shape, [0, 4]);
    assert!(matches!(find(&o, "f32").data, Data::Decoded(_)));
}

#[test]
fn a_large_typed_field_streams_in_pieces() {
    let n = 600_000usize;
    let vals: Vec<u64> = (0..n as u64).map(|i| i % 1000).collect();
    let t = tensor("big", 6, &[n as i64])
        .packed_varints(5, &vals)
        .done();
    let bytes = model(&[t], &[]);
    let o = open_local(&bytes).unwrap();
    let Data::Decoded(d) = &o.tensors[0].data else {
        panic!("typed fields are decoded")
    };
    let mut pieces = 0;
    let mut total = 0;
    d.decode(&[&bytes], &CancelToken::new(), &mut |b| {
        pieces += 1;
        total += b.len();
        assert!(b.len() <= (1 << 20) + 8);
        Ok(())
    })
    .unwrap();
    assert_eq!(total, n * 4);
    assert!(pieces >= 2);
    let cancel = CancelToken::new();
    cancel.cancel();
    assert!(matches!(
        d.decode(&[&bytes], &cancel, &mut |_| Ok(())),
        Err(crate::format::decode::DecodeError::Cancelled)
    ));
}

#[test]
fn constant_nodes_are_listed_under_their_first_output() {
    let value = raw("ignored", 7, &[], &42i64.to_le_bytes());
    let other_domain = {
        let mut n = constant("custom", &value);
        n.str(7, "com.example");
        n
    };
    let value_float = {
        let mut a = W::default();
        a.str(1, "value_float").fixed32(2, 1.0f32.to_bits());
        let mut n = W::default();
        n.str(2, "vf").str(4, "Constant").msg(5, &a);
        n
    };
    let onnx_domain = {
        let mut n = constant("k2", &value);
        n.str(7, "ai.onnx");
        n
    };
    let bytes = model(
        &[raw("w", 1, &[1], &1.0f32.to_le_bytes())],
        &[
            constant("k", &value),
            other_domain,
            value_float,
            onnx_domain,
        ],
    );
    let o = open_local(&bytes).unwrap();
    let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["w", "k", "k2"]);
    let k = find(&o, "k");
    assert_eq!((k.dtype, k.shape.len()), (Dtype::I64, 0));
    assert_eq!(read(k, &[&bytes]), 42i64.to_le_bytes());
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
}

#[test]
fn subgraph_tensors_are_not_listed() {
    let mut body = W::default();
    body.msg(5, &raw("inner", 1, &[1], &[0; 4]));
    let mut a = W::default();
    a.str(1, "then_branch").msg(6, &body).varint(20, 5);
    let mut n = W::default();
    n.str(4, "If").msg(5, &a);
    let bytes = model(&[], &[n]);
    assert!(open_local(&bytes).unwrap().tensors.is_empty());
}

#[test]
fn a_graph_field_repeated_on_the_wire_merges() {
    let mut g1 = W::default();
    g1.msg(5, &raw("a", 2, &[1], &[1]));
    let mut g2 = W::default();
    g2.msg(5, &raw("b", 2, &[1], &[2]));
    let mut m = W::default();
    m.msg(7, &g1).msg(7, &g2);
    let o = open_local(&m.0).unwrap();
    let names: Vec<&str> = o.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(o.facts["ir_version"], 0);
    assert_eq!(o.facts["opset"], J::Null);
}

/// External data sizes from a table; counts the calls.
struct Files<'a> {
    sizes: &'a [(&'a str, u64)],
    calls: Cell<u32>,
}

impl Files<'_> {
    fn size(&self, location: &str) -> io::Result<u64> {
        self.calls.set(self.calls.get() + 1);
        self.sizes
            .iter()
            .find(|(l, _)| *l == location)
            .map(|(_, s)| *s)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }
}

#[test]
fn external_data_shares_files_at_any_offset() {
    let files = Files {
        sizes: &[("w.bin", 100), ("data/b.bin", 8)],
        calls: Cell::new(0),
    };
    let bytes = model(
        &[
            external(
                "a",
                1,
                &[2],
                &[("location", "w.bin"), ("offset", "0"), ("length", "8")],
            ),
            external("b", 1, &[3], &[("location", "./w.bin"), ("offset", "13")]),
            external(
                "c",
                7,
                &[1],
                &[("location", "data\\b.bin"), ("checksum", "x")],
            ),
            external("flag", 9, &[2], &[("location", "w.bin"), ("offset", "98")]),
        ],
        &[],
    );
    let o = open(&bytes, &|l| files.size(l)).unwrap();
    assert_eq!(files.calls.get(), 2, "one size per file");
    assert_eq!(o.files, ["w.bin", "data/b.bin"]);
    let plain = |n| match &find(&o, n).data {
        Data::Plain { file, range, .. } => (*file, range.clone()),
        Data::Decoded(_) => panic!("external data is plain"),
    };
    assert_eq!(plain("a"), (1, 0..8));
    assert_eq!(plain("b"), (1, 13..25));
    assert_eq!(plain("c"), (2, 0..8));
    let b = find(&o, "b");
    assert!(b.facts.contains(&("location", J::from("w.bin"))));
    assert!(b.facts.contains(&("offset", J::from(13))));
    // A BOOL's bytes are made 0/1.
    let mut w = vec![0u8; 100];
    w[98] = 0;
    w[99] = 5;
    assert_eq!(read(find(&o, "flag"), &[&bytes, &w, &[0; 8]]), [0, 1]);
}

mod hostile;
