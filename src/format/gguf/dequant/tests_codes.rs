//! Each element's code as the decoders hand it on, on hand-made blocks;
//! the codes within [`code_range`]; the runs that go through a table of
//! 16 values giving, bit for bit, the values of the type's per-element
//! formula (as gguf-py computes it) on random blocks; and each block's
//! scales.

use super::grids::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::nonlinear::{e8m0_half, ue4m3_half};
use super::{Sink, code_range, code_values, decode, dequantize, scales_of, scales_per_block};
use crate::format::gguf::types::GgmlType;

const ONE: [u8; 2] = 0x3C00_u16.to_le_bytes();
const TWO: [u8; 2] = 0x4000_u16.to_le_bytes();
const HALF: [u8; 2] = 0x3800_u16.to_le_bytes();

/// Every value with its code.
#[derive(Default)]
struct Pairs(Vec<(f32, i32)>);

impl Sink for Pairs {
    fn one(&mut self, v: f32, code: i32) {
        self.0.push((v, code));
    }
    fn table(&mut self, t: &[f32; 16], bytes: &[u8], shift: u32, mask: u8, offset: i32) {
        for &b in bytes {
            let q = (b >> shift) & mask;
            self.0.push((t[usize::from(q)], i32::from(q) + offset));
        }
    }
}

fn ty(id: u32) -> GgmlType {
    GgmlType::from_id(id).expect("a type")
}

/// A block of type `id`: `bytes` at their offsets, zeros elsewhere.
fn block(id: u32, bytes: &[(usize, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; ty(id).block().1 as usize];
    for &(at, part) in bytes {
        b[at..at + part.len()].copy_from_slice(part);
    }
    b
}

/// The (value, code) pairs of one block.
fn pairs(id: u32, b: &[u8]) -> (Vec<f32>, Vec<i32>) {
    let mut p = Pairs::default();
    decode(ty(id), b, &mut p).expect("decodes");
    assert_eq!(p.0.len() as u64, ty(id).block().0);
    p.0.into_iter().unzip()
}

fn codes(id: u32, bytes: &[(usize, &[u8])]) -> Vec<i32> {
    pairs(id, &block(id, bytes)).1
}

#[test]
fn the_32_element_types_give_their_stored_code() {
    // Q4_0 and Q4_1: element 0 the low nibble of byte 0, element 16 its
    // high nibble.
    let (v, c) = pairs(2, &block(2, &[(0, &ONE), (2, &[0x8F])]));
    assert_eq!((c[0], c[16], c[1]), (15, 8, 0));
    assert_eq!((v[0], v[16], v[1]), (7.0, 0.0, -8.0));
    let (v, c) = pairs(3, &block(3, &[(0, &TWO), (2, &ONE), (4, &[0x3A])]));
    assert_eq!((c[0], c[16]), (10, 3));
    assert_eq!((v[0], v[16]), (21.0, 7.0));
    // Q5_0, Q5_1: the fifth bit of element i is bit i of qh.
    let qh = (1u32 << 16) | 1;
    let (v, c) = pairs(
        6,
        &block(6, &[(0, &ONE), (2, &qh.to_le_bytes()), (6, &[0x21])]),
    );
    assert_eq!((c[0], c[16], c[1], c[17]), (17, 18, 0, 0));
    assert_eq!((v[0], v[16], v[1]), (1.0, 2.0, -16.0));
    let (v, c) = pairs(
        7,
        &block(7, &[(0, &ONE), (2, &HALF), (4, &qh.to_le_bytes())]),
    );
    assert_eq!((c[0], c[16], c[1]), (16, 16, 0));
    assert_eq!((v[0], v[1]), (16.5, 0.5));
    // Q8_0: the signed byte.
    let (v, c) = pairs(8, &block(8, &[(0, &TWO), (2, &[0x80, 0x7F, 0xFF])]));
    assert_eq!(c[..4], [-128, 127, -1, 0]);
    assert_eq!(v[..4], [-256.0, 254.0, -2.0, 0.0]);
}

#[test]
fn k_quants_give_the_code_their_formula_multiplies() {
    // Q2_K: element e's 2-bit code in bit pair (e % 128) / 32 of byte
    // e / 128 * 32 + e % 32; sub-block 0 scale 1 (d 1), min 0.
    let c = codes(10, &[(0, &[0x01]), (16, &[0b1110_0100]), (80, &ONE)]);
    assert_eq!((c[0], c[32], c[64], c[96], c[1]), (0, 1, 2, 3, 0));
    // Q3_K: the 2-bit code less 4 where the hmask bit is clear.
    let c = codes(11, &[(0, &[0x01]), (32, &[0x03, 0x02]), (108, &ONE)]);
    assert_eq!((c[0], c[1], c[2], c[32]), (3, -2, -4, -4));
    // Q4_K: sub-block 0 the low nibbles of qs[0..32], 1 the high ones.
    let c = codes(12, &[(0, &ONE), (16, &[0x5A])]);
    assert_eq!((c[0], c[32], c[1], c[64]), (10, 5, 0, 0));
    // Q5_K: the fifth bit of element 32 j + k is bit j of qh[k].
    let c = codes(13, &[(16, &[0x02]), (48, &[0x5A])]);
    assert_eq!((c[0], c[32]), (10, 21));
    // Q6_K: low nibble and high bit pair, less 32.
    let c = codes(14, &[(0, &[0x21]), (128, &[0x03])]);
    assert_eq!((c[0], c[64], c[1]), (1 + 48 - 32, 2 - 32, -32));
}

#[test]
fn table_types_give_the_index_into_their_table() {
    let (v, c) = pairs(20, &block(20, &[(0, &HALF), (2, &[0xF0])]));
    assert_eq!((c[0], c[16]), (0, 15));
    assert_eq!((v[0], v[16]), (-63.5, 56.5));
    let c = codes(23, &[(0, &ONE), (8, &[0x97])]);
    assert_eq!((c[0], c[16]), (7, 9));
    let (v, c) = pairs(39, &block(39, &[(0, &[128]), (1, &[0xF7])]));
    assert_eq!((c[0], c[16]), (7, 15));
    assert_eq!((v[0], v[16]), (12.0, -12.0));
    // NVFP4: sub-blocks of 16 (8 bytes, low nibbles then high).
    let c = codes(40, &[(0, &[0x38; 4]), (4, &[0x97]), (12, &[0x21])]);
    assert_eq!((c[0], c[8], c[16], c[24]), (7, 9, 1, 2));
    for id in [20, 23] {
        assert_eq!(code_values(ty(id)), Some(&KVALUES_IQ4NL));
    }
    for id in [39, 40] {
        assert_eq!(code_values(ty(id)), Some(&KVALUES_MXFP4));
    }
    assert_eq!(code_values(ty(12)), None);
}

#[test]
fn ternary_types_give_minus_one_to_one() {
    // TQ1_0: byte 0 is q -1 at every power, 128 is q 0, 207 the trits
    // 1, 0, -1, 1, 0.
    let c = codes(34, &[(0, &[207, 128]), (52, &ONE)]);
    assert_eq!(
        (0..5).map(|k| c[32 * k]).collect::<Vec<_>>(),
        [1, 0, -1, 1, 0]
    );
    assert_eq!((c[1], c[2]), (0, -1));
    // TQ2_0: the bit pairs less 1 (3 gives 2).
    let (v, c) = pairs(35, &block(35, &[(0, &[0xE4]), (64, &TWO)]));
    assert_eq!([c[0], c[32], c[64], c[96], c[1]], [-1, 0, 1, 2, -1]);
    assert_eq!(v[96], 4.0);
}

#[test]
fn grid_types_have_no_codes() {
    for id in [16, 17, 18, 19, 21, 22, 29] {
        assert_eq!(code_range(ty(id)), None, "{}", ty(id).name());
        let (_, c) = pairs(id, &block(id, &[(0, &ONE)]));
        assert!(c.iter().all(|&x| x == 0));
        assert_eq!(scales_per_block(ty(id)), 1);
    }
    for id in [0, 1, 9, 15, 41] {
        assert_eq!((code_range(ty(id)), scales_per_block(ty(id))), (None, 0));
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 32) as u8).collect()
    }
}

