//! A minimal PNG encoder: 8-bit RGB, no interlace, the image data in
//! stored (uncompressed) deflate blocks inside a zlib stream. Heatmaps are
//! at most a few megabytes, so compression is not worth a dependency; any
//! PNG reader decodes stored blocks.

/// The eight bytes every PNG file starts with.
pub const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// The CRC-32 (ISO 3309, as PNG uses it) lookup table.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

/// CRC-32 of `parts` concatenated.
pub fn crc32(parts: &[&[u8]]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for part in parts {
        for &b in *part {
            c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
        }
    }
    c ^ 0xffff_ffff
}

/// Adler-32 of `data`, as zlib ends its streams with.
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before b may overflow.
    for block in data.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

fn chunk(out: &mut Vec<u8>, kind: [u8; 4], data: &[u8]) {
    // Chunks here are far below 2^31 bytes (stored blocks of a heatmap).
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(&kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&[&kind, data]).to_be_bytes());
}

/// A zlib stream of `data` in stored deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    const BLOCK: usize = 65_535;
    let mut out = Vec::with_capacity(data.len() + data.len() / BLOCK * 5 + 16);
    // CMF: deflate, 32 KiB window; FLG: no dictionary, check bits so that
    // CMF·256 + FLG is a multiple of 31.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = data.chunks(BLOCK).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let last = u8::from(blocks.peek().is_none());
        let len = block.len() as u16;
        out.push(last);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

/// Encodes row-major RGB pixels (`width × height × 3` bytes) as a PNG,
/// with `text` as tEXt chunks (keyword, value; both made ASCII). Returns
/// `None` when the pixel buffer does not match the size or the size is 0.
pub fn encode_rgb(
    width: usize,
    height: usize,
    rgb: &[u8],
    text: &[(&str, &str)],
) -> Option<Vec<u8>> {
    encode(width, height, rgb, false, text)
}

/// [`encode_rgb`] of RGBA pixels (straight alpha, 4 bytes each).
pub fn encode_rgba(
    width: usize,
    height: usize,
    rgba: &[u8],
    text: &[(&str, &str)],
) -> Option<Vec<u8>> {
    encode(width, height, rgba, true, text)
}

fn encode(
    width: usize,
    height: usize,
    rgb: &[u8],
    alpha: bool,
    text: &[(&str, &str)],
) -> Option<Vec<u8>> {
    let row = width.checked_mul(if alpha { 4 } else { 3 })?;
    if width == 0 || height == 0 || rgb.len() != row.checked_mul(height)? {
        return None;
    }
    let w = u32::try_from(width).ok()?;
    let h = u32::try_from(height).ok()?;
    let mut raw = Vec::with_capacity((row + 1) * height);
    for line in rgb.chunks(row) {
        // Filter type 0 (none) for every scanline.
        raw.push(0);
        raw.extend_from_slice(line);
    }
    let mut out = SIGNATURE.to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    // 8 bits per sample, colour type 2 (RGB) or 6 (RGBA), deflate,
    // adaptive filtering, no interlace.
    ihdr.extend_from_slice(&[8, if alpha { 6 } else { 2 }, 0, 0, 0]);
    chunk(&mut out, *b"IHDR", &ihdr);
    for (key, value) in text {
        let mut data = ascii(key, 79);
        data.push(0);
        data.extend_from_slice(&ascii(value, 1 << 16));
        chunk(&mut out, *b"tEXt", &data);
    }
    chunk(&mut out, *b"IDAT", &zlib_stored(&raw));
    chunk(&mut out, *b"IEND", &[]);
    Some(out)
}

/// Printable ASCII of `s` (other characters escaped as `\u{…}`), cut at
/// `max` bytes.
fn ascii(s: &str, max: usize) -> Vec<u8> {
    let mut out = String::new();
    for c in s.chars() {
        if c == ' ' || c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.extend(c.escape_unicode());
        }
        if out.len() >= max {
            break;
        }
    }
    let mut bytes = out.into_bytes();
    bytes.truncate(max);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(&[b"IEND"]), 0xae42_6082);
        assert_eq!(crc32(&[b"123456789"]), 0xcbf4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        let big = vec![0xffu8; 100_000];
        // Reference: zlib.adler32(b"\xff" * 100000).
        assert_eq!(adler32(&big), 0x149a_302c);
    }

    #[test]
    fn encodes_a_tiny_image() {
        let png = encode_rgb(2, 1, &[255, 0, 0, 0, 255, 0], &[("Title", "a\nb")]).expect("png");
        assert_eq!(&png[..8], &SIGNATURE);
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
        assert!(encode_rgb(0, 1, &[], &[]).is_none());
        assert!(encode_rgb(2, 2, &[0; 6], &[]).is_none());
        assert_eq!(ascii("é\u{0}x", 100), b"\\u{e9}\\u{0}x");
    }
}
