//! The loops over `(value, count)` pairs: every vector copy against the
//! portable loop, and the portable loops against the elements the pairs
//! stand for.

use super::*;
use crate::stats::kernel::Keyed;

/// Counts of every size a run gives, zeros among them, and a few large.
fn counts(seed: u64, n: usize) -> Vec<u32> {
    values(seed, n, false)
        .iter()
        .enumerate()
        .map(|(i, x)| match i % 11 {
            0 => 0,
            1 => 300 + (x.to_bits() % 1000),
            _ => x.to_bits() % 33,
        })
        .collect()
}

#[test]
fn pair_scans_agree_bit_for_bit() {
    type Scan = fn(&[f32], &[u32], u32, f32) -> kernel::PairLanes;
    let mut copies: Vec<Scan> = vec![super::super::pairs::pair_scan()];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: only called on this CPU, which has AVX2 (checked).
            copies.push(|v, c, t, x| unsafe { x86::scan_pairs_256(v, c, t, x) });
        }
        if avx512() {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            copies.push(|v, c, t, x| unsafe { x86::scan_pairs_512(v, c, t, x) });
        }
    }
    for (seed, n) in [(1, 8), (2, 64), (3, 1024), (4, 2048)] {
        for specials in [false, true] {
            let vals = values(seed, n, specials);
            let counts = counts(seed + 9, n);
            let want = kernel::scan_pairs(&vals, &counts, 0x0080_0000, 0.25);
            for copy in &copies {
                let got = copy(&vals, &counts, 0x0080_0000, 0.25);
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "{n} {specials}");
            }
        }
    }
}

#[test]
fn pairs_count_the_prefixes_of_their_elements() {
    type ScanCount =
        fn(&[f32], &[u32], u32, f32, &mut [u32], &mut kernel::Tally<'_>) -> kernel::PairLanes;
    let mut copies: Vec<(&str, ScanCount)> = vec![
        ("portable", kernel::scan_count_pairs),
        ("dispatched", super::super::pairs::pair_scan_count()),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: only called on this CPU, which has AVX2 (checked).
            copies.push(("AVX2", |v, c, t, x, i, tally| unsafe {
                x86::scan_count_pairs_256(v, c, t, x, i, tally)
            }));
        }
        if avx512() {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            copies.push(("AVX-512", |v, c, t, x, i, tally| unsafe {
                x86::scan_count_pairs_512(v, c, t, x, i, tally)
            }));
        }
    }
    // Whole groups of eight and not; specials among the values.
    for n in [1500, 1503] {
        let vals = values(5, n, true);
        let counts = counts(6, n);
        let mut idx = vec![0u32; n];
        let repeated: Vec<f32> = vals
            .iter()
            .zip(&counts)
            .flat_map(|(&v, &c)| std::iter::repeat_n(v, c as usize))
            .collect();
        let want = tally_of(|t| {
            for &v in &repeated {
                t.add(v.prefix());
            }
        });
        let portable = tally_of(|t| kernel::count_pair_prefixes(&vals, &counts, &mut idx, t));
        assert!(portable == want, "the portable loop");
        let whole = n / 8 * 8;
        let lanes = kernel::scan_pairs(&vals[..whole], &counts[..whole], 0x0080_0000, 0.25);
        for (name, copy) in &copies {
            let mut got_lanes = None;
            let got = tally_of(|t| {
                got_lanes = Some(copy(&vals, &counts, 0x0080_0000, 0.25, &mut idx, t));
            });
            assert!(got == want, "{name} {n}: the prefixes");
            assert_eq!(
                format!("{got_lanes:?}"),
                format!("{:?}", Some(lanes)),
                "{name} {n}: the lanes"
            );
        }
    }
}

