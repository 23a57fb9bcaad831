//! Exporting a tensor: `.npy` headers parsed here and data compared with
//! values decoded independently (the committed ml_dtypes tables), `.csv`
//! read back, `.bin` compared byte for byte, `.png` decoded (signature,
//! chunk CRCs, IHDR, the zlib stream, the pixels). Failures leave the
//! target as it was and no temporary file.

use std::path::{Path, PathBuf};
use std::process::Command;

use half::{bf16, f16};
use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::dtype::decode::BitOrder;
use tensorscope::export::{
    Encoding, ExportError, ExportFormat, ExportOptions, ExportReport, SizeLimit, export_tensor,
};
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::heatmap::{self, HeatmapRequest, Pooling, colour_rgb};

use crate::fixtures::{
    REF_DTYPES, RefTensor, one_tensor, ref_nbytes, reference_file, with_header, write,
};
use crate::resave::listing;

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

/// The ml_dtypes / numpy value of every code of a small float, BF16 or
/// F16 (the committed reference tables).
fn reference_values(dtype: Dtype) -> Vec<f64> {
    let text = match dtype {
        Dtype::F4 => include_str!("../data/dtype_tables/F4.txt"),
        Dtype::F6E2M3 => include_str!("../data/dtype_tables/F6_E2M3.txt"),
        Dtype::F6E3M2 => include_str!("../data/dtype_tables/F6_E3M2.txt"),
        Dtype::F8E4M3 => include_str!("../data/dtype_tables/F8_E4M3.txt"),
        Dtype::F8E5M2 => include_str!("../data/dtype_tables/F8_E5M2.txt"),
        Dtype::F8E8M0 => include_str!("../data/dtype_tables/F8_E8M0.txt"),
        Dtype::F8E4M3Fnuz => include_str!("../data/dtype_tables/F8_E4M3FNUZ.txt"),
        Dtype::F8E5M2Fnuz => include_str!("../data/dtype_tables/F8_E5M2FNUZ.txt"),
        Dtype::BF16 => include_str!("../data/dtype_tables/BF16.txt"),
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

fn read_csv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .expect("csv")
        .lines()
        .map(|l| {
            if l.is_empty() {
                Vec::new()
            } else {
                l.split(',').map(str::to_owned).collect()
            }
        })
        .collect()
}

fn same_f32(text: &str, want: f32) -> bool {
    let got: f32 = text.parse().unwrap_or_else(|_| panic!("{text:?} parses"));
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

#[test]
fn csv_rows_follow_the_first_axis_and_values_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f32s: Vec<f32> = vec![
        0.0,
        -0.0,
        1.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-7,
        3.4e38,
        f32::MIN_POSITIVE / 8.0,
        -123.456,
        0.1,
        7.0,
    ];
    let i64s: Vec<i64> = vec![i64::MIN, -1, 0, 1, i64::MAX];
    let c64: Vec<f32> = vec![1.0, -2.0, f32::NAN, 0.5, -0.0, f32::INFINITY, 3.0, 4.0];
    let tensors = vec![
        (
            "m".to_owned(),
            RefTensor {
                dtype: RefDtype::F32,
                shape: vec![3, 2, 2],
                data: f32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "v".to_owned(),
            RefTensor {
                dtype: RefDtype::I64,
                shape: vec![5],
                data: i64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "c".to_owned(),
            RefTensor {
                dtype: RefDtype::C64,
                shape: vec![2, 2],
                data: c64.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "b".to_owned(),
            RefTensor {
                dtype: RefDtype::BF16,
                shape: vec![2],
                data: [bf16::from_f32(-2.5), bf16::from_f32(1.0 / 3.0)]
                    .iter()
                    .flat_map(|h| h.to_le_bytes())
                    .collect(),
            },
        ),
        (
            "s".to_owned(),
            RefTensor {
                dtype: RefDtype::F16,
                shape: vec![],
                data: f16::from_f32(0.333).to_le_bytes().to_vec(),
            },
        ),
        (
            "e".to_owned(),
            RefTensor {
                dtype: RefDtype::U8,
                shape: vec![3, 0],
                data: Vec::new(),
            },
        ),
        (
            "p".to_owned(),
            RefTensor {
                dtype: RefDtype::F4,
                shape: vec![2, 2],
                data: vec![0x21, 0xf9],
            },
        ),
    ];
    let src = write(
        dir.path(),
        "csv.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("m.csv");
    export(&ck, "m", &out, &ExportOptions::default()).expect("m");
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 3, "one row per index of the first axis");
    for (r, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), 4, "the other axes flattened");
        for (c, cell) in row.iter().enumerate() {
            assert!(
                same_f32(cell, f32s[r * 4 + c]),
                "{cell} vs {}",
                f32s[r * 4 + c]
            );
        }
    }
    let out = dir.path().join("v.csv");
    export(&ck, "v", &out, &ExportOptions::default()).expect("v");
    let rows = read_csv(&out);
    let back: Vec<i64> = rows.iter().map(|r| r[0].parse().expect("int")).collect();
    assert_eq!(back, i64s, "integers are exact");
    let out = dir.path().join("c.csv");
    export(&ck, "c", &out, &ExportOptions::default()).expect("c");
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        "1.0-2.0j,nan+0.5j\n-0.0+infj,3.0+4.0j\n"
    );
    let out = dir.path().join("b.csv");
    export(&ck, "b", &out, &ExportOptions::default()).expect("b");
    let rows = read_csv(&out);
    assert!(same_f32(&rows[0][0], -2.5));
    assert!(same_f32(&rows[1][0], bf16::from_f32(1.0 / 3.0).to_f32()));
    export(&ck, "b", &out, &raw()).expect("b raw");
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        format!(
            "{}\n{}\n",
            bf16::from_f32(-2.5).to_bits(),
            bf16::from_f32(1.0 / 3.0).to_bits()
        )
    );
    let out = dir.path().join("s.csv");
    export(&ck, "s", &out, &ExportOptions::default()).expect("s");
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 1, "a scalar is one row");
    assert!(same_f32(&rows[0][0], f16::from_f32(0.333).to_f32()));
    let out = dir.path().join("e.csv");
    export(&ck, "e", &out, &ExportOptions::default()).expect("e");
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        "",
        "no elements, no rows"
    );
    let out = dir.path().join("p.csv");
    export(&ck, "p", &out, &ExportOptions::default()).expect("p");
    // 0x21: codes 1, 2 (0.5, 1.0); 0xf9: codes 9, 15 (-0.5, -6.0).
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        "0.5,1.0\n-0.5,-6.0\n"
    );
    export(&ck, "p", &out, &raw()).expect("p raw");
    assert_eq!(std::fs::read_to_string(&out).expect("csv"), "1,2\n9,15\n");
}

