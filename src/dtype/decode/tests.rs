//! Unit tests of the decoders: every code of every small float against the
//! committed reference tables, F4/F6 packing in both bit orders, and
//! decoding of arbitrary (truncated, misaligned) bytes without a panic.

use super::tables::reference::{self, same};
use super::*;

/// Packs codes into a bit stream, bit by bit: an implementation
/// independent of the decoder's word arithmetic.
fn pack(codes: &[u64], bits: u32, order: BitOrder) -> Vec<u8> {
    let total_bits = codes.len() * bits as usize;
    let mut out = vec![0u8; total_bits.div_ceil(8)];
    for (k, &code) in codes.iter().enumerate() {
        for j in 0..bits as usize {
            let stream_bit = k * bits as usize + j;
            match order {
                BitOrder::LsbFirst => {
                    if code >> j & 1 == 1 {
                        out[stream_bit / 8] |= 1 << (stream_bit % 8);
                    }
                }
                BitOrder::MsbFirst => {
                    if code >> (bits as usize - 1 - j) & 1 == 1 {
                        out[stream_bit / 8] |= 0x80 >> (stream_bit % 8);
                    }
                }
            }
        }
    }
    out
}

/// Every code of `dtype` in order, as tensor bytes.
fn all_codes(dtype: Dtype, order: BitOrder) -> Vec<u8> {
    let count = 1u64 << dtype.bits();
    match dtype.bits() {
        4 | 6 => pack(&(0..count).collect::<Vec<_>>(), dtype.bits(), order),
        8 => (0..=255).collect(),
        16 => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
        _ => unreachable!(),
    }
}

/// Deterministic pseudo-random bytes (xorshift64).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

fn assert_same(dtype: Dtype, what: &str, code: usize, got: f64, want: f64) {
    assert!(
        same(got, want),
        "{dtype} {what} code {code:#x}: got {got:e} ({:#018x}), ml_dtypes {want:e} ({:#018x})",
        got.to_bits(),
        want.to_bits()
    );
}

#[test]
fn every_code_of_every_reference_dtype_decodes_bit_exactly() {
    for dtype in reference::DTYPES {
        let expected = reference::values(dtype);
        let orders: &[BitOrder] = if dtype.bits() == 6 {
            &BitOrder::ALL
        } else {
            &[BitOrder::LsbFirst]
        };
        for &order in orders {
            let bytes = all_codes(dtype, order);
            let mut out64 = vec![f64::NAN; expected.len()];
            let mut out32 = vec![f32::NAN; expected.len()];
            assert_eq!(
                decode_f64(dtype, &bytes, 0, &mut out64, order),
                expected.len()
            );
            assert_eq!(
                decode_f32(dtype, &bytes, 0, &mut out32, order),
                Some(expected.len())
            );
            for (code, &want) in expected.iter().enumerate() {
                assert_same(dtype, "decode_f64", code, out64[code], want);
                assert_same(dtype, "decode_f32", code, f64::from(out32[code]), want);
                let one =
                    decode_one_f64(dtype, &bytes, code as u64, order).expect("element is present");
                assert_same(dtype, "decode_one_f64", code, one, want);
                assert_eq!(
                    code_at(dtype, &bytes, code as u64, order),
                    Some(code as u64)
                );
            }
        }
    }
}

#[test]
fn f4_puts_element_zero_in_the_low_nibble() {
    // 0x21: low nibble 1 (0.5), high nibble 2 (1.0); 0xf8: −0, −6.
    let bytes = [0x21, 0xf8];
    let mut out = [0.0; 4];
    assert_eq!(
        decode_f64(Dtype::F4, &bytes, 0, &mut out, BitOrder::MsbFirst),
        4
    );
    assert_eq!(
        out.map(f64::to_bits),
        [0.5, 1.0, -0.0, -6.0].map(f64::to_bits)
    );
    assert_eq!(code_at(Dtype::F4, &bytes, 0, BitOrder::LsbFirst), Some(1));
    assert_eq!(code_at(Dtype::F4, &bytes, 1, BitOrder::LsbFirst), Some(2));
    assert_eq!(code_at(Dtype::F4, &bytes, 4, BitOrder::LsbFirst), None);
}

