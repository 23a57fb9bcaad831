//! A remote checkpoint in the explorer: *Open URL…*, the badge, the value
//! grid's page fetched alone, the scan that asks before it downloads.

use std::sync::OnceLock;

use egui_kittest::kittest::{NodeT as _, Queryable};
use tensorscope::gui::State;

use super::{file_menu, harness, no_dialog, set_text, settle, shows_a_checkpoint};
use crate::remote::server::Server;

/// The unit the cache records as held (src/source/remote/cache.rs).
const BLOCK: u64 = 64 << 10;

/// The process's remote settings, with a cache folder of the tests' own.
fn configured() {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = CACHE.get_or_init(|| tempfile::tempdir().expect("tempdir"));
    let mut settings = tensorscope::source::remote::Settings::from_env();
    settings.cache_dir = Some(dir.path().to_path_buf());
    settings.hf_token = None;
    // Another test of this binary may have made the client already; then
    // its settings (also a folder of its own) stand.
    let _ = tensorscope::source::remote::configure(settings);
}

#[test]
fn a_url_opens_and_its_values_come_page_by_page() {
    configured();
    let n = 3_000_000usize;
    let file = crate::remote::model(&[("big.weight", n), ("small.bias", 16)], 9);
    let s = Server::start();
    s.file("/ui/m.safetensors", file.clone());
    let url = s.url("/ui/m.safetensors");
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    file_menu(&mut h, "Open URL…");
    settle(&mut h);
    h.get_by_label_contains("on a web server, or a Hugging Face Hub repository");
    set_text(&h.get_by_role(egui::accesskit::Role::TextInput), &url);
    h.run_steps(2);
    h.get_by_label("Open").click();
    settle(&mut h);
    assert!(shows_a_checkpoint(&h), "the remote file opened");
    h.get_by_label_contains("🌐");
    let after_open = s.body_bytes();
    assert!(
        after_open <= 64 * 1024,
        "opening fetched {after_open} bytes"
    );
    // With the value grid shown, a 12 MB tensor's page costs a block or
    // two, not the tensor.
    h.get_by_label("small.bias").click();
    settle(&mut h);
    h.get_by_label("Values").click();
    settle(&mut h);
    h.get_by_label("big.weight").click();
    settle(&mut h);
    // Its first page lies in the bytes read with the header; element
    // 1,500,160's page lies further on, and is fetched alone.
    let before = s.body_bytes();
    let k = 1_500_160usize; // the first row of its page
    let jump = h
        .query_all_by_role(egui::accesskit::Role::TextInput)
        .find(|n| n.accesskit_node().placeholder() == Some("index or i, j, …"))
        .expect("the jump box");
    set_text(&jump, &k.to_string());
    h.run_steps(1);
    h.get_by_label("Go").click();
    settle(&mut h);
    h.run_steps(2);
    assert!(h.query_by_label_contains("Fetching this page").is_none());
    let for_page = s.body_bytes() - before;
    assert!(
        for_page > 0 && for_page <= 128 << 10,
        "the page fetched {for_page} bytes"
    );
    let data = &file[file.len() - 4 * (n + 16)..];
    let value = f32::from_le_bytes(data[4 * k..][..4].try_into().expect("4 bytes"));
    let shown = tensorscope::text::fmt_value(f64::from(value));
    assert!(
        h.query_all_by_label_contains(&shown).count() > 0,
        "element {k} ({shown}) is shown"
    );
    // A scan says what it will download and waits to be told.
    // (With no tensor selected, so that no statistics job fetches more.)
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    h.get_by_label("Scan whole file").click();
    h.run_steps(2);
    // The 64 KiB blocks of the page and of small.bias's statistics are
    // cached; a scan fetches every other block of the tensors.
    let start = file.len() as u64 - 4 * (n as u64 + 16);
    let len = file.len() as u64;
    let page = start + 4 * k as u64..start + 4 * (k as u64 + 256);
    let bias = start + 4 * n as u64..len;
    let held = |b: u64| {
        [&page, &bias]
            .iter()
            .any(|r| b * BLOCK < r.end && r.start < (b + 1) * BLOCK)
    };
    let rest: u64 = (start / BLOCK..len.div_ceil(BLOCK))
        .filter(|&b| !held(b))
        .map(|b| ((b + 1) * BLOCK).min(len) - b * BLOCK)
        .sum();
    h.get_by_label_contains(&format!(
        "Scanning downloads {} from the server",
        tensorscope::text::human_bytes(rest)
    ));
    h.get_by_label("Download and scan").click();
    settle(&mut h);
    h.get_by_label("no NaN/Inf");
    assert!(h.query_by_label_contains("Scanning downloads").is_none());
    // Compared with another remote copy, from the same window.
    s.file("/ui/copy.safetensors", file.clone());
    file_menu(&mut h, "Open URL…");
    settle(&mut h);
    let field = h
        .query_all_by_role(egui::accesskit::Role::TextInput)
        .find(|n| {
            n.accesskit_node()
                .value()
                .is_some_and(|v| v.starts_with("http://"))
        })
        .expect("the URL field, with the URL opened last");
    set_text(&field, &s.url("/ui/copy.safetensors"));
    h.run_steps(2);
    h.get_by_label("Compare with the open tab").click();
    settle(&mut h);
    h.get_by_label("Comparing with");
    h.get_by_label_contains("2 identical");
}

#[test]
fn urls_open_as_a_training_run() {
    configured();
    let s = Server::start();
    let steps = crate::series::run();
    let mut urls = Vec::new();
    for (k, ck) in steps.iter().enumerate() {
        s.file(
            &format!("/run/ckpt-{k}/model.safetensors"),
            crate::series::safetensors_bytes(ck),
        );
        s.file(
            &format!("/run/ckpt-{k}/trainer_state.json"),
            format!("{{\"global_step\": {}}}", 100 * (k + 1)).into_bytes(),
        );
        // Given out of order: the run sorts them by step.
        urls.insert(0, s.url(&format!("/run/ckpt-{k}/model.safetensors")));
    }
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    file_menu(&mut h, "Open URL…");
    settle(&mut h);
    set_text(
        &h.get_by_role(egui::accesskit::Role::TextInput),
        &urls.join(" "),
    );
    h.run_steps(2);
    h.get_by_label("several: a training run");
    h.get_by_label("Open as a training run").click();
    settle(&mut h);
    h.get_by_label(&format!(
        "Training run: {} checkpoints, steps 100 … {}",
        steps.len(),
        100 * steps.len()
    ));
    h.get_by_label("step 400: nonfinite (2 tensors)");
}
