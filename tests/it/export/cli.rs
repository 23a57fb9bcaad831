//! The `export` verb: its JSON report, and its errors as one JSON document
//! with exit code 2.

use crate::exe::OutputOnceMore as _;
use safetensors::Dtype as RefDtype;

use super::every_dtype;
use crate::fixtures::{RefTensor, reference_file, write};

fn cli(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value) {
    let out = crate::exe::command()
        .args(args)
        .output_once_more()
        .expect("run tensorscope");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON document ({e}): {stdout:?} / {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), doc)
}

#[test]
fn the_export_verb_reports_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = every_dtype(dir.path());
    let out = dir.path().join("q.npy");
    let os = std::ffi::OsStr::new;
    let (code, doc) = cli(&[
        os("export"),
        src.as_os_str(),
        os("t_F8_E4M3"),
        os("-o"),
        out.as_os_str(),
        os("--raw"),
        os("--json"),
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["tensor"], "t_F8_E4M3");
    assert_eq!(doc["dtype"], "F8_E4M3");
    assert_eq!(doc["format"], "npy");
    assert_eq!(doc["encoding"], "raw-codes");
    assert_eq!(doc["npy_descr"], "|u1");
    assert_eq!(doc["npy_version"], "1.0");
    assert_eq!(doc["shape"], serde_json::json!([2, 3, 4]));
    assert_eq!(doc["elements"], 24);
    assert_eq!(
        doc["bytes_written"],
        std::fs::metadata(&out).expect("out").len()
    );
    let (code, doc) = cli(&[
        os("export"),
        src.as_os_str(),
        os("nope"),
        os("-o"),
        out.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "UnknownTensor");
    let txt = dir.path().join("q.txt");
    let (code, doc) = cli(&[
        os("export"),
        src.as_os_str(),
        os("t_F32"),
        os("-o"),
        txt.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "UnknownFormat");
    // Over the CSV limit of 10,000,000 elements: refused without --force.
    let big = vec![(
        "big".to_owned(),
        RefTensor {
            dtype: RefDtype::U8,
            shape: vec![10_000_001],
            data: vec![0; 10_000_001],
        },
    )];
    let big_src = write(dir.path(), "big.safetensors", &reference_file(&big, None));
    let csv = dir.path().join("big.csv");
    let (code, doc) = cli(&[
        os("export"),
        big_src.as_os_str(),
        os("big"),
        os("-o"),
        csv.as_os_str(),
        os("--json"),
    ]);
    assert_eq!(code, 2);
    assert_eq!(doc["error"]["kind"], "CsvTooLarge");
    assert!(!csv.exists());
}