#[test]
fn f6_packs_four_elements_into_three_bytes_in_both_orders() {
    // Codes 1, 2, 3, 0x3f = 0.125, 0.25, 0.375, −7.5 in F6_E2M3.
    // LSB first: word = 1 | 2<<6 | 3<<12 | 0x3f<<18 = 0xfc3081, stored
    // little-endian. MSB first: 000001 000010 000011 111111.
    let lsb = [0x81, 0x30, 0xfc];
    let msb = [0x04, 0x20, 0xff];
    let want = [0.125, 0.25, 0.375, -7.5];
    for (bytes, order) in [(lsb, BitOrder::LsbFirst), (msb, BitOrder::MsbFirst)] {
        let mut out = [0.0; 4];
        assert_eq!(decode_f64(Dtype::F6E2M3, &bytes, 0, &mut out, order), 4);
        assert_eq!(out, want, "{order}");
        let codes: Vec<_> = (0..4)
            .map(|i| code_at(Dtype::F6E2M3, &bytes, i, order))
            .collect();
        assert_eq!(codes, [Some(1), Some(2), Some(3), Some(0x3f)], "{order}");
        assert_eq!(code_at(Dtype::F6E2M3, &bytes, 4, order), None);
    }
    assert_eq!(pack(&[1, 2, 3, 0x3f], 6, BitOrder::LsbFirst), lsb);
    assert_eq!(pack(&[1, 2, 3, 0x3f], 6, BitOrder::MsbFirst), msb);
    // The default is LSB first.
    assert_eq!(BitOrder::default(), BitOrder::LsbFirst);
}

#[test]
fn partial_f6_groups_decode_only_whole_elements() {
    // 1 byte holds element 0; 2 bytes hold elements 0 and 1.
    for order in BitOrder::ALL {
        let bytes = pack(&[0x2a, 0x15, 0x3f, 0x01, 0x07], 6, order);
        assert_eq!(bytes.len(), 4);
        for len in 0..=4 {
            let slice = &bytes[..len];
            let count = element_count(Dtype::F6E3M2, len);
            assert_eq!(count, [0, 1, 2, 4, 5][len]);
            let mut out = [f64::NAN; 8];
            let written = decode_f64(Dtype::F6E3M2, slice, 0, &mut out, order);
            assert_eq!(written as u64, count, "{order} len {len}");
            for (i, &v) in out[..written].iter().enumerate() {
                let want = decode_one_f64(Dtype::F6E3M2, &bytes, i as u64, order);
                assert_eq!(Some(v), want, "{order} len {len} element {i}");
            }
        }
    }
}

#[test]
fn sub_byte_decoding_from_any_first_element_matches_one_by_one() {
    let bytes = noise(37, 7);
    for dtype in [Dtype::F4, Dtype::F6E2M3, Dtype::F6E3M2] {
        for order in BitOrder::ALL {
            let count = element_count(dtype, bytes.len());
            for first in 0..count + 3 {
                for out_len in [0, 1, 2, 3, 5, 8, 13, 64] {
                    let mut out = vec![f64::NAN; out_len];
                    let written = decode_f64(dtype, &bytes, first, &mut out, order);
                    let want = (out_len as u64).min(count.saturating_sub(first));
                    assert_eq!(written as u64, want, "{dtype} first {first} len {out_len}");
                    for (i, &v) in out[..written].iter().enumerate() {
                        let one = decode_one_f64(dtype, &bytes, first + i as u64, order);
                        assert_eq!(one.map(f64::to_bits), Some(v.to_bits()));
                    }
                    assert!(
                        out[written..].iter().all(|v| v.is_nan()),
                        "wrote past count"
                    );
                }
            }
        }
    }
}

