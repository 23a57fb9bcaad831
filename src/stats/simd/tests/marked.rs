//! The prefilters of the marked buckets' filter, f32 and f64: every value
//! of a marked bucket passes, and every prefiltered copy finds the keys the
//! portable filter finds.

use super::*;

type NearCopy = fn(&[u8], &[u64; kernel::MARK_WORDS], &kernel::Prefilter, &mut dyn FnMut(&[u64]));

/// The vector copies of the prefiltered filter this CPU can run.
fn copies_of_near() -> Vec<NearCopy> {
    let mut out: Vec<NearCopy> = vec![|b, m, p, h| for_each_marked_f32(b, m, Some(p), h)];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: only called on this CPU, which has AVX2 (checked).
            out.push(|b, m, p, h| {
                // SAFETY: as above.
                into_hits(h, |found| unsafe { x86::marked_near_f32(b, m, p, found) });
            });
        }
        if avx512() {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            out.push(|b, m, p, h| {
                // SAFETY: as above.
                into_hits(h, |found| unsafe {
                    x86::marked_near_f32_512(b, m, p, found);
                });
            });
        }
    }
    out
}

/// The buckets holding values of `vals` that hold an inner edge of
/// `bins` (as the exact scan finds them), sorted.
fn straddling<T: crate::stats::float::FloatLane>(
    vals: &[T],
    bins: &FloatBins,
    min: f64,
    max: f64,
) -> Vec<u32> {
    let low = T::KEY_BITS - kernel::PREFIX_BITS;
    let mut buckets: Vec<u32> = vals
        .iter()
        .filter(|x| x.finite())
        .map(|&x| x.prefix())
        .collect();
    buckets.sort_unstable();
    buckets.dedup();
    buckets.retain(|&p| {
        let first = u64::from(p) << low;
        let lo = T::from_key(first).to_f64().max(min);
        let hi = T::from_key(first | ((1 << low) - 1)).to_f64().min(max);
        bins.bin_of(lo) != bins.bin_of(hi)
    });
    buckets
}

/// Values of many ranges: the mixed ones of [`values`], weights, a
/// narrow range far from zero, subnormals only, a range beside f32's
/// largest values, a few distinct values.
fn ranges() -> Vec<Vec<f32>> {
    let mixed = values(21, 2 * BLOCK + 7, true);
    let unit = |i: usize| {
        let r = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
        r as f64 / (1u64 << 53) as f64
    };
    let weights = (0..3 * BLOCK)
        .map(|i| ((unit(i) - 0.5) * 0.1 * (unit(i + 7) - 0.5).signum()) as f32)
        .collect();
    let narrow = (0..BLOCK).map(|i| (1.0 + unit(i) * 1e-3) as f32).collect();
    let subnormal = (0..BLOCK)
        .map(|i| f32::from_bits((unit(i) * f64::from(0x7f_ffff)) as u32))
        .collect();
    let huge = (0..BLOCK)
        .map(|i| ((unit(i) - 0.5) * f64::from(f32::MAX)) as f32)
        .collect();
    let few = (0..BLOCK).map(|i| (i % 5) as f32 - 2.0).collect();
    vec![mixed, weights, narrow, subnormal, huge, few]
}

