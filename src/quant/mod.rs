//! Quantized checkpoints: which scheme packs each weight, and its true
//! values (`../shared/QUANT.md` in the project's design folder is the
//! reference for every layout and formula named here).
//!
//! The layer sits between `format`/`dtype` and `stats`/`diff`/`export`; it
//! knows no screen.
//!
//! * [`config`] finds the quantization config (`config.json`,
//!   `quantize_config.json`, `hf_quant_config.json`, `__metadata__`) and
//!   reads it as hostile input.
//! * `detect` groups the stored tensors by module and matches each group
//!   against the signatures of every known scheme, in QUANT.md's order,
//!   with its shape checks and a cross-check against the config. The result
//!   is a [`Quantization`]: one [`LogicalTensor`] per quantized weight, with
//!   its logical name and shape, its parts, and a [`Status`].
//! * `decode` turns a decoded logical tensor's parts back into values:
//!   [`Dequantizer`] decodes any run of elements, in the logical tensor's
//!   row-major order, straight from the mapped bytes into a caller's buffer,
//!   so memory does not grow with the tensor and the statistics, export and
//!   diff passes read it as they read a stored tensor.
//!
//! Values are computed as the library that wrote the file computes them
//! (QUANT.md §9): the formula evaluated exactly, then rounded once to the
//! library's compute dtype (F16 for GPTQ and AWQ, the scale dtype for
//! compressed-tensors, the blob dtype for bitsandbytes, twice for MLX
//! affine), so they are the values the model runs with.

pub mod config;
mod decode;
mod detect;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

pub use config::{ConfigProblem, QuantConfig};
#[cfg(test)]
pub(crate) use decode::code16;
#[cfg(test)]
pub(crate) use decode::gguf_test_file;
pub use decode::{
    BlockPairs, Counts, Dequantizer, Keep, NibbleCounts, PAIR_BATCH, PairKernels, q4_k_pairs,
};
pub(crate) use detect::Layout;

use crate::dtype::Dtype;
use crate::format::{Checkpoint, TensorRef};

/// A quantization scheme, by family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// GPTQ (AutoGPTQ, GPTQModel): int codes packed along K in I32.
    Gptq,
    /// AutoAWQ GEMM: int4 codes packed along N, interleaved.
    AwqGemm,
    /// compressed-tensors `pack-quantized` (INT 1-8 bit in I32).
    CtPack,
    /// compressed-tensors `naive-quantized` / `int-quantized` (I8).
    CtInt8,
    /// FP8 weights with a multiplying scale (compressed-tensors
    /// float-quantized, DeepSeek block, ModelOpt, FBGEMM).
    Fp8,
    /// NVFP4 (E2M1 codes, F8 scales per 16, a global scale).
    Nvfp4,
    /// MXFP4: E2M1 codes with E8M0 scales per 32 (compressed-tensors, MLX).
    Mxfp4,
    /// MXFP6 (E2M3 codes with E8M0 scales per 32).
    Mxfp6,
    /// MXFP8 (E4M3 codes with E8M0 scales per 32).
    Mxfp8,
    /// gpt-oss MoE experts: MXFP4 in `_blocks`/`_scales` pairs.
    GptOssMxfp4,
    /// bitsandbytes 4-bit (NF4 or FP4 codes, absmax per block).
    Bnb4,
    /// bitsandbytes LLM.int8 (I8 with a row absmax).
    Bnb8,
    /// MLX affine (codes in U32 with scales and biases).
    MlxAffine,
    /// A GGUF block type (Q4_0 … Q6_K, the IQ types, TQ1_0/TQ2_0,
    /// MXFP4, NVFP4): blocks of codes with their scales inside.
    Gguf,
    /// A scheme recognized by its signature or config whose decoding is not
    /// supported (EXL2, EXL3, Marlin, HQQ, torchao, …).
    Other,
}