#[test]
fn short_odd_and_out_of_range_input_never_panics() {
    let bytes = noise(19, 3);
    for dtype in Dtype::ALL {
        for len in 0..=bytes.len() {
            let slice = &bytes[..len];
            let count = element_count(dtype, len);
            for first in [0, 1, 2, 3, 4, 5, count, count + 1, u64::MAX / 2, u64::MAX] {
                for out_len in [0, 1, 3, 7, 40] {
                    let want = (out_len as u64).min(count.saturating_sub(first)) as usize;
                    let mut out64 = vec![0.0; out_len];
                    let mut out32 = vec![0.0; out_len];
                    let order = BitOrder::MsbFirst;
                    assert_eq!(decode_f64(dtype, slice, first, &mut out64, order), want);
                    let n32 = decode_f32(dtype, slice, first, &mut out32, order);
                    assert_eq!(n32, f32_is_exact(dtype).then_some(want), "{dtype}");
                    if dtype == Dtype::C64 {
                        let mut im = vec![0.0; out_len + 1];
                        assert_eq!(decode_c64(slice, first, &mut out64, &mut im), want);
                    }
                }
                let present = first < count;
                assert_eq!(
                    code_at(dtype, slice, first, BitOrder::LsbFirst).is_some(),
                    present
                );
                assert_eq!(
                    decode_one_f64(dtype, slice, first, BitOrder::LsbFirst).is_some(),
                    present
                );
            }
        }
    }
}

#[test]
fn f32_path_equals_f64_path() {
    let bytes = noise(4099, 11);
    for dtype in Dtype::ALL.into_iter().filter(|&d| f32_is_exact(d)) {
        for order in BitOrder::ALL {
            for first in [0, 1, 3] {
                let mut out64 = vec![0.0; 3000];
                let mut out32 = vec![0.0; 3000];
                let n64 = decode_f64(dtype, &bytes, first, &mut out64, order);
                let n32 = decode_f32(dtype, &bytes, first, &mut out32, order);
                assert_eq!(Some(n64), n32, "{dtype}");
                for (a, b) in out64[..n64].iter().zip(&out32) {
                    assert!(same(*a, f64::from(*b)), "{dtype}: {a:e} vs {b:e}");
                }
            }
        }
    }
    for dtype in [Dtype::F64, Dtype::I32, Dtype::U32, Dtype::I64, Dtype::U64] {
        assert_eq!(
            decode_f32(dtype, &bytes, 0, &mut [0.0; 4], BitOrder::LsbFirst),
            None
        );
    }
}

