//! `tensorscope series`: runs made here, step by step, whose figures are
//! recomputed in f64 from the values written (every tensor, every step,
//! relative error ≤ 1e-9), with the events they were made to hold: a
//! schedule of known update ratios, a layer turning NaN at one step, a
//! frozen tensor, a spike, a tensor missing at one step, a shape change;
//! Trainer folders, Lightning files, a mixed safetensors/PyTorch folder,
//! and the refusals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::Dtype as RefDtype;
use serde_json::Value;

use crate::fixtures::{RefTensor, reference_file, write};
use crate::pytorch::build::{T, state_dict, torch_zip};

/// A tensor at one step: name, shape, values.
#[derive(Clone)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// A step: its tensors.
pub type Checkpoint = Vec<Tensor>;

fn t(name: &str, shape: &[usize], values: Vec<f32>) -> Tensor {
    Tensor {
        name: name.to_owned(),
        shape: shape.to_vec(),
        values,
    }
}

/// The safetensors file of a step.
pub fn safetensors_bytes(ck: &Checkpoint) -> Vec<u8> {
    let tensors: Vec<(String, RefTensor)> = ck
        .iter()
        .map(|x| {
            (
                x.name.clone(),
                RefTensor {
                    dtype: RefDtype::F32,
                    shape: x.shape.clone(),
                    data: x.values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                },
            )
        })
        .collect();
    reference_file(&tensors, None)
}

/// The `torch.save` zip of a step.
fn torch_bytes(ck: &Checkpoint) -> Vec<u8> {
    let keys: Vec<String> = (0..ck.len()).map(|i| i.to_string()).collect();
    let sizes: Vec<Vec<i128>> = ck
        .iter()
        .map(|x| x.shape.iter().map(|&d| d as i128).collect())
        .collect();
    let pairs: Vec<(&str, Vec<u8>)> = ck
        .iter()
        .enumerate()
        .map(|(i, x)| (x.name.as_str(), T::f32(&keys[i], &sizes[i]).pickle()))
        .collect();
    let storages: Vec<(&str, Vec<u8>)> = ck
        .iter()
        .enumerate()
        .map(|(i, x)| {
            (
                keys[i].as_str(),
                x.values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )
        })
        .collect();
    torch_zip(&state_dict(&pairs), &storages)
}

/// Deterministic values in about ±1.
fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// A run of six steps made to hold every event:
/// - `model.layers.0.mlp.up.weight`: W_k = (1 + k/10)·W_0, a known schedule;
/// - `model.layers.0.self_attn.q.weight`: W_k = W_0 + k·D, with a spike at
///   the last step (an update 40 times the others);
/// - `model.layers.1.mlp.down.weight` and `model.layers.1.mlp.gate.weight`:
///   NaN (and Inf) from step index 3 on;
/// - `model.embed_tokens.weight`: frozen, a NaN and a −0 in it;
/// - `model.extra`: missing at step index 2;
/// - `model.norm.weight`: `1 + k/100`, shape [4], then [5] from step index 2.
pub fn run() -> Vec<Checkpoint> {
    let w0 = noise(1, 32);
    let q0 = noise(2, 16);
    let d = noise(3, 16);
    let mut frozen = noise(4, 12);
    frozen[3] = f32::NAN;
    frozen[5] = -0.0;
    (0..6)
        .map(|k| {
            let kf = k as f32;
            let mut ck = vec![
                t(
                    "model.layers.0.mlp.up.weight",
                    &[4, 8],
                    w0.iter().map(|x| x * (1.0 + kf / 10.0)).collect(),
                ),
                t(
                    "model.layers.0.self_attn.q.weight",
                    &[16],
                    q0.iter()
                        .zip(&d)
                        .map(|(q, d)| q + (if k == 5 { 44.0 } else { kf }) * 0.01 * d)
                        .collect(),
                ),
                t("model.embed_tokens.weight", &[3, 4], frozen.clone()),
            ];
            for (name, seed) in [
                ("model.layers.1.mlp.down.weight", 5),
                ("model.layers.1.mlp.gate.weight", 6),
            ] {
                let mut v = noise(seed + k, 8);
                if k >= 3 {
                    v[1] = f32::NAN;
                    v[2] = f32::INFINITY;
                }
                ck.push(t(name, &[8], v));
            }
            if k != 2 {
                ck.push(t("model.extra", &[2], noise(7 + k, 2)));
            }
            let norm = if k < 2 { 4 } else { 5 };
            ck.push(t("model.norm.weight", &[norm], vec![1.0 + 0.01 * kf; norm]));
            ck
        })
        .collect()
}

