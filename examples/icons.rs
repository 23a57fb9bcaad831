//! Writes the app icon, drawn from the same design as the window icon and
//! `assets/tensorscope.svg`:
//!
//! - `icons [OUT]` (default `target/assets/icons`): the PNG files of the
//!   hicolor sizes for the Debian package (`scripts/package-deb`),
//!   `OUT/<n>x<n>/tensorscope.png` for n in 16, 32, 48, 64, 128 and 256,
//!   and beside them `OUT/tensorscope.icns` (the macOS bundle's, PNGs of 16
//!   to 1024 pixels) and `OUT/tensorscope.ico` (Windows', PNGs of 16 to
//!   256 pixels);
//! - `icons --assets`: only the two containers, into the repository's
//!   `assets/macos/tensorscope.icns` and `assets/windows/tensorscope.ico`,
//!   which are committed (run it again when the design changes).
//!
//! ```sh
//! cargo run --profile dist --example icons -- target/assets/icons
//! cargo run --release --example icons -- --assets
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tensorscope::platform::icons::{ICNS_TYPES, ICO_SIZES, icns, ico};

/// The hicolor sizes of the Debian package.
const HICOLOR_SIZES: [u32; 6] = [16, 32, 48, 64, 128, 256];

fn main() {
    let arg = std::env::args().nth(1);
    let (containers, hicolor) = if arg.as_deref() == Some("--assets") {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        (
            (
                root.join("macos/tensorscope.icns"),
                root.join("windows/tensorscope.ico"),
            ),
            None,
        )
    } else {
        let out = PathBuf::from(arg.unwrap_or_else(|| "target/assets/icons".to_owned()));
        (
            (out.join("tensorscope.icns"), out.join("tensorscope.ico")),
            Some(out),
        )
    };

    // Each size drawn and encoded once, whichever files use it.
    let sizes = ICNS_TYPES
        .iter()
        .map(|(_, side)| *side)
        .chain(ICO_SIZES)
        .chain(HICOLOR_SIZES);
    let pngs: BTreeMap<u32, Vec<u8>> = sizes.map(|side| (side, png(side))).collect();

    if let Some(out) = hicolor {
        for side in HICOLOR_SIZES {
            let dir = out.join(format!("{side}x{side}"));
            std::fs::create_dir_all(&dir).expect("the icon folder can be made");
            std::fs::write(dir.join("tensorscope.png"), &pngs[&side])
                .expect("the icon can be written");
        }
    }

    let elements: Vec<([u8; 4], &[u8])> = ICNS_TYPES
        .iter()
        .map(|(kind, side)| (*kind, pngs[side].as_slice()))
        .collect();
    write(
        &containers.0,
        &icns(&elements).expect("the icons fit an ICNS file"),
    );
    let images: Vec<(u32, &[u8])> = ICO_SIZES
        .iter()
        .map(|side| (*side, pngs[side].as_slice()))
        .collect();
    write(
        &containers.1,
        &ico(&images).expect("the icons fit an ICO file"),
    );
}

/// The icon as a `side`×`side` PNG, its pixels deflated: the library's
/// encoder stores them uncompressed (its heatmaps are read once), which
/// would make the ICNS file 7 MB instead of a few hundred KB.
fn png(side: u32) -> Vec<u8> {
    let side = side as usize;
    let rgba = tensorscope::gui::icon_rgba(side);
    let stored =
        tensorscope::export::png::encode_rgba(side, side, &rgba, &[("Software", "Tensorscope")])
            .expect("a square icon encodes");
    recompress(&stored).expect("the encoder's PNG reads back")
}

/// `png` with its image data (a zlib stream of stored blocks, in one or
/// more IDAT chunks) replaced by one IDAT of the same bytes deflated.
fn recompress(png: &[u8]) -> Option<Vec<u8>> {
    const SIGNATURE: usize = 8;
    let mut chunks = Vec::new();
    let mut at = SIGNATURE;
    while at < png.len() {
        let len = u32::from_be_bytes(png.get(at..at + 4)?.try_into().ok()?) as usize;
        let kind: [u8; 4] = png.get(at + 4..at + 8)?.try_into().ok()?;
        chunks.push((kind, png.get(at + 8..at + 8 + len)?));
        at += 12 + len;
    }
    let zlib: Vec<u8> = chunks
        .iter()
        .filter(|(kind, _)| kind == b"IDAT")
        .flat_map(|(_, data)| data.iter().copied())
        .collect();
    let pixels = unstore(&zlib)?;
    let mut idat = vec![0x78, 0xda];
    idat.extend_from_slice(&deflate(&pixels)?);
    idat.extend_from_slice(&adler32(&pixels).to_be_bytes());

    let mut out = png.get(..SIGNATURE)?.to_vec();
    let mut idat_written = false;
    for (kind, data) in chunks {
        if &kind == b"IDAT" {
            if !idat_written {
                push_chunk(&mut out, *b"IDAT", &idat);
                idat_written = true;
            }
        } else {
            push_chunk(&mut out, kind, data);
        }
    }
    Some(out)
}

/// The bytes of a zlib stream made of stored deflate blocks.
fn unstore(zlib: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 2;
    loop {
        let header = *zlib.get(at)?;
        // Only stored blocks (type 0) are expected from the encoder.
        if header >> 1 & 3 != 0 {
            return None;
        }
        let len = u16::from_le_bytes(zlib.get(at + 1..at + 3)?.try_into().ok()?) as usize;
        out.extend_from_slice(zlib.get(at + 5..at + 5 + len)?);
        at += 5 + len;
        if header & 1 == 1 {
            return Some(out);
        }
    }
}

/// Raw deflate of `data` at the best level, through the zip writer the
/// package already depends on: a one-member archive written in memory,
/// whose member is read back as its compressed bytes.
fn deflate(data: &[u8]) -> Option<Vec<u8>> {
    use std::io::{Cursor, Read, Write};
    use zip::write::SimpleFileOptions;
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9));
    writer.start_file("pixels", options).ok()?;
    writer.write_all(data).ok()?;
    let archive = writer.finish().ok()?.into_inner();
    let mut archive = zip::ZipArchive::new(Cursor::new(archive)).ok()?;
    let mut member = archive.by_index_raw(0).ok()?;
    let mut raw = Vec::new();
    member.read_to_end(&mut raw).ok()?;
    Some(raw)
}

/// Adler-32 of `data`, as a zlib stream ends with.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    b << 16 | a
}

/// Appends a PNG chunk: length, type, data, CRC-32 of type and data.
fn push_chunk(out: &mut Vec<u8>, kind: [u8; 4], data: &[u8]) {
    out.extend_from_slice(
        &u32::try_from(data.len())
            .expect("a chunk fits")
            .to_be_bytes(),
    );
    out.extend_from_slice(&kind);
    out.extend_from_slice(data);
    let mut crc = !0u32;
    for &byte in kind.iter().chain(data) {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                crc >> 1 ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    out.extend_from_slice(&(!crc).to_be_bytes());
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("the icon folder can be made");
    }
    std::fs::write(path, bytes).expect("the icon file can be written");
}
