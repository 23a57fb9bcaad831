//! The ternary types TQ1_0 and TQ2_0: 256 values `d * q`, q (the code) in
//! -1, 0, 1 (TQ2_0's 2-bit codes could also say 2).

use super::{Sink, f16, table_of};

/// The trit of a TQ1_0 byte `x` at power-of-three `p` (1, 3, 9, 27, 81):
/// `x * p` modulo 256, scaled to 0..3 by `(v * 3) >> 8`, less 1.
fn trit(x: u8, p: u8) -> i8 {
    let v = u16::from(x.wrapping_mul(p));
    ((v * 3) >> 8) as i8 - 1
}

/// A TQ1_0 block: 48 bytes of five trits each (32 bytes for values 0..160,
/// 16 for 160..240, by power of three, then byte), 4 bytes of four trits
/// (values 240..256), f16 `d`.
pub(super) fn tq1_0(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 52);
    let runs: [(&[u8], &[u8]); 3] = [
        (&b[..32], &[1, 3, 9, 27, 81]),
        (&b[32..48], &[1, 3, 9, 27, 81]),
        (&b[48..52], &[1, 3, 9, 27]),
    ];
    for (bytes, powers) in runs {
        for &p in powers {
            for &x in bytes {
                let q = trit(x, p);
                out.one(d * f32::from(q), i32::from(q));
            }
        }
    }
}

/// A TQ2_0 block: 64 bytes of four 2-bit codes (q + 1) each, value
/// `128 * half + 32 * pair + byte` in bit pair `pair` of byte
/// `32 * half + byte`; f16 `d`.
pub(super) fn tq2_0(b: &[u8], out: &mut impl Sink) {
    let d = f16(b, 64);
    let t = table_of(4, |q| d * f32::from(q as i8 - 1));
    for half in b[..64].chunks_exact(32) {
        for shift in [0, 2, 4, 6] {
            out.table(&t, half, shift, 0x03, -1);
        }
    }
}
