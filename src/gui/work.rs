//! What each background job of the explorer does: plain functions over the
//! library, run on a job's thread. They take what they need by value (an
//! `Arc` of the checkpoint, a key), so the runner only has to spawn them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::demo;
use super::model::{QuantRows, ScanFigures, natural_cmp};
use super::state::{
    Entry, Listing, Loaded, PairDetail, SaveAsDialog, SaveAsForm, ScanProgress, StatsKey,
};
use crate::diff::{self, DiffError, DiffOptions, DiffReport, Pair};
use crate::format::{Checkpoint, LoadError, TensorRef};
use crate::jobs::{CancelToken, Progress, on_job_pool};
use crate::resave::{MetadataEdit, ResaveOptions, parse_pair};
use crate::stats::heatmap::{self, Heatmap, HeatmapError, HeatmapRequest};
use crate::stats::{self, Detail, Scalar, StatsError, StatsOptions, TensorStats};

/// The scan stores figures after this many bytes, so the table fills in as
/// it goes.
const SCAN_BATCH_BYTES: u64 = 256 << 20;
/// …or after this many tensors (checkpoints of many small tensors).
const SCAN_BATCH_TENSORS: usize = 4096;
/// Folder entries listed at most (a folder of millions stays usable).
const MAX_LISTED: usize = 50_000;

/// Opens `path` and computes what the table needs.
pub fn open(path: &Path) -> Result<Loaded, LoadError> {
    Checkpoint::open(path).map(Loaded::new)
}

/// Writes the demo checkpoint to its folder and opens it.
pub fn open_demo() -> Result<Loaded, LoadError> {
    let folder = demo::demo_folder();
    let path = demo::write_demo(&folder).map_err(|e| LoadError::Io {
        path: folder.clone(),
        source: std::io::Error::other(e.to_string()).into(),
    })?;
    open(&path)
}