fn h(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Element `i`'s value by the type's formula, one element at a time, as
/// gguf-py computes it (the decoders' tables must give the same bits).
#[expect(
    clippy::many_single_char_names,
    reason = "the formulas' own names: block b, element i, sub-block j, scale sc, min m"
)]
fn formula(id: u32, b: &[u8], i: usize) -> f32 {
    let nib = |qs: &[u8], i: usize| if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 };
    match id {
        2 => h(b, 0) * f32::from(nib(&b[2..], i) as i8 - 8),
        3 => h(b, 0) * f32::from(nib(&b[4..], i)) + h(b, 2),
        12 => {
            let (j, k) = (i / 32, i % 32);
            let s = &b[4..16];
            let (sc, m) = if j < 4 {
                (s[j] & 63, s[4 + j] & 63)
            } else {
                (
                    (s[j + 4] & 15) | ((s[j - 4] >> 2) & 0x30),
                    (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30),
                )
            };
            let q = (b[16 + j / 2 * 32 + k] >> ((j % 2) * 4)) & 15;
            (h(b, 0) * f32::from(sc)) * f32::from(q) - h(b, 2) * f32::from(m)
        }
        10 => {
            let sc = b[i / 16];
            let q = (b[16 + i / 128 * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
            (h(b, 80) * f32::from(sc & 15)) * f32::from(q) - h(b, 82) * f32::from(sc >> 4)
        }
        20 => h(b, 0) * f32::from(KVALUES_IQ4NL[usize::from(nib(&b[2..], i))]),
        23 => {
            let j = i / 32;
            let l = (b[4 + j / 2] >> (4 * (j % 2))) & 15;
            let hi = ((u16::from_le_bytes([b[2], b[3]]) >> (2 * j)) & 3) as u8;
            let dl = h(b, 0) * f32::from((l | (hi << 4)) as i8 - 32);
            dl * f32::from(KVALUES_IQ4NL[usize::from(nib(&b[8 + 16 * j..], i % 32))])
        }
        39 => e8m0_half(b[0]) * f32::from(KVALUES_MXFP4[usize::from(nib(&b[1..], i))]),
        40 => {
            let (s, k) = (i / 16, i % 16);
            let run = &b[4 + 8 * s..];
            let q = if k < 8 { run[k] & 15 } else { run[k - 8] >> 4 };
            ue4m3_half(b[s]) * f32::from(KVALUES_MXFP4[usize::from(q)])
        }
        35 => {
            let (half, pair, byte) = (i / 128, (i % 128) / 32, i % 32);
            let q = (b[32 * half + byte] >> (2 * pair)) & 3;
            h(b, 64) * f32::from(q as i8 - 1)
        }
        _ => unreachable!("a type decoded through tables"),
    }
}

#[test]
fn tables_give_the_formula_bit_for_bit_and_codes_stay_in_range() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let table_types = [2, 3, 10, 12, 20, 23, 35, 39, 40];
    for id in [2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 34, 35, 39, 40] {
        let t = ty(id);
        let (lo, hi) = code_range(t).expect("a type with codes");
        for round in 0..200 {
            let mut b = rng.bytes(t.block().1 as usize);
            // Now and then f16 scales of NaN or ±Inf bits.
            if round % 7 == 0 {
                for &at in f16_scales(id) {
                    b[at + 1] = 0x7C | (b[at + 1] & 0x83);
                }
            }
            let (v, c) = pairs(id, &b);
            assert!(c.iter().all(|&x| (lo..=hi).contains(&x)), "{}", t.name());
            let mut plain = Vec::new();
            dequantize(t, &b, &mut plain).expect("decodes");
            assert_eq!(bits(&plain), bits(&v), "{}", t.name());
            if table_types.contains(&id) {
                let want: Vec<f32> = (0..v.len()).map(|i| formula(id, &b, i)).collect();
                assert_eq!(same_nan(&v), same_nan(&want), "{} block {b:02x?}", t.name());
            }
        }
    }
}

