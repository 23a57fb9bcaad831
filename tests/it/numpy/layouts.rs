//! A property of the container model: every verb gives the same answer on a
//! tensor stored byte-swapped, in Fortran order, or both, or deflated in an
//! archive, as on its contiguous little-endian copy (statistics, the
//! exported `.npy`, the re-saved `.safetensors`, and a diff that finds
//! them identical). Cases: `PROPTEST_CASES` (default 24; each runs the
//! binary about twenty times).

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::{diff, export, npy_bytes, resave, stats};

/// The element types a `.npy` may hold: descr code, element size, and the
/// unit a byte swap reverses (each half of a complex number).
const KINDS: &[(&str, usize, usize)] = &[
    ("b1", 1, 1),
    ("i1", 1, 1),
    ("u1", 1, 1),
    ("f2", 2, 2),
    ("i2", 2, 2),
    ("u2", 2, 2),
    ("f4", 4, 4),
    ("i4", 4, 4),
    ("u4", 4, 4),
    ("c8", 8, 4),
    ("f8", 8, 8),
    ("i8", 8, 8),
    ("u8", 8, 8),
];

/// A `.npy` of `shape` whose elements (already in the stored order and
/// byte order) are `data`.
fn npy(descr: &str, fortran: bool, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let tuple = match dims.len() {
        0 => "()".to_owned(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {tuple}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    npy_bytes((1, 0), header.as_bytes(), data)
}

/// `c` (C order) laid out column-major.
fn to_fortran(c: &[u8], shape: &[u64], size: usize) -> Vec<u8> {
    let numel: u64 = shape.iter().product();
    let mut c_strides = vec![1u64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        c_strides[k] = c_strides[k + 1] * shape[k + 1];
    }
    let mut out = Vec::with_capacity(c.len());
    for f in 0..numel {
        let (mut rest, mut at) = (f, 0u64);
        for (k, &d) in shape.iter().enumerate() {
            at += (rest % d) * c_strides[k];
            rest /= d;
        }
        let at = at as usize * size;
        out.extend_from_slice(&c[at..at + size]);
    }
    out
}

/// Every unit of `data` byte-reversed.
fn swapped(data: &[u8], unit: usize) -> Vec<u8> {
    let mut out = data.to_vec();
    for u in out.chunks_exact_mut(unit) {
        u.reverse();
    }
    out
}

fn deflated_npz(member: &str, npy: &[u8]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    zip.start_file(member, options).expect("member");
    zip.write_all(npy).expect("write");
    zip.finish().expect("finish").into_inner()
}

/// What the verbs say of the one tensor `t` of `file`: its statistics, the
/// exported `.npy` and the re-saved file's bytes.
fn answers(file: &Path, out: &Path) -> (serde_json::Value, Vec<u8>, Vec<u8>) {
    let s = stats(file, &[]);
    assert_eq!(s.code, 0, "{}: {}", file.display(), s.doc);
    let exported = out.join("exported.npy");
    let e = export(file, "t", &exported);
    assert_eq!(e.code, 0, "{}: {}", file.display(), e.doc);
    let saved = out.join("t.safetensors");
    let r = resave(file, &saved);
    assert_eq!(r.code, 0, "{}: {}", file.display(), r.doc);
    (
        s.doc["tensors"][0].clone(),
        std::fs::read(&exported).expect("exported"),
        std::fs::read(&saved).expect("saved"),
    )
}

fn case() -> impl Strategy<Value = (usize, Vec<u64>, Vec<u8>)> {
    (
        0..KINDS.len(),
        prop::collection::vec(1u64..5, 0..4),
        any::<u64>(),
    )
        .prop_map(|(kind, shape, seed)| {
            let (code, size, _) = KINDS[kind];
            let numel: u64 = shape.iter().product();
            let mut x = seed | 1;
            let data = (0..numel as usize * size)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if code == "b1" { (x & 1) as u8 } else { x as u8 }
                })
                .collect();
            (kind, shape, data)
        })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn every_verb_sees_a_reordered_tensor_as_its_c_order_copy((kind, shape, c) in case()) {
        let (code, size, unit) = KINDS[kind];
        let dir = tempfile::tempdir().expect("tempdir");
        let place = |name: &str, bytes: &[u8]| -> PathBuf {
            let sub = dir.path().join(name);
            std::fs::create_dir_all(&sub).expect("folder");
            let file = sub.join(if bytes.starts_with(b"PK") { "t.npz" } else { "t.npy" });
            std::fs::write(&file, bytes).expect("write");
            file
        };
        let fortran = to_fortran(&c, &shape, size);
        let base = place("base", &npy(&format!("<{code}"), false, &shape, &c));
        let big = if size > 1 { format!(">{code}") } else { format!("|{code}") };
        let variants = [
            ("big", npy(&big, false, &shape, &swapped(&c, unit))),
            ("fortran", npy(&format!("<{code}"), true, &shape, &fortran)),
            ("big_fortran", npy(&big, true, &shape, &swapped(&fortran, unit))),
            ("npz", deflated_npz("t.npy", &npy(&big, true, &shape, &swapped(&fortran, unit)))),
        ];
        let want = answers(&base, base.parent().expect("folder"));
        for (label, bytes) in variants {
            let file = place(label, &bytes);
            let got = answers(&file, file.parent().expect("folder"));
            prop_assert_eq!(&got.0, &want.0, "{} {} {:?}: statistics", label, code, &shape);
            prop_assert!(got.1 == want.1, "{} {} {:?}: exported .npy differs", label, code, &shape);
            prop_assert!(got.2 == want.2, "{} {} {:?}: re-saved file differs", label, code, &shape);
            let d = diff(&file, &base);
            prop_assert_eq!(d.code, 0, "{} {} {:?}: {}", label, code, &shape, d.doc);
        }
    }
}
