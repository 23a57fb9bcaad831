//! The architecture a checkpoint's `config.json` describes (read as hostile
//! input, like the quantization config beside it), and a check of the
//! tensors against it: the layers the names hold against
//! `num_hidden_layers`, the embedding's shape against the vocabulary and
//! hidden sizes, and, for decoders of the Llama family, the parameter
//! count the config's shapes give against the one the tensors hold.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::format::Checkpoint;

/// What `config.json` says about the model (each field `None` when the
/// config does not say, or says it in a type that does not fit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Architecture {
    /// The file read.
    pub path: PathBuf,
    /// `model_type`.
    pub model_type: Option<String>,
    /// `architectures` (the class names).
    pub architectures: Vec<String>,
    /// `hidden_size` (`n_embd`, `d_model`).
    pub hidden_size: Option<u64>,
    /// `num_hidden_layers` (`n_layer`, `num_layers`).
    pub layers: Option<u64>,
    /// `num_attention_heads` (`n_head`).
    pub heads: Option<u64>,
    /// `num_key_value_heads` (grouped-query attention).
    pub kv_heads: Option<u64>,
    /// `head_dim`, when given (else hidden / heads).
    pub head_dim: Option<u64>,
    /// `intermediate_size` (`n_inner`, `ffn_dim`).
    pub intermediate_size: Option<u64>,
    /// `vocab_size`.
    pub vocab_size: Option<u64>,
    /// `max_position_embeddings` (`n_positions`, `max_seq_len`).
    pub context_length: Option<u64>,
    /// `tie_word_embeddings`.
    pub tie_word_embeddings: Option<bool>,
    /// `torch_dtype` (or `dtype`).
    pub torch_dtype: Option<String>,
    /// `num_local_experts` / `num_experts` / `n_routed_experts`: a mixture
    /// of experts.
    pub experts: Option<u64>,
}

/// One check of the tensors against the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was compared.
    pub what: String,
    /// What the config says and what the tensors hold.
    pub detail: String,
    /// Whether they agree.
    pub ok: bool,
}

/// Reads the `config.json` that applies to the checkpoint opened at `path`
/// (beside the file, or in the snapshot folder). `Ok(None)` without one;
/// `Err` with what is wrong with one that cannot be used.
pub fn read(path: &Path) -> Result<Option<Architecture>, String> {
    let Some(dir) = crate::quant::config::config_folder(path) else {
        return Ok(None);
    };
    let file = dir.join("config.json");
    let Some(value) =
        crate::quant::config::read_json(&file).map_err(|m| format!("config.json {m}"))?
    else {
        return Ok(None);
    };
    if !value.is_object() {
        return Err("config.json is not a JSON object".into());
    }
    Ok(Some(of_value(file, &value)))
}

/// The architecture in a parsed `config.json`. Multimodal configs keep the
/// language model's figures in `text_config`: used for any the top level
/// lacks.
pub fn of_value(path: PathBuf, value: &Value) -> Architecture {
    let text = value.get("text_config").filter(|v| v.is_object());
    let field = |keys: &[&str]| -> Option<&Value> {
        keys.iter()
            .find_map(|k| value.get(*k))
            .or_else(|| text.and_then(|t| keys.iter().find_map(|k| t.get(*k))))
            .filter(|v| !v.is_null())
    };
    let int = |keys: &[&str]| field(keys).and_then(Value::as_u64);
    let string = |keys: &[&str]| field(keys).and_then(Value::as_str).map(str::to_owned);
    Architecture {
        path,
        model_type: string(&["model_type"]),
        architectures: value
            .get("architectures")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .take(8)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        hidden_size: int(&["hidden_size", "n_embd", "d_model"]),
        layers: int(&["num_hidden_layers", "n_layer", "num_layers"]),
        heads: int(&["num_attention_heads", "n_head"]),
        kv_heads: int(&["num_key_value_heads"]),
        head_dim: int(&["head_dim"]),
        intermediate_size: int(&["intermediate_size", "n_inner", "ffn_dim"]),
        vocab_size: int(&["vocab_size"]),
        context_length: int(&["max_position_embeddings", "n_positions", "max_seq_len"]),
        tie_word_embeddings: field(&["tie_word_embeddings"]).and_then(Value::as_bool),
        torch_dtype: string(&["torch_dtype", "dtype"]),
        experts: int(&["num_local_experts", "num_experts", "n_routed_experts"]),
    }
}

