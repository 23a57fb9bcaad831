//! Re-saving: every output is read back by the official crate and by our
//! reader; untouched tensors must be byte-identical, converted ones equal to
//! a reference conversion computed here (half's f32 conversions, or a
//! nearest-value search over every code's value), metadata as asked, and
//! the layout the reference writer's. Failures (a short write, a cancel, an
//! unwritable folder, the source as output) must leave every target as it
//! was and no temporary file behind.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use half::{bf16, f16};
use proptest::prelude::*;
use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::dtype::convert::{ConversionCounts, Converter, Overflow};
use tensorscope::format::{Checkpoint, INDEX_FILE_NAME};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::resave::{
    MetadataEdit, ResaveError, ResaveOptions, ResaveReport, execute, plan, resave,
};

use crate::fixtures::{RefTensor, reference_file, write};

/// A tensor as the official crate reads it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Reads a file with the official crate (a panic counts as a failure).
pub fn official(bytes: &[u8]) -> (Option<HashMap<String, String>>, BTreeMap<String, Loaded>) {
    catch_unwind(AssertUnwindSafe(|| {
        let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).expect("official: header");
        let st = safetensors::SafeTensors::deserialize(bytes).expect("official: file");
        let tensors = st
            .tensors()
            .into_iter()
            .map(|(name, view)| {
                (
                    name,
                    Loaded {
                        dtype: format!("{:?}", view.dtype()),
                        shape: view.shape().to_vec(),
                        data: view.data().to_vec(),
                    },
                )
            })
            .collect();
        (meta.metadata().clone(), tensors)
    }))
    .expect("the official crate does not panic on our output")
}

/// Every tensor of a checkpoint as our reader sees it.
pub fn ours(path: &Path) -> BTreeMap<String, Loaded> {
    let ck = Checkpoint::open(path).expect("our reader opens the output");
    assert!(ck.warnings().is_empty(), "{:?}", ck.warnings());
    ck.tensors()
        .iter()
        .map(|&t| {
            let info = ck.info(t).expect("info");
            (
                info.name().to_owned(),
                Loaded {
                    dtype: info.dtype().name().to_owned(),
                    shape: info.shape().iter().map(|&d| d as usize).collect(),
                    data: ck.bytes(t).to_vec(),
                },
            )
        })
        .collect()
}

/// The files in a folder (names), sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn t(dtype: RefDtype, shape: &[usize], data: Vec<u8>) -> RefTensor {
    RefTensor {
        dtype,
        shape: shape.to_vec(),
        data,
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed))
        .collect()
}

/// Values that exercise rounding: ties, near-ties, subnormals, specials.
fn tricky_f32() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        65504.0,
        65520.0,
        1.0 + f32::EPSILON,
        3.140_625,
    ];
    let mut x = 0.000_123_f32;
    while v.len() < 128 {
        v.push(x);
        v.push(-x * 1.7);
        x *= 3.3;
        if x > 1e30 {
            x = 1.1e-7;
        }
    }
    v
}

fn model() -> Vec<(String, RefTensor)> {
    vec![
        (
            "embed.weight".into(),
            t(RefDtype::F32, &[8, 16], f32_bytes(&tricky_f32())),
        ),
        (
            "layers.0.attn.q".into(),
            t(RefDtype::F32, &[4, 4], f32_bytes(&tricky_f32()[..16])),
        ),
        (
            "layers.0.norm".into(),
            t(RefDtype::F16, &[3, 3], pattern(18, 5)),
        ),
        (
            "layers.1.scale".into(),
            t(
                RefDtype::F64,
                &[5],
                f64_bytes(&[1.0, -2.5, 1e300, 3.0, 0.1]),
            ),
        ),
        ("step".into(), t(RefDtype::I64, &[], pattern(8, 1))),
        ("mask".into(), t(RefDtype::BOOL, &[3], vec![0, 1, 1])),
        ("packed".into(), t(RefDtype::F4, &[2, 4], pattern(4, 9))),
        ("lm_head".into(), t(RefDtype::BF16, &[6], pattern(12, 3))),
        ("empty".into(), t(RefDtype::U8, &[0, 3], Vec::new())),
    ]
}

fn source(dir: &Path, metadata: &[(&str, &str)]) -> PathBuf {
    let meta: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    write(
        dir,
        "model.safetensors",
        &reference_file(&model(), Some(meta)),
    )
}

fn run(ck: &Checkpoint, out: &Path, opts: &ResaveOptions) -> Result<ResaveReport, ResaveError> {
    resave(ck, out, opts, &CancelToken::new(), &Progress::new())
}

fn source_tensors() -> HashMap<String, RefTensor> {
    model().into_iter().collect()
}

/// Checks the reference writer's layout: N a multiple of 8, metadata
/// first, tensors by (dtype writer order, name), packed from 0.
fn assert_reference_layout(bytes: &[u8]) {
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    assert_eq!(n % 8, 0, "header length is padded to 8");
    let text = std::str::from_utf8(&bytes[8..8 + n]).expect("utf8");
    assert!(text.starts_with('{'));
    assert!(
        text.trim_end_matches(' ').ends_with('}'),
        "padded with spaces"
    );
    let header: serde_json::Value = serde_json::from_str(text).expect("json");
    let keys: Vec<&str> = {
        // serde_json sorts keys; find the file order from the text instead.
        let mut positions: Vec<(usize, &str)> = header
            .as_object()
            .expect("object")
            .keys()
            .map(|k| {
                let quoted = serde_json::Value::String(k.clone()).to_string();
                (
                    text.find(&format!("{quoted}:")).expect("key in text"),
                    k.as_str(),
                )
            })
            .collect();
        positions.sort_unstable();
        positions.into_iter().map(|(_, k)| k).collect()
    };
    let mut expected_offset = 0u64;
    let mut previous: Option<(usize, &str)> = None;
    for (i, key) in keys.iter().enumerate() {
        if *key == "__metadata__" {
            assert_eq!(i, 0, "__metadata__ comes first");
            continue;
        }
        let entry = &header[*key];
        let dtype = Dtype::from_name(entry["dtype"].as_str().expect("dtype")).expect("known");
        let rank = dtype.writer_rank();
        if let Some((prank, pname)) = previous {
            assert!((prank, pname) < (rank, *key), "{pname} before {key}");
        }
        previous = Some((rank, key));
        let begin = entry["data_offsets"][0].as_u64().expect("begin");
        let end = entry["data_offsets"][1].as_u64().expect("end");
        assert_eq!(begin, expected_offset, "{key} is packed");
        expected_offset = end;
    }
    assert_eq!(bytes.len() as u64, 8 + n as u64 + expected_offset);
}

