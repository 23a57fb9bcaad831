//! What DeepSpeed's files say (DISTRIBUTED.md §6), read off their pickles'
//! graphs: a model-states file's buffers, parameter shapes, shared and
//! frozen parameters; an optimizer file's zero stage, partition count and
//! flat fp32 master buffers. Nothing is built or called: a
//! `ZeroStageEnum(N)` is its N, a `torch.Size` its numbers.

use super::torch::{Stored, TorchFile, count, dict_items, is_none, lookup, size};
use crate::format::pytorch::value::{Id, Node};

/// A model-states file (`*_model_states.pt`).
#[derive(Debug, Default)]
pub(super) struct ModelStates {
    /// `module`'s entries named in `buffer_names`, in `module`'s order.
    pub buffers: Vec<(String, Stored)>,
    /// `param_shapes`: per group, name → shape.
    pub param_shapes: Vec<Vec<(String, Vec<u64>)>>,
    /// `shared_params`: alias → target.
    pub shared: Vec<(String, String)>,
    /// `frozen_param_shapes` (empty when absent or `None`).
    pub frozen_shapes: Vec<(String, Vec<u64>)>,
    /// `frozen_param_fragments`: name → this file's fragment.
    pub frozen_fragments: Vec<(String, Stored)>,
    /// Values worth showing as metadata (`ds_version`, `global_steps`,
    /// `ds_config`).
    pub metadata: Vec<(String, serde_json::Value)>,
}

/// Reads a model-states file; the error says what is not as DeepSpeed
/// writes it.
pub(super) fn model_states(file: &TorchFile) -> Result<ModelStates, String> {
    let g = &file.graph;
    let root = g.root;
    if dict_items(g, root).is_none() {
        return Err("its object is not a dict".into());
    }
    let field = |key: &str| lookup(g, root, key);
    let mut out = ModelStates::default();
    let names =
        field("buffer_names").ok_or("it has no buffer_names: not a DeepSpeed model-states file")?;
    let buffer_names: Vec<&str> = match g.items_of(names) {
        Some(items) => items
            .iter()
            .map(|&i| g.str_of(i).ok_or("a buffer name is not a string"))
            .collect::<Result<_, _>>()?,
        None if is_none(g, names) => Vec::new(),
        None => return Err("buffer_names is not a list".into()),
    };
    let module = field("module").ok_or("it has no module")?;
    let module_items = dict_items(g, module).ok_or("its module is not a dict")?;
    for &(k, v) in module_items {
        let name = g.str_of(k).ok_or("a name in module is not a string")?;
        if buffer_names.contains(&name) {
            out.buffers.push((name.to_owned(), file.tensor(v, name)?));
        }
    }
    let shapes = field("param_shapes").ok_or("it has no param_shapes")?;
    let groups = g
        .items_of(shapes)
        .ok_or("param_shapes is not a list of groups")?;
    for &group in groups {
        out.param_shapes
            .push(named_shapes(file, group).map_err(|e| format!("param_shapes: {e}"))?);
    }
    if let Some(shared) = field("shared_params").filter(|&s| !is_none(g, s)) {
        let items = dict_items(g, shared).ok_or("shared_params is not a dict")?;
        for &(k, v) in items {
            let (Some(alias), Some(target)) = (g.str_of(k), g.str_of(v)) else {
                return Err("shared_params maps a name that is not a string".into());
            };
            out.shared.push((alias.to_owned(), target.to_owned()));
        }
    }
    if let Some(frozen) = field("frozen_param_shapes").filter(|&s| !is_none(g, s)) {
        out.frozen_shapes =
            named_shapes(file, frozen).map_err(|e| format!("frozen_param_shapes: {e}"))?;
    }
    if let Some(fragments) = field("frozen_param_fragments").filter(|&s| !is_none(g, s)) {
        let items = dict_items(g, fragments).ok_or("frozen_param_fragments is not a dict")?;
        for &(k, v) in items {
            let name = g
                .str_of(k)
                .ok_or("a name in frozen_param_fragments is not a string")?;
            // Only the fragments of frozen parameters are read.
            if out.frozen_shapes.iter().any(|(n, _)| n == name) {
                out.frozen_fragments
                    .push((name.to_owned(), file.tensor(v, name)?));
            }
        }
    }
    for key in ["ds_version", "global_steps", "global_samples", "ds_config"] {
        if let Some(v) = field(key) {
            out.metadata.push((
                key.to_owned(),
                crate::format::dcp::metadata::to_json(g, v, 0),
            ));
        }
    }
    Ok(out)
}

/// A dict of name → `torch.Size`.
fn named_shapes(file: &TorchFile, id: Id) -> Result<Vec<(String, Vec<u64>)>, String> {
    let g = &file.graph;
    let items = dict_items(g, id).ok_or("not a dict of shapes")?;
    items
        .iter()
        .map(|&(k, v)| {
            let name = g.str_of(k).ok_or("a name is not a string")?;
            let shape = size(g, v).ok_or_else(|| format!("the shape of {name:?} is no size"))?;
            Ok((name.to_owned(), shape))
        })
        .collect()
}