/// The architecture a GGUF's metadata describes (GGUF.md: the overview
/// reads `general.architecture` and its `{arch}.*` keys as it reads
/// `config.json`): `block_count`, `embedding_length`,
/// `attention.head_count(_kv)`, `feed_forward_length`, `context_length`,
/// `vocab_size` (else the tokenizer's length), `expert_count`.
pub fn of_gguf(path: PathBuf, g: &crate::format::gguf::open::GgufParts) -> Option<Architecture> {
    use crate::format::gguf::header::Value as G;
    let arch = g.architecture()?.to_owned();
    let int = |key: &str| g.unsigned(&format!("{arch}.{key}"));
    let vocab = int("vocab_size").or_else(|| match g.get("tokenizer.ggml.tokens") {
        Some(G::Array { len, .. }) => Some(*len),
        _ => None,
    });
    let heads = int("attention.head_count");
    let key_length = int("attention.key_length");
    Some(Architecture {
        path,
        model_type: Some(arch.clone()),
        architectures: Vec::new(),
        hidden_size: int("embedding_length"),
        layers: int("block_count"),
        heads,
        kv_heads: int("attention.head_count_kv"),
        head_dim: key_length,
        intermediate_size: int("feed_forward_length"),
        vocab_size: vocab,
        context_length: int("context_length"),
        tie_word_embeddings: None,
        torch_dtype: None,
        experts: int("expert_count"),
    })
}

/// The model types whose decoder layers hold exactly attention (q, k, v,
/// o), a gated MLP (gate, up, down) and two norms: the parameter count
/// follows from the config.
const LLAMA_LIKE: [&str; 8] = [
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "granite", "olmo2",
];

/// The number of layers the names hold: one more than the largest layer
/// number (`layers.31` → 32), when any name has one.
pub fn layers_in_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<u64> {
    names
        .into_iter()
        .filter_map(crate::diff::layer_index)
        .max()
        .map(|m| m.saturating_add(1))
}

/// Checks the tensors of `ck` against `arch`. `parameters` is the number
/// of values the tensors hold (a quantized weight counted as its logical
/// shape).
pub fn check(arch: &Architecture, ck: &Checkpoint, parameters: u64) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(layers) = arch.layers {
        match layers_in_names(ck.entries().map(|(_, i)| i.name())) {
            Some(seen) => out.push(Check {
                what: "layers".into(),
                detail: format!("num_hidden_layers {layers}; the names number {seen}"),
                ok: seen == layers,
            }),
            None => out.push(Check {
                what: "layers".into(),
                detail: format!("num_hidden_layers {layers}; no name has a layer number"),
                ok: false,
            }),
        }
    }
    if let (Some(vocab), Some(hidden)) = (arch.vocab_size, arch.hidden_size) {
        let embedding = ck.entries().find(|(t, i)| {
            let n = i.name();
            ck.shape_of(*t).len() == 2
                && [
                    "embed_tokens.weight",
                    "wte.weight",
                    "word_embeddings.weight",
                    "tok_embeddings.weight",
                    "token_embd.weight",
                ]
                .iter()
                .any(|s| n.ends_with(s))
        });
        if let Some((t, e)) = embedding {
            let shape = ck.shape_of(t);
            out.push(Check {
                what: "embedding".into(),
                detail: format!(
                    "vocab_size × hidden_size = [{vocab}, {hidden}]; {} is {}",
                    e.name(),
                    crate::text::fmt_shape(shape)
                ),
                ok: shape == [vocab, hidden],
            });
        }
    }
    if arch.tie_word_embeddings == Some(false) {
        let head = ck
            .entries()
            .map(|(_, i)| i)
            .any(|i| i.name() == "lm_head.weight" || i.name().ends_with(".lm_head.weight"));
        out.push(Check {
            what: "output head".into(),
            detail: if head {
                "tie_word_embeddings false; lm_head.weight is stored".into()
            } else {
                "tie_word_embeddings false, but no lm_head.weight is stored".into()
            },
            ok: head,
        });
    }
    if let Some(expected) = llama_parameters(arch) {
        // Biases (Qwen2's q/k/v) and rounding stay well within 1%.
        let diff = expected.abs_diff(parameters) as f64;
        out.push(Check {
            what: "parameters".into(),
            detail: format!(
                "the config's shapes give {}; the tensors hold {}",
                crate::text::human_count(expected),
                crate::text::human_count(parameters)
            ),
            ok: diff <= expected as f64 * 0.01,
        });
    }
    out
}

