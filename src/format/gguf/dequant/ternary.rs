//! The ternary types TQ1_0 and TQ2_0: 256 values `d * q`, q in -1, 0, 1.

use super::f16;

/// The trit of a TQ1_0 byte `x` at power-of-three `p` (1, 3, 9, 27, 81):
/// `x * p` modulo 256, scaled to 0..3 by `(v * 3) >> 8`, less 1.
fn trit(x: u8, p: u8) -> f32 {
    let v = u16::from(x.wrapping_mul(p));
    f32::from(((v * 3) >> 8) as i8 - 1)
}

/// A TQ1_0 block: 48 bytes of five trits each (32 bytes for values 0..160,
/// 16 for 160..240, by power of three, then byte), 4 bytes of four trits
/// (values 240..256), f16 `d`.
pub(super) fn tq1_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16(b, 52);
    let runs: [(&[u8], &[u8]); 3] = [
        (&b[..32], &[1, 3, 9, 27, 81]),
        (&b[32..48], &[1, 3, 9, 27, 81]),
        (&b[48..52], &[1, 3, 9, 27]),
    ];
    for (bytes, powers) in runs {
        for &p in powers {
            out.extend(bytes.iter().map(|&x| d * trit(x, p)));
        }
    }
}

/// A TQ2_0 block: 64 bytes of four 2-bit codes (q + 1) each, value
/// `128 * half + 32 * pair + byte` in bit pair `pair` of byte
/// `32 * half + byte`; f16 `d`.
pub(super) fn tq2_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16(b, 64);
    for half in b[..64].chunks_exact(32) {
        for shift in [0, 2, 4, 6] {
            out.extend(
                half.iter()
                    .map(|&x| d * f32::from(((x >> shift) & 3) as i8 - 1)),
            );
        }
    }
}