/// `tensorscope series ARGS...`: exit code, stdout, stderr.
fn series_cmd(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let mut all: Vec<&std::ffi::OsStr> = vec!["series".as_ref()];
    all.extend_from_slice(args);
    crate::cli::run(&all)
}

/// The document's steps, in its order.
fn steps_of(doc: &Value) -> Vec<u64> {
    doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["step"].as_u64().expect("step"))
        .collect()
}

/// `series --json PATHS...`, which must succeed.
fn series_json(paths: &[&Path], extra: &[&str]) -> Value {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--json".as_ref()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    args.extend(paths.iter().map(|p| p.as_os_str()));
    let (code, out, err) = series_cmd(&args);
    assert_eq!(code, 0, "{out} {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("one JSON document ({e}): {out}"))
}

/// The figures of one tensor at one step, in f64 from its values.
#[derive(Debug, Clone, Copy)]
struct Want {
    l2: Option<f64>,
    std: Option<f64>,
    max_abs: Option<f64>,
    nonfinite: u64,
}

fn want(v: &[f32]) -> Want {
    let fin: Vec<f64> = v
        .iter()
        .filter(|x| x.is_finite())
        .map(|&x| f64::from(x))
        .collect();
    let n = fin.len() as f64;
    let some = !fin.is_empty();
    let mean = fin.iter().sum::<f64>() / n;
    Want {
        l2: some.then(|| fin.iter().map(|x| x * x).sum::<f64>().sqrt()),
        std: some.then(|| (fin.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt()),
        max_abs: some.then(|| fin.iter().fold(0f64, |m, x| m.max(x.abs()))),
        nonfinite: (v.len() - fin.len()) as u64,
    }
}

/// Update norm, ratio and cosine of a pair, in f64.
fn want_pair(a: &[f32], b: &[f32]) -> (Option<f64>, Option<f64>, Option<f64>) {
    if a.iter().chain(b).any(|x| !x.is_finite()) {
        return (None, None, None);
    }
    let (mut dd, mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dd += (y - x) * (y - x);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    let u = dd.sqrt();
    (
        Some(u),
        (aa > 0.0).then(|| u / aa.sqrt()),
        (aa > 0.0 && bb > 0.0).then(|| ab / (aa.sqrt() * bb.sqrt())),
    )
}

fn close(got: &Value, want: Option<f64>, what: &str) {
    match want {
        None => assert!(got.is_null(), "{what}: {got} where null"),
        Some(w) => {
            let g = got
                .as_f64()
                .unwrap_or_else(|| panic!("{what}: {got} where {w}"));
            assert!(
                (g - w).abs() <= 1e-9 * w.abs().max(1e-300),
                "{what}: {g} against {w}"
            );
        }
    }
}

/// Every figure of every tensor at every step of `doc` against the run.
fn check_figures(doc: &Value, run: &[Checkpoint]) {
    let by_name: HashMap<&str, &Value> = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| (t["name"].as_str().expect("name"), t))
        .collect();
    for (i, ck) in run.iter().enumerate() {
        for x in ck {
            let got = by_name[x.name.as_str()];
            let w = want(&x.values);
            let what = format!("{} at step index {i}", x.name);
            close(&got["l2_norm"][i], w.l2, &format!("{what} l2_norm"));
            close(&got["std"][i], w.std, &format!("{what} std"));
            close(&got["max_abs"][i], w.max_abs, &format!("{what} max_abs"));
            assert_eq!(got["nonfinite"][i], w.nonfinite, "{what} nonfinite");
            let before = i
                .checked_sub(1)
                .and_then(|p| run[p].iter().find(|y| y.name == x.name))
                .filter(|y| y.shape == x.shape);
            let (u, r, c) = before.map_or((None, None, None), |y| want_pair(&y.values, &x.values));
            close(&got["update_norm"][i], u, &format!("{what} update_norm"));
            close(&got["update_ratio"][i], r, &format!("{what} update_ratio"));
            close(&got["cosine"][i], c, &format!("{what} cosine"));
        }
        // A tensor missing at this step: every figure null.
        for (name, t) in &by_name {
            if !ck.iter().any(|x| x.name == *name) {
                for key in ["l2_norm", "std", "max_abs", "nonfinite", "update_norm"] {
                    assert!(t[key][i].is_null(), "{name} {key} at {i}");
                }
            }
        }
    }
}

/// The run as a Trainer leaves it: `checkpoint-K/` folders with
/// `trainer_state.json` (global_step 100·K, not the folder's number).
pub fn trainer_layout(dir: &Path, run: &[Checkpoint]) -> PathBuf {
    let root = dir.join("out");
    for (k, ck) in run.iter().enumerate() {
        let folder = root.join(format!("checkpoint-{k}"));
        write(&folder, "model.safetensors", &safetensors_bytes(ck));
        write(
            &folder,
            "trainer_state.json",
            format!("{{\"global_step\": {}, \"epoch\": 1.0}}", 100 * (k + 1)).as_bytes(),
        );
    }
    // Files beside the checkpoints are not steps.
    write(&root, "README.md", b"a run");
    root
}

#[test]
fn a_trainer_run_gives_every_figure_and_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run();
    let root = trainer_layout(dir.path(), &run);
    let doc = series_json(&[&root], &[]);
    let steps = steps_of(&doc);
    assert_eq!(steps, [100, 200, 300, 400, 500, 600]);
    assert!(
        doc["steps"][0]["path"]
            .as_str()
            .expect("path")
            .contains("checkpoint-0")
    );
    check_figures(&doc, &run);
    // The schedule: ratio k/10 / (1 + (k−1)/10) exactly as the values give it.
    let up = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .find(|t| t["name"] == "model.layers.0.mlp.up.weight")
        .expect("up");
    for k in 1..6 {
        let r = up["update_ratio"][k].as_f64().expect("a ratio");
        let ideal = 0.1 / (1.0 + (k as f64 - 1.0) / 10.0);
        assert!((r - ideal).abs() < 1e-6, "step {k}: {r} against {ideal}");
        close(&up["cosine"][k], Some(1.0), "a scaled tensor's cosine");
    }
    let events: Vec<(String, u64, Vec<String>)> = doc["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().expect("kind").to_owned(),
                e["step"].as_u64().expect("step"),
                e["tensors"]
                    .as_array()
                    .expect("tensors")
                    .iter()
                    .map(|n| n.as_str().expect("a name").to_owned())
                    .collect(),
            )
        })
        .collect();
    let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let down_gate = names(&[
        "model.layers.1.mlp.down.weight",
        "model.layers.1.mlp.gate.weight",
    ]);
    let want: Vec<(String, u64, Vec<String>)> = vec![
        (
            "nonfinite".into(),
            100,
            names(&["model.embed_tokens.weight"]),
        ),
        ("frozen".into(), 100, names(&["model.embed_tokens.weight"])),
        ("vanished".into(), 300, names(&["model.extra"])),
        ("nonfinite".into(), 400, down_gate),
        ("appeared".into(), 400, names(&["model.extra"])),
        (
            "spike".into(),
            600,
            names(&["model.layers.0.self_attn.q.weight"]),
        ),
    ];
    assert_eq!(events, want);
    // Layers: the root of the squared norms, and of the squared updates
    // over the previous squared norms of the tensors with a pair figure.
    let tensors = doc["tensors"].as_array().expect("tensors");
    for layer in doc["layers"].as_array().expect("layers") {
        let l = layer["layer"].as_u64().expect("layer");
        let members: Vec<&Value> = tensors
            .iter()
            .filter(|t| {
                t["name"]
                    .as_str()
                    .is_some_and(|n| n.contains(&format!(".layers.{l}.")))
            })
            .collect();
        for i in 0..6 {
            let sq: f64 = members
                .iter()
                .filter_map(|t| t["l2_norm"][i].as_f64())
                .map(|x| x * x)
                .sum();
            close(
                &layer["l2_norm"][i],
                Some(sq.sqrt()),
                &format!("layer {l} l2 {i}"),
            );
            let (mut u, mut p) = (0f64, 0f64);
            for t in &members {
                if let (Some(un), Some(pn)) = (
                    t["update_norm"][i].as_f64(),
                    i.checked_sub(1).and_then(|j| t["l2_norm"][j].as_f64()),
                ) {
                    u += un * un;
                    p += pn * pn;
                }
            }
            let want = (p > 0.0).then(|| (u / p).sqrt());
            close(
                &layer["update_ratio"][i],
                want,
                &format!("layer {l} ratio {i}"),
            );
        }
    }
    assert_eq!(doc["layers"].as_array().map(Vec::len), Some(2));
}

