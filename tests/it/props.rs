//! Property tests against the official crate: files it writes load the same
//! in ours, and every mutation of such a file gets the same verdict.

use std::collections::HashMap;

use proptest::prelude::*;
use tensorscope::format::parse;

use crate::fixtures::{REF_DTYPES, RefTensor, ref_nbytes, reference_file};
use crate::oracle::assert_same_verdict;

fn tensor_strategy() -> impl Strategy<Value = RefTensor> {
    (0..REF_DTYPES.len(), prop::collection::vec(0usize..5, 0..4)).prop_flat_map(|(d, mut shape)| {
        let dtype = REF_DTYPES[d];
        // Sub-byte dtypes need whole bytes: F4 an even count, F6 a multiple of 4.
        let numel: usize = shape.iter().product();
        if ref_nbytes(dtype, numel).is_none() {
            shape.push(4);
        }
        let numel: usize = shape.iter().product();
        let n = ref_nbytes(dtype, numel).unwrap_or(0);
        prop::collection::vec(any::<u8>(), n).prop_map(move |data| RefTensor {
            dtype,
            shape: shape.clone(),
            data,
        })
    })
}

fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,3}(\\.[0-9]{1,2}){0,2}",
        any::<String>().prop_filter("not the metadata key", |s| s != "__metadata__"),
    ]
}

type GeneratedFile = (Vec<(String, RefTensor)>, Option<HashMap<String, String>>);

fn file_strategy() -> impl Strategy<Value = GeneratedFile> {
    (
        prop::collection::btree_map(name_strategy(), tensor_strategy(), 0..6),
        prop::option::of(prop::collection::hash_map(".{0,8}", ".{0,8}", 0..4)),
    )
        .prop_map(|(tensors, meta)| (tensors.into_iter().collect(), meta))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn files_written_by_the_reference_load_identically((tensors, meta) in file_strategy()) {
        let bytes = reference_file(&tensors, meta.clone());
        // The reference writer emits `{},"__metadata__":{}}` for metadata
        // with no tensors, which neither reader accepts.
        if tensors.is_empty() && meta.is_some() {
            assert_same_verdict(&bytes);
            return Ok(());
        }
        let header = parse(&bytes).expect("a file the reference wrote is valid");
        let theirs = safetensors::SafeTensors::deserialize(&bytes).expect("reference reads its own file");
        prop_assert_eq!(header.tensors().len(), tensors.len());
        prop_assert_eq!(header.metadata().cloned().map(|m| m.into_iter().collect::<HashMap<_, _>>()), meta);
        prop_assert!(header.warnings().is_empty());
        let data_start = usize::try_from(header.data_start()).expect("small");
        for t in header.tensors() {
            let view = theirs.tensor(t.name()).expect("same names");
            let (_, original) = tensors.iter().find(|(n, _)| n == t.name()).expect("written");
            prop_assert_eq!(t.dtype().name(), format!("{:?}", view.dtype()));
            prop_assert_eq!(t.shape().iter().map(|&d| d as usize).collect::<Vec<_>>(), view.shape().to_vec());
            let ours = &bytes[data_start + t.data_offsets()[0] as usize..data_start + t.data_offsets()[1] as usize];
            prop_assert_eq!(ours, view.data());
            prop_assert_eq!(ours, &original.data[..]);
            prop_assert_eq!(t.numel(), original.shape.iter().product::<usize>() as u64);
        }
        // Offset order.
        for w in header.tensors().windows(2) {
            prop_assert!(w[0].data_offsets()[1] == w[1].data_offsets()[0]);
        }
    }

    #[test]
    fn mutated_files_get_the_reference_verdict(
        (tensors, meta) in file_strategy(),
        mutation in mutation_strategy(),
    ) {
        let bytes = reference_file(&tensors, meta);
        let mutated = mutation.apply(bytes);
        assert_same_verdict(&mutated);
    }
}

/// One way of damaging a file.
#[derive(Debug, Clone)]
enum Mutation {
    /// XOR a byte at a relative position.
    Flip { at: f64, mask: u8 },
    /// Cut the file at a relative length.
    Truncate { at: f64 },
    /// Insert bytes at a relative position.
    Insert { at: f64, bytes: Vec<u8> },
    /// Remove a run of bytes.
    Delete { at: f64, len: usize },
    /// Rewrite the header text and fix N (or not).
    Rewrite {
        edit: HeaderEdit,
        fix_len: bool,
        at: f64,
    },
    /// Several flips inside the header.
    HeaderFlips { flips: Vec<(f64, u8)> },
}

