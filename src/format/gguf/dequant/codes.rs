//! What a block type has besides its values: the range of its elements'
//! integer codes ([`code_range`]; the grid types have none), where they
//! are whole bit fields of each block ([`code_plane`]), what each code
//! stands for where the codes index a table of values ([`code_values`]),
//! and the scales stored in each block ([`scales_of`]). Types are told
//! apart by id (GGUF.md, "Types"), which is cheaper than by name.

use super::f16;
use super::grids::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::iq1::iq1_m_d;
use super::nonlinear::{e8m0_half, ue4m3_half};
use crate::format::gguf::types::GgmlType;

/// The lowest and highest integer code of an element of type `t`, as its
/// decoder hands them on: the stored nibble (Q4_0, Q4_1, Q4_K; IQ4_NL and
/// IQ4_XS an index into `kvalues_iq4nl`; MXFP4 and NVFP4 the e2m1 code),
/// the stored 5-bit code (Q5_0, Q5_1, Q5_K) or 2-bit code (Q2_K), the
/// signed integer its formula multiplies (Q8_0; Q3_K, Q6_K less their
/// offset; TQ1_0 and TQ2_0 less 1). `None` for the grid types, whose
/// elements have no one code of their own (a code indexes a row of a grid,
/// signs and scales apart), and for the types that are not decoded.
pub fn code_range(t: GgmlType) -> Option<(i32, i32)> {
    Some(match t.id() {
        2 | 3 | 12 | 20 | 23 | 39 | 40 => (0, 15),
        6 | 7 | 13 => (0, 31),
        8 => (-128, 127),
        10 => (0, 3),
        11 => (-4, 3),
        14 => (-32, 31),
        34 => (-1, 1),
        // Its 2-bit codes less 1: the code 3 (no quantizer writes it)
        // decodes as 2.
        35 => (-1, 2),
        _ => return None,
    })
}

/// Where every element's code is one whole bit field of its block: each
/// `width`-bit field of the bytes `start..end` of every block is one
/// element's code (8 bits: the signed byte; fewer: the field plus
/// `offset`), in some order. The types whose codes are split over two
/// places (Q5_*, Q3_K, Q6_K) or are not bit fields (TQ1_0) have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodePlane {
    /// The block's bytes that hold the codes.
    pub start: usize,
    /// Their end.
    pub end: usize,
    /// Bits per code: 2, 4 or 8.
    pub width: u32,
    /// Added to a field of fewer than 8 bits.
    pub offset: i32,
}

impl CodePlane {
    /// The codes byte `b` holds, as many as it has fields.
    pub fn codes(self, b: u8) -> impl Iterator<Item = i32> {
        let mask = (1u32 << self.width) - 1;
        (0..8 / self.width).map(move |k| {
            if self.width == 8 {
                i32::from(b as i8)
            } else {
                ((u32::from(b) >> (k * self.width)) & mask) as i32 + self.offset
            }
        })
    }
}

/// The [`CodePlane`] of type `t`, if its codes are one.
pub fn code_plane(t: GgmlType) -> Option<CodePlane> {
    let (start, end, width, offset) = match t.id() {
        2 | 20 => (2, 18, 4, 0),
        3 => (4, 20, 4, 0),
        8 => (2, 34, 8, 0),
        10 => (16, 80, 2, 0),
        12 => (16, 144, 4, 0),
        23 => (8, 136, 4, 0),
        35 => (0, 64, 2, -1),
        39 => (1, 17, 4, 0),
        40 => (4, 36, 4, 0),
        _ => return None,
    };
    Some(CodePlane {
        start,
        end,
        width,
        offset,
    })
}

/// For the types whose codes index a table of values, the table (before
/// scaling), as gguf-py multiplies it: `kvalues_iq4nl` (IQ4_NL, IQ4_XS),
/// `kvalues_mxfp4`, the doubled e2m1 values (MXFP4, NVFP4, whose scales are
/// halved to match).
pub fn code_values(t: GgmlType) -> Option<&'static [i8; 16]> {
    match t.id() {
        20 | 23 => Some(&KVALUES_IQ4NL),
        39 | 40 => Some(&KVALUES_MXFP4),
        _ => None,
    }
}

/// How many scales [`scales_of`] gives per block of type `t`: NVFP4's four
/// sub-block scales, one `d` for every other decoded type, 0 for the rest.
pub fn scales_per_block(t: GgmlType) -> u64 {
    match t.id() {
        40 => 4,
        2 | 3 | 6 | 7 | 8 | 10..=14 | 16..=23 | 29 | 34 | 35 | 39 => 1,
        _ => 0,
    }
}

/// The main scales of a block of type `t` (the first
/// [`scales_per_block`] of the four), as its decoder multiplies them: the
/// f16 `d` (of the K-quants the super-block's `d`, not `dmin`; IQ1_M's
/// assembled from its scale words), MXFP4's e8m0 scale as the power of two
/// gguf-py multiplies by (halved, beside the doubled e2m1 values), NVFP4's
/// four ue4m3 sub-block scales (halved likewise). `None` for a short block
/// or a type without them.
pub fn scales_of(t: GgmlType, b: &[u8]) -> Option<[f32; 4]> {
    if (b.len() as u64) < t.block().1 {
        return None;
    }
    let d = |at: usize| Some([f16(b, at), 0.0, 0.0, 0.0]);
    match t.id() {
        10 => d(80),
        11 => d(108),
        14 => d(208),
        34 => d(52),
        35 => d(64),
        29 => Some([iq1_m_d(b), 0.0, 0.0, 0.0]),
        39 => Some([e8m0_half(b[0]), 0.0, 0.0, 0.0]),
        40 => Some(std::array::from_fn(|s| ue4m3_half(b[s]))),
        _ if scales_per_block(t) == 1 => d(0),
        _ => None,
    }
}
