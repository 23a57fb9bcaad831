//! Which checkpoints a series is made of, and the step of each.
//!
//! A PATH is a checkpoint (a file, a folder holding `model.safetensors`,
//! an index or `pytorch_model.bin`, or only a fine-tune's
//! `adapter_model.safetensors`/`.bin`, or a remote location), or a folder of
//! checkpoints: each such sub-folder and each checkpoint file in it is one
//! step, other files ignored. The step is `trainer_state.json`'s
//! `global_step` beside the weights (also over HTTP), else `step=N` in the
//! name (Lightning), else the last number in the file's name, else in its
//! folder's name. The series is in step order; two checkpoints of one step
//! are an error naming both.

use std::path::{Path, PathBuf};

use regex::Regex;

use super::SeriesError;
use crate::format::Checkpoint;
use crate::source::remote;

/// One checkpoint of a series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSource {
    /// Its training step.
    pub step: u64,
    /// Where it is: a path or a remote location, as it opens.
    pub path: PathBuf,
}

/// Names a folder holds when it is one checkpoint.
const CHECKPOINT_FILES: [&str; 2] = ["model.safetensors", "pytorch_model.bin"];

/// File extensions of checkpoints in a folder of them.
const CHECKPOINT_EXTENSIONS: [&str; 8] = [
    "safetensors",
    "bin",
    "pt",
    "pth",
    "ckpt",
    "gguf",
    "npz",
    "npy",
];

/// A fine-tune's adapter weights (PEFT's LoRA, as the Trainer saves them
/// beside its optimizer state): a folder holding one of them and no model
/// is the checkpoint of that file.
const ADAPTER_FILES: [&str; 2] = ["adapter_model.safetensors", "adapter_model.bin"];

/// True when `dir` is one checkpoint: it holds `model.safetensors`,
/// `pytorch_model.bin`, a shard index, or adapter weights.
pub fn holds_checkpoint(dir: &Path) -> bool {
    holds_model(dir) || adapter_of(dir).is_some()
}

/// What a folder checkpoint opens as: the folder, or its adapter file.
fn weights_of(dir: &Path) -> PathBuf {
    if holds_model(dir) {
        return dir.to_owned();
    }
    adapter_of(dir).unwrap_or_else(|| dir.to_owned())
}

/// A folder's adapter weights file, if any.
fn adapter_of(dir: &Path) -> Option<PathBuf> {
    ADAPTER_FILES
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
}

/// True when `dir` holds a model's weights: `model.safetensors`,
/// `pytorch_model.bin`, a shard index, or a container's folder (a DCP
/// step's `.metadata`, a DeepSpeed step) that is not the run of such
/// folders (DeepSpeed's `latest` beside its `global_stepN` folders).
fn holds_model(dir: &Path) -> bool {
    CHECKPOINT_FILES.iter().any(|f| dir.join(f).is_file())
        || (crate::format::is_container_folder(dir) && !holds_container_folders(dir))
        || std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name().to_string_lossy().to_ascii_lowercase();
                name.ends_with(".safetensors.index.json") || name.ends_with(".bin.index.json")
            })
        })
}

/// True when some sub-folder of `dir` is a container's folder.
fn holds_container_folders(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .map(|e| e.path())
            .any(|p| p.is_dir() && crate::format::is_container_folder(&p))
    })
}

/// Notes on how `paths` were read that may not be what was meant: a
/// folder that is one checkpoint (the Trainer's output folder, holding the
/// final model) but also holds checkpoint folders, the run itself.
pub fn notes(paths: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for dir in paths {
        if remote::is_remote(&dir.to_string_lossy()) || !dir.is_dir() || !holds_checkpoint(dir) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut inner: Vec<String> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && holds_checkpoint(p))
            .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect();
        if inner.is_empty() {
            continue;
        }
        inner.sort();
        let mut shown: Vec<String> = inner
            .iter()
            .take(3)
            .map(|n| crate::text::safe_text(n, 60))
            .collect();
        if inner.len() > 3 {
            shown.push("…".to_owned());
        }
        let shown = shown.join(", ");
        out.push(format!(
            "{} is one checkpoint (it holds a model's weights), but it also holds {} checkpoint folder{} ({shown}): name those to see the run",
            crate::text::safe_text(&dir.display().to_string(), 200),
            inner.len(),
            if inner.len() == 1 { "" } else { "s" },
        ));
    }
    out
}