impl Scheme {
    /// A stable short identifier (used in JSON).
    pub fn id(self) -> &'static str {
        match self {
            Scheme::Gptq => "gptq",
            Scheme::AwqGemm => "awq-gemm",
            Scheme::CtPack => "ct-pack-quantized",
            Scheme::CtInt8 => "ct-int-quantized",
            Scheme::Fp8 => "fp8",
            Scheme::Nvfp4 => "nvfp4",
            Scheme::Mxfp4 => "mxfp4",
            Scheme::Mxfp6 => "mxfp6",
            Scheme::Mxfp8 => "mxfp8",
            Scheme::GptOssMxfp4 => "mxfp4-gpt-oss",
            Scheme::Bnb4 => "bnb-4bit",
            Scheme::Bnb8 => "bnb-int8",
            Scheme::MlxAffine => "mlx-affine",
            Scheme::Gguf => "gguf",
            Scheme::Other => "other",
        }
    }
}

/// What Tensorscope can do with a logical tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Its values are decoded.
    Decoded,
    /// A known scheme whose decoding is not supported; the message says
    /// which and why.
    Recognized,
    /// The parts, the shapes or the config disagree; the message gives the
    /// evidence. Nothing is decoded.
    Inconsistent,
}

impl Status {
    /// `decoded`, `recognized` or `inconsistent`.
    pub fn id(self) -> &'static str {
        match self {
            Status::Decoded => "decoded",
            Status::Recognized => "recognized",
            Status::Inconsistent => "inconsistent",
        }
    }
}

/// How the zero point is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZeroPoint {
    /// No zero point (symmetric codes, float codes).
    None,
    /// Stored as is.
    Stored,
    /// GPTQ v1: stored minus one, undone at word level.
    StoredMinusOne,
    /// Added as a float bias after scaling (MLX affine).
    Bias,
}

impl ZeroPoint {
    /// A stable short identifier.
    pub fn id(self) -> &'static str {
        match self {
            ZeroPoint::None => "none",
            ZeroPoint::Stored => "stored",
            ZeroPoint::StoredMinusOne => "stored-minus-one",
            ZeroPoint::Bias => "bias",
        }
    }
}

/// One quantized weight seen as the tensor it replaces.
#[derive(Debug, Clone)]
pub struct LogicalTensor {
    pub(crate) name: String,
    pub(crate) scheme: Scheme,
    pub(crate) label: String,
    pub(crate) bits: u32,
    pub(crate) group_size: Option<u64>,
    pub(crate) zero_point: ZeroPoint,
    pub(crate) shape: Vec<u64>,
    pub(crate) parts: Vec<(String, TensorRef)>,
    pub(crate) status: Status,
    pub(crate) message: String,
    pub(crate) value_dtype: Dtype,
    pub(crate) layout: Option<Layout>,
}

impl LogicalTensor {
    /// The name of the weight it replaces (`<module>.weight`; gpt-oss
    /// experts `<module>.<proj>`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The scheme family.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }
    /// What a table shows in the dtype column: "GPTQ int4 g128", "NVFP4", …
    pub fn label(&self) -> &str {
        &self.label
    }
    /// Bits per code (0 when unknown).
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// Elements per scale along the input dimension (`None`: per channel
    /// or per tensor, or unknown).
    pub fn group_size(&self) -> Option<u64> {
        self.group_size
    }
    /// How the zero point is stored.
    pub fn zero_point(&self) -> ZeroPoint {
        self.zero_point
    }
    /// The logical shape, in the layout of the weight it replaces
    /// (nn.Linear `[out, in]`; gpt-oss experts `[E, out, in]`); empty when
    /// it could not be found.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Elements of the logical tensor.
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
    /// The stored tensors it is made of, by role (`qweight`, `scales`, …).
    pub fn parts(&self) -> &[(String, TensorRef)] {
        &self.parts
    }
    /// Decoded, recognized or inconsistent.
    pub fn status(&self) -> Status {
        self.status
    }
    /// Why it is not decoded, or a warning about it; empty otherwise.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The dtype the writing library computes its values in; the values
    /// decoded here are rounded to it.
    pub fn value_dtype(&self) -> Dtype {
        self.value_dtype
    }
    /// Bytes of the stored parts.
    pub fn stored_bytes(&self, ck: &Checkpoint) -> u64 {
        self.parts
            .iter()
            .filter_map(|(_, t)| ck.info(*t))
            .map(crate::TensorInfo::nbytes)
            .sum()
    }
}

