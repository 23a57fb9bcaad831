//! The pickle machine on pickles built byte by byte: what torch writes
//! (protocols 0, 2, 4), every unsafe-global spelling of PICKLE.md §6, and
//! the bombs and broken streams of §7. None is ever executed: a global is
//! only ever a name here.

use super::pickle::{PickleError, parse, parse_within};
use super::unsafe_globals;
use super::value::Node;

/// `SHORT_BINUNICODE s`.
fn su(s: &str) -> Vec<u8> {
    let mut v = vec![0x8c, s.len() as u8];
    v.extend_from_slice(s.as_bytes());
    v
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn a_protocol_2_state_dict_of_ints_reads_as_a_dict() {
    // {'a': 5, 'b': [1, 2]} as pickle.dumps(protocol=2) writes it.
    let p =
        b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01K\x05X\x01\x00\x00\x00bq\x02]q\x03(K\x01K\x02eu.";
    let parsed = parse(p).expect("parses");
    assert!(parsed.globals.is_empty());
    assert_eq!(parsed.end, p.len());
    let g = &parsed.graph;
    let Some(Node::Dict(pairs)) = g.get(g.root) else {
        panic!("not a dict: {:?}", g.get(g.root));
    };
    assert_eq!(pairs.len(), 2);
    assert_eq!(g.str_of(pairs[0].0), Some("a"));
    assert_eq!(g.int_of(pairs[0].1), Some(5));
    assert_eq!(
        g.items_of(pairs[1].1)
            .map(|v| v.iter().filter_map(|&i| g.int_of(i)).collect::<Vec<_>>()),
        Some(vec![1, 2])
    );
}

#[test]
fn a_protocol_0_pickle_reads_too() {
    // pickle.dumps({'a': 1, 'f': 0.5, 's': 'x\n'}, protocol=0)
    let p = b"(dp0\nVa\np1\nI1\nsVf\np2\nF0.5\nsVs\np3\nVx\\u000a\np4\ns.";
    let parsed = parse(p).expect("parses");
    let g = &parsed.graph;
    let Some(Node::Dict(pairs)) = g.get(g.root) else {
        panic!("not a dict");
    };
    assert_eq!(g.int_of(pairs[0].1), Some(1));
    assert_eq!(g.get(pairs[1].1), Some(&Node::Float(0.5)));
    assert_eq!(g.str_of(pairs[2].1), Some("x\n"));
    // Python 2 strings, quoted, with escapes.
    let p = b"S'it\\'s\\x41\\n'\np0\n.";
    let parsed = parse(p).expect("parses");
    assert_eq!(parsed.graph.str_of(parsed.graph.root), Some("it'sA\n"));
}

#[test]
fn globals_are_names_and_calls_are_records() {
    // torch._utils._rebuild_tensor_v2 called with a tuple, then BUILD.
    let p = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00(K\x01K\x02tq\x01Rq\x02}b.";
    let parsed = parse(p).expect("parses");
    assert_eq!(
        parsed.globals.iter().collect::<Vec<_>>(),
        ["torch._utils._rebuild_tensor_v2"]
    );
    assert!(unsafe_globals(&parsed.globals).is_empty());
    let g = &parsed.graph;
    let Some(Node::Call {
        func, args, state, ..
    }) = g.get(g.root)
    else {
        panic!("not a call");
    };
    assert_eq!(
        g.global_of(*func),
        Some(("torch._utils", "_rebuild_tensor_v2"))
    );
    assert_eq!(g.items_of(*args).map(<[_]>::len), Some(2));
    assert!(state.is_some());
}

#[test]
fn every_unsafe_spelling_is_named_verbatim() {
    let reduce = |module: &str, name: &str| -> Vec<u8> {
        cat(&[
            b"\x80\x02c",
            module.as_bytes(),
            b"\n",
            name.as_bytes(),
            b"\n",
            &su("touch PWNED"),
            b"\x85R.",
        ])
    };
    for (m, n) in [
        ("posix", "system"),
        ("os", "system"),
        ("__builtin__", "eval"),
        ("__builtin__", "exec"),
        ("subprocess", "Popen"),
        ("commands", "Popen"),
        ("torch.serialization", "save"),
    ] {
        let parsed = parse(&reduce(m, n)).expect("parses");
        assert_eq!(
            unsafe_globals(&parsed.globals),
            [format!("{m}.{n}")],
            "{m}.{n}"
        );
    }
    // getattr(__import__('os'), 'system')('...'): two globals, both named.
    let p = cat(&[
        b"\x80\x02c__builtin__\ngetattr\nc__builtin__\n__import__\n",
        &su("os"),
        b"\x85R",
        &su("system"),
        b"\x86R",
        &su("id"),
        b"\x85R.",
    ]);
    let parsed = parse(&p).expect("parses");
    assert_eq!(
        unsafe_globals(&parsed.globals),
        ["__builtin__.__import__", "__builtin__.getattr"]
    );
    // INST imports and calls in one opcode.
    let p = b"(S'touch x'\nios\nsystem\n.";
    let parsed = parse(p).expect("parses");
    assert_eq!(unsafe_globals(&parsed.globals), ["os.system"]);
    // STACK_GLOBAL with memoized operands (protocol 4), one of them
    // fetched back with BINGET.
    let p = cat(&[
        b"\x80\x04\x95\x20\x00\x00\x00\x00\x00\x00\x00",
        &su("posix"),
        b"\x94",
        &su("system"),
        b"\x94h\x00h\x01\x93\x94",
        &su("id"),
        b"\x85R.",
    ]);
    let parsed = parse(&p).expect("parses");
    assert_eq!(unsafe_globals(&parsed.globals), ["posix.system"]);
    // STACK_GLOBAL on operands that are not strings.
    let p = b"\x80\x04K\x01K\x02\x93.";
    let parsed = parse(p).expect("parses");
    assert_eq!(unsafe_globals(&parsed.globals), ["?.?"]);
}

#[test]
fn the_globals_seen_before_a_failure_are_kept() {
    let p = b"\x80\x02cposix\nsystem\n\xff";
    let failed = parse(p).expect_err("unknown opcode");
    assert_eq!(failed.error.kind(), "InvalidPickle");
    assert_eq!(unsafe_globals(&failed.globals), ["posix.system"]);
}

#[test]
fn broken_streams_are_invalid_not_a_crash() {
    for (what, p) in [
        ("empty", &b""[..]),
        ("no STOP", b"\x80\x02K\x01"),
        ("protocol 6", b"\x80\x06N."),
        ("not opcodes", b"\x80\x02\xfe\xfd\xfc"),
        ("a length past the end", b"\x80\x02X\xff\xff\xff\x7fab."),
        (
            "BINBYTES8 of 2^63",
            b"\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80.",
        ),
        ("LONG4 of 2^31 - 1 bytes", b"\x80\x02\x8b\xff\xff\xff\x7f."),
        ("a memo key never set", b"\x80\x02h\x05."),
        ("an empty stack", b"\x80\x02R."),
        ("a mark where a value goes", b"\x80\x02(R."),
        ("an odd dict", b"(K\x01d."),
        ("a text line with no end", b"cposix"),
        ("a float that is not one", b"Fabc\n."),
        ("an out-of-band buffer", b"\x80\x05\x97."),
    ] {
        let e = parse(p).expect_err(what);
        assert!(
            matches!(e.error, PickleError::Invalid { .. }),
            "{what}: {:?}",
            e.error
        );
    }
}

#[test]
fn integers_of_every_width() {
    let one = |p: &[u8]| {
        let parsed = parse(p).expect("parses");
        parsed.graph.get(parsed.graph.root).cloned()
    };
    assert_eq!(one(b"\x80\x02J\xff\xff\xff\xff."), Some(Node::Int(-1)));
    assert_eq!(one(b"\x80\x02M\xff\xff."), Some(Node::Int(65535)));
    assert_eq!(one(b"\x80\x02\x8a\x00."), Some(Node::Int(0)));
    assert_eq!(one(b"\x80\x02\x8a\x02\x00\x80."), Some(Node::Int(-32768)));
    assert_eq!(
        one(b"\x80\x02\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f."),
        Some(Node::Int(i64::MAX))
    );
    // 2^64 + 3 does not fit: kept as its bytes, for a clean error where a
    // size must fit.
    assert_eq!(
        one(b"\x80\x02\x8a\x09\x03\x00\x00\x00\x00\x00\x00\x00\x01."),
        Some(Node::BigInt("18446744073709551619".into()))
    );
    assert_eq!(one(b"I-7\n."), Some(Node::Int(-7)));
    assert_eq!(one(b"I01\n."), Some(Node::Bool(true)));
    assert!(matches!(
        one(b"L123456789012345678901234567890L\n."),
        Some(Node::BigInt(_))
    ));
}

#[test]
fn deep_nesting_and_shared_objects_stay_linear() {
    // A list nested 100,000 levels deep, with MARK/LIST: no recursion.
    let depth = 100_000;
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b'(', depth));
    p.extend(std::iter::repeat_n(b'l', depth));
    p.push(b'.');
    let parsed = parse(&p).expect("parses");
    assert_eq!(parsed.graph.nodes.len(), depth);
    // A memo bomb: 14 levels, each a list of 16 references to the level
    // below (16^14 paths as a tree) is 1 KB of opcodes and 15 nodes.
    let mut p = b"\x80\x02]q\x00".to_vec();
    for level in 0..14u8 {
        p.push(b'(');
        for _ in 0..16 {
            p.extend_from_slice(&[b'h', level]);
        }
        p.extend_from_slice(&[b'l', b'q', level + 1]);
    }
    p.push(b'.');
    assert!(p.len() < 1024);
    let parsed = parse(&p).expect("parses");
    assert_eq!(parsed.graph.nodes.len(), 15);
    // A DUP bomb: each level a pair of the level below, 2^60 paths as a
    // tree, in 123 bytes and 61 nodes.
    let mut p = b"\x80\x02]".to_vec();
    for _ in 0..60 {
        p.extend_from_slice(b"2\x86");
    }
    p.push(b'.');
    let parsed = parse(&p).expect("parses");
    assert_eq!(parsed.graph.nodes.len(), 61);
}

