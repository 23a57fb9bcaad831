//! Builders for test files: raw headers from bytes, and whole files written
//! by the official `safetensors` writer.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::{Dtype as RefDtype, View};

/// A file image: `N`, the header text, then `data_len` bytes of data.
pub fn with_header(header: &str, data_len: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + data_len, 0xAB);
    out
}

/// A one-tensor header `{"t": {dtype, shape, data_offsets}}`.
pub fn one_tensor(dtype: &str, shape: &[u64], offsets: [u64; 2]) -> String {
    format!(
        r#"{{"t":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{},{}]}}}}"#,
        offsets[0], offsets[1]
    )
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture folder");
    }
    std::fs::write(&path, bytes).expect("write fixture");
    path
}

/// A tensor to give the official writer.
#[derive(Debug, Clone)]
pub struct RefTensor {
    pub dtype: RefDtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl View for &RefTensor {
    fn dtype(&self) -> RefDtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Every dtype of the reference crate, in its declaration order.
pub const REF_DTYPES: [RefDtype; 22] = [
    RefDtype::BOOL,
    RefDtype::F4,
    RefDtype::F6_E2M3,
    RefDtype::F6_E3M2,
    RefDtype::U8,
    RefDtype::I8,
    RefDtype::F8_E5M2,
    RefDtype::F8_E4M3,
    RefDtype::F8_E8M0,
    RefDtype::F8_E4M3FNUZ,
    RefDtype::F8_E5M2FNUZ,
    RefDtype::I16,
    RefDtype::U16,
    RefDtype::F16,
    RefDtype::BF16,
    RefDtype::I32,
    RefDtype::U32,
    RefDtype::F32,
    RefDtype::C64,
    RefDtype::F64,
    RefDtype::I64,
    RefDtype::U64,
];

/// Bytes needed by `numel` elements of `dtype`, or None when not whole.
pub fn ref_nbytes(dtype: RefDtype, numel: usize) -> Option<usize> {
    let bits = numel * dtype.bitsize();
    bits.is_multiple_of(8).then_some(bits / 8)
}

/// Serialises tensors with the official writer.
pub fn reference_file(
    tensors: &[(String, RefTensor)],
    metadata: Option<HashMap<String, String>>,
) -> Vec<u8> {
    safetensors::serialize(tensors.iter().map(|(n, t)| (n.as_str(), t)), metadata)
        .expect("the official writer accepts the fixture")
}

/// A small valid file with a few dtypes, made by the official writer.
pub fn small_model() -> Vec<u8> {
    let t = |dtype, shape: Vec<usize>| {
        let numel: usize = shape.iter().product();
        let n = ref_nbytes(dtype, numel).expect("whole bytes");
        RefTensor {
            dtype,
            shape,
            data: (0..n).map(|i| (i * 7 + 3) as u8).collect(),
        }
    };
    let tensors = vec![
        ("embed.weight".to_owned(), t(RefDtype::F32, vec![4, 3])),
        ("layers.0.attn.q".to_owned(), t(RefDtype::BF16, vec![3, 3])),
        ("layers.0.norm".to_owned(), t(RefDtype::F16, vec![3])),
        ("scale".to_owned(), t(RefDtype::F64, vec![])),
        ("packed".to_owned(), t(RefDtype::F4, vec![2, 4])),
        ("empty".to_owned(), t(RefDtype::I64, vec![0, 5])),
    ];
    let meta = HashMap::from([("format".to_owned(), "pt".to_owned())]);
    reference_file(&tensors, Some(meta))
}

/// A small Llama-style decoder in `dir` (`model.safetensors` and its
/// `config.json`): hidden 16, `layers` layers of 9 tensors (F32 values
/// whose spread grows with the layer, so a per-layer chart has a slope).
/// Layer `odd`, when given, stores its `mlp.down_proj` as F16: the one
/// layer that differs from the template. Returns the file.
#[cfg(feature = "gui")]
pub fn llama_like(dir: &Path, layers: usize, odd: Option<usize>) -> PathBuf {
    use tensorscope::dtype::Dtype;
    use tensorscope::format::write::write_file;
    use tensorscope::jobs::{CancelToken, Progress};
    const H: u64 = 16;
    const I: u64 = 32;
    const V: u64 = 64;
    let mut tensors: Vec<tensorscope::format::write::OwnedTensor> = Vec::new();
    let mut seed = 1u32;
    let mut values = |n: u64, dtype: Dtype, scale: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let x = ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * scale;
                match dtype {
                    Dtype::F16 => half::f16::from_f32(x).to_le_bytes().to_vec(),
                    _ => x.to_le_bytes().to_vec(),
                }
            })
            .collect()
    };
    tensors.push((
        "model.embed_tokens.weight".into(),
        Dtype::F32,
        vec![V, H],
        values(V * H, Dtype::F32, 0.1),
    ));
    for l in 0..layers {
        let scale = 0.1 * (1.0 + l as f32);
        for (role, shape) in [
            ("self_attn.q_proj.weight", vec![H, H]),
            ("self_attn.k_proj.weight", vec![H / 2, H]),
            ("self_attn.v_proj.weight", vec![H / 2, H]),
            ("self_attn.o_proj.weight", vec![H, H]),
            ("mlp.gate_proj.weight", vec![I, H]),
            ("mlp.up_proj.weight", vec![I, H]),
            ("mlp.down_proj.weight", vec![H, I]),
            ("input_layernorm.weight", vec![H]),
            ("post_attention_layernorm.weight", vec![H]),
        ] {
            let dtype = if odd == Some(l) && role == "mlp.down_proj.weight" {
                Dtype::F16
            } else {
                Dtype::F32
            };
            let n = shape.iter().product();
            tensors.push((
                format!("model.layers.{l}.{role}"),
                dtype,
                shape,
                values(n, dtype, scale),
            ));
        }
    }
    tensors.push((
        "model.norm.weight".into(),
        Dtype::F32,
        vec![H],
        values(H, Dtype::F32, 1.0),
    ));
    tensors.push((
        "lm_head.weight".into(),
        Dtype::F32,
        vec![V, H],
        values(V * H, Dtype::F32, 0.1),
    ));
    let sources = tensorscope::format::write::sources_of(&tensors);
    let path = dir.join("model.safetensors");
    write_file(&path, &sources, None, &CancelToken::new(), &Progress::new()).expect("write");
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": I,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": layers,
        "vocab_size": V,
        "max_position_embeddings": 128,
        "tie_word_embeddings": false,
        "torch_dtype": "float32"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config");
    path
}
