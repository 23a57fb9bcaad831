//! A quantized weight's true values to `.npy` (`<f4`) or `.bin` (f32,
//! little-endian), decoded in chunks into one reused buffer as they are
//! written: memory does not grow with the tensor.

use std::io::{self, Write};
use std::path::Path;

use super::{
    Encoding, ExportError, ExportFormat, ExportOptions, ExportReport, npy, same_file,
    write_streamed,
};
use crate::dtype::Dtype;
use crate::format::Checkpoint;
use crate::fsio::write_chunk;
use crate::jobs::{CancelToken, Progress};
use crate::quant::{Dequantizer, LogicalTensor};

/// Elements decoded per chunk.
const CHUNK: usize = 1 << 16;

/// Exports the decoded values of logical tensor `lt` of `ck` to `out`, as
/// F32. Refuses a tensor that is not decoded, a format other than `.npy`
/// or `.bin`, and to write over a file of the checkpoint; checks that no
/// part's file changed before the result is renamed into place.
pub fn export_logical(
    ck: &Checkpoint,
    lt: &LogicalTensor,
    out: &Path,
    opts: &ExportOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<ExportReport, ExportError> {
    let format = match opts.format {
        Some(f) => f,
        None => ExportFormat::from_path(out)?,
    };
    if !matches!(format, ExportFormat::Npy | ExportFormat::Bin) {
        return Err(ExportError::DequantFormat { format });
    }
    let dq = Dequantizer::new(ck, lt).ok_or_else(|| ExportError::NotDecoded {
        name: lt.name().to_owned(),
        status: lt.status().id(),
        message: lt.message().to_owned(),
    })?;
    let mut sources: Vec<&Path> = ck.shards().iter().map(|s| s.file().path()).collect();
    sources.push(ck.path());
    if let Some(source) = sources.into_iter().find(|s| same_file(out, s)) {
        return Err(ExportError::WouldOverwriteSource {
            output: out.to_path_buf(),
            source_file: source.to_path_buf(),
        });
    }
    let parts = dq.parts();
    ck.check_files(&parts).map_err(ExportError::Load)?;
    let _fetched = ck
        .fetch(&parts, cancel, progress)
        .map_err(ExportError::Load)?;
    let source = || ck.check_unchanged(&parts);
    let shape = lt.shape().to_vec();
    if format == ExportFormat::Npy
        && let Some((dimension, &size)) = shape
            .iter()
            .enumerate()
            .find(|&(_, &d)| i64::try_from(d).is_err())
    {
        return Err(ExportError::NumpyDimensionTooLarge {
            name: lt.name().to_owned(),
            shape,
            dimension,
            size,
        });
    }
    let elements = dq.len();
    let mut report = ExportReport {
        path: out.to_path_buf(),
        format,
        tensor: lt.name().to_owned(),
        dtype: Dtype::F32,
        shape: shape.clone(),
        elements,
        encoding: Encoding::Values,
        npy_descr: None,
        npy_version: None,
        png: None,
        bytes_written: 0,
    };
    let header = if format == ExportFormat::Npy {
        let (header, version) = npy::header("<f4", &shape);
        report.npy_descr = Some("<f4");
        report.npy_version = Some(version);
        header
    } else {
        Vec::new()
    };
    progress.set_total(elements.saturating_mul(4));
    report.bytes_written = write_streamed(out, opts, &source, |w| {
        w.write_all(&header)?;
        write_values(w, &dq, cancel, progress)
    })?;
    Ok(report)
}

fn write_values(
    w: &mut dyn Write,
    dq: &Dequantizer<'_>,
    cancel: &CancelToken,
    progress: &Progress,
) -> io::Result<()> {
    let mut vals = vec![0f32; CHUNK];
    let mut bytes = vec![0u8; CHUNK * 4];
    let mut at = 0u64;
    while at < dq.len() {
        let got = dq.values(at, &mut vals);
        if got == 0 {
            break;
        }
        for (b, v) in bytes.chunks_exact_mut(4).zip(&vals[..got]) {
            b.copy_from_slice(&v.to_le_bytes());
        }
        write_chunk(w, &bytes[..got * 4], got as u64 * 4, cancel, progress)?;
        at += got as u64;
    }
    Ok(())
}
