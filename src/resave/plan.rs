//! [`plan`]: the request checked against the checkpoint and every output
//! tensor and file decided (selection, renames, metadata, conversions,
//! shards), with no I/O but reading the folder of the output.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use regex::Regex;

use super::{MetadataEdit, PlannedFile, PlannedTensor, ResaveError, ResaveOptions, ResavePlan};
use crate::dtype::Dtype;
use crate::dtype::convert::is_supported;
use crate::format::write::{TensorEntry, header_for_entries};
use crate::format::{Checkpoint, CheckpointKind, INDEX_FILE_NAME, TensorRef};
use crate::fsio::same_file;

/// Checks `opts` against `ck` and decides every output tensor and file,
/// without writing anything. `out` is the output path:
/// - one file (no `max_shard_bytes`, `out` not ending in `.json`): `out`
///   itself, or `out/model.safetensors` when `out` is a folder;
/// - sharded (`max_shard_bytes`, or `out` ending in `.json`): the index at
///   `out` when it ends in `.json`, else `out/model.safetensors.index.json`
///   (the folder is created if missing), with the shards beside it.
pub fn plan(ck: &Checkpoint, out: &Path, opts: &ResaveOptions) -> Result<ResavePlan, ResaveError> {
    let selected = select(ck, opts)?;
    // A GGUF's block types are always written as their values.
    let quant = crate::quant::for_values(ck, opts.dequantize);
    let mut warnings = Vec::new();
    let mut tensors = plan_tensors(ck, &selected, quant.as_ref(), opts, &mut warnings)?;
    for &(from, to) in &opts.conversions {
        if !tensors.iter().any(|t| t.source_dtype == from) {
            warnings.push(format!(
                "no selected tensor is {from}; the conversion {from}={to} does nothing"
            ));
        }
    }

    let mut metadata = source_metadata(ck, &mut warnings);
    // A Hugging Face checkpoint's metadata is `format: pt`, not the GGUF's
    // table: the result is the original file, byte for byte.
    if opts.hf_names {
        metadata = Some(BTreeMap::from([("format".to_owned(), "pt".to_owned())]));
    }
    for edit in &opts.metadata_edits {
        match edit {
            MetadataEdit::Set { key, value } => {
                metadata
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key.clone(), value.clone());
            }
            MetadataEdit::Delete { key } => {
                if metadata.as_mut().and_then(|m| m.remove(key)).is_none() {
                    return Err(ResaveError::MetadataKeyMissing { key: key.clone() });
                }
            }
        }
    }

    let sharded = opts.max_shard_bytes.is_some() || is_json(out);
    if opts.max_shard_bytes == Some(0) {
        return Err(ResaveError::InvalidShardSize);
    }
    let (files, index, create_folder) = if sharded {
        let (folder, index, create) = if is_json(out) {
            let folder = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (folder, out.to_path_buf(), false)
        } else if out.is_dir() {
            (out.to_path_buf(), out.join(INDEX_FILE_NAME), false)
        } else if out.exists() || has_extension(out, "safetensors") {
            return Err(ResaveError::InvalidOutput {
                path: out.to_path_buf(),
                message:
                    "a sharded output needs a folder or an index path (….index.json), not a file"
                        .into(),
            });
        } else {
            (out.to_path_buf(), out.join(INDEX_FILE_NAME), true)
        };
        let groups = shard_groups(&tensors, opts.max_shard_bytes.unwrap_or(u64::MAX));
        let count = groups.len();
        let files = groups
            .into_iter()
            .enumerate()
            .map(|(i, members)| {
                let name = format!("model-{:05}-of-{count:05}.safetensors", i + 1);
                PlannedFile {
                    path: folder.join(&name),
                    name,
                    data_bytes: members.iter().map(|&k| tensors[k].nbytes).sum(),
                    tensors: members,
                }
            })
            .collect::<Vec<_>>();
        (files, Some(index), create.then_some(folder))
    } else {
        let path = if out.is_dir() {
            out.join("model.safetensors")
        } else {
            out.to_path_buf()
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = PlannedFile {
            path,
            name,
            tensors: (0..tensors.len()).collect(),
            data_bytes: tensors.iter().map(|t| t.nbytes).sum(),
        };
        (vec![file], None, None)
    };
    for (f, file) in files.iter().enumerate() {
        for &k in &file.tensors {
            tensors[k].file = f;
        }
    }
    let mut index_metadata = serde_json::Map::new();
    if let CheckpointKind::Sharded {
        metadata: serde_json::Value::Object(m),
        ..
    } = &ck.kind()
    {
        index_metadata.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let total: u64 = files.iter().map(|f| f.data_bytes).sum();
    index_metadata.insert("total_size".into(), total.into());

    let plan = ResavePlan {
        tensors,
        metadata,
        files,
        index,
        index_metadata,
        create_folder,
        conversions: opts.conversions.clone(),
        overflow: opts.overflow,
        warnings,
        fail_after_bytes: opts.fail_after_bytes,
        quant,
    };
    check_not_source(ck, &plan)?;
    // Catch reserved names, size and header limits now, not halfway.
    for file in &plan.files {
        header_for_entries(&entries(&plan, file), plan.metadata.as_ref())?;
    }
    Ok(plan)
}

/// The output tensors of `selected`, in order, with their names and
/// dtypes: each decoded quantized weight of `quant` once, as its values,
/// in place of its parts.
fn plan_tensors(
    ck: &Checkpoint,
    selected: &[TensorRef],
    quant: Option<&crate::quant::Quantization>,
    opts: &ResaveOptions,
    warnings: &mut Vec<String>,
) -> Result<Vec<PlannedTensor>, ResaveError> {
    let decoded = |t: TensorRef| {
        let q = quant?;
        let l = q.owner_index(t)?;
        let lt = q.tensors().get(l)?;
        (lt.status() == crate::quant::Status::Decoded).then_some((l, lt))
    };
    // Renames of a logical name apply to the weight written in its place.
    let logical_names: HashSet<&str> = selected
        .iter()
        .filter_map(|&t| decoded(t).map(|(_, lt)| lt.name()))
        .collect();
    let (logical_renames, stored_renames): (Vec<_>, Vec<_>) =
        opts.renames.iter().cloned().partition(|(from, _)| {
            logical_names.contains(from.as_str()) && ck.find(from).is_none()
        });
    let names = rename(ck, selected, &stored_renames)?;
    let mut conversions: HashMap<Dtype, Dtype> = HashMap::new();
    for &(from, to) in &opts.conversions {
        if !is_supported(from, to) {
            return Err(ResaveError::UnsupportedConversion { from, to });
        }
        if conversions.insert(from, to).is_some() {
            return Err(ResaveError::DuplicateConversion { from });
        }
    }
    let mut tensors = Vec::with_capacity(selected.len());
    let mut written_logical = HashSet::new();
    let mut undecoded = 0usize;
    for (&t, name) in selected.iter().zip(names) {
        let Some(info) = ck.info(t) else { continue };
        if let Some((l, lt)) = decoded(t) {
            if !written_logical.insert(l) {
                continue;
            }
            let source_dtype = lt.value_dtype();
            let dtype = conversions
                .get(&source_dtype)
                .copied()
                .unwrap_or(source_dtype);
            let name = logical_renames
                .iter()
                .find(|(from, _)| from == lt.name())
                .map_or_else(|| lt.name().to_owned(), |(_, to)| to.clone());
            tensors.push(PlannedTensor {
                source: t,
                source_name: lt.name().to_owned(),
                name,
                source_dtype,
                dtype,
                shape: lt.shape().to_vec(),
                nbytes: lt.numel().saturating_mul(u64::from(dtype.bits() / 8)),
                file: 0,
                logical: Some(l),
                unpermute_heads: None,
            });
            continue;
        }
        if quant.is_some_and(|q| q.owner(t).is_some()) {
            undecoded += 1;
        }
        let dtype = conversions
            .get(&info.dtype())
            .copied()
            .unwrap_or(info.dtype());
        // Conversions go to whole-byte dtypes, so this cannot overflow more
        // than the source's own (validated) size.
        let nbytes = if dtype == info.dtype() {
            info.nbytes()
        } else {
            info.numel().saturating_mul(u64::from(dtype.bits() / 8))
        };
        tensors.push(PlannedTensor {
            source: t,
            source_name: info.name().to_owned(),
            name,
            source_dtype: info.dtype(),
            dtype,
            shape: info.shape().to_vec(),
            nbytes,
            file: 0,
            logical: None,
            unpermute_heads: None,
        });
    }
    if opts.hf_names {
        hf_names(ck, &mut tensors)?;
    }
    if undecoded > 0 {
        warnings.push(format!(
            "{undecoded} stored parts of quantized weights that are not decoded (recognized or \
             inconsistent) are copied as stored"
        ));
    }
    // A logical name may meet a stored one.
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for t in &tensors {
        if let Some(first) = seen.insert(t.name.as_str(), t.source_name.as_str()) {
            return Err(ResaveError::NameCollision {
                name: t.name.clone(),
                first: first.to_owned(),
                second: t.source_name.clone(),
            });
        }
    }
    Ok(tensors)
}

/// `--hf-names`: each tensor of a GGUF under its Hugging Face name, its
/// attention Q and K marked to be un-permuted.
fn hf_names(ck: &Checkpoint, tensors: &mut [PlannedTensor]) -> Result<(), ResaveError> {
    use crate::format::gguf::names;
    for t in tensors {
        let parts = ck
            .shards()
            .get(t.source.shard())
            .and_then(|s| s.file().gguf())
            .ok_or_else(|| ResaveError::HfNames("the checkpoint is not a GGUF".into()))?;
        let arch = parts.architecture().unwrap_or("(none)");
        if !names::MAPPED_ARCHITECTURES.contains(&arch) {
            return Err(ResaveError::HfNames(format!(
                "general.architecture is {arch:?}; names are mapped for {}",
                names::MAPPED_ARCHITECTURES.join(", ")
            )));
        }
        t.name = names::hf_name(&t.source_name).ok_or_else(|| {
            ResaveError::HfNames(format!(
                "tensor {:?} has no Hugging Face name in llama.cpp's table",
                t.source_name
            ))
        })?;
        if names::is_permuted(&t.source_name) {
            let heads = names::permuted_heads(parts, &t.source_name).ok_or_else(|| {
                ResaveError::HfNames(format!(
                    "tensor {:?} was permuted by the head count, and {arch}.attention.head_count is missing or not an unsigned integer",
                    t.source_name
                ))
            })?;
            let rows = t.shape.first().copied().unwrap_or(0);
            names::check_rows(&t.source_name, rows, heads).map_err(ResaveError::HfNames)?;
            t.unpermute_heads = Some(heads);
        }
    }
    Ok(())
}

pub(super) fn entries<'a>(plan: &'a ResavePlan, file: &PlannedFile) -> Vec<TensorEntry<'a>> {
    file.tensors
        .iter()
        .filter_map(|&k| plan.tensors.get(k))
        .map(|t| TensorEntry {
            name: &t.name,
            dtype: t.dtype,
            shape: &t.shape,
            nbytes: t.nbytes,
        })
        .collect()
}

