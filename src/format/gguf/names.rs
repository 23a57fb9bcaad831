//! llama.cpp's tensor names and Hugging Face's (GGUF.md, "Names": gguf-py's
//! `tensor_mapping.py` for Llama, reversed), and the attention Q/K row
//! permutation `convert_hf_to_gguf.py` applies ("The Q/K permutation").

use super::open::GgufParts;

/// The architectures whose names and permutation are mapped.
pub const MAPPED_ARCHITECTURES: &[&str] = &["llama"];

/// Per-layer names: GGUF's `blk.N.<this>` is Hugging Face's
/// `model.layers.N.<that>`.
const LAYER: [(&str, &str); 9] = [
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
    ("attn_norm", "input_layernorm"),
    ("ffn_norm", "post_attention_layernorm"),
];

/// Model-wide names.
const GLOBAL: [(&str, &str); 3] = [
    ("token_embd", "model.embed_tokens"),
    ("output_norm", "model.norm"),
    ("output", "lm_head"),
];

/// The Hugging Face name of GGUF tensor `name` (`.weight` and `.bias`
/// alike); `None` for a name with no entry.
pub fn hf_name(name: &str) -> Option<String> {
    let (module, kind) = name.rsplit_once('.')?;
    if kind != "weight" && kind != "bias" {
        return None;
    }
    if let Some((_, hf)) = GLOBAL.iter().find(|(g, _)| *g == module) {
        return Some(format!("{hf}.{kind}"));
    }
    let rest = module.strip_prefix("blk.")?;
    let (layer, part) = rest.split_once('.')?;
    if layer.is_empty() || !layer.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (_, hf) = LAYER.iter().find(|(g, _)| *g == part)?;
    Some(format!("model.layers.{layer}.{hf}.{kind}"))
}

/// True for a tensor `convert_hf_to_gguf.py` permutes (attention Q and K,
/// weights and biases).
pub fn is_permuted(name: &str) -> bool {
    name.rsplit_once('.')
        .and_then(|(module, _)| module.strip_prefix("blk."))
        .and_then(|m| m.split_once('.'))
        .is_some_and(|(_, part)| part == "attn_q" || part == "attn_k")
}

/// The head count `convert_hf_to_gguf.py` permuted tensor `name`'s rows
/// by: `llama.attention.head_count` for `attn_q`, `head_count_kv` (else
/// `head_count`) for `attn_k`; `None` for any other tensor.
pub fn permuted_heads(parts: &GgufParts, name: &str) -> Option<u64> {
    let arch = parts.architecture()?;
    let module = name.rsplit_once('.')?.0;
    let part = module.strip_prefix("blk.")?.split_once('.')?.1;
    let heads = parts
        .unsigned(&format!("{arch}.attention.head_count"))
        .filter(|&h| h > 0)?;
    match part {
        "attn_q" => Some(heads),
        "attn_k" => Some(
            parts
                .unsigned(&format!("{arch}.attention.head_count_kv"))
                .unwrap_or(heads),
        ),
        _ => None,
    }
}

/// The GGUF row that un-permuted row `r` of a tensor of `rows` rows comes
/// from, for `heads` heads: the inverse of `permute` is
/// `W.reshape(n, R/n/2, 2, C).swapaxes(1, 2)`, so output row
/// `(i, b, j)` of shape `(n, 2, R/n/2)` is stored row `(i, j, b)`.
pub fn source_row(r: u64, rows: u64, heads: u64) -> u64 {
    let half = rows / heads.max(1) / 2;
    if half == 0 {
        return r;
    }
    let (i, within) = (r / (2 * half), r % (2 * half));
    let (b, j) = (within / half, within % half);
    i * 2 * half + j * 2 + b
}

/// Why rows cannot be un-permuted by `heads` (not a whole number of head
/// pairs), if so.
pub fn check_rows(name: &str, rows: u64, heads: u64) -> Result<(), String> {
    if heads == 0 || rows == 0 || !rows.is_multiple_of(2 * heads) {
        return Err(format!(
            "tensor {name:?}: {rows} rows are not a whole number of row pairs for {heads} heads, so its Q/K permutation cannot be undone"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_as_the_table_says() {
        assert_eq!(
            hf_name("token_embd.weight").as_deref(),
            Some("model.embed_tokens.weight")
        );
        assert_eq!(hf_name("output.weight").as_deref(), Some("lm_head.weight"));
        assert_eq!(
            hf_name("blk.12.ffn_norm.weight").as_deref(),
            Some("model.layers.12.post_attention_layernorm.weight")
        );
        assert_eq!(
            hf_name("blk.0.attn_q.bias").as_deref(),
            Some("model.layers.0.self_attn.q_proj.bias")
        );
        assert_eq!(hf_name("blk.x.attn_q.weight"), None);
        assert_eq!(hf_name("rope_freqs.weight"), None);
        assert_eq!(hf_name("blk.0.attn_q"), None);
    }

    #[test]
    fn source_rows_undo_the_permutation() {
        // permute(W, n): W.reshape(n, 2, h, C).swapaxes(1, 2): stored row
        // (i, j, b) holds original row (i, b, j).
        let (rows, heads) = (24u64, 3u64);
        let half = rows / heads / 2;
        let permuted: Vec<u64> = (0..rows)
            .map(|s| {
                let (i, w) = (s / (2 * half), s % (2 * half));
                let (j, b) = (w / 2, w % 2);
                i * 2 * half + b * half + j
            })
            .collect();
        for r in 0..rows {
            assert_eq!(permuted[source_row(r, rows, heads) as usize], r);
        }
    }
}
