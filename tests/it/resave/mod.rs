//! Re-saving: every output is read back by the official crate and by our
//! reader; untouched tensors must be byte-identical, converted ones equal to
//! a reference conversion computed here (half's f32 conversions, or a
//! nearest-value search over every code's value), metadata as asked, and
//! the layout the reference writer's. Failures (a short write, a cancel, an
//! unwritable folder, the source as output) must leave every target as it
//! was and no temporary file behind.
//!
//! This file holds the shared helpers: the source model, the two readers,
//! and the reference layout check.

mod cli;
mod convert;
mod failures;
mod output;
mod plan;
mod shards;

use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::format::{Checkpoint, INDEX_FILE_NAME};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::resave::{ResaveError, ResaveOptions, ResaveReport, resave};

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
