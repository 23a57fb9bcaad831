//! The F32, F16 and BF16 scans, the linear histograms, and the F32 block
//! with its prefixes counted in one loop: every copy against the portable
//! code.

use super::*;

/// A fused F32 scan and count ([`x86::scan_count_f32`]).
#[cfg(target_arch = "x86_64")]
type FusedCopy = fn(&[u8], &[u8], u32, f64, &[u8], &mut kernel::Tally<'_>) -> F32Lanes;

/// The fused copies this CPU has the features of.
#[cfg(target_arch = "x86_64")]
fn fused_copies() -> Vec<FusedCopy> {
    let mut copies: Vec<FusedCopy> = Vec::new();
    if avx2() {
        // SAFETY: the CPU has AVX2, checked just above.
        copies.push(|b, m, tb, x0, a, t| unsafe { x86::scan_count_f32(b, m, tb, x0, a, t) });
    }
    if avx512() {
        // SAFETY: the CPU has these AVX-512 subsets, checked just above.
        copies.push(|b, m, tb, x0, a, t| unsafe { x86::scan_count_f32_512(b, m, tb, x0, a, t) });
    }
    copies
}

#[test]
fn the_block_and_its_prefixes_in_one_loop_agree_bit_for_bit() {
    let mut idx = [0u32; kernel::PART];
    let lengths = [
        1,
        3,
        7,
        8,
        9,
        63,
        64,
        65,
        127,
        128,
        300,
        2047,
        BLOCK,
        BLOCK + 9,
    ];
    for (seed, &n) in lengths.iter().enumerate() {
        for specials in [false, true] {
            let mut vals = values(seed as u64 + 11, n + 3, specials);
            // Half the blocks with no zero or subnormal (the scan's
            // second loop is skipped there).
            if seed % 2 == 0 {
                for x in &mut vals {
                    if x.abs() < f32::MIN_POSITIVE {
                        *x = 1.5;
                    }
                }
            }
            let all = encode(Wide::F32, &vals, false);
            // Unaligned starts, and an `ahead` that is the next bytes.
            for offset in 0..4 {
                let bytes = &all[4 * (offset % 3)..][..4 * n];
                let ahead = all.get(4 * n + offset..).unwrap_or(&[]);
                let ahead = ahead.get(..ahead.len() / 4 * 4).unwrap_or(&[]);
                for tiny_bits in [0x0080_0000, 0x3880_0000] {
                    let mut one = (Specials::default(), Moments::default());
                    let a = tally_of(|t| {
                        one = block_and_prefixes_f32(bytes, ahead, tiny_bits, &mut idx, t);
                    });
                    // Every fused copy this CPU can run, called as the
                    // dispatch calls them (for a block: a longer run is
                    // split, and counted apart).
                    #[cfg(target_arch = "x86_64")]
                    for copy in fused_copies().into_iter().filter(|_| n <= BLOCK) {
                        let mut own = (Specials::default(), Moments::default());
                        let c = tally_of(|t| {
                            own = kernel::block_wide_by(
                                Wide::F32,
                                bytes,
                                tiny_bits,
                                |_, groups, tiny_bits, x0| {
                                    let more = bytes.get(groups.len()..).unwrap_or(&[]);
                                    copy(groups, more, tiny_bits, x0, ahead, t)
                                },
                                kernel::scan_groups,
                            );
                        });
                        assert_eq!(own.0, one.0);
                        assert_eq!(format!("{:?}", own.1), format!("{:?}", one.1));
                        assert!(c == a, "a fused copy's counts differ (n {n})");
                    }
                    let mut two = (Specials::default(), Moments::default());
                    let b = tally_of(|t| {
                        two = kernel::block_wide(Wide::F32, bytes, tiny_bits, kernel::scan_groups);
                        kernel::count_prefixes_f32(bytes, &[], &mut idx, t);
                    });
                    let what = format!("n {n}, specials {specials}, offset {offset}");
                    assert_eq!(one.0, two.0, "{what}");
                    assert_eq!(format!("{:?}", one.1), format!("{:?}", two.1), "{what}");
                    assert!(a == b, "counts differ: {what}");
                    assert_eq!(a.iter().sum::<u64>(), n as u64, "{what}");
                }
            }
        }
    }
}

#[test]
fn both_copies_agree_bit_for_bit() {
    let cases = [
        (1, BLOCK, false),
        (2, 1000, true),
        (3, 3 * BLOCK + 5, true),
        (4, 13, false),
    ];
    for (seed, n, specials) in cases {
        let vals = values(seed, n, specials);
        for kind in [Wide::F32, Wide::F16, Wide::BF16] {
            for raw in [false, true] {
                let bytes = encode(kind, &vals, raw);
                for tiny_bits in [0x0080_0000, 0x3880_0000] {
                    let (sp_a, m_a) = block_wide(kind, &bytes, tiny_bits);
                    let (sp_b, m_b) =
                        kernel::block_wide(kind, &bytes, tiny_bits, kernel::scan_groups);
                    assert_eq!(sp_a, sp_b, "{kind:?} {seed}");
                    assert_eq!(format!("{m_a:?}"), format!("{m_b:?}"));
                }
                let whole = bytes.len() / (8 * kind.width()) * 8 * kind.width();
                let groups = bytes
                    .get(..whole.min(8 * kind.width() * 256))
                    .unwrap_or(&[]);
                assert_eq!(
                    format!("{:?}", scan_groups(kind, groups, 0x0080_0000, 0.25)),
                    format!("{:?}", kernel::scan_groups(kind, groups, 0x0080_0000, 0.25)),
                    "{kind:?} {seed}"
                );
            }
        }
        let bins = FloatBins::new(-2.0, 3.0, 256);
        let mut a = vec![0u32; 4 * 256];
        let mut b = vec![0u32; 4 * 256];
        for part in vals.chunks(BLOCK) {
            histogram_block(part, &bins, &mut a);
            kernel::histogram_block(part, &bins, &mut b);
        }
        assert_eq!(a, b);
        let guess = bins.f32_guess().expect("f32 guesses for these bins");
        let mut a = vec![0u32; 4 * 257];
        let mut b = vec![0u32; 4 * 257];
        let bytes = encode(Wide::F32, &vals, false);
        for part in bytes.chunks(4 * BLOCK) {
            histogram_f32(part, &bins, &guess, &mut a);
            kernel::histogram_f32(part, &bins, &guess, &mut b);
        }
        // The scratch counters differ by design; the bins may not.
        for t in 0..4 {
            assert_eq!(a[t * 257..t * 257 + 256], b[t * 257..t * 257 + 256]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn each_vector_copy_of_the_f32_scan_agrees() {
    let vals = values(11, 4 * BLOCK, true);
    for specials in [false, true] {
        let vals: Vec<f32> = if specials {
            vals.clone()
        } else {
            vals.iter().copied().filter(|x| x.is_finite()).collect()
        };
        let bytes = encode(Wide::F32, &vals, false);
        let whole = bytes.len() / 32 * 32;
        let groups = &bytes[..whole];
        for tiny in [0x0080_0000, 0x3880_0000] {
            let portable = format!("{:?}", kernel::scan_groups(Wide::F32, groups, tiny, 0.25));
            if avx2() {
                // SAFETY: the CPU has AVX2, checked on the line above.
                let v = unsafe { x86::scan_f32(groups, tiny, 0.25) };
                assert_eq!(format!("{v:?}"), portable);
            }
            if avx512() {
                // SAFETY: the CPU has these AVX-512 subsets, checked above.
                let v = unsafe { x86::scan_f32_512(groups, tiny, 0.25) };
                assert_eq!(format!("{v:?}"), portable);
            }
        }
    }
}
