//! `.png`: decoded here (signature, chunk CRCs, IHDR, the zlib stream, the
//! pixels) and compared with the library's heatmap and its colour map.

use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::dtype::decode::BitOrder;
use tensorscope::export::ExportOptions;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::heatmap::{self, HeatmapRequest, Pooling, colour_rgb};

use super::{export, raw};
use crate::fixtures::{RefTensor, reference_file, write};

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
        window: None,
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
            window: None,
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