#[test]
fn lightning_files_and_a_mixed_folder_are_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run();
    let root = dir.path().join("lightning");
    for (k, ck) in run.iter().enumerate() {
        let name = format!("epoch={k}-step={}.ckpt", 50 * (k + 1));
        write(&root, &name, &torch_bytes(ck));
    }
    let doc = series_json(&[&root], &[]);
    let steps = steps_of(&doc);
    assert_eq!(steps, [50, 100, 150, 200, 250, 300]);
    check_figures(&doc, &run);
    // PyTorch and safetensors in one folder, by the last number in the
    // name, given in any order.
    let mixed = dir.path().join("mixed");
    let mut files = Vec::new();
    for (k, ck) in run.iter().enumerate() {
        files.push(if k % 2 == 0 {
            write(
                &mixed,
                &format!("weights_{k:03}.safetensors"),
                &safetensors_bytes(ck),
            )
        } else {
            write(&mixed, &format!("weights_{k:03}.pt"), &torch_bytes(ck))
        });
    }
    files.reverse();
    let given: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let doc = series_json(&given, &[]);
    check_figures(&doc, &run);
    assert_eq!(doc["steps"][5]["step"], 5);
}

#[test]
fn adapter_checkpoints_of_a_fine_tune_are_steps() {
    // PEFT's LoRA under the Trainer: `checkpoint-N/adapter_model.*` beside
    // the optimizer's state and other files, no model weights; both the
    // safetensors and the PyTorch adapter.
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run();
    let root = dir.path().join("lora");
    for (k, ck) in run.iter().enumerate() {
        let folder = root.join(format!("checkpoint-{}", 10 * (k + 1)));
        if k % 2 == 0 {
            write(&folder, "adapter_model.safetensors", &safetensors_bytes(ck));
        } else {
            write(&folder, "adapter_model.bin", &torch_bytes(ck));
        }
        write(&folder, "optimizer.pt", b"not read");
        write(&folder, "training_args.bin", b"not read");
        write(&folder, "adapter_config.json", b"{}");
        write(
            &folder,
            "trainer_state.json",
            format!("{{\"global_step\": {}}}", 7 * (k + 1)).as_bytes(),
        );
    }
    let doc = series_json(&[&root], &[]);
    let steps = steps_of(&doc);
    assert_eq!(steps, [7, 14, 21, 28, 35, 42]);
    assert!(
        doc["steps"][1]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("adapter_model.bin")),
        "{}",
        doc["steps"][1]
    );
    check_figures(&doc, &run);
}

