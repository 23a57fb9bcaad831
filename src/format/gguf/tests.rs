//! The header reader on files built here: every value type, nested and
//! long arrays, the alignment, row-major shapes; and every hostile class
//! of GGUF.md's header part, each a clean error.

use super::header::{GgufError, Value, parse, stored_bytes};
use super::types::{GgmlType, ValueType};

/// A GGUF file being built.
struct File {
    version: u32,
    kv: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
    data: Vec<u8>,
    alignment: usize,
}

fn string(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

impl File {
    fn new() -> Self {
        File {
            version: 3,
            kv: Vec::new(),
            n_kv: 0,
            infos: Vec::new(),
            n_tensors: 0,
            data: Vec::new(),
            alignment: 32,
        }
    }

    fn kv(mut self, key: &[u8], value_type: u32, value: &[u8]) -> Self {
        self.kv.extend(string(key));
        self.kv.extend_from_slice(&value_type.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.n_kv += 1;
        self
    }

    fn tensor(mut self, name: &[u8], dims: &[u64], ggml: u32, offset: u64) -> Self {
        self.infos.extend(string(name));
        self.infos
            .extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend_from_slice(&d.to_le_bytes());
        }
        self.infos.extend_from_slice(&ggml.to_le_bytes());
        self.infos.extend_from_slice(&offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.n_tensors.to_le_bytes());
        out.extend_from_slice(&self.n_kv.to_le_bytes());
        out.extend_from_slice(&self.kv);
        out.extend_from_slice(&self.infos);
        while !out.len().is_multiple_of(self.alignment) {
            out.push(0);
        }
        out.extend_from_slice(&self.data);
        out
    }
}

/// An ARRAY value: element type, length, elements.
fn array(elem: u32, len: u64, items: &[u8]) -> Vec<u8> {
    let mut v = elem.to_le_bytes().to_vec();
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(items);
    v
}

fn good() -> File {
    let mut f = File::new()
        .kv(b"general.architecture", 8, &string(b"llama"))
        .kv(b"u8", 0, &[200])
        .kv(b"i8", 1, &[0xff])
        .kv(b"u16", 2, &60_000u16.to_le_bytes())
        .kv(b"i16", 3, &(-2i16).to_le_bytes())
        .kv(b"u32", 4, &4_000_000_000u32.to_le_bytes())
        .kv(b"i32", 5, &(-7i32).to_le_bytes())
        .kv(b"f32", 6, &0.1f32.to_le_bytes())
        .kv(b"bool", 7, &[1])
        .kv(b"u64", 10, &u64::MAX.to_le_bytes())
        .kv(b"i64", 11, &i64::MIN.to_le_bytes())
        .kv(b"f64", 12, &0.1f64.to_le_bytes())
        .kv(
            b"nested",
            9,
            &array(
                9,
                2,
                &[
                    array(5, 1, &3i32.to_le_bytes()),
                    array(8, 1, &string("é\n".as_bytes())),
                ]
                .concat(),
            ),
        )
        .kv(b"long", 9, &array(0, 100, &(0..100u8).collect::<Vec<u8>>()))
        .kv(
            b"words",
            9,
            &array(
                8,
                70,
                &(0..70)
                    .flat_map(|i| string(format!("w{i}").as_bytes()))
                    .collect::<Vec<u8>>(),
            ),
        )
        .kv(b"general.alignment", 4, &64u32.to_le_bytes())
        .tensor(b"w", &[4, 2], 0, 0)
        .tensor(b"q", &[32], 2, 64);
    f.alignment = 64;
    f.data = vec![0u8; 64 + 18];
    f
}

#[test]
fn a_header_of_every_value_type_reads_as_written() {
    let bytes = good().bytes();
    let h = parse(&bytes).expect("parses");
    assert_eq!(h.version, 3);
    assert_eq!(h.alignment, 64);
    assert_eq!(h.tensor_data_offset % 64, 0);
    assert_eq!(h.tensor_data_offset as usize, bytes.len() - 64 - 18);
    let get = |k: &str| &h.metadata.iter().find(|(key, _)| key == k).expect(k).1;
    assert_eq!(get("u8"), &Value::Unsigned(200));
    assert_eq!(get("i8"), &Value::Signed(-1));
    assert_eq!(get("u64"), &Value::Unsigned(u64::MAX));
    assert_eq!(get("i64"), &Value::Signed(i64::MIN));
    assert_eq!(get("f32"), &Value::F32(0.1));
    assert_eq!(get("bool"), &Value::Bool(true));
    let Value::Array {
        elem, len, items, ..
    } = get("nested")
    else {
        panic!("nested")
    };
    assert_eq!((*elem, *len, items.len()), (ValueType::Array, 2, 2));
    let Value::Array {
        elem: ValueType::Str,
        len: 1,
        items: inner,
        ..
    } = &items[1]
    else {
        panic!("inner array: {:?}", items[1])
    };
    assert_eq!(inner, &vec![Value::Str("é\n".into())]);
    let Value::Array {
        len,
        items,
        at,
        elem,
    } = get("long")
    else {
        panic!("long")
    };
    assert_eq!((*len, items.len()), (100, 16));
    // The elements past the head are read on demand, page by page.
    let page = super::header::elements(&bytes, *elem, *at, *len, 95, 10).expect("page");
    assert_eq!(page.len(), 5);
    let want: Vec<Value> = (95..100).map(Value::Unsigned).collect();
    assert_eq!(page, want);
    let Value::Array { len, at, elem, .. } = get("words") else {
        panic!("words")
    };
    let page = super::header::elements(&bytes, *elem, *at, *len, 60, 5).expect("page");
    let want: Vec<Value> = (60..65).map(|i| Value::Str(format!("w{i}"))).collect();
    assert_eq!(page, want);
    assert_eq!(h.tensors[0].shape(), [2, 4]);
    assert_eq!(h.tensors[1].ggml_type.name(), "Q4_0");
    assert_eq!(stored_bytes(&h.tensors[0]), Ok(32));
    assert_eq!(stored_bytes(&h.tensors[1]), Ok(18));
    let mut v2 = good();
    v2.version = 2;
    assert!(parse(&v2.bytes()).is_ok());
}

#[test]
fn metadata_becomes_the_json_info_prints() {
    let h = parse(&good().bytes()).expect("parses");
    let json: serde_json::Map<String, serde_json::Value> = h
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.to_json()))
        .collect();
    assert_eq!(json["u64"].to_string(), "18446744073709551615");
    assert_eq!(json["i64"].to_string(), "-9223372036854775808");
    assert_eq!(json["f32"].as_f64().map(|f| f as f32), Some(0.1f32));
    assert_eq!(json["nested"], serde_json::json!([[3], ["é\n"]]));
    assert_eq!(json["long"]["type"], "UINT8");
    assert_eq!(json["long"]["len"], 100);
    assert_eq!(
        json["long"]["head"],
        serde_json::json!((0..16).collect::<Vec<u8>>())
    );
    assert_eq!(json["general.alignment"], 64);
}

