//! Each hostile input of FRAMEWORKS.md ("ONNX"), built in code: refused
//! cleanly (or read in bounded time), never a panic.

use std::cell::Cell;
use std::io;

use super::*;

#[test]
fn external_locations_outside_are_refused_before_any_size_is_asked() {
    for bad in [
        "../../x",
        "/etc/passwd",
        "\\\\server\\share",
        "C:\\x",
        "https://example.com/x",
        "a/../../x",
        "",
        "x\0",
    ] {
        let calls = Cell::new(0);
        let size = |_: &str| {
            calls.set(calls.get() + 1);
            Ok(1 << 30)
        };
        // A good external tensor first: still nothing is asked.
        let bytes = model(
            &[
                external("ok", 1, &[1], &[("location", "w.bin")]),
                external("bad", 1, &[1], &[("location", bad)]),
            ],
            &[],
        );
        let e = open(&bytes, &size).unwrap_err();
        assert_eq!(e.kind(), "ExternalDataOutside", "{bad:?}: {e}");
        assert_eq!(e.tensor(), Some("bad"));
        assert_eq!(calls.get(), 0, "{bad:?}");
    }
}

#[test]
fn external_files_missing_short_or_of_another_length_are_refused() {
    let files = Files {
        sizes: &[("w.bin", 16)],
        calls: Cell::new(0),
    };
    let size = |l: &str| files.size(l);
    let case = |entries: &[(&str, &str)]| {
        open(&model(&[external("t", 1, &[4], entries)], &[]), &size).unwrap_err()
    };
    assert_eq!(
        case(&[("location", "gone.bin")]).kind(),
        "ExternalDataMissing"
    );
    assert_eq!(
        case(&[("location", "w.bin"), ("offset", "4")]).kind(),
        "ExternalDataShort"
    );
    assert_eq!(
        case(&[("location", "w.bin"), ("offset", "18446744073709551615")]).kind(),
        "ExternalDataShort"
    );
    assert_eq!(
        case(&[("location", "w.bin"), ("length", "12")]).kind(),
        "SizeMismatch"
    );
    assert_eq!(
        case(&[("location", "w.bin"), ("offset", "-1")]).kind(),
        "ExternalDataInvalid"
    );
    assert_eq!(case(&[("offset", "0")]).kind(), "ExternalDataInvalid");
    // A symlink leading out, as the integrator reports it.
    let e = open(
        &model(&[external("t", 1, &[4], &[("location", "link.bin")])], &[]),
        &|_| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "resolves outside",
            ))
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), "ExternalDataOutside");
}

#[test]
fn a_shape_of_2_to_the_64_elements_over_32_bytes_is_refused() {
    let t = raw("huge", 1, &[1 << 31, 1 << 31, 4], &[0; 32]);
    let e = open_local(&model(&[t], &[])).unwrap_err();
    assert_eq!(e.kind(), "InvalidShape");
    assert_eq!(e.tensor(), Some("huge"));
    // Within u64, but not the bytes present.
    let t = raw("big", 1, &[1 << 20, 1 << 20], &[0; 32]);
    assert_eq!(
        open_local(&model(&[t], &[])).unwrap_err().kind(),
        "SizeMismatch"
    );
}

#[test]
fn raw_data_shorter_than_the_shape_is_refused() {
    let t = raw("w", 1, &[2, 3], &[0; 20]);
    let e = open_local(&model(&[t], &[])).unwrap_err();
    assert_eq!(e.kind(), "SizeMismatch");
    assert!(e.to_string().contains("raw_data holds 20 bytes"), "{e}");
}

#[test]
fn a_negative_dim_is_refused() {
    let t = raw("w", 1, &[2, -3], &[0; 24]);
    let e = open_local(&model(&[t], &[])).unwrap_err();
    assert_eq!(e.kind(), "InvalidShape");
    assert!(e.to_string().contains("-3"), "{e}");
}

