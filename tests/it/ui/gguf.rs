//! GGUF files in the explorer: a quantized Llama opens with its
//! architecture read from its metadata, its weights per block type, its
//! block types as weights with
//! their values, its vocabulary paged in the metadata pane; compared with
//! the Hugging Face model it came from, every tensor meets its original
//! through llama.cpp's names and the quantization's error is shown.

use egui_kittest::kittest::Queryable;
use tensorscope::gui::{Command, State};

use super::{harness, no_dialog, open, set_text, settle};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gguf")
        .join(name)
}

#[test]
fn a_quantized_gguf_opens_with_its_architecture_values_and_vocabulary() {
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &fixture("llama_tiny_q4_0.gguf"));
    h.get_by_label("GGUF file");
    h.get_by_label("Architecture (GGUF metadata)");
    h.get_by_label_contains("layers: num_hidden_layers 2; the names number 2");
    h.get_by_label_contains("embedding: vocab_size × hidden_size = [300, 64]");
    // Beside the stored dtypes (the blocks are U8), each block type's
    // weights by their logical parameters.
    h.get_by_label("Per quantized type");
    h.get_by_label_contains("73.7K params · 40.5 KiB");
    h.get_by_label_contains("38.4K params · 39.8 KiB");
    // A Q4_0 weight: its decoded values' statistics, by a job.
    h.get_by_label("blk.0.attn_q.weight").click();
    settle(&mut h);
    h.get_by_label_contains("Statistics of the dequantized values");
    h.get_by_label("count");
    // The vocabulary, a page at a time.
    h.get_by_label("Metadata").click();
    h.run_steps(2);
    set_text(&h.get_by_label("Search:"), "ggml.tokens");
    h.run_steps(2);
    h.get_by_label("tokenizer.ggml.tokens");
    h.get_by_label_contains("ARRAY[STRING] of 300 elements");
    h.get_by_label_contains("\"<unk>\"");
    let next = h
        .query_all_by_label("▶")
        .last()
        .expect("the vocabulary's next page");
    next.click();
    h.run_steps(2);
    h.get_by_label_contains("100–199");
    // On to the last page, and back: each page read from where the last
    // one ended.
    let next = |h: &mut super::App| {
        h.query_all_by_label("▶").last().expect("next").click();
        h.run_steps(2);
    };
    next(&mut h);
    h.get_by_label_contains("200–299");
    h.get_by_label_contains("\"<0xFF>\"");
    h.query_all_by_label("◀").last().expect("back").click();
    h.run_steps(2);
    h.get_by_label_contains("100–199");
}

#[test]
fn compared_with_its_original_every_tensor_meets_its_hugging_face_name() {
    let mut h = harness(State::default(), no_dialog());
    open(&mut h, &fixture("llama_tiny_hf/model.safetensors"));
    h.state_mut()
        .send(Command::Compare(fixture("llama_tiny_q4_0.gguf")));
    settle(&mut h);
    h.get_by_label_contains("16 quantized weights compared by their decoded values, SNR");
    h.get_by_label("model.layers.0.self_attn.q_proj.weight")
        .click();
    settle(&mut h);
    h.get_by_label("Histograms of A and B");
    h.get_by_label_contains("|Δ| map");
}
