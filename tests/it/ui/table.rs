//! The tensor table: sorting, filtering and selecting, the tree view, and
//! multi-selection with the keyboard and copied names.

use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use tensorscope::gui::State;

use super::{App, harness, no_dialog, open, table_order};
use crate::fixtures::{small_model, write};

const SMALL_NAMES: [&str; 6] = [
    "embed.weight",
    "empty",
    "layers.0.attn.q",
    "layers.0.norm",
    "packed",
    "scale",
];

#[test]
fn open_sort_filter_and_select() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "m.safetensors", &small_model());
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &p);
    let names = |h: &App| table_order(h, &SMALL_NAMES);
    // File order puts the largest dtypes first (I64, then F64).
    assert_eq!(names(&h)[..2], ["empty", "scale"]);
    h.get_by_label("Name").click();
    h.run_steps(2);
    assert_eq!(
        names(&h),
        [
            "embed.weight",
            "empty",
            "layers.0.attn.q",
            "layers.0.norm",
            "packed",
            "scale"
        ]
    );
    h.get_by_label("Name ⏶").click();
    h.run_steps(2);
    assert_eq!(names(&h)[0], "scale");
    // Filter.
    let filter = h.get_by_role(Role::TextInput);
    filter.focus();
    filter.type_text("layers");
    h.run_steps(3);
    assert_eq!(names(&h), ["layers.0.norm", "layers.0.attn.q"]);
    h.get_by_label("2 shown");
    // Select and see the tensor view.
    assert!(
        h.query_by_label("Select a tensor in the table to see its values and statistics.")
            .is_some()
    );
    h.get_by_label("layers.0.norm").click();
    h.run_steps(2);
    assert!(
        h.query_by_label("Select a tensor in the table to see its values and statistics.")
            .is_none()
    );
    // The name and dtype now also appear in the tensor view.
    assert!(h.get_all_by_label("layers.0.norm").count() >= 2);
    assert!(h.get_all_by_label("F16").count() >= 2);
}

#[test]
fn tree_view_groups_by_prefix() {
    let mut h = harness(
        State {
            tree_view: true,
            ..State::default()
        },
        no_dialog(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "m.safetensors", &small_model());
    open(&mut h, &p);
    h.get_by_label_contains("⏵ layers").click();
    h.run_steps(2);
    h.get_by_label_contains("⏵ 0").click();
    h.run_steps(2);
    h.get_by_label_contains("⏵ attn").click();
    h.run_steps(2);
    h.get_by_label("q");
}

#[test]
fn multi_select_keyboard_and_copy_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "m.safetensors", &small_model());
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &p);
    h.get_by_label("Name").click();
    h.run_steps(2);
    h.get_by_label("embed.weight").click();
    h.run_steps(1);
    h.get_by_label("layers.0.norm")
        .click_modifiers(egui::Modifiers::COMMAND);
    h.run_steps(2);
    h.get_by_label("2 selected");
    // Shift-click selects the range in the current order.
    h.get_by_label("packed")
        .click_modifiers(egui::Modifiers::SHIFT);
    h.run_steps(2);
    h.get_by_label("2 selected");
    h.get_by_label("embed.weight").click();
    h.run_steps(1);
    h.get_by_label("layers.0.norm")
        .click_modifiers(egui::Modifiers::SHIFT);
    h.run_steps(2);
    h.get_by_label("4 selected");
    // Copy the selected names.
    h.event(egui::Event::Copy);
    h.step();
    let copied = h
        .output()
        .platform_output
        .commands
        .iter()
        .find_map(|c| match c {
            egui::OutputCommand::CopyText(t) => Some(t.clone()),
            _ => None,
        });
    assert!(copied.is_some_and(|t| t.lines().count() == 4 && t.contains("embed.weight")));
    // A new notice is laid out invisibly first, then drawn.
    h.run_steps(2);
    h.get_by_label("copied 4 names");
    // Arrow keys move the selection: from layers.0.norm down to packed.
    h.key_press(egui::Key::ArrowDown);
    h.run_steps(2);
    h.get_by_label("1 selected");
    assert!(
        h.query_all_by_label("packed").count() >= 2,
        "packed is in the tensor view"
    );
}

