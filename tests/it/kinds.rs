//! One test per reference error kind, built from bytes, checked against the
//! reference and for our evidence; and the fine print of check 6.

use tensorscope::format::{FormatError, parse};

use crate::fixtures::{one_tensor, with_header};
use crate::oracle::{RefVerdict, assert_same_verdict, reference};

fn expect_kind(bytes: &[u8], kind: &str) -> FormatError {
    assert_eq!(
        reference(bytes),
        RefVerdict::Err(kind.to_owned()),
        "reference"
    );
    let e = parse(bytes).expect_err("ours must reject");
    assert_eq!(e.kind(), kind, "ours: {e}");
    e
}

#[test]
fn header_too_small() {
    for len in 0..8 {
        let e = expect_kind(&vec![0u8; len], "HeaderTooSmall");
        assert!(e.to_string().contains(&format!("{len} bytes")));
    }
}

#[test]
fn header_too_large_is_checked_before_the_file_length() {
    let mut bytes = (100_000_001u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    expect_kind(&bytes, "HeaderTooLarge");
    let e = expect_kind(&u64::MAX.to_le_bytes(), "HeaderTooLarge");
    assert!(e.to_string().contains(&u64::MAX.to_string()));
}

#[test]
fn invalid_header_length() {
    let mut bytes = 10u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    let e = expect_kind(&bytes, "InvalidHeaderLength");
    assert!(e.to_string().contains("8..18"), "{e}");
}

#[test]
fn invalid_header_utf8() {
    let mut bytes = 4u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{\xff}\x20");
    let e = expect_kind(&bytes, "InvalidHeader");
    assert!(e.to_string().contains("offset 9"), "{e}");
}

#[test]
fn invalid_header_deserialization() {
    let e = expect_kind(&with_header("{\"a\":1}", 0), "InvalidHeaderDeserialization");
    assert!(matches!(
        e,
        FormatError::InvalidHeaderDeserialization { .. }
    ));
}

#[test]
fn invalid_offset_names_the_tensor() {
    let h = r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"gap":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}"#;
    let e = expect_kind(&with_header(h, 3), "InvalidOffset");
    assert_eq!(e.tensor(), Some("gap"));
    assert!(e.to_string().contains("gap"), "{e}");
    // The reference names the tensor too.
    let theirs = safetensors::SafeTensors::read_metadata(&with_header(h, 3)).expect_err("invalid");
    assert!(format!("{theirs:?}").contains("gap"));
}

#[test]
fn invalid_offset_end_before_begin() {
    let e = expect_kind(
        &with_header(&one_tensor("U8", &[0], [1, 0]), 0),
        "InvalidOffset",
    );
    assert!(e.to_string().contains("[1, 0]"), "{e}");
}

#[test]
fn validation_overflow() {
    let e = expect_kind(
        &with_header(&one_tensor("F32", &[1 << 62, 8], [0, 0]), 0),
        "ValidationOverflow",
    );
    assert_eq!(e.tensor(), Some("t"));
    // Elements fit, bits do not.
    expect_kind(
        &with_header(&one_tensor("F64", &[1 << 60], [0, 0]), 0),
        "ValidationOverflow",
    );
}

#[test]
fn misaligned_slice() {
    let e = expect_kind(
        &with_header(&one_tensor("F4", &[3], [0, 1]), 1),
        "MisalignedSlice",
    );
    assert!(e.to_string().contains("12 bits"), "{e}");
    expect_kind(
        &with_header(&one_tensor("F6_E2M3", &[2], [0, 1]), 1),
        "MisalignedSlice",
    );
}

#[test]
fn tensor_invalid_info() {
    let e = expect_kind(
        &with_header(&one_tensor("F32", &[2], [0, 4]), 4),
        "TensorInvalidInfo",
    );
    assert!(e.to_string().contains("needs 8"), "{e}");
}

#[test]
fn metadata_incomplete_buffer() {
    let e = expect_kind(
        &with_header(&one_tensor("F32", &[2], [0, 8]), 7),
        "MetadataIncompleteBuffer",
    );
    assert!(e.to_string().contains("truncated by 1"), "{e}");
    let e = expect_kind(
        &with_header(&one_tensor("F32", &[2], [0, 8]), 9),
        "MetadataIncompleteBuffer",
    );
    assert!(e.to_string().contains("1 trailing"), "{e}");
}

#[test]
fn foreign_formats_are_named_and_keep_the_reference_kind() {
    let cases: [(&[u8], &str); 6] = [
        (
            b"PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl",
            "pytorch-zip",
        ),
        (b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.", "pickle"),
        (
            b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94.",
            "pickle",
        ),
        (
            b"GGUF\x03\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00",
            "gguf",
        ),
        (
            b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False}",
            "npy",
        ),
        (b"\x89HDF\r\n\x1a\n\x00\x00\x00\x00\x00\x08\x08\x00", "hdf5"),
    ];
    for (bytes, id) in cases {
        let theirs = reference(bytes);
        let e = parse(bytes).expect_err("not safetensors");
        assert_eq!(theirs, RefVerdict::Err(e.kind().to_owned()), "{id}");
        assert_eq!(
            e.detected_format()
                .map(tensorscope::format::ForeignFormat::id),
            Some(id),
            "{id}"
        );
        assert!(e.to_string().contains("not safetensors"), "{e}");
    }
    // A valid file whose header length starts with 0x80 0x02 is not a pickle.
    let pad = " ".repeat(640 - 2);
    let bytes = with_header(&format!("{{}}{pad}"), 0);
    assert_eq!(&bytes[..2], b"\x80\x02");
    assert!(parse(&bytes).is_ok());
}