/// A checkpoint found, before its step is known.
#[derive(Debug, Clone)]
struct Candidate {
    path: PathBuf,
    /// A folder that is one checkpoint.
    folder: bool,
    /// Named on the command line (its `trainer_state.json` beside it is
    /// its own; a file found in a folder of files shares the folder's).
    given: bool,
}

/// The checkpoints `paths` name, in step order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<StepSource>, SeriesError> {
    let mut found = Vec::new();
    for path in paths {
        let text = path.to_string_lossy();
        let remote = remote::is_remote(&text);
        if !remote && let Err(e) = std::fs::metadata(path) {
            return Err(SeriesError::Io {
                path: path.clone(),
                message: e.to_string(),
            });
        }
        if remote || !path.is_dir() {
            found.push(Candidate {
                path: path.clone(),
                folder: false,
                given: true,
            });
        } else if holds_checkpoint(path) {
            found.push(Candidate {
                path: path.clone(),
                folder: true,
                given: true,
            });
        } else {
            let before = found.len();
            found.extend(folder_of_checkpoints(path)?);
            if found.len() == before {
                return Err(SeriesError::NoCheckpoints { path: path.clone() });
            }
        }
    }
    let mut steps = Vec::with_capacity(found.len());
    for c in &found {
        steps.push(StepSource {
            step: step_of(c)?,
            path: if c.folder {
                weights_of(&c.path)
            } else {
                c.path.clone()
            },
        });
    }
    steps.sort_by_key(|s| s.step);
    for w in steps.windows(2) {
        if w[0].step == w[1].step {
            return Err(SeriesError::SameStep {
                step: w[0].step,
                a: w[0].path.clone(),
                b: w[1].path.clone(),
            });
        }
    }
    Ok(steps)
}

/// The checkpoints in a folder that is not one: its sub-folders that are
/// one, and its files of a checkpoint's extension, by name.
fn folder_of_checkpoints(dir: &Path) -> Result<Vec<Candidate>, SeriesError> {
    let entries = std::fs::read_dir(dir).map_err(|e| SeriesError::Io {
        path: dir.to_owned(),
        message: e.to_string(),
    })?;
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            if holds_checkpoint(&p) {
                out.push(Candidate {
                    path: p,
                    folder: true,
                    given: false,
                });
            }
        } else if p.is_file()
            && p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| CHECKPOINT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        {
            out.push(Candidate {
                path: p,
                folder: false,
                given: false,
            });
        }
    }
    Ok(out)
}

/// The step of a checkpoint (see the module's rules).
fn step_of(c: &Candidate) -> Result<u64, SeriesError> {
    let text = c.path.to_string_lossy().into_owned();
    let remote = remote::is_remote(&text);
    // `trainer_state.json` beside the weights.
    let state = if remote {
        // The weights' own URL (a Hub location resolves to its file).
        let ck = Checkpoint::open(&c.path).map_err(|e| SeriesError::Open {
            path: c.path.clone(),
            message: format!("{e:#}"),
        })?;
        remote::sibling_url(&ck.path().to_string_lossy(), "trainer_state.json").map(PathBuf::from)
    } else if c.folder {
        Some(c.path.join("trainer_state.json"))
    } else if c.given {
        c.path.parent().map(|p| p.join("trainer_state.json"))
    } else {
        None
    };
    if let Some(state) = state {
        match crate::quant::config::read_json(&state) {
            Ok(Some(v)) => match v.get("global_step") {
                None | Some(serde_json::Value::Null) => {}
                Some(g) => {
                    return whole_number(g).ok_or_else(|| SeriesError::Io {
                        path: state,
                        message: format!(
                            "trainer_state.json's global_step is not a whole number ≥ 0 ({})",
                            crate::text::safe_text(&g.to_string(), 40)
                        ),
                    });
                }
            },
            Ok(None) => {}
            Err(message) => {
                return Err(SeriesError::Io {
                    path: state,
                    message: format!("trainer_state.json {message}"),
                });
            }
        }
    }
    let (file, folder) = names(c, remote);
    let lightning = Regex::new(r"step=(\d+)").ok();
    let number = Regex::new(r"\d+").ok();
    let by_lightning = |s: &str| {
        lightning
            .as_ref()?
            .captures(s)?
            .get(1)?
            .as_str()
            .parse::<u64>()
            .ok()
    };
    let last_number = |s: &str| number.as_ref()?.find_iter(s).last()?.as_str().parse().ok();
    file.as_deref()
        .and_then(by_lightning)
        .or_else(|| folder.as_deref().and_then(by_lightning))
        .or_else(|| file.as_deref().and_then(last_number))
        .or_else(|| folder.as_deref().and_then(last_number))
        .ok_or_else(|| SeriesError::NoStep {
            path: c.path.clone(),
        })
}