/// Ctrl+Tab and Ctrl+Shift+Tab switch tabs, Ctrl+W closes one, Escape
/// clears the filter and then the selection, F5 opens the file again (a
/// file that changed on disk shows its new tensors), and View ▸ Theme
/// switches the colours.
#[test]
fn keyboard_shortcuts_and_the_theme() {
    use tensorscope::dtype::Dtype;
    use tensorscope::format::write::{TensorSource, write_file};
    use tensorscope::jobs::{CancelToken, Progress};
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(dir.path(), "a.safetensors", &small_model());
    let b = dir.path().join("b.safetensors");
    let data = [0u8; 16];
    let one = |name: &str| TensorSource {
        name: name.into(),
        dtype: Dtype::F32,
        shape: vec![4],
        data: &data,
    };
    write_file(
        &b,
        &[one("first")],
        None,
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("write");
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &a);
    open(&mut h, &b);
    let tab_title = |h: &App| {
        h.state()
            .title()
            .trim_end_matches(" — Tensorscope")
            .to_owned()
    };
    assert_eq!(tab_title(&h), "b.safetensors");
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Tab);
    h.run_steps(2);
    assert_eq!(tab_title(&h), "a.safetensors");
    h.key_press_modifiers(
        egui::Modifiers::COMMAND | egui::Modifiers::SHIFT,
        egui::Key::Tab,
    );
    h.run_steps(2);
    assert_eq!(tab_title(&h), "b.safetensors");
    // F5: b gains a tensor on disk, and shows it once opened again.
    write_file(
        &b,
        &[one("first"), one("second")],
        None,
        &CancelToken::new(),
        &Progress::new(),
    )
    .expect("write");
    h.key_press(egui::Key::F5);
    super::settle(&mut h);
    h.get_by_label("second");
    // Ctrl+W closes b; a is shown.
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::W);
    h.run_steps(2);
    assert_eq!(tab_title(&h), "a.safetensors");
    assert!(h.query_by_label("second").is_none());
    // Escape: first the filter, then the selection.
    h.get_by_label("layers.0.norm").click();
    h.run_steps(2);
    h.get_by_label("1 selected");
    let filter = h.get_by_role(Role::TextInput);
    filter.focus();
    filter.type_text("layers");
    h.run_steps(2);
    h.get_by_label("2 shown");
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    h.get_by_label("6 shown");
    h.get_by_label("1 selected");
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    assert!(h.query_by_label("1 selected").is_none());
    // Ctrl+F puts the cursor in the filter box.
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::F);
    h.run_steps(3);
    assert!(h.get_by_role(Role::TextInput).is_focused());
    // View ▸ Theme.
    h.get_by_label("View").click();
    h.run_steps(2);
    h.get_by_label("Light").click();
    h.run_steps(2);
    assert_eq!(h.ctx.theme(), egui::Theme::Light);
    assert_eq!(
        h.state().state().theme,
        tensorscope::gui::ThemeChoice::Light
    );
    h.get_by_label("View").click();
    h.run_steps(2);
    h.get_by_label("Dark").click();
    h.run_steps(2);
    assert_eq!(h.ctx.theme(), egui::Theme::Dark);
}

/// In the tree, numbered layers fold into one pattern line; open, it shows
/// the per-layer template and the one layer that differs, which a click
/// selects; the layers themselves are still there to open.
#[test]
fn numbered_layers_fold_into_a_pattern_with_the_odd_layer_highlighted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = crate::fixtures::llama_like(dir.path(), 6, Some(3));
    let mut h = harness(
        State {
            tree_view: true,
            ..State::default()
        },
        no_dialog(),
    );
    open(&mut h, &path);
    h.get_by_label("⏵ model").click();
    h.run_steps(2);
    h.get_by_label("⏵ layers.[0-5]").click();
    h.run_steps(2);
    h.get_by_label("6 × 9 tensors");
    h.get_by_label("1 layer differs");
    // The template: each role once, with the dtype most layers have.
    assert_eq!(h.query_all_by_label("template").count(), 9);
    h.get_by_label("self_attn.q_proj.weight");
    h.get_by_label("mlp.down_proj.weight");
    // The odd layer, highlighted; a click selects its tensor.
    h.get_by_label("⚠ layer 3: mlp.down_proj.weight is F16, not F32")
        .click();
    h.run_steps(2);
    super::settle(&mut h);
    h.get_by_label("1 selected");
    assert!(
        h.query_all_by_label("model.layers.3.mlp.down_proj.weight")
            .count()
            >= 1
    );
    // The layers are listed under the template, to open one by one.
    h.get_by_label("⏵ 4").click();
    h.run_steps(2);
    h.get_by_label("⏵ mlp").click();
    h.run_steps(2);
    h.get_by_label("⏵ gate_proj");
}
