//! Unit tests of the kernels: specials and moments of blocks (extremes
//! scaled), histogram binning checked against the edges, and code counting.

use super::histogram::UNSURE;
use super::*;
use crate::dtype::decode::BitOrder;
use crate::stats::bins::FloatBins;

#[test]
fn f32_blocks_split_specials_off() {
    let vals = [
        1.0f32,
        f32::NAN,
        -2.0,
        f32::INFINITY,
        0.0,
        -0.0,
        1e-40,
        f32::NEG_INFINITY,
        3.0,
    ];
    let mut buf = [0u8; 64];
    let bytes = f32_bytes(&vals, &mut buf);
    let (sp, m) = block_wide(Wide::F32, bytes, 0x0080_0000, scan_groups);
    assert_eq!(
        (sp.nan, sp.pos_inf, sp.neg_inf, sp.zeros, sp.subnormals),
        (1, 1, 1, 2, 1)
    );
    assert_eq!((sp.min, sp.max), (-2.0, 3.0));
    assert_eq!(m.count(), 6);
    let f = m.figures().expect("values");
    let want = (1.0 - 2.0 + 3.0 + f64::from(1e-40f32)) / 6.0;
    assert!((f.mean - want).abs() < 1e-16);
    let (sp, m) = block_wide(Wide::F32, &[], 0x0080_0000, scan_groups);
    assert_eq!((sp.min, m.count()), (f64::INFINITY, 0));
}

#[test]
fn f64_blocks_scale_extremes() {
    let vals = [f64::MAX, f64::MAX, -f64::MAX, 1.0];
    let (sp, m) = block_f64(&vals, f64::MIN_POSITIVE);
    assert_eq!((sp.min, sp.max), (-f64::MAX, f64::MAX));
    let f = m.figures().expect("values");
    assert!((f.mean - f64::MAX / 4.0).abs() <= f64::MAX * 1e-15);
    assert!(f.std.is_finite() && f.std > 0.8 * f64::MAX);
    assert!(f.l2_norm.is_infinite());
    let tiny = [5e-324, 1e-320, 0.0];
    let (sp, m) = block_f64(&tiny, f64::MIN_POSITIVE);
    assert_eq!((sp.zeros, sp.subnormals), (1, 2));
    let f = m.figures().expect("values");
    assert!((f.mean - (5e-324 + 1e-320) / 3.0).abs() <= 5e-324, "{f:?}");
    assert!(f.std > 0.0);
}

#[test]
fn histogram_tables_are_interleaved() {
    let bins = FloatBins::new(0.0, 4.0, 4);
    let vals = [0.0f32, 1.0, 2.0, 3.0, 4.0, f32::NAN, 0.5];
    let mut tables = vec![0u32; 16];
    histogram_block(&vals, &bins, &mut tables);
    let counts: Vec<u32> = (0..4)
        .map(|i| (0..4).map(|t| tables[t * 4 + i]).sum())
        .collect();
    assert_eq!(counts, [2, 1, 1, 2]);
}

/// Uniform numbers in [0, 1) from a seed (xorshift64).
fn uniform(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn sure_guesses_are_right() {
    let mut next = uniform(0x1234_5678_9abc_def0);
    for (min, max, n) in [
        (-1.0, 1.0, 256),
        (0.0, 448.0, 7),
        (1000.0, 1000.001, 256),
        (-3.4e38, 3.4e38, 255),
        (5e-324, 2.2e-308, 256),
        (-0.02, 0.5, 1 << 20),
    ] {
        let bins = FloatBins::new(min, max, n);
        let mut vals: Vec<f64> = (0..4000).map(|_| min + (max - min) * next()).collect();
        vals.extend(bins.edges().iter().copied());
        vals.extend(bins.edges().iter().map(|e| e.next_up().min(max)));
        vals.extend(bins.edges().iter().map(|e| e.next_down().max(min)));
        for part in vals.chunks(BLOCK) {
            let mut guess = [0u32; BLOCK];
            bins.guess_block(part, &mut guess);
            for (&g, &x) in guess.iter().zip(part) {
                if g != UNSURE {
                    assert_eq!(g as usize, bins.bin_of(x), "{min} {max} {n}: {x}");
                }
            }
        }
    }
}

#[test]
fn f32_histograms_match_the_edges() {
    let mut next = uniform(0x0123_4567_89ab_cdef);
    for (min, max, n) in [
        (-1.0f32, 1.0f32, 256),
        (0.0, 448.0, 7),
        (1000.0, 1000.001, 256),
        (-0.02, 0.5, 1 << 16),
        (-3.0e38, 3.0e38, 256),
        (1e-40, 1e-38, 256),
    ] {
        let bins = FloatBins::new(f64::from(min), f64::from(max), n);
        let Some(guess) = bins.f32_guess() else {
            continue;
        };
        let mut vals: Vec<f32> = (0..6000)
            .map(|_| (f64::from(min) + f64::from(max - min) * next()) as f32)
            .map(|x| x.clamp(min, max))
            .collect();
        for &e in bins.edges() {
            let e = e as f32;
            vals.extend([e, e.next_up(), e.next_down()].map(|x| x.clamp(min, max)));
        }
        vals.extend([f32::NAN, f32::INFINITY, min, max]);
        let mut want = vec![0u32; bins.len()];
        for &x in &vals {
            if x.is_finite() {
                want[bins.bin_of(f64::from(x))] += 1;
            }
        }
        let stride = bins.len() + 1;
        let mut tables = vec![0u32; 4 * stride];
        let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        for part in bytes.chunks(4 * BLOCK) {
            histogram_f32(part, &bins, &guess, &mut tables);
        }
        let got: Vec<u32> = (0..bins.len())
            .map(|i| (0..4).map(|t| tables[t * stride + i]).sum())
            .collect();
        assert_eq!(got, want, "{min} {max} {n}");
    }
}

#[test]
fn f6_groups() {
    let mut tables = [[0u32; 64]; 4];
    // LSB first: codes 1, 2, 3, 63.
    count_f6(&[0x81, 0x30, 0xfc], BitOrder::LsbFirst, &mut tables);
    assert_eq!(
        (tables[0][1], tables[1][2], tables[2][3], tables[3][63]),
        (1, 1, 1, 1)
    );
    let mut tables = [[0u32; 64]; 4];
    count_f6(&[0x04, 0x20, 0xff, 0x00], BitOrder::MsbFirst, &mut tables);
    assert_eq!(
        (tables[0][1], tables[1][2], tables[2][3], tables[3][63]),
        (1, 1, 1, 1)
    );
}

#[test]
fn u16_codes_are_counted_through_wraps() {
    // Runs of one code long enough to wrap its byte several times, codes
    // spread over the whole table, and an odd count (the last code alone).
    let mut codes: Vec<u16> = vec![0x3c00; 1000];
    codes.extend((0..70_001u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 16) as u16));
    codes.extend([0xffff; 513]);
    let bytes: Vec<u8> = codes.iter().flat_map(|c| c.to_le_bytes()).collect();
    let mut expected = vec![0u64; 1 << 16];
    for &c in &codes {
        expected[usize::from(c)] += 1;
    }
    let mut low = vec![0u8; 1 << 16];
    let mut wraps = vec![0u32; 1 << 16];
    count_u16(&bytes, &mut low, &mut wraps);
    let got: Vec<u64> = low
        .iter()
        .zip(wraps.iter())
        .map(|(&l, &w)| u64::from(w) << 8 | u64::from(l))
        .collect();
    assert!(got == expected);
    assert!(expected[0x3c00] > 512 && expected[0xffff] > 512);
}
