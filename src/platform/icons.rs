//! The app icon's multi-size containers, for the desktops that take one
//! file of many sizes: ICNS (the macOS bundle's `tensorscope.icns`) and ICO
//! (Windows' `tensorscope.ico`), both holding PNG images. The images come
//! from `gui::icon_rgba` through `examples/icons.rs`; this module only lays
//! the containers out.

/// The ICNS element types that hold a PNG, with the side of the square
/// image each holds (Apple's `IconFamily.h` types; `ic11` to `ic14` are the
/// `@2x` images of 16, 32, 128 and 256 points, which Finder picks on a
/// Retina screen).
pub const ICNS_TYPES: [([u8; 4], u32); 11] = [
    (*b"icp4", 16),
    (*b"icp5", 32),
    (*b"icp6", 64),
    (*b"ic07", 128),
    (*b"ic08", 256),
    (*b"ic09", 512),
    (*b"ic10", 1024),
    (*b"ic11", 32),
    (*b"ic12", 64),
    (*b"ic13", 256),
    (*b"ic14", 512),
];

/// The sides of the images of the Windows icon: the sizes Explorer and the
/// taskbar draw at 100 % to 200 % scaling.
pub const ICO_SIZES: [u32; 7] = [16, 24, 32, 48, 64, 128, 256];

/// An ICNS file of the given elements, each a type (one of
/// [`ICNS_TYPES`]) and its PNG bytes, in order. `None` when the file would
/// not fit the format's 32-bit lengths.
pub fn icns(elements: &[([u8; 4], &[u8])]) -> Option<Vec<u8>> {
    // Each element is its type, its length (header included, big-endian)
    // and its data; the file is the same around all of them.
    let total = elements
        .iter()
        .try_fold(8usize, |sum, (_, data)| sum.checked_add(8 + data.len()))?;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(b"icns");
    out.extend_from_slice(&u32::try_from(total).ok()?.to_be_bytes());
    for (kind, data) in elements {
        out.extend_from_slice(kind);
        out.extend_from_slice(&u32::try_from(8 + data.len()).ok()?.to_be_bytes());
        out.extend_from_slice(data);
    }
    Some(out)
}

/// An ICO file of the given images, each its side (1 to 256 pixels) and
/// its PNG bytes, in order (Windows Vista and later read PNG entries).
/// `None` for a side out of range or a file too large for the format.
pub fn ico(images: &[(u32, &[u8])]) -> Option<Vec<u8>> {
    const HEADER: usize = 6;
    const ENTRY: usize = 16;
    let count = u16::try_from(images.len()).ok()?;
    let mut offset = HEADER + ENTRY * images.len();
    let mut directory = Vec::with_capacity(offset);
    // ICONDIR: reserved, type 1 (icon), the number of images.
    directory.extend_from_slice(&0u16.to_le_bytes());
    directory.extend_from_slice(&1u16.to_le_bytes());
    directory.extend_from_slice(&count.to_le_bytes());
    for &(side, data) in images {
        if !(1..=256).contains(&side) {
            return None;
        }
        // A side of 256 is written as 0: the field is one byte.
        let byte = (side % 256) as u8;
        directory.extend_from_slice(&[byte, byte, 0, 0]);
        // Colour planes 1, 32 bits a pixel (what the PNG holds: RGBA).
        directory.extend_from_slice(&1u16.to_le_bytes());
        directory.extend_from_slice(&32u16.to_le_bytes());
        directory.extend_from_slice(&u32::try_from(data.len()).ok()?.to_le_bytes());
        directory.extend_from_slice(&u32::try_from(offset).ok()?.to_le_bytes());
        offset = offset.checked_add(data.len())?;
    }
    let mut out = directory;
    out.reserve(offset - out.len());
    for (_, data) in images {
        out.extend_from_slice(data);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be32(b: &[u8]) -> usize {
        u32::from_be_bytes(b[..4].try_into().unwrap()) as usize
    }

    fn le16(b: &[u8]) -> usize {
        u16::from_le_bytes(b[..2].try_into().unwrap()) as usize
    }

    fn le32(b: &[u8]) -> usize {
        u32::from_le_bytes(b[..4].try_into().unwrap()) as usize
    }

    #[test]
    fn icns_elements_follow_the_header_with_their_lengths() {
        let file = icns(&[(*b"icp4", b"abc"), (*b"ic10", b"")]).unwrap();
        assert_eq!(&file[..4], b"icns");
        assert_eq!(be32(&file[4..]), file.len());
        assert_eq!(file.len(), 8 + 11 + 8);
        assert_eq!(&file[8..12], b"icp4");
        assert_eq!(be32(&file[12..]), 11);
        assert_eq!(&file[16..19], b"abc");
        assert_eq!(&file[19..23], b"ic10");
        assert_eq!(be32(&file[23..]), 8);
        assert_eq!(icns(&[]).unwrap(), b"icns\0\0\0\x08");
    }

    #[test]
    fn icns_types_are_distinct_and_square_sizes() {
        for (i, (kind, side)) in ICNS_TYPES.iter().enumerate() {
            assert!(side.is_power_of_two() && (16..=1024).contains(side));
            assert!(ICNS_TYPES[..i].iter().all(|(k, _)| k != kind));
        }
    }

    #[test]
    fn ico_directory_points_at_each_image() {
        let images: [(u32, &[u8]); 3] = [(16, b"one"), (48, b"three"), (256, b"x")];
        let file = ico(&images).unwrap();
        assert_eq!((le16(&file), le16(&file[2..]), le16(&file[4..])), (0, 1, 3));
        let mut expected_offset = 6 + 3 * 16;
        for (i, (side, data)) in images.iter().enumerate() {
            let entry = &file[6 + 16 * i..6 + 16 * (i + 1)];
            let stored = if *side == 256 { 0 } else { *side as u8 };
            assert_eq!(&entry[..4], &[stored, stored, 0, 0]);
            assert_eq!((le16(&entry[4..]), le16(&entry[6..])), (1, 32));
            assert_eq!(le32(&entry[8..]), data.len());
            assert_eq!(le32(&entry[12..]), expected_offset);
            assert_eq!(&file[expected_offset..expected_offset + data.len()], *data);
            expected_offset += data.len();
        }
        assert_eq!(file.len(), expected_offset);
    }

    #[test]
    fn ico_refuses_sides_it_cannot_store() {
        assert!(ico(&[(0, b"")]).is_none());
        assert!(ico(&[(257, b"")]).is_none());
    }
}