#[derive(Debug, Clone)]
enum HeaderEdit {
    /// Replace one digit run with another number.
    Number(String),
    /// Replace a dtype string with another.
    Dtype(String),
    /// Insert JSON text after a comma or brace.
    InsertText(String),
    /// Duplicate the first tensor entry under its own name.
    DuplicateEntry,
    /// Pad with whitespace at the start or end.
    Pad { leading: bool, text: String },
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    let at = 0.0f64..1.0;
    prop_oneof![
        (at.clone(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        at.clone().prop_map(|at| Mutation::Truncate { at }),
        (at.clone(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (at.clone(), 1usize..8).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (edit_strategy(), any::<bool>(), at.clone())
            .prop_map(|(edit, fix_len, at)| Mutation::Rewrite { edit, fix_len, at }),
        prop::collection::vec((at, 1u8..=255), 1..4)
            .prop_map(|flips| Mutation::HeaderFlips { flips }),
    ]
}

fn edit_strategy() -> impl Strategy<Value = HeaderEdit> {
    let dtypes: Vec<String> = REF_DTYPES
        .iter()
        .map(|d| format!("{d:?}"))
        .chain(["f32".to_owned(), "F8".to_owned(), String::new()])
        .collect();
    prop_oneof![
        prop_oneof![
            (0u64..64).prop_map(|n| n.to_string()),
            Just(u64::MAX.to_string()),
            Just((1u64 << 63).to_string()),
            Just("18446744073709551616".to_owned()),
            Just("-1".to_owned()),
            Just("1.0".to_owned()),
            Just("-0".to_owned()),
            Just("1e1".to_owned()),
            Just("00".to_owned()),
        ]
        .prop_map(HeaderEdit::Number),
        prop::sample::select(dtypes).prop_map(HeaderEdit::Dtype),
        prop_oneof![
            Just("\"x\":1,".to_owned()),
            Just("\"__metadata__\":null,".to_owned()),
            Just("\"__metadata__\":{\"a\":\"b\"},".to_owned()),
            Just("\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},".to_owned()),
            Just("\"z\":[\"F4\",[2],[0,1]],".to_owned()),
            Just("\"extra\":[[[[]]]],".to_owned()),
            Just(",".to_owned()),
            Just("}".to_owned()),
        ]
        .prop_map(HeaderEdit::InsertText),
        Just(HeaderEdit::DuplicateEntry),
        (
            any::<bool>(),
            prop_oneof![
                Just(" ".to_owned()),
                Just("\n\t".to_owned()),
                Just("\0".to_owned()),
                Just("\u{feff}".to_owned())
            ]
        )
            .prop_map(|(leading, text)| HeaderEdit::Pad { leading, text }),
    ]
}

fn pos(at: f64, len: usize) -> usize {
    ((at * len as f64) as usize).min(len)
}

impl Mutation {
    fn apply(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
        match self {
            Mutation::Flip { at, mask } => {
                let i = pos(*at, bytes.len() - 1);
                bytes[i] ^= mask;
            }
            Mutation::Truncate { at } => bytes.truncate(pos(*at, bytes.len())),
            Mutation::Insert { at, bytes: ins } => {
                let i = pos(*at, bytes.len());
                bytes.splice(i..i, ins.iter().copied());
            }
            Mutation::Delete { at, len } => {
                let i = pos(*at, bytes.len());
                let end = (i + len).min(bytes.len());
                bytes.drain(i..end);
            }
            Mutation::HeaderFlips { flips } => {
                for (at, mask) in flips {
                    let i = 8 + pos(*at, n.saturating_sub(1));
                    bytes[i] ^= mask;
                }
            }
            Mutation::Rewrite { edit, fix_len, at } => {
                let header =
                    String::from_utf8(bytes[8..8 + n].to_vec()).expect("writer emits UTF-8");
                let data = bytes[8 + n..].to_vec();
                let new = edit.apply(&header, *at);
                let len = if *fix_len { new.len() } else { n };
                let mut out = (len as u64).to_le_bytes().to_vec();
                out.extend_from_slice(new.as_bytes());
                out.extend_from_slice(&data);
                return out;
            }
        }
        bytes
    }
}

impl HeaderEdit {
    fn apply(&self, header: &str, at: f64) -> String {
        match self {
            HeaderEdit::Number(num) => {
                let runs: Vec<(usize, usize)> = digit_runs(header);
                if runs.is_empty() {
                    return header.to_owned();
                }
                let (s, e) = runs[pos(at, runs.len() - 1)];
                format!("{}{num}{}", &header[..s], &header[e..])
            }
            HeaderEdit::Dtype(d) => {
                let marks: Vec<usize> = header
                    .match_indices("\"dtype\":\"")
                    .map(|(i, _)| i + 9)
                    .collect();
                if marks.is_empty() {
                    return header.to_owned();
                }
                let s = marks[pos(at, marks.len() - 1)];
                let e = s + header[s..].find('"').unwrap_or(0);
                format!("{}{d}{}", &header[..s], &header[e..])
            }
            HeaderEdit::InsertText(text) => {
                let marks: Vec<usize> = header
                    .match_indices(['{', ','])
                    .map(|(i, _)| i + 1)
                    .collect();
                let s = marks[pos(at, marks.len() - 1)];
                format!("{}{text}{}", &header[..s], &header[s..])
            }
            HeaderEdit::DuplicateEntry => {
                // The writer emits `"name":{...}` entries; copy the first one again.
                let Ok(serde_json::Value::Object(map)) =
                    serde_json::from_str::<serde_json::Value>(header)
                else {
                    return header.to_owned();
                };
                let Some((name, value)) = map.iter().find(|(k, _)| *k != "__metadata__") else {
                    return header.to_owned();
                };
                let trimmed = header.trim_end();
                let body = trimmed.strip_suffix('}').unwrap_or(trimmed);
                format!(
                    "{body},{}:{value}}}",
                    serde_json::to_string(name).expect("string")
                )
            }
            HeaderEdit::Pad { leading, text } => {
                if *leading {
                    format!("{text}{header}")
                } else {
                    format!("{}{text}", header.trim_end())
                }
            }
        }
    }
}

fn digit_runs(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit()
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'_')
        {
            let s0 = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push((s0, i));
        } else {
            i += 1;
        }
    }
    out
}