#[test]
fn csv_over_the_limit_needs_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("big.csv");
    let limited = ExportOptions {
        csv_max_elements: 10,
        ..ExportOptions::default()
    };
    let e = export(&ck, "t_F32", &out, &limited).expect_err("over the limit");
    assert!(
        matches!(
            e,
            ExportError::CsvTooLarge {
                elements: 24,
                limit: 10
            }
        ),
        "{e}"
    );
    assert!(!out.exists());
    let forced = ExportOptions {
        size_limit: SizeLimit::Ignore,
        ..limited
    };
    export(&ck, "t_F32", &out, &forced).expect("forced");
    assert_eq!(read_csv(&out).len(), 2);
}

#[test]
fn bin_is_the_bytes_as_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    for &t in ck.tensors() {
        let info = ck.info(t).expect("info");
        let out = dir.path().join(format!("{}.bin", info.name()));
        let report = export(&ck, info.name(), &out, &ExportOptions::default()).expect("bin");
        assert_eq!(
            std::fs::read(&out).expect("bin"),
            ck.bytes(t),
            "{}",
            info.name()
        );
        assert_eq!(report.bytes_written, info.nbytes());
        assert_eq!(report.format, ExportFormat::Bin);
    }
    let e = export(&ck, "t_F32", &dir.path().join("x.bin"), &raw()).expect_err("raw .bin");
    assert_eq!(e.kind(), "RawNotApplicable");
}

/// Bitwise CRC-32 (no table), independent of the encoder's.
fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A decoded PNG: width, height, RGB pixels, text chunks.
struct Png {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
    text: Vec<(String, String)>,
}

