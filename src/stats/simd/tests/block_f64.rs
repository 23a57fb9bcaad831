//! The f64 block summary, alone and with its prefixes counted in one loop:
//! every copy against the portable code.

use super::*;

#[test]
fn every_copy_of_the_f64_block_agrees() {
    type Copy64 = fn(&[f64], f64) -> (Specials, Moments);
    let mut copies: Vec<(&str, Copy64)> = vec![("dispatch", block_f64)];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            copies.push(("avx2", |v, sn| {
                // SAFETY: only called on this CPU, which has AVX2 (checked).
                kernel::block_f64_with(v, sn, |p, s| unsafe { x86::block_f64_256(p, s) })
            }));
        }
        if avx512() {
            copies.push(("avx512", |v, sn| {
                // SAFETY: only called on this CPU, which has AVX-512 (checked).
                kernel::block_f64_with(v, sn, |p, s| unsafe { x86::block_f64_512(p, s) })
            }));
            copies.push(("avx512 in one pass", |v, sn| {
                kernel::block_f64_with(v, sn, |p, s| {
                    // SAFETY: as above.
                    unsafe { x86::block_f64_fused_512(p, s) }
                        .unwrap_or_else(|| kernel::block_f64(p, s))
                })
            }));
            // The one pass takes the blocks it should.
            let vals = values_f64(1, BLOCK, false, 0);
            // SAFETY: as above.
            assert!(unsafe { x86::block_f64_fused_512(&vals, f64::MIN_POSITIVE) }.is_some());
            let mut with_nan = vals.clone();
            with_nan[BLOCK - 3] = f64::NAN;
            // SAFETY: as above.
            assert!(unsafe { x86::block_f64_fused_512(&with_nan, 1e-300) }.is_none());
        }
    }
    let mut seed = 3;
    // Magnitudes that need no scaling, and ones beyond 2^±400 that do.
    for magnitude in [0, -20, 700, -700, -1060] {
        for specials in [false, true] {
            for n in [0, 1, 7, 8, 9, 15, 16, 17, 2047, 2048, 2049, 3 * BLOCK + 5] {
                seed += 2;
                let vals = values_f64(seed, n, specials, magnitude);
                for sn in [f64::MIN_POSITIVE, f64::from(f32::MIN_POSITIVE)] {
                    let portable = format!("{:?}", kernel::block_f64(&vals, sn));
                    for (name, copy) in &copies {
                        let got = format!("{:?}", copy(&vals, sn));
                        assert_eq!(got, portable, "{name}, {n} values of 2^{magnitude}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_f64_block_and_its_prefixes_in_one_loop_agree_bit_for_bit() {
    let mut idx = [0u32; kernel::PART];
    let mut seed = 5;
    for magnitude in [0, 700, -1060] {
        for specials in [false, true] {
            for n in [
                0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 2047, BLOCK,
            ] {
                seed += 2;
                let all = values_f64(seed, n + 40, specials, magnitude);
                let (vals, ahead) = all.split_at(n);
                let sn = f64::MIN_POSITIVE;
                let mut one = (Specials::default(), Moments::default());
                let a = tally_of(|t| {
                    one = block_and_prefixes_f64(vals, ahead, sn, &mut idx, t);
                });
                let mut two = (Specials::default(), Moments::default());
                let b = tally_of(|t| {
                    two = kernel::block_f64(vals, sn);
                    kernel::count_prefixes(vals, &[], &mut idx, t);
                });
                let what = format!("{n} values of 2^{magnitude}, specials {specials}");
                assert_eq!(format!("{one:?}"), format!("{two:?}"), "{what}");
                assert!(a == b, "counts differ: {what}");
                assert_eq!(a.iter().sum::<u64>(), n as u64, "{what}");
            }
        }
    }
}
