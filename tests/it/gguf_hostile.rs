//! GGUF.md, "Hostile files": GGUF files built here, one for every class the
//! contract lists, each through every verb (`info`, `validate`, `stats`,
//! `export`, `resave`, `diff`) with `--json`, in a working folder of its
//! own under a bounded address space: no signal, no panic, one JSON
//! document, each run under 10 s. A file the contract calls an error is
//! refused (exit 2 with `{"error": {kind, message, path}}` whose kind names
//! the GGUF rule; `validate` 1 or 2 and `valid: false`) and nothing but the
//! input is left in the folder. The files it leaves open (a scalar, five
//! dimensions, an unaligned offset, overlapping tensors, and the legal
//! extremes: 64 nested arrays, zero-element tensors of huge dimensions)
//! are refused cleanly or read right by every verb alike.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::pytorch::build::{Run, f32s, run};

/// GGUF.md: every verb on any file finishes within this.
const LIMIT: Duration = Duration::from_secs(10);

// Metadata value types.
const UINT8: u32 = 0;
const UINT16: u32 = 2;
const UINT32: u32 = 4;
const INT32: u32 = 5;
const STRING: u32 = 8;
const ARRAY: u32 = 9;
const UINT64: u32 = 10;

// ggml types.
const F32: u32 = 0;
const Q4_0: u32 = 2;

/// A string as GGUF writes it: u64 length, bytes.
fn string(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

/// An ARRAY value: element type, length, the elements' bytes.
fn array(elem: u32, len: u64, items: &[u8]) -> Vec<u8> {
    let mut v = elem.to_le_bytes().to_vec();
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(items);
    v
}

/// An ARRAY value nested `depth` deep: arrays of one array, the innermost
/// one UINT8 `5`.
fn nested(depth: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(depth * 12 + 1);
    for _ in 1..depth {
        v.extend(array(ARRAY, 1, &[]));
    }
    v.extend(array(UINT8, 1, &[5]));
    v
}

/// A GGUF file being built: its counts are those of what was added unless
/// set, and the tensor infos are padded to `pad` before the data.
#[derive(Clone)]
struct Gguf {
    version: u32,
    n_tensors: Option<u64>,
    n_kv: Option<u64>,
    kv: Vec<u8>,
    kv_count: u64,
    infos: Vec<u8>,
    info_count: u64,
    pad: usize,
    data: Vec<u8>,
}

impl Gguf {
    fn new() -> Self {
        Gguf {
            version: 3,
            n_tensors: None,
            n_kv: None,
            kv: Vec::new(),
            kv_count: 0,
            infos: Vec::new(),
            info_count: 0,
            pad: 32,
            data: Vec::new(),
        }
    }

    /// A key/value pair: key, value type, the value's bytes.
    fn kv(self, key: &[u8], value_type: u32, value: &[u8]) -> Self {
        let mut pair = string(key);
        pair.extend_from_slice(&value_type.to_le_bytes());
        pair.extend_from_slice(value);
        self.raw_kv(&pair)
    }

    /// A key/value pair given as its bytes.
    fn raw_kv(mut self, pair: &[u8]) -> Self {
        self.kv.extend_from_slice(pair);
        self.kv_count += 1;
        self
    }

    /// A tensor info: name, dims (`ne[0]` first), ggml type, offset.
    fn tensor(self, name: &[u8], dims: &[u64], ggml: u32, offset: u64) -> Self {
        let mut info = string(name);
        info.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            info.extend_from_slice(&d.to_le_bytes());
        }
        info.extend_from_slice(&ggml.to_le_bytes());
        info.extend_from_slice(&offset.to_le_bytes());
        self.raw_tensor(&info)
    }

    /// A tensor info given as its bytes.
    fn raw_tensor(mut self, info: &[u8]) -> Self {
        self.infos.extend_from_slice(info);
        self.info_count += 1;
        self
    }

    fn data(mut self, data: Vec<u8>) -> Self {
        self.data = data;
        self
    }

    /// Where the key/value pairs end (and the tensor infos start).
    fn kv_end(&self) -> usize {
        24 + self.kv.len()
    }

    /// Where the tensor infos end.
    fn infos_end(&self) -> usize {
        self.kv_end() + self.infos.len()
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.n_tensors.unwrap_or(self.info_count).to_le_bytes());
        out.extend_from_slice(&self.n_kv.unwrap_or(self.kv_count).to_le_bytes());
        out.extend_from_slice(&self.kv);
        out.extend_from_slice(&self.infos);
        while !out.len().is_multiple_of(self.pad) {
            out.push(0);
        }
        out.extend_from_slice(&self.data);
        out
    }
}