/// The parameter count of a Llama-family decoder from its config:
/// embedding, `layers` × (attention + gated MLP + two norms), the final
/// norm, and the output head unless tied. `None` for other architectures,
/// mixtures of experts, or a config that lacks a figure.
pub fn llama_parameters(arch: &Architecture) -> Option<u64> {
    let family = arch.model_type.as_deref()?;
    if !LLAMA_LIKE.contains(&family) || arch.experts.is_some_and(|e| e > 1) {
        return None;
    }
    let h = arch.hidden_size?;
    let heads = arch.heads?.max(1);
    let kv = arch.kv_heads.unwrap_or(heads);
    let head_dim = arch.head_dim.unwrap_or(h / heads);
    let inter = arch.intermediate_size?;
    let vocab = arch.vocab_size?;
    let layers = arch.layers?;
    let attention = h
        .checked_mul(heads.checked_mul(head_dim)?)?
        .checked_mul(2)?
        .checked_add(h.checked_mul(kv.checked_mul(head_dim)?)?.checked_mul(2)?)?;
    let mlp = h.checked_mul(inter)?.checked_mul(3)?;
    let layer = attention.checked_add(mlp)?.checked_add(h.checked_mul(2)?)?;
    let embedding = vocab.checked_mul(h)?;
    // Gemma ties by default; the others say.
    let tied = arch
        .tie_word_embeddings
        .unwrap_or(family.starts_with("gemma"));
    let head = if tied { 0 } else { embedding };
    layers
        .checked_mul(layer)?
        .checked_add(embedding)?
        .checked_add(head)?
        .checked_add(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama_7b() -> Value {
        serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": false,
            "torch_dtype": "float16"
        })
    }

    #[test]
    fn llama_2_7b_has_its_known_parameter_count() {
        let a = of_value(PathBuf::from("config.json"), &llama_7b());
        assert_eq!(a.layers, Some(32));
        assert_eq!(a.architectures, ["LlamaForCausalLM"]);
        assert_eq!(a.torch_dtype.as_deref(), Some("float16"));
        // Llama 2 7B: 6,738,415,616 parameters.
        assert_eq!(llama_parameters(&a), Some(6_738_415_616));
    }

    #[test]
    fn aliases_nested_text_configs_and_hostile_values() {
        let gpt2 = serde_json::json!({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
            "n_head": 12, "n_positions": 1024, "vocab_size": 50257});
        let a = of_value(PathBuf::new(), &gpt2);
        assert_eq!(
            (a.hidden_size, a.layers, a.heads, a.context_length),
            (Some(768), Some(12), Some(12), Some(1024))
        );
        assert_eq!(llama_parameters(&a), None, "not a Llama-family decoder");
        let vlm = serde_json::json!({"model_type": "llava", "text_config":
            {"hidden_size": 4096, "num_hidden_layers": 32}});
        let a = of_value(PathBuf::new(), &vlm);
        assert_eq!((a.hidden_size, a.layers), (Some(4096), Some(32)));
        // Wrong types and absurd sizes: no figure, no overflow.
        let bad = serde_json::json!({"model_type": "llama", "hidden_size": "big",
            "num_hidden_layers": -3, "num_attention_heads": 0, "intermediate_size": u64::MAX,
            "vocab_size": u64::MAX, "architectures": "x"});
        let a = of_value(PathBuf::new(), &bad);
        assert_eq!((a.hidden_size, a.layers), (None, None));
        assert!(a.architectures.is_empty());
        assert_eq!(llama_parameters(&a), None);
        let mut huge = llama_7b();
        huge["hidden_size"] = Value::from(u64::MAX / 2);
        assert_eq!(
            llama_parameters(&of_value(PathBuf::new(), &huge)),
            None,
            "overflow is no figure"
        );
    }

    #[test]
    fn layers_counted_from_names() {
        let names = [
            "model.layers.0.mlp",
            "model.layers.31.mlp",
            "lm_head.weight",
        ];
        assert_eq!(layers_in_names(names), Some(32));
        assert_eq!(layers_in_names(["a.weight"]), None);
    }
}