#[test]
fn subset_renames_metadata_and_bf16_read_back_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt"), ("keep", "x"), ("old", "y")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("out.safetensors");
    let opts = ResaveOptions {
        keep: vec![
            "^layers\\.".into(),
            "^embed".into(),
            "mask|packed|step".into(),
        ],
        drop: vec!["norm$".into()],
        renames: vec![
            ("embed.weight".into(), "model.embed.weight".into()),
            ("mask".into(), "attention_mask".into()),
        ],
        metadata_edits: vec![
            MetadataEdit::Set {
                key: "new".into(),
                value: "1".into(),
            },
            MetadataEdit::Set {
                key: "keep".into(),
                value: "changed".into(),
            },
            MetadataEdit::Delete { key: "old".into() },
        ],
        conversions: vec![(Dtype::F32, Dtype::BF16)],
        ..ResaveOptions::default()
    };
    let report = run(&ck, &out, &opts).expect("resave");
    let bytes = std::fs::read(&out).expect("read output");
    assert_reference_layout(&bytes);
    let (meta, back) = official(&bytes);
    assert_eq!(back, ours(&out), "the official crate and our reader agree");
    let expected_meta: HashMap<String, String> =
        [("format", "pt"), ("keep", "changed"), ("new", "1")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
    assert_eq!(meta, Some(expected_meta));
    let names: Vec<&str> = back.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "attention_mask",
            "layers.0.attn.q",
            "layers.1.scale",
            "model.embed.weight",
            "packed",
            "step"
        ]
    );
    let src_t = source_tensors();
    // Untouched tensors: byte-identical, same dtype and shape.
    for (out_name, src_name) in [
        ("attention_mask", "mask"),
        ("layers.1.scale", "layers.1.scale"),
        ("packed", "packed"),
        ("step", "step"),
    ] {
        let s = &src_t[src_name];
        assert_eq!(back[out_name].data, s.data, "{out_name}");
        assert_eq!(back[out_name].shape, s.shape);
        assert_eq!(back[out_name].dtype, format!("{:?}", s.dtype));
    }
    // Converted tensors: BF16 of each f32, rounded by half's (correct)
    // f32 conversion.
    for (out_name, src_name) in [
        ("model.embed.weight", "embed.weight"),
        ("layers.0.attn.q", "layers.0.attn.q"),
    ] {
        let s = &src_t[src_name];
        let expected: Vec<u8> = s
            .data
            .chunks_exact(4)
            .flat_map(|c| {
                let v = f32::from_le_bytes(c.try_into().expect("4"));
                bf16::from_f32(v).to_bits().to_le_bytes()
            })
            .collect();
        let got = &back[out_name];
        assert_eq!(got.dtype, "BF16");
        assert_eq!(got.shape, s.shape);
        // NaN payloads aside (half sets the quiet bit, so do we), every
        // code must match.
        assert_eq!(got.data, expected, "{out_name}");
    }
    assert_eq!(report.conversions.len(), 2);
    assert_eq!(report.conversion_totals.elements, 128 + 16);
    // Both tensors hold one NaN and f32::MAX, which overflows BF16 to Inf
    // (IEEE); 1e-40 is a BF16 subnormal.
    assert_eq!(report.conversion_totals.nan, 2);
    assert_eq!(report.conversion_totals.saturated, 0);
    assert_eq!(report.conversion_totals.overflow_inf, 2);
    assert_eq!(
        listing(dir.path()),
        ["model.safetensors", "out.safetensors"]
    );
}

#[test]
fn output_is_byte_identical_to_the_official_writer() {
    // With one metadata key the official writer is deterministic, so the
    // whole file must be the same bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("copy.safetensors");
    run(&ck, &out, &ResaveOptions::default()).expect("resave");
    assert_eq!(
        std::fs::read(&out).expect("out"),
        std::fs::read(&src).expect("src")
    );
    // A subset with a conversion, against the official writer given the
    // converted tensors.
    let out = dir.path().join("subset.safetensors");
    let opts = ResaveOptions {
        drop: vec!["^layers".into()],
        conversions: vec![(Dtype::BF16, Dtype::F32), (Dtype::F16, Dtype::F32)],
        ..ResaveOptions::default()
    };
    run(&ck, &out, &opts).expect("resave");
    let expected: Vec<(String, RefTensor)> = model()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("layers"))
        .map(|(n, mut tensor)| {
            if tensor.dtype == RefDtype::BF16 {
                tensor.data = tensor
                    .data
                    .chunks_exact(2)
                    .flat_map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32().to_le_bytes())
                    .collect();
                tensor.dtype = RefDtype::F32;
            }
            (n, tensor)
        })
        .collect();
    let meta = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    assert_eq!(
        std::fs::read(&out).expect("out"),
        reference_file(&expected, Some(meta))
    );
}