#[test]
fn a_length_prefix_of_4_gib_in_a_small_file_is_refused() {
    // ModelProto.graph with a 4 GiB length, then 10 bytes.
    let mut bytes = vec![0x3a];
    put_varint(&mut bytes, 4 << 30);
    bytes.extend_from_slice(&[0; 10]);
    let e = open_local(&bytes).unwrap_err();
    assert_eq!(e.kind(), "Truncated");
    // The same inside a tensor (raw_data).
    let mut t = tensor("w", 1, &[1]);
    t.key(9, 2);
    put_varint(&mut t.0, 4 << 30);
    let mut g = W::default();
    g.msg(5, &t);
    let mut m = W::default();
    m.msg(7, &g);
    assert_eq!(open_local(&m.0).unwrap_err().kind(), "Truncated");
}

/// graph > node > attribute > graph ... `depth` times, built inside out
/// in linear time (nested messages are only their headers, outer first).
fn nested(depth: usize) -> Vec<u8> {
    let mut headers: Vec<Vec<u8>> = Vec::with_capacity(depth * 3 + 1);
    let mut inner_len = 0u64;
    for i in 0..depth * 3 {
        // Inside out: attribute.g (6), node.attribute (5), graph.node (1).
        let field = [6u64, 5, 1][i % 3];
        let mut h = Vec::new();
        put_varint(&mut h, (field << 3) | 2);
        put_varint(&mut h, inner_len);
        inner_len += h.len() as u64;
        headers.push(h);
    }
    let mut out = Vec::new();
    put_varint(&mut out, (7 << 3) | 2);
    put_varint(&mut out, inner_len);
    for h in headers.iter().rev() {
        out.extend_from_slice(h);
    }
    out
}

#[test]
fn a_hundred_thousand_nested_messages_cost_nothing() {
    let bytes = nested(100_000);
    assert!(bytes.len() > 300_000);
    let start = std::time::Instant::now();
    let o = open_local(&bytes).unwrap();
    assert!(o.tensors.is_empty());
    // Not a timing assertion of the code's speed: a guard against a walk
    // that descends (which would take minutes or overflow the stack).
    assert!(start.elapsed().as_secs() < 10);
}

#[test]
fn two_tensors_of_one_name_are_refused() {
    let a = raw("w", 2, &[1], &[1]);
    let e = open_local(&model(&[a.clone(), a.clone()], &[])).unwrap_err();
    assert_eq!((e.kind(), e.tensor()), ("DuplicateTensor", Some("w")));
    let e = open_local(&model(&[a], &[constant("w", &raw("", 2, &[1], &[1]))])).unwrap_err();
    assert_eq!((e.kind(), e.tensor()), ("DuplicateTensor", Some("w")));
}

#[test]
fn a_typed_field_of_another_count_is_refused() {
    for t in [
        tensor("t", 1, &[3]).bytes(4, &[0; 8]).done(),
        tensor("t", 14, &[2]).bytes(4, &[0; 8]).done(),
        tensor("t", 6, &[1]).packed_varints(5, &[1, 2]).done(),
        // Data in the wrong field is no data.
        tensor("t", 1, &[1]).packed_varints(7, &[1]).done(),
        // No data for a non-empty tensor.
        tensor("t", 1, &[1]),
    ] {
        let e = open_local(&model(&[t], &[])).unwrap_err();
        assert_eq!(e.kind(), "SizeMismatch", "{e}");
    }
    // A packed float field that is not whole floats.
    let t = tensor("t", 1, &[1]).bytes(4, &[0; 5]).done();
    assert_eq!(
        open_local(&model(&[t], &[])).unwrap_err().kind(),
        "InvalidProtobuf"
    );
}

