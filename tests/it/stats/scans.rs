//! The scan paths: moments only, tensors at unaligned addresses, a whole
//! file scanned and cancelled mid-tensor, and a file changed since it was
//! opened.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tensorscope::Dtype;
use tensorscope::dtype::decode::BitOrder;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{Detail, Scalar, StatsError, StatsOptions, scan, tensor_stats};

use super::reference::{check_moments, reference_of};
use super::{Rng, f32_bytes, full, stats_of};
use crate::fixtures::{RefTensor, reference_file, write};

#[test]
fn moments_only_skips_histograms() {
    let data = f32_bytes([1.0, 2.0, 3.0]);
    let options = StatsOptions {
        detail: Detail::MomentsOnly,
        ..full()
    };
    let s = stats_of(Dtype::F32, &[3], data, &options);
    assert_eq!(s.values.mean, Some(2.0));
    assert!(s.values.histogram.is_none() && s.values.quantiles.is_none());
    let s = stats_of(Dtype::BF16, &[2], vec![0x80, 0x3f, 0, 0x40], &options);
    assert_eq!(s.values.mean, Some(1.5));
    assert!(s.values.log2_histogram.is_none());
}

/// `values` rounded to F32, F16 and BF16, as tensor bytes.
fn wide_encodings(values: &[f64]) -> [(Dtype, Vec<u8>); 3] {
    [
        (Dtype::F32, f32_bytes(values.iter().map(|&x| x as f32))),
        (
            Dtype::F16,
            values
                .iter()
                .flat_map(|&x| half::f16::from_f64(x).to_le_bytes())
                .collect(),
        ),
        (
            Dtype::BF16,
            values
                .iter()
                .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
                .collect(),
        ),
    ]
}

/// Statistics without histograms take the fused scan for F32, F16 and BF16
/// (with its vector copy on CPUs that have one): the same counts, range and
/// moments as the reference, with NaN, infinities, zeros and subnormals
/// spread over several blocks, and in blocks of their own.
#[test]
fn moments_only_scans_match_the_reference() {
    let mut rng = Rng(21);
    let n = 3 * 2048 + 13;
    let mut values: Vec<f64> = (0..n)
        .map(|i| match rng.next_u64() % 97 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => 0.0,
            4 => -0.0,
            5 => 3e-39 * (i % 7) as f64,
            6 => 3e-6 * rng.normal(),
            _ => rng.normal() * 0.05 + 0.01,
        })
        .collect();
    // A block with no special value at all, and one of NaN only.
    values.extend((0..2048).map(|i| 1.0 + f64::from(i) / 4096.0));
    values.extend((0..2048).map(|_| f64::NAN));
    let options = StatsOptions {
        detail: Detail::MomentsOnly,
        ..full()
    };
    let len = values.len();
    let encodings = wide_encodings(&values);
    for (dtype, data) in encodings {
        let r = reference_of(dtype, &data, BitOrder::LsbFirst);
        let s = stats_of(dtype, &[len], data.clone(), &options);
        check_moments(&format!("{dtype} moments only"), &s.values, &r);
        assert!(s.values.histogram.is_none());
        // The full path agrees on every count and on the range.
        let f = stats_of(dtype, &[len], data, &full());
        assert_eq!(
            (
                s.values.zeros,
                s.values.subnormals,
                s.values.min,
                s.values.max
            ),
            (
                f.values.zeros,
                f.values.subnormals,
                f.values.min,
                f.values.max
            ),
            "{dtype}"
        );
    }
}

/// A header whose length is not a multiple of 4 puts every tensor's bytes
/// at an odd address: the in-place kernels (and their vector loads) must
/// give the same figures there, and an F64 tensor, read in place where it
/// is aligned and decoded where not, the same figures at each of the eight
/// offsets. A small tensor (sorted) and one of the two-pass scan.
#[test]
fn tensors_at_unaligned_addresses() {
    for n in [2 * 2048 + 7, 40_000 + 7] {
        at_every_offset(n);
    }
}

