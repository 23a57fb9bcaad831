//! Hand-made blocks of each type, their values worked out from the type's
//! formula (GGUF.md, "Bit-exact decoding"), and the lookup tables' shape
//! and ends as ggml's `ggml-common.h` writes them.

// The grid words as ggml writes them, to compare at a glance.
#![allow(clippy::unreadable_literal)]

use super::dequantize;
use super::grids::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KMASK_IQ2XS, KSIGNS_IQ2XS,
    KVALUES_IQ4NL, KVALUES_MXFP4,
};
use super::grids_iq1s::IQ1S_GRID;
use super::nonlinear::{e8m0_half, ue4m3_half};
use crate::format::gguf::types::GgmlType;

const ONE: [u8; 2] = 0x3C00_u16.to_le_bytes();
const TWO: [u8; 2] = 0x4000_u16.to_le_bytes();
const HALF: [u8; 2] = 0x3800_u16.to_le_bytes();
const MINUS_ONE: [u8; 2] = 0xBC00_u16.to_le_bytes();

/// A block of type `name` (id `id`): `bytes`, then zeros to its size.
fn block(id: u32, bytes: &[(usize, &[u8])]) -> (GgmlType, Vec<u8>) {
    let t = GgmlType::from_id(id).expect("a type");
    let mut b = vec![0u8; t.block().1 as usize];
    for &(at, part) in bytes {
        b[at..at + part.len()].copy_from_slice(part);
    }
    (t, b)
}

fn decode(id: u32, bytes: &[(usize, &[u8])]) -> Vec<f32> {
    let (t, b) = block(id, bytes);
    let mut out = Vec::new();
    dequantize(t, &b, &mut out).expect("decodes");
    assert_eq!(out.len() as u64, t.block().0, "{}", t.name());
    out
}