/// `general.architecture = "llama"` and tensor `t`, F32 of row-major shape
/// `[2, 3]`, values `0..6`, at offset 0.
fn good() -> Gguf {
    Gguf::new()
        .kv(b"general.architecture", STRING, &string(b"llama"))
        .tensor(b"t", &[3, 2], F32, 0)
        .data(f32s(6))
}

/// [`good`] with one more pair.
fn good_with(key: &[u8], value_type: u32, value: &[u8]) -> Gguf {
    Gguf::new()
        .kv(b"general.architecture", STRING, &string(b"llama"))
        .kv(key, value_type, value)
        .tensor(b"t", &[3, 2], F32, 0)
        .data(f32s(6))
}

/// [`good`] whose tensor info is `t` with these dims, type and offset.
fn good_tensor(dims: &[u64], ggml: u32, offset: u64) -> Gguf {
    Gguf::new()
        .kv(b"general.architecture", STRING, &string(b"llama"))
        .tensor(b"t", dims, ggml, offset)
        .data(f32s(6))
}

/// One run of a verb, timed: `args` are the verb's, `--json` is added.
fn timed(case: &str, cwd: &Path, args: &[&str]) -> Run {
    let start = Instant::now();
    let r = run(cwd, args);
    let took = start.elapsed();
    // Another system's build runs under its emulator, whose own stalls
    // (wine's, minutes at times) say nothing of the code; the native build
    // holds the limit.
    assert!(
        took < LIMIT || crate::exe::foreign(),
        "{case}: {args:?} took {took:?}"
    );
    r
}

