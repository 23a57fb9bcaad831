//! The prefix counts and the filter of marked buckets, of f32 and f64
//! values: every copy against the portable loops (and those against keys
//! made one by one).

use super::*;

type CountCopy = fn(&[u8], &[u8], &mut [u32; kernel::PART], &mut kernel::Tally<'_>);
type FilterCopy = fn(&[u8], &[u64; kernel::MARK_WORDS], &mut dyn FnMut(&[u64]));

/// The dispatching counter and every vector copy this CPU can run.
fn copies_of_count() -> Vec<CountCopy> {
    let mut out: Vec<CountCopy> = vec![|b, a, i, t| count_prefixes(f32s(b), f32s(a), i, t)];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: only called on this CPU, which has AVX2 (checked).
            out.push(|b, a, i, t| unsafe { x86::count_prefixes_256(f32s(b), f32s(a), i, t) });
        }
        if avx512() {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            out.push(|b, a, i, t| unsafe { x86::count_prefixes_512(f32s(b), f32s(a), i, t) });
        }
    }
    out
}

/// The dispatching filter and every vector copy this CPU can run.
fn copies_of_filter() -> Vec<FilterCopy> {
    let mut out: Vec<FilterCopy> = vec![|b, m, h| for_each_marked_f32(b, m, None, h)];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: only called on this CPU, which has AVX2 (checked).
            out.push(|b, m, h| {
                // SAFETY: as above.
                into_hits(h, |found| unsafe {
                    x86::for_each_marked_256(f32s(b), m, found);
                });
            });
        }
        if avx512() {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            out.push(|b, m, h| {
                // SAFETY: as above.
                into_hits(h, |found| unsafe {
                    x86::for_each_marked_512(f32s(b), m, found);
                });
            });
        }
    }
    out
}

#[test]
fn every_copy_of_the_prefix_loops_agrees() {
    use kernel::MARK_WORDS;
    // Every kind of value, at every offset from an aligned address, and
    // a run in one bucket long enough to wrap its byte twice.
    let mut vals = values(7, 3 * BLOCK + 11, true);
    vals.splice(1000..1000, [1.5f32; 700]);
    let mut bytes = vec![0u8; 3];
    bytes.extend(vals.iter().flat_map(|x| x.to_le_bytes()));
    for shift in 0..4 {
        let part = &bytes[shift..bytes.len() - (3 - shift)];
        let counted = |copy: CountCopy| {
            let mut idx = [0u32; kernel::PART];
            tally_of(|tally| {
                // In blocks of every length, odd ones among them.
                for (i, block) in part.chunks(4 * 777).enumerate() {
                    let ahead = part.get((i + 1) * 4 * 777..).unwrap_or(&[]);
                    copy(block, ahead, &mut idx, tally);
                }
            })
        };
        let a = counted(kernel::count_prefixes_f32);
        assert_eq!(a.iter().sum::<u64>(), vals.len() as u64);
        // Some bucket wrapped its byte.
        assert!(a.iter().any(|&c| c > 256));
        for copy in copies_of_count() {
            assert!(counted(copy) == a, "offset {shift}");
        }
        // Marks on about one bucket in three that hold values.
        let marks = every_third(&a);
        let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
        let portable = portable_hits(part, marks);
        assert!(!portable.is_empty());
        for copy in copies_of_filter() {
            let mut hits = Vec::new();
            copy(part, marks, &mut |ks| hits.extend_from_slice(ks));
            assert_eq!(hits, portable, "offset {shift}");
        }
    }
}

#[test]
fn every_copy_of_the_f64_prefix_loops_agrees() {
    use kernel::{BUCKETS, MARK_WORDS};
    type Count64 = fn(&[f64], &[f64], &mut [u32; kernel::PART], &mut kernel::Tally<'_>);
    type Filter64 = fn(&[f64], &[u64; MARK_WORDS], &mut dyn FnMut(&[u64]));
    let mut counts: Vec<Count64> = vec![count_prefixes];
    let mut filters: Vec<Filter64> = vec![for_each_marked];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: only called on this CPU, which has AVX2 (checked).
            counts.push(|v, a, i, t| unsafe { x86::count_prefixes_256(v, a, i, t) });
            // SAFETY: as above.
            filters.push(|v, m, h| {
                // SAFETY: as above.
                into_hits(h, |found| unsafe { x86::for_each_marked_256(v, m, found) });
            });
        }
        if avx512() {
            // SAFETY: only called on this CPU, which has AVX-512 (checked).
            counts.push(|v, a, i, t| unsafe { x86::count_prefixes_512(v, a, i, t) });
            // SAFETY: as above.
            filters.push(|v, m, h| {
                // SAFETY: as above.
                into_hits(h, |found| unsafe { x86::for_each_marked_512(v, m, found) });
            });
        }
    }
    // Every kind of value, of magnitudes that spread over many
    // exponents, and a run in one bucket that wraps its byte twice.
    let mut vals = values_f64(9, 3 * BLOCK + 11, true, 0);
    vals.extend(values_f64(10, 999, true, -700));
    vals.splice(1000..1000, [1.5f64; 700]);
    let counted = |copy: Count64| {
        let mut idx = [0u32; kernel::PART];
        tally_of(|tally| {
            for (i, block) in vals.chunks(777).enumerate() {
                let ahead = vals.get((i + 1) * 777..).unwrap_or(&[]);
                copy(block, ahead, &mut idx, tally);
            }
        })
    };
    // The portable count, against keys made one by one.
    let a = counted(kernel::count_prefixes);
    let key = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 { !b } else { b | 1 << 63 }
    };
    let bucket = |k: u64| (k >> (64 - kernel::PREFIX_BITS)) as usize;
    let mut expected = vec![0u64; BUCKETS];
    for &x in &vals {
        expected[bucket(key(x))] += 1;
    }
    assert!(a == expected);
    assert!(a.iter().any(|&c| c > 512));
    for copy in counts {
        assert!(counted(copy) == a);
    }
    let marks = every_third(&a);
    let marks = <&[u64; MARK_WORDS]>::try_from(marks.as_slice()).expect("marks");
    let portable = hits_of(|found| kernel::for_each_marked(&vals, marks, found));
    let want: Vec<u64> = vals
        .iter()
        .map(|&x| key(x))
        .filter(|&k| kernel::marked(marks, bucket(k) as u32))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(portable, want);
    for copy in filters {
        let mut hits = Vec::new();
        copy(&vals, marks, &mut |ks| hits.extend_from_slice(ks));
        assert_eq!(hits, portable);
    }
}