/// Decodes the PNGs the exporter writes: 8-bit RGB, stored deflate
/// blocks, filter 0. Checks every CRC and the Adler-32.
fn decode_png(bytes: &[u8]) -> Png {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "signature");
    let mut pos = 8;
    let (mut width, mut height) = (0, 0);
    let mut idat = Vec::new();
    let mut text = Vec::new();
    let mut kinds = Vec::new();
    while pos < bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().expect("4")) as usize;
        let kind = &bytes[pos + 4..pos + 8];
        let data = &bytes[pos + 8..pos + 8 + len];
        let crc = u32::from_be_bytes(bytes[pos + 8 + len..pos + 12 + len].try_into().expect("4"));
        assert_eq!(
            crc,
            crc32(&bytes[pos + 4..pos + 8 + len]),
            "CRC of {kind:?}"
        );
        kinds.push(String::from_utf8_lossy(kind).into_owned());
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(data[..4].try_into().expect("4")) as usize;
                height = u32::from_be_bytes(data[4..8].try_into().expect("4")) as usize;
                assert_eq!(&data[8..], [8, 2, 0, 0, 0], "8-bit RGB, no interlace");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"tEXt" => {
                let nul = data.iter().position(|&b| b == 0).expect("keyword end");
                text.push((
                    String::from_utf8(data[..nul].to_vec()).expect("ascii"),
                    String::from_utf8(data[nul + 1..].to_vec()).expect("ascii"),
                ));
            }
            _ => {}
        }
        pos += 12 + len;
    }
    assert_eq!(kinds.first().map(String::as_str), Some("IHDR"));
    assert_eq!(kinds.last().map(String::as_str), Some("IEND"));
    // zlib: header, stored blocks, Adler-32.
    assert_eq!((u32::from(idat[0]) * 256 + u32::from(idat[1])) % 31, 0);
    assert_eq!(idat[0] & 0x0f, 8, "deflate");
    let mut raw = Vec::new();
    let mut p = 2;
    loop {
        let head = idat[p];
        assert_eq!(head >> 1, 0, "stored block");
        let len = u16::from_le_bytes([idat[p + 1], idat[p + 2]]);
        let nlen = u16::from_le_bytes([idat[p + 3], idat[p + 4]]);
        assert_eq!(len, !nlen);
        raw.extend_from_slice(&idat[p + 5..p + 5 + len as usize]);
        p += 5 + len as usize;
        if head & 1 == 1 {
            break;
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!(
        u32::from_be_bytes(idat[p..p + 4].try_into().expect("4")),
        (b << 16) | a,
        "Adler-32"
    );
    assert_eq!(p + 4, idat.len());
    let mut rgb = Vec::with_capacity(width * height * 3);
    for line in raw.chunks(width * 3 + 1) {
        assert_eq!(line[0], 0, "filter 0");
        rgb.extend_from_slice(&line[1..]);
    }
    assert_eq!(rgb.len(), width * height * 3);
    Png {
        width,
        height,
        rgb,
        text,
    }
}

/// Enlarges row-major RGB cells by `scale`.
fn upscale(cells: &[u8], width: usize, scale: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for row in cells.chunks(width * 3) {
        let line: Vec<u8> = row
            .chunks(3)
            .flat_map(|px| std::iter::repeat_n(px, scale).flatten().copied())
            .collect();
        for _ in 0..scale {
            out.extend_from_slice(&line);
        }
    }
    out
}

#[test]
fn png_is_the_heatmap_with_its_colour_map() {
    let dir = tempfile::tempdir().expect("tempdir");
    let grid: Vec<f32> = (0..6 * 8).map(|i| (i as f32 - 20.0) * 0.25).collect();
    let tensors = vec![
        (
            "w".to_owned(),
            RefTensor {
                dtype: RefDtype::F32,
                shape: vec![6, 8],
                data: grid.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "pair".to_owned(),
            RefTensor {
                dtype: RefDtype::F32,
                shape: vec![1, 2],
                data: [-1.0f32, 1.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            },
        ),
        (
            "cube".to_owned(),
            RefTensor {
                dtype: RefDtype::F32,
                shape: vec![2, 3, 4],
                data: grid[..24].iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "none".to_owned(),
            RefTensor {
                dtype: RefDtype::F32,
                shape: vec![0, 4],
                data: Vec::new(),
            },
        ),
    ];
    let src = write(
        dir.path(),
        "png.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    // Two cells: the diverging map's two ends.
    let out = dir.path().join("pair.png");
    let report = export(&ck, "pair", &out, &ExportOptions::default()).expect("png");
    let png = decode_png(&std::fs::read(&out).expect("png"));
    let info = report.png.expect("png report");
    assert_eq!((png.width, png.height), (info.width, info.height));
    assert_eq!((info.cells_wide, info.cells_high), (2, 1));
    assert_eq!(info.scale, 128);
    assert_eq!(&png.rgb[..3], colour_rgb(-1.0, -1.0, 1.0));
    assert_eq!(&png.rgb[png.rgb.len() - 3..], colour_rgb(1.0, -1.0, 1.0));
    assert_eq!(colour_rgb(-1.0, -1.0, 1.0), [33, 102, 172]);
    assert!(png.text.iter().any(|(k, v)| k == "Title" && v == "pair"));
    // A 2-D tensor: the library heatmap, pixel for pixel.
    let out = dir.path().join("w.png");
    let report = export(&ck, "w", &out, &ExportOptions::default()).expect("png");
    let png = decode_png(&std::fs::read(&out).expect("png"));
    let req = HeatmapRequest {
        row_axis: 0,
        col_axis: 1,
        fixed: vec![],
        pooling: Pooling::MaxAbs,
        max_side: 1024,
        order: BitOrder::LsbFirst,
    };
    let t = ck.find("w").expect("w");
    let map = heatmap::compute(
        Dtype::F32,
        &[6, 8],
        ck.bytes(t),
        &req,
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("heatmap");
    let scale = report.png.as_ref().expect("png").scale;
    assert_eq!(png.rgb, upscale(&map.to_rgb(), 8, scale));
    // N-D: flattened to (first axis) x (the rest).
    let out = dir.path().join("cube.png");
    let report = export(&ck, "cube", &out, &ExportOptions::default()).expect("png");
    let info = report.png.expect("png");
    assert_eq!((info.rows, info.cols), (2, 12));
    decode_png(&std::fs::read(&out).expect("png"));
    // The GUI's own view: axes 2 and 1 of slice 1.
    let view = ExportOptions {
        heatmap: Some(HeatmapRequest {
            row_axis: 2,
            col_axis: 1,
            fixed: vec![1, 0, 0],
            pooling: Pooling::Mean,
            max_side: 64,
            order: BitOrder::LsbFirst,
        }),
        ..ExportOptions::default()
    };
    let report = export(&ck, "cube", &out, &view).expect("png");
    let info = report.png.expect("png");
    assert_eq!((info.rows, info.cols), (4, 3));
    // Nothing to draw: an error, and no file.
    let out = dir.path().join("none.png");
    let e = export(&ck, "none", &out, &ExportOptions::default()).expect_err("empty");
    assert_eq!(e.kind(), "Heatmap");
    assert!(!out.exists());
    let e = export(&ck, "w", &dir.path().join("w2.png"), &raw()).expect_err("raw png");
    assert_eq!(e.kind(), "RawNotApplicable");
}

#[test]
fn failures_leave_the_target_and_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    let target = write(dir.path(), "target.npy", b"previous content");
    let before = listing(dir.path());
    // A short write (a full disk) at several points, in every format.
    for name in ["target.npy", "target.csv", "target.bin", "target.png"] {
        let out = dir.path().join(name);
        for fail_after in [0u64, 5, 130] {
            let opts = ExportOptions {
                fail_after_bytes: Some(fail_after),
                ..ExportOptions::default()
            };
            let e = export(&ck, "t_F64", &out, &opts).expect_err("short write");
            assert_eq!(e.kind(), "Io", "{name} {fail_after}: {e}");
        }
    }
    assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
    assert_eq!(listing(dir.path()), before);
    // Cancelled.
    let cancel = CancelToken::new();
    cancel.cancel();
    for name in ["target.npy", "target.csv", "target.bin", "target.png"] {
        let out = dir.path().join(name);
        let t = ck.find("t_BF16").expect("t");
        let e = export_tensor(
            &ck,
            t,
            &out,
            &ExportOptions::default(),
            &cancel,
            &Progress::new(),
        )
        .expect_err("cancelled");
        assert!(matches!(e, ExportError::Cancelled), "{name}: {e}");
    }
    assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
    assert_eq!(listing(dir.path()), before);
    // Under a regular file: no folder to write in, root included.
    let e = export(&ck, "t_F32", &src.join("x.npy"), &ExportOptions::default())
        .expect_err("not a folder");
    assert_eq!(e.kind(), "Io");
    // An unknown extension.
    let e = export(
        &ck,
        "t_F32",
        &dir.path().join("x.txt"),
        &ExportOptions::default(),
    )
    .expect_err("unknown");
    assert_eq!(e.kind(), "UnknownFormat");
    assert!(e.to_string().contains(".npy, .csv, .bin or .png"), "{e}");
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn the_source_file_is_never_an_export_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A checkpoint whose name has an export extension.
    let tensors = vec![(
        "x".to_owned(),
        RefTensor {
            dtype: RefDtype::U8,
            shape: vec![4],
            data: vec![1, 2, 3, 4],
        },
    )];
    let bytes = reference_file(&tensors, None);
    let src = write(dir.path(), "weights.bin", &bytes);
    let ck = Checkpoint::open(&src).expect("open");
    let e = export(&ck, "x", &src, &ExportOptions::default()).expect_err("refused");
    assert_eq!(e.kind(), "WouldOverwriteSource", "{e}");
    assert_eq!(std::fs::read(&src).expect("src"), bytes);
}

#[test]
fn empty_tensors_with_huge_dimensions_export_without_overflow() {
    // Valid (the element count is 0) although the other dimensions
    // multiply past 2^64.
    let dir = tempfile::tempdir().expect("tempdir");
    let header = one_tensor("F32", &[0, 1 << 40, 1 << 40], [0, 0]);
    let src = write(dir.path(), "zero.safetensors", &with_header(&header, 0));
    let ck = Checkpoint::open(&src).expect("valid");
    for ext in ["npy", "csv", "bin"] {
        let out = dir.path().join(format!("t.{ext}"));
        let report = export(&ck, "t", &out, &ExportOptions::default()).expect(ext);
        assert_eq!(report.elements, 0);
    }
    let npy = parse_npy(&std::fs::read(dir.path().join("t.npy")).expect("npy"));
    assert_eq!(npy.shape, [0, 1 << 40, 1 << 40]);
    assert!(npy.data.is_empty());
    assert_eq!(std::fs::read(dir.path().join("t.csv")).expect("csv"), b"");
    let e = export(
        &ck,
        "t",
        &dir.path().join("t.png"),
        &ExportOptions::default(),
    )
    .expect_err("nothing to draw");
    assert_eq!(e.kind(), "Heatmap");
}

fn cli(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorscope"))
        .args(args)
        .output()
        .expect("run tensorscope");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON document ({e}): {stdout:?} / {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), doc)
}

#[test]
fn the_export_verb_reports_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let out = dir.path().join("q.npy");
    let os = std::ffi::OsStr::new;
    let (code, doc) = cli(&[
        os("export"),
        src.as_os_str(),
        os("t_F8_E4M3"),
        os("-o"),
        out.as_os_str(),
        os("--raw"),
        os("--json"),
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["tensor"], "t_F8_E4M3");
    assert_eq!(doc["dtype"], "F8_E4M3");
    assert_eq!(doc["format"], "npy");
    assert_eq!(doc["encoding"], "raw-codes");
    assert_eq!(doc["npy_descr"], "|u1");
    assert_eq!(doc["npy_version"], "1.0");
    assert_eq!(doc["shape"], serde_json::json!([2, 3, 4]));
    assert_eq!(doc["elements"], 24);
    assert_eq!(
        doc["bytes_written"],
        std::fs::metadata(&out).expect("out").len()
    );
    let (code, doc) = cli(&[
        os("export"),
        src.as_os_str(),
        os("nope"),
        os("-o"),
        out.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "UnknownTensor");
    let txt = dir.path().join("q.txt");
    let (code, doc) = cli(&[
        os("export"),
        src.as_os_str(),
        os("t_F32"),
        os("-o"),
        txt.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "UnknownFormat");
    // Over the CSV limit of 10,000,000 elements: refused without --force.
    let big = vec![(
        "big".to_owned(),
        RefTensor {
            dtype: RefDtype::U8,
            shape: vec![10_000_001],
            data: vec![0; 10_000_001],
        },
    )];
    let big_src = write(dir.path(), "big.safetensors", &reference_file(&big, None));
    let csv = dir.path().join("big.csv");
    let (code, doc) = cli(&[
        os("export"),
        big_src.as_os_str(),
        os("big"),
        os("-o"),
        csv.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "CsvTooLarge");
    assert!(!csv.exists());
}
