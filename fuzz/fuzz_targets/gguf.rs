//! The `gguf` target: the input through GGUF's header reader (whole, and
//! as the prefix a remote reader holds), the model it is read into, and,
//! when it opens, the path a verb takes: the file opened as a checkpoint
//! (alone, and as the second part of a split model), its quantization
//! found, a bounded run of each logical tensor's elements decoded at its
//! start and at its end, and, when its tensors are small, statistics, a
//! diff against itself, exports and re-saves.
//!
//! What the target does is [`gguf`], which `tests/it/fuzz_regressions.rs`
//! replays the seeds through (this file is a module there; the libFuzzer
//! entry is only in the fuzz build).

#![cfg_attr(not(test), no_main)]

use std::path::Path;

use tensorscope::diff::{DiffOptions, diff};
use tensorscope::export::{ExportOptions, export_logical, export_tensor};
use tensorscope::format::Checkpoint;
use tensorscope::format::gguf::header::{self, Value};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::quant::{self, Dequantizer};
use tensorscope::resave::{ResaveOptions, resave};
use tensorscope::stats::{StatsOptions, logical_stats, scan};

#[cfg(not(test))]
static DIR: std::sync::LazyLock<std::path::PathBuf> =
    std::sync::LazyLock::new(|| tensorscope_fuzz::scratch("gguf"));

#[cfg(not(test))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gguf(&DIR, data);
});

/// Elements decoded per logical tensor at most, at its start and again at
/// its end.
pub const DECODE_LIMIT: usize = 4096;

/// Elements and bytes the statistics, diff and export passes read at most
/// per input (over all tensors); larger inputs are decoded only in part.
pub const READ_LIMIT: u64 = 1 << 20;

/// Array elements read per array, a page from its middle.
const PAGE: u64 = 16;

/// The split model's first part, beside the input as its second.
pub const FIRST_PART: &str = "m-00001-of-00002.gguf";
/// The name the input takes as the split model's second part.
pub const SECOND_PART: &str = "m-00002-of-00002.gguf";

/// A GGUF string: u64 length, bytes.
fn string(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

/// The first part of a split model of two parts (`split.no` 0,
/// `split.count` 2): one F32 tensor `a` of shape `[2]`, values 1 and -2.5.
pub fn first_part() -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&1u64.to_le_bytes());
    out.extend_from_slice(&2u64.to_le_bytes());
    for (key, value) in [(&b"split.no"[..], 0u16), (b"split.count", 2)] {
        out.extend(string(key));
        out.extend_from_slice(&2u32.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend(string(b"a"));
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&2u64.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    while !out.len().is_multiple_of(32) {
        out.push(0);
    }
    out.extend_from_slice(&1.0f32.to_le_bytes());
    out.extend_from_slice(&(-2.5f32).to_le_bytes());
    out
}

/// The target: see the module's documentation.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn gguf(dir: &Path, data: &[u8]) {
    let len = data.len() as u64;
    if let Ok(h) = header::parse(data) {
        for (_, v) in &h.metadata {
            let _ = v.is_summarised();
            let _ = v.to_json();
            page(data, v);
        }
        for t in &h.tensors {
            let _ = header::stored_bytes(t);
            let _ = t.shape();
        }
    }
    // What a remote reader holds of the file: its first half, then more.
    let _ = header::parse_prefix(&data[..data.len() / 2], len);
    if tensorscope::format::gguf::open::open(data, len).is_err() {
        return;
    }
    let path = dir.join("input.gguf");
    std::fs::write(&path, data).expect("the input can be written");
    if let Ok(ck) = Checkpoint::open(&path) {
        read(dir, &ck);
    }
    let first = dir.join(FIRST_PART);
    if !first.exists() {
        std::fs::write(&first, first_part()).expect("the first part can be written");
    }
    std::fs::write(dir.join(SECOND_PART), data).expect("the input can be written");
    if let Ok(ck) = Checkpoint::open(&first) {
        read(dir, &ck);
    }
}

/// A page of the elements of array `v` from its middle, and of each array
/// it keeps, as the explorer pages a long array.
fn page(data: &[u8], v: &Value) {
    if let Value::Array {
        elem,
        len,
        items,
        at,
    } = v
    {
        let _ = header::elements(data, *elem, *at, *len, len / 2, PAGE);
        for item in items {
            page(data, item);
        }
    }
}

/// The checkpoint's logical tensors decoded in part, and, when its
/// tensors are small, scanned, diffed against itself and exported.
fn read(dir: &Path, ck: &Checkpoint) {
    let cancel = CancelToken::new();
    let _ = ck.readable();
    let _ = ck.data_bytes();
    let _ = ck.warnings();
    for &t in ck.tensors() {
        let _ = ck.stored_facts(t);
    }
    let found = quant::detect(ck);
    let logical = found.as_ref().map_or(&[][..], |q| q.tensors());
    let mut out = vec![0f32; DECODE_LIMIT];
    let mut codes = vec![0i32; DECODE_LIMIT];
    for lt in logical {
        let _ = (lt.label(), lt.status(), lt.message(), lt.stored_bytes(ck));
        let Some(dq) = Dequantizer::new(ck, lt) else {
            continue;
        };
        let parts = dq.parts();
        if ck.check_files(&parts).is_err() {
            continue;
        }
        let Ok(_fetched) = ck.fetch(&parts, &cancel, &Progress::new()) else {
            continue;
        };
        let _ = dq.values(0, &mut out);
        let tail = dq.len().saturating_sub(DECODE_LIMIT as u64);
        let _ = dq.values_and_codes(tail, &mut out, &mut codes);
        let _ = (dq.code_range(), dq.code_dtype(), dq.scale_at(0));
        let _ = (dq.nested_blocks(), dq.scale_part(), dq.has_codes());
    }
    let (numel, nbytes) = ck.entries().fold((0u64, 0u64), |(n, b), (_, info)| {
        (
            n.saturating_add(info.numel()),
            b.saturating_add(info.nbytes()),
        )
    });
    let decoded = logical
        .iter()
        .fold(0u64, |n, lt| n.saturating_add(lt.numel()));
    if numel > READ_LIMIT || nbytes > READ_LIMIT || decoded > READ_LIMIT {
        return;
    }
    let options = StatsOptions::default();
    let _ = scan(ck, ck.tensors(), &options, &cancel, &Progress::new());
    let _ = diff(ck, ck, &DiffOptions::default(), &cancel, &Progress::new());
    for lt in logical {
        let _ = logical_stats(ck, lt, &options, &cancel, &Progress::new());
        let _ = export_logical(
            ck,
            lt,
            &dir.join("logical.npy"),
            &ExportOptions::default(),
            &cancel,
            &Progress::new(),
        );
    }
    // Re-saved as it is, and with Hugging Face's names (Q and K
    // un-permuted by the head counts the metadata gives).
    for hf_names in [false, true] {
        let opts = ResaveOptions {
            hf_names,
            ..ResaveOptions::default()
        };
        let _ = resave(
            ck,
            &dir.join("out.safetensors"),
            &opts,
            &cancel,
            &Progress::new(),
        );
    }
    if let Some(&first) = ck.tensors().first() {
        let _ = export_tensor(
            ck,
            first,
            &dir.join("out.npy"),
            &ExportOptions::default(),
            &cancel,
            &Progress::new(),
        );
    }
}