/// Bit-equal, so that -0.0 and 0.0 differ.
fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn the_tables_have_ggml_lengths_and_ends() {
    let ends64 = [
        (
            &IQ2XXS_GRID[..],
            256,
            0x0808080808080808,
            0x2b2b2b1908081908,
        ),
        (&IQ2XS_GRID[..], 512, 0x0808080808080808, 0x2b2b2b2b2b2b2b2b),
        (&IQ2S_GRID[..], 1024, 0x0808080808080808, 0x2b2b2b2b2b2b2b2b),
        (&IQ1S_GRID[..], 2048, 0xffffffffffffffff, 0x0101010101010101),
    ];
    for (grid, n, first, last) in ends64 {
        assert_eq!((grid.len(), grid[0], grid[n - 1]), (n, first, last));
    }
    assert_eq!(IQ3XXS_GRID.len(), 256);
    assert_eq!((IQ3XXS_GRID[0], IQ3XXS_GRID[255]), (0x04040404, 0x3e341c04));
    assert_eq!(IQ3S_GRID.len(), 512);
    assert_eq!((IQ3S_GRID[0], IQ3S_GRID[511]), (0x01010101, 0x0f0f0101));
    assert_eq!(KMASK_IQ2XS, [1, 2, 4, 8, 16, 32, 64, 128]);
    // Bit 7 of a sign byte makes its count of set bits even.
    for (i, &s) in KSIGNS_IQ2XS.iter().enumerate() {
        assert_eq!(usize::from(s & 0x7F), i);
        assert_eq!(s.count_ones() % 2, 0);
    }
    assert_eq!((KVALUES_IQ4NL[0], KVALUES_IQ4NL[15]), (-127, 113));
    assert_eq!(
        KVALUES_MXFP4,
        [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
    );
}

#[test]
fn iq2_xxs_is_scale_times_grid_times_sign() {
    // Sub-block 0: grid rows 0 and 1, scale 3 (db = (1 * 3.5) * 0.25),
    // sign index 1 (ksigns 0x81: elements 0 and 7 negative) for group 0.
    let aux = (3u32 << 28) | 1;
    let v = decode(
        16,
        &[(0, &ONE), (2, &[0, 1, 0, 0]), (6, &aux.to_le_bytes())],
    );
    assert_eq!(v[..8], [-7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, -7.0]);
    assert_eq!(v[8], 43.0 * 0.875); // row 1 starts with 0x2b
    assert_eq!(v[9], 7.0);
    // Other sub-blocks: scale 0 (db 0.125), row 0.
    assert!(v[32..].iter().all(|&x| x == 1.0));
    // A NaN scale: the sign -1 keeps the NaN as it is (as multiplying by
    // -1.0 does in gguf-py), no sign bit flipped.
    let nan = 0x7E00_u16.to_le_bytes();
    let v = decode(16, &[(0, &nan), (6, &aux.to_le_bytes())]);
    assert_eq!((v[0].to_bits(), v[1].to_bits()), (0x7FC0_0000, 0x7FC0_0000));
}

#[test]
fn iq2_xs_and_iq2_s_take_a_nibble_scale_per_16_values() {
    // Group 0: row 0, sign index 3 (elements 0 and 1 negative); scales 1
    // (groups 0, 1) and 2 (groups 2, 3).
    let q = 3u16 << 9;
    let v = decode(17, &[(0, &TWO), (2, &q.to_le_bytes()), (66, &[0x21])]);
    assert_eq!(v[..3], [-6.0, -6.0, 6.0]); // (2 * 1.5) * 0.25 * 8
    assert_eq!(v[16], 10.0); // (2 * 2.5) * 0.25 * 8
    assert_eq!(v[32], 2.0); // (2 * 0.5) * 0.25 * 8
    // IQ2_S: sign bytes direct; group 1's high bits 3 (row 0x300 = 768).
    let v = decode(
        22,
        &[(0, &ONE), (34, &[0x80]), (66, &[0x0C]), (74, &[0x01])],
    );
    assert_eq!(v[7], -3.0); // (1 * 1.5) * 0.25 * 8, bit 7 set
    let row = IQ2S_GRID[768];
    assert_eq!(v[8], 0.375 * f32::from(row as u8));
    assert_eq!(v[16], 1.0);
}

#[test]
fn iq3_types_scale_rows_of_four() {
    // IQ3_XXS: d 2, sub-block 0 scale 1 ((2 * 1.5) * 0.5 = 1.5), sign
    // index 127 (all eight negative) for its first 8 values, row 0 (4s).
    let aux = (1u32 << 28) | 0x7F;
    let v = decode(18, &[(0, &TWO), (66, &aux.to_le_bytes())]);
    assert_eq!(
        v[..9],
        [-6.0, -6.0, -6.0, -6.0, -6.0, -6.0, -6.0, -6.0, 6.0]
    );
    assert_eq!(v[32], 2.0); // (2 * 0.5) * 0.5 * 4
    // IQ3_S: scales 0 and 1 (db 1 and 3), sign of value 0, index 256 for
    // group of four 1 (its qh bit).
    let v = decode(
        21,
        &[(0, &ONE), (66, &[0x02]), (74, &[0x01]), (106, &[0x10])],
    );
    assert_eq!(v[..4], [-1.0, 1.0, 1.0, 1.0]);
    assert_eq!(v[4], f32::from(IQ3S_GRID[256] as u8));
    assert_eq!(v[32], 3.0);
}

#[test]
fn iq1_types_shift_the_ternary_grid_by_an_eighth() {
    // IQ1_S: sub-block 0 scale 2 (dl 5), delta negative; row 0 is all -1.
    let qh = 0x8000_u16 | (2 << 12);
    let v = decode(19, &[(0, &ONE), (34, &qh.to_le_bytes())]);
    assert_eq!(v[0], 5.0 * (-1.0 - 0.125));
    assert_eq!(v[32], -1.0 + 0.125);
    // IQ1_M: d = 1.0 (0x3C00) from the scale words' top nibbles, scale 0
    // = 1 (dl 3), group 0's delta negative.
    let scales = [0x0001_u16, 0, 0xC000, 0x3000];
    let sc: Vec<u8> = scales.iter().flat_map(|w| w.to_le_bytes()).collect();
    let v = decode(29, &[(32, &[0x08]), (48, &sc)]);
    assert_eq!(v[0], 3.0 * (-1.0 - 0.125));
    assert_eq!(v[8], 3.0 * (-1.0 + 0.125));
    assert_eq!(v[16], -1.0 + 0.125);
}

#[test]
fn iq4_types_look_up_the_non_linear_values() {
    let v = decode(20, &[(0, &HALF), (2, &[0x80])]);
    assert_eq!((v[0], v[16], v[1]), (-63.5, 0.5, -63.5));
    // IQ4_XS: sub-block 0 scale (1 | 3 << 4) - 32 = 17, sub-block 1 2 - 32.
    let v = decode(23, &[(0, &ONE), (2, &[0x03]), (4, &[0x21])]);
    assert_eq!((v[0], v[32], v[64]), (-2159.0, 3810.0, 4064.0));
}

#[test]
fn ternary_types_keep_the_sign_of_zero() {
    // TQ1_0, d -1: byte 128 is three-trit 1 (q 0) at every power, byte 0
    // is q -1.
    let v = decode(34, &[(0, &[128]), (52, &MINUS_ONE)]);
    assert_eq!(
        bits(&[v[0], v[32], v[1], v[240]]),
        bits(&[-0.0, -0.0, 1.0, 1.0])
    );
    // The trits 2, 1, 0, 2, 1 (the first value's most significant), 196,
    // stored as (196 * 256 + 242) / 243 = 207.
    let v = decode(34, &[(0, &[207]), (52, &ONE)]);
    let trits: Vec<f32> = (0..5).map(|k| v[32 * k]).collect();
    assert_eq!(trits, [1.0, 0.0, -1.0, 1.0, 0.0]);
    // TQ2_0: codes 0, 1, 2, 3 in bit pairs of byte 0 → values 0, 32, 64, 96.
    let v = decode(35, &[(0, &[0xE4]), (64, &TWO)]);
    assert_eq!(
        [v[0], v[32], v[64], v[96], v[1]],
        [-2.0, 0.0, 2.0, 4.0, -2.0]
    );
}

#[test]
fn fp4_scales_decode_as_gguf_py_decodes_them() {
    assert_eq!(e8m0_half(0).to_bits(), 0x0020_0000);
    assert_eq!(e8m0_half(1).to_bits(), 0x0040_0000);
    assert_eq!(e8m0_half(2), 2f32.powi(-126));
    assert_eq!(e8m0_half(128), 1.0);
    assert_eq!(e8m0_half(255), 2f32.powi(127));
    // ue4m3, halved; the top bit ignored; 0 and 0x7F give 0 (0xFF does not).
    assert_eq!(ue4m3_half(0x38), 0.5);
    assert_eq!(ue4m3_half(0xB8), 0.5);
    assert_eq!(ue4m3_half(0x01), 2f32.powi(-10));
    assert_eq!(ue4m3_half(0x7E), 224.0);
    assert_eq!(ue4m3_half(0xFF), 240.0);
    assert_eq!(
        bits(&[ue4m3_half(0), ue4m3_half(0x7F), ue4m3_half(0x80)]),
        [0, 0, 0]
    );
}

#[test]
fn fp4_types_scale_the_doubled_e2m1_values() {
    let v = decode(39, &[(0, &[128]), (1, &[0xF7])]);
    assert_eq!(bits(&[v[0], v[16], v[1]]), bits(&[12.0, -12.0, 0.0]));
    // NVFP4: sub-block scales 0.5, 0 (code 0x7F), 0.5, 2^-10.
    let v = decode(
        40,
        &[(0, &[0x38, 0x7F, 0xB8, 0x01]), (4, &[0x97]), (12, &[0x09])],
    );
    assert_eq!((v[0], v[8], v[1]), (6.0, -0.5, 0.0));
    assert_eq!(bits(&[v[16], v[17]]), bits(&[-0.0, 0.0])); // 0 * -1, 0 * 0
    assert_eq!(v[63], 0.0);
}

#[test]
fn types_gguf_py_cannot_decode_and_partial_blocks_are_errors() {
    let mut out = Vec::new();
    for id in [9, 15, 41] {
        let t = GgmlType::from_id(id).expect("a type");
        let b = vec![0u8; t.block().1 as usize];
        let e = dequantize(t, &b, &mut out).expect_err("no decoder");
        assert!(e.contains("gguf-py has no decoder"), "{e}");
    }
    let (t, b) = block(40, &[]);
    assert!(dequantize(t, &b[1..], &mut out).is_err());
    let f32_type = GgmlType::from_id(0).expect("F32");
    assert!(dequantize(f32_type, &[0; 4], &mut out).is_err());
    assert!(out.is_empty());
}
