//! Opening checkpoints: the demo, an invalid file, the dialog and its
//! in-app fallback, a drop and the recent list, hostile names, and tabs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use egui::accesskit::Role;
use egui_kittest::kittest::{NodeT as _, Queryable};
use tensorscope::gui::State;
use tensorscope::gui::dialog::DialogResult;

use super::{ScriptedDialog, harness, no_dialog, open, set_text, settle, shows_a_checkpoint};
use crate::fixtures::{small_model, with_header, write};

#[test]
fn the_demo_opens_from_the_start_screen() {
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(2);
    h.get_by_label("Open demo checkpoint").click();
    settle(&mut h);
    h.get_by_label("model.embed_tokens.weight");
    let status = h
        .get_by_label_contains("tensors ·")
        .value()
        .unwrap_or_default();
    let count: u64 = status
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the status line starts with the tensor count");
    assert!(count > 20, "{status}");
}

#[test]
fn an_invalid_file_shows_the_error_pane() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = write(
        dir.path(),
        "bad.safetensors",
        &with_header(
            r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
            4,
        ),
    );
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &bad);
    h.get_by_label("This file cannot be opened");
    h.get_by_label_contains("(invalid)");
    h.get_by_label("TensorInvalidInfo");
    h.get_by_label_contains("needs 8");
    let zip = write(
        dir.path(),
        "model.bin",
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl",
    );
    open(&mut h, &zip);
    h.get_by_label_contains("It looks like a zip archive");
}

#[test]
fn the_dialog_and_its_fallback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "m.safetensors", &small_model());
    let dialog = Arc::new(ScriptedDialog {
        answer: Mutex::new(DialogResult::Picked(vec![p.clone()])),
        available: true,
    });
    let mut h = harness(State::default(), dialog);
    h.run_steps(1);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::O);
    settle(&mut h);
    assert!(shows_a_checkpoint(&h));

    // No native dialog: the in-app picker opens on the folder and lists it.
    let none = Arc::new(ScriptedDialog {
        answer: Mutex::new(DialogResult::Unavailable),
        available: true,
    });
    let mut h = harness(State::default(), none);
    h.run_steps(1);
    h.get_by_label("Open a file…").click();
    settle(&mut h);
    h.get_by_label_contains("No native file dialog is available here");
    // Type the folder into the path box and go there.
    set_text(
        &h.get_by_role(Role::TextInput),
        &dir.path().display().to_string(),
    );
    h.run_steps(1);
    h.get_by_label("Go").click();
    settle(&mut h);
    h.get_by_label_contains("m.safetensors").click();
    settle(&mut h);
    assert!(
        h.query_by_label_contains("No native file dialog is available here")
            .is_none()
    );
    assert!(shows_a_checkpoint(&h));
}

#[derive(Debug)]
struct Dropped(PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn drop_and_recent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "dropped.safetensors", &small_model());
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    h.input_mut()
        .dropped_files
        .push(Arc::new(Dropped(p.clone())));
    settle(&mut h);
    assert_eq!(
        h.query_all_by_label("x").count(),
        1,
        "one tab, one close button"
    );
    let state = h.state().state().clone();
    assert_eq!(
        state.recent.first(),
        Some(&std::path::absolute(&p).expect("abs"))
    );
    // A new session lists it on the start screen.
    let mut h = harness(state, no_dialog());
    h.run_steps(2);
    h.get_by_label_contains("dropped.safetensors").click();
    settle(&mut h);
    assert!(shows_a_checkpoint(&h));
}

#[test]
fn hostile_names_are_drawn_safely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = "n".repeat(1 << 20);
    let header = format!(
        r#"{{"a\u0000\n\u202e":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}},"{long}":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}},"__metadata__":{{"k\u202e":"v\u0007"}}}}"#
    );
    let p = write(dir.path(), "names.safetensors", &with_header(&header, 0));
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &p);
    // The table's row (the overview lists it among the largest too).
    h.get_all_by_label_contains("\\u{202e}")
        .find(|n| n.accesskit_node().role() == Role::Label)
        .expect("the table's row")
        .click();
    h.run_steps(2);
    // The tensor view shows the escaped name too.
    assert!(h.query_all_by_label_contains("\\u{202e}").count() >= 2);
    h.get_by_label("Metadata").click();
    h.run_steps(2);
    h.get_by_label_contains("k\\u{202e}");
    h.get_by_label_contains("v\\u{7}");
    h.get_by_label("File info").click();
    h.run_steps(2);
}

#[test]
fn closing_a_tab_left_of_the_shown_one_keeps_it_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(dir.path(), "a.safetensors", &small_model());
    let b = write(
        dir.path(),
        "b.safetensors",
        &with_header(
            r#"{"only_in_b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#,
            2,
        ),
    );
    let c = write(
        dir.path(),
        "c.safetensors",
        &with_header(
            r#"{"only_in_c":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#,
            2,
        ),
    );
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &a);
    open(&mut h, &b);
    open(&mut h, &c);
    h.get_by_label("b.safetensors").click();
    h.run_steps(2);
    h.get_by_label("only_in_b");
    // Close A, the first tab: B stays the one shown.
    h.get_all_by_label("x")
        .next()
        .expect("a close button")
        .click();
    h.run_steps(2);
    assert_eq!(h.query_all_by_label("x").count(), 2);
    h.get_by_label("only_in_b");
    assert!(h.query_by_label("only_in_c").is_none());
}