#[test]
fn what_a_pickle_builds_is_bounded() {
    // A list of a million Nones is fine within the default budget, and
    // too much for a budget of 1 MB.
    let mut p = b"\x80\x02](".to_vec();
    p.extend(std::iter::repeat_n(b'N', 1_000_000));
    p.extend_from_slice(b"e.");
    assert!(parse(&p).is_ok());
    let e = parse_within(&p, 1 << 20).expect_err("over the budget");
    assert_eq!(e.error.kind(), "TooComplex");
}

#[test]
fn a_global_behind_a_bomb_is_still_named() {
    // Past the budget, the rest of the stream is scanned for globals: every
    // way of naming one, behind every kind of argument.
    let mut p = b"\x80\x04](".to_vec();
    p.extend(std::iter::repeat_n(b'N', 1_000_000));
    p.extend_from_slice(b"e0K\x01M\x01\x00J\x01\x00\x00\x00G\x00\x00\x00\x00\x00\x00\x00\x00");
    p.extend_from_slice(b"I12\nS'x'\n");
    p.extend(su("text"));
    p.extend_from_slice(b"X\x02\x00\x00\x00hiB\x01\x00\x00\x00z\x8a\x01\x05");
    p.extend_from_slice(b"cposix\nsystem\n0(iwhat\never\n0");
    p.extend(su("os"));
    p.extend(su("popen"));
    p.extend_from_slice(b"\x93.");
    let e = parse_within(&p, 1 << 20).expect_err("over the budget");
    assert_eq!(e.error.kind(), "TooComplex");
    let named: Vec<&str> = e.globals.iter().map(String::as_str).collect();
    assert_eq!(named, ["?.?", "posix.system", "what.ever"]);
    assert_eq!(
        super::unsafe_globals(&e.globals),
        ["?.?", "posix.system", "what.ever"]
    );
}

