//! The tensor view (statistics, histograms, values, heatmap, a whole-file
//! scan) and the diff view of two files.

use egui_kittest::kittest::Queryable;
use tensorscope::gui::model::Column;
use tensorscope::gui::{Command, State};

use super::{file_menu, harness, no_dialog, open, settle, shows_a_checkpoint, table_order};

#[test]
fn tensor_view_stats_histograms_values_heatmap_and_scan() {
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    h.get_by_label("Open demo checkpoint").click();
    settle(&mut h);
    // Select the FP8 weight with per-row scales: a quantized weight, whose
    // row and view show its true values (statistics computed by a job).
    h.get_by_label("model.layers.0.mlp.up_proj.weight").click();
    settle(&mut h);
    assert!(h.query_all_by_label("FP8 per-channel").count() >= 2);
    h.get_by_label_contains("Statistics of the dequantized values");
    h.get_by_label("count");
    // The count (128 × 64) shows in the table, the facts and the statistics.
    assert!(h.query_all_by_label("8192").count() >= 3);
    // Its stored FP8 part, opened from the parts list, shows as stored.
    h.get_by_label_contains("Quantization: 2 parts").click();
    h.run_steps(2);
    h.get_by_label("Open weight").click();
    settle(&mut h);
    h.get_by_label("⏴ Back to the quantized weight");
    h.get_by_label("count");
    h.get_by_label("mean");
    h.get_by_label("beyond 6σ");
    h.get_by_label("max|x| / σ");
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
    // Sort by NaN/Inf. Its header starts under the side panel at this
    // window size (the dtype column is wide enough for the quantized
    // weights' scheme names), so the sort is asked for as its click would.
    h.get_by_label("NaN/Inf");
    h.state_mut().send(Command::SortBy(Column::NonFinite));
    h.run_steps(2);
    h.get_by_label("NaN/Inf ⏶");
    h.state_mut().send(Command::SortBy(Column::NonFinite));
    h.run_steps(2);
    h.get_by_label("NaN/Inf ⏷");
    // The scan also counts values beyond 6σ and gives max|x| / σ.
    h.get_by_label(">6σ");
    h.get_by_label("max|x|/σ");
    h.state_mut().send(Command::SortBy(Column::Outliers));
    h.run_steps(2);
    h.get_by_label(">6σ ⏶");
    h.state_mut().send(Command::SortBy(Column::NonFinite));
    h.run_steps(2);
    h.state_mut().send(Command::SortBy(Column::NonFinite));
    h.run_steps(2);
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

/// A file cut short after it was opened: the window stays alive, and the
/// statistics, the value grid and the scan each show the change where their
/// result would be, never zeros passing for values.
#[test]
fn a_file_cut_short_shows_the_change_where_results_would_be() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n: u64 = 1 << 16;
    let header = format!(
        r#"{{"a":{{"dtype":"F32","shape":[{n}],"data_offsets":[0,{}]}},"b":{{"dtype":"F32","shape":[{n}],"data_offsets":[{},{}]}}}}"#,
        4 * n,
        4 * n,
        8 * n
    );
    let bytes = crate::fixtures::with_header(&header, usize::try_from(8 * n).expect("small"));
    let start = bytes.len() as u64 - 8 * n;
    let p = crate::fixtures::write(dir.path(), "cut.safetensors", &bytes);
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &p);
    assert!(shows_a_checkpoint(&h));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .expect("open")
        .set_len(start + 4096)
        .expect("truncate");
    // Statistics of a tensor past the new end.
    h.get_by_label("b").click();
    settle(&mut h);
    h.get_by_label_contains("changed while being read");
    // The value grid reads the map as it draws: the first read finds the
    // file short, and the grid then says so instead of showing zeros.
    h.get_by_label("Values").click();
    h.run_steps(3);
    h.get_by_label_contains("these values are not its values");
    // The whole-file scan.
    h.get_by_label("Statistics").click();
    h.run_steps(2);
    h.get_by_label("Scan whole file").click();
    settle(&mut h);
    assert!(
        h.query_all_by_label_contains("changed while being read")
            .count()
            >= 1
    );
}

/// The heatmap says which element is under the cursor; a drag zooms into
/// the region, computed again at its own scale, and back.
#[test]
fn the_heatmap_zooms_into_a_dragged_region() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = crate::fixtures::llama_like(dir.path(), 2, None);
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &path);
    h.get_by_label("model.layers.0.mlp.gate_proj.weight")
        .click();
    h.run_steps(2);
    h.get_by_label("Heatmap").click();
    settle(&mut h);
    h.get_by_label("32 × 16 elements shown as 32 × 16 cells");
    let rect = h.get_by_label("heatmap image").rect();
    let at = |fx: f32, fy: f32| {
        egui::pos2(
            rect.left() + rect.width() * fx,
            rect.top() + rect.height() * fy,
        )
    };
    // Rows 8..16 and columns 4..8 of the 32 x 16 elements.
    let (from, to) = (at(0.26, 0.26), at(0.49, 0.49));
    h.hover_at(from);
    h.run_steps(1);
    h.drag_at(from);
    h.run_steps(1);
    for k in 1..=4 {
        let t = k as f32 / 4.0;
        h.hover_at(from + (to - from) * t);
        h.run_steps(1);
    }
    h.drop_at(to);
    settle(&mut h);
    h.run_steps(2);
    h.get_by_label("8 × 4 elements shown as 8 × 4 cells");
    h.get_by_label("from row 8, column 4");
    h.get_by_label("Whole tensor").click();
    settle(&mut h);
    h.run_steps(2);
    h.get_by_label("32 × 16 elements shown as 32 × 16 cells");
}

/// The diff's per-layer chart: a line per role for the chosen measure of
/// change; a click on the one layer that changed opens its pair.
#[test]
fn the_diff_per_layer_chart_opens_the_pair_clicked() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let a = crate::fixtures::llama_like(da.path(), 4, None);
    // B rounds layer 2's down_proj to F16: the only change.
    let b = crate::fixtures::llama_like(db.path(), 4, Some(2));
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &a);
    h.state_mut().send(Command::Compare(b));
    settle(&mut h);
    h.get_by_label("Per layer:");
    h.get_by_value("relative change |a−b| / |a|").click();
    h.run_steps(2);
    h.get_by_label("max |a−b|").click();
    h.run_steps(2);
    let rect = h.get_by_label("per-layer chart").rect();
    // The spike: layer 2 of 0..3, at the top of the chart.
    let mut opened = false;
    'sweep: for dy in (4..60).step_by(5) {
        for k in 0..24 {
            let x = rect.left() + rect.width() * (0.5 + (k as f32 - 12.0) * 0.02);
            let pos = egui::pos2(x, rect.top() + dy as f32);
            super::click_at(&mut h, pos);
            if h.query_by_label("Δ = A − B").is_some() {
                opened = true;
                break 'sweep;
            }
        }
    }
    assert!(opened, "a click on the spike opens its pair");
    settle(&mut h);
    assert!(
        h.query_all_by_label_contains("model.layers.2.mlp.down_proj.weight")
            .count()
            >= 1
    );
}
