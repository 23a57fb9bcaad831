//! Exporting a tensor: `.npy` headers parsed here and data compared with
//! values decoded independently (the committed ml_dtypes tables), `.csv`
//! read back, `.bin` compared byte for byte, `.png` decoded (signature,
//! chunk CRCs, IHDR, the zlib stream, the pixels). Failures leave the
//! target as it was and no temporary file.
//!
//! This file holds the shared helpers: the `.npy` parser, a checkpoint with
//! a tensor of every dtype, and one export call.

mod bin;
mod cli;
mod csv;
mod failures;
mod npy;
mod png;

use std::path::{Path, PathBuf};

use safetensors::Dtype as RefDtype;
use tensorscope::export::{Encoding, ExportError, ExportOptions, ExportReport, export_tensor};
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};

use crate::fixtures::{REF_DTYPES, RefTensor, ref_nbytes, reference_file, write};

/// A parsed `.npy` file.
#[derive(Debug)]
struct Npy {
    version: (u8, u8),
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
    data: Vec<u8>,
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let i = text.find(start).expect(start) + start.len();
    let j = text[i..].find(end).expect(end) + i;
    &text[i..j]
}

/// Parses a `.npy` file, checking the magic, the header length and the
/// 64-byte alignment of the data.
fn parse_npy(bytes: &[u8]) -> Npy {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "magic");
    let version = (bytes[6], bytes[7]);
    let (len, start) = match version {
        (1, 0) => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        (2, 0) => (
            u32::from_le_bytes(bytes[8..12].try_into().expect("4")) as usize,
            12,
        ),
        other => panic!("version {other:?}"),
    };
    let end = start + len;
    assert_eq!(end % 64, 0, "data starts on a 64-byte boundary");
    let text = std::str::from_utf8(&bytes[start..end]).expect("ascii header");
    assert!(text.ends_with('\n'));
    assert!(text.starts_with('{'));
    assert!(text.trim_end().ends_with('}'));
    let shape_text = between(text, "'shape': (", ")");
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("dim"))
        .collect::<Vec<u64>>();
    if shape.len() == 1 {
        assert!(shape_text.ends_with(','), "a 1-tuple needs its comma");
    }
    Npy {
        version,
        descr: between(text, "'descr': '", "'").to_owned(),
        fortran_order: match between(text, "'fortran_order': ", ",") {
            "False" => false,
            "True" => true,
            other => panic!("fortran_order {other}"),
        },
        shape,
        data: bytes[end..].to_vec(),
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed))
        .collect()
}

/// One tensor of every dtype, shape [2, 3, 4], plus scalars.
fn every_dtype(dir: &Path) -> PathBuf {
    let mut tensors: Vec<(String, RefTensor)> = REF_DTYPES
        .iter()
        .enumerate()
        .map(|(i, &dtype)| {
            let n = ref_nbytes(dtype, 24).expect("whole");
            (
                format!("t_{dtype:?}"),
                RefTensor {
                    dtype,
                    shape: vec![2, 3, 4],
                    data: pattern(n, i as u8),
                },
            )
        })
        .collect();
    for (name, dtype, data) in [
        ("scalar_f32", RefDtype::F32, 2.5f32.to_le_bytes().to_vec()),
        ("scalar_bf16", RefDtype::BF16, vec![0x80, 0xbf]),
        ("scalar_u64", RefDtype::U64, u64::MAX.to_le_bytes().to_vec()),
    ] {
        tensors.push((
            name.into(),
            RefTensor {
                dtype,
                shape: vec![],
                data,
            },
        ));
    }
    write(dir, "every.safetensors", &reference_file(&tensors, None))
}

fn export(
    ck: &Checkpoint,
    name: &str,
    out: &Path,
    opts: &ExportOptions,
) -> Result<ExportReport, ExportError> {
    let t = ck.find(name).expect("tensor");
    export_tensor(ck, t, out, opts, &CancelToken::new(), &Progress::new())
}

fn raw() -> ExportOptions {
    ExportOptions {
        encoding: Encoding::RawCodes,
        ..ExportOptions::default()
    }
}
