//! The overview: what the right pane shows while no tensor is selected,
//! and on a page of its own.

use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use tensorscope::gui::State;

use super::{harness, no_dialog, open};
use crate::fixtures::llama_like;

#[test]
fn the_overview_answers_the_model_page_questions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = llama_like(dir.path(), 4, None);
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &path);
    // Nothing is selected: the overview is there at once.
    h.get_by_label("Per dtype");
    h.get_by_label("Largest tensors");
    h.get_by_label("11.4K params · 44.6 KiB · 100.0%");
    // The architecture, and the tensors checked against it.
    h.get_by_label("llama");
    h.get_by_label("LlamaForCausalLM");
    h.get_by_label("✔ layers: num_hidden_layers 4; the names number 4");
    h.get_by_label_contains("✔ embedding: vocab_size × hidden_size = [64, 16]");
    h.get_by_label_contains("✔ parameters: the config's shapes give");
    h.get_by_label("No __metadata__.");
    // A largest tensor opens in the tensor view; Escape comes back.
    h.get_by_role_and_label(Role::Link, "largest: model.embed_tokens.weight")
        .click();
    h.run_steps(2);
    super::settle(&mut h);
    h.get_by_label("1 selected");
    assert!(h.query_by_label("Per dtype").is_none());
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    h.get_by_label("Per dtype");
    // Its own page, also with a tensor selected.
    h.get_by_label("model.layers.0.input_layernorm.weight")
        .click();
    h.run_steps(2);
    h.get_by_label("Overview").click();
    h.run_steps(2);
    h.get_by_label("Per dtype");
    // From the Overview page too, a largest tensor opens its own page.
    h.get_by_role_and_label(Role::Link, "largest: model.embed_tokens.weight")
        .click();
    h.run_steps(2);
    super::settle(&mut h);
    assert!(h.query_by_label("Per dtype").is_none());
    h.get_by_label("Statistics");
}

#[test]
fn a_config_that_disagrees_with_the_tensors_is_flagged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = llama_like(dir.path(), 3, None);
    let config = dir.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).expect("read")).expect("json");
    v["num_hidden_layers"] = 5.into();
    v["vocab_size"] = 65.into();
    std::fs::write(&config, v.to_string()).expect("write");
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &path);
    h.get_by_label("⚠ layers: num_hidden_layers 5; the names number 3");
    h.get_by_label_contains("⚠ embedding: vocab_size × hidden_size = [65, 16]");
    h.get_by_label_contains("⚠ parameters");
    // A config that is not JSON is named, not fatal.
    std::fs::write(&config, "{not json").expect("write");
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &path);
    h.get_by_label_contains("config.json is not valid JSON");
    h.get_by_label("Per dtype");
}

/// After a scan the overview charts a statistic per layer, one line per
/// role; a click on a point selects its tensor.
#[test]
fn the_per_layer_chart_selects_the_tensor_clicked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = llama_like(dir.path(), 6, None);
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &path);
    assert!(h.query_by_label("per-layer chart").is_none(), "no scan yet");
    h.get_by_label("Scan whole file").click();
    super::settle(&mut h);
    h.run_steps(2);
    h.get_by_label("Per layer:");
    let rect = h.get_by_label("per-layer chart").rect();
    // The spread grows with the layer: the top right holds layer 5's
    // points. Click there, nearer and nearer, until one is hit.
    let mut picked = false;
    'sweep: for dy in (10..90).step_by(6) {
        for dx in (4..120).step_by(6) {
            let pos = egui::pos2(rect.right() - dx as f32, rect.top() + dy as f32);
            super::click_at(&mut h, pos);
            if h.query_by_label("1 selected").is_some() {
                picked = true;
                break 'sweep;
            }
        }
    }
    assert!(picked, "a click on the chart selects a tensor");
    super::settle(&mut h);
    assert!(
        h.query_all_by_label_contains("model.layers.5.").count() >= 1,
        "the tensor of a layer-5 point is shown"
    );
    // Another statistic: the lines are built again.
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    h.get_by_value("std").click();
    h.run_steps(2);
    h.get_by_label("L2 norm").click();
    h.run_steps(2);
    h.get_by_label("per-layer chart");
}