fn at_every_offset(n: usize) {
    let mut rng = Rng(5);
    let values: Vec<f64> = (0..n).map(|_| rng.normal() * 0.1).collect();
    let mut encodings = wide_encodings(&values).to_vec();
    encodings.push((
        Dtype::F64,
        values.iter().flat_map(|x| x.to_le_bytes()).collect(),
    ));
    for (dtype, data) in encodings {
        let info = tensorscope::format::TensorInfo::new("t".into(), dtype, vec![n as u64], 0)
            .expect("whole bytes");
        let mut shifted = vec![0u8; data.len() + 7];
        for options in [
            full(),
            StatsOptions {
                detail: Detail::MomentsOnly,
                ..full()
            },
        ] {
            let run = |bytes: &[u8]| {
                tensorscope::stats::stats_of(
                    &info,
                    bytes,
                    &options,
                    &CancelToken::new(),
                    &Progress::new(),
                )
                .expect("not cancelled")
                .values
            };
            let aligned = run(&data);
            for offset in 0..8 {
                shifted[offset..offset + data.len()].copy_from_slice(&data);
                let odd = run(&shifted[offset..offset + data.len()]);
                assert_eq!(
                    format!("{odd:?}"),
                    format!("{aligned:?}"),
                    "{dtype} +{offset}"
                );
            }
        }
    }
}

#[test]
fn a_scan_summarises_and_can_be_cancelled_mid_tensor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big_n = 12 << 20; // 48 MiB of F32: six chunks
    let big = RefTensor {
        dtype: safetensors::Dtype::F32,
        shape: vec![big_n],
        data: f32_bytes((0..big_n).map(|i| (i % 1000) as f32 - 500.0)),
    };
    let zeros = RefTensor {
        dtype: safetensors::Dtype::BF16,
        shape: vec![8],
        data: vec![0; 16],
    };
    let nan = RefTensor {
        dtype: safetensors::Dtype::F16,
        shape: vec![2],
        data: vec![0x00, 0x7e, 0x00, 0x3c],
    };
    let file = reference_file(
        &[
            ("big".to_owned(), big),
            ("zeros".to_owned(), zeros),
            ("nan".to_owned(), nan),
        ],
        Some(HashMap::from([("format".to_owned(), "pt".to_owned())])),
    );
    let path = write(dir.path(), "m.safetensors", &file);
    let ck = Checkpoint::open(&path).expect("valid");
    let progress = Progress::new();
    let report = scan(&ck, ck.tensors(), &full(), &CancelToken::new(), &progress).expect("scan");
    assert_eq!(report.tensors.len(), 3);
    assert_eq!(progress.done(), progress.total());
    assert_eq!(report.summary.nonfinite_tensors, ["nan"]);
    assert_eq!(report.summary.all_zero_tensors, ["zeros"]);
    assert_eq!(report.summary.max_abs, Some(Scalar::Float(500.0)));
    assert_eq!(report.summary.max_abs_tensor.as_deref(), Some("big"));

    // Cancel as soon as the first chunk of "big" is done.
    let cancel = CancelToken::new();
    let trigger = cancel.clone();
    let updates = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&updates);
    let progress = Progress::with_notify(move || {
        // The first update sets the total; the second is a finished chunk.
        if seen.fetch_add(1, Ordering::SeqCst) == 1 {
            trigger.cancel();
        }
    });
    let big = ck.find("big").expect("big");
    let result = tensor_stats(&ck, big, &full(), &cancel, &progress);
    assert!(matches!(result, Err(StatsError::Cancelled)), "{result:?}");
    assert!(
        progress.done() > 0 && progress.done() < progress.total(),
        "{progress:?}"
    );
}

#[test]
fn a_file_that_changed_since_it_was_opened_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tensor = RefTensor {
        dtype: safetensors::Dtype::F32,
        shape: vec![1024],
        data: f32_bytes((0..1024).map(|i| i as f32)),
    };
    let file = reference_file(&[("t".to_owned(), tensor)], None);
    let path = write(dir.path(), "m.safetensors", &file);
    let ck = Checkpoint::open(&path).expect("valid");
    // Truncate the mapped file: reading its pages now would raise SIGBUS.
    std::fs::write(&path, &file[..100]).expect("truncate");
    let result = scan(
        &ck,
        ck.tensors(),
        &full(),
        &CancelToken::new(),
        &Progress::new(),
    );
    match result {
        Err(StatsError::Load(e)) => assert_eq!(e.kind(), "Changed"),
        other => panic!("expected a Changed error, got {other:?}"),
    }
}