/// Whole Q4_K blocks into pairs: the copy for this CPU's vectors gives the
/// portable copy's values and counts, bit for bit.
#[test]
fn q4_k_pairs_agree_bit_for_bit() {
    let blocks: Vec<u8> = values(9, 8 * 144 / 4 + 1, true)
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .take(8 * 144)
        .collect();
    let (mut want_v, mut want_c, mut want_codes) = (vec![0f32; 1024], vec![0u32; 1024], [0; 16]);
    super::super::pairs::q4_k_portable(&blocks, &[], &mut want_v, &mut want_c, &mut want_codes);
    assert_eq!(want_c.iter().sum::<u32>(), 8 * 256, "every element counted");
    let mut by_code = [0u32; 16];
    for (i, &n) in want_c.iter().enumerate() {
        by_code[i % 16] += n;
    }
    assert_eq!(want_codes, by_code, "value q of every table is code q");
    let (mut v, mut c, mut codes) = (vec![0f32; 1024], vec![0u32; 1024], [0; 16]);
    (super::super::pairs::pair_kernels().q4_k)(&blocks, &blocks, &mut v, &mut c, &mut codes);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&v), bits(&want_v), "dispatched values");
    assert_eq!((&c, codes), (&want_c, want_codes), "dispatched counts");
    #[cfg(target_arch = "x86_64")]
    if avx2() && std::arch::is_x86_feature_detected!("popcnt") {
        let mut codes = [0; 16];
        // SAFETY: this CPU has AVX2 and POPCNT (checked).
        unsafe { x86::q4_k_pairs_256(&blocks, &blocks, &mut v, &mut c, &mut codes) };
        assert_eq!(bits(&v), bits(&want_v), "AVX2 values");
        assert_eq!((&c, codes), (&want_c, want_codes), "AVX2 counts");
    }
}

#[test]
fn nibbles_are_counted_alike() {
    let bytes: Vec<u8> = values(7, 200, true)
        .iter()
        .map(|x| (x.to_bits() >> 7) as u8)
        .collect();
    for len in [0, 1, 15, 16, 17, 31, 32, 33, 48, 64, 100, 200] {
        let b = &bytes[..len];
        let mut want = ([0u32; 16], [0u32; 16]);
        for &x in b {
            want.0[usize::from(x & 15)] += 1;
            want.1[usize::from(x >> 4)] += 1;
        }
        assert_eq!(kernel::nibble_counts(b), want, "portable, {len}");
        assert_eq!(nibble_counts(b), want, "dispatched, {len}");
        #[cfg(target_arch = "x86_64")]
        if avx2() && std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: this CPU has AVX2 and POPCNT (checked).
            assert_eq!(unsafe { x86::nibble_counts_256(b) }, want, "AVX2, {len}");
        }
    }
}

#[test]
fn marked_codes_agree() {
    let vals = values(8, 16 * 64, true);
    let buckets = tally_of(|t| {
        for &v in &vals {
            t.add(v.prefix());
        }
    });
    let words = every_third(&buckets);
    let Ok(marks) = <&[u64; kernel::MARK_WORDS]>::try_from(words.as_slice()) else {
        panic!("a bitmap of every bucket");
    };
    let mut seen = 0;
    for t in vals.chunks_exact(16) {
        let want = t.iter().enumerate().fold(0u16, |m, (q, v)| {
            m | u16::from(kernel::marked(marks, v.prefix())) << q
        });
        seen += want.count_ones();
        assert_eq!(kernel::marked_codes(t, marks), want);
        assert_eq!(marked_codes(t, marks), want);
        let Ok(t16) = <&[f32; 16]>::try_from(t) else {
            continue;
        };
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                // SAFETY: this CPU has AVX2 (checked).
                assert_eq!(unsafe { x86::marked_codes_256(t16, marks) }, want, "AVX2");
            }
            if avx512() {
                // SAFETY: this CPU has AVX-512 (checked).
                assert_eq!(
                    unsafe { x86::marked_codes_512(t16, marks) },
                    want,
                    "AVX-512"
                );
            }
        }
        let _ = t16;
    }
    assert!(seen > 0 && seen < 1024, "some values marked, some not");
    // A table of fewer than 16 values.
    assert_eq!(
        marked_codes(&vals[..3], marks),
        kernel::marked_codes(&vals[..3], marks)
    );
}