/// The verbs' arguments on `file`: `export` of tensor `t` and `resave`
/// into the working folder, `diff` of the file against itself.
fn verbs(file: &str) -> [(&'static str, Vec<&str>); 6] {
    [
        ("info", vec!["info", file]),
        ("validate", vec!["validate", file]),
        ("stats", vec!["stats", file]),
        ("export", vec!["export", file, "t", "-o", "out.npy"]),
        ("resave", vec!["resave", file, "-o", "out.safetensors"]),
        ("diff", vec!["diff", file, file]),
    ]
}

/// A case's working folder, holding its input files and nothing else.
struct Folder {
    dir: tempfile::TempDir,
    inputs: Vec<String>,
}

impl Folder {
    fn new(files: &[(&str, Vec<u8>)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).expect("write");
        }
        let mut inputs: Vec<String> = files.iter().map(|(n, _)| (*n).to_owned()).collect();
        inputs.sort();
        Folder { dir, inputs }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The folder holds its inputs and nothing else (no output, no
    /// temporary file).
    fn assert_only_inputs(&self, case: &str, after: &str) {
        let mut left: Vec<String> = std::fs::read_dir(self.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, self.inputs, "{case}: left behind after {after}");
    }
}

fn assert_error_object(case: &str, verb: &str, doc: &Value, kinds: &[&str]) {
    let e = &doc["error"];
    assert!(
        e["kind"].is_string() && e["message"].is_string() && e["path"].is_string(),
        "{case}: {verb}: not an error object {{kind, message, path}}: {doc}"
    );
    let kind = e["kind"].as_str().unwrap_or_default();
    assert!(
        kinds.contains(&kind),
        "{case}: {verb}: error kind {kind:?}, not one of {kinds:?}: {doc}"
    );
}

/// Every verb on `open` (one of `files`) refuses it with one of `kinds`.
fn assert_refused_files(case: &str, files: &[(&str, Vec<u8>)], open: &str, kinds: &[&str]) {
    let folder = Folder::new(files);
    for (verb, args) in verbs(open) {
        let r = timed(case, folder.path(), &args);
        if verb == "validate" {
            assert!(r.code == 1 || r.code == 2, "{case}: validate: {}", r.doc);
            assert_eq!(r.doc["valid"], false, "{case}: validate: {}", r.doc);
            let kind = r.doc["error"]["kind"].as_str().unwrap_or_default();
            assert!(
                kinds.contains(&kind) && r.doc["error"]["message"].is_string(),
                "{case}: validate: error {:?}, not one of {kinds:?}",
                r.doc["error"]
            );
        } else {
            assert_eq!(r.code, 2, "{case}: {verb}: {}", r.doc);
            assert_error_object(case, verb, &r.doc, kinds);
        }
        folder.assert_only_inputs(case, verb);
    }
}

/// Every verb refuses the single file `bytes` with one of `kinds`.
fn assert_refused(case: &str, bytes: &[u8], kinds: &[&str]) {
    let name = format!("{case}.gguf");
    assert_refused_files(case, &[(&name, bytes.to_vec())], &name, kinds);
}

/// What a file that may be read holds: tensor `t`'s dtype as `info` names
/// it, its row-major shape and its float32 values.
struct Want {
    dtype: &'static str,
    shape: Vec<u64>,
    values: Vec<f32>,
}

impl Want {
    fn f32(shape: &[u64], values: impl IntoIterator<Item = f32>) -> Self {
        Want {
            dtype: "F32",
            shape: shape.to_vec(),
            values: values.into_iter().collect(),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// Every verb on `open` (one of `files`) either refuses it (exit 2, a
/// GGUF kind) or reads `t` as `want` says, all verbs alike; with
/// `must_read`, refusing fails.
fn assert_refused_or_read_files(
    case: &str,
    files: &[(&str, Vec<u8>)],
    open: &str,
    want: &Want,
    must_read: bool,
) {
    let folder = Folder::new(files);
    let cwd = folder.path();
    let r = timed(case, cwd, &["info", open]);
    let read = r.code == 0;
    assert!(read || !must_read, "{case}: info: {}", r.doc);
    let gguf_kind = |doc: &Value, verb: &str| {
        let kind = doc["error"]["kind"].as_str().unwrap_or_default();
        assert!(kind.starts_with("Gguf"), "{case}: {verb}: {doc}");
    };
    if read {
        assert_eq!(r.doc["format"], "gguf", "{case}");
        let t = r.doc["tensors"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == "t"))
            .unwrap_or_else(|| panic!("{case}: info lists no t: {}", r.doc));
        assert_eq!(t["shape"], json!(want.shape), "{case}: {t}");
        assert_eq!(t["dtype"], want.dtype, "{case}: {t}");
    } else {
        assert_eq!(r.code, 2, "{case}: info: {}", r.doc);
        assert_error_object(case, "info", &r.doc, &[]);
    }
    let r = timed(case, cwd, &["validate", open]);
    assert_eq!(r.doc["valid"], read, "{case}: validate: {}", r.doc);
    if read {
        assert_eq!(r.code, 0, "{case}: validate: {}", r.doc);
    } else {
        assert!(r.code == 1 || r.code == 2, "{case}: validate: {}", r.doc);
        gguf_kind(&r.doc, "validate");
    }
    for (verb, args) in verbs(open).into_iter().skip(2) {
        let r = timed(case, cwd, &args);
        if !read {
            assert_eq!(r.code, 2, "{case}: {verb}: {}", r.doc);
            gguf_kind(&r.doc, verb);
            folder.assert_only_inputs(case, verb);
            continue;
        }
        assert_eq!(r.code, 0, "{case}: {verb}: {}", r.doc);
        match verb {
            "stats" => {
                let t = r.doc["tensors"]
                    .as_array()
                    .and_then(|ts| ts.iter().find(|t| t["name"] == "t"))
                    .unwrap_or_else(|| panic!("{case}: stats of no t: {}", r.doc));
                assert_eq!(t["count"], want.values.len(), "{case}: {t}");
                let min = want.values.iter().copied().reduce(f32::min);
                let max = want.values.iter().copied().reduce(f32::max);
                assert_eq!(t["min"].as_f64(), min.map(f64::from), "{case}: {t}");
                assert_eq!(t["max"].as_f64(), max.map(f64::from), "{case}: {t}");
            }
            "export" => {
                let bytes = std::fs::read(cwd.join("out.npy")).expect("exported");
                assert!(bytes.ends_with(&want.bytes()), "{case}: exported values");
                std::fs::remove_file(cwd.join("out.npy")).expect("remove");
            }
            "resave" => {
                let out = cwd.join("out.safetensors");
                let bytes = std::fs::read(&out).expect("resaved");
                let st = safetensors::SafeTensors::deserialize(&bytes).expect("official reader");
                let t = st.tensor("t").expect("t");
                assert_eq!(t.data(), want.bytes().as_slice(), "{case}: resaved t");
                std::fs::remove_file(&out).expect("remove");
            }
            _ => {
                let rows = r.doc["tensors"].as_array().expect("rows");
                assert!(!rows.is_empty(), "{case}: diff: {}", r.doc);
                for row in rows {
                    assert_eq!(row["status"], "identical", "{case}: diff: {row}");
                }
            }
        }
        folder.assert_only_inputs(case, verb);
    }
}

fn assert_refused_or_read(case: &str, bytes: &[u8], want: &Want) {
    let name = format!("{case}.gguf");
    assert_refused_or_read_files(case, &[(&name, bytes.to_vec())], &name, want, false);
}

fn assert_read(case: &str, bytes: &[u8], want: &Want) {
    let name = format!("{case}.gguf");
    assert_refused_or_read_files(case, &[(&name, bytes.to_vec())], &name, want, true);
}

#[test]
fn the_good_file_is_read_by_every_verb() {
    // The base every hostile file is made from is itself sound.
    assert_read(
        "good",
        &good().bytes(),
        &Want::f32(&[2, 3], (0..6).map(|i| i as f32)),
    );
}

#[test]
fn an_empty_gguf_file_is_refused_as_gguf() {
    assert_refused("empty", b"", &["GgufMagic"]);
}

#[test]
fn a_gguf_file_of_a_foreign_magic_is_refused_as_gguf() {
    let mut bytes = good().bytes();
    bytes[..4].copy_from_slice(b"GGUX");
    assert_refused("bad_magic", &bytes, &["GgufMagic"]);
}

#[test]
fn versions_other_than_2_and_3_are_refused() {
    for v in [1, 99] {
        let mut f = good();
        f.version = v;
        assert_refused(&format!("version_{v}"), &f.bytes(), &["GgufVersion"]);
    }
}

#[test]
fn files_cut_short_are_refused() {
    let whole = good().bytes();
    for cut in [4, 6, 12, 20] {
        assert_refused(
            &format!("cut_fixed_header_at_{cut}"),
            &whole[..cut],
            &["GgufTruncated"],
        );
    }
    // The last pair a UINT32, cut two bytes into its value.
    let f = good_with(b"x", UINT32, &7u32.to_le_bytes());
    assert_refused(
        "cut_in_metadata",
        &f.bytes()[..f.kv_end() - 2],
        &["GgufTruncated"],
    );
    // Cut three bytes into the tensor info's offset.
    let f = good();
    assert_refused(
        "cut_in_tensor_infos",
        &f.bytes()[..f.infos_end() - 5],
        &["GgufTruncated"],
    );
    assert_refused(
        "cut_in_tensor_data",
        &whole[..whole.len() - 5],
        &["GgufTruncated", "GgufInvalid"],
    );
}

#[test]
fn counts_the_file_cannot_hold_are_refused() {
    let mut f = good();
    f.n_tensors = Some(1 << 63);
    assert_refused("n_tensors_2_63", &f.bytes(), &["GgufCount"]);
    let mut f = good();
    f.n_kv = Some(1 << 63);
    assert_refused("n_kv_2_63", &f.bytes(), &["GgufCount"]);
}

#[test]
fn lengths_past_the_end_are_refused() {
    let mut pair = (1u64 << 40).to_le_bytes().to_vec();
    pair.extend_from_slice(b"key");
    pair.extend_from_slice(&UINT8.to_le_bytes());
    pair.push(0);
    let f = Gguf::new()
        .raw_kv(&pair)
        .tensor(b"t", &[3, 2], F32, 0)
        .data(f32s(6));
    assert_refused("key_length_2_40", &f.bytes(), &["GgufCount"]);
    let mut long = (1u64 << 62).to_le_bytes().to_vec();
    long.extend_from_slice(b"abc");
    assert_refused(
        "string_length_2_62",
        &good_with(b"s", STRING, &long).bytes(),
        &["GgufCount"],
    );
    assert_refused(
        "array_2_62_uint8",
        &good_with(b"a", ARRAY, &array(UINT8, 1 << 62, b"abc")).bytes(),
        &["GgufCount"],
    );
    assert_refused(
        "array_2_40_strings",
        &good_with(b"a", ARRAY, &array(STRING, 1 << 40, &string(b"x"))).bytes(),
        &["GgufCount"],
    );
}

#[test]
fn unknown_value_array_and_ggml_types_are_refused() {
    assert_refused(
        "value_type_13",
        &good_with(b"v", 13, &[0; 8]).bytes(),
        &["GgufType"],
    );
    assert_refused(
        "array_element_type_13",
        &good_with(b"a", ARRAY, &array(13, 1, &[0; 8])).bytes(),
        &["GgufType"],
    );
    assert_refused(
        "ggml_type_99",
        &good_tensor(&[3, 2], 99, 0).bytes(),
        &["GgufType"],
    );
    // 4: the removed Q4_2 (a block of 32).
    assert_refused(
        "ggml_type_4_q4_2",
        &good_tensor(&[32], 4, 0).bytes(),
        &["GgufType"],
    );
}

#[test]
fn arrays_nested_more_than_64_deep_are_refused() {
    assert_refused(
        "nested_10000",
        &good_with(b"deep", ARRAY, &nested(10_000)).bytes(),
        &["GgufNesting"],
    );
    assert_refused(
        "nested_65",
        &good_with(b"deep", ARRAY, &nested(65)).bytes(),
        &["GgufNesting"],
    );
    // 64 deep is legal, and read.
    assert_read(
        "nested_64",
        &good_with(b"deep", ARRAY, &nested(64)).bytes(),
        &Want::f32(&[2, 3], (0..6).map(|i| i as f32)),
    );
}

#[test]
fn tensor_infos_that_cannot_be_are_refused() {
    let mut info = string(b"t");
    info.extend_from_slice(&u32::MAX.to_le_bytes());
    for _ in 0..3 {
        info.extend_from_slice(&3u64.to_le_bytes());
    }
    info.extend_from_slice(&F32.to_le_bytes());
    info.extend_from_slice(&0u64.to_le_bytes());
    let f = Gguf::new()
        .kv(b"general.architecture", STRING, &string(b"llama"))
        .raw_tensor(&info)
        .data(f32s(6));
    assert_refused(
        "n_dims_0xffffffff",
        &f.bytes(),
        &["GgufCount", "GgufInvalid"],
    );
    let invalid = ["GgufInvalid"];
    assert_refused(
        "dims_overflow_u64",
        &good_tensor(&[1 << 32, 1 << 32, 4], F32, 0).bytes(),
        &invalid,
    );
    assert_refused(
        "dims_past_the_end",
        &good_tensor(&[1000, 1000], F32, 0).bytes(),
        &invalid,
    );
    assert_refused(
        "ne0_not_a_multiple_of_the_block",
        &good_tensor(&[33], Q4_0, 0).data(vec![0; 64]).bytes(),
        &invalid,
    );
    let f = Gguf::new().tensor(b"t\xff", &[3, 2], F32, 0).data(f32s(6));
    assert_refused("name_not_utf8", &f.bytes(), &invalid);
    assert_refused(
        "key_not_utf8",
        &good_with(b"k\xff\xfe", UINT32, &1u32.to_le_bytes()).bytes(),
        &invalid,
    );
    let f = good().tensor(b"t", &[2], F32, 8);
    assert_refused("two_tensors_one_name", &f.bytes(), &invalid);
    let f = good_with(b"general.architecture", STRING, &string(b"gpt2"));
    assert_refused("one_key_twice", &f.bytes(), &invalid);
}

#[test]
fn offsets_past_the_data_and_bad_alignments_are_refused() {
    let invalid = ["GgufInvalid"];
    assert_refused(
        "offset_past_the_end",
        &good_tensor(&[3, 2], F32, 1 << 40).bytes(),
        &invalid,
    );
    assert_refused(
        "offset_plus_size_wraps",
        &good_tensor(&[3, 2], F32, u64::MAX - 8).bytes(),
        &invalid,
    );
    assert_refused(
        "offset_plus_size_one_past",
        &good_tensor(&[3, 2], F32, 4).bytes(),
        &invalid,
    );
    for (case, value_type, value) in [
        ("alignment_0", UINT32, 0u32.to_le_bytes().to_vec()),
        ("alignment_3", UINT32, 3u32.to_le_bytes().to_vec()),
        ("alignment_uint64", UINT64, 32u64.to_le_bytes().to_vec()),
        ("alignment_string", STRING, string(b"32")),
    ] {
        let f = good_with(b"general.alignment", value_type, &value);
        assert_refused(case, &f.bytes(), &invalid);
    }
}

#[test]
fn scalars_five_dimensions_unaligned_and_overlapping_tensors_are_refused_or_read() {
    let values = || (0..6).map(|i| i as f32);
    let scalar = good_tensor(&[], F32, 0).data(7f32.to_le_bytes().to_vec());
    assert_refused_or_read("n_dims_0", &scalar.bytes(), &Want::f32(&[], [7.0]));
    assert_refused_or_read(
        "n_dims_5",
        &good_tensor(&[3, 2, 1, 1, 1], F32, 0).bytes(),
        &Want::f32(&[1, 1, 1, 2, 3], values()),
    );
    let mut data = vec![0; 4];
    data.extend(f32s(6));
    assert_refused_or_read(
        "offset_not_aligned",
        &good_tensor(&[3, 2], F32, 4).data(data).bytes(),
        &Want::f32(&[2, 3], values()),
    );
    // `u` is elements 2..6 of `t`.
    let overlapping = good().tensor(b"u", &[2, 2], F32, 8);
    assert_refused_or_read(
        "overlapping",
        &overlapping.bytes(),
        &Want::f32(&[2, 3], values()),
    );
}

#[test]
fn legal_extremes_are_read() {
    // Zero elements under dimensions of 2^62, stored and block types.
    for (case, dims, ggml, dtype, shape) in [
        ("zero_rows_of_2_62", [0, 1 << 62], F32, "F32", [1 << 62, 0]),
        ("rows_of_2_62_zero", [1 << 62, 0], F32, "F32", [0, 1 << 62]),
        (
            "q4_0_zero_rows_of_2_62",
            [0, 1 << 62],
            Q4_0,
            "Q4_0",
            [1 << 62, 0],
        ),
        (
            "q4_0_rows_of_2_62_zero",
            [1 << 62, 0],
            Q4_0,
            "Q4_0",
            [0, 1 << 62],
        ),
    ] {
        let f = good_tensor(&dims, ggml, 0).data(Vec::new());
        let want = Want {
            dtype,
            shape: shape.to_vec(),
            values: Vec::new(),
        };
        assert_read(case, &f.bytes(), &want);
    }
    // An alignment of 2^31: the data section starts past the file's end,
    // and the one tensor holds nothing.
    let f = Gguf::new()
        .kv(b"general.alignment", UINT32, &(1u32 << 31).to_le_bytes())
        .tensor(b"t", &[0], F32, 0);
    assert_read("alignment_2_31", &f.bytes(), &Want::f32(&[0], []));
    // A Q4_0 tensor of two rows of 64: each block scale 0.5 (f16 0x3800)
    // and bytes 0..16, so its elements are 0.5 × (j - 8) for j < 16, then
    // 0.5 × (0 - 8) (the high nibbles).
    let block: Vec<u8> = [&[0x00, 0x38][..], &(0..16).collect::<Vec<u8>>()].concat();
    let f = good_tensor(&[64, 2], Q4_0, 0).data(block.repeat(4));
    let one: Vec<f32> = (0..32)
        .map(|j| if j < 16 { 0.5 * (j as f32 - 8.0) } else { -4.0 })
        .collect();
    let want = Want {
        dtype: "Q4_0",
        shape: vec![2, 64],
        values: one.repeat(4),
    };
    assert_read("q4_0", &f.bytes(), &want);
}

/// Part `no` (0-based) of a split model of `count` parts: its `split.*`
/// keys and one F32 tensor `name` of shape `[2, 3]`, values `0..6`.
fn part(no: u16, count: u16, name: &[u8]) -> Gguf {
    let f = if no == 0 {
        Gguf::new().kv(b"general.architecture", STRING, &string(b"llama"))
    } else {
        Gguf::new()
    };
    f.kv(b"split.no", UINT16, &no.to_le_bytes())
        .kv(b"split.count", UINT16, &count.to_le_bytes())
        .kv(b"split.tensors.count", INT32, &2i32.to_le_bytes())
        .tensor(name, &[3, 2], F32, 0)
        .data(f32s(6))
}

#[test]
fn a_split_model_whose_second_part_is_hostile_is_refused() {
    let first = ("m-00001-of-00002.gguf", part(0, 2, b"t").bytes());
    let second = "m-00002-of-00002.gguf";
    // Both parts sound: the model is read, `t` from the first part.
    assert_refused_or_read_files(
        "split_sound",
        &[first.clone(), (second, part(1, 2, b"u").bytes())],
        first.0,
        &Want::f32(&[2, 3], (0..6).map(|i| i as f32)),
        true,
    );
    let mut v99 = part(1, 2, b"u");
    v99.version = 99;
    let short = part(1, 2, b"u").bytes();
    let truncated = part(1, 2, b"u");
    let deep = part(1, 2, b"u").kv(b"deep", ARRAY, &nested(10_000));
    for (case, bytes, kinds) in [
        ("split_second_version_99", v99.bytes(), &["GgufVersion"][..]),
        (
            "split_second_data_cut",
            short[..short.len() - 4].to_vec(),
            &["GgufTruncated", "GgufInvalid"],
        ),
        (
            "split_second_cut_in_metadata",
            truncated.bytes()[..truncated.kv_end() - 2].to_vec(),
            &["GgufTruncated"],
        ),
        ("split_second_nested_10000", deep.bytes(), &["GgufNesting"]),
    ] {
        assert_refused_files(case, &[first.clone(), (second, bytes)], first.0, kinds);
    }
}

#[test]
fn a_first_part_of_65535_alone_is_a_missing_part() {
    let name = "m-00001-of-65535.gguf";
    assert_refused_files(
        "split_count_65535",
        &[(name, part(0, 65535, b"t").bytes())],
        name,
        &["ShardMissing"],
    );
}

#[test]
fn an_empty_second_part_is_refused_as_gguf() {
    let first = ("m-00001-of-00002.gguf", part(0, 2, b"t").bytes());
    assert_refused_files(
        "split_second_empty",
        &[first.clone(), ("m-00002-of-00002.gguf", Vec::new())],
        first.0,
        &["GgufMagic"],
    );
}

#[test]
fn a_hundred_thousand_empty_tensors_take_under_ten_seconds_per_verb() {
    // 3.8 MB of tensor infos, each of no element: every verb is linear in
    // the tensor count.
    let mut f = Gguf::new().kv(b"general.architecture", STRING, &string(b"llama"));
    f = f.tensor(b"t", &[0], F32, 0);
    for i in 1..100_000 {
        f = f.tensor(format!("t{i}").as_bytes(), &[0], F32, 0);
    }
    assert_read("tensors_100000", &f.bytes(), &Want::f32(&[0], []));
}