/// Statistics of one tensor, on the job pool.
pub fn tensor_stats(
    ck: &Checkpoint,
    tensor: TensorRef,
    key: StatsKey,
    quant: Option<&QuantRows>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<TensorStats, StatsError> {
    let options = StatsOptions {
        bit_order: key.order,
        ..StatsOptions::default()
    };
    on_job_pool(|| {
        // A quantized weight's row asks for the statistics of its true
        // values, never of its packed codes.
        if key.dequant
            && let Some(lt) = quant.and_then(|q| q.quant.owner(tensor))
            && let Some(l) = stats::logical_stats(ck, lt, &options, cancel, progress)?
        {
            let mut s = l.stats;
            s.quant = Some(Box::new(l.quant));
            return Ok(s);
        }
        stats::tensor_stats(ck, tensor, &options, cancel, progress)
    })
}

fn figures_of(v: &stats::ValueStats) -> ScanFigures {
    ScanFigures {
        min: v.min.map(Scalar::to_f64),
        max: v.max.map(Scalar::to_f64),
        std: v.std,
        mean: v.mean,
        l2_norm: v.l2_norm,
        non_finite: v.nan + v.pos_inf + v.neg_inf,
        outliers: v.outliers_6sigma,
        max_abs_over_std: v.max_abs_over_std,
    }
}

/// Range, moments, NaN/Inf and 6σ counts of every tensor, in batches whose
/// figures go to `live` as each ends.
pub fn scan(
    ck: &Checkpoint,
    live: &ScanProgress,
    quant: Option<&QuantRows>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<(), StatsError> {
    let options = StatsOptions {
        detail: Detail::Outliers,
        ..StatsOptions::default()
    };
    let total: u64 = ck
        .entries()
        .map(|(_, i)| stats::planned_work(i.dtype(), i.nbytes(), &options))
        .fold(0, u64::saturating_add);
    progress.set_total(total);
    let run = |batch: &[(usize, TensorRef)]| -> Result<(), StatsError> {
        let refs: Vec<TensorRef> = batch.iter().map(|(_, t)| *t).collect();
        let inner = Progress::new();
        let report = on_job_pool(|| stats::scan(ck, &refs, &options, cancel, &inner))?;
        progress.add(inner.done());
        if let Ok(mut figures) = live.figures.lock() {
            for ((i, _), t) in batch.iter().zip(&report.tensors) {
                if let Some(slot) = figures.get_mut(*i) {
                    *slot = Some(figures_of(&t.values));
                }
            }
        }
        live.generation.fetch_add(1, Ordering::Release);
        Ok(())
    };
    let mut batch: Vec<(usize, TensorRef)> = Vec::new();
    let mut batch_bytes = 0u64;
    // A decoded quantized weight's parts are not scanned: its row gets the
    // figures of its values, after the stored tensors.
    let decoded = |t: TensorRef| {
        quant
            .and_then(|q| q.quant.owner(t))
            .filter(|lt| lt.status() == crate::quant::Status::Decoded)
    };
    for (i, (t, info)) in ck.entries().enumerate() {
        if decoded(t).is_some() {
            continue;
        }
        batch.push((i, t));
        batch_bytes = batch_bytes.saturating_add(info.nbytes());
        if batch_bytes >= SCAN_BATCH_BYTES || batch.len() >= SCAN_BATCH_TENSORS {
            run(&batch)?;
            batch.clear();
            batch_bytes = 0;
        }
    }
    if !batch.is_empty() {
        run(&batch)?;
    }
    for (i, (t, _)) in ck.entries().enumerate() {
        let Some(lt) = quant.and_then(|q| q.logical_at(i)) else {
            continue;
        };
        if decoded(t).is_none() {
            continue;
        }
        let inner = Progress::new();
        let got = on_job_pool(|| stats::logical_stats(ck, lt, &options, cancel, &inner))?;
        // The total planned its parts as stored tensors: count them done.
        progress.add(
            lt.parts()
                .iter()
                .filter_map(|(_, p)| ck.info(*p))
                .map(|i| stats::planned_work(i.dtype(), i.nbytes(), &options))
                .fold(0, u64::saturating_add),
        );
        if let (Some(l), Ok(mut figures)) = (got, live.figures.lock())
            && let Some(slot) = figures.get_mut(i)
        {
            *slot = Some(figures_of(&l.stats.values));
        }
        live.generation.fetch_add(1, Ordering::Release);
    }
    Ok(())
}

/// The heatmap of one tensor, after checking its file has not changed.
pub fn heatmap(
    ck: &Checkpoint,
    tensor: TensorRef,
    request: &HeatmapRequest,
    quant: Option<&QuantRows>,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<Heatmap, HeatmapError> {
    // A quantized weight's map is of its decoded values.
    if let Some(lt) = quant.and_then(|q| q.quant.owner(tensor))
        && let Some(dq) = crate::quant::Dequantizer::new(ck, lt)
    {
        let parts = dq.parts();
        let unreadable = |e: crate::format::LoadError| HeatmapError::Unreadable(e.message());
        ck.check_files(&parts).map_err(unreadable)?;
        let _fetched = ck.fetch(&parts, cancel, progress).map_err(unreadable)?;
        let unchanged = || ck.check_unchanged(&parts).map_err(unreadable);
        let mut scratch = vec![0f32; 4096];
        let mut decode = |first: u64, out: &mut [f64]| {
            let n = out.len().min(scratch.len());
            let got = dq.values(first, &mut scratch[..n]);
            for (o, v) in out.iter_mut().zip(&scratch[..got]) {
                *o = f64::from(*v);
            }
            got
        };
        let map = heatmap::compute_with(lt.shape(), &mut decode, request, cancel, progress)?;
        unchanged()?;
        return Ok(map);
    }
    let unreadable = |e: crate::format::LoadError| HeatmapError::Unreadable(e.message());
    ck.check_files(&[tensor]).map_err(unreadable)?;
    let _fetched = ck.fetch(&[tensor], cancel, progress).map_err(unreadable)?;
    let unchanged = || ck.check_unchanged(&[tensor]).map_err(unreadable);
    let info = ck
        .info(tensor)
        .ok_or_else(|| HeatmapError::Unreadable("the tensor is not in the file".into()))?;
    let map = heatmap::compute(
        info.dtype(),
        info.shape(),
        ck.bytes(tensor),
        request,
        cancel,
        progress,
    )?;
    unchanged()?;
    Ok(map)
}

/// [`pair_detail`] of a pair where a side is a quantized weight: each side
/// by name, its decoded values when its quantization has a decoded
/// logical tensor of that name, else its stored tensor; each side's rows
/// un-permuted by `unpermute`'s heads (a GGUF's Q or K).
pub fn pair_detail_of(
    (a, qa, name_a): (&Checkpoint, Option<&QuantRows>, &str),
    (b, qb, name_b): (&Checkpoint, Option<&QuantRows>, &str),
    unpermute: (Option<u64>, Option<u64>),
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<PairDetail, String> {
    let options = StatsOptions::default();
    let (sa, parts_a, stats_a) = detail_side(a, qa, name_a, &options, cancel, progress)?;
    let (sb, parts_b, stats_b) = detail_side(b, qb, name_b, &options, cancel, progress)?;
    // Kept in the cache (remote sides) while the Δ figures read them again.
    let _fa = a
        .fetch(&parts_a, cancel, progress)
        .map_err(|e| e.to_string())?;
    let _fb = b
        .fetch(&parts_b, cancel, progress)
        .map_err(|e| e.to_string())?;
    let opts = DiffOptions {
        unpermute,
        ..DiffOptions::default()
    };
    let delta = diff::delta_histogram_of(a, sa, b, sb, 128, &opts, cancel, progress)
        .map_err(|e| e.to_string())?;
    let map = diff::abs_delta_map_of(a, sa, b, sb, 256, &opts, cancel, progress)
        .map_err(|e| e.to_string())?;
    a.check_unchanged(&parts_a).map_err(|e| e.to_string())?;
    b.check_unchanged(&parts_b).map_err(|e| e.to_string())?;
    Ok(PairDetail {
        a: stats_a,
        b: stats_b,
        delta,
        map,
    })
}

/// One side of [`pair_detail_of`]: its source, the stored tensors it reads,
/// and its statistics.
fn detail_side<'q>(
    ck: &Checkpoint,
    q: Option<&'q QuantRows>,
    name: &str,
    options: &StatsOptions,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<(crate::diff::Source<'q>, Vec<TensorRef>, TensorStats), String> {
    use crate::diff::Source;
    let logical = q
        .and_then(|q| q.quant.find(name))
        .filter(|lt| lt.status() == crate::quant::Status::Decoded);
    if let Some(lt) = logical {
        let parts = lt.parts().iter().map(|(_, t)| *t).collect::<Vec<_>>();
        let stats = stats::logical_stats(ck, lt, options, cancel, progress)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{name} is not decoded"))?
            .stats;
        return Ok((Source::Logical(lt), parts, stats));
    }
    let t = ck.find(name).ok_or_else(|| format!("no tensor {name}"))?;
    let stats = stats::tensor_stats(ck, t, options, cancel, progress).map_err(|e| e.to_string())?;
    Ok((Source::Stored(t), vec![t], stats))
}

/// The diff of two checkpoints, on the job pool.
pub fn diff(
    a: &Checkpoint,
    b: &Checkpoint,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<DiffReport, DiffError> {
    on_job_pool(|| diff::diff(a, b, &DiffOptions::default(), cancel, progress))
}

/// Both sides' statistics, the Δ histogram and the |Δ| map of one pair.
pub fn pair_detail(
    a: &Checkpoint,
    b: &Checkpoint,
    pair: Pair,
    cancel: &CancelToken,
    progress: &Progress,
) -> Result<PairDetail, String> {
    let options = StatsOptions::default();
    // Fetched once (remote sides) for the statistics and the Δ figures.
    let _fa = a
        .fetch(&[pair.a], cancel, progress)
        .map_err(|e| e.to_string())?;
    let _fb = b
        .fetch(&[pair.b], cancel, progress)
        .map_err(|e| e.to_string())?;
    let sa =
        stats::tensor_stats(a, pair.a, &options, cancel, progress).map_err(|e| e.to_string())?;
    let sb =
        stats::tensor_stats(b, pair.b, &options, cancel, progress).map_err(|e| e.to_string())?;
    let opts = DiffOptions::default();
    let delta = diff::delta_histogram(a, b, pair, 128, &opts, cancel, progress)
        .map_err(|e| e.to_string())?;
    let map =
        diff::abs_delta_map(a, b, pair, 256, &opts, cancel, progress).map_err(|e| e.to_string())?;
    // The Δ figures read both files again: neither may have changed since.
    a.check_unchanged(&[pair.a]).map_err(|e| e.to_string())?;
    b.check_unchanged(&[pair.b]).map_err(|e| e.to_string())?;
    Ok(PairDetail {
        a: sa,
        b: sb,
        delta,
        map,
    })
}

/// What `path` is, for the picker: a folder's entries (folders first, then
/// natural order), or anything else as a file to open (opening tells why a
/// path that does not exist cannot be opened).
pub fn list_folder(path: &Path) -> Result<Listing, String> {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Ok(Listing::File(path.to_path_buf()));
    }
    let read = std::fs::read_dir(path).map_err(|e| format!("{e}: {}", path.display()))?;
    let mut out: Vec<Entry> = read
        .filter_map(Result::ok)
        .take(MAX_LISTED)
        .map(|e| {
            let path = e.path();
            let meta = std::fs::metadata(&path).ok();
            Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir: meta.as_ref().is_some_and(std::fs::Metadata::is_dir),
                size: meta.map_or(0, |m| m.len()),
                path,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.is_dir
            .cmp(&a.is_dir)
            .then_with(|| natural_cmp(&a.name.to_lowercase(), &b.name.to_lowercase()))
    });
    Ok(Listing::Folder(out))
}

/// The resave options the *Save as* form describes, or why it is invalid.
pub fn resave_options(d: &SaveAsDialog, form: &SaveAsForm) -> Result<ResaveOptions, String> {
    let renames = form
        .renames
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            parse_pair(l, "a rename", "FROM=TO")
                .map(|(a, b)| (a.trim().to_owned(), b.trim().to_owned()))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut edits = Vec::new();
    for (k, v, keep) in &form.metadata {
        match (keep, d.original_metadata.get(k)) {
            (false, Some(_)) => edits.push(MetadataEdit::Delete { key: k.clone() }),
            (true, Some(old)) if old != v => edits.push(MetadataEdit::Set {
                key: k.clone(),
                value: v.clone(),
            }),
            (true, None) => edits.push(MetadataEdit::Set {
                key: k.clone(),
                value: v.clone(),
            }),
            _ => {}
        }
    }
    let max_shard_bytes = if form.max_shard.trim().is_empty() {
        None
    } else {
        Some(crate::resave::parse_size(&form.max_shard)?)
    };
    Ok(ResaveOptions {
        selection: Some(d.selection.clone()),
        renames,
        metadata_edits: edits,
        conversions: form
            .conversions
            .iter()
            .filter_map(|c| Some((c.from, c.to?)))
            .collect(),
        overflow: form.overflow,
        max_shard_bytes,
        dequantize: form.dequantize,
        ..ResaveOptions::default()
    })
}

/// The path a form writes to, as typed.
pub fn typed_path(text: &str) -> PathBuf {
    PathBuf::from(text.trim())
}

/// The checkpoints of a comparison, when both are open.
pub fn both(a: Option<&Loaded>, b: Option<&Loaded>) -> Option<(Arc<Checkpoint>, Arc<Checkpoint>)> {
    Some((Arc::clone(&a?.ck), Arc::clone(&b?.ck)))
}