/// The tensors to write, in checkpoint order.
fn select(ck: &Checkpoint, opts: &ResaveOptions) -> Result<Vec<TensorRef>, ResaveError> {
    let compile = |patterns: &[String]| {
        patterns
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|e| ResaveError::InvalidRegex {
                    pattern: p.clone(),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let keep = compile(&opts.keep)?;
    let drop = compile(&opts.drop)?;
    let count = ck.tensors().len();
    let mut chosen = vec![opts.selection.is_none(); count];
    for &index in opts.selection.iter().flatten() {
        *chosen
            .get_mut(index)
            .ok_or(ResaveError::SelectionOutOfRange { index, count })? = true;
    }
    let selected: Vec<TensorRef> = ck
        .tensors()
        .iter()
        .zip(chosen)
        .filter(|&(_, c)| c)
        .map(|(&t, _)| t)
        .filter(|&t| {
            let Some(name) = ck.info(t).map(crate::format::TensorInfo::name) else {
                return false;
            };
            (keep.is_empty() || keep.iter().any(|r| r.is_match(name)))
                && !drop.iter().any(|r| r.is_match(name))
        })
        .collect();
    // A checkpoint of metadata only is written as it is; a selection that
    // leaves nothing of a checkpoint that has tensors is a mistake.
    if selected.is_empty() && count > 0 {
        return Err(ResaveError::NothingSelected);
    }
    Ok(selected)
}

/// The output name of every selected tensor.
fn rename(
    ck: &Checkpoint,
    selected: &[TensorRef],
    renames: &[(String, String)],
) -> Result<Vec<String>, ResaveError> {
    let mut map: HashMap<&str, &str> = HashMap::with_capacity(renames.len());
    let selected_names: HashSet<&str> = selected
        .iter()
        .filter_map(|&t| ck.info(t).map(crate::format::TensorInfo::name))
        .collect();
    for (from, to) in renames {
        if map.insert(from, to).is_some() {
            return Err(ResaveError::DuplicateRename { from: from.clone() });
        }
        if ck.find(from).is_none() {
            return Err(ResaveError::RenameMissing { from: from.clone() });
        }
        if !selected_names.contains(from.as_str()) {
            return Err(ResaveError::RenameNotSelected { from: from.clone() });
        }
        if to == "__metadata__" {
            return Err(ResaveError::ReservedName { from: from.clone() });
        }
    }
    let mut out = Vec::with_capacity(selected.len());
    let mut owner: HashMap<String, &str> = HashMap::with_capacity(selected.len());
    for &t in selected {
        let Some(source) = ck.info(t).map(crate::format::TensorInfo::name) else {
            continue;
        };
        let name = map.get(source).copied().unwrap_or(source).to_owned();
        if let Some(first) = owner.insert(name.clone(), source) {
            return Err(ResaveError::NameCollision {
                name,
                first: first.to_owned(),
                second: source.to_owned(),
            });
        }
        out.push(name);
    }
    Ok(out)
}

/// The source's `__metadata__`: the file's, or for a sharded model the
/// union of its shards' (the first shard wins where they disagree, with a
/// warning).
fn source_metadata(
    ck: &Checkpoint,
    warnings: &mut Vec<String>,
) -> Option<BTreeMap<String, String>> {
    let mut merged: Option<BTreeMap<String, String>> = None;
    for shard in ck.shards() {
        let Some(m) = shard.file().header().metadata() else {
            continue;
        };
        let target = merged.get_or_insert_with(BTreeMap::new);
        for (k, v) in m {
            match target.get(k) {
                Some(existing) if existing != v => warnings.push(format!(
                    "shards disagree on metadata key {k:?}; keeping {existing:?}, not {v:?} from {}",
                    shard.name()
                )),
                Some(_) => {}
                None => {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
    }
    merged
}

/// Greedy shards in tensor order: a new shard starts when the next tensor
/// would take the current one past `max_bytes` (a larger tensor gets a
/// shard of its own).
fn shard_groups(tensors: &[PlannedTensor], max_bytes: u64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut size = 0u64;
    for (k, t) in tensors.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if !g.is_empty() && size.saturating_add(t.nbytes) <= max_bytes => {
                g.push(k);
                size += t.nbytes;
            }
            _ => {
                groups.push(vec![k]);
                size = t.nbytes;
            }
        }
    }
    groups
}

/// Refuses any output path that is a file of the source.
pub(super) fn check_not_source(ck: &Checkpoint, plan: &ResavePlan) -> Result<(), ResaveError> {
    let mut sources: Vec<&Path> = ck.shards().iter().map(|s| s.file().path()).collect();
    sources.push(ck.path());
    let outputs = plan
        .files
        .iter()
        .map(|f| f.path.as_path())
        .chain(plan.index.as_deref());
    for output in outputs {
        if let Some(source) = sources.iter().find(|s| same_file(output, s)) {
            return Err(ResaveError::WouldOverwriteSource {
                output: output.to_path_buf(),
                source_file: source.to_path_buf(),
            });
        }
    }
    Ok(())
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

fn is_json(path: &Path) -> bool {
    has_extension(path, "json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(nbytes: u64) -> PlannedTensor {
        PlannedTensor {
            source: TensorRef::for_tests(0, 0),
            source_name: String::new(),
            name: String::new(),
            source_dtype: Dtype::U8,
            dtype: Dtype::U8,
            shape: vec![nbytes],
            nbytes,
            file: 0,
            logical: None,
            unpermute_heads: None,
        }
    }

    #[test]
    fn shards_are_greedy_in_order() {
        let t: Vec<PlannedTensor> = [4, 4, 3, 10, 1, 0].into_iter().map(planned).collect();
        assert_eq!(
            shard_groups(&t, 8),
            vec![vec![0, 1], vec![2], vec![3], vec![4, 5]]
        );
        assert_eq!(shard_groups(&t, u64::MAX), vec![vec![0, 1, 2, 3, 4, 5]]);
    }
}