/// An optimizer file (`*_optim_states.pt`).
#[derive(Debug)]
pub(super) struct OptimStates {
    /// `zero_stage`: the N of `ZeroStageEnum(N)`.
    pub stage: i64,
    /// `partition_count` (the largest, when a list).
    pub partition_count: u64,
    /// The rank's flat fp32 groups (`single_partition_of_fp32_groups` in
    /// stages 1 and 2, `fp32_flat_groups` in stage 3).
    pub flat: Vec<Stored>,
    /// `param_alignment_paddings`, per group, when present.
    pub alignment_paddings: Option<Vec<Vec<u64>>>,
}

/// Why an optimizer file is not read.
pub(super) enum OptimError {
    /// Its zero stage is not 1, 2 or 3.
    UnknownStage(String),
    /// Anything else.
    Invalid(String),
}

impl From<String> for OptimError {
    fn from(m: String) -> Self {
        OptimError::Invalid(m)
    }
}

impl From<&str> for OptimError {
    fn from(m: &str) -> Self {
        OptimError::Invalid(m.to_owned())
    }
}

/// Reads an optimizer file.
pub(super) fn optim_states(file: &TorchFile) -> Result<OptimStates, OptimError> {
    let g = &file.graph;
    let osd = lookup(g, g.root, "optimizer_state_dict")
        .ok_or("it has no optimizer_state_dict: not a DeepSpeed optimizer file")?;
    let field = |key: &str| lookup(g, osd, key);
    let stage_id = field("zero_stage")
        .ok_or("its optimizer_state_dict has no zero_stage: not a ZeRO checkpoint")?;
    let stage = zero_stage(file, stage_id).ok_or("its zero_stage is not a ZeroStageEnum")?;
    let key = match stage {
        1 | 2 => "single_partition_of_fp32_groups",
        3 => "fp32_flat_groups",
        other => {
            return Err(OptimError::UnknownStage(format!(
                "its zero stage is {other}: stages 1, 2 and 3 are read"
            )));
        }
    };
    let pc = field("partition_count").ok_or("it has no partition_count")?;
    let partition_count = match g.get(pc) {
        Some(Node::List(v) | Node::Tuple(v)) => v
            .iter()
            .map(|&i| count(g, i))
            .collect::<Option<Vec<u64>>>()
            .and_then(|v| v.into_iter().max()),
        _ => count(g, pc),
    }
    .filter(|&n| n > 0)
    .ok_or("its partition_count is not a positive count (or a list of them)")?;
    let groups_id = field(key).ok_or_else(|| format!("it has no {key}"))?;
    let groups = g
        .items_of(groups_id)
        .ok_or_else(|| format!("its {key} is not a list"))?;
    let mut flat = Vec::with_capacity(groups.len());
    for (i, &t) in groups.iter().enumerate() {
        let name = format!("{key}.{i}");
        let stored = file.tensor(t, &name)?;
        if stored.dtype != crate::dtype::Dtype::F32 || stored.shape.len() != 1 {
            return Err(OptimError::Invalid(format!(
                "{name} is {} {:?}, not a flat F32 vector",
                stored.dtype.name(),
                stored.shape
            )));
        }
        flat.push(stored);
    }
    let alignment_paddings = match field("param_alignment_paddings") {
        Some(p) if !is_none(g, p) => {
            let groups = g
                .items_of(p)
                .ok_or("its param_alignment_paddings is not a list")?;
            let mut out = Vec::with_capacity(groups.len());
            for &group in groups {
                let items = g
                    .items_of(group)
                    .ok_or("its param_alignment_paddings holds a group that is not a list")?;
                out.push(
                    items
                        .iter()
                        .map(|&i| count(g, i))
                        .collect::<Option<Vec<u64>>>()
                        .ok_or("its param_alignment_paddings holds a non-count")?,
                );
            }
            Some(out)
        }
        _ => None,
    };
    Ok(OptimStates {
        stage,
        partition_count,
        flat,
        alignment_paddings,
    })
}

/// `ZeroStageEnum(N)` (a `REDUCE` of the enum with its value), or a plain
/// integer as older versions wrote it.
fn zero_stage(file: &TorchFile, id: Id) -> Option<i64> {
    let g = &file.graph;
    match g.get(id)? {
        Node::Int(n) => Some(*n),
        Node::Call { func, args, .. } => {
            let (module, name) = g.global_of(*func)?;
            if !module.starts_with("deepspeed.") || name != "ZeroStageEnum" {
                return None;
            }
            match g.items_of(*args)? {
                [n] => g.int_of(*n),
                _ => None,
            }
        }
        _ => None,
    }
}
