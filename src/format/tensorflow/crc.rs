//! CRC-32C (Castagnoli), as the TensorBundle keeps it for every table block
//! and every tensor's data, and LevelDB's masking of a stored CRC. Table
//! driven, sixteen bytes a step (no `unsafe`, so no CPU instruction): fast
//! enough to check every byte of a checkpoint on each read.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// What LevelDB adds to a rotated CRC when it stores one.
const MASK_DELTA: u32 = 0xa282_ead8;

/// `TABLES[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 16] = tables();

const fn tables() -> [[u32; 256]; 16] {
    let mut t = [[0u32; 256]; 16];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 0 { c >> 1 } else { (c >> 1) ^ POLY };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut j = 1;
    while j < 16 {
        let mut i = 0;
        while i < 256 {
            let prev = t[j - 1][i];
            t[j][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        j += 1;
    }
    t
}

/// The CRC-32C of `crc`'s bytes followed by `data` (`extend(0, x)` is the
/// CRC of `x`).
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut c = !crc;
    let mut chunks = data.chunks_exact(16);
    for b in &mut chunks {
        let a = c ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        c = t[15][(a & 0xff) as usize]
            ^ t[14][((a >> 8) & 0xff) as usize]
            ^ t[13][((a >> 16) & 0xff) as usize]
            ^ t[12][(a >> 24) as usize]
            ^ t[11][b[4] as usize]
            ^ t[10][b[5] as usize]
            ^ t[9][b[6] as usize]
            ^ t[8][b[7] as usize]
            ^ t[7][b[8] as usize]
            ^ t[6][b[9] as usize]
            ^ t[5][b[10] as usize]
            ^ t[4][b[11] as usize]
            ^ t[3][b[12] as usize]
            ^ t[2][b[13] as usize]
            ^ t[1][b[14] as usize]
            ^ t[0][b[15] as usize];
    }
    for &b in chunks.remainder() {
        c = (c >> 8) ^ t[0][((c ^ u32::from(b)) & 0xff) as usize];
    }
    !c
}

/// The CRC-32C of `data`.
pub fn value(data: &[u8]) -> u32 {
    extend(0, data)
}

/// A CRC as LevelDB and TensorFlow store it: rotated right by 15 bits, plus
/// a constant (so that the CRC of bytes holding CRCs is not degenerate).
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(value(b""), 0);
        assert_eq!(value(b"123456789"), 0xE306_9283);
        // RFC 3720 B.4: 32 bytes of zeros, of 0xff, and ascending.
        assert_eq!(value(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(value(&[0xffu8; 32]), 0x62A8_AB43);
        let up: Vec<u8> = (0..32).collect();
        assert_eq!(value(&up), 0x46DD_794E);
    }

    #[test]
    fn extending_is_the_crc_of_the_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for cut in [0, 1, 15, 16, 17, 500, 999, 1000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(extend(extend(0, a), b), value(&data), "cut at {cut}");
        }
    }

    #[test]
    fn mask_rotates_and_adds() {
        assert_eq!(mask(0), MASK_DELTA);
        assert_eq!(mask(0x1234_5678), 0x4f73_0f40);
    }
}
