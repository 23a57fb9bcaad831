//! A checkpoint that opened, with what every frame needs computed once (in
//! the job that opened it): totals per dtype, the names' natural ranks, the
//! metadata entries, the quantized weights' rows and the overview.

use std::sync::Arc;

use crate::dtype::Dtype;
use crate::format::Checkpoint;
use crate::gui::model::{DtypeTotals, QuantRows, dtype_totals, name_ranks};

/// A checkpoint that opened, with what every frame needs computed once.
#[derive(Debug)]
pub struct Loaded {
    /// Shared with the jobs that read it.
    pub ck: Arc<Checkpoint>,
    /// Tensors, parameters and bytes per dtype (writer order), and overall.
    pub totals: (Vec<(Dtype, DtypeTotals)>, DtypeTotals),
    /// Each tensor's rank in natural name order, so sorting by name sorts
    /// integers.
    pub name_rank: Vec<u32>,
    /// The `__metadata__` entries (the index's for a sharded model), sorted.
    pub metadata: Vec<MetaEntry>,
    /// The quantized weights, when the checkpoint has any.
    pub quant: Option<Arc<QuantRows>>,
    /// What the overview shows, computed with the rest.
    pub overview: Overview,
    /// The metadata entries the overview lists (indices into `metadata`).
    pub highlights: Vec<usize>,
}

/// The overview's figures of a checkpoint, computed once when it opens.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    /// The values the tensors hold, a quantized weight counted by its
    /// logical shape (not its packed words).
    pub parameters: u64,
    /// The largest tensors by bytes (indices into `ck.tensors`), largest first.
    pub largest: Vec<usize>,
    /// The quantized weights per type (a GGUF's block type, "GPTQ int4
    /// g128", …): weights, logical parameters and the bytes of their
    /// parts, most bytes first. Empty when nothing is quantized.
    pub schemes: Vec<(String, DtypeTotals)>,
    /// The architecture from `config.json`: `None` without one, `Err` with
    /// why one could not be used.
    pub arch: Option<Result<crate::arch::Architecture, String>>,
    /// The tensors checked against the architecture.
    pub checks: Vec<crate::arch::Check>,
    /// The characters of the longest tensor name (at most 120): the table
    /// keeps its Name column wide enough to read them.
    pub longest_name: usize,
    /// The container in words (`Checkpoint::container_label`, which walks
    /// every tensor of an archive).
    pub container: String,
    /// The globals an unsafe pickle would import (none for a safe file).
    pub unsafe_globals: Vec<String>,
    /// What `scan` finds in the checkpoint's local files beyond those
    /// globals (a Keras `Lambda` layer, a GGUF chat template that reaches
    /// Python's internals, an archive member that escapes its folder, an
    /// object array): the file's name and the finding.
    pub findings: Vec<(String, crate::scan::Finding)>,
    /// True when the metadata is a pickle's non-tensor leaves (a training
    /// checkpoint's step, epoch and hyper-parameters), which the overview
    /// lists, not only the keys it knows.
    pub leaves: bool,
}

/// How many of the largest tensors the overview lists.
pub const LARGEST_SHOWN: usize = 8;

