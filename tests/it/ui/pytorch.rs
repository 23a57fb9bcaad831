//! PyTorch files in the explorer: a Lightning checkpoint opens with its
//! training step and hyper-parameters in the overview and its optimizer
//! states in the tree, a tensor shows its statistics, *Save as* converts
//! it to safetensors; an unsafe pickle opens to a banner naming what it
//! would import, with nothing run and nothing read.

use egui_kittest::kittest::Queryable;
use tensorscope::gui::State;

use super::{file_menu, harness, no_dialog, open, set_text, settle};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pytorch")
        .join(name)
}

#[test]
fn a_lightning_checkpoint_opens_shows_its_leaves_and_converts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &fixture("lightning.ckpt"));
    h.get_by_label("PyTorch file");
    // The overview lists the training step and the hyper-parameters.
    h.get_by_label("global_step");
    h.get_by_label("1200");
    h.get_by_label("hyper_parameters.name");
    h.get_by_label("tiny");
    // Converted to safetensors, the leaves carried into __metadata__.
    file_menu(&mut h, "Save as…");
    settle(&mut h);
    let saved = dir.path().join("lightning.safetensors");
    set_text(&h.get_by_label("File:"), &saved.display().to_string());
    h.run_steps(2);
    h.get_by_label("Save").click();
    settle(&mut h);
    h.get_by_label_contains("Saved 17 tensors");
    h.get_by_label("Close").click();
    h.run_steps(2);
    // A tensor's statistics, by a job.
    h.get_by_label("optimizer_states.0.state.0.exp_avg").click();
    settle(&mut h);
    h.get_by_label("count");
    // The tree groups the optimizer states by their path.
    h.get_by_label("Tree").click();
    h.run_steps(2);
    h.get_by_label_contains("⏵ optimizer_states").click();
    h.run_steps(2);
    let rows = |h: &super::App| h.query_all_by_label_contains("state").count();
    let before = rows(&h);
    h.get_by_label_contains("⏵ 0").click();
    h.run_steps(2);
    assert!(rows(&h) > before, "optimizer_states.0 shows no state");
    h.get_by_label_contains("⏵ state_dict");
    h.get_by_label("Tree").click();
    h.run_steps(2);
    let bytes = std::fs::read(&saved).expect("saved");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("official reader");
    assert_eq!(st.len(), 17);
    st.tensor("state_dict.model.proj.weight").expect("a weight");
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).expect("metadata");
    let meta = meta.metadata().clone().expect("__metadata__");
    assert_eq!(meta.get("global_step").map(String::as_str), Some("1200"));
}

#[test]
fn an_unsafe_pickle_opens_to_a_banner_and_nothing_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let canary = dir.path().join("CANARY");
    let mut pickle = b"\x80\x02}(\x8c\x01wcposix\nsystem\n".to_vec();
    let command = format!("touch {}", canary.display());
    pickle.push(0x8c);
    pickle.push(command.len() as u8);
    pickle.extend_from_slice(command.as_bytes());
    pickle.extend_from_slice(b"\x85Ru.");
    let file = dir.path().join("weights.bin");
    std::fs::write(&file, &pickle).expect("write");
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &file);
    assert!(
        h.query_all_by_label_contains("would import posix.system (not executed)")
            .count()
            >= 1
    );
    h.get_by_label("0 tensors · 0 parameters · 0 B");
    assert!(!canary.exists(), "the payload ran");
}
