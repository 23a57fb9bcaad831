//! Every hostile class of FRAMEWORKS.md ("Flax"), and other malformed
//! files, built in code: each refused quickly, with its kind, before
//! anything is allocated from a declared size.

use std::time::{Duration, Instant};

use super::msgpack::MAX_DEPTH;
use super::tests::{M, bytes_of, chunked, map, nd, s};
use super::{FlaxError, open};

fn refused(bytes: &[u8]) -> FlaxError {
    let start = Instant::now();
    let e = open(bytes).expect_err("refused");
    assert!(start.elapsed() < Duration::from_secs(2), "{e}: slow");
    e
}

#[test]
fn chunked_arrays_that_make_no_tensor_are_refused() {
    let one = || nd(&[2], "uint8", &[1, 2]);
    let cases = [
        chunked(&[4], vec![("0", one()), ("2", one())]),
        chunked(&[4], vec![("0", one()), ("1", nd(&[1], "uint16", &[1, 2]))]),
        chunked(&[5], vec![("0", one()), ("1", one())]),
        chunked(&[4], vec![("0", one()), ("01", one())]),
        chunked(&[4], vec![]),
        chunked(&[4], vec![("0", one()), ("1", M::U(3))]),
        chunked(&[2, 2], vec![("0", nd(&[2, 2], "uint8", &[1, 2, 3, 4]))]),
        map(vec![("__msgpack_chunked_array__", M::Bool(true))]),
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let e = refused(&bytes_of(&map(vec![("x", c)])));
        assert_eq!(
            (e.kind(), e.tensor()),
            ("BadChunkedArray", Some("x")),
            "{i}: {e}"
        );
    }
    let e = refused(&bytes_of(&map(vec![(
        "x",
        chunked(&[4], vec![("0", one())]),
    )])));
    assert!(e.to_string().contains("2 elements"), "{e}");
}

#[test]
fn a_chunked_array_missing_a_chunk_is_refused() {
    let file = bytes_of(&map(vec![(
        "emb",
        chunked(
            &[6],
            vec![
                ("0", nd(&[2], "uint8", &[1, 2])),
                ("1", nd(&[2], "uint8", &[3, 4])),
                ("3", nd(&[2], "uint8", &[5, 6])),
            ],
        ),
    )]));
    let e = refused(&file);
    assert_eq!(e.kind(), "BadChunkedArray");
    assert!(e.to_string().contains("\"2\""), "{e}");
}

#[test]
fn a_bin_of_2_gib_in_a_small_file_is_refused() {
    let mut file = vec![0x81, 0xa1, b'a', 0xc6, 0x80, 0, 0, 0];
    file.extend([0u8; 16]);
    let e = refused(&file);
    assert_eq!(e.kind(), "Truncated");
    assert!(e.to_string().contains("2147483648"), "{e}");
    // Inside an ndarray ext too.
    let mut payload = vec![0x93, 0x91, 0x10, 0xa5];
    payload.extend(b"uint8");
    payload.extend([0xc6, 0x80, 0, 0, 0]);
    let file = bytes_of(&map(vec![("t", M::Ext(1, payload))]));
    assert_eq!(refused(&file).kind(), "Truncated");
}

#[test]
fn a_count_of_2_pow_32_minus_1_is_refused_before_allocating() {
    for head in [0xdf, 0xdd] {
        let mut file = vec![0x81, 0xa1, b'a', head, 0xff, 0xff, 0xff, 0xff];
        file.extend([0u8; 64]);
        let e = refused(&file);
        assert_eq!(e.kind(), "CountTooLarge", "{e}");
    }
    let mut file = vec![0xdf, 0xff, 0xff, 0xff, 0xff];
    file.extend([0u8; 64]);
    assert_eq!(refused(&file).kind(), "CountTooLarge");
}

#[test]
fn nesting_deeper_than_1000_is_refused() {
    let mut file = Vec::new();
    for _ in 0..100_000 {
        file.extend([0x81, 0xa1, b'a']);
    }
    file.push(0xc0);
    let e = refused(&file);
    assert_eq!(e.kind(), "NestingTooDeep");
    // Arrays as well.
    let mut file = vec![0x81, 0xa1, b'a'];
    file.extend(std::iter::repeat_n(0x91, 100_000));
    file.push(0xc0);
    assert_eq!(refused(&file).kind(), "NestingTooDeep");
    // 1000 deep is read.
    let mut file = Vec::new();
    for _ in 0..MAX_DEPTH {
        file.extend([0x81, 0xa1, b'a']);
    }
    file.push(0x01);
    let o = open(&file).expect("1000 deep opens");
    assert_eq!(o.metadata[0].0.len(), 2 * MAX_DEPTH - 1);
}

#[test]
fn an_ext_of_an_unknown_code_is_refused() {
    for code in [0i8, 4, 42, -1] {
        let file = bytes_of(&map(vec![("x", M::Ext(code, vec![0; 4]))]));
        let e = refused(&file);
        assert_eq!((e.kind(), e.tensor()), ("UnknownExt", Some("x")), "{code}");
    }
}