#[test]
fn the_prefilter_passes_every_value_of_a_marked_bucket() {
    for vals in ranges() {
        let finite: Vec<f32> = vals.iter().copied().filter(|x| x.is_finite()).collect();
        let min = finite.iter().copied().fold(f32::INFINITY, f32::min);
        let max = finite.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let (min, max) = (f64::from(min), f64::from(max));
        let low = 32 - kernel::PREFIX_BITS;
        for bins in [1, 7, 256, 1000, 65_536] {
            let bins = FloatBins::new(min, max, bins);
            let edges = straddling(&vals, &bins, min, max);
            // A few other marked buckets (quantiles' and the like).
            let others: Vec<u32> = finite
                .iter()
                .step_by(301)
                .map(|x| kernel::key32(x.to_bits()) >> low)
                .collect();
            let Some(pre) = kernel::Prefilter::new(Some((bins.edges(), min, max)), &others) else {
                // Only where the near test cannot be sound in f32.
                assert!(max - min < 1e-30 || bins.len() > 256, "{min} {max}");
                continue;
            };
            for x in &finite {
                let p = kernel::key32(x.to_bits()) >> low;
                if edges.binary_search(&p).is_ok() || others.contains(&p) {
                    assert!(
                        pre.passes(*x),
                        "{x} in marked bucket {p}, {} bins",
                        bins.len()
                    );
                }
            }
            // The filter is worth it: few values pass for weights.
            let passed = finite.iter().filter(|x| pre.passes(**x)).count();
            if bins.len() == 256 && max - min < 1.0 && max - min > 0.01 {
                assert!(passed * 10 < finite.len(), "{passed} of {}", finite.len());
            }
        }
    }
    // A range beyond f32 has no sound near test; no range at all needs none.
    let wide = [-3e38, 3e38];
    let bins = FloatBins::new(wide[0], wide[1], 256);
    assert!(kernel::Prefilter::new(Some((bins.edges(), wide[0], wide[1])), &[]).is_none());
    assert!(kernel::Prefilter::new(None, &[1, 2]).is_some());
}