/// Where a type's f16 scales (and minimums) are.
fn f16_scales(id: u32) -> &'static [usize] {
    match id {
        3 | 7 | 12 | 13 => &[0, 2],
        10 => &[80, 82],
        11 => &[108],
        14 => &[208],
        34 => &[52],
        35 => &[64],
        39 | 40 => &[],
        _ => &[0],
    }
}

/// The bits of each value, every NaN as one: where two NaNs of different
/// payloads meet (a NaN `d` plus a NaN `m`), which payload the sum keeps is
/// the compiler's choice of operand order (IEEE 754 does not say), in the
/// formula here as in the decoder.
fn same_nan(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| if x.is_nan() { 0x7FC0_0000 } else { x.to_bits() })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn scales_are_each_block_s_main_scale() {
    let d = |id: u32, at: usize| scales_of(ty(id), &block(id, &[(at, &TWO)])).map(|s| s[0]);
    for (id, at) in [
        (2, 0),
        (8, 0),
        (10, 80),
        (11, 108),
        (12, 0),
        (13, 0),
        (14, 208),
    ] {
        assert_eq!(d(id, at), Some(2.0), "{}", ty(id).name());
    }
    for (id, at) in [(16, 0), (20, 0), (23, 0), (34, 52), (35, 64)] {
        assert_eq!(d(id, at), Some(2.0), "{}", ty(id).name());
    }
    // IQ1_M: d from the scale words' top nibbles (1.0 is 0x3C00).
    let w: Vec<u8> = [0x0001_u16, 0, 0xC000, 0x3000]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let iq1m = scales_of(ty(29), &block(29, &[(48, &w)])).expect("scales");
    assert_eq!(iq1m[0], 1.0);
    // MXFP4: the power of two gguf-py multiplies by; NVFP4: four.
    assert_eq!(
        scales_of(ty(39), &block(39, &[(0, &[130])])).map(|s| s[0]),
        Some(4.0)
    );
    let nv = scales_of(ty(40), &block(40, &[(0, &[0x38, 0x40, 0x7F, 0x01])]));
    assert_eq!(nv, Some([0.5, 1.0, 0.0, 2f32.powi(-10)]));
    assert_eq!(scales_per_block(ty(40)), 4);
    // A short block, a stored type: none.
    assert_eq!(scales_of(ty(12), &[0; 16]), None);
    assert_eq!(scales_of(ty(0), &[0; 4]), None);
}
