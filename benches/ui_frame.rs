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

    let mut times = Vec::new();
    let mut step = |h: &mut Harness<'static, TensorscopeApp>| {
        let t = Instant::now();
        h.step();
        times.push(t.elapsed());
    };
    // Scrolling through the table (the pointer over it).
    h.event(egui::Event::PointerMoved(egui::pos2(300.0, 400.0)));
    h.step();
    for _ in 0..200 {
        h.event(egui::Event::MouseWheel {
            unit: egui::MouseWheelUnit::Line,
            delta: egui::vec2(0.0, -40.0),
            modifiers: egui::Modifiers::NONE,
            phase: egui::TouchPhase::Move,
            source: egui::MouseWheelSource::Wheel,
        });
        step(&mut h);
    }
    // Selecting rows with the keyboard.
    for _ in 0..100 {
        h.key_press(egui::Key::ArrowDown);
        step(&mut h);
    }
    // Idle frames with a selection and the tensor view open.
    for _ in 0..100 {
        step(&mut h);
    }
    let mut sorted = times.clone();
    sorted.sort();
    println!(
        "frames: {} (100,000-tensor file, window 1400x900)",
        sorted.len()
    );
    println!(
        "p50 CPU frame time: {:.2} ms",
        percentile(&sorted, 0.50).as_secs_f64() * 1e3
    );
    println!(
        "p95 CPU frame time: {:.2} ms",
        percentile(&sorted, 0.95).as_secs_f64() * 1e3
    );
    println!(
        "max CPU frame time: {:.2} ms",
        sorted.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
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
