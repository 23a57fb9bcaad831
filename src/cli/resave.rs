//! `tensorscope resave FILE -o OUT …`: a new safetensors file (or sharded
//! model) from a checkpoint's tensors, selected, renamed, with edited
//! metadata and converted dtypes.
//!
//! Exit codes: 0 when every file was written, 2 otherwise (nothing is
//! changed then, except in the rare case of a rename failing midway in a
//! sharded output, which the error reports).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::output::{
    ErrorDoc, Output, display_name, fail, group_digits, path_string, report_error,
    with_progress_bar,
};
use super::{Common, EXIT_OK};
use crate::dtype::Dtype;
use crate::dtype::convert::{ConversionCounts, Overflow};
use crate::format::Checkpoint;
use crate::jobs::{CancelToken, Progress};
use crate::resave::{
    MetadataEdit, ResaveError, ResaveOptions, ResaveReport, TensorConversion, parse_pair,
    parse_size, resave,
};

/// `tensorscope resave FILE -o OUT`.
#[derive(Debug, Args)]
pub struct ResaveArgs {
    /// A checkpoint: a .safetensors, .npy/.npz, PyTorch or GGUF file, a shard
    /// index, a folder holding one, or an https:// or hf:// location.
    pub file: PathBuf,
    /// The output: a .safetensors file (a folder gets model.safetensors);
    /// with --max-shard-size, a folder or an index path (….index.json).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// Keep only tensors whose original name matches (a regex search;
    /// anchor with ^…$ for one exact name). Repeatable: any match keeps.
    #[arg(long, value_name = "RE")]
    pub keep: Vec<String>,
    /// Drop tensors whose original name matches (after --keep). Repeatable.
    #[arg(long, value_name = "RE")]
    pub drop: Vec<String>,
    /// Rename a tensor (exact original names; split at the first '=').
    #[arg(long, value_name = "FROM=TO")]
    pub rename: Vec<String>,
    /// Set a __metadata__ key (split at the first '=').
    #[arg(long, value_name = "K=V")]
    pub meta: Vec<String>,
    /// Remove a __metadata__ key.
    #[arg(long = "del-meta", value_name = "K")]
    pub del_meta: Vec<String>,
    /// Convert every tensor of dtype FROM to TO: F64, F32, F16, BF16 to one
    /// another, or to F8_E4M3 / F8_E5M2 (round to nearest even). FROM `*`
    /// means each of F64, F32, F16 and BF16 (other than TO).
    #[arg(long, value_name = "FROM=TO")]
    pub dtype: Vec<String>,
    /// Write each quantized weight (GPTQ, AWQ, NVFP4, MXFP4, …) as a plain
    /// tensor of its true values under its logical name, in place of its
    /// packed parts: a checkpoint any reader can load. The values are in
    /// the dtype the quantizing library computes in; add --dtype *=BF16
    /// for one dtype throughout.
    #[arg(long)]
    pub dequant: bool,
    /// A GGUF of a Llama-family model: write each tensor under its Hugging
    /// Face name (llama.cpp's tensor table reversed), attention Q and K
    /// un-permuted, so that the result lines up with the checkpoint it was
    /// converted from (block types as their values).
    #[arg(long)]
    pub hf_names: bool,
    /// What a value too large for F8 becomes.
    #[arg(long, value_name = "MODE", default_value = "saturate",
          value_parser = ["saturate", "nan"])]
    pub overflow: String,
    /// Re-shard at this much tensor data per shard: 5GB (10^9), 5GiB
    /// (2^30) or a byte count. Writes model-0000N-of-0000M.safetensors and
    /// model.safetensors.index.json.
    #[arg(long, value_name = "SIZE")]
    pub max_shard_size: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// One file in `resave --json`.
#[derive(Debug, Serialize)]
pub struct FileDoc {
    /// The file's path, after its rename into place.
    pub path: String,
    /// How many tensors the file holds.
    pub tensors: usize,
    /// Bytes of tensor data in the file (its size less the header).
    pub data_bytes: u64,
    /// The file's size in bytes, header included, as read back.
    pub file_size: u64,
}

/// One tensor in `resave --json`.
#[derive(Debug, Serialize)]
pub struct TensorDoc {
    /// The tensor's name in the output (after `--rename`).
    pub name: String,
    /// The tensor's name in the source checkpoint.
    pub source_name: String,
    /// The dtype written (after `--dtype`).
    pub dtype: &'static str,
    /// The dtype in the source; differs from `dtype` only when converted.
    pub source_dtype: &'static str,
    /// The shape, unchanged by a resave.
    pub shape: Vec<u64>,
    /// Bytes of the tensor's data in the output.
    pub nbytes: u64,
    /// The name of the file holding it (a shard's name in the index).
    pub file: String,
}

