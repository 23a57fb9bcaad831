//! Views whose values come as `(value, count)` pairs (runs of 32 codes
//! under tables of 16 values, as GGUF's 4-bit types) give the figures
//! their decoded elements give: every count, the range, the histograms
//! and the quantiles bit for bit, the moments to a few ulps (the sums are
//! taken in another order).

use std::ops::Range;

use super::super::views::View;
use super::tests::{Rng, cases};
use super::*;
use crate::quant::Keep;

/// Elements of a run (one table).
const RUN: u64 = 32;

/// Runs of codes, each under its table of 16 values.
struct Runs {
    tables: Vec<[f32; 16]>,
    codes: Vec<u8>,
}

impl Runs {
    fn value(&self, i: u64) -> f32 {
        self.tables[(i / RUN) as usize][usize::from(self.codes[i as usize])]
    }
}

impl View for Runs {
    type T = f32;
    fn len(&self) -> u64 {
        self.codes.len() as u64
    }
    fn element_bytes(&self) -> u64 {
        4
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        let n = out.len().min((self.len() - first.min(self.len())) as usize);
        for (k, o) in out.iter_mut().take(n).enumerate() {
            *o = self.value(first + k as u64);
        }
        n
    }
    fn smallest_normal(&self) -> f64 {
        f64::from(f32::MIN_POSITIVE)
    }
    fn pairs(
        &self,
        range: Range<u64>,
        keep: Option<Keep<'_>>,
        _codes: bool,
        f: &mut dyn FnMut(&[f32], &[u32]),
    ) -> bool {
        let (mut vals, mut counts) = (Vec::new(), Vec::new());
        let mut at = range.start;
        while at < range.end {
            let run = at / RUN;
            let end = ((run + 1) * RUN).min(range.end);
            let t = &self.tables[run as usize];
            let mut want = [u16::MAX];
            if let Some(k) = keep {
                k(t, &mut want);
            }
            let want = want[0];
            let mut c = [0u32; 16];
            for i in at..end {
                c[usize::from(self.codes[i as usize])] += 1;
            }
            for q in (0..16).filter(|q| want >> q & 1 != 0) {
                vals.push(t[q]);
                counts.push(c[q]);
            }
            if vals.len() >= 1000 {
                f(&vals, &counts);
                vals.clear();
                counts.clear();
            }
            at = end;
        }
        f(&vals, &counts);
        true
    }
}

/// The same elements, decoded only.
struct Decoded<'a>(&'a Runs);

impl View for Decoded<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn element_bytes(&self) -> u64 {
        4
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        self.0.decode(first, out)
    }
    fn smallest_normal(&self) -> f64 {
        self.0.smallest_normal()
    }
}

/// Runs whose tables are taken from `vals` in turn, codes random (a few
/// runs' codes all alike).
fn runs(vals: &[f64], n: usize, r: &mut Rng) -> Runs {
    let tables = (0..n.div_ceil(RUN as usize))
        .map(|k| std::array::from_fn(|q| vals[(k * 16 + q) % vals.len()] as f32))
        .collect();
    let codes = (0..n)
        .map(|i| {
            if (i / RUN as usize) % 7 == 3 {
                5
            } else {
                (r.next() >> 60) as u8
            }
        })
        .collect();
    Runs { tables, codes }
}

/// Q4_K's tables: `a·q − b`, a and b per run.
fn affine(n: usize, r: &mut Rng) -> Runs {
    let tables = (0..n.div_ceil(RUN as usize))
        .map(|_| {
            let (a, b) = ((r.unit() * 0.01) as f32, (r.unit() * 0.08) as f32);
            std::array::from_fn(|q| a * q as f32 - b)
        })
        .collect();
    let codes = (0..n).map(|_| (r.next() >> 60) as u8).collect();
    Runs { tables, codes }
}

fn close(a: Option<f64>, b: Option<f64>, what: &str) {
    match (a, b) {
        (Some(a), Some(b)) => assert!(
            a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
            "{what}: {a} against {b}"
        ),
        (a, b) => assert_eq!(a.is_some(), b.is_some(), "{what}"),
    }
}

fn agree_paired(runs: &Runs, options: &StatsOptions, what: &str) {
    let (cancel, progress) = (CancelToken::new(), Progress::new());
    let paired = stats(runs, options, &cancel, &progress).expect("not cancelled");
    let decoded = stats(&Decoded(runs), options, &cancel, &progress).expect("not cancelled");
    close(paired.mean, decoded.mean, &format!("{what} mean"));
    close(paired.std, decoded.std, &format!("{what} std"));
    close(
        paired.abs_mean,
        decoded.abs_mean,
        &format!("{what} abs mean"),
    );
    close(paired.l2_norm, decoded.l2_norm, &format!("{what} L2"));
    let rest = |s: &ValueStats| {
        let mut s = s.clone();
        (s.mean, s.std, s.abs_mean, s.l2_norm, s.max_abs_over_std) = (None, None, None, None, None);
        format!("{s:?}")
    };
    assert_eq!(rest(&paired), rest(&decoded), "{what}");
}

#[test]
fn pairs_give_the_figures_of_their_elements() {
    let n = SMALL as usize * 3 + 21;
    let mut r = Rng(0x51_7cc1_b727_220a);
    for (name, vals) in cases(4096) {
        agree_paired(&runs(&vals, n, &mut r), &StatsOptions::default(), name);
    }
    let q4k = affine(n, &mut r);
    agree_paired(&q4k, &StatsOptions::default(), "affine");
    for bins in [1, 7, 100_000] {
        let options = StatsOptions {
            bins,
            ..StatsOptions::default()
        };
        agree_paired(&q4k, &options, &format!("affine, {bins} bins"));
    }
    let options = StatsOptions {
        quantiles: QuantileMode::FromHistogram,
        ..StatsOptions::default()
    };
    agree_paired(&q4k, &options, "affine, quantiles from the histogram");
}

#[test]
fn the_moments_pass_takes_pairs_too() {
    let n = SMALL as usize * 2 + 5;
    let mut r = Rng(0x0dd_ba11_5eed);
    let mut all = vec![("affine".to_owned(), affine(n, &mut r))];
    for (name, vals) in cases(4096) {
        all.push((name.to_owned(), runs(&vals, n, &mut r)));
    }
    let (cancel, progress) = (CancelToken::new(), Progress::new());
    let details = [
        crate::stats::Detail::MomentsOnly,
        crate::stats::Detail::Outliers,
    ];
    for ((what, q4k), detail) in all.iter().flat_map(|c| details.map(|d| (c, d))) {
        let options = StatsOptions {
            detail,
            ..StatsOptions::default()
        };
        let paired = super::super::stats(q4k, &options, &cancel, &progress).expect("run");
        let decoded =
            super::super::stats(&Decoded(q4k), &options, &cancel, &progress).expect("run");
        close(paired.mean, decoded.mean, &format!("{what} mean"));
        close(paired.std, decoded.std, &format!("{what} std"));
        close(paired.l2_norm, decoded.l2_norm, &format!("{what} L2"));
        assert_eq!(paired.min, decoded.min, "{what}");
        assert_eq!(paired.max, decoded.max, "{what}");
        assert_eq!(paired.outliers_6sigma, decoded.outliers_6sigma, "{what}");
        assert_eq!(
            (paired.count, paired.finite, paired.zeros, paired.subnormals),
            (
                decoded.count,
                decoded.finite,
                decoded.zeros,
                decoded.subnormals
            ),
            "{what}"
        );
    }
}
