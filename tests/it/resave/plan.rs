//! Plans and refused requests: the GUI's selection by index, plans that no
//! longer match, and every bad request refused before anything is written.

use tensorscope::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::resave::{MetadataEdit, ResaveError, ResaveOptions, execute, plan};

use super::{listing, model, ours, run, source, two_shard_source};

#[test]
fn the_gui_selection_picks_tensors_by_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let name = |i: usize| ck.info(ck.tensors()[i]).expect("info").name().to_owned();
    let picked = [name(5), name(1)];
    let out = dir.path().join("sel.safetensors");
    let p = plan(
        &ck,
        &out,
        &ResaveOptions {
            selection: Some(vec![5, 1, 5]),
            ..ResaveOptions::default()
        },
    )
    .expect("plan");
    // The plan writes nothing and lists the outcome in checkpoint order.
    assert!(!out.exists());
    assert_eq!(
        p.tensors.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        [picked[1].clone(), picked[0].clone()]
    );
    execute(&ck, &p, &CancelToken::new(), &Progress::new()).expect("execute");
    // A plan edited afterwards, or run on another checkpoint, is refused.
    let mut bad = p.clone();
    bad.tensors[0].file = 3;
    let e = execute(&ck, &bad, &CancelToken::new(), &Progress::new()).expect_err("bad plan");
    assert_eq!(e.kind(), "InvalidPlan", "{e}");
    let mut bad = p.clone();
    bad.tensors[1].dtype = Dtype::F64;
    let e = execute(&ck, &bad, &CancelToken::new(), &Progress::new()).expect_err("bad plan");
    assert_eq!(e.kind(), "InvalidPlan", "{e}");
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = two_shard_source(other_dir.path());
    let other = Checkpoint::open(&other).expect("open");
    let e = execute(&other, &p, &CancelToken::new(), &Progress::new()).expect_err("other");
    assert_eq!(e.kind(), "InvalidPlan", "{e}");
    let back = ours(&out);
    assert_eq!(back.len(), 2);
    assert!(back.contains_key(&picked[0]) && back.contains_key(&picked[1]));
    assert!(matches!(
        plan(
            &ck,
            &out,
            &ResaveOptions {
                selection: Some(vec![99]),
                ..ResaveOptions::default()
            }
        ),
        Err(ResaveError::SelectionOutOfRange { index: 99, .. })
    ));
}

#[test]
fn bad_requests_are_refused_before_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("out.safetensors");
    let cases: Vec<(ResaveOptions, &str)> = vec![
        (
            ResaveOptions {
                renames: vec![("mask".into(), "step".into())],
                ..ResaveOptions::default()
            },
            "NameCollision",
        ),
        (
            ResaveOptions {
                renames: vec![("nope".into(), "x".into())],
                ..ResaveOptions::default()
            },
            "UnknownTensor",
        ),
        (
            ResaveOptions {
                drop: vec!["mask".into()],
                renames: vec![("mask".into(), "x".into())],
                ..ResaveOptions::default()
            },
            "RenameNotSelected",
        ),
        (
            ResaveOptions {
                renames: vec![("mask".into(), "x".into()), ("mask".into(), "y".into())],
                ..ResaveOptions::default()
            },
            "DuplicateRename",
        ),
        (
            ResaveOptions {
                renames: vec![("mask".into(), "__metadata__".into())],
                ..ResaveOptions::default()
            },
            "ReservedName",
        ),
        (
            ResaveOptions {
                keep: vec!["^nothing$".into()],
                ..ResaveOptions::default()
            },
            "NothingSelected",
        ),
        (
            ResaveOptions {
                keep: vec!["(".into()],
                ..ResaveOptions::default()
            },
            "InvalidRegex",
        ),
        (
            ResaveOptions {
                conversions: vec![(Dtype::I64, Dtype::F32)],
                ..ResaveOptions::default()
            },
            "UnsupportedConversion",
        ),
        (
            ResaveOptions {
                conversions: vec![(Dtype::F32, Dtype::F16), (Dtype::F32, Dtype::BF16)],
                ..ResaveOptions::default()
            },
            "DuplicateConversion",
        ),
        (
            ResaveOptions {
                metadata_edits: vec![MetadataEdit::Delete {
                    key: "absent".into(),
                }],
                ..ResaveOptions::default()
            },
            "MetadataKeyMissing",
        ),
        (
            ResaveOptions {
                max_shard_bytes: Some(0),
                ..ResaveOptions::default()
            },
            "InvalidShardSize",
        ),
    ];
    for (opts, kind) in cases {
        let e = run(&ck, &out, &opts).expect_err(kind);
        assert_eq!(e.kind(), kind, "{e}");
        assert!(!e.to_string().is_empty());
    }
    // Swapping two names is not a collision.
    let swapped = run(
        &ck,
        &out,
        &ResaveOptions {
            renames: vec![
                ("mask".into(), "step".into()),
                ("step".into(), "mask".into()),
            ],
            ..ResaveOptions::default()
        },
    )
    .expect("swap");
    assert_eq!(swapped.tensors.len(), model().len());
    let back = ours(&out);
    assert_eq!(back["step"].dtype, "BOOL");
    // A sharded output needs a folder or an index path.
    let e = run(
        &ck,
        &dir.path().join("x.safetensors"),
        &ResaveOptions {
            max_shard_bytes: Some(10),
            ..ResaveOptions::default()
        },
    )
    .expect_err("layout");
    assert_eq!(e.kind(), "InvalidOutput");
    assert_eq!(
        listing(dir.path()),
        ["model.safetensors", "out.safetensors"]
    );
}