#[test]
fn an_output_folder_with_its_final_model_is_one_checkpoint_and_says_so() {
    // The Trainer's output folder after `save_model()`: the final
    // model.safetensors beside the checkpoint folders. By the rule it is
    // one checkpoint; a note names the run's folders.
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run();
    let root = trainer_layout(dir.path(), &run);
    write(&root, "model.safetensors", &safetensors_bytes(&run[5]));
    write(&root, "trainer_state.json", b"{\"global_step\": 600}");
    let (code, out, err) = series_cmd(&[root.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["steps"].as_array().map(Vec::len), Some(1));
    assert!(doc.get("notes").is_none(), "the contract's fields only");
    assert!(
        err.contains("note:") && err.contains("6 checkpoint folders (checkpoint-0, checkpoint-1"),
        "{err}"
    );
    // The run's folders themselves: no note.
    let folders: Vec<PathBuf> = (0..6)
        .map(|k| root.join(format!("checkpoint-{k}")))
        .collect();
    let args: Vec<&std::ffi::OsStr> = folders.iter().map(|p| p.as_os_str()).collect();
    let (code, _, err) = series_cmd(&args);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("note:"), "{err}");
}

#[test]
fn a_regex_narrows_tensors_layers_and_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run();
    let root = trainer_layout(dir.path(), &run);
    let doc = series_json(&[&root], &["--tensor-regex", r"layers\.1\."]);
    let names: Vec<&str> = doc["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "model.layers.1.mlp.down.weight",
            "model.layers.1.mlp.gate.weight"
        ]
    );
    assert_eq!(doc["layers"].as_array().map(Vec::len), Some(1));
    let kinds: Vec<&str> = doc["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["nonfinite"]);
    // The text form: the events first.
    let (code, out, err) = series_cmd(&[root.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let events_at = out.find("events:").expect("events");
    let tensors_at = out.find("tensors (").expect("tensors");
    assert!(events_at < tensors_at, "{out}");
    assert!(out.contains("nonfinite") && out.contains("frozen"), "{out}");
}

#[test]
fn refusals_name_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run();
    let a = write(dir.path(), "a/epoch=0-step=100.ckpt", &torch_bytes(&run[0]));
    let b = write(dir.path(), "b/epoch=1-step=100.ckpt", &torch_bytes(&run[1]));
    let nameless = write(
        dir.path(),
        "c/weights.safetensors",
        &safetensors_bytes(&run[0]),
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let bad_regex: &[&std::ffi::OsStr] = &[
        "--json".as_ref(),
        "--tensor-regex".as_ref(),
        "(".as_ref(),
        a.as_os_str(),
    ];
    let cases: Vec<(Vec<&std::ffi::OsStr>, &str)> = vec![
        (
            vec!["--json".as_ref(), a.as_os_str(), b.as_os_str()],
            "SameStep",
        ),
        (vec!["--json".as_ref(), nameless.as_os_str()], "NoStep"),
        (vec!["--json".as_ref(), empty.as_os_str()], "NoCheckpoints"),
        (bad_regex.to_vec(), "Usage"),
    ];
    for (args, kind) in cases {
        let (code, out, err) = series_cmd(&args);
        assert_eq!(code, 2, "{kind}: {out} {err}");
        let doc: Value = serde_json::from_str(&out).expect("one JSON document");
        assert_eq!(doc["error"]["kind"], kind, "{doc}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // SameStep names both checkpoints.
    let (_, out, _) = series_cmd(&["--json".as_ref(), a.as_os_str(), b.as_os_str()]);
    let doc: Value = serde_json::from_str(&out).expect("JSON");
    let message = doc["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("a/epoch=0") && message.contains("b/epoch=1"),
        "{message}"
    );
}
