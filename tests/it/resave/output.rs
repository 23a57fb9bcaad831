//! What a re-save writes: a subset with renames, metadata edits and a
//! conversion, read back by both readers, and whole files byte-identical to
//! the official writer's.

use std::collections::HashMap;

use half::bf16;
use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::format::Checkpoint;
use tensorscope::resave::{MetadataEdit, ResaveOptions};

use super::{assert_reference_layout, listing, model, official, ours, run, source, source_tensors};
use crate::fixtures::{RefTensor, reference_file};

#[test]
fn subset_renames_metadata_and_bf16_read_back_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt"), ("keep", "x"), ("old", "y")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("out.safetensors");
    let opts = ResaveOptions {
        keep: vec![
            "^layers\\.".into(),
            "^embed".into(),
            "mask|packed|step".into(),
        ],
        drop: vec!["norm$".into()],
        renames: vec![
            ("embed.weight".into(), "model.embed.weight".into()),
            ("mask".into(), "attention_mask".into()),
        ],
        metadata_edits: vec![
            MetadataEdit::Set {
                key: "new".into(),
                value: "1".into(),
            },
            MetadataEdit::Set {
                key: "keep".into(),
                value: "changed".into(),
            },
            MetadataEdit::Delete { key: "old".into() },
        ],
        conversions: vec![(Dtype::F32, Dtype::BF16)],
        ..ResaveOptions::default()
    };
    let report = run(&ck, &out, &opts).expect("resave");
    let bytes = std::fs::read(&out).expect("read output");
    assert_reference_layout(&bytes);
    let (meta, back) = official(&bytes);
    assert_eq!(back, ours(&out), "the official crate and our reader agree");
    let expected_meta: HashMap<String, String> =
        [("format", "pt"), ("keep", "changed"), ("new", "1")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
    assert_eq!(meta, Some(expected_meta));
    let names: Vec<&str> = back.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "attention_mask",
            "layers.0.attn.q",
            "layers.1.scale",
            "model.embed.weight",
            "packed",
            "step"
        ]
    );
    let src_t = source_tensors();
    // Untouched tensors: byte-identical, same dtype and shape.
    for (out_name, src_name) in [
        ("attention_mask", "mask"),
        ("layers.1.scale", "layers.1.scale"),
        ("packed", "packed"),
        ("step", "step"),
    ] {
        let s = &src_t[src_name];
        assert_eq!(back[out_name].data, s.data, "{out_name}");
        assert_eq!(back[out_name].shape, s.shape);
        assert_eq!(back[out_name].dtype, format!("{:?}", s.dtype));
    }
    // Converted tensors: BF16 of each f32, rounded by half's (correct)
    // f32 conversion.
    for (out_name, src_name) in [
        ("model.embed.weight", "embed.weight"),
        ("layers.0.attn.q", "layers.0.attn.q"),
    ] {
        let s = &src_t[src_name];
        let expected: Vec<u8> = s
            .data
            .chunks_exact(4)
            .flat_map(|c| {
                let v = f32::from_le_bytes(c.try_into().expect("4"));
                bf16::from_f32(v).to_bits().to_le_bytes()
            })
            .collect();
        let got = &back[out_name];
        assert_eq!(got.dtype, "BF16");
        assert_eq!(got.shape, s.shape);
        // NaN payloads aside (half sets the quiet bit, so do we), every
        // code must match.
        assert_eq!(got.data, expected, "{out_name}");
    }
    assert_eq!(report.conversions.len(), 2);
    assert_eq!(report.conversion_totals.elements, 128 + 16);
    // Both tensors hold one NaN and f32::MAX, which overflows BF16 to Inf
    // (IEEE); 1e-40 is a BF16 subnormal.
    assert_eq!(report.conversion_totals.nan, 2);
    assert_eq!(report.conversion_totals.saturated, 0);
    assert_eq!(report.conversion_totals.overflow_inf, 2);
    assert_eq!(
        listing(dir.path()),
        ["model.safetensors", "out.safetensors"]
    );
}

#[test]
fn output_is_byte_identical_to_the_official_writer() {
    // With one metadata key the official writer is deterministic, so the
    // whole file must be the same bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let out = dir.path().join("copy.safetensors");
    run(&ck, &out, &ResaveOptions::default()).expect("resave");
    assert_eq!(
        std::fs::read(&out).expect("out"),
        std::fs::read(&src).expect("src")
    );
    // A subset with a conversion, against the official writer given the
    // converted tensors.
    let out = dir.path().join("subset.safetensors");
    let opts = ResaveOptions {
        drop: vec!["^layers".into()],
        conversions: vec![(Dtype::BF16, Dtype::F32), (Dtype::F16, Dtype::F32)],
        ..ResaveOptions::default()
    };
    run(&ck, &out, &opts).expect("resave");
    let expected: Vec<(String, RefTensor)> = model()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("layers"))
        .map(|(n, mut tensor)| {
            if tensor.dtype == RefDtype::BF16 {
                tensor.data = tensor
                    .data
                    .chunks_exact(2)
                    .flat_map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32().to_le_bytes())
                    .collect();
                tensor.dtype = RefDtype::F32;
            }
            (n, tensor)
        })
        .collect();
    let meta = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    assert_eq!(
        std::fs::read(&out).expect("out"),
        reference_file(&expected, Some(meta))
    );
}