/// What a checkpoint's quantization is: `None` from [`detect`] for a plain
/// checkpoint.
#[derive(Debug, Clone)]
pub struct Quantization {
    config: QuantConfig,
    tensors: Vec<LogicalTensor>,
    by_part: HashMap<TensorRef, usize>,
    by_name: HashMap<String, usize>,
}

impl Quantization {
    /// The method named by the config (`gptq`, `awq`,
    /// `compressed-tensors`, …), or else the schemes the tensors show.
    pub fn method(&self) -> String {
        if let Some(m) = &self.config.method {
            return m.clone();
        }
        let mut ids: Vec<&str> = self.tensors.iter().map(|t| t.scheme.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.join("+")
    }
    /// The config used (its path is `None` when there is no file).
    pub fn config(&self) -> &QuantConfig {
        &self.config
    }
    /// The logical tensors, in the order of their first part.
    pub fn tensors(&self) -> &[LogicalTensor] {
        &self.tensors
    }
    /// The logical tensor a stored tensor is part of.
    pub fn owner(&self, part: TensorRef) -> Option<&LogicalTensor> {
        self.by_part.get(&part).and_then(|&i| self.tensors.get(i))
    }
    /// The index in [`Quantization::tensors`] of the logical tensor a
    /// stored tensor is part of.
    pub fn owner_index(&self, part: TensorRef) -> Option<usize> {
        self.by_part.get(&part).copied()
    }
    /// The logical tensor called `name`.
    pub fn find(&self, name: &str) -> Option<&LogicalTensor> {
        self.by_name.get(name).and_then(|&i| self.tensors.get(i))
    }
    /// The path of the config file used, if any.
    pub fn config_path(&self) -> Option<&PathBuf> {
        self.config.path.as_ref()
    }
}

/// The quantization a reader of values uses: [`detect`]'s when `asked`
/// (`--dequant`), and always a GGUF's, whose block types' stored bytes are
/// no tensor of their own (GGUF.md: its verbs read the decoded values).
pub fn for_values(ck: &Checkpoint, asked: bool) -> Option<Quantization> {
    if asked || ck.container() == crate::format::ContainerKind::GGUF {
        detect(ck)
    } else {
        None
    }
}

/// Finds the quantization of a checkpoint: `None` when no tensor belongs
/// to a known scheme and no config names one.
pub fn detect(ck: &Checkpoint) -> Option<Quantization> {
    let format = ck
        .shards()
        .first()
        .and_then(|s| s.file().header().metadata())
        .and_then(|m| m.get("format"))
        .map(String::as_str);
    // A GGUF carries its types in its tensor infos: no config is looked for.
    let config = if ck.container() == crate::format::ContainerKind::GGUF {
        QuantConfig::default()
    } else {
        config::find(ck.path(), format)
    };
    let tensors = detect::logical_tensors(ck, &config);
    if tensors.is_empty() && (config.method.is_none() || config.method.as_deref() == Some("mlx")) {
        return None;
    }
    let mut by_part = HashMap::new();
    let mut by_name = HashMap::new();
    for (i, t) in tensors.iter().enumerate() {
        for (_, p) in &t.parts {
            by_part.insert(*p, i);
        }
        by_name.entry(t.name.clone()).or_insert(i);
    }
    Some(Quantization {
        config,
        tensors,
        by_part,
        by_name,
    })
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}
