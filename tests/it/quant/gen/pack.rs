//! Bit packing (QUANT.md conventions) and little-endian bytes.

/// Codes of `bits` bits as an LSB-first bitstream: code `i` in bits
/// `[i*bits, (i+1)*bits)` of the concatenated words, word 0 lowest; a code
/// crossing a word boundary takes its low bits from word `j` and its high
/// bits from word `j+1`. `ceil(len*bits/32)` words, the padding bits 0.
pub fn pack_stream(codes: &[u32], bits: u32) -> Vec<u32> {
    assert!((1..=32).contains(&bits));
    let total = codes.len() * bits as usize;
    let mut words = vec![0u32; total.div_ceil(32)];
    for (i, &c) in codes.iter().enumerate() {
        assert!(
            bits == 32 || c >> bits == 0,
            "code {c} does not fit in {bits} bits"
        );
        let at = i * bits as usize;
        let (w, s) = (at / 32, (at % 32) as u32);
        words[w] |= c << s;
        if s + bits > 32 {
            words[w + 1] |= c >> (32 - s);
        }
    }
    words
}

/// The padded packing of compressed-tensors < 0.17: `floor(32/bits)` codes
/// per word, code `j` of a word at shift `bits*j`, the top bits and the
/// codes past the end 0. `ceil(len/floor(32/bits))` words.
pub fn pack_padded(codes: &[u32], bits: u32) -> Vec<u32> {
    let per = (32 / bits) as usize;
    codes
        .chunks(per)
        .map(|chunk| {
            chunk.iter().enumerate().fold(0u32, |w, (j, &c)| {
                assert!(c >> bits == 0, "code {c} does not fit in {bits} bits");
                w | c << (bits as usize * j)
            })
        })
        .collect()
}

/// 4-bit codes two per byte, element 2j in the LOW nibble (MXFP4, NVFP4,
/// gpt-oss, MLX). An odd count leaves the last high nibble 0.
pub fn nibbles_low_first(codes: &[u8]) -> Vec<u8> {
    codes
        .chunks(2)
        .map(|p| p[0] | p.get(1).copied().unwrap_or(0) << 4)
        .collect()
}

/// 4-bit codes two per byte, element 2j in the HIGH nibble (bitsandbytes).
pub fn nibbles_high_first(codes: &[u8]) -> Vec<u8> {
    codes
        .chunks(2)
        .map(|p| p[0] << 4 | p.get(1).copied().unwrap_or(0))
        .collect()
}

/// FP6 codes, 4 per 3 bytes: a little-endian 24-bit word with code j at
/// bits 6j..6j+5 (compressed-tensors mxfp6).
pub fn pack_fp6(codes: &[u8]) -> Vec<u8> {
    assert!(codes.len().is_multiple_of(4), "FP6 packs 4 codes at a time");
    codes
        .chunks(4)
        .flat_map(|c| {
            let w = (0..4).fold(0u32, |w, j| w | u32::from(c[j] & 0x3F) << (6 * j));
            let b = w.to_le_bytes();
            [b[0], b[1], b[2]]
        })
        .collect()
}

pub fn u32_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// F16 bytes of values that are already F16 numbers (panics otherwise).
pub fn f16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| {
            let h = half::f16::from_f32(v);
            assert!(h.to_f32() == v || v.is_nan(), "{v} is not an F16 number");
            h.to_le_bytes()
        })
        .collect()
}

/// BF16 bytes of values that are already BF16 numbers (panics otherwise).
pub fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| {
            let h = half::bf16::from_f32(v);
            assert!(h.to_f32() == v || v.is_nan(), "{v} is not a BF16 number");
            h.to_le_bytes()
        })
        .collect()
}

/// Bytes of values already representable in `dtype` ("F16", "BF16", "F32").
pub fn float_bytes(dtype: &str, values: &[f32]) -> Vec<u8> {
    match dtype {
        "F16" => f16_bytes(values),
        "BF16" => bf16_bytes(values),
        "F32" => f32_bytes(values),
        other => panic!("no float bytes for {other}"),
    }
}
