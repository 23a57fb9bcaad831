//! `.npy` of every dtype, in values and in raw codes, compared with values
//! decoded here from the committed ml_dtypes tables; version 2 headers.

use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::export::ExportOptions;
use tensorscope::format::Checkpoint;

use super::{every_dtype, export, parse_npy, raw};
use crate::fixtures::{RefTensor, reference_file, write};
use crate::resave::listing;

/// The ml_dtypes / numpy value of every code of a small float, BF16 or
/// F16 (the committed reference tables).
fn reference_values(dtype: Dtype) -> Vec<f64> {
    let text = match dtype {
        Dtype::F4 => include_str!("../../data/dtype_tables/F4.txt"),
        Dtype::F6E2M3 => include_str!("../../data/dtype_tables/F6_E2M3.txt"),
        Dtype::F6E3M2 => include_str!("../../data/dtype_tables/F6_E3M2.txt"),
        Dtype::F8E4M3 => include_str!("../../data/dtype_tables/F8_E4M3.txt"),
        Dtype::F8E5M2 => include_str!("../../data/dtype_tables/F8_E5M2.txt"),
        Dtype::F8E8M0 => include_str!("../../data/dtype_tables/F8_E8M0.txt"),
        Dtype::F8E4M3Fnuz => include_str!("../../data/dtype_tables/F8_E4M3FNUZ.txt"),
        Dtype::F8E5M2Fnuz => include_str!("../../data/dtype_tables/F8_E5M2FNUZ.txt"),
        Dtype::BF16 => include_str!("../../data/dtype_tables/BF16.txt"),
        other => panic!("no table for {other}"),
    };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let bits = l.split_whitespace().nth(1).expect("bits");
            if bits.len() == 8 {
                f64::from(f32::from_bits(u32::from_str_radix(bits, 16).expect("hex")))
            } else {
                f64::from_bits(u64::from_str_radix(bits, 16).expect("hex"))
            }
        })
        .collect()
}

/// The codes of a tensor, unpacked here independently of the library: F4
/// low nibble first, F6 as the little-endian bit stream.
fn codes(dtype: Dtype, bytes: &[u8], numel: usize) -> Vec<u64> {
    match dtype.bits() {
        4 => bytes
            .iter()
            .flat_map(|&b| [u64::from(b & 0xf), u64::from(b >> 4)])
            .take(numel)
            .collect(),
        6 => (0..numel)
            .map(|k| {
                (0..6).fold(0u64, |code, j| {
                    let p = 6 * k + j;
                    let bit = (bytes[p / 8] >> (p % 8)) & 1;
                    code | (u64::from(bit) << j)
                })
            })
            .collect(),
        bits => bytes
            .chunks_exact(bits as usize / 8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect(),
    }
}

#[test]
fn npy_of_every_dtype_in_values_and_raw_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    let out_dir = dir.path().join("npy");
    std::fs::create_dir(&out_dir).expect("mkdir");
    for &t in ck.tensors() {
        let info = ck.info(t).expect("info").clone();
        let bytes = ck.bytes(t).to_vec();
        let numel = info.numel() as usize;
        for (mode, opts) in [("values", ExportOptions::default()), ("raw", raw())] {
            let out = out_dir.join(format!("{}.{mode}.npy", info.name()));
            let report = export(&ck, info.name(), &out, &opts).expect("export");
            let file = std::fs::read(&out).expect("npy");
            assert_eq!(report.bytes_written, file.len() as u64);
            let npy = parse_npy(&file);
            assert_eq!(npy.version, (1, 0));
            assert!(!npy.fortran_order);
            assert_eq!(npy.shape, info.shape(), "{}", info.name());
            assert_eq!(Some(npy.descr.as_str()), report.npy_descr);
            let d = info.dtype();
            let is_raw = mode == "raw";
            let (descr, expected): (&str, Vec<u8>) = match d {
                Dtype::Bool => ("|b1", bytes.iter().map(|&b| u8::from(b != 0)).collect()),
                Dtype::U8 => ("|u1", bytes.clone()),
                Dtype::I8 => ("|i1", bytes.clone()),
                Dtype::U16 => ("<u2", bytes.clone()),
                Dtype::I16 => ("<i2", bytes.clone()),
                Dtype::U32 => ("<u4", bytes.clone()),
                Dtype::I32 => ("<i4", bytes.clone()),
                Dtype::U64 => ("<u8", bytes.clone()),
                Dtype::I64 => ("<i8", bytes.clone()),
                Dtype::F16 => ("<f2", bytes.clone()),
                Dtype::F32 => ("<f4", bytes.clone()),
                Dtype::F64 => ("<f8", bytes.clone()),
                Dtype::C64 => ("<c8", bytes.clone()),
                Dtype::BF16 if is_raw => ("<u2", bytes.clone()),
                Dtype::F4 | Dtype::F6E2M3 | Dtype::F6E3M2 if is_raw => (
                    "|u1",
                    codes(d, &bytes, numel)
                        .into_iter()
                        .map(|c| c as u8)
                        .collect(),
                ),
                _ if is_raw => ("|u1", bytes.clone()),
                _ => {
                    let table = reference_values(d);
                    let values: Vec<u8> = codes(d, &bytes, numel)
                        .into_iter()
                        .flat_map(|c| (table[c as usize] as f32).to_le_bytes())
                        .collect();
                    ("<f4", values)
                }
            };
            assert_eq!(npy.descr, descr, "{} {mode}", info.name());
            if descr == "<f4" && !matches!(d, Dtype::F32) {
                // NaN payloads may differ from ml_dtypes': compare NaN as NaN.
                assert_eq!(npy.data.len(), expected.len());
                for (got, want) in npy.data.chunks_exact(4).zip(expected.chunks_exact(4)) {
                    let g = f32::from_le_bytes(got.try_into().expect("4"));
                    let w = f32::from_le_bytes(want.try_into().expect("4"));
                    assert!(
                        g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{} {mode}: {g} vs {w}",
                        info.name()
                    );
                }
            } else {
                assert_eq!(npy.data, expected, "{} {mode}", info.name());
            }
        }
    }
    // numpy's files: `scripts/check_npy.py` loads them with numpy itself.
    assert!(listing(&out_dir).len() == 2 * ck.tensors().len());
    assert_eq!(listing(dir.path()), ["every.safetensors", "npy"]);
}

#[test]
fn npy_uses_version_2_when_the_header_needs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 30,000 axes of length 1 ("1, " each) make a header over 65535 bytes.
    let shape = vec![1usize; 30_000];
    let tensors = vec![(
        "deep".to_owned(),
        RefTensor {
            dtype: RefDtype::F32,
            shape,
            data: 7.0f32.to_le_bytes().to_vec(),
        },
    )];
    let src = write(
        dir.path(),
        "deep.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("deep.npy");
    let report = export(&ck, "deep", &out, &ExportOptions::default()).expect("export");
    assert_eq!(report.npy_version, Some((2, 0)));
    let npy = parse_npy(&std::fs::read(&out).expect("read"));
    assert_eq!(npy.version, (2, 0));
    assert_eq!(npy.shape.len(), 30_000);
    assert_eq!(npy.data, 7.0f32.to_le_bytes());
}
