//! `.csv`: one row per index of the first axis, values that read back as
//! the same floats, exact integers, complex numbers, raw codes, and the
//! element limit that needs `--force`.

use std::path::Path;

use half::{bf16, f16};
use safetensors::Dtype as RefDtype;
use tensorscope::export::{ExportError, ExportOptions, SizeLimit};
use tensorscope::format::Checkpoint;

use super::{every_dtype, export, raw};
use crate::fixtures::{RefTensor, reference_file, write};

fn read_csv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .expect("csv")
        .lines()
        .map(|l| {
            if l.is_empty() {
                Vec::new()
            } else {
                l.split(',').map(str::to_owned).collect()
            }
        })
        .collect()
}

fn same_f32(text: &str, want: f32) -> bool {
    let got: f32 = text.parse().unwrap_or_else(|_| panic!("{text:?} parses"));
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

#[test]
fn csv_rows_follow_the_first_axis_and_values_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f32s: Vec<f32> = vec![
        0.0,
        -0.0,
        1.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-7,
        3.4e38,
        f32::MIN_POSITIVE / 8.0,
        -123.456,
        0.1,
        7.0,
    ];
    let i64s: Vec<i64> = vec![i64::MIN, -1, 0, 1, i64::MAX];
    let c64: Vec<f32> = vec![1.0, -2.0, f32::NAN, 0.5, -0.0, f32::INFINITY, 3.0, 4.0];
    let tensors = vec![
        (
            "m".to_owned(),
            RefTensor {
                dtype: RefDtype::F32,
                shape: vec![3, 2, 2],
                data: f32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "v".to_owned(),
            RefTensor {
                dtype: RefDtype::I64,
                shape: vec![5],
                data: i64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "c".to_owned(),
            RefTensor {
                dtype: RefDtype::C64,
                shape: vec![2, 2],
                data: c64.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
        ),
        (
            "b".to_owned(),
            RefTensor {
                dtype: RefDtype::BF16,
                shape: vec![2],
                data: [bf16::from_f32(-2.5), bf16::from_f32(1.0 / 3.0)]
                    .iter()
                    .flat_map(|h| h.to_le_bytes())
                    .collect(),
            },
        ),
        (
            "s".to_owned(),
            RefTensor {
                dtype: RefDtype::F16,
                shape: vec![],
                data: f16::from_f32(0.333).to_le_bytes().to_vec(),
            },
        ),
        (
            "e".to_owned(),
            RefTensor {
                dtype: RefDtype::U8,
                shape: vec![3, 0],
                data: Vec::new(),
            },
        ),
        (
            "p".to_owned(),
            RefTensor {
                dtype: RefDtype::F4,
                shape: vec![2, 2],
                data: vec![0x21, 0xf9],
            },
        ),
    ];
    let src = write(
        dir.path(),
        "csv.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("m.csv");
    export(&ck, "m", &out, &ExportOptions::default()).expect("m");
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 3, "one row per index of the first axis");
    for (r, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), 4, "the other axes flattened");
        for (c, cell) in row.iter().enumerate() {
            assert!(
                same_f32(cell, f32s[r * 4 + c]),
                "{cell} vs {}",
                f32s[r * 4 + c]
            );
        }
    }
    let out = dir.path().join("v.csv");
    export(&ck, "v", &out, &ExportOptions::default()).expect("v");
    let rows = read_csv(&out);
    let back: Vec<i64> = rows.iter().map(|r| r[0].parse().expect("int")).collect();
    assert_eq!(back, i64s, "integers are exact");
    let out = dir.path().join("c.csv");
    export(&ck, "c", &out, &ExportOptions::default()).expect("c");
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        "1.0-2.0j,nan+0.5j\n-0.0+infj,3.0+4.0j\n"
    );
    let out = dir.path().join("b.csv");
    export(&ck, "b", &out, &ExportOptions::default()).expect("b");
    let rows = read_csv(&out);
    assert!(same_f32(&rows[0][0], -2.5));
    assert!(same_f32(&rows[1][0], bf16::from_f32(1.0 / 3.0).to_f32()));
    export(&ck, "b", &out, &raw()).expect("b raw");
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        format!(
            "{}\n{}\n",
            bf16::from_f32(-2.5).to_bits(),
            bf16::from_f32(1.0 / 3.0).to_bits()
        )
    );
    let out = dir.path().join("s.csv");
    export(&ck, "s", &out, &ExportOptions::default()).expect("s");
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 1, "a scalar is one row");
    assert!(same_f32(&rows[0][0], f16::from_f32(0.333).to_f32()));
    let out = dir.path().join("e.csv");
    export(&ck, "e", &out, &ExportOptions::default()).expect("e");
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        "",
        "no elements, no rows"
    );
    let out = dir.path().join("p.csv");
    export(&ck, "p", &out, &ExportOptions::default()).expect("p");
    // 0x21: codes 1, 2 (0.5, 1.0); 0xf9: codes 9, 15 (-0.5, -6.0).
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv"),
        "0.5,1.0\n-0.5,-6.0\n"
    );
    export(&ck, "p", &out, &raw()).expect("p raw");
    assert_eq!(std::fs::read_to_string(&out).expect("csv"), "1,2\n9,15\n");
}

#[test]
fn csv_over_the_limit_needs_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("big.csv");
    let limited = ExportOptions {
        csv_max_elements: 10,
        ..ExportOptions::default()
    };
    let e = export(&ck, "t_F32", &out, &limited).expect_err("over the limit");
    assert!(
        matches!(
            e,
            ExportError::CsvTooLarge {
                elements: 24,
                limit: 10
            }
        ),
        "{e}"
    );
    assert!(!out.exists());
    let forced = ExportOptions {
        size_limit: SizeLimit::Ignore,
        ..limited
    };
    export(&ck, "t_F32", &out, &forced).expect("forced");
    assert_eq!(read_csv(&out).len(), 2);
}