/// The fine print of check 6 (FORMAT.md), each compared with the reference.
#[test]
fn json_fine_print_matches_the_reference() {
    let t = |fields: &str| format!(r#"{{"t":{{{fields}}}}}"#);
    let ok_fields = r#""dtype":"U8","shape":[1],"data_offsets":[0,1]"#;
    let mut headers: Vec<(String, bool)> = vec![
        (t(ok_fields), true),
        (t(r#""dtype":"u8","shape":[1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[1.0],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[1e0],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[-1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[1],"data_offsets":[-0,1]"#), false),
        (t(r#""dtype":"U8","shape":["1"],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[01],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[1],"data_offsets":[0,1,2]"#), false),
        (t(r#""dtype":"U8","shape":[1],"data_offsets":[0]"#), false),
        (t(r#""dtype":"U8","shape":[1],"data_offsets":{"0":0,"1":1}"#), false),
        (t(r#""dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":"U8","shape":[1]"#), false),
        (t(r#""dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":{"x":[1,2,{"y":null}]}"#), true),
        (t(r#""dtype":"U8","shape":null,"data_offsets":[0,1]"#), false),
        (t(r#""dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]"#), true),
        (t(r#""dtype":{"U8":{}},"shape":[1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":{"U8":[]},"shape":[1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":{"U8":0},"shape":[1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":["U8"],"shape":[1],"data_offsets":[0,1]"#), false),
        (t(r#""dtype":7,"shape":[1],"data_offsets":[0,1]"#), false),
        (r#"{"t":["U8",[1],[0,1]]}"#.into(), true),
        (r#"{"t":["U8",[1],[0,1],null]}"#.into(), false),
        (r#"{"t":["U8",[1]]}"#.into(), false),
        (r#"{"t":null}"#.into(), false),
        (r#"{"t":"U8"}"#.into(), false),
        (r#"{"__metadata__":null}"#.into(), true),
        (r#"{"__metadata__":{}}"#.into(), true),
        (r#"{"__metadata__":{"a":"b","a":"c"}}"#.into(), true),
        (r#"{"__metadata__":{"a":1}}"#.into(), false),
        (r#"{"__metadata__":{"a":null}}"#.into(), false),
        (r#"{"__metadata__":[]}"#.into(), false),
        (r#"{"__metadata__":"x"}"#.into(), false),
        (r#"{"__metadata__":{},"__metadata__":{}}"#.into(), false),
        (r#"{"__metadat\u0061__":{"k":"v"}}"#.into(), true),
        (r#"{"__metadat\u0061__":{"k":"v"},"__metadata__":null}"#.into(), false),
        (" \t\r\n{}".into(), true),
        ("{} \t\r\n".into(), true),
        ("{}\0".into(), false),
        ("\u{feff}{}".into(), false),
        ("{}x".into(), false),
        ("[]".into(), false),
        ("null".into(), false),
        (String::new(), false),
        (r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\u0061":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#.into(), false),
        (r#"{"\ud800":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#.into(), false),
        (r#"{"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#.into(), true),
        (r#"{"\u0000\n":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}"#.into(), true),
    ];
    // Nesting: 127 levels pass, 128 fail, also inside an ignored field.
    for (levels, ok) in [(127usize, true), (128, false), (400, false)] {
        let inner = "[".repeat(levels - 2) + &"]".repeat(levels - 2);
        headers.push((t(&format!("{ok_fields},\"x\":{inner}")), ok));
        let inner_obj = "{\"k\":".repeat(levels - 2) + "1" + &"}".repeat(levels - 2);
        headers.push((t(&format!("{ok_fields},\"x\":{inner_obj}")), ok));
    }
    for (h, expect_ok) in headers {
        // data: the valid entries above all use 1 byte (or none).
        let data = usize::from(h.contains("[0,1]"));
        let bytes = with_header(&h, data);
        assert_same_verdict(&bytes);
        assert_eq!(
            parse(&bytes).is_ok(),
            expect_ok,
            "header {}",
            h.chars().take(200).collect::<String>()
        );
    }
}

/// A header length whose low byte is 0x80 (a pickle's first opcode) and a
/// header that fails to parse: the file is a safetensors file by its
/// length and its `{`, and gets safetensors' verdict, never a pickle's.
#[test]
fn a_length_that_looks_like_a_pickle_keeps_the_safetensors_verdict() {
    let header = format!("{{\"a\":1{}}}", " ".repeat(0x80 - 7));
    let bytes = with_header(&header, 0);
    assert_eq!(bytes[0], 0x80);
    expect_kind(&bytes, "InvalidHeaderDeserialization");
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["m.safetensors", "m.bin", "m.pt"] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).expect("write");
        let e = tensorscope::format::StoredFile::open(&path).expect_err("refused");
        assert_eq!(e.kind(), "InvalidHeaderDeserialization", "{name}: {e}");
    }
}
