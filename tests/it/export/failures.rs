//! Failed and refused exports: a short write or a cancel leaves the target
//! and no temporary file, the source is never a target, and empty tensors
//! with huge dimensions export without overflow (as .npy only within
//! NumPy's 2^63 - 1).

use safetensors::Dtype as RefDtype;
use tensorscope::export::{ExportError, ExportOptions, export_tensor};
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};

use super::{every_dtype, export, parse_npy};
use crate::fixtures::{RefTensor, one_tensor, reference_file, with_header, write};
use crate::resave::listing;

#[test]
fn failures_leave_the_target_and_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    let target = write(dir.path(), "target.npy", b"previous content");
    let before = listing(dir.path());
    // A short write (a full disk) at several points, in every format.
    for name in ["target.npy", "target.csv", "target.bin", "target.png"] {
        let out = dir.path().join(name);
        for fail_after in [0u64, 5, 130] {
            let opts = ExportOptions {
                fail_after_bytes: Some(fail_after),
                ..ExportOptions::default()
            };
            let e = export(&ck, "t_F64", &out, &opts).expect_err("short write");
            assert_eq!(e.kind(), "Io", "{name} {fail_after}: {e}");
        }
    }
    assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
    assert_eq!(listing(dir.path()), before);
    // Cancelled.
    let cancel = CancelToken::new();
    cancel.cancel();
    for name in ["target.npy", "target.csv", "target.bin", "target.png"] {
        let out = dir.path().join(name);
        let t = ck.find("t_BF16").expect("t");
        let e = export_tensor(
            &ck,
            t,
            &out,
            &ExportOptions::default(),
            &cancel,
            &Progress::new(),
        )
        .expect_err("cancelled");
        assert!(matches!(e, ExportError::Cancelled), "{name}: {e}");
    }
    assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
    assert_eq!(listing(dir.path()), before);
    // Under a regular file: no folder to write in, root included.
    let e = export(&ck, "t_F32", &src.join("x.npy"), &ExportOptions::default())
        .expect_err("not a folder");
    assert_eq!(e.kind(), "Io");
    // An unknown extension.
    let e = export(
        &ck,
        "t_F32",
        &dir.path().join("x.txt"),
        &ExportOptions::default(),
    )
    .expect_err("unknown");
    assert_eq!(e.kind(), "UnknownFormat");
    assert!(e.to_string().contains(".npy, .csv, .bin or .png"), "{e}");
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn the_source_file_is_never_an_export_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A checkpoint whose name has an export extension.
    let tensors = vec![(
        "x".to_owned(),
        RefTensor {
            dtype: RefDtype::U8,
            shape: vec![4],
            data: vec![1, 2, 3, 4],
        },
    )];
    let bytes = reference_file(&tensors, None);
    let src = write(dir.path(), "weights.bin", &bytes);
    let ck = Checkpoint::open(&src).expect("open");
    let e = export(&ck, "x", &src, &ExportOptions::default()).expect_err("refused");
    assert_eq!(e.kind(), "WouldOverwriteSource", "{e}");
    assert_eq!(std::fs::read(&src).expect("src"), bytes);
}

#[test]
fn empty_tensors_with_huge_dimensions_export_without_overflow() {
    // Valid (the element count is 0) although the other dimensions
    // multiply past 2^64.
    let dir = tempfile::tempdir().expect("tempdir");
    let header = one_tensor("F32", &[0, 1 << 40, 1 << 40], [0, 0]);
    let src = write(dir.path(), "zero.safetensors", &with_header(&header, 0));
    let ck = Checkpoint::open(&src).expect("valid");
    for ext in ["npy", "csv", "bin"] {
        let out = dir.path().join(format!("t.{ext}"));
        let report = export(&ck, "t", &out, &ExportOptions::default()).expect(ext);
        assert_eq!(report.elements, 0);
    }
    let npy = parse_npy(&std::fs::read(dir.path().join("t.npy")).expect("npy"));
    assert_eq!(npy.shape, [0, 1 << 40, 1 << 40]);
    assert!(npy.data.is_empty());
    assert_eq!(std::fs::read(dir.path().join("t.csv")).expect("csv"), b"");
    let e = export(
        &ck,
        "t",
        &dir.path().join("t.png"),
        &ExportOptions::default(),
    )
    .expect_err("nothing to draw");
    assert_eq!(e.kind(), "Heatmap");

    // A dimension of 2^63 or more is one NumPy cannot hold: .npy is refused
    // (numpy.load would fail on the file), .bin still works.
    let header = one_tensor("U8", &[0, 1 << 63], [0, 0]);
    let src = write(dir.path(), "wide.safetensors", &with_header(&header, 0));
    let ck = Checkpoint::open(&src).expect("valid");
    let out = dir.path().join("wide.npy");
    let e = export(&ck, "t", &out, &ExportOptions::default()).expect_err("beyond numpy");
    assert_eq!(e.kind(), "NumpyDimensionTooLarge", "{e}");
    assert!(e.to_string().contains("2^63 - 1"), "{e}");
    assert!(!out.exists());
    export(
        &ck,
        "t",
        &dir.path().join("wide.bin"),
        &ExportOptions::default(),
    )
    .expect("bin");
}