#[test]
fn ndarray_bytes_other_than_the_shape_needs_are_refused() {
    let file = bytes_of(&map(vec![("t", nd(&[2, 3], "float32", &[0; 20]))]));
    let e = refused(&file);
    assert_eq!((e.kind(), e.tensor()), ("SizeMismatch", Some("t")));
    assert!(e.to_string().contains("needs 24 bytes"), "{e}");
    let file = bytes_of(&map(vec![("t", nd(&[2], "float32", &[0; 12]))]));
    assert_eq!(refused(&file).kind(), "SizeMismatch");
}

#[test]
fn a_shape_of_2_pow_64_elements_is_refused() {
    for shape in [&[1u64 << 32, 1 << 32][..], &[u64::MAX, 2], &[1 << 62, 8]] {
        let file = bytes_of(&map(vec![("t", nd(shape, "float32", &[0; 8]))]));
        let e = refused(&file);
        assert_eq!(
            (e.kind(), e.tensor()),
            ("ShapeOverflow", Some("t")),
            "{shape:?}"
        );
    }
    let file = bytes_of(&map(vec![(
        "t",
        chunked(&[1 << 32, 1 << 32], vec![("0", nd(&[1], "uint8", &[1]))]),
    )]));
    assert_eq!(refused(&file).kind(), "ShapeOverflow");
}

#[test]
fn an_unknown_dtype_name_is_refused_naming_the_key() {
    for name in ["object", "complex128", "int4", "<U3", "float", "f4", ""] {
        let file = bytes_of(&map(vec![("p", map(vec![("w", nd(&[1], name, &[0]))]))]));
        let e = refused(&file);
        assert_eq!(
            (e.kind(), e.tensor()),
            ("UnsupportedDtype", Some("p/w")),
            "{name}"
        );
    }
}

#[test]
fn trailing_bytes_after_the_top_level_map_are_refused() {
    let mut file = bytes_of(&map(vec![("a", M::U(1))]));
    file.push(0xc0);
    let e = refused(&file);
    assert_eq!(e.kind(), "TrailingBytes");
    // Inside an ext payload as well.
    let mut payload = bytes_of(&M::A(vec![M::A(vec![]), s("uint8"), M::B(vec![1])]));
    payload.push(0);
    let file = bytes_of(&map(vec![("t", M::Ext(1, payload))]));
    assert_eq!(refused(&file).kind(), "BadExt");
}

#[test]
fn duplicate_joined_names_are_refused() {
    let cases = [
        map(vec![("a/b", M::U(1)), ("a", map(vec![("b", M::U(2))]))]),
        M::Map(vec![(M::U(1), M::U(1)), (s("1"), M::U(2))]),
        map(vec![("a", M::U(1)), ("a", M::U(2))]),
        map(vec![("a", nd(&[1], "uint8", &[1])), ("a", M::U(2))]),
    ];
    for c in cases {
        let e = refused(&bytes_of(&c));
        assert_eq!(e.kind(), "DuplicateName", "{e}");
    }
}

#[test]
fn other_malformed_files_are_refused() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "NotAMap"),
        (vec![0x91, 0xc0], "NotAMap"),
        (bytes_of(&nd(&[1], "uint8", &[1])), "NotAMap"),
        (vec![0x81, 0xa1, b'a', 0xc1], "BadMsgpack"),
        (vec![0x81, 0xa1, 0xff, 0xc0], "BadUtf8"),
        (vec![0x81, 0xa1, b'a', 0xa1, 0xff], "BadUtf8"),
        (vec![0x81, 0xc0, 0xc0], "BadKey"),
        (vec![0x81, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0], "BadKey"),
        (vec![0x82, 0xa1, b'a', 0xc0, 0xa1], "Truncated"),
        (vec![0x82, 0xa1, b'a', 0xc0], "CountTooLarge"),
        (vec![0x81, 0xa1, b'a', 0xcf, 0, 0], "Truncated"),
        (vec![0x81, 0xa1, b'a', 0xc7, 0x10, 0x01, 0], "Truncated"),
        (
            bytes_of(&map(vec![(
                "c",
                M::Ext(2, bytes_of(&M::A(vec![M::F(1.0)]))),
            )])),
            "BadExt",
        ),
        (bytes_of(&map(vec![("t", M::Ext(1, vec![0xc0]))])), "BadExt"),
        (
            bytes_of(&map(vec![(
                "t",
                M::Ext(
                    1,
                    bytes_of(&M::A(vec![M::A(vec![M::I(-1)]), s("uint8"), M::B(vec![1])])),
                ),
            )])),
            "BadExt",
        ),
        (
            bytes_of(&map(vec![(
                "t",
                M::Ext(1, bytes_of(&M::A(vec![M::A(vec![]), s("uint8"), M::U(1)]))),
            )])),
            "BadExt",
        ),
        (
            bytes_of(&map(vec![("t", nd(&[1; 65], "uint8", &[1]))])),
            "BadExt",
        ),
    ];
    for (i, (file, kind)) in cases.iter().enumerate() {
        let e = refused(file);
        assert_eq!(e.kind(), *kind, "case {i}: {e}");
    }
}
