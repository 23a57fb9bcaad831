//! A training run in the explorer: *Open series…* on a Trainer folder
//! measures it in a job, the Run view shows the heat strip, the events
//! and a chosen tensor's charts, and a click on a cell compares that
//! tensor between the cell's step and the one before.

use std::sync::{Arc, Mutex};

use egui_kittest::kittest::Queryable;
use tensorscope::gui::State;
use tensorscope::gui::dialog::DialogResult;

use super::{ScriptedDialog, click_at, file_menu, harness, settle};
use crate::series::{run, trainer_layout};

#[test]
fn a_run_shows_its_events_charts_and_compares_a_cell() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = trainer_layout(dir.path(), &run());
    let dialog = Arc::new(ScriptedDialog {
        answer: Mutex::new(DialogResult::Picked(vec![root])),
        available: true,
    });
    let mut h = harness(State::default(), dialog);
    file_menu(&mut h, "Open series…");
    settle(&mut h);
    h.get_by_label("Training run: 6 checkpoints, steps 100 … 600");
    h.get_by_label("Events");
    h.get_by_label("step 100: frozen (1 tensor)");
    h.get_by_label("step 400: nonfinite (2 tensors)");
    h.get_by_label("step 600: spike (1 tensor)");
    // Layers first: two rows.
    h.get_by_label("layer 0");
    h.get_by_label("layer 1");
    // Tensors, and one chosen: its charts.
    h.get_by_label("Tensors").click();
    h.run_steps(2);
    let q = "model.layers.0.self_attn.q.weight";
    let label = h
        .query_all_by_label(q)
        .find(|n| n.rect().min.x < 700.0)
        .expect("the tensor's row");
    label.click();
    h.run_steps(2);
    h.get_by_label("Norm, std and max |x|");
    // The spike's cell: the last step, compared with the one before.
    let strip = h.get_by_label(&format!("steps of {q}")).rect();
    let cell = strip.width() / 6.0;
    click_at(
        &mut h,
        egui::pos2(strip.left() + cell * 5.5, strip.center().y),
    );
    settle(&mut h);
    h.get_by_label("Histograms of A and B");
    assert!(
        h.query_all_by_label(q).count() >= 1,
        "the pair is shown by its name"
    );
}

#[test]
fn reload_measures_the_run_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = trainer_layout(dir.path(), &run());
    let dialog = Arc::new(ScriptedDialog {
        answer: Mutex::new(DialogResult::Picked(vec![root.clone()])),
        available: true,
    });
    let mut h = harness(State::default(), dialog);
    file_menu(&mut h, "Open series…");
    settle(&mut h);
    h.get_by_label("Training run: 6 checkpoints, steps 100 … 600");
    // The last checkpoint is deleted: Reload measures the five left.
    // (checkpoint-5 holds global_step 600.)
    let last = root.join("checkpoint-5");
    std::fs::remove_dir_all(last).expect("remove");
    file_menu(&mut h, "Reload");
    settle(&mut h);
    h.get_by_label("Training run: 5 checkpoints, steps 100 … 500");
    assert!(h.query_by_label("step 600: spike (1 tensor)").is_none());
}

#[test]
fn a_run_folder_opened_as_a_file_offers_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = trainer_layout(dir.path(), &run());
    let mut h = harness(State::default(), super::no_dialog());
    super::open(&mut h, &root);
    h.get_by_label("This file cannot be opened");
    h.get_by_label("Open as a training run").click();
    settle(&mut h);
    h.get_by_label("Training run: 6 checkpoints, steps 100 … 600");
    assert!(h.query_by_label("This file cannot be opened").is_none());
}
