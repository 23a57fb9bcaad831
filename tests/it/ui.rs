//! UI flows driven headless with egui_kittest. Every harness is built by
//! [`harness`]; dialogs and drops are injected, never shown. The tests look
//! at what a user sees (labels, their order on screen) and act as a user
//! does (clicks, keys, typing); they send a [`Command`] only for what comes
//! from outside the window (a path given on the command line).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{By, Queryable};
use tensorscope::gui::dialog::{DialogResult, FileDialog};
use tensorscope::gui::{Command, State, TensorscopeApp};

use crate::fixtures::{small_model, with_header, write};

/// A dialog that returns what the test says.
pub struct ScriptedDialog {
    pub answer: Mutex<DialogResult>,
    pub available: bool,
}

impl FileDialog for ScriptedDialog {
    fn available(&self) -> bool {
        self.available
    }
    fn pick_files(&self) -> DialogResult {
        self.answer
            .lock()
            .map_or(DialogResult::Cancelled, |a| a.clone())
    }
}

type App = Harness<'static, TensorscopeApp>;

/// The one way tests build a harness around the app.
pub fn harness(state: State, dialog: Arc<dyn FileDialog>) -> App {
    let app = TensorscopeApp::new(state, dialog);
    Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut TensorscopeApp| app.frame_ui(ui), app)
}

fn no_dialog() -> Arc<dyn FileDialog> {
    Arc::new(ScriptedDialog {
        answer: Mutex::new(DialogResult::Cancelled),
        available: true,
    })
}