#[test]
fn ordered_dicts_keep_their_items_and_build_is_recorded() {
    // collections.OrderedDict() filled by SETITEMS, then BUILD with its
    // _metadata, as torch.save writes a state_dict.
    let p = cat(&[
        b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(",
        &su("w"),
        b"K\x07u}q\x02",
        &su("_metadata"),
        b"}sb.",
    ]);
    let parsed = parse(&p).expect("parses");
    assert!(unsafe_globals(&parsed.globals).is_empty());
    let g = &parsed.graph;
    let Some(Node::Call { items, state, .. }) = g.get(g.root) else {
        panic!("not a call");
    };
    assert_eq!(items.len(), 1);
    assert_eq!(g.str_of(items[0].0), Some("w"));
    assert!(state.is_some());
}

/// `_rebuild_tensor_v2(('storage', torch.<class>, key, 'cpu', numel),
/// offset, size, stride, False, OrderedDict())` as protocol 2 writes it.
fn tensor(class: &str, key: &str, numel: u8, offset: u8, size: &[u8], stride: &[u8]) -> Vec<u8> {
    let ints = |v: &[u8]| -> Vec<u8> {
        let mut out = vec![b'('];
        for &x in v {
            out.extend_from_slice(&[b'K', x]);
        }
        out.push(b't');
        out
    };
    cat(&[
        b"ctorch._utils\n_rebuild_tensor_v2\n(",
        b"(",
        &su("storage"),
        b"ctorch\n",
        class.as_bytes(),
        b"\n",
        &su(key),
        &su("cpu"),
        &[b'K', numel],
        b"tQ",
        &[b'K', offset],
        &ints(size),
        &ints(stride),
        b"\x89ccollections\nOrderedDict\n)RtR",
    ])
}

mod never_panics {
    use proptest::prelude::*;

    use super::super::pickle::parse;

    /// A pickle with every kind of opcode the tests above use.
    const SEED: &[u8] = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02(K\x01J\xff\xff\xff\xffG?\xe0\x00\x00\x00\x00\x00\x00\x8a\x02\x00\x80tq\x03RX\x01\x00\x00\x00bq\x04]q\x05(h\x01h\x03\x88\x89Ne\x85q\x06u.";

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, .. ProptestConfig::default() })]

        #[test]
        fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let mut p = b"\x80\x04".to_vec();
            p.extend(bytes);
            let _ = parse(&p);
        }

        #[test]
        fn mutations_of_a_checkpoint_pickle(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            assert!(parse(SEED).is_ok());
            let mut p = SEED.to_vec();
            for (at, byte) in edits {
                let i = at.index(p.len());
                p[i] = byte;
            }
            let _ = parse(&p);
        }
    }
}

