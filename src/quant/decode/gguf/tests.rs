//! GGUF's block types through the [`Dequantizer`]: any window of a run of
//! blocks gives the run's values there; on a file of every type with
//! codes, the codes counted without their values are those
//! `values_and_codes` gives, over runs that cut blocks anywhere; and the
//! scales the blocks hold, by block and by element.

use super::{Clip, IntoOut, Keep, Out};
use crate::format::Checkpoint;
use crate::format::gguf::dequant::{self, code_range, dequantize, scales_of, scales_per_block};
use crate::format::gguf::types::GgmlType;
use crate::quant::{Dequantizer, detect};

/// xorshift32 bytes.
fn bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as u8
        })
        .collect()
}

fn ty(id: u32) -> GgmlType {
    GgmlType::from_id(id).expect("a type")
}

/// Any window of a run of blocks gives the values of the whole run
/// there, with codes in the type's range.
#[test]
fn windows_of_a_run_give_its_values() {
    for id in [2, 8, 10, 11, 12, 14, 23, 35, 39, 40] {
        let t = ty(id);
        let (per, size) = (t.block().0 as usize, t.block().1 as usize);
        let blocks = bytes(3 * size, id);
        let mut all = Vec::new();
        dequantize(t, &blocks, &mut all).expect("decodes");
        let (lo, hi) = code_range(t).expect("codes");
        let n = 3 * per;
        for (skip, len) in [(0, n), (1, n - 1), (per - 3, 7), (17, 2), (n - 1, 1)] {
            let mut vals = vec![0f32; len];
            let mut codes = vec![i32::MIN; len];
            let mut out = Out {
                len,
                vals: &mut vals,
                codes: Some(&mut codes),
                count: None,
            };
            let clip = Clip {
                pos: 0,
                skip,
                end: skip + len,
            };
            let mut sink = IntoOut {
                out: &mut out,
                clip,
            };
            dequant::decode(t, &blocks, &mut sink).expect("decodes");
            let want: Vec<u32> = all[skip..skip + len].iter().map(|v| v.to_bits()).collect();
            let got: Vec<u32> = vals.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{} {skip}+{len}", t.name());
            assert!(codes.iter().all(|c| (lo..=hi).contains(c)), "{}", t.name());
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// A GGUF v3 file of one `[rows, 2 blocks]` tensor of random blocks per
/// type id.
pub(crate) fn file(ids: &[u32], rows: u64) -> Vec<u8> {
    let mut h = b"GGUF".to_vec();
    h.extend(3u32.to_le_bytes());
    h.extend((ids.len() as u64).to_le_bytes());
    h.extend(0u64.to_le_bytes());
    let mut data = Vec::new();
    for &id in ids {
        let (per, size) = ty(id).block();
        put_str(&mut h, &format!("t{id}"));
        h.extend(2u32.to_le_bytes());
        h.extend((2 * per).to_le_bytes());
        h.extend(rows.to_le_bytes());
        h.extend(id.to_le_bytes());
        h.extend((data.len() as u64).to_le_bytes());
        data.extend(bytes((2 * rows * size) as usize, id * 7));
        data.resize(data.len().div_ceil(32) * 32, 0);
    }
    h.resize(h.len().div_ceil(32) * 32, 0);
    h.extend(data);
    h
}

#[test]
fn codes_counted_alone_are_the_codes_beside_the_values() {
    let ids = [
        2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 34, 35, 39, 40, 16, 29,
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("types.gguf");
    std::fs::write(&path, file(&ids, 3)).expect("write");
    let ck = Checkpoint::open(&path).expect("opens");
    let q = detect(&ck).expect("logical tensors");
    assert_eq!(q.tensors().len(), ids.len());
    for lt in q.tensors() {
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        let t = ty(lt.name()[1..].parse().expect("an id"));
        let n = dq.len() as usize;
        let mut vals = vec![0f32; n];
        let mut codes = vec![0i32; n];
        assert_eq!(dq.values_and_codes(0, &mut vals, &mut codes), n);
        let Some((lo, hi)) = code_range(t) else {
            assert!(!dq.has_codes());
            assert!(!dq.count_codes(0, 1, &mut [0; 4]));
            continue;
        };
        assert!(dq.has_codes());
        assert_eq!(dq.code_range(), (lo, hi));
        let width = (hi - lo + 1) as usize;
        let mut want = vec![0u64; width];
        for &c in &codes {
            want[(c - lo) as usize] += 1;
        }
        // Runs that start and end anywhere in a block, and the whole.
        let per = t.block().0 as usize;
        for cuts in [
            vec![0, n],
            vec![0, 1, per + 3, n - 2, n],
            vec![0, per, 2 * per + 5, n],
        ] {
            let mut got = vec![0u64; width];
            for w in cuts.windows(2) {
                assert!(dq.count_codes(w[0] as u64, (w[1] - w[0]) as u64, &mut got));
            }
            assert_eq!(got, want, "{} cut at {cuts:?}", t.name());
        }
    }
}

#[test]
fn scales_are_read_from_the_blocks_by_block_and_by_element() {
    let ids = [8, 12, 29, 39, 40];
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("scales.gguf");
    let bytes = file(&ids, 2);
    std::fs::write(&path, &bytes).expect("write");
    let ck = Checkpoint::open(&path).expect("opens");
    let q = detect(&ck).expect("logical tensors");
    for lt in q.tensors() {
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        let t = ty(lt.name()[1..].parse().expect("an id"));
        let (per, size) = (t.block().0, t.block().1 as usize);
        let each = scales_per_block(t);
        let count = dq.block_scale_count().expect("scales in the blocks");
        assert_eq!(count, dq.len() / per * each, "{}", t.name());
        let blocks = ck.bytes(lt.parts()[0].1);
        let want: Vec<f32> = blocks
            .chunks_exact(size)
            .flat_map(|b| scales_of(t, b).expect("scales")[..each as usize].to_vec())
            .collect();
        let mut got = vec![f32::NAN; count as usize + 3];
        assert_eq!(dq.block_scales(0, &mut got), count as usize);
        assert_eq!(got[..count as usize], want[..], "{}", t.name());
        let mut tail = [0f32; 2];
        assert_eq!(dq.block_scales(count - 1, &mut tail), 1);
        assert_eq!(tail[0], want[want.len() - 1]);
        for i in [0, 1, per - 1, per, dq.len() - 1] {
            let s = want[(i / per * each + (i % per) / (per / each)) as usize];
            assert_eq!(
                dq.scale_at(i),
                Some(f64::from(s)),
                "{} element {i}",
                t.name()
            );
        }
        assert_eq!(dq.scale_at(dq.len()), None);
    }
}

/// Each byte's nibbles counted one by one.
/// The plain loops, as a caller without vectors would give them.
const PLAIN: super::PairKernels = super::PairKernels {
    nibble_counts: count_nibbles_plainly,
    q4_k: |b, n, v, c, codes| {
        super::q4_k_pairs(b, n, v, c, codes, count_nibbles_plainly, |_| {});
    },
};

fn count_nibbles_plainly(bytes: &[u8]) -> ([u32; 16], [u32; 16]) {
    let mut out = ([0u32; 16], [0u32; 16]);
    for &b in bytes {
        out.0[usize::from(b & 15)] += 1;
        out.1[usize::from(b >> 4)] += 1;
    }
    out
}

/// How many elements hold each value (by its bits).
type Multiset = std::collections::BTreeMap<u32, u64>;

/// The pairs of any run of a table type stand for the run's decoded
/// values, each as often as it is there; with a `keep`, only the values
/// it picks, each with all its elements. Other types have no pairs.
#[test]
fn value_pairs_are_the_values_counted() {
    let ids = [2, 3, 10, 12, 20, 23, 35, 39, 40, 8, 14];
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("types.gguf");
    std::fs::write(&path, file(&ids, 3)).expect("write");
    let ck = Checkpoint::open(&path).expect("opens");
    let q = detect(&ck).expect("logical tensors");
    // Values whose lowest bit is clear.
    let even = |t: &[f32], masks: &mut [u16]| {
        for (m, t) in masks.iter_mut().zip(t.chunks(16)) {
            *m = t
                .iter()
                .enumerate()
                .fold(0u16, |m, (q, v)| m | u16::from(v.to_bits() & 1 == 0) << q);
        }
    };
    for lt in q.tensors() {
        let dq = Dequantizer::new(&ck, lt).expect("decoded");
        let t = ty(lt.name()[1..].parse().expect("an id"));
        let n = dq.len() as usize;
        if [8, 14].contains(&t.id()) {
            assert!(!dq.has_value_pairs(), "{}", t.name());
            let mut emit = |_: &[f32], _: &[u32]| panic!("no pairs");
            assert!(!dq.value_pairs(0, 1, None, &PLAIN, None, &mut emit));
            continue;
        }
        assert!(dq.has_value_pairs(), "{}", t.name());
        let mut vals = vec![0f32; n];
        assert_eq!(dq.values(0, &mut vals), n);
        let per = t.block().0 as usize;
        for (a, b) in [(0, n), (1, n - 1), (per + 3, 2 * per), (n - 1, n), (5, 6)] {
            for keep in [None, Some(&even as Keep<'_>)] {
                let mut want = Multiset::new();
                for v in &vals[a..b] {
                    if keep.is_none() || v.to_bits() & 1 == 0 {
                        *want.entry(v.to_bits()).or_default() += 1;
                    }
                }
                let mut got = Multiset::new();
                let mut emit = |vs: &[f32], cs: &[u32]| {
                    assert!(vs.len() <= super::PAIR_BATCH && vs.len() == cs.len());
                    for (v, &c) in vs.iter().zip(cs).filter(|(_, c)| **c > 0) {
                        *got.entry(v.to_bits()).or_default() += u64::from(c);
                    }
                };
                let (first, len) = (a as u64, (b - a) as u64);
                // The codes beside the pairs, when nothing is picked.
                let (lo, hi) = dq.code_range();
                let width = (hi - lo + 1) as usize;
                let mut codes = vec![0u64; width];
                assert!(dq.value_pairs(first, len, keep, &PLAIN, Some(&mut codes), &mut emit));
                let what = format!("{} {a}..{b} keep {}", t.name(), keep.is_some());
                assert_eq!(got, want, "{what}");
                let mut alone = vec![0u64; width];
                assert!(dq.count_codes(first, len, &mut alone));
                if keep.is_none() {
                    assert_eq!(codes, alone, "{what}");
                } else {
                    assert!(codes.iter().all(|&c| c == 0), "{what}: none with keep");
                }
            }
        }
    }
}