/// Nearest grid point to |v| by search, ties to the even code. `grid` is
/// (value, code) for every finite non-negative code in increasing order,
/// then the first point past the grid (Inf, or E4M3's missing 480).
fn nearest(v: f64, grid: &[(f64, u32)]) -> (u32, bool) {
    let magnitude = v.abs();
    let above = grid.partition_point(|&(value, _)| value < magnitude);
    let below = above.checked_sub(1).and_then(|k| grid.get(k));
    let pick = match (below, grid.get(above)) {
        (_, Some(&(value, code))) if value == magnitude => code,
        (Some(&(low, low_code)), Some(&(high, high_code))) => {
            let (to_low, to_high) = (magnitude - low, high - magnitude);
            if to_low < to_high || (to_low == to_high && low_code % 2 == 0) {
                low_code
            } else {
                high_code
            }
        }
        (Some(&(_, code)), None) | (None, Some(&(_, code))) => code,
        (None, None) => 0,
    };
    let beyond = grid.last().map(|&(_, code)| code) == Some(pick);
    (pick, beyond)
}

fn half_grid(decode: impl Fn(u16) -> f64, max_code: u16, beyond: (f64, u32)) -> Vec<(f64, u32)> {
    let mut g: Vec<(f64, u32)> = (0..=max_code).map(|c| (decode(c), u32::from(c))).collect();
    g.push(beyond);
    g
}

static F16_GRID: LazyLock<Vec<(f64, u32)>> =
    LazyLock::new(|| half_grid(|c| f16::from_bits(c).to_f64(), 0x7bff, (65536.0, 0x7c00)));
static BF16_GRID: LazyLock<Vec<(f64, u32)>> = LazyLock::new(|| {
    half_grid(
        |c| bf16::from_bits(c).to_f64(),
        0x7f7f,
        (2f64.powi(128), 0x7f80),
    )
});

fn f16_grid() -> &'static [(f64, u32)] {
    &F16_GRID
}

fn bf16_grid() -> &'static [(f64, u32)] {
    &BF16_GRID
}

/// The ml_dtypes values of an 8-bit float, from the committed tables.
fn ml_dtypes_table(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.split_whitespace();
            let _code = cols.next();
            f64::from_bits(u64::from_str_radix(cols.next().expect("bits"), 16).expect("hex"))
        })
        .collect()
}

static E4M3_GRID: LazyLock<(Vec<(f64, u32)>, u8)> = LazyLock::new(|| build_f8_grid(Dtype::F8E4M3));
static E5M2_GRID: LazyLock<(Vec<(f64, u32)>, u8)> = LazyLock::new(|| build_f8_grid(Dtype::F8E5M2));

fn f8_grid(dtype: Dtype) -> (&'static [(f64, u32)], u8) {
    let g = if dtype == Dtype::F8E4M3 {
        &*E4M3_GRID
    } else {
        &*E5M2_GRID
    };
    (&g.0, g.1)
}

fn build_f8_grid(dtype: Dtype) -> (Vec<(f64, u32)>, u8) {
    let (text, max_code, beyond) = if dtype == Dtype::F8E4M3 {
        (
            include_str!("../data/dtype_tables/F8_E4M3.txt"),
            0x7eu32,
            (480.0, 0x7f),
        )
    } else {
        (
            include_str!("../data/dtype_tables/F8_E5M2.txt"),
            0x7b,
            (65536.0, 0x7c),
        )
    };
    let values = ml_dtypes_table(text);
    let mut g: Vec<(f64, u32)> = (0..=max_code).map(|c| (values[c as usize], c)).collect();
    g.push(beyond);
    (g, max_code as u8)
}

/// The reference code of one value for an IEEE 16-bit target.
fn reference_16(v: f64, grid: &[(f64, u32)], inf: u16, nan: u16) -> u16 {
    let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
    if v.is_nan() {
        return sign | nan;
    }
    if v.is_infinite() {
        return sign | inf;
    }
    let (code, _) = nearest(v, grid);
    sign | code as u16
}

/// The reference code of one value for an F8 target, and whether it
/// overflowed (saturated or became NaN).
fn reference_f8(v: f64, dtype: Dtype, overflow: Overflow) -> (u8, bool) {
    let (grid, max_code) = f8_grid(dtype);
    let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
    let nan = if dtype == Dtype::F8E4M3 { 0x7f } else { 0x7e };
    if v.is_nan() {
        return (sign | nan, false);
    }
    let over = |sign: u8| match overflow {
        Overflow::Saturate => (sign | max_code, true),
        Overflow::Nan => (sign | nan, true),
    };
    if v.is_infinite() {
        return if dtype == Dtype::F8E5M2 {
            (sign | 0x7c, false)
        } else {
            over(sign)
        };
    }
    let (code, beyond) = nearest(v, grid);
    if beyond {
        over(sign)
    } else {
        (sign | code as u8, false)
    }
}

fn convert(to: Dtype, overflow: Overflow, values: &[f64]) -> (Vec<u8>, ConversionCounts) {
    let mut out = Vec::new();
    let mut counts = ConversionCounts::default();
    Converter::new(to, overflow)
        .expect("target")
        .convert(values, &mut out, &mut counts);
    (out, counts)
}

/// F64 values whose correct rounding differs from rounding through f32.
fn double_rounding_f64() -> Vec<f64> {
    let p = |e: i32| 2f64.powi(e);
    vec![
        1.0 + p(-11) + p(-40),
        1.0 + p(-11) - p(-40),
        -(1.0 + p(-11) + p(-40)),
        1.0 + p(-8) + p(-40),
        3.0 * (1.0 + p(-8) + p(-35)),
        p(-24) + p(-60),
        p(-25) + p(-60),
        p(-25),
        65520.0 - p(-30),
        65520.0,
        1e300,
        -1e-300,
        f64::MIN_POSITIVE / 4.0,
        0.1,
        1.0 / 3.0,
        f64::NAN,
        f64::NEG_INFINITY,
    ]
}