mod objects {
    use super::super::objects::{Contents, contents};
    use super::super::pickle::parse;
    use super::super::unsafe_globals;
    use super::{cat, su, tensor};
    use crate::dtype::Dtype;

    fn read(p: &[u8]) -> Contents {
        let parsed = parse(p).expect("parses");
        assert!(
            unsafe_globals(&parsed.globals).is_empty(),
            "{:?}",
            parsed.globals
        );
        contents(&parsed.graph).expect("a checkpoint")
    }

    #[test]
    fn a_state_dict_names_its_tensors_by_key_with_views_and_tied_weights() {
        // OrderedDict: 'embed.weight' a 4x2 F32 tensor; 'head.weight' the
        // same tensor object (tied, through the memo); 'col' a transposed
        // view at offset 1 of another storage.
        let p = cat(&[
            b"\x80\x02ccollections\nOrderedDict\n)R(",
            &su("embed.weight"),
            &tensor("FloatStorage", "0", 8, 0, &[4, 2], &[2, 1]),
            b"q\x05",
            &su("head.weight"),
            b"h\x05",
            &su("col"),
            &tensor("HalfStorage", "1", 6, 1, &[2, 2], &[1, 3]),
            b"u.",
        ]);
        let c = read(&p);
        let names: Vec<&str> = c.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["embed.weight", "head.weight", "col"]);
        assert_eq!(c.tensors[0].storage, "0");
        assert_eq!(c.tensors[0].dtype, Dtype::F32);
        assert_eq!(c.tensors[0].shape, [4, 2]);
        assert_eq!(c.tensors[1].storage, "0");
        let col = &c.tensors[2];
        assert_eq!(
            (col.dtype, col.offset, col.storage_numel),
            (Dtype::F16, 1, 6)
        );
        assert_eq!(col.strides, [1, 3]);
        assert!(c.metadata.is_empty());
    }

    #[test]
    fn a_lightning_checkpoint_gives_nested_names_and_metadata_leaves() {
        // {'epoch': 3, 'state_dict': {'w': T}, 'hyper_parameters':
        //  {'name': 'tiny', 'layers': [16, 8], 'lr': 0.5, 'save': None},
        //  'optimizer_states': [{'state': {0: {'exp_avg': T2}}}]}
        let p = cat(&[
            b"\x80\x02}(",
            &su("epoch"),
            b"K\x03",
            &su("state_dict"),
            b"}(",
            &su("w"),
            &tensor("FloatStorage", "0", 2, 0, &[2], &[1]),
            b"u",
            &su("hyper_parameters"),
            b"}(",
            &su("name"),
            &su("tiny"),
            &su("layers"),
            b"]q\x09(K\x10K\x08e",
            &su("lr"),
            b"G?\xe0\x00\x00\x00\x00\x00\x00",
            &su("save"),
            b"Nu",
            &su("optimizer_states"),
            b"](}(",
            &su("state"),
            b"}(K\x00}(",
            &su("exp_avg"),
            &tensor("FloatStorage", "1", 2, 0, &[2], &[1]),
            b"uuue",
            b"u.",
        ]);
        let c = read(&p);
        let names: Vec<&str> = c.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["state_dict.w", "optimizer_states.0.state.0.exp_avg"]
        );
        let meta: std::collections::BTreeMap<_, _> = c.metadata.into_iter().collect();
        assert_eq!(meta["epoch"], serde_json::json!(3));
        assert_eq!(meta["hyper_parameters.name"], serde_json::json!("tiny"));
        assert_eq!(meta["hyper_parameters.layers"], serde_json::json!([16, 8]));
        assert_eq!(meta["hyper_parameters.lr"], serde_json::json!(0.5));
        assert_eq!(meta["hyper_parameters.save"], serde_json::Value::Null);
    }

    #[test]
    fn untyped_storages_take_the_v3_dtype_and_odd_ones_are_clean_errors() {
        let v3 = cat(&[
            b"\x80\x02ctorch._utils\n_rebuild_tensor_v3\n((",
            &su("storage"),
            b"ctorch.storage\nUntypedStorage\n",
            &su("0"),
            &su("cpu"),
            b"K\x08tQK\x00(K\x08t(K\x01t\x89ccollections\nOrderedDict\n)Rctorch\nfloat8_e4m3fn\ntR.",
        ]);
        let c = read(&v3);
        assert_eq!(c.tensors[0].dtype, Dtype::F8E4M3);
        assert_eq!(c.tensors[0].storage_numel, 8);
        // complex128 has no safetensors dtype.
        let p = cat(&[
            b"\x80\x02",
            &tensor("ComplexDoubleStorage", "0", 1, 0, &[1], &[1]),
            b".",
        ]);
        let parsed = parse(&p).expect("parses");
        assert_eq!(
            contents(&parsed.graph).expect_err("refused").kind(),
            "UnsupportedDtype"
        );
        // A negative size, and a size past 64 bits.
        let neg = cat(&[
            b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((",
            &su("storage"),
            b"ctorch\nFloatStorage\n",
            &su("0"),
            &su("cpu"),
            b"K\x04tQK\x00(J\xff\xff\xff\xfft(K\x01t\x89)tR.",
        ]);
        let parsed = parse(&neg).expect("parses");
        let e = contents(&parsed.graph).expect_err("negative");
        assert_eq!(e.kind(), "InvalidCheckpoint");
        assert!(e.to_string().contains("negative"), "{e}");
        let big = cat(&[
            b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((",
            &su("storage"),
            b"ctorch\nFloatStorage\n",
            &su("0"),
            &su("cpu"),
            b"K\x04tQK\x00(\x8a\x09\x03\x00\x00\x00\x00\x00\x00\x00\x01t(K\x01t\x89)tR.",
        ]);
        let parsed = parse(&big).expect("parses");
        assert_eq!(
            contents(&parsed.graph).expect_err("too big").kind(),
            "InvalidCheckpoint"
        );
    }

    #[test]
    fn shared_and_cyclic_containers_are_walked_once() {
        // A memo bomb of dicts, 14 levels of 16 references each, beside a
        // real tensor: linear, and the tensor is found.
        let mut p = b"\x80\x02}(".to_vec();
        p.extend(su("real"));
        p.extend(tensor("FloatStorage", "0", 1, 0, &[1], &[1]));
        p.extend(su("bomb"));
        p.extend_from_slice(b"]q\x00");
        for level in 0..14u8 {
            p.push(b'(');
            for _ in 0..16 {
                p.extend_from_slice(&[b'h', level]);
            }
            p.extend_from_slice(&[b'l', b'q', level + 1]);
        }
        p.extend_from_slice(b"u.");
        let c = read(&p);
        assert_eq!(c.tensors.len(), 1);
        // A list that holds itself.
        let p = b"\x80\x02]q\x00h\x00a.";
        let c = read(p);
        assert!(c.tensors.is_empty());
    }
}

mod archive {
    use std::io::Write as _;

    use super::super::archive::read;
    use super::{cat, su, tensor};
    use crate::format::stored::{ByteOrder, Layout};
    use crate::format::zip;

    fn torch_zip(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut z = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let stored = ::zip::write::SimpleFileOptions::default()
            .compression_method(::zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            z.start_file(*name, stored).expect("entry");
            z.write_all(bytes).expect("write");
        }
        z.finish().expect("finish").into_inner()
    }

    /// {'a': 2x3 F32 over storage 0, 'b': a column of it (offset 1,
    /// stride 3), 'c': 'a' again (tied)}.
    fn state_dict() -> Vec<u8> {
        cat(&[
            b"\x80\x02ccollections\nOrderedDict\n)R(",
            &su("a"),
            &tensor("FloatStorage", "0", 6, 0, &[2, 3], &[3, 1]),
            b"q\x07",
            &su("b"),
            &tensor("FloatStorage", "0", 6, 1, &[2], &[3]),
            &su("c"),
            b"h\x07u.",
        ])
    }

    fn values() -> Vec<u8> {
        (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect()
    }

    #[test]
    fn a_torch_zip_gives_tensors_views_and_tied_weights_over_its_storages() {
        let file = torch_zip(&[
            ("archive/data.pkl", state_dict()),
            ("archive/byteorder", b"little".to_vec()),
            ("archive/data/0", values()),
            ("archive/version", b"3\n".to_vec()),
        ]);
        let archive = zip::open(&file).expect("zip");
        let t = read(&file, &archive).expect("read");
        assert_eq!(t.root, "archive/");
        assert!(t.unsafe_globals.is_empty());
        let names: Vec<&str> = t
            .tensors
            .iter()
            .map(crate::format::TensorInfo::name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let a = &t.placements[0];
        assert!(a.is_native(&[2, 3]));
        // In place: the tensor's bytes are the storage entry's.
        let [b0, e0] = t.tensors[0].data_offsets();
        assert_eq!(&file[b0 as usize..e0 as usize], values().as_slice());
        // The column is a strided view of the same storage.
        let b = &t.placements[1];
        assert!(!b.is_native(&[2]));
        assert_eq!(
            b.layout(),
            &Layout::Strided {
                offset: 1,
                strides: vec![3]
            }
        );
        assert_eq!(b.storage_id(), a.storage_id());
        assert_eq!(t.placements[2], t.placements[0]);
    }

    #[test]
    fn missing_short_and_unsafe_storages_are_clean_errors() {
        let missing = torch_zip(&[("archive/data.pkl", state_dict())]);
        let archive = zip::open(&missing).expect("zip");
        assert_eq!(
            read(&missing, &archive).expect_err("missing").kind(),
            "MissingStorage"
        );
        let short = torch_zip(&[
            ("archive/data.pkl", state_dict()),
            ("archive/data/0", values()[..20].to_vec()),
        ]);
        let archive = zip::open(&short).expect("zip");
        assert_eq!(
            read(&short, &archive).expect_err("short").kind(),
            "ViewOutOfBounds"
        );
        // A view past its storage's end.
        let past = cat(&[
            b"\x80\x02}(",
            &su("v"),
            &tensor("FloatStorage", "0", 6, 5, &[2], &[1]),
            b"u.",
        ]);
        let file = torch_zip(&[("archive/data.pkl", past), ("archive/data/0", values())]);
        let archive = zip::open(&file).expect("zip");
        assert_eq!(
            read(&file, &archive).expect_err("past").kind(),
            "ViewOutOfBounds"
        );
        // An unsafe pickle: reported, nothing built.
        let evil = cat(&[b"\x80\x02cposix\nsystem\n", &su("id"), b"\x85R."]);
        let file = torch_zip(&[("m/data.pkl", evil)]);
        let archive = zip::open(&file).expect("zip");
        let t = read(&file, &archive).expect("reported");
        assert_eq!(t.unsafe_globals, ["posix.system"]);
        assert!(t.tensors.is_empty());
    }

    #[test]
    fn a_big_endian_zip_says_so() {
        let file = torch_zip(&[
            ("archive/data.pkl", state_dict()),
            ("archive/byteorder", b"big".to_vec()),
            ("archive/data/0", values()),
        ]);
        let archive = zip::open(&file).expect("zip");
        let t = read(&file, &archive).expect("read");
        assert_eq!(t.placements[0].byte_order(), ByteOrder::Big);
        assert!(!t.placements[0].is_native(&[2, 3]));
    }
}
