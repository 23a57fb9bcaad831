//! DeepSpeed ZeRO checkpoints (DISTRIBUTED.md §1, §6, §9): a step folder
//! (`global_stepN/`) of `torch.save` zips, the model-states file(s) and
//! one optimizer file per data-parallel rank, each holding that rank's
//! slice of the flat fp32 master weights; or the folder above it, whose
//! `latest` names the step folder. Every pickle is read by the pickle
//! machine (never run) against PICKLE.md's allowlist plus DeepSpeed's
//! records ([`ALLOWED`]); the global tensors are rebuilt as deepspeed's
//! `zero_to_fp32` rebuilds them ([`assemble`]), each a range of one file
//! read in place or ranges of several copied in order.

pub mod assemble;
mod states;
mod torch;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use self::assemble::Layout;
use self::states::{ModelStates, OptimError, OptimStates};
use self::torch::{ReadError, TorchFile};
use crate::format::containers::{Container, ContainerKind, Opening, Probe, names_of};
use crate::format::decode::Opened;
use crate::format::opened::{Siblings, into_file, refusal, remote_unsupported};
use crate::format::pytorch::PickleReport;
use crate::format::{LoadError, StoredFile};
use crate::source::Source;

/// The globals DeepSpeed's files may name beyond PICKLE.md's allowlist:
/// records and enum values, read as their fields and values only.
pub(crate) const ALLOWED: &[&str] = &[
    "deepspeed.runtime.zero.config.ZeroStageEnum",
    "deepspeed.checkpoint.constants.ZeroStageEnum",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.utils.tensor_fragment.fragment_address",
];

/// The file beside a step folder that names it.
pub const LATEST: &str = "latest";

/// A `latest` longer than this is no step folder's name.
const MAX_LATEST: usize = 4096;

/// How a model-states file's name ends.
const MODEL_STATES: &str = "_model_states.pt";

/// How an optimizer file's name ends.
const OPTIM_STATES: &str = "_optim_states.pt";

/// DeepSpeed in the table of containers: a `latest` file, or a
/// `*_model_states.pt` file (which opens its step folder, or alone as
/// PyTorch when no optimizer file is beside it); a step folder or the
/// folder holding `latest`.
pub(crate) const CONTAINER: Container = Container {
    id: "deepspeed",
    label: "DeepSpeed ZeRO checkpoint",
    has_data_section: false,
    separator: '.',
    claims: |p: &Probe<'_>| {
        !p.remote
            && ((p.name == LATEST && p.bytes.len() <= MAX_LATEST) || p.name.ends_with(MODEL_STATES))
    },
    open,
    refuse: None,
    expand: None,
    folder: Some(folder),
};

/// A step folder opens as its first model-states file; the folder above
/// it as its `latest`.
fn folder(dir: &Path) -> Option<PathBuf> {
    if let Some(files) = Files::list(dir)
        && let Some(first) = files.models.first()
        && !files.optims.is_empty()
    {
        return Some(dir.join(first));
    }
    let latest = dir.join(LATEST);
    latest.is_file().then_some(latest)
}

/// The globals of `globals` outside PICKLE.md's allowlist and DeepSpeed's.
fn unsafe_globals(globals: &BTreeSet<String>) -> Vec<String> {
    crate::format::pytorch::unsafe_globals_beyond(globals, ALLOWED)
}

/// A step folder's files, each kind in natural order (as `zero_to_fp32`
/// sorts them: runs of digits by their value).
struct Files {
    models: Vec<String>,
    optims: Vec<String>,
}

impl Files {
    /// The files of `dir`; `None` when it cannot be listed.
    fn list(dir: &Path) -> Option<Self> {
        let mut models = Vec::new();
        let mut optims = Vec::new();
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.ends_with(MODEL_STATES) {
                models.push(name);
            } else if name.ends_with(OPTIM_STATES) {
                optims.push(name);
            }
        }
        models.sort_by(|a, b| natural_cmp(a, b));
        optims.sort_by(|a, b| natural_cmp(a, b));
        Some(Files { models, optims })
    }
}