#[test]
fn f64_converts_directly_to_f16_and_bf16() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut values = double_rounding_f64();
    let mut x = 1.234_567_890_123e-9_f64;
    while values.len() < 400 {
        values.push(x);
        values.push(-x * 1.000_000_1);
        x *= 1.37;
    }
    let tensors = vec![(
        "x".to_owned(),
        t(RefDtype::F64, &[values.len()], f64_bytes(&values)),
    )];
    let src = write(
        dir.path(),
        "f64.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    for (to, grid, inf, nan) in [
        (Dtype::F16, f16_grid(), 0x7c00u16, 0x7e00u16),
        (Dtype::BF16, bf16_grid(), 0x7f80, 0x7fc0),
    ] {
        let out = dir.path().join(format!("{to}.safetensors"));
        let opts = ResaveOptions {
            conversions: vec![(Dtype::F64, to)],
            ..ResaveOptions::default()
        };
        let report = run(&ck, &out, &opts).expect("resave");
        let (meta, back) = official(&std::fs::read(&out).expect("read"));
        assert_eq!(meta, None, "no metadata in, none out");
        assert_eq!(back, ours(&out));
        let got = &back["x"];
        assert_eq!(got.dtype, to.name());
        let expected: Vec<u8> = values
            .iter()
            .flat_map(|&v| reference_16(v, grid, inf, nan).to_le_bytes())
            .collect();
        assert_eq!(got.data, expected, "{to}");
        let overflowed = values
            .iter()
            .zip(expected.chunks_exact(2))
            .filter(|(v, c)| v.is_finite() && u16::from_le_bytes([c[0], c[1]]) & 0x7fff == inf)
            .count();
        assert_eq!(report.conversion_totals.overflow_inf, overflowed as u64);
        assert!(overflowed > 0);
    }
    // The first value is where rounding through f32 goes wrong: check the
    // direct result explicitly.
    let (b, _) = convert(Dtype::F16, Overflow::Saturate, &values[..1]);
    assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3c01);
    let (b, _) = convert(Dtype::BF16, Overflow::Saturate, &values[3..4]);
    assert_eq!(u16::from_le_bytes([b[0], b[1]]), 0x3f81);
}

#[test]
fn every_source_dtype_converts_to_f8_like_a_table_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut base: Vec<f64> = vec![
        0.0,
        -0.0,
        448.0,
        464.0,
        465.0,
        -470.0,
        480.0,
        57344.0,
        61439.0,
        61440.0,
        1e9,
        2f64.powi(-9),
        2f64.powi(-10),
        3.0 * 2f64.powi(-11),
        2f64.powi(-16),
        2f64.powi(-17),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.3,
        1.0625,
        1.1875,
    ];
    let mut x = 1.1e-6;
    while base.len() < 300 {
        base.push(x);
        base.push(-x * 1.01);
        x *= 1.21;
    }
    // Each source dtype holds the values it can represent (rounded to it
    // first), so the reference conversion starts from the stored value.
    let f32s: Vec<f32> = base.iter().map(|&v| v as f32).collect();
    let f16s: Vec<f16> = base.iter().map(|&v| f16::from_f32(v as f32)).collect();
    let bf16s: Vec<bf16> = base.iter().map(|&v| bf16::from_f32(v as f32)).collect();
    let n = base.len();
    let tensors = vec![
        ("a64".to_owned(), t(RefDtype::F64, &[n], f64_bytes(&base))),
        ("b32".to_owned(), t(RefDtype::F32, &[n], f32_bytes(&f32s))),
        (
            "c16".to_owned(),
            t(
                RefDtype::F16,
                &[n],
                f16s.iter().flat_map(|h| h.to_le_bytes()).collect(),
            ),
        ),
        (
            "dbf".to_owned(),
            t(
                RefDtype::BF16,
                &[n],
                bf16s.iter().flat_map(|h| h.to_le_bytes()).collect(),
            ),
        ),
    ];
    let stored: HashMap<&str, Vec<f64>> = HashMap::from([
        ("a64", base.clone()),
        ("b32", f32s.iter().map(|&v| f64::from(v)).collect()),
        ("c16", f16s.iter().map(|v| v.to_f64()).collect()),
        ("dbf", bf16s.iter().map(|v| v.to_f64()).collect()),
    ]);
    let src = write(
        dir.path(),
        "src.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    for to in [Dtype::F8E4M3, Dtype::F8E5M2] {
        for overflow in [Overflow::Saturate, Overflow::Nan] {
            let out = dir.path().join(format!("{to}-{overflow:?}.safetensors"));
            let opts = ResaveOptions {
                conversions: [Dtype::F64, Dtype::F32, Dtype::F16, Dtype::BF16]
                    .into_iter()
                    .map(|from| (from, to))
                    .collect(),
                overflow,
                ..ResaveOptions::default()
            };
            let report = run(&ck, &out, &opts).expect("resave");
            let (_, back) = official(&std::fs::read(&out).expect("read"));
            assert_eq!(back, ours(&out));
            for c in &report.conversions {
                let values = &stored[c.name.as_str()];
                let mut expected = Vec::with_capacity(values.len());
                let mut overflowed = 0u64;
                for &v in values {
                    let (code, over) = reference_f8(v, to, overflow);
                    expected.push(code);
                    overflowed += u64::from(over);
                }
                assert_eq!(
                    back[&c.name].data, expected,
                    "{} to {to} {overflow:?}",
                    c.name
                );
                assert_eq!(back[&c.name].dtype, to.name());
                match overflow {
                    Overflow::Saturate => {
                        assert_eq!(c.counts.saturated, overflowed);
                        assert_eq!(c.counts.overflow_nan, 0);
                    }
                    Overflow::Nan => {
                        assert_eq!(c.counts.overflow_nan, overflowed);
                        assert_eq!(c.counts.saturated, 0);
                    }
                }
                assert!(overflowed > 0, "{}: the values include overflows", c.name);
                assert_eq!(c.counts.nan, 1);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_f64_rounds_like_the_search(bits in any::<u64>()) {
        let v = f64::from_bits(bits);
        let (b, _) = convert(Dtype::F16, Overflow::Saturate, &[v]);
        let got = u16::from_le_bytes([b[0], b[1]]);
        if v.is_nan() {
            prop_assert_eq!(got & 0x7c00, 0x7c00);
            prop_assert!(got & 0x3ff != 0);
        } else {
            prop_assert_eq!(got, reference_16(v, f16_grid(), 0x7c00, 0x7e00));
        }
        let (b, _) = convert(Dtype::BF16, Overflow::Saturate, &[v]);
        let got = u16::from_le_bytes([b[0], b[1]]);
        if !v.is_nan() {
            prop_assert_eq!(got, reference_16(v, bf16_grid(), 0x7f80, 0x7fc0));
        }
        for to in [Dtype::F8E4M3, Dtype::F8E5M2] {
            for overflow in [Overflow::Saturate, Overflow::Nan] {
                let (b, counts) = convert(to, overflow, &[v]);
                let (code, over) = reference_f8(v, to, overflow);
                prop_assert_eq!(b[0], code);
                prop_assert_eq!(counts.saturated + counts.overflow_nan, u64::from(over));
            }
        }
    }

    #[test]
    fn small_magnitudes_round_like_the_search(m in 0u64..(1 << 52), e in -30i32..20, neg in any::<bool>()) {
        // Dense coverage of the F8 and F16 ranges (random bits mostly miss them).
        let v = f64::from_bits((((e + 1023) as u64) << 52) | m) * if neg { -1.0 } else { 1.0 };
        for to in [Dtype::F8E4M3, Dtype::F8E5M2] {
            let (b, _) = convert(to, Overflow::Saturate, &[v]);
            prop_assert_eq!(b[0], reference_f8(v, to, Overflow::Saturate).0);
        }
        let (b, _) = convert(Dtype::F16, Overflow::Saturate, &[v]);
        prop_assert_eq!(u16::from_le_bytes([b[0], b[1]]), reference_16(v, f16_grid(), 0x7c00, 0x7e00));
    }
}

fn index_of(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(INDEX_FILE_NAME)).expect("index")).expect("json")
}