/// The `resave --json` document: what was written, where, and what
/// conversion did to the values.
#[derive(Debug, Serialize)]
pub struct ResaveDoc<'a> {
    /// The checkpoint read, as given.
    pub path: String,
    /// The main output: the file, or the index of a sharded output.
    pub output: String,
    /// The safetensors files written, in shard order.
    pub files: Vec<FileDoc>,
    /// The index of a sharded output.
    pub index: Option<String>,
    /// Tensors written over every file.
    pub tensor_count: usize,
    /// Bytes of tensor data over every file (headers excluded).
    pub data_bytes: u64,
    /// Bytes written over every file, headers and index included.
    pub bytes_written: u64,
    /// Every tensor written, in the output's order.
    pub tensors: Vec<TensorDoc>,
    /// Converted tensors with their saturated / NaN / Inf / zero counts.
    pub conversions: &'a [TensorConversion],
    /// The sums of those counts.
    pub conversion_totals: &'a ConversionCounts,
    /// What a value too large for an F8 target became: `saturate` or `nan`.
    pub overflow: Overflow,
    /// The `__metadata__` of every output file (`null`: none).
    pub metadata: &'a Option<std::collections::BTreeMap<String, String>>,
    /// Warnings: a `--dtype` that matched no tensor, shards whose metadata
    /// disagree.
    pub warnings: &'a [String],
}

impl<'a> ResaveDoc<'a> {
    fn new(ck: &Checkpoint, r: &'a ResaveReport, overflow: Overflow) -> Self {
        let file_path = |i: usize| {
            r.files
                .get(i)
                .map(|f| path_string(&f.path))
                .unwrap_or_default()
        };
        Self {
            path: path_string(ck.path()),
            output: r
                .index
                .as_ref()
                .map_or_else(|| file_path(0), |p| path_string(p)),
            files: r
                .files
                .iter()
                .map(|f| FileDoc {
                    path: path_string(&f.path),
                    tensors: f.tensors,
                    data_bytes: f.data_bytes,
                    file_size: f.file_size,
                })
                .collect(),
            index: r.index.as_ref().map(|p| path_string(p)),
            tensor_count: r.tensors.len(),
            data_bytes: r.data_bytes,
            bytes_written: r.bytes_written,
            tensors: r
                .tensors
                .iter()
                .map(|t| TensorDoc {
                    name: t.name.clone(),
                    source_name: t.source_name.clone(),
                    dtype: t.dtype.name(),
                    source_dtype: t.source_dtype.name(),
                    shape: t.shape.clone(),
                    nbytes: t.nbytes,
                    file: file_path(t.file),
                })
                .collect(),
            conversions: &r.conversions,
            conversion_totals: &r.conversion_totals,
            overflow,
            metadata: &r.metadata,
            warnings: &r.warnings,
        }
    }
}

fn usage(message: String) -> ErrorDoc {
    ErrorDoc {
        kind: "Usage".into(),
        message,
        path: None,
        globals: Vec::new(),
    }
}

fn split_pair<'s>(text: &'s str, flag: &str, what: &str) -> Result<(&'s str, &'s str), ErrorDoc> {
    parse_pair(text, flag, what).map_err(|e| usage(e.to_string()))
}

/// The library options from the command line.
fn options(args: &ResaveArgs) -> Result<ResaveOptions, ErrorDoc> {
    let mut renames = Vec::with_capacity(args.rename.len());
    for r in &args.rename {
        let (from, to) = split_pair(r, "--rename", "FROM=TO")?;
        renames.push((from.to_owned(), to.to_owned()));
    }
    let mut metadata_edits = Vec::new();
    for m in &args.meta {
        let (key, value) = split_pair(m, "--meta", "K=V")?;
        if args.del_meta.iter().any(|k| k == key) {
            return Err(usage(format!(
                "metadata key {key:?} is both set (--meta) and deleted (--del-meta)"
            )));
        }
        metadata_edits.push(MetadataEdit::Set {
            key: key.to_owned(),
            value: value.to_owned(),
        });
    }
    for key in &args.del_meta {
        metadata_edits.push(MetadataEdit::Delete { key: key.clone() });
    }
    let mut conversions = Vec::new();
    for d in &args.dtype {
        let (from, to) = split_pair(d, "--dtype", "FROM=TO (such as F32=BF16)")?;
        let parse = |s: &str| {
            s.trim()
                .parse::<Dtype>()
                .map_err(|e| usage(format!("--dtype {d:?}: {e}")))
        };
        let to = parse(to)?;
        if from.trim() == "*" {
            conversions.extend(
                crate::dtype::convert::CONVERT_FROM
                    .into_iter()
                    .filter(|&f| f != to)
                    .map(|f| (f, to)),
            );
        } else {
            conversions.push((parse(from)?, to));
        }
    }
    let max_shard_bytes = match &args.max_shard_size {
        Some(s) => Some(parse_size(s).map_err(|e| usage(format!("--max-shard-size: {e}")))?),
        None => None,
    };
    Ok(ResaveOptions {
        dequantize: args.dequant,
        hf_names: args.hf_names,
        selection: None,
        keep: args.keep.clone(),
        drop: args.drop.clone(),
        renames,
        metadata_edits,
        conversions,
        overflow: if args.overflow == "nan" {
            Overflow::Nan
        } else {
            Overflow::Saturate
        },
        max_shard_bytes,
        fail_after_bytes: None,
    })
}