/// Names compared as `zero_to_fp32`'s `natural_keys` sorts them: runs of
/// digits by their value, other runs as text.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn runs(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ra, rb) = (runs(a), runs(b));
    for (&(da, x), &(db, y)) in ra.iter().zip(&rb) {
        let ord = match (da, db) {
            (true, true) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            (false, false) => x.cmp(y),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    ra.len().cmp(&rb.len()).then_with(|| a.cmp(b))
}

/// The rank an optimizer file's name gives (`..._rank_R_...`), if any.
fn rank_of(name: &str) -> Option<u64> {
    let (_, after) = name.split_once("_rank_")?;
    let digits: &str = &after[..after.find(|c: char| !c.is_ascii_digit())?];
    digits.parse().ok()
}

fn open(o: Opening) -> Result<StoredFile, LoadError> {
    if o.source.remote().is_some() {
        return Err(remote_unsupported(&o.path, CONTAINER.label));
    }
    let (name, _) = names_of(&o.path);
    if name == LATEST {
        let step = step_of_latest(&o.path, o.source.bytes())?;
        let files = Files::list(&step).ok_or_else(|| {
            refusal(
                &step,
                "InvalidCheckpoint",
                "the step folder cannot be listed".into(),
                None,
            )
        })?;
        let Some(first) = files.models.first() else {
            return Err(refusal(
                &step,
                "InvalidCheckpoint",
                format!("the step folder holds no *{MODEL_STATES} file"),
                None,
            ));
        };
        if files.optims.is_empty() {
            return Err(no_optimizer_files(&step));
        }
        let first = step.join(first);
        return open_step(first, None, &files);
    }
    let dir = o.path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let files = Files::list(dir);
    let Some(files) = files.filter(|f| !f.models.is_empty() && !f.optims.is_empty()) else {
        // No optimizer file beside it: not a ZeRO step folder (ZeRO-0 and
        // pipeline checkpoints keep everything in the model file), so the
        // file alone, as PyTorch.
        return (crate::format::pytorch::CONTAINER.open)(o);
    };
    let first = dir.join(&files.models[0]);
    let own = o
        .path
        .file_name()
        .is_some_and(|n| n == files.models[0].as_str());
    open_step(first, own.then_some(o.source), &files)
}

/// The error for a step folder with no optimizer file.
fn no_optimizer_files(step: &Path) -> LoadError {
    refusal(
        step,
        "InvalidCheckpoint",
        format!(
            "the step folder holds no *{OPTIM_STATES} file: not a ZeRO checkpoint (stages 1, 2 and 3 are read)"
        ),
        None,
    )
}

/// The step folder `latest` (its content `bytes`) names: a plain name of
/// a folder beside it, resolving inside the folder `latest` is in.
fn step_of_latest(latest: &Path, bytes: &[u8]) -> Result<PathBuf, LoadError> {
    let bad = |m: String| refusal(latest, "InvalidLatest", m, None);
    if bytes.len() > MAX_LATEST {
        return Err(bad(format!(
            "{LATEST} is {} bytes; a step folder's name is at most {MAX_LATEST}",
            bytes.len()
        )));
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| bad(format!("{LATEST} is not text (UTF-8)")))?;
    let name = text.trim();
    if !crate::format::dcp::is_plain_name(name) {
        return Err(bad(format!(
            "{LATEST} names {name:?}, which is not a plain folder name: only a step folder beside it is opened"
        )));
    }
    let parent = latest.parent().unwrap_or(Path::new("."));
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let step = parent.join(name);
    if !step.is_dir() {
        return Err(bad(format!(
            "{LATEST} names {name:?}, which is not a folder beside it"
        )));
    }
    let inside = match (std::fs::canonicalize(parent), std::fs::canonicalize(&step)) {
        (Ok(root), Ok(real)) => real.starts_with(root),
        _ => false,
    };
    if !inside {
        return Err(bad(format!(
            "{LATEST} names {name:?}, which resolves outside the folder"
        )));
    }
    Ok(step)
}

/// One file of the step folder, read: its name and what it holds.
struct Read {
    name: String,
    file: Result<TorchFile, ReadError>,
}

/// Opens the step folder whose first model-states file is `first`
/// (`source` its bytes when already open): every model-states and
/// optimizer file, their pickles checked, then the reassembly.
fn open_step(
    first: PathBuf,
    source: Option<Source>,
    files: &Files,
) -> Result<StoredFile, LoadError> {
    let step = first.parent().unwrap_or(Path::new(".")).to_path_buf();
    let first_name = files.models[0].clone();
    let source = match source {
        Some(s) => s,
        None => Siblings::new(&first, false)
            .take(std::slice::from_ref(&first_name))?
            .pop()
            .map(|(_, s)| s)
            .ok_or_else(|| refusal(&first, "InvalidCheckpoint", "not opened".into(), None))?,
    };
    // File 0 is the first model-states file; then the other model-states
    // files, then the optimizer files, rank by rank.
    let others: Vec<String> = files.models[1..]
        .iter()
        .chain(&files.optims)
        .cloned()
        .collect();
    let opened_others = Siblings::new(&first, false).take(&others)?;
    let mut reads = Vec::with_capacity(1 + others.len());
    reads.push(Read {
        name: first_name,
        file: torch::read(source.bytes(), unsafe_globals),
    });
    for (name, s) in &opened_others {
        reads.push(Read {
            name: name.clone(),
            file: torch::read(s.bytes(), unsafe_globals),
        });
    }
    let mut globals = BTreeSet::new();
    let mut unsafe_found = Vec::new();
    for r in &reads {
        match &r.file {
            Ok(f) => globals.extend(f.globals.iter().cloned()),
            Err(ReadError::Unsafe(all, u)) => {
                globals.extend(all.iter().cloned());
                unsafe_found.extend(u.iter().cloned());
            }
            Err(ReadError::Invalid(..)) => {}
        }
    }
    if !unsafe_found.is_empty() {
        unsafe_found.sort();
        unsafe_found.dedup();
        let opened = Opened {
            pickle: Some(PickleReport {
                globals: globals.into_iter().collect(),
                unsafe_globals: unsafe_found,
                leaves: Vec::new(),
            }),
            header_len: source.len(),
            ..Opened::default()
        };
        return into_file(
            first,
            source,
            ContainerKind::of(&CONTAINER),
            opened,
            Vec::new(),
        );
    }
    let mut parsed = Vec::with_capacity(reads.len());
    for r in reads {
        match r.file {
            Ok(f) => parsed.push((r.name, f)),
            Err(ReadError::Invalid(kind, m)) => {
                return Err(refusal(&step.join(&r.name), kind, m, None));
            }
            Err(ReadError::Unsafe(..)) => {}
        }
    }
    let n_models = files.models.len();
    let (model_files, optim_files) = parsed.split_at(n_models.min(parsed.len()));
    let bad = |name: &str, m: String| refusal(&step.join(name), "InvalidCheckpoint", m, None);
    let (first_name, first_file) = &model_files[0];
    let first_states = states::model_states(first_file).map_err(|m| bad(first_name, m))?;
    let mut ranks: Vec<(usize, OptimStates)> = Vec::with_capacity(optim_files.len());
    for (i, (name, f)) in optim_files.iter().enumerate() {
        let o = states::optim_states(f).map_err(|e| match e {
            OptimError::UnknownStage(m) => refusal(&step.join(name), "UnknownZeroStage", m, None),
            OptimError::Invalid(m) => bad(name, m),
        })?;
        ranks.push((n_models + i, o));
    }
    let (stage, world) = check_ranks(&step, &files.optims, &ranks)?;
    let mut models: Vec<(usize, ModelStates)> = vec![(0, first_states)];
    if stage == 3 {
        if n_models as u64 != world {
            return Err(refusal(
                &step,
                "InvalidCheckpoint",
                format!(
                    "stage 3 keeps one model-states file per rank: partition_count says {world} ranks, the folder holds {n_models} *{MODEL_STATES} files"
                ),
                None,
            ));
        }
        for (i, (name, f)) in model_files.iter().enumerate().skip(1) {
            models.push((i, states::model_states(f).map_err(|m| bad(name, m))?));
        }
    }
    let layout = Layout {
        stage,
        world,
        models: &models,
        ranks: &ranks,
    };
    let tensors =
        assemble::tensors(&layout).map_err(|m| refusal(&step, "InvalidCheckpoint", m, None))?;
    let mut opened = Opened {
        tensors,
        metadata: std::mem::take(&mut models[0].1.metadata),
        pickle: Some(PickleReport {
            globals: globals.into_iter().collect(),
            unsafe_globals: Vec::new(),
            leaves: Vec::new(),
        }),
        header_len: source.len(),
        ..Opened::default()
    };
    opened.facts.insert(
        "zero".into(),
        serde_json::json!({ "stage": stage, "world_size": world }),
    );
    let all: Vec<&String> = files.models.iter().chain(&files.optims).collect();
    opened.facts.insert("files".into(), serde_json::json!(all));
    opened.facts.insert(
        "step".into(),
        serde_json::Value::from(
            step.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
    );
    into_file(
        first,
        source,
        ContainerKind::of(&CONTAINER),
        opened,
        opened_others,
    )
}

/// The zero stage and world size W the optimizer files agree on: exactly
/// W files (`partition_count`), ranks 0 to W - 1 where their names say.
fn check_ranks(
    step: &Path,
    names: &[String],
    ranks: &[(usize, OptimStates)],
) -> Result<(i64, u64), LoadError> {
    let bad = |m: String| refusal(step, "InvalidCheckpoint", m, None);
    let Some((_, first)) = ranks.first() else {
        return Err(no_optimizer_files(step));
    };
    let (stage, world) = (first.stage, first.partition_count);
    for (name, (_, o)) in names.iter().zip(ranks) {
        if o.partition_count != world {
            return Err(bad(format!(
                "the optimizer files disagree on the partition count: {:?} says {world}, {name:?} says {}",
                names[0], o.partition_count
            )));
        }
        if o.stage != stage {
            return Err(bad(format!(
                "the optimizer files disagree on the zero stage: {:?} says {stage}, {name:?} says {}",
                names[0], o.stage
            )));
        }
    }
    let found: Vec<Option<u64>> = names.iter().map(|n| rank_of(n)).collect();
    if ranks.len() as u64 != world {
        let missing: Vec<String> = (0..world)
            .filter(|r| !found.contains(&Some(*r)))
            .take(8)
            .map(|r| r.to_string())
            .collect();
        let which = if missing.is_empty() {
            String::new()
        } else {
            format!("; missing: rank {}", missing.join(", "))
        };
        return Err(bad(format!(
            "partition_count says {world} ranks, but the folder holds {} *{OPTIM_STATES} files{which}",
            ranks.len()
        )));
    }
    if found.iter().all(Option::is_some) {
        for (r, (name, f)) in names.iter().zip(&found).enumerate() {
            if *f != Some(r as u64) {
                return Err(bad(format!(
                    "optimizer file {} of {world} by name, {name:?}, is named for rank {}: ranks 0 to {} are expected",
                    r + 1,
                    f.unwrap_or_default(),
                    world - 1
                )));
            }
        }
    }
    Ok((stage, world))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_naturally() {
        let mut v = vec![
            "zero_pp_rank_10_mp_rank_00_optim_states.pt",
            "zero_pp_rank_2_mp_rank_00_optim_states.pt",
            "zero_pp_rank_1_mp_rank_00_optim_states.pt",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                "zero_pp_rank_2_mp_rank_00_optim_states.pt",
                "zero_pp_rank_10_mp_rank_00_optim_states.pt",
            ]
        );
        assert_eq!(
            rank_of("bf16_zero_pp_rank_12_mp_rank_00_optim_states.pt"),
            Some(12)
        );
        assert_eq!(rank_of("optim_states.pt"), None);
    }
}
