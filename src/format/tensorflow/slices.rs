//! The keys under which a partitioned tensor's slices are stored:
//! TensorFlow's `EncodeTensorNameSlice` (`saved_tensor_slice_util.cc`),
//! written with `OrderedCode` (`ordered_code.cc`): the number 0, the
//! tensor's name as an escaped string, the rank, then each dimension's
//! start and length (-1 for the whole dimension) as signed numbers.

use super::proto::Extent;

/// `OrderedCode::WriteNumIncreasing`: a length byte, then the number's
/// big-endian bytes without leading zeros.
fn num_increasing(out: &mut Vec<u8>, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = (v.leading_zeros() / 8) as usize;
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// `OrderedCode::WriteString`: `\0` as `\0\xff`, `\xff` as `\xff\0`, then
/// the separator `\0\x01`.
fn string(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            0 => out.extend_from_slice(&[0, 0xff]),
            0xff => out.extend_from_slice(&[0xff, 0]),
            _ => out.push(b),
        }
    }
    out.extend_from_slice(&[0, 1]);
}

/// `OrderedCode::WriteSignedNumIncreasing`: `n` bytes hold a number in
/// `[-2^(7n-1), 2^(7n-1))`; the value is written big-endian in two's
/// complement over those bytes, and its first `n` bits (the sign bit and
/// the length in unary) are flipped.
fn signed_increasing(out: &mut Vec<u8>, v: i64) {
    let magnitude = if v < 0 { !v } else { v } as u64;
    let bits = 64 - magnitude.leading_zeros() as usize;
    // One bit for the sign, one per byte for the length.
    let len = (bits + 1).div_ceil(7).clamp(1, 10);
    let sign = if v < 0 { 0xff } else { 0 };
    let mut buf = [sign; 10];
    buf[2..].copy_from_slice(&v.to_be_bytes());
    let header = !(0xffffu16 >> len);
    let enc = &mut buf[10 - len..];
    enc[0] ^= (header >> 8) as u8;
    if let Some(second) = enc.get_mut(1) {
        *second ^= header as u8;
    }
    out.extend_from_slice(enc);
}

/// The key of the slice `extents` of the tensor `name`.
pub fn slice_key(name: &[u8], extents: &[Extent]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 4 + 4 * extents.len());
    num_increasing(&mut out, 0);
    string(&mut out, name);
    num_increasing(&mut out, extents.len() as u64);
    for x in extents {
        signed_increasing(&mut out, x.start);
        signed_increasing(&mut out, x.length.unwrap_or(-1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        signed_increasing(&mut out, v);
        out
    }

    #[test]
    fn signed_numbers_as_ordered_code_writes_them() {
        // The examples in ordered_code.cc's comments.
        assert_eq!(signed(0x42_4242), [0xf0, 0x42, 0x42, 0x42]);
        assert_eq!(signed(-0x800), [0x38, 0x00]);
        assert_eq!(signed(0), [0x80]);
        assert_eq!(signed(-1), [0x7f]);
        assert_eq!(signed(63), [0xbf]);
        assert_eq!(signed(-64), [0x40]);
        assert_eq!(signed(64), [0xc0, 0x40]);
        assert_eq!(signed(-65), [0x3f, 0xbf]);
        assert_eq!(signed(i64::MAX).len(), 10);
        assert_eq!(signed(i64::MIN).len(), 10);
        assert_eq!(signed(i64::MAX)[..2], [0xff, 0xc0]);
        assert_eq!(signed(i64::MIN)[..2], [0x00, 0x3f]);
        // The encoding orders as the numbers do.
        let xs = [
            i64::MIN,
            -1 << 40,
            -65,
            -64,
            -1,
            0,
            1,
            63,
            64,
            8191,
            8192,
            1 << 50,
            i64::MAX,
        ];
        for w in xs.windows(2) {
            assert!(signed(w[0]) < signed(w[1]), "{} {}", w[0], w[1]);
        }
    }

    #[test]
    fn a_slice_key() {
        let extents = [
            Extent {
                start: 2,
                length: Some(3),
            },
            Extent {
                start: 0,
                length: None,
            },
        ];
        let key = slice_key(b"a\0b\xff", &extents);
        assert_eq!(
            key,
            [
                0x00, // WriteNumIncreasing(0)
                b'a', 0x00, 0xff, b'b', 0xff, 0x00, 0x00, 0x01, // the name
                0x01, 0x02, // the rank
                0x82, 0x83, // 2, 3
                0x80, 0x7f, // 0, -1
            ]
        );
        let mut n = Vec::new();
        num_increasing(&mut n, 0x1_0000);
        assert_eq!(n, [3, 1, 0, 0]);
    }
}