#[test]
fn resharding_writes_shards_and_an_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("sharded");
    let opts = ResaveOptions {
        max_shard_bytes: Some(100),
        ..ResaveOptions::default()
    };
    let report = run(&ck, &out, &opts).expect("resave");
    let files = listing(&out);
    let m = report.files.len();
    assert!(m >= 3, "{files:?}");
    let mut expected_files: Vec<String> = (1..=m)
        .map(|i| format!("model-{i:05}-of-{m:05}.safetensors"))
        .collect();
    expected_files.push(INDEX_FILE_NAME.into());
    expected_files.sort();
    assert_eq!(files, expected_files);
    let index = index_of(&out);
    let source_total: u64 = model().iter().map(|(_, t)| t.data.len() as u64).sum();
    assert_eq!(index["metadata"]["total_size"], source_total);
    let weight_map = index["weight_map"].as_object().expect("weight_map");
    assert_eq!(weight_map.len(), model().len());
    let mut all = BTreeMap::new();
    for name in expected_files
        .iter()
        .filter(|n| n.ends_with(".safetensors"))
    {
        let path = out.join(name);
        let bytes = std::fs::read(&path).expect("shard");
        assert_reference_layout(&bytes);
        let (meta, tensors) = official(&bytes);
        assert_eq!(meta, Some(HashMap::from([("format".into(), "pt".into())])));
        let data: u64 = tensors.values().map(|t| t.data.len() as u64).sum();
        assert!(data <= 100 || tensors.len() == 1, "{name}: {data} bytes");
        for (tensor, loaded) in tensors {
            assert_eq!(weight_map[&tensor], name.as_str());
            all.insert(tensor, loaded);
        }
    }
    assert_eq!(all, official(&std::fs::read(&src).expect("src")).1);
    assert_eq!(ours(&out), all, "the folder opens as one model");
    assert_eq!(ours(&out.join(INDEX_FILE_NAME)), all);
}

fn two_shard_source(dir: &Path) -> PathBuf {
    let shard = |names: &[&str], meta: &[(&str, &str)]| {
        let tensors: Vec<(String, RefTensor)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_owned(), t(RefDtype::F32, &[2], pattern(8, i as u8))))
            .collect();
        reference_file(
            &tensors,
            Some(
                meta.iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
        )
    };
    write(
        dir,
        "model-00001-of-00002.safetensors",
        &shard(&["a", "b"], &[("format", "pt")]),
    );
    write(
        dir,
        "model-00002-of-00002.safetensors",
        &shard(&["c"], &[("format", "pt"), ("extra", "1")]),
    );
    let index = serde_json::json!({
        "metadata": {"total_size": 24, "note": "kept"},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00001-of-00002.safetensors",
            "c": "model-00002-of-00002.safetensors",
        }
    });
    write(dir, INDEX_FILE_NAME, index.to_string().as_bytes())
}

