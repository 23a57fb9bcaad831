//! The Export tensor and Save as dialogs: a tensor exported, a selection
//! saved with a rename, a conversion and a metadata key, and a failing save.

use egui::accesskit::Role;
use egui_kittest::kittest::{By, Queryable};
use tensorscope::gui::State;

use super::{App, file_menu, harness, no_dialog, open, set_text, settle};
use crate::fixtures::{small_model, write};

/// The text field whose hint (placeholder) is `hint`.
fn field_by_hint<'a>(h: &'a App, hint: &'a str) -> egui_kittest::Node<'a> {
    h.get(By::new().predicate(move |n| n.placeholder() == Some(hint)))
}

#[test]
fn export_and_save_as_flows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "m.safetensors", &small_model());
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &p);
    h.get_by_label("embed.weight").click();
    h.run_steps(2);
    // Export the selected tensor.
    file_menu(&mut h, "Export tensor…");
    settle(&mut h);
    h.get_by_label("Export tensor");
    let out = dir.path().join("embed.npy");
    set_text(&h.get_by_label("File:"), &out.display().to_string());
    h.run_steps(2);
    h.get_by_label("Export").click();
    settle(&mut h);
    h.get_by_label_contains("Wrote");
    let npy = std::fs::read(&out).expect("npy written");
    assert!(npy.starts_with(b"\x93NUMPY"));
    h.get_by_label("Close").click();
    h.run_steps(2);
    assert!(h.query_by_label("Export tensor").is_none());

    // Save a selection as a new checkpoint with a conversion and a metadata key.
    h.get_by_label("layers.0.norm")
        .click_modifiers(egui::Modifiers::COMMAND);
    h.run_steps(2);
    file_menu(&mut h, "Save as…");
    settle(&mut h);
    h.get_by_label_contains("2 tensors selected");
    let saved = dir.path().join("subset.safetensors");
    set_text(&h.get_by_label("File:"), &saved.display().to_string());
    set_text(
        &field_by_hint(&h, "model.embed.weight=embed.weight"),
        "embed.weight=tok_embeddings",
    );
    set_text(&field_by_hint(&h, "new key"), "note");
    set_text(&field_by_hint(&h, "value"), "subset");
    h.run_steps(2);
    // F32 becomes BF16.
    h.get(By::new().role(Role::ComboBox).label("F32")).click();
    h.run_steps(2);
    h.get(
        By::new()
            .label("BF16")
            .predicate(|n| n.role() != Role::Label),
    )
    .click();
    h.run_steps(2);
    h.get_by_label("Add").click();
    // The new metadata row moves the buttons: let the layout settle.
    h.run_steps(4);
    h.get_by_label("Save").click();
    settle(&mut h);
    h.get_by_label_contains("Saved 2 tensors");
    h.get_by_label("Open the result").click();
    settle(&mut h);
    // The result opens in a new tab, with the renamed, converted tensor.
    h.get_by_label("subset.safetensors");
    h.get_by_label("tok_embeddings");
    assert!(h.query_by_label("embed.weight").is_none());
    h.get_by_label_contains("BF16 ×1");
    assert!(h.query_by_label_contains("F32 ×").is_none());
    let saved_ck = tensorscope::format::Checkpoint::open(&saved).expect("result opens");
    let t = saved_ck.find("tok_embeddings").expect("renamed");
    assert_eq!(
        saved_ck.info(t).expect("info").dtype(),
        tensorscope::dtype::Dtype::BF16
    );
    let meta = saved_ck.shards()[0]
        .file()
        .header()
        .metadata()
        .cloned()
        .expect("metadata");
    assert_eq!(meta.get("note").map(String::as_str), Some("subset"));
    assert_eq!(meta.get("format").map(String::as_str), Some("pt"));
    // The official reader loads it.
    let bytes = std::fs::read(&saved).expect("read");
    safetensors::SafeTensors::deserialize(&bytes).expect("official reader");

    // A failing save shows the error and leaves nothing behind.
    h.get_by_label("m.safetensors").click();
    h.run_steps(2);
    file_menu(&mut h, "Save as…");
    settle(&mut h);
    let blocker = write(dir.path(), "not-a-folder", b"x");
    set_text(
        &h.get_by_label("File:"),
        &blocker.join("out.safetensors").display().to_string(),
    );
    h.run_steps(2);
    h.get_by_label("Save").click();
    settle(&mut h);
    h.get_by_label_contains("not-a-folder");
    assert!(h.query_by_label_contains("Saved").is_none());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers.len(), 4, "{leftovers:?}");
}
