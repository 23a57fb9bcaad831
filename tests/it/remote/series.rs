//! A series of remote checkpoints: the Hub's step revisions
//! (`hf://org/model@stepN`, Pythia's layout) and plain URLs with a
//! `trainer_state.json` beside the weights give what the same run gives
//! locally.

use super::server::Server;
use super::{json, run};
use crate::fixtures::write;
use crate::series::{run as made_run, safetensors_bytes};

/// The document without the steps' paths (the only field that differs).
fn without_step_paths(mut doc: serde_json::Value) -> serde_json::Value {
    if let Some(steps) = doc["steps"].as_array_mut() {
        for s in steps {
            s["path"] = serde_json::Value::Null;
        }
    }
    doc
}

#[test]
fn remote_series_match_the_local_run() {
    let hub = Server::start();
    let plain = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let steps = made_run();
    let mut locations = Vec::new();
    let mut urls = Vec::new();
    for (k, ck) in steps.iter().enumerate() {
        let bytes = safetensors_bytes(ck);
        let step = 1000 * (k + 1);
        hub.file(
            &format!("/org/model/resolve/step{step}/model.safetensors"),
            bytes.clone(),
        );
        // Given out of order: the series sorts by step.
        locations.insert(0, format!("hf://org/model@step{step}"));
        plain.file(&format!("/run/ckpt-{k}/model.safetensors"), bytes.clone());
        plain.file(
            &format!("/run/ckpt-{k}/trainer_state.json"),
            format!("{{\"global_step\": {step}}}").into_bytes(),
        );
        urls.push(plain.url(&format!("/run/ckpt-{k}/model.safetensors")));
        write(
            &dir.path().join("local"),
            &format!("checkpoint-{step}/model.safetensors"),
            &bytes,
        );
    }
    let cache = dir.path().join("cache");
    let local = dir.path().join("local");
    let (code, out, err) = run(
        &cache,
        &[],
        &["series", "--json", local.to_str().expect("utf-8")],
    );
    assert_eq!(code, 0, "{err}");
    let want = without_step_paths(json(&out, &err));
    let env = [("HF_ENDPOINT", hub.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut args = vec!["series", "--json"];
    args.extend(locations.iter().map(String::as_str));
    let (code, out, err) = run(&cache, &env, &args);
    assert_eq!(code, 0, "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["steps"][0]["step"], 1000, "{doc}");
    assert_eq!(without_step_paths(doc), want);
    // Plain URLs: the step from the trainer_state.json beside each.
    let mut args = vec!["series", "--json"];
    args.extend(urls.iter().map(String::as_str));
    let (code, out, err) = run(&dir.path().join("cache2"), &[], &args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(without_step_paths(json(&out, &err)), want);
    // A revision that is not there: a clear error, exit 2.
    let (code, out, err) = run(
        &cache,
        &env,
        &[
            "series",
            "--json",
            "hf://org/model@step1000",
            "hf://org/model@step99",
        ],
    );
    assert_eq!(code, 2, "{out} {err}");
    assert!(
        json(&out, &err)["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("step99"))
    );
}