#[test]
fn a_sharded_model_resaves_to_one_file_or_new_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src_dir = dir.path().join("src");
    let idx = two_shard_source(&src_dir);
    let ck = Checkpoint::open(&idx).expect("open");
    let before = ours(&idx);
    let out = dir.path().join("one.safetensors");
    let report = run(
        &ck,
        &out,
        &ResaveOptions {
            renames: vec![("c".into(), "a2".into())],
            ..ResaveOptions::default()
        },
    )
    .expect("resave");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let (meta, back) = official(&std::fs::read(&out).expect("read"));
    assert_eq!(
        meta,
        Some(HashMap::from([
            ("format".into(), "pt".into()),
            ("extra".into(), "1".into())
        ]))
    );
    assert_eq!(back["a"], before["a"]);
    assert_eq!(back["b"], before["b"]);
    assert_eq!(back["a2"], before["c"]);
    // Sharded to sharded, in another folder: the index keeps its other
    // metadata keys and gets a new total_size.
    let out_dir = dir.path().join("resharded");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let index_path = out_dir.join("custom.index.json");
    run(
        &ck,
        &index_path,
        &ResaveOptions {
            keep: vec!["^[ac]$".into()],
            conversions: vec![(Dtype::F32, Dtype::F16)],
            ..ResaveOptions::default()
        },
    )
    .expect("resave");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).expect("index")).expect("json");
    assert_eq!(index["metadata"]["total_size"], 8);
    assert_eq!(index["metadata"]["note"], "kept");
    assert_eq!(
        listing(&out_dir),
        ["custom.index.json", "model-00001-of-00001.safetensors"]
    );
    let back = ours(&index_path);
    assert_eq!(back.keys().collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(back["a"].dtype, "F16");
}

#[test]
fn the_gui_selection_picks_tensors_by_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let name = |i: usize| ck.info(ck.tensors()[i]).expect("info").name().to_owned();
    let picked = [name(5), name(1)];
    let out = dir.path().join("sel.safetensors");
    let p = plan(
        &ck,
        &out,
        &ResaveOptions {
            selection: Some(vec![5, 1, 5]),
            ..ResaveOptions::default()
        },
    )
    .expect("plan");
    // The plan writes nothing and lists the outcome in checkpoint order.
    assert!(!out.exists());
    assert_eq!(
        p.tensors.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        [picked[1].clone(), picked[0].clone()]
    );
    execute(&ck, &p, &CancelToken::new(), &Progress::new()).expect("execute");
    // A plan edited afterwards, or run on another checkpoint, is refused.
    let mut bad = p.clone();
    bad.tensors[0].file = 3;
    let e = execute(&ck, &bad, &CancelToken::new(), &Progress::new()).expect_err("bad plan");
    assert_eq!(e.kind(), "InvalidPlan", "{e}");
    let mut bad = p.clone();
    bad.tensors[1].dtype = Dtype::F64;
    let e = execute(&ck, &bad, &CancelToken::new(), &Progress::new()).expect_err("bad plan");
    assert_eq!(e.kind(), "InvalidPlan", "{e}");
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = two_shard_source(other_dir.path());
    let other = Checkpoint::open(&other).expect("open");
    let e = execute(&other, &p, &CancelToken::new(), &Progress::new()).expect_err("other");
    assert_eq!(e.kind(), "InvalidPlan", "{e}");
    let back = ours(&out);
    assert_eq!(back.len(), 2);
    assert!(back.contains_key(&picked[0]) && back.contains_key(&picked[1]));
    assert!(matches!(
        plan(
            &ck,
            &out,
            &ResaveOptions {
                selection: Some(vec![99]),
                ..ResaveOptions::default()
            }
        ),
        Err(ResaveError::SelectionOutOfRange { index: 99, .. })
    ));
}

#[test]
fn bad_requests_are_refused_before_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("out.safetensors");
    let cases: Vec<(ResaveOptions, &str)> = vec![
        (
            ResaveOptions {
                renames: vec![("mask".into(), "step".into())],
                ..ResaveOptions::default()
            },
            "NameCollision",
        ),
        (
            ResaveOptions {
                renames: vec![("nope".into(), "x".into())],
                ..ResaveOptions::default()
            },
            "UnknownTensor",
        ),
        (
            ResaveOptions {
                drop: vec!["mask".into()],
                renames: vec![("mask".into(), "x".into())],
                ..ResaveOptions::default()
            },
            "RenameNotSelected",
        ),
        (
            ResaveOptions {
                renames: vec![("mask".into(), "x".into()), ("mask".into(), "y".into())],
                ..ResaveOptions::default()
            },
            "DuplicateRename",
        ),
        (
            ResaveOptions {
                renames: vec![("mask".into(), "__metadata__".into())],
                ..ResaveOptions::default()
            },
            "ReservedName",
        ),
        (
            ResaveOptions {
                keep: vec!["^nothing$".into()],
                ..ResaveOptions::default()
            },
            "NothingSelected",
        ),
        (
            ResaveOptions {
                keep: vec!["(".into()],
                ..ResaveOptions::default()
            },
            "InvalidRegex",
        ),
        (
            ResaveOptions {
                conversions: vec![(Dtype::I64, Dtype::F32)],
                ..ResaveOptions::default()
            },
            "UnsupportedConversion",
        ),
        (
            ResaveOptions {
                conversions: vec![(Dtype::F32, Dtype::F16), (Dtype::F32, Dtype::BF16)],
                ..ResaveOptions::default()
            },
            "DuplicateConversion",
        ),
        (
            ResaveOptions {
                metadata_edits: vec![MetadataEdit::Delete {
                    key: "absent".into(),
                }],
                ..ResaveOptions::default()
            },
            "MetadataKeyMissing",
        ),
        (
            ResaveOptions {
                max_shard_bytes: Some(0),
                ..ResaveOptions::default()
            },
            "InvalidShardSize",
        ),
    ];
    for (opts, kind) in cases {
        let e = run(&ck, &out, &opts).expect_err(kind);
        assert_eq!(e.kind(), kind, "{e}");
        assert!(!e.to_string().is_empty());
    }
    // Swapping two names is not a collision.
    let swapped = run(
        &ck,
        &out,
        &ResaveOptions {
            renames: vec![
                ("mask".into(), "step".into()),
                ("step".into(), "mask".into()),
            ],
            ..ResaveOptions::default()
        },
    )
    .expect("swap");
    assert_eq!(swapped.tensors.len(), model().len());
    let back = ours(&out);
    assert_eq!(back["step"].dtype, "BOOL");
    // A sharded output needs a folder or an index path.
    let e = run(
        &ck,
        &dir.path().join("x.safetensors"),
        &ResaveOptions {
            max_shard_bytes: Some(10),
            ..ResaveOptions::default()
        },
    )
    .expect_err("layout");
    assert_eq!(e.kind(), "InvalidOutput");
    assert_eq!(
        listing(dir.path()),
        ["model.safetensors", "out.safetensors"]
    );
}

