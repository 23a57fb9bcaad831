//! The counted scan against the sorting one, which sees every value: every
//! figure bit for bit, over values of many shapes, and the kept tables
//! come back clear.

use super::super::views::{C64Abs, C64Part, F32View, F64View};
use super::counts::{KEPT_TABLES, TABLES};
use super::*;

/// xorshift64*.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-300);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Values of many shapes: weights, a narrow range (buckets holding
/// many edges), few distinct values (most values beside an edge),
/// specials, the extremes of the type, a constant.
pub(super) fn cases(n: usize) -> Vec<(&'static str, Vec<f64>)> {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let weights: Vec<f64> = (0..n).map(|_| r.normal() * 0.02).collect();
    let narrow: Vec<f64> = (0..n).map(|_| 1.0 + r.unit() * 1e-4).collect();
    let few: Vec<f64> = (0..n).map(|i| f64::from((i % 5) as u8) - 2.0).collect();
    let mut specials = weights.clone();
    for (i, x) in specials.iter_mut().enumerate() {
        match i % 97 {
            0 => *x = f64::NAN,
            1 => *x = f64::INFINITY,
            2 => *x = f64::NEG_INFINITY,
            3 => *x = 0.0,
            4 => *x = -0.0,
            5 => *x = 1e-40,
            _ => {}
        }
    }
    let wide: Vec<f64> = (0..n)
        .map(|i| match i % 3 {
            0 => f64::from(f32::MAX) * r.unit(),
            1 => -f64::from(f32::MAX) * r.unit(),
            _ => r.normal(),
        })
        .collect();
    let constant = vec![0.5; n];
    let all_nan = vec![f64::NAN; n];
    vec![
        ("weights", weights),
        ("narrow", narrow),
        ("few values", few),
        ("specials", specials),
        ("wide", wide),
        ("constant", constant),
        ("all NaN", all_nan),
    ]
}

fn f32_bytes(vals: &[f64]) -> Vec<u8> {
    vals.iter()
        .flat_map(|&x| (x as f32).to_le_bytes())
        .collect()
}

fn f64_bytes(vals: &[f64]) -> Vec<u8> {
    vals.iter().flat_map(|&x| x.to_le_bytes()).collect()
}

/// The counted scan and the sorting one agree on every figure, bit for
/// bit (the sorting one is the reference: it sees every value).
fn agree<V: View>(view: &V, what: &str) {
    let options = StatsOptions::default();
    let (cancel, progress) = (CancelToken::new(), Progress::new());
    assert!(
        view.len() > SMALL,
        "{what}: large enough for the counted scan"
    );
    let counted = stats(view, &options, &cancel, &progress).expect("not cancelled");
    let sorted = small(view, &options, &cancel, &progress).expect("not cancelled");
    assert_eq!(format!("{counted:?}"), format!("{sorted:?}"), "{what}");
    // Both scans report both their passes (one, with no finite value).
    let passes = if counted.finite > 0 { 4 } else { 3 };
    assert_eq!(
        progress.done(),
        passes * view.len() * view.element_bytes(),
        "{what}"
    );
}

#[test]
fn counted_scan_matches_the_sorted_values() {
    let n = SMALL as usize * 3 + 17;
    for (name, vals) in cases(n) {
        agree(&F32View(&f32_bytes(&vals)), &format!("F32 {name}"));
        agree(&F64View(&f64_bytes(&vals)), &format!("F64 {name}"));
    }
}

#[test]
fn complex_parts_and_magnitudes_match() {
    let n = SMALL as usize * 2 + 3;
    let cases = cases(2 * n);
    let (_, vals) = &cases[3];
    let bytes = f32_bytes(vals);
    agree(
        &C64Part {
            bytes: &bytes,
            imag: false,
        },
        "C64 real",
    );
    agree(
        &C64Part {
            bytes: &bytes,
            imag: true,
        },
        "C64 imaginary",
    );
    agree(&C64Abs(&bytes), "C64 magnitude");
}

#[test]
fn other_bin_counts_match() {
    let n = SMALL as usize + 1000;
    let (_, vals) = &cases(n)[0];
    let bytes = f32_bytes(vals);
    for bins in [1, 7, 1000, 100_000] {
        let options = StatsOptions {
            bins,
            ..StatsOptions::default()
        };
        let (cancel, progress) = (CancelToken::new(), Progress::new());
        let view = F32View(&bytes);
        let counted = stats(&view, &options, &cancel, &progress).expect("not cancelled");
        let sorted = small(&view, &options, &cancel, &progress).expect("not cancelled");
        assert_eq!(format!("{counted:?}"), format!("{sorted:?}"), "{bins} bins");
    }
}

#[test]
fn quantiles_are_the_sorted_values() {
    let n = SMALL as usize * 2;
    let (_, vals) = &cases(n)[0];
    let bytes = f32_bytes(vals);
    let got = stats(
        &F32View(&bytes),
        &StatsOptions::default(),
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("not cancelled");
    let mut sorted: Vec<f64> = vals.iter().map(|&x| f64::from(x as f32)).collect();
    sorted.sort_by(f64::total_cmp);
    let q = got.quantiles.expect("quantiles");
    for (got, &(_, permille)) in q.0.iter().zip(&QUANTILES) {
        let rank = nearest_rank(permille, n as u64).expect("values");
        assert_eq!(*got, Some(Scalar::float(sorted[rank as usize - 1])));
    }
    let h = got.histogram.expect("histogram");
    assert_eq!(h.counts.iter().sum::<u64>(), n as u64);
}

#[test]
fn cancelled_scans_stop() {
    let bytes = vec![0u8; 4 * (SMALL as usize + 1)];
    let cancel = CancelToken::new();
    cancel.cancel();
    let view = F32View(&bytes);
    assert!(stats(&view, &StatsOptions::default(), &cancel, &Progress::new()).is_err());
}

#[test]
fn tables_come_back_clear() {
    let n = SMALL as usize + 5;
    let (_, vals) = &cases(n)[0];
    let bytes = f32_bytes(vals);
    for _ in 0..3 {
        let _ = stats(
            &F32View(&bytes),
            &StatsOptions::default(),
            &CancelToken::new(),
            &Progress::new(),
        );
    }
    let kept = TABLES.lock().expect("lock");
    assert!(kept.len() <= KEPT_TABLES);
    assert!(
        kept.iter()
            .all(|(low, wraps)| low.iter().all(|&c| c == 0) && wraps.iter().all(|&c| c == 0))
    );
}