#[test]
fn the_type_table_is_gguf_md_s() {
    for (name, id, block, bytes) in [
        ("F32", 0, 1, 4),
        ("BF16", 30, 1, 2),
        ("Q4_K", 12, 256, 144),
        ("Q6_K", 14, 256, 210),
        ("IQ1_M", 29, 256, 56),
        ("MXFP4", 39, 32, 17),
        ("NVFP4", 40, 64, 36),
    ] {
        let t = GgmlType::from_id(id).expect(name);
        assert_eq!((t.name(), t.block()), (name, (block, bytes)));
    }
    for removed in [4, 5, 31, 99] {
        assert!(GgmlType::from_id(removed).is_none(), "{removed}");
    }
}

fn kind(bytes: &[u8]) -> &'static str {
    match parse(bytes) {
        Ok(_) => "ok",
        Err(e) => e.kind(),
    }
}

#[test]
fn every_hostile_header_is_a_clean_error() {
    let whole = good().bytes();
    assert_eq!(kind(b""), "GgufMagic");
    assert_eq!(kind(b"GGML\x03\0\0\0"), "GgufMagic");
    for v in [1u32, 99] {
        let mut f = good();
        f.version = v;
        assert_eq!(kind(&f.bytes()), "GgufVersion");
    }
    // Cut in the fixed header, the metadata, the tensor infos, the data.
    for cut in [10, 40, whole.len() - 100, whole.len() - 1] {
        let k = kind(&whole[..cut]);
        assert!(
            ["GgufTruncated", "GgufCount", "GgufInvalid"].contains(&k),
            "{cut}: {k}"
        );
    }
    let huge_count = |at: usize| {
        let mut b = whole.clone();
        b[at..at + 8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        kind(&b)
    };
    assert_eq!(huge_count(8), "GgufCount");
    assert_eq!(huge_count(16), "GgufCount");
    let one = |kv: (&[u8], u32, Vec<u8>)| kind(&File::new().kv(kv.0, kv.1, &kv.2).bytes());
    let mut long_key = (1u64 << 40).to_le_bytes().to_vec();
    long_key.extend_from_slice(b"k");
    let mut f = File::new();
    f.kv = long_key;
    f.n_kv = 1;
    assert_eq!(kind(&f.bytes()), "GgufCount");
    assert_eq!(
        one((b"s", 8, (1u64 << 62).to_le_bytes().to_vec())),
        "GgufCount"
    );
    assert_eq!(one((b"a", 9, array(0, 1 << 62, &[1]))), "GgufCount");
    assert_eq!(one((b"a", 9, array(8, 1 << 40, &[1]))), "GgufCount");
    assert_eq!(one((b"t", 13, vec![0; 8])), "GgufType");
    assert_eq!(one((b"a", 9, array(13, 1, &[0; 8]))), "GgufType");
    // 10,000 nested arrays.
    let mut nest = Vec::new();
    for _ in 0..10_000 {
        nest.extend(array(9, 1, &[]));
    }
    nest.extend(array(0, 0, &[]));
    assert_eq!(one((b"n", 9, nest)), "GgufNesting");
    assert_eq!(
        kind(&File::new().kv(b"k", 0, &[1]).kv(b"k", 0, &[2]).bytes()),
        "GgufInvalid"
    );
    assert_eq!(
        kind(&File::new().kv(b"\xff\xfe", 0, &[1]).bytes()),
        "GgufInvalid"
    );
    for (alignment_type, value) in [
        (4u32, 0u32.to_le_bytes().to_vec()),
        (4, 3u32.to_le_bytes().to_vec()),
        (10, 64u64.to_le_bytes().to_vec()),
    ] {
        assert_eq!(
            kind(
                &File::new()
                    .kv(b"general.alignment", alignment_type, &value)
                    .bytes()
            ),
            "GgufInvalid"
        );
    }
    let tensor = |name: &[u8], dims: &[u64], ggml: u32, offset: u64, data: usize| {
        let mut f = File::new().tensor(name, dims, ggml, offset);
        f.data = vec![0; data];
        kind(&f.bytes())
    };
    assert_eq!(tensor(b"t", &[4], 0, 0, 16), "ok");
    assert_eq!(tensor(b"t", &[4], 99, 0, 16), "GgufType");
    assert_eq!(tensor(b"t", &[4], 4, 0, 16), "GgufType");
    assert_eq!(
        tensor(b"t", &[1 << 32, 1 << 32, 4], 0, 0, 16),
        "GgufInvalid"
    );
    assert_eq!(tensor(b"t", &[16], 2, 0, 64), "GgufInvalid");
    assert_eq!(tensor(b"t", &[4], 0, 8, 16), "GgufInvalid");
    assert_eq!(tensor(b"t", &[4], 0, u64::MAX - 4, 16), "GgufInvalid");
    assert_eq!(tensor(b"\xff", &[4], 0, 0, 16), "GgufInvalid");
    let mut f = File::new();
    f.infos.extend(string(b"t"));
    f.infos.extend_from_slice(&u32::MAX.to_le_bytes());
    f.n_tensors = 1;
    assert_eq!(kind(&f.bytes()), "GgufCount");
    let mut f = File::new()
        .tensor(b"t", &[4], 0, 0)
        .tensor(b"t", &[4], 0, 16);
    f.data = vec![0; 32];
    assert_eq!(kind(&f.bytes()), "GgufInvalid");
    // A scalar (n_dims 0) and a 5-D tensor read as gguf-py reads them.
    assert_eq!(tensor(b"s", &[], 0, 0, 4), "ok");
    assert_eq!(tensor(b"five", &[1, 2, 1, 2, 1], 0, 0, 16), "ok");
}

#[test]
fn errors_say_what_and_where() {
    let e = parse(b"GGUF\x63\0\0\0").expect_err("version 99");
    assert_eq!(e, GgufError::Version(99));
    assert!(e.to_string().contains("99"));
}

#[test]
fn a_string_of_more_than_the_kept_budget_is_refused_before_it_is_copied() {
    let big = vec![b'a'; (super::header::MAX_KEPT_BYTES + 1) as usize];
    let bytes = File::new().kv(b"template", 8, &string(&big)).bytes();
    let e = parse(&bytes).expect_err("refused");
    assert_eq!(e.kind(), "GgufInvalid", "{e}");
    // A string just within it is read whole.
    let fits = vec![b'b'; 1 << 20];
    let bytes = File::new().kv(b"template", 8, &string(&fits)).bytes();
    let h = parse(&bytes).expect("read");
    assert_eq!(h.metadata[0].1, Value::Str("b".repeat(1 << 20)));
}