#[test]
fn the_source_is_never_overwritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let original = std::fs::read(&src).expect("src");
    let ck = Checkpoint::open(&src).expect("open");
    let hard = dir.path().join("hard.safetensors");
    std::fs::hard_link(&src, &hard).expect("hard link");
    let soft = dir.path().join("soft.safetensors");
    std::os::unix::fs::symlink(&src, &soft).expect("symlink");
    for out in [
        src.clone(),
        hard.clone(),
        soft.clone(),
        dir.path().to_path_buf(),
        dir.path().join(".").join("model.safetensors"),
    ] {
        let e = run(&ck, &out, &ResaveOptions::default()).expect_err("refused");
        assert!(
            matches!(e, ResaveError::WouldOverwriteSource { .. }),
            "{}: {e}",
            out.display()
        );
        assert!(e.to_string().contains("another name"), "{e}");
    }
    assert_eq!(std::fs::read(&src).expect("src"), original);
    assert_eq!(
        listing(dir.path()),
        ["hard.safetensors", "model.safetensors", "soft.safetensors"]
    );
    // A sharded source: writing new shards over its own.
    let sharded = dir.path().join("sharded");
    let idx = two_shard_source(&sharded);
    let ck = Checkpoint::open(&idx).expect("open");
    for out in [sharded.clone(), idx.clone()] {
        let e = run(
            &ck,
            &out,
            &ResaveOptions {
                max_shard_bytes: Some(16),
                ..ResaveOptions::default()
            },
        )
        .expect_err("refused");
        assert_eq!(e.kind(), "WouldOverwriteSource", "{e}");
    }
    assert_eq!(ours(&idx).len(), 3);
}

/// A target that exists with known content, to check it stays as it was.
fn existing_target(dir: &Path) -> PathBuf {
    write(dir, "target.safetensors", b"previous content")
}

#[test]
fn a_short_write_leaves_the_target_and_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let target = existing_target(dir.path());
    for fail_after in [0u64, 7, 100, 400] {
        let e = run(
            &ck,
            &target,
            &ResaveOptions {
                fail_after_bytes: Some(fail_after),
                ..ResaveOptions::default()
            },
        )
        .expect_err("short write");
        assert_eq!(e.kind(), "Io", "{e}");
        assert!(
            e.to_string().contains("failed to write whole buffer"),
            "{e}"
        );
        assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
        assert_eq!(
            listing(dir.path()),
            ["model.safetensors", "target.safetensors"]
        );
    }
    // In a sharded output the failure comes in a later shard: no shard
    // and no index is renamed, and the folder this call made is removed.
    let out = dir.path().join("shards");
    let opts = ResaveOptions {
        max_shard_bytes: Some(100),
        ..ResaveOptions::default()
    };
    let p = plan(&ck, &out, &opts).expect("plan");
    assert!(p.files.len() >= 3);
    // Learn the first shard's size from a write that succeeds, then fail
    // just past it, inside the second shard.
    let probe = dir.path().join("probe");
    let ok = run(&ck, &probe, &opts).expect("probe");
    std::fs::remove_dir_all(&probe).expect("rm probe");
    let first_file = ok.files[0].file_size + 10;
    let e = run(
        &ck,
        &out,
        &ResaveOptions {
            fail_after_bytes: Some(first_file),
            ..opts.clone()
        },
    )
    .expect_err("short write");
    assert_eq!(e.kind(), "Io", "{e}");
    assert!(!out.exists(), "the created folder is removed");
    // Into an existing folder with an old index: it stays.
    std::fs::create_dir(&out).expect("mkdir");
    let old_index = write(&out, INDEX_FILE_NAME, b"{\"old\": true}");
    let e = run(
        &ck,
        &out,
        &ResaveOptions {
            fail_after_bytes: Some(first_file),
            ..opts.clone()
        },
    )
    .expect_err("short write");
    assert_eq!(e.kind(), "Io");
    assert_eq!(listing(&out), [INDEX_FILE_NAME]);
    assert_eq!(
        std::fs::read(&old_index).expect("index"),
        b"{\"old\": true}"
    );
    run(&ck, &out, &opts).expect("then it works");
    assert_eq!(ours(&out).len(), model().len());
}

