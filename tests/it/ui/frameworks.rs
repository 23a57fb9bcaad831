//! The other frameworks' checkpoints in the explorer: an ONNX model whose
//! data is in a file beside it (a tensor's location shown, its statistics
//! read from that file) and a TensorFlow checkpoint whose variables were
//! cut into slices (a sliced tensor's statistics and values, assembled by
//! a job).

use egui_kittest::kittest::Queryable;
use tensorscope::gui::State;

use super::{harness, no_dialog, open, settle};

fn data(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

#[test]
fn an_onnx_model_with_external_data_shows_where_each_tensor_is() {
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &data("onnx/external_one.onnx"));
    h.get_by_label_contains("ONNX file · its data in 1 file beside it");
    h.get_by_label("weight").click();
    settle(&mut h);
    assert!(h.query_all_by_label("external_one.onnx_data").count() >= 1);
    h.get_by_label("count");
    // Its statistics, read from the file beside the model: float32's
    // largest value, one NaN and an infinity of each sign among 12.
    assert!(h.query_all_by_label("3.402823e38").count() >= 1);
    h.get_by_label("1 / 1");
}

#[test]
fn a_sliced_tensorflow_variable_is_assembled_for_its_views() {
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &data("tensorflow/tf_sharded/ckpt-1.index"));
    h.get_by_label_contains("TensorFlow file");
    h.get_by_label("model/big/.ATTRIBUTES/VARIABLE_VALUE")
        .click();
    settle(&mut h);
    h.get_by_label("count");
    assert!(h.query_all_by_label("60").count() >= 2);
    h.get_by_label("Values").click();
    settle(&mut h);
    h.run_steps(2);
    // The first row as TensorFlow reads it, across the slices' seams.
    h.get_by_label("[0, 0]");
    assert!(h.query_all_by_label_contains("-1.5").count() >= 1);
}

#[test]
fn a_distributed_checkpoint_shows_each_tensor_s_chunks_and_their_ranks() {
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &data("dcp/fsdp2_2rank"));
    h.get_by_label("model.embed.weight").click();
    settle(&mut h);
    // The global [7, 8] embedding: rank 0's four rows, rank 1's three.
    h.get_by_label("chunks (2)");
    h.get_by_label("at [0, 0] size [4, 8]");
    h.get_by_label("at [4, 0] size [3, 8]");
    h.get_by_label("__1_0.distcp");
    // Its statistics, over the reassembled tensor.
    h.get_by_label("count");
    assert!(h.query_all_by_label("56").count() >= 2);
}

#[test]
fn a_deepspeed_zero3_run_opens_through_latest_as_its_fp32_weights() {
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &data("deepspeed/zero3"));
    h.get_by_label("embed.weight").click();
    settle(&mut h);
    // The [16, 8] embedding, gathered from both ranks' flat partitions.
    assert!(h.query_all_by_label("[16, 8]").count() >= 1);
    h.get_by_label("count");
    assert!(h.query_all_by_label("128").count() >= 2);
}

#[test]
fn every_scan_finding_is_a_banner_above_the_table_and_in_the_overview() {
    // A Keras model with a Lambda layer, a GGUF whose chat template reaches
    // Python's internals, and an `.npz` with a member that escapes its
    // folder: each opens, and says what would run or land where.
    for (file, says) in [
        (
            "scan/keras/lambda.keras",
            "is a Lambda layer: its code runs when the model is loaded [keras-lambda]",
        ),
        (
            "scan/gguf/ssti_cycler.gguf",
            "reaches Python internals (__globals__): rendering it can run code [gguf-chat-template]",
        ),
        (
            "scan/numpy/archive_path_dotdot.npz",
            "the member ../evil.npy has an absolute path or a '..' component",
        ),
    ] {
        let mut h = harness(State::default(), no_dialog());
        open(&mut h, &data(file));
        settle(&mut h);
        assert!(
            h.query_all_by_label_contains(says).count() >= 2,
            "{file}: the banner above the table and the overview's"
        );
    }
    // An ordinary template: no banner.
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &data("scan/gguf/llama3_template.gguf"));
    settle(&mut h);
    assert_eq!(h.query_all_by_label_contains("⚠").count(), 0);
}