impl Overview {
    fn of(ck: &Checkpoint, quant: Option<&QuantRows>, stored_parameters: u64) -> Self {
        let parameters = quant.map_or(stored_parameters, |q| {
            let plain: u64 = ck
                .entries()
                .filter(|(t, _)| q.quant.owner(*t).is_none())
                .map(|(_, i)| i.numel())
                .fold(0, u64::saturating_add);
            q.quant
                .tensors()
                .iter()
                .map(crate::quant::LogicalTensor::numel)
                .fold(plain, u64::saturating_add)
        });
        // The k largest in O(n log k); a quantized weight once, by the
        // row that stands for it, with all its parts' bytes.
        let mut heap = std::collections::BinaryHeap::new();
        for (i, (t, info)) in ck.entries().enumerate() {
            let bytes = match quant {
                Some(q) if q.quant.owner(t).is_some() => match q.logical_at(i) {
                    Some(lt) => lt.stored_bytes(ck),
                    None => continue,
                },
                _ => info.nbytes(),
            };
            heap.push(std::cmp::Reverse((bytes, std::cmp::Reverse(i))));
            if heap.len() > LARGEST_SHOWN {
                heap.pop();
            }
        }
        let largest = heap
            .into_sorted_vec()
            .into_iter()
            .map(|std::cmp::Reverse((_, std::cmp::Reverse(i)))| i)
            .collect();
        // A GGUF says its architecture in its metadata, not in a config.json.
        let gguf = ck.shards().first().and_then(|s| s.file().gguf());
        let arch = match gguf {
            Some(g) => crate::arch::of_gguf(ck.path().to_path_buf(), g).map(Ok),
            None => crate::arch::read(ck.path()).transpose(),
        };
        let checks = match &arch {
            Some(Ok(a)) => crate::arch::check(a, ck, parameters),
            _ => Vec::new(),
        };
        let longest_name = ck
            .entries()
            .map(|(_, i)| i.name().chars().take(120).count())
            .max()
            .unwrap_or(0);
        let unsafe_globals = ck.unsafe_globals();
        let findings = scan_findings(ck, &unsafe_globals);
        Self {
            parameters,
            largest,
            schemes: quant.map(|q| scheme_totals(ck, q)).unwrap_or_default(),
            arch,
            checks,
            longest_name,
            container: ck.container_label(),
            unsafe_globals,
            findings,
            leaves: ck.shards().iter().any(|s| s.file().pickle().is_some()),
        }
    }
}

/// The findings of `scan` in `ck`'s local files (read again for their
/// headers and pickles only), but the `invalid` rule (the file opened) and
/// the globals `unsafe_globals` already names.
fn scan_findings(
    ck: &Checkpoint,
    unsafe_globals: &[String],
) -> Vec<(String, crate::scan::Finding)> {
    use crate::scan::Rule;
    let mut out = Vec::new();
    for shard in ck.shards() {
        let file = shard.file();
        if file.remote().is_some() {
            continue;
        }
        let path = file.path();
        let name = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy())
            .into_owned();
        let Ok(row) = crate::scan::scan_file(path, name.clone()) else {
            continue;
        };
        for f in row.findings {
            let named = f.rule == Rule::PickleUnsafeGlobal
                && f.evidence
                    .as_ref()
                    .is_some_and(|g| unsafe_globals.contains(g));
            if f.rule != Rule::Invalid && !named {
                out.push((name.clone(), f));
            }
        }
    }
    out
}

/// The quantized weights' totals per label, most bytes first (then by
/// label).
fn scheme_totals(ck: &Checkpoint, q: &QuantRows) -> Vec<(String, DtypeTotals)> {
    let mut per: std::collections::BTreeMap<&str, DtypeTotals> = std::collections::BTreeMap::new();
    for lt in q.quant.tensors() {
        let t = per.entry(lt.label()).or_default();
        t.tensors += 1;
        t.parameters = t.parameters.saturating_add(lt.numel());
        t.bytes = t.bytes.saturating_add(lt.stored_bytes(ck));
    }
    let mut out: Vec<(String, DtypeTotals)> = per
        .into_iter()
        .map(|(label, t)| (label.to_owned(), t))
        .collect();
    out.sort_by_key(|(_, t)| std::cmp::Reverse(t.bytes));
    out
}

impl Loaded {
    /// What the explorer shows of `ck`, computed once (in the job that
    /// opened it).
    pub fn new(ck: Checkpoint) -> Self {
        let totals = dtype_totals(&ck);
        let name_rank = name_ranks(&ck);
        // A GGUF's table is every key (a vocabulary included, paged), the
        // first part's for a split model.
        let metadata: Vec<MetaEntry> = match ck.shards().first().and_then(|s| s.file().gguf()) {
            Some(g) => gguf_entries(g),
            None => crate::diff::metadata_of(&ck)
                .into_iter()
                .map(|(key, value)| MetaEntry::new(key, value))
                .collect(),
        };
        let quant = crate::quant::detect(&ck).map(|q| Arc::new(QuantRows::new(&ck, q)));
        let overview = Overview::of(&ck, quant.as_deref(), totals.1.parameters);
        let highlights = highlights(&metadata, overview.leaves);
        Self {
            ck: Arc::new(ck),
            totals,
            name_rank,
            metadata,
            quant,
            overview,
            highlights,
        }
    }
}