/// A JSON number that is a whole number ≥ 0 (`500`, or `500.0` as a
/// float writer may give it, exact below 2^53).
fn whole_number(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        (f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0).then_some(f as u64)
    })
}

/// The file's name and its folder's name of a checkpoint (a folder
/// checkpoint: no file; a Hub location without a file: its repository and
/// revision as the folder).
fn names(c: &Candidate, remote: bool) -> (Option<String>, Option<String>) {
    let text = c.path.to_string_lossy().into_owned();
    if remote {
        let endpoint = remote::client().settings().hf_endpoint.clone();
        if let Ok(Some(hub)) = remote::hub::parse(&text, &endpoint) {
            let repo = hub.repo.rsplit('/').next().unwrap_or("").to_owned();
            let at_rev = format!("{repo}@{}", hub.revision);
            return match hub.path {
                Some(p) => {
                    let mut segs: Vec<&str> = p.split('/').collect();
                    let file = segs.pop().map(str::to_owned);
                    (file, Some(segs.pop().map_or(at_rev, str::to_owned)))
                }
                None => (None, Some(at_rev)),
            };
        }
        let bare = text.split(['?', '#']).next().unwrap_or("");
        let mut segs: Vec<&str> = bare.rsplit('/').take(2).collect();
        segs.reverse();
        return match segs.as_slice() {
            [folder, file] => (Some((*file).to_owned()), Some((*folder).to_owned())),
            [file] => (Some((*file).to_owned()), None),
            _ => (None, None),
        };
    }
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    if c.folder {
        (None, name(&c.path))
    } else {
        (name(&c.path), c.path.parent().and_then(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(path: &str, folder: bool) -> Option<u64> {
        step_of(&Candidate {
            path: PathBuf::from(path),
            folder,
            given: false,
        })
        .ok()
    }

    #[test]
    fn steps_from_names() {
        assert_eq!(step("/r/epoch=3-step=1200.ckpt", false), Some(1200));
        assert_eq!(step("/r/checkpoint-500", true), Some(500));
        assert_eq!(
            step("/r/checkpoint-500/model.safetensors", false),
            Some(500)
        );
        assert_eq!(step("/r/run_7/weights_0300.pt", false), Some(300));
        assert_eq!(step("/r/x/weights.pt", false), None);
    }

    #[test]
    fn trainer_state_steps_are_whole_numbers_or_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ck = dir.path().join("checkpoint-7");
        std::fs::create_dir(&ck).expect("mkdir");
        let with = |state: &str| {
            std::fs::write(ck.join("trainer_state.json"), state).expect("write");
            step_of(&Candidate {
                path: ck.clone(),
                folder: true,
                given: true,
            })
        };
        assert_eq!(with(r#"{"global_step": 1200}"#).ok(), Some(1200));
        assert_eq!(with(r#"{"global_step": 1200.0}"#).ok(), Some(1200));
        // No global_step: the folder's number.
        assert_eq!(with(r#"{"epoch": 1.0}"#).ok(), Some(7));
        assert_eq!(with(r#"{"global_step": null}"#).ok(), Some(7));
        for bad in ["-5", "1.5", "\"x\"", "1e30", "[1]"] {
            let e = with(&format!(r#"{{"global_step": {bad}}}"#)).expect_err(bad);
            assert_eq!(e.kind(), "Io", "{bad}");
            assert!(e.to_string().contains("global_step"), "{e}");
        }
        let e = with("[[[[").expect_err("not JSON");
        assert!(e.to_string().contains("trainer_state.json"), "{e}");
    }

    #[test]
    fn a_missing_path_is_an_error_that_says_so() {
        let e = discover(&[PathBuf::from("/no/such/run")]).expect_err("missing");
        assert_eq!(e.kind(), "Io");
        assert!(e.to_string().contains("/no/such/run"), "{e}");
    }
}