#[test]
fn every_copy_of_the_prefiltered_filter_agrees() {
    use kernel::MARK_WORDS;
    let low = 32 - kernel::PREFIX_BITS;
    for vals in ranges() {
        let finite: Vec<f32> = vals.iter().copied().filter(|x| x.is_finite()).collect();
        let min = f64::from(finite.iter().copied().fold(f32::INFINITY, f32::min));
        let max = f64::from(finite.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        let bins = FloatBins::new(min, max, 256);
        let edges = straddling(&vals, &bins, min, max);
        let others: Vec<u32> = finite
            .iter()
            .step_by(97)
            .map(|x| kernel::key32(x.to_bits()) >> low)
            .collect();
        let mut marks = vec![0u64; MARK_WORDS];
        for &p in edges.iter().chain(&others) {
            marks[p as usize / 64] |= 1 << (p % 64);
        }
        let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
        let mut bytes = vec![0u8; 3];
        bytes.extend(vals.iter().flat_map(|x| x.to_le_bytes()));
        for with_edges in [true, false] {
            let near = with_edges.then(|| (bins.edges(), min, max));
            let Some(pre) = kernel::Prefilter::new(near, &others) else {
                continue;
            };
            // Without the near test, only the others are marked.
            let marks_here = if with_edges {
                marks.to_vec()
            } else {
                let mut m = vec![0u64; MARK_WORDS];
                for &p in &others {
                    m[p as usize / 64] |= 1 << (p % 64);
                }
                m
            };
            let marks_here = <&[u64; MARK_WORDS]>::try_from(marks_here.as_slice()).expect("marks");
            for shift in 0..4 {
                let part = &bytes[shift..bytes.len() - (3 - shift)];
                let portable = portable_hits(part, marks_here);
                for copy in copies_of_near() {
                    let mut hits = Vec::new();
                    copy(part, marks_here, &pre, &mut |ks| hits.extend_from_slice(ks));
                    assert_eq!(hits, portable, "offset {shift}, edges {with_edges}");
                }
            }
        }
    }
}

/// [`ranges`] of f64 values: mixed ones with every special code,
/// weights, a narrow range far from zero, subnormals only, a range
/// beside f64's largest values, a few distinct values.
fn ranges64() -> Vec<Vec<f64>> {
    let unit = |i: usize| {
        let r = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
        r as f64 / (1u64 << 53) as f64
    };
    let mixed = values_f64(23, 2 * BLOCK + 7, true, 0);
    let weights = (0..3 * BLOCK)
        .map(|i| (unit(i) - 0.5) * 0.1 * (unit(i + 7) - 0.5).signum())
        .collect();
    let narrow = (0..BLOCK).map(|i| 1.0 + unit(i) * 1e-9).collect();
    let subnormal = (0..BLOCK)
        .map(|i| f64::from_bits((unit(i) * 0xf_ffff_ffff_ffff_u64 as f64) as u64))
        .collect();
    let huge = (0..BLOCK).map(|i| (unit(i) - 0.5) * f64::MAX).collect();
    let few = (0..BLOCK).map(|i| (i % 5) as f64 - 2.0).collect();
    vec![mixed, weights, narrow, subnormal, huge, few]
}

/// The smallest and largest finite value.
fn range64(vals: &[f64]) -> (f64, f64) {
    let finite = vals.iter().copied().filter(|x| x.is_finite());
    let min = finite.clone().fold(f64::INFINITY, f64::min);
    (min, finite.fold(f64::NEG_INFINITY, f64::max))
}

#[test]
fn the_f64_prefilter_passes_every_value_of_a_marked_bucket() {
    for vals in ranges64() {
        let (min, max) = range64(&vals);
        for bins in [1, 7, 256, 1000, 65_536] {
            let bins = FloatBins::new(min, max, bins);
            let edges = straddling(&vals, &bins, min, max);
            let others: Vec<u32> = vals
                .iter()
                .step_by(301)
                .map(|&x| kernel::Keyed::prefix(x))
                .collect();
            let Some(pre) = kernel::Prefilter64::new(Some((bins.edges(), min, max)), &others)
            else {
                // Only where the range is near f64's largest, or so
                // narrow that bins per unit overflow.
                assert!(max - min > 1e300 || max - min < 1e-290, "{min} {max}");
                continue;
            };
            for &x in vals.iter().filter(|x| x.is_finite()) {
                let p = kernel::Keyed::prefix(x);
                if edges.binary_search(&p).is_ok() || others.contains(&p) {
                    assert!(
                        pre.passes(x),
                        "{x} in marked bucket {p}, {} bins",
                        bins.len()
                    );
                }
            }
            // Values far from every edge fail it. An f64 bucket is
            // eight times as wide as an f32 one: for these weights
            // (uniform, not normal) about half of them pass.
            let passed = vals.iter().filter(|x| pre.passes(**x)).count();
            if bins.len() == 256 && max - min < 1.0 && max - min > 0.01 {
                assert!(passed * 3 < vals.len() * 2, "{passed} of {}", vals.len());
            }
        }
    }
    let bins = FloatBins::new(-f64::MAX, f64::MAX, 256);
    assert!(kernel::Prefilter64::new(Some((bins.edges(), -f64::MAX, f64::MAX)), &[]).is_none());
    assert!(kernel::Prefilter64::new(None, &[1, 2]).is_some());
}

#[test]
fn every_copy_of_the_f64_prefiltered_filter_agrees() {
    use kernel::MARK_WORDS;
    type Near64 = fn(&[f64], &[u64; MARK_WORDS], &kernel::Prefilter64, &mut dyn FnMut(&[u64]));
    let mut copies: Vec<Near64> = vec![|v, m, p, h| for_each_marked_f64(v, m, Some(p), h)];
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        copies.push(|v, m, p, h| {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            into_hits(h, |found| unsafe {
                x86::marked_near_f64_512(v, m, p, found);
            });
        });
    }
    for vals in ranges64() {
        let (min, max) = range64(&vals);
        let bins = FloatBins::new(min, max, 256);
        let edges = straddling(&vals, &bins, min, max);
        let others: Vec<u32> = vals
            .iter()
            .step_by(97)
            .map(|&x| kernel::Keyed::prefix(x))
            .collect();
        for with_edges in [true, false] {
            let near = with_edges.then(|| (bins.edges(), min, max));
            let Some(pre) = kernel::Prefilter64::new(near, &others) else {
                continue;
            };
            // Without the near test, only the others are marked.
            let mut marks = vec![0u64; MARK_WORDS];
            let marked: &[u32] = if with_edges { &edges } else { &[] };
            for &p in marked.iter().chain(&others) {
                marks[p as usize / 64] |= 1 << (p % 64);
            }
            let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
            // Every length from a whole number of blocks to a few
            // values, so that the tails are taken too.
            for len in [vals.len(), vals.len() - 5, 1027, 13, 0] {
                let part = &vals[vals.len() - len..];
                let portable = hits_of(|found| kernel::for_each_marked(part, marks, found));
                for copy in &copies {
                    let mut hits = Vec::new();
                    copy(part, marks, &pre, &mut |ks| hits.extend_from_slice(ks));
                    assert_eq!(hits, portable, "{len} values, edges {with_edges}");
                }
            }
        }
    }
}