/// Steps until no job has run for a few frames (a click starts its job a
/// frame later), or fails the test after 60 s.
pub fn settle(h: &mut App) {
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut idle = 0;
    while idle < 4 {
        h.step();
        if h.state().is_idle() {
            idle += 1;
        } else {
            idle = 0;
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(Instant::now() < deadline, "jobs did not finish in time");
    }
}

/// Opens `path` as `tensorscope PATH` would.
fn open(h: &mut App, path: &Path) {
    h.state_mut().send(Command::Open(path.to_path_buf()));
    settle(h);
}

/// The tensor names the table shows, top to bottom: the labels among
/// `names` in the left half of the window (the table; the tensor view is on
/// the right), by their position on screen.
fn table_order(h: &App, names: &[&str]) -> Vec<String> {
    let mut shown: Vec<(f32, String)> = names
        .iter()
        .filter_map(|n| {
            let y = h
                .query_all_by_label(n)
                .map(|node| node.rect())
                .filter(|r| r.min.x < 700.0)
                .map(|r| r.min.y)
                .reduce(f32::min)?;
            Some((y, (*n).to_owned()))
        })
        .collect();
    shown.sort_by(|a, b| a.0.total_cmp(&b.0));
    shown.into_iter().map(|(_, n)| n).collect()
}

const SMALL_NAMES: [&str; 6] = [
    "embed.weight",
    "empty",
    "layers.0.attn.q",
    "layers.0.norm",
    "packed",
    "scale",
];

/// The text field whose hint (placeholder) is `hint`.
fn field_by_hint<'a>(h: &'a App, hint: &'a str) -> egui_kittest::Node<'a> {
    h.get(By::new().predicate(move |n| n.placeholder() == Some(hint)))
}

/// Replaces the text of a text field, as typing over it would.
fn set_text(node: &egui_kittest::Node<'_>, text: &str) {
    node.focus();
    node.set_text_value_accesskit(text);
}

/// True when a checkpoint is open in the active tab: its status line shows.
fn shows_a_checkpoint(h: &App) -> bool {
    h.query_by_label_contains("tensors ·").is_some()
}

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
    h.get_by_label_contains("\\u{202e}").click();
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
fn tensor_view_stats_histograms_values_heatmap_and_scan() {
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    h.get_by_label("Open demo checkpoint").click();
    settle(&mut h);
    // Select an FP8 tensor: statistics are computed by a job.
    h.get_by_label("model.layers.0.mlp.up_proj.weight").click();
    settle(&mut h);
    // The count (128 × 64) shows in the table, the facts and the statistics.
    h.get_by_label("count");
    assert!(h.query_all_by_label("8192").count() >= 3);
    h.get_by_label("mean");
    h.get_by_label("p50");
    // Each histogram draws.
    h.get_by_label("log2 |x|").click();
    h.run_steps(2);
    h.get_by_label("Per code").click();
    h.run_steps(2);
    h.get_by_label("log counts").click();
    h.run_steps(2);
    // The value grid shows raw codes.
    h.get_by_label("Values").click();
    h.run_steps(2);
    h.get_by_label("code");
    assert!(h.query_all_by_label_contains("0x").count() > 10);
    // The heatmap is computed by a job, then drawn.
    h.get_by_label("Heatmap").click();
    settle(&mut h);
    h.get_by_label_contains("elements shown as");
    // Scan the whole file: the table gains columns and the summary names
    // the layer norm that holds a NaN and an Inf.
    h.get_by_label("Scan whole file").click();
    settle(&mut h);
    h.get_by_label_contains("tensors with NaN/Inf");
    h.get_by_label("NaN/Inf").click();
    h.run_steps(2);
    h.get_by_label("NaN/Inf ⏶").click();
    h.run_steps(2);
    h.get_by_label("NaN/Inf ⏷");
    // The layer norm with the NaN and the Inf is now the first row.
    let norms = [
        "model.layers.0.input_layernorm.weight",
        "model.layers.1.input_layernorm.weight",
        "model.embed_tokens.weight",
    ];
    let order = table_order(&h, &norms);
    assert_eq!(
        order.first().map(String::as_str),
        Some("model.layers.1.input_layernorm.weight"),
        "{order:?}"
    );
}

#[test]
fn diff_view_compares_two_files() {
    use tensorscope::dtype::Dtype;
    use tensorscope::format::write::{TensorSource, write_file};
    use tensorscope::jobs::{CancelToken, Progress};
    let dir = tempfile::tempdir().expect("tempdir");
    let f32s = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let base: Vec<f32> = (0..64).map(|i| (i as f32 * 0.1).sin()).collect();
    let mut tuned = base.clone();
    tuned[5] += 0.5;
    let save = |name: &str, layer1: &[u8], extra: bool| {
        let mut t = vec![TensorSource {
            name: "model.layers.0.w".into(),
            dtype: Dtype::F32,
            shape: vec![8, 8],
            data: layer1,
        }];
        let same = f32s(&base);
        let same: &'static [u8] = Box::leak(same.into_boxed_slice());
        t.push(TensorSource {
            name: "model.layers.1.w".into(),
            dtype: Dtype::F32,
            shape: vec![8, 8],
            data: same,
        });
        if extra {
            t.push(TensorSource {
                name: "lm_head".into(),
                dtype: Dtype::F32,
                shape: vec![1],
                data: &same[..4],
            });
        }
        let p = dir.path().join(name);
        write_file(&p, &t, None, &CancelToken::new(), &Progress::new()).expect("write");
        p
    };
    let a = save("a.safetensors", &f32s(&base), false);
    let b = save("b.safetensors", &f32s(&tuned), true);
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &a);
    h.state_mut().send(Command::Compare(b));
    settle(&mut h);
    h.get_by_label_contains("1 changed");
    h.get_by_label_contains("1 only in B");
    h.get_by_label("Changed only").click();
    h.run_steps(2);
    h.get_by_label("model.layers.0.w").click();
    settle(&mut h);
    h.get_by_label("Δ = A − B");
    h.get_by_label_contains("|Δ| map");
    // Reloading A keeps the comparison and diffs again.
    file_menu(&mut h, "Reload");
    settle(&mut h);
    h.get_by_label("Comparing with");
    h.get_by_label_contains("1 changed");
    h.get_by_label("Close comparison").click();
    h.run_steps(2);
    assert!(h.query_by_label("Comparing with").is_none());
    assert!(shows_a_checkpoint(&h));
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

/// Clicks an entry of the File menu.
fn file_menu(h: &mut App, entry: &str) {
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label(entry).click();
    h.run_steps(2);
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
