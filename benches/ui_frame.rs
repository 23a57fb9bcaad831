//! CPU frame time of the explorer with a 100,000-tensor checkpoint, stepped
//! headless by egui_kittest while the table scrolls, sorts and filters.
//! Prints p50 and p95 (target: p95 under 16 ms).
//!
//! `cargo bench --bench ui_frame`

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use tensorscope::dtype::Dtype;
use tensorscope::format::write::{TensorSource, write_file};
use tensorscope::gui::Command;
use tensorscope::gui::dialog::{DialogResult, FileDialog};
use tensorscope::gui::{State, TensorscopeApp};
use tensorscope::jobs::{CancelToken, Progress};

struct NoDialog(Mutex<()>);

impl FileDialog for NoDialog {
    fn available(&self) -> bool {
        false
    }
    fn pick_files(&self) -> DialogResult {
        let _guard = self.0.lock();
        DialogResult::Unavailable
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = [0u8; 4];
    let tensors: Vec<TensorSource<'_>> = (0..100_000)
        .map(|i| TensorSource {
            name: format!(
                "model.layers.{}.mlp.experts.{}.w{}",
                i / 1000,
                (i / 10) % 100,
                i % 10
            ),
            dtype: if i % 3 == 0 { Dtype::F16 } else { Dtype::BF16 },
            shape: vec![2],
            data: &data,
        })
        .collect();
    let path = dir.path().join("many.safetensors");
    write_file(&path, &tensors, None, &CancelToken::new(), &Progress::new()).expect("write");

    let app = TensorscopeApp::new(State::default(), Arc::new(NoDialog(Mutex::new(()))));
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut TensorscopeApp| app.frame_ui(ui), app);
    h.state_mut().send(Command::Open(path.clone()));
    let deadline = Instant::now() + Duration::from_mins(2);
    while !h.state().is_idle() {
        h.step();
        assert!(Instant::now() < deadline, "open did not finish");
        std::thread::sleep(Duration::from_millis(2));
    }
    h.run_steps(5);

    let mut phases: Vec<(&str, Vec<Duration>)> = Vec::new();
    let timed = |h: &mut Harness<'static, TensorscopeApp>, times: &mut Vec<Duration>| {
        let t = Instant::now();
        h.step();
        times.push(t.elapsed());
    };
    let wheel = |h: &mut Harness<'static, TensorscopeApp>| {
        h.event(egui::Event::MouseWheel {
            unit: egui::MouseWheelUnit::Line,
            delta: egui::vec2(0.0, -40.0),
            modifiers: egui::Modifiers::NONE,
            phase: egui::TouchPhase::Move,
            source: egui::MouseWheelSource::Wheel,
        });
    };
    // Scrolling through the table (the pointer over it), the overview
    // beside it.
    h.event(egui::Event::PointerMoved(egui::pos2(300.0, 400.0)));
    h.step();
    let mut t = Vec::new();
    for _ in 0..200 {
        wheel(&mut h);
        timed(&mut h, &mut t);
    }
    phases.push(("scrolling the table, overview open", t));
    // Selecting rows with the keyboard.
    let mut t = Vec::new();
    for _ in 0..100 {
        h.key_press(egui::Key::ArrowDown);
        timed(&mut h, &mut t);
    }
    phases.push(("moving the selection", t));
    // Idle frames with a selection and the tensor view open.
    let mut t = Vec::new();
    for _ in 0..100 {
        timed(&mut h, &mut t);
    }
    phases.push(("idle, tensor view", t));
    // The tree, its numbered layers folded into a pattern, opened.
    let one_off = Instant::now();
    h.state_mut().send(Command::SetTreeView(true));
    h.step();
    h.state_mut().send(Command::ToggleGroup("model".into()));
    h.step();
    h.state_mut()
        .send(Command::ToggleGroup(tensorscope::gui::model::Pattern::key(
            "model.layers",
        )));
    h.step();
    let tree_build = one_off.elapsed();
    let mut t = Vec::new();
    for _ in 0..200 {
        wheel(&mut h);
        timed(&mut h, &mut t);
    }
    phases.push(("scrolling the pattern tree (template, layers)", t));
    // After a scan: the overview with its per-layer chart.
    h.state_mut().send(Command::SetTreeView(false));
    h.state_mut().send(Command::ClearSelection);
    h.state_mut().send(Command::StartScan);
    let deadline = Instant::now() + Duration::from_mins(5);
    h.step();
    while !h.state().is_idle() {
        h.step();
        assert!(Instant::now() < deadline, "scan did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
    h.run_steps(3);
    let mut t = Vec::new();
    for _ in 0..100 {
        timed(&mut h, &mut t);
    }
    phases.push(("idle, overview with the per-layer chart", t));

    println!("100,000-tensor file, window 1400x900; CPU frame times (target p95 < 16 ms)");
    println!("| frames | phase | p50 ms | p95 ms | max ms |");
    println!("|---|---|---|---|---|");
    let mut all = Vec::new();
    for (name, times) in &phases {
        let mut sorted = times.clone();
        sorted.sort();
        println!(
            "| {} | {name} | {:.2} | {:.2} | {:.2} |",
            sorted.len(),
            percentile(&sorted, 0.50).as_secs_f64() * 1e3,
            percentile(&sorted, 0.95).as_secs_f64() * 1e3,
            sorted.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
        );
        all.extend(sorted);
    }
    all.sort();
    println!(
        "| {} | all | {:.2} | {:.2} | {:.2} |",
        all.len(),
        percentile(&all, 0.50).as_secs_f64() * 1e3,
        percentile(&all, 0.95).as_secs_f64() * 1e3,
        all.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
    );
    println!(
        "frames that build and open the pattern tree (one-off, 3 frames): {:.2} ms",
        tree_build.as_secs_f64() * 1e3
    );

    // Sorting and filtering are one-off costs on a click or keystroke.
    let t = Instant::now();
    h.state_mut()
        .send(Command::SortBy(tensorscope::gui::model::Column::Name));
    h.step();
    println!(
        "frame with a natural-order sort of 100,000 names: {:.2} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    h.state_mut().send(Command::SetFilter("experts.7".into()));
    h.step();
    println!(
        "frame with a substring filter over 100,000 names: {:.2} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
}