/// The metadata entries the overview lists: the keys it knows, or for a
/// pickle's leaves the shallowest ones (`epoch`, `global_step`, then
/// `hyper_parameters.lr`, …), [`MAX_LEAVES`] at most, shallowest first.
fn highlights(metadata: &[MetaEntry], leaves: bool) -> Vec<usize> {
    if !leaves {
        return (0..metadata.len())
            .filter(|&i| KNOWN_KEYS.contains(&metadata[i].key.as_str()))
            .collect();
    }
    let depth = |i: usize| metadata[i].key.matches('.').count();
    let mut all: Vec<usize> = (0..metadata.len()).collect();
    all.sort_by_key(|&i| (depth(i), metadata[i].key.len()));
    all.truncate(MAX_LEAVES);
    all.sort_by(|&a, &b| (depth(a), &metadata[a].key).cmp(&(depth(b), &metadata[b].key)));
    all
}

/// Leaves the overview lists at most (the Metadata page has them all).
const MAX_LEAVES: usize = 12;

/// Metadata keys worth showing first when a file has them.
const KNOWN_KEYS: [&str; 17] = [
    "general.name",
    "general.architecture",
    "general.basename",
    "general.size_label",
    "general.file_type",
    "general.quantized_by",
    "general.license",
    "format",
    "framework",
    "modelspec.title",
    "modelspec.architecture",
    "modelspec.author",
    "modelspec.license",
    "ss_base_model_version",
    "ss_network_module",
    "ss_output_name",
    "total_size",
];

/// A GGUF's key/value table as the pane's entries, sorted by key: a
/// string as itself, anything else as `info` writes it; a long array (a
/// vocabulary) with where its elements are, for the pane's pages.
fn gguf_entries(g: &crate::format::gguf::open::GgufParts) -> Vec<MetaEntry> {
    use crate::format::gguf::header::{FULL_ARRAY, Value};
    let mut out: Vec<MetaEntry> = g
        .metadata
        .iter()
        .map(|(k, v)| {
            let mut e = MetaEntry::new(k.clone(), v.text());
            if let Value::Array { elem, len, at, .. } = v
                && *len > FULL_ARRAY
            {
                e.array = Some(MetaArray {
                    elem: *elem,
                    len: *len,
                    at: *at,
                });
            }
            e
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// A GGUF array too long to show whole: its element type, its length and
/// where its first element is in the (first) file.
#[derive(Debug, Clone, Copy)]
pub struct MetaArray {
    /// The element type.
    pub elem: crate::format::gguf::types::ValueType,
    /// How many elements.
    pub len: u64,
    /// The first element's offset in the file.
    pub at: u64,
}

/// One `__metadata__` entry, with what the metadata pane shows of it.
#[derive(Debug, Clone)]
pub struct MetaEntry {
    /// The key, as the file has it.
    pub key: String,
    /// The value, as the file has it (what *copy* copies).
    pub value: String,
    /// Key and value in lower case, for the search box.
    pub search: String,
    /// The value pretty-printed and escaped, when it is a JSON object or
    /// array (configs often are), with its line count.
    pub json: Option<(String, usize)>,
    /// A GGUF array shown page by page (`None` for other values).
    pub array: Option<MetaArray>,
}

/// Characters of a pretty-printed JSON value shown at most.
const MAX_JSON_CHARS: usize = 100_000;

impl MetaEntry {
    /// Prepares an entry for the pane.
    pub fn new(key: String, value: String) -> Self {
        let json = serde_json::from_str::<serde_json::Value>(&value)
            .ok()
            .filter(|j| j.is_object() || j.is_array())
            .and_then(|j| serde_json::to_string_pretty(&j).ok())
            .map(|pretty| {
                let lines = pretty.lines().count();
                (crate::text::safe_multiline(&pretty, MAX_JSON_CHARS), lines)
            });
        let search = format!("{}\n{}", key.to_lowercase(), value.to_lowercase());
        Self {
            key,
            value,
            search,
            json,
            array: None,
        }
    }
}
