//! A quantized checkpoint in the explorer: one row per quantized weight
//! with its scheme, a view of its true values (statistics, codes and
//! scales, values with codes, heatmap), its parts openable as stored, and
//! the diff against the original by decoded values.

use egui_kittest::kittest::Queryable;
use tensorscope::gui::{Command, State};

use super::{harness, no_dialog, open, settle};
use crate::quant_oracle::sample;

#[test]
fn a_quantized_weight_is_one_row_and_a_view_of_its_values() {
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    open(
        &mut h,
        &sample("gptq_w4_g128_sym_actorder_v1").join("model.safetensors"),
    );
    // Two quantized weights and the plain lm_head: the parts are folded.
    // The label is on the two rows and on the overview's bar of the type.
    assert_eq!(h.query_all_by_label("GPTQ int4 g128 act-order").count(), 3);
    h.get_by_label("Per quantized type");
    assert!(
        h.query_by_label("model.layers.0.mlp.down_proj.qweight")
            .is_none()
    );
    h.get_by_label("3 shown");
    // The footer and the overview say both counts, each labelled: the
    // model's logical parameters and the (packed) values stored.
    h.get_by_label_contains("stored values) ·");
    h.get_by_label_contains("logical parameters;");
    assert!(h.query_all_by_label_contains(" stored · ").count() >= 1);
    // The quantized weights alone, then the plain tensors alone.
    h.get_by_value("Quantized and plain").click();
    h.run_steps(2);
    h.get_by_label("Quantized only").click();
    settle(&mut h);
    h.get_by_label("2 shown");
    assert!(h.query_by_label("lm_head.weight").is_none());
    h.get_by_value("Quantized only").click();
    h.run_steps(2);
    h.get_by_label("Plain only").click();
    settle(&mut h);
    h.get_by_label("1 shown");
    h.get_by_value("Plain only").click();
    h.run_steps(2);
    h.get_by_label("Quantized and plain").click();
    settle(&mut h);
    // Scan whole file: a quantized weight's row gets its values' figures,
    // named by its logical name.
    h.get_by_label("Scan whole file").click();
    settle(&mut h);
    h.get_by_label_contains("largest |x| 1.1728");
    h.get_by_label_contains("in model.layers.0.mlp.down_proj.weight");
    assert!(h.query_by_label_contains("qweight").is_none());
    assert!(h.query_all_by_label_contains("-1.1728").count() >= 2);
    // In the tree, a group counts its quantized weights once and all of
    // their parts' bytes (18,048 + 70,144 bytes under `model`).
    h.get_by_label("Tree").click();
    settle(&mut h);
    h.get_by_label("(2)");
    h.get_by_label("86.1 KiB");
    h.get_by_label("Tree").click();
    settle(&mut h);
    // File info names the method and the config.
    h.get_by_label("File info").click();
    h.run_steps(2);
    h.get_by_label("gptq");
    h.get_by_label_contains("2 (2 decoded, 0 recognized, 0 inconsistent)");
    h.get_by_label("Tensor").click();
    h.run_steps(2);
    h.get_by_label("model.layers.0.mlp.down_proj.weight")
        .click();
    settle(&mut h);
    h.get_by_label_contains("Statistics of the dequantized values");
    h.get_by_label("stored-minus-one");
    // The count of a [128, 256] weight, in the table, facts and statistics.
    assert!(h.query_all_by_label("32768").count() >= 3);
    h.get_by_label("Codes & scales").click();
    settle(&mut h);
    h.get_by_label("16 of 16 codes used; 1.022% of the elements at the extreme codes");
    h.get_by_label_contains("256 scales in model.layers.0.mlp.down_proj.scales");
    h.get_by_label("Values").click();
    h.run_steps(2);
    h.get_by_label("code");
    h.get_by_label("Heatmap").click();
    settle(&mut h);
    h.get_by_label_contains("elements shown as");
    // A part, as stored: packed I32 words, said to be no values.
    h.get_by_label_contains("Quantization: 4 parts").click();
    h.run_steps(2);
    h.get_by_label("Open qweight").click();
    settle(&mut h);
    h.get_by_label("⏴ Back to the quantized weight");
    h.get_by_label_contains("its packed codes, not the weight's values");
    h.get_by_label("⏴ Back to the quantized weight").click();
    h.run_steps(2);
    h.get_by_label("Codes & scales");
    h.get_by_label("Statistics").click();
    h.run_steps(2);
    h.get_by_label_contains("Statistics of the dequantized values");
}

#[test]
fn the_diff_against_the_original_compares_decoded_values() {
    let mut h = harness(State::default(), no_dialog());
    h.run_steps(1);
    let dir = sample("awq_gemm_w4_g128");
    open(&mut h, &dir.join("original.safetensors"));
    h.state_mut()
        .send(Command::Compare(dir.join("model.safetensors")));
    settle(&mut h);
    h.get_by_label_contains("2 quantized weights compared by their decoded values, SNR");
    // Both rows (and the column header).
    assert!(h.query_all_by_label("changed").count() >= 3);
    h.get_by_label("model.layers.0.self_attn.q_proj.weight")
        .click();
    settle(&mut h);
    // The pair's detail is of the decoded values: both histograms, the
    // error's histogram and its map.
    h.get_by_label("Histograms of A and B");
    h.get_by_label_contains("|Δ| map");
}