#[test]
fn a_cancelled_save_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Big enough for several 64 Ki-element conversion chunks.
    let values: Vec<f32> = (0..300_000).map(|i| i as f32 * 0.5).collect();
    let tensors = vec![
        (
            "w".to_owned(),
            t(RefDtype::F32, &[values.len()], f32_bytes(&values)),
        ),
        ("z".to_owned(), t(RefDtype::U8, &[4], vec![1, 2, 3, 4])),
    ];
    let src = write(
        dir.path(),
        "big.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    let target = existing_target(dir.path());
    let opts = ResaveOptions {
        conversions: vec![(Dtype::F32, Dtype::BF16)],
        ..ResaveOptions::default()
    };
    // Cancelled before it starts.
    let cancel = CancelToken::new();
    cancel.cancel();
    let e = resave(&ck, &target, &opts, &cancel, &Progress::new()).expect_err("cancelled");
    assert!(matches!(e, ResaveError::Cancelled), "{e}");
    // Cancelled midway, from the progress callback, as the GUI's button would.
    let cancel = CancelToken::new();
    let updates = Arc::new(AtomicU64::new(0));
    let progress = {
        let cancel = cancel.clone();
        let updates = Arc::clone(&updates);
        Progress::with_notify(move || {
            if updates.fetch_add(1, Ordering::Relaxed) == 3 {
                cancel.cancel();
            }
        })
    };
    let e = resave(&ck, &target, &opts, &cancel, &progress).expect_err("cancelled");
    assert!(matches!(e, ResaveError::Cancelled), "{e}");
    assert!(progress.done() > 0 && progress.done() < progress.total());
    assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
    assert_eq!(
        listing(dir.path()),
        ["big.safetensors", "target.safetensors"]
    );
    // Sharded and cancelled: nothing.
    let out = dir.path().join("shards");
    let e = resave(
        &ck,
        &out,
        &ResaveOptions {
            max_shard_bytes: Some(1000),
            ..ResaveOptions::default()
        },
        &cancel,
        &Progress::new(),
    )
    .expect_err("cancelled");
    assert!(matches!(e, ResaveError::Cancelled));
    assert!(!out.exists());
}

#[test]
fn an_unwritable_folder_is_an_error_not_a_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    // A path under a regular file: no one can create it, root included.
    let e = run(&ck, &src.join("out.safetensors"), &ResaveOptions::default())
        .expect_err("not a folder");
    assert_eq!(e.kind(), "Io", "{e}");
    assert_eq!(listing(dir.path()), ["model.safetensors"]);
    // A read-only folder, where permissions apply (not to root).
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let probe = ro.join("probe");
    let enforced = std::fs::write(&probe, b"x").is_err();
    let _ = std::fs::remove_file(&probe);
    let r = run(&ck, &ro.join("out.safetensors"), &ResaveOptions::default());
    if enforced {
        let e = r.expect_err("read-only");
        assert_eq!(e.kind(), "Io", "{e}");
        assert!(listing(&ro).is_empty());
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).expect("chmod back");
}

fn cli(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorscope"))
        .args(args)
        .output()
        .expect("run tensorscope");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("one JSON document ({e}): {stdout:?} / {stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

#[test]
fn the_resave_verb_reports_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt"), ("old", "1")]);
    let out = dir.path().join("out.safetensors");
    let os = |s: &str| std::ffi::OsString::from(s);
    let flags: Vec<std::ffi::OsString> = vec![
        os("resave"),
        src.clone().into_os_string(),
        os("-o"),
        out.clone().into_os_string(),
        os("--keep"),
        os("^(embed|mask|layers)"),
        os("--drop"),
        os("norm"),
        os("--rename"),
        os("mask=attention_mask"),
        os("--meta"),
        os("author=me"),
        os("--del-meta"),
        os("old"),
        os("--dtype"),
        os("F32=F8_E4M3"),
        os("--overflow"),
        os("nan"),
        os("--json"),
    ];
    let argv: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsString::as_os_str).collect();
    let (code, doc, stderr) = cli(&argv);
    assert_eq!(code, 0, "{doc} {stderr}");
    for key in [
        "path",
        "output",
        "files",
        "index",
        "tensor_count",
        "data_bytes",
        "bytes_written",
        "tensors",
        "conversions",
        "conversion_totals",
        "metadata",
        "warnings",
    ] {
        assert!(doc.get(key).is_some(), "{key} missing: {doc}");
    }
    assert_eq!(doc["tensor_count"], 4);
    assert_eq!(
        doc["metadata"],
        serde_json::json!({"format": "pt", "author": "me"})
    );
    assert_eq!(
        doc["files"][0]["file_size"],
        std::fs::metadata(&out).expect("out").len()
    );
    let conv = doc["conversions"].as_array().expect("array");
    assert_eq!(conv.len(), 2);
    assert_eq!(conv[0]["from"], "F32");
    assert_eq!(conv[0]["to"], "F8_E4M3");
    for key in [
        "elements",
        "saturated",
        "overflow_nan",
        "overflow_inf",
        "underflow_zero",
        "nan",
    ] {
        assert!(conv[0].get(key).is_some(), "{key}");
    }
    // Every non-NaN value above 464 in magnitude overflows E4M3: NaN with
    // --overflow nan.
    let tricky = tricky_f32();
    let over = tricky
        .iter()
        .chain(&tricky[..16])
        .filter(|v| v.abs() > 464.0)
        .count();
    assert_eq!(doc["conversion_totals"]["overflow_nan"], over as u64);
    assert_eq!(doc["conversion_totals"]["nan"], 2);
    let renamed = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .find(|t| t["source_name"] == "mask")
        .expect("mask");
    assert_eq!(renamed["name"], "attention_mask");
    let (_, back) = official(&std::fs::read(&out).expect("out"));
    assert!(back.contains_key("attention_mask"));

    // Errors: one JSON document, exit 2.
    let bad: Vec<std::ffi::OsString> = vec![
        os("resave"),
        src.clone().into_os_string(),
        os("-o"),
        src.clone().into_os_string(),
        os("--json"),
    ];
    let argv: Vec<&std::ffi::OsStr> = bad.iter().map(std::ffi::OsString::as_os_str).collect();
    let (code, doc, _) = cli(&argv);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "WouldOverwriteSource");
    let bad: Vec<std::ffi::OsString> = vec![
        os("resave"),
        src.into_os_string(),
        os("-o"),
        dir.path().join("x").into_os_string(),
        os("--dtype"),
        os("F32"),
        os("--json"),
    ];
    let argv: Vec<&std::ffi::OsStr> = bad.iter().map(std::ffi::OsString::as_os_str).collect();
    let (code, doc, _) = cli(&argv);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "Usage");
}
