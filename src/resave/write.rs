//! [`execute`]: a plan written file by file to temporary files, each
//! verified by the validating reader, then all renamed into place.

use std::collections::HashMap;
use std::io::Write as _;

use super::plan::{check_not_source, entries};
use super::{PlannedFile, ResaveError, ResavePlan, ResaveReport, TensorConversion, WrittenFile};
use crate::dtype::Dtype;
use crate::dtype::convert::{ConversionCounts, Converter, convert_chunks};
use crate::format::Checkpoint;
use crate::format::StoredFile;
use crate::format::write::header_for_entries;
use crate::fsio::{
    FileError, FinishedFile, PendingFile, ShortWriter, commit_all, copy_chunked, write_chunk,
};
use crate::jobs::{CancelToken, Progress};
use crate::quant::Dequantizer;

/// Writes `plan` (from [`plan()`](super::plan()) on the same checkpoint). Progress counts
/// bytes written; cancellation is checked between chunks of at most 8 MiB.
pub fn execute(
    ck: &Checkpoint,
    plan: &ResavePlan,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ResaveReport, ResaveError> {
    // A source cut short mid-write fails a copy in the kernel ("bad
    // address"): the change is what happened, so it is what is told.
    execute_once(ck, plan, cancel, progress).map_err(|e| match ck.check_all_unchanged() {
        Err(changed) if !matches!(e, ResaveError::Load(_)) => ResaveError::Load(changed),
        _ => e,
    })
}

fn execute_once(
    ck: &Checkpoint,
    plan: &ResavePlan,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ResaveReport, ResaveError> {
    if cancel.is_cancelled() {
        return Err(ResaveError::Cancelled);
    }
    check_consistent(ck, plan)?;
    check_not_source(ck, plan)?;
    ck.check_all_unchanged().map_err(ResaveError::Load)?;
    // What the plan reads: a decoded weight's parts, else the tensor.
    let reads: Vec<crate::format::TensorRef> = plan
        .tensors
        .iter()
        .flat_map(|t| {
            match t
                .logical
                .and_then(|l| plan.quant.as_ref().and_then(|q| q.tensors().get(l)))
            {
                Some(lt) => lt.parts().iter().map(|(_, r)| *r).collect(),
                None => vec![t.source],
            }
        })
        .collect();
    // A remote model comes into the cache first; a local tensor stored
    // otherwise than in C order is read into scratch space one at a time,
    // as it is written (so the space in use is one tensor's).
    let _fetched = if ck.is_remote() {
        ck.fetch(&reads, cancel, progress)
            .map_err(ResaveError::Load)?
    } else {
        crate::source::Fetched::default()
    };
    let headers = plan
        .files
        .iter()
        .map(|f| header_for_entries(&entries(plan, f), plan.metadata.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let index_json = plan.index.as_ref().map(|_| index_document(plan));
    let total = headers
        .iter()
        .map(|(h, _)| h.len() as u64)
        .sum::<u64>()
        .saturating_add(plan.data_bytes())
        .saturating_add(index_json.as_ref().map_or(0, |j| j.len() as u64));
    progress.set_total(total);

    let created = match &plan.create_folder {
        Some(folder) if !folder.exists() => {
            std::fs::create_dir_all(folder).map_err(|e| FileError::from_io(folder, e))?;
            Some(folder.clone())
        }
        _ => None,
    };
    let result = write_all_files(ck, plan, &headers, index_json.as_deref(), cancel, progress);
    match result {
        Ok(report) => Ok(report),
        Err(e) => {
            if let Some(folder) = created {
                // Only succeeds when empty: never removes anything but the
                // folder this call created.
                let _ = std::fs::remove_dir(folder);
            }
            Err(e)
        }
    }
}
fn write_all_files(
    ck: &Checkpoint,
    plan: &ResavePlan,
    headers: &[(Vec<u8>, Vec<usize>)],
    index_json: Option<&[u8]>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ResaveReport, ResaveError> {
    let converters: HashMap<Dtype, Converter> = plan
        .conversions
        .iter()
        .filter_map(|&(from, to)| Some((from, Converter::new(to, plan.overflow)?)))
        .collect();
    let mut budget = plan.fail_after_bytes;
    let mut finished: Vec<FinishedFile> = Vec::with_capacity(plan.files.len() + 1);
    let mut written = Vec::with_capacity(plan.files.len());
    let mut conversions = Vec::new();
    let mut bytes_written = 0u64;
    // Why a tensor could not be read, when that stopped a file's writing.
    let mut unreadable: Option<crate::format::LoadError> = None;
    for (file, (header, order)) in plan.files.iter().zip(headers) {
        let mut pending = PendingFile::create(&file.path)?;
        let mut w = ShortWriter::new(pending.writer(), budget);
        let body = (|| -> std::io::Result<()> {
            // A local tensor's bytes, read into scratch space if need be
            // (a remote model's were fetched above).
            let mut fetch = |refs: &[crate::format::TensorRef]| {
                if ck.is_remote() {
                    return Ok(crate::source::Fetched::default());
                }
                ck.fetch(refs, cancel, progress).map_err(|e| {
                    let text = e.to_string();
                    unreadable = Some(e);
                    std::io::Error::other(text)
                })
            };
            write_chunk(&mut w, header, header.len() as u64, cancel, progress)?;
            for &k in order {
                let Some(t) = file.tensors.get(k).and_then(|&ti| plan.tensors.get(ti)) else {
                    continue;
                };
                if let Some(l) = t.logical {
                    let lt = plan.quant.as_ref().and_then(|q| q.tensors().get(l));
                    let Some(dq) = lt.and_then(|lt| Dequantizer::new(ck, lt)) else {
                        return Err(std::io::Error::other("a planned quantized weight is gone"));
                    };
                    let _parts = fetch(&dq.parts())?;
                    let conv = converters.get(&t.source_dtype).copied();
                    let mut counts = ConversionCounts::default();
                    for range in row_ranges(t, dq.len()) {
                        write_dequantized(
                            &dq,
                            range,
                            t.source_dtype,
                            conv,
                            &mut counts,
                            |chunk| {
                                write_chunk(&mut w, chunk, chunk.len() as u64, cancel, progress)
                            },
                        )?;
                    }
                    if t.dtype != t.source_dtype {
                        conversions.push(TensorConversion {
                            name: t.name.clone(),
                            from: t.source_dtype,
                            to: t.dtype,
                            counts,
                        });
                    }
                    continue;
                }
                let _one = fetch(&[t.source])?;
                let all = ck.bytes(t.source);
                let width = u64::from(t.source_dtype.bits() / 8).max(1);
                let ranges = row_ranges(t, all.len() as u64 / width);
                let piece = |r: &std::ops::Range<u64>| {
                    let (b, e) = (r.start * width, r.end * width);
                    all.get(b as usize..e as usize).unwrap_or(&[])
                };
                if t.dtype == t.source_dtype {
                    for r in &ranges {
                        copy_chunked(&mut w, piece(r), cancel, progress)?;
                    }
                } else if let Some(&conv) = converters.get(&t.source_dtype) {
                    let mut counts = ConversionCounts::default();
                    for r in &ranges {
                        convert_chunks(t.source_dtype, piece(r), conv, &mut counts, |chunk| {
                            write_chunk(&mut w, chunk, chunk.len() as u64, cancel, progress)
                        })?;
                    }
                    conversions.push(TensorConversion {
                        name: t.name.clone(),
                        from: t.source_dtype,
                        to: t.dtype,
                        counts,
                    });
                }
            }
            w.flush()
        })();
        budget = w.remaining();
        if let (Err(_), Some(e)) = (&body, unreadable.take()) {
            return Err(ResaveError::Load(e));
        }
        body.map_err(|e| pending.error(e))?;
        let done = pending.finish()?;
        let file_size = verify(plan, file, header, &done)?;
        bytes_written += file_size;
        written.push(WrittenFile {
            path: file.path.clone(),
            tensors: file.tensors.len(),
            data_bytes: file.data_bytes,
            file_size,
        });
        finished.push(done);
    }
    if let (Some(index), Some(json)) = (&plan.index, index_json) {
        let mut pending = PendingFile::create(index)?;
        let mut w = ShortWriter::new(pending.writer(), budget);
        let r = w.write_all(json).and_then(|()| w.flush());
        r.map_err(|e| pending.error(e))?;
        progress.add(json.len() as u64);
        bytes_written += json.len() as u64;
        finished.push(pending.finish()?);
    }
    if cancel.is_cancelled() {
        return Err(ResaveError::Cancelled);
    }
    // Files written from a source that changed while being read are
    // dropped (their temporary files removed), never renamed into place.
    ck.check_all_unchanged().map_err(ResaveError::Load)?;
    commit_all(finished).map_err(ResaveError::Commit)?;
    let mut conversion_totals = ConversionCounts::default();
    for c in &conversions {
        conversion_totals.add(&c.counts);
    }
    Ok(ResaveReport {
        files: written,
        index: plan.index.clone(),
        tensors: plan.tensors.clone(),
        conversions,
        conversion_totals,
        metadata: plan.metadata.clone(),
        data_bytes: plan.data_bytes(),
        bytes_written,
        warnings: plan.warnings.clone(),
    })
}

/// The element ranges of a tensor of `numel` elements in the order they
/// are written: all of it, or, for a GGUF's Q or K under `--hf-names`, row
/// by row in Hugging Face's order.
fn row_ranges(t: &super::PlannedTensor, numel: u64) -> Vec<std::ops::Range<u64>> {
    let rows = t.shape.first().copied().unwrap_or(0);
    match t.unpermute_heads {
        Some(heads) if rows > 0 => {
            let cols = numel / rows;
            (0..rows)
                .map(|r| {
                    let s = crate::format::gguf::names::source_row(r, rows, heads);
                    s * cols..(s + 1) * cols
                })
                .collect()
        }
        _ => std::iter::once(0..numel).collect(),
    }
}

/// Elements of a quantized weight decoded per chunk.
const DEQUANT_CHUNK: usize = 1 << 16;

/// Writes the values of a decoded quantized weight as `dtype` (the dtype
/// they are computed in, so exact), through `conv` when converted, chunk
/// by chunk into reused buffers.
fn write_dequantized(
    dq: &Dequantizer<'_>,
    range: std::ops::Range<u64>,
    dtype: Dtype,
    conv: Option<Converter>,
    counts: &mut ConversionCounts,
    mut write: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let width = (dtype.bits() / 8) as usize;
    let mut vals = vec![0f32; DEQUANT_CHUNK];
    let mut bytes = vec![0u8; DEQUANT_CHUNK * width];
    let mut at = range.start;
    let end = range.end.min(dq.len());
    while at < end {
        let take = usize::try_from(end - at)
            .unwrap_or(usize::MAX)
            .min(vals.len());
        let got = dq.values(at, &mut vals[..take]);
        if got == 0 {
            break;
        }
        for (b, &v) in bytes.chunks_exact_mut(width).zip(&vals[..got]) {
            match dtype {
                Dtype::F16 => b.copy_from_slice(&half::f16::from_f32(v).to_le_bytes()),
                Dtype::BF16 => b.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
                _ => b.copy_from_slice(&v.to_le_bytes()),
            }
        }
        let chunk = &bytes[..got * width];
        match conv {
            Some(c) => convert_chunks(dtype, chunk, c, counts, &mut write)?,
            None => write(chunk)?,
        }
        at += got as u64;
    }
    Ok(())
}

/// Re-opens a finished temporary file with the validating reader and
/// checks it holds exactly the planned tensors; returns its size.
fn verify(
    plan: &ResavePlan,
    file: &PlannedFile,
    header: &[u8],
    done: &FinishedFile,
) -> Result<u64, ResaveError> {
    let fail = |message: String| ResaveError::Verify {
        path: file.path.clone(),
        message,
    };
    let back = StoredFile::open(done.temp_path()).map_err(|e| fail(e.to_string()))?;
    let h = back.header();
    if h.tensors().len() != file.tensors.len() {
        return Err(fail(format!(
            "{} tensors instead of {}",
            h.tensors().len(),
            file.tensors.len()
        )));
    }
    let by_name: HashMap<&str, &crate::TensorInfo> =
        h.tensors().iter().map(|i| (i.name(), i)).collect();
    for t in file.tensors.iter().filter_map(|&k| plan.tensors.get(k)) {
        let found = by_name.get(t.name.as_str()).copied();
        match found {
            Some(i) if i.dtype() == t.dtype && i.shape() == t.shape && i.nbytes() == t.nbytes => {}
            Some(i) => {
                return Err(fail(format!(
                    "tensor {:?} reads back as {} {:?}",
                    t.name,
                    i.dtype(),
                    i.shape()
                )));
            }
            None => return Err(fail(format!("tensor {:?} is missing", t.name))),
        }
    }
    if h.metadata() != plan.metadata.as_ref() {
        return Err(fail("the metadata differs".into()));
    }
    let expected = header.len() as u64 + file.data_bytes;
    if back.file_size() != expected {
        return Err(fail(format!(
            "{} bytes instead of {expected}",
            back.file_size()
        )));
    }
    Ok(back.file_size())
}

fn index_document(plan: &ResavePlan) -> Vec<u8> {
    let weight_map: serde_json::Map<String, serde_json::Value> = plan
        .tensors
        .iter()
        .map(|t| {
            let file = plan.files.get(t.file).map(|f| f.name.clone());
            (
                t.name.clone(),
                serde_json::Value::String(file.unwrap_or_default()),
            )
        })
        .collect();
    let doc = serde_json::json!({
        "metadata": plan.index_metadata,
        "weight_map": weight_map,
    });
    let mut text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    text.push(b'\n');
    text
}

/// Every tensor in exactly one file, every index in range, every source
/// tensor in the checkpoint, and sizes that match dtype × shape (the
/// header check does the last).
fn check_consistent(ck: &Checkpoint, plan: &ResavePlan) -> Result<(), ResaveError> {
    let mut owner = vec![None; plan.tensors.len()];
    for (f, file) in plan.files.iter().enumerate() {
        for &k in &file.tensors {
            match owner.get_mut(k) {
                Some(slot @ None) => *slot = Some(f),
                Some(Some(_)) => {
                    return Err(ResaveError::InvalidPlan(format!(
                        "tensor {k} is in two files"
                    )));
                }
                None => {
                    return Err(ResaveError::InvalidPlan(format!(
                        "file {f} lists tensor {k}"
                    )));
                }
            }
        }
    }
    for (k, t) in plan.tensors.iter().enumerate() {
        if owner[k] != Some(t.file) {
            return Err(ResaveError::InvalidPlan(format!(
                "tensor {:?} is not in the file it names",
                t.name
            )));
        }
        let source = ck.info(t.source);
        let logical = t
            .logical
            .and_then(|l| plan.quant.as_ref().and_then(|q| q.tensors().get(l)));
        if t.logical.is_some() {
            if logical.is_none_or(|lt| lt.value_dtype() != t.source_dtype || lt.shape() != t.shape)
            {
                return Err(ResaveError::InvalidPlan(format!(
                    "quantized weight {:?} does not match its parts in this checkpoint",
                    t.name
                )));
            }
        } else if source.is_none_or(|i| i.dtype() != t.source_dtype || i.shape() != t.shape) {
            return Err(ResaveError::InvalidPlan(format!(
                "tensor {:?} does not match its source in this checkpoint",
                t.name
            )));
        }
        let converted = t.dtype != t.source_dtype;
        if converted && !plan.conversions.contains(&(t.source_dtype, t.dtype)) {
            return Err(ResaveError::InvalidPlan(format!(
                "tensor {:?} changes dtype without a conversion",
                t.name
            )));
        }
    }
    Ok(())
}