#[test]
fn integer_extremes_and_bool_bytes() {
    let order = BitOrder::LsbFirst;
    let decode = |dtype, bytes: &[u8]| {
        let mut out = vec![0.0; 8];
        let n = decode_f64(dtype, bytes, 0, &mut out, order);
        out.truncate(n);
        out
    };
    let mut bytes = i64::MIN.to_le_bytes().to_vec();
    bytes.extend(i64::MAX.to_le_bytes());
    bytes.extend((-1i64).to_le_bytes());
    assert_eq!(
        decode(Dtype::I64, &bytes),
        [-(2f64.powi(63)), 2f64.powi(63), -1.0]
    );
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend(((1u64 << 53) + 1).to_le_bytes());
    // Both round to nearest, ties to even.
    assert_eq!(decode(Dtype::U64, &bytes), [2f64.powi(64), 2f64.powi(53)]);
    assert_eq!(code_at(Dtype::U64, &bytes, 0, order), Some(u64::MAX));
    assert_eq!(code_at(Dtype::U64, &bytes, 1, order), Some((1 << 53) + 1));

    let mut bytes = i32::MIN.to_le_bytes().to_vec();
    bytes.extend(u32::MAX.to_le_bytes());
    assert_eq!(decode(Dtype::I32, &bytes), [-2_147_483_648.0, -1.0]);
    assert_eq!(
        decode(Dtype::U32, &bytes),
        [2_147_483_648.0, 4_294_967_295.0]
    );
    let bytes = [0x00, 0x80, 0xff, 0x7f];
    assert_eq!(decode(Dtype::I16, &bytes), [-32768.0, 32767.0]);
    assert_eq!(decode(Dtype::U16, &bytes), [32768.0, 32767.0]);
    assert_eq!(decode(Dtype::I8, &bytes), [0.0, -128.0, -1.0, 127.0]);
    assert_eq!(decode(Dtype::U8, &bytes), [0.0, 128.0, 255.0, 127.0]);
    assert_eq!(code_to_f64(Dtype::I8, 0x80), Some(-128.0));
    assert_eq!(code_to_f64(Dtype::I64, u64::MAX), Some(-1.0));

    let bools = [0, 1, 2, 0x80, 0xff, 0];
    assert_eq!(decode(Dtype::Bool, &bools), [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
    let mut out32 = [9.0; 6];
    assert_eq!(
        decode_f32(Dtype::Bool, &bools, 0, &mut out32, order),
        Some(6)
    );
    assert_eq!(out32, [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
    assert_eq!(decode_one_f64(Dtype::Bool, &bools, 2, order), Some(1.0));
    assert_eq!(code_at(Dtype::Bool, &bools, 2, order), Some(2));
}

#[test]
fn complex_parts_and_codes() {
    let mut bytes = 1.5f32.to_le_bytes().to_vec();
    bytes.extend((-2.0f32).to_le_bytes());
    bytes.extend(f32::NEG_INFINITY.to_le_bytes());
    bytes.extend((-0.0f32).to_le_bytes());
    bytes.push(0xaa); // a stray byte: not a whole element
    let (mut re, mut im) = ([0.0; 4], [0.0; 3]);
    assert_eq!(decode_c64(&bytes, 0, &mut re, &mut im), 2);
    assert_eq!(re[..2], [1.5, f64::NEG_INFINITY]);
    assert_eq!(
        im[..2].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        [(-2.0f64).to_bits(), (-0.0f64).to_bits()]
    );
    let (mut re32, mut im32) = ([0.0f32; 1], [0.0f32; 1]);
    assert_eq!(decode_c64_f32(&bytes, 1, &mut re32, &mut im32), 1);
    assert_eq!((re32[0], im32[0]), (f32::NEG_INFINITY, -0.0));

    let mut real = [0.0; 4];
    assert_eq!(
        decode_f64(Dtype::C64, &bytes, 0, &mut real, BitOrder::LsbFirst),
        2
    );
    assert_eq!(real[..2], [1.5, f64::NEG_INFINITY]);
    assert_eq!(
        decode_one_f64(Dtype::C64, &bytes, 0, BitOrder::LsbFirst),
        Some(1.5)
    );
    let code = code_at(Dtype::C64, &bytes, 0, BitOrder::LsbFirst).expect("present");
    assert_eq!(code as u32, 1.5f32.to_bits());
    assert_eq!((code >> 32) as u32, (-2.0f32).to_bits());
}

#[test]
fn codes_wider_than_the_dtype_have_no_value() {
    assert_eq!(code_to_f64(Dtype::F4, 16), None);
    assert_eq!(code_to_f64(Dtype::F6E3M2, 64), None);
    assert_eq!(code_to_f64(Dtype::U8, 256), None);
    assert_eq!(code_to_f64(Dtype::F16, 0x3c00), Some(1.0));
    assert_eq!(
        code_to_f64(Dtype::F64, u64::MAX).map(f64::is_nan),
        Some(true)
    );
}

#[test]
fn hex_codes_are_padded_to_the_dtype_width() {
    assert_eq!(format_code_hex(Dtype::F4, 0xa), "0xa");
    assert_eq!(format_code_hex(Dtype::F6E2M3, 0x5), "0x05");
    assert_eq!(format_code_hex(Dtype::F8E4M3, 0x7f), "0x7f");
    assert_eq!(format_code_hex(Dtype::BF16, 0x3f80), "0x3f80");
    assert_eq!(format_code_hex(Dtype::C64, 1), "0x0000000000000001");
}

#[test]
fn decoding_spans_many_half_batches() {
    let bytes = noise(2 * (3 * HALF_BATCH + 17), 5);
    for dtype in [Dtype::F16, Dtype::BF16] {
        let mut out = vec![0.0; 3 * HALF_BATCH + 40];
        let n = decode_f64(dtype, &bytes, 5, &mut out, BitOrder::LsbFirst);
        assert_eq!(n, 3 * HALF_BATCH + 12);
        for (i, &v) in out[..n].iter().enumerate() {
            let one = decode_one_f64(dtype, &bytes, 5 + i as u64, BitOrder::LsbFirst);
            assert!(same(v, one.expect("present")), "{dtype} element {i}");
        }
    }
}