/// The error document of a resave error.
pub fn resave_error_doc(e: &ResaveError) -> ErrorDoc {
    ErrorDoc {
        kind: e.kind().to_owned(),
        message: e.to_string(),
        path: e.path().map(path_string),
        globals: Vec::new(),
    }
}

/// Runs `resave` and returns its exit code (0 written, 2 otherwise).
pub fn run(args: &ResaveArgs, out: &mut Output, cancel: &CancelToken) -> i32 {
    let json = args.common.json;
    let opts = match options(args) {
        Ok(o) => o,
        Err(doc) => return fail(out, json, &doc),
    };
    let ck = match Checkpoint::open_readable(&args.file) {
        Ok(ck) => ck,
        Err(e) => return report_error(out, json, &e),
    };
    let progress = Progress::new();
    let started = Instant::now();
    let result = with_progress_bar(&progress, started, || {
        resave(&ck, &args.output, &opts, cancel, &progress)
    });
    match result {
        Ok(report) => {
            if json {
                out.json(&ResaveDoc::new(&ck, &report, opts.overflow));
            } else {
                out.text(&to_text(&report, started.elapsed()));
            }
            EXIT_OK
        }
        Err(e) => fail(out, json, &resave_error_doc(&e)),
    }
}

fn to_text(r: &ResaveReport, elapsed: Duration) -> String {
    let mut s = String::new();
    for f in &r.files {
        let _ = writeln!(
            s,
            "wrote {}: {} tensors, {} bytes",
            path_string(&f.path),
            group_digits(f.tensors as u64),
            group_digits(f.file_size)
        );
    }
    if let Some(index) = &r.index {
        let _ = writeln!(s, "wrote {}", path_string(index));
    }
    let mut by_pair: Vec<(Dtype, Dtype, usize, ConversionCounts)> = Vec::new();
    for c in &r.conversions {
        match by_pair.iter_mut().find(|p| p.0 == c.from && p.1 == c.to) {
            Some(p) => {
                p.2 += 1;
                p.3.add(&c.counts);
            }
            None => by_pair.push((c.from, c.to, 1, c.counts)),
        }
    }
    for (from, to, n, c) in &by_pair {
        let _ = writeln!(
            s,
            "converted {from} to {to}: {} tensors, {} values ({} saturated, {} became NaN, {} became Inf, {} flushed to zero, {} NaN kept)",
            group_digits(*n as u64),
            group_digits(c.elements),
            group_digits(c.saturated),
            group_digits(c.overflow_nan),
            group_digits(c.overflow_inf),
            group_digits(c.underflow_zero),
            group_digits(c.nan),
        );
    }
    let renamed: Vec<String> = r
        .tensors
        .iter()
        .filter(|t| t.name != t.source_name)
        .map(|t| {
            format!(
                "{} -> {}",
                display_name(&t.source_name),
                display_name(&t.name)
            )
        })
        .collect();
    if !renamed.is_empty() {
        let _ = writeln!(s, "renamed: {}", renamed.join(", "));
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    let _ = writeln!(
        s,
        "{} tensors, {} bytes of tensor data in {:.2} s",
        group_digits(r.tensors.len() as u64),
        group_digits(r.data_bytes),
        elapsed.as_secs_f64()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn args(extra: &[&str]) -> ResaveArgs {
        let mut argv = vec![
            "tensorscope",
            "resave",
            "in.safetensors",
            "-o",
            "out.safetensors",
        ];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(argv)
            .expect("parses")
            .command
        {
            Some(crate::cli::Verb::Resave(a)) => a,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn options_from_flags() {
        let o = options(&args(&[
            "--rename",
            "a=b=c",
            "--meta",
            "k=v=w",
            "--del-meta",
            "x",
            "--dtype",
            "F32=BF16",
            "--max-shard-size",
            "2GiB",
            "--overflow",
            "nan",
        ]))
        .expect("valid");
        assert_eq!(o.renames, [("a".to_owned(), "b=c".to_owned())]);
        assert_eq!(
            o.metadata_edits,
            [
                MetadataEdit::Set {
                    key: "k".into(),
                    value: "v=w".into()
                },
                MetadataEdit::Delete { key: "x".into() }
            ]
        );
        assert_eq!(o.conversions, [(Dtype::F32, Dtype::BF16)]);
        assert_eq!(o.max_shard_bytes, Some(2 << 30));
        assert_eq!(o.overflow, Overflow::Nan);
        assert!(options(&args(&["--rename", "ab"])).is_err());
        assert!(options(&args(&["--dtype", "F32=FP8"])).is_err());
        assert!(options(&args(&["--meta", "k=v", "--del-meta", "k"])).is_err());
        assert!(options(&args(&["--max-shard-size", "5XB"])).is_err());
    }
}