#[test]
fn an_int4_initializer_refuses_the_whole_model() {
    for (n, name) in [
        (22, "INT4"),
        (21, "UINT4"),
        (23, "FLOAT4E2M1"),
        (25, "UINT2"),
        (26, "INT2"),
        (15, "COMPLEX128"),
        (8, "STRING"),
        (0, "UNDEFINED"),
        (99, "unknown"),
    ] {
        let bytes = model(
            &[raw("good", 1, &[1], &[0; 4]), raw("q", n, &[2], &[0x21])],
            &[],
        );
        let e = open_local(&bytes).unwrap_err();
        assert_eq!((e.kind(), e.tensor()), ("UnsupportedDtype", Some("q")));
        assert!(e.to_string().contains(name), "{e}");
    }
    // In a Constant too.
    let bytes = model(&[], &[constant("c", &raw("", 22, &[2], &[0x21]))]);
    assert_eq!(open_local(&bytes).unwrap_err().tensor(), Some("c"));
}

#[test]
fn segments_groups_and_bad_names_are_refused() {
    let t = raw("s", 1, &[1], &[0; 4])
        .msg(3, W::default().varint(1, 0).varint(2, 1))
        .done();
    assert_eq!(
        open_local(&model(&[t], &[])).unwrap_err().kind(),
        "UnsupportedSegment"
    );
    let mut t = raw("g", 1, &[1], &[0; 4]);
    t.key(15, 3);
    assert_eq!(
        open_local(&model(&[t], &[])).unwrap_err().kind(),
        "InvalidProtobuf"
    );
    let mut t = tensor("", 2, &[1]).bytes(9, &[1]).done();
    t.bytes(8, &[0xff, 0xfe]);
    assert_eq!(
        open_local(&model(&[t], &[])).unwrap_err().kind(),
        "InvalidProtobuf"
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap in-test fuzz: every prefix and single-byte mutation of a
    // model with one tensor of each kind.
    let bytes = model(
        &[
            raw("w", 1, &[2], &[0; 8]),
            tensor("t", 6, &[2]).packed_varints(5, &[1, 2]).done(),
            external("e", 1, &[1], &[("location", "w.bin")]),
        ],
        &[constant("k", &raw("", 9, &[1], &[1]))],
    );
    let size = |_: &str| Ok(4);
    for cut in 0..bytes.len() {
        if let Ok(o) = open(&bytes[..cut], &size) {
            for t in &o.tensors {
                if let Data::Decoded(d) = &t.data {
                    let _ = d.decode(&[&bytes[..cut], &[0; 4]], &CancelToken::new(), &mut |_| {
                        Ok(())
                    });
                }
            }
        }
    }
    for i in 0..bytes.len() {
        for v in [0u8, 0x7f, 0x80, 0xff] {
            let mut m = bytes.clone();
            m[i] = v;
            if let Ok(o) = open(&m, &size) {
                for t in &o.tensors {
                    if let Data::Decoded(d) = &t.data {
                        let _ = d.decode(&[&m, &[0; 4]], &CancelToken::new(), &mut |_| Ok(()));
                    }
                }
            }
        }
    }
}

#[test]
fn what_is_kept_is_bounded() {
    // More dimensions than numpy allows.
    let t = raw("deep", 1, &[1; 65], &[0; 4]);
    let e = open_local(&model(&[t], &[])).unwrap_err();
    assert_eq!(e.kind(), "InvalidShape");
    assert!(open_local(&model(&[raw("ok", 1, &[1; 64], &[0; 4])], &[])).is_ok());
    // A graph field repeated past the bound.
    let mut m = W::default();
    for _ in 0..=model::MAX_PARTS {
        m.msg(7, &W::default());
    }
    assert_eq!(open_local(&m.0).unwrap_err().kind(), "InvalidProtobuf");
    // Metadata past the bound is counted, not kept.
    let mut m = W::default();
    for i in 0..model::MAX_ENTRIES + 10 {
        m.msg(14, W::default().str(1, &format!("k{i}")).str(2, "v"));
    }
    let o = open_local(&m.0).unwrap();
    assert_eq!(o.warnings.len(), 1);
    // An external_data value of more than 64 KiB.
    let long = "a".repeat(70_000);
    let t = external("t", 1, &[1], &[("location", &long)]);
    assert_eq!(
        open_local(&model(&[t], &[])).unwrap_err().kind(),
        "InvalidProtobuf"
    );
}
