//! Finding the logical tensors: stored tensors grouped by module prefix,
//! each group matched against the signatures of QUANT.md §8 in its order,
//! with the shape checks of each scheme and a cross-check against the
//! config. A signature whose checks fail gives an `Inconsistent` logical
//! tensor carrying the evidence; nothing of it is decoded.

use std::collections::BTreeMap;

use serde_json::Value;

mod bnb;
mod ct;
mod fp8;
mod gguf;
mod gptoss;
mod gptq;
mod mlx;

use super::config::QuantConfig;
use super::{LogicalTensor, Scheme, Status, ZeroPoint};
use crate::dtype::Dtype;
use crate::format::{Checkpoint, TensorInfo, TensorRef};

/// Where a scale of element `(n, k)` is: `scale[(n / rows) * cols + k / width]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grid {
    /// Output rows per scale.
    pub rows: u64,
    /// Input columns per scale.
    pub width: u64,
    /// Scales per grid row (`ceil(K / width)`).
    pub cols: u64,
}

/// A scale tensor, how its bytes decode, and which elements it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scale {
    pub t: TensorRef,
    /// The dtype its bytes are read as (U8 E8M0 scales as F8_E8M0).
    pub dtype: Dtype,
    pub grid: Grid,
}

/// bitsandbytes double quantization of the absmax.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Nested {
    pub absmax: TensorRef,
    pub map: TensorRef,
    pub blocksize: u64,
    pub offset: f32,
}

/// How to decode a logical tensor: the scheme's parts and dimensions, all
/// checked against the stored shapes when detected.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Layout {
    /// GPTQ: `qweight [K*b/32, N]` packed down the columns, `qzeros
    /// [groups, N*b/32]`, `scales [groups, N]`, `g_idx [K]`.
    Gptq {
        qweight: TensorRef,
        qzeros: TensorRef,
        scales: TensorRef,
        g_idx: Option<TensorRef>,
        bits: u32,
        n: u64,
        k: u64,
        group: u64,
        groups: u64,
        v1: bool,
        /// `g_idx` is not `k / group` (act-order): read it per column.
        act_order: bool,
    },
    /// AWQ GEMM: `qweight [K, N/8]` interleaved, `qzeros [K/G, N/8]`,
    /// `scales [K/G, N]`.
    Awq {
        qweight: TensorRef,
        qzeros: TensorRef,
        scales: TensorRef,
        n: u64,
        k: u64,
        group: u64,
    },
    /// compressed-tensors pack-quantized: offset-binary codes in rows of
    /// I32 words (dense bitstream, or `32/b` codes per word before 0.17).
    CtPack {
        packed: TensorRef,
        scale: Scale,
        /// The zero point: packed down N (`true`) or stored plain.
        zero: Option<(TensorRef, bool)>,
        g_idx: Option<TensorRef>,
        bits: u32,
        n: u64,
        k: u64,
        dense: bool,
        row_bytes: u64,
    },
    /// One byte per element (I8 or an F8 code), times a scale (minus a zero
    /// point): compressed-tensors int8 and FP8, DeepSeek block FP8,
    /// ModelOpt and FBGEMM FP8, MXFP8, bitsandbytes int8.
    Scaled {
        weight: TensorRef,
        code: Dtype,
        scale: Scale,
        zero: Option<Scale>,
        /// bitsandbytes int8: the scale is a row absmax, divided by 127.
        per_127: bool,
        n: u64,
        k: u64,
    },
    /// Minifloat codes (E2M1 in 4 bits, E2M3 in 6) packed LSB-first in rows
    /// of bytes, times a scale (and a global scale): NVFP4, MXFP4, MXFP6,
    /// gpt-oss experts, MLX's FP4 modes.
    Minifloat {
        packed: TensorRef,
        code: Dtype,
        scale: Scale,
        /// A global scale and whether it divides (compressed-tensors NVFP4)
        /// or multiplies (ModelOpt).
        global: Option<(TensorRef, bool)>,
        rows: u64,
        k: u64,
        row_bytes: u64,
    },
    /// bitsandbytes 4-bit: flat codes, high nibble first.
    Bnb4 {
        weight: TensorRef,
        absmax: TensorRef,
        quant_map: TensorRef,
        nested: Option<Nested>,
        numel: u64,
        blocksize: u64,
    },
    /// A GGUF block type: rows of `k / block` blocks of `ty` in `blocks`.
    Gguf {
        blocks: TensorRef,
        ty: crate::format::gguf::types::GgmlType,
        k: u64,
    },
    /// MLX affine: `weight U32 [N, K*b/32]`, `scales`/`biases [N, K/G]`.
    MlxAffine {
        weight: TensorRef,
        scales: TensorRef,
        biases: TensorRef,
        bits: u32,
        n: u64,
        k: u64,
        group: u64,
    },
}

/// A stored tensor of a module.
#[derive(Clone, Copy)]
struct Part<'a> {
    t: TensorRef,
    info: &'a TensorInfo,
}

impl Part<'_> {
    fn dtype(&self) -> Dtype {
        self.info.dtype()
    }
    fn shape(&self) -> &[u64] {
        self.info.shape()
    }
    fn numel(&self) -> u64 {
        self.info.numel()
    }
    fn describe(&self) -> String {
        format!(
            "{} {} {:?}",
            self.info.name(),
            self.info.dtype().name(),
            self.info.shape()
        )
    }
}

/// The stored tensors of one module prefix, by role.
struct Module<'a> {
    prefix: String,
    parts: BTreeMap<String, Part<'a>>,
}

impl<'a> Module<'a> {
    fn get(&self, role: &str) -> Option<Part<'a>> {
        self.parts.get(role).copied()
    }
    fn has(&self, role: &str) -> bool {
        self.parts.contains_key(role)
    }
    fn name(&self, role: &str) -> String {
        if self.prefix.is_empty() {
            role.to_string()
        } else {
            format!("{}.{role}", self.prefix)
        }
    }
}

/// bitsandbytes suffixes of `<m>.weight.*` that belong to the module.
const BNB_SUFFIXES: [&str; 4] = [
    "weight.absmax",
    "weight.quant_map",
    "weight.nested_absmax",
    "weight.nested_quant_map",
];

/// Splits a tensor name into its module prefix and role.
fn split(name: &str) -> (&str, &str) {
    // bitsandbytes' quant state and quanto's `weight._data` /
    // `weight._scale` belong to the module, not to a `weight` module.
    for marker in [".weight.quant_state.", ".weight._"] {
        if let Some(at) = name.find(marker) {
            return (&name[..at], &name[at + 1..]);
        }
    }
    for s in BNB_SUFFIXES {
        if let Some(prefix) = name.strip_suffix(s).and_then(|p| p.strip_suffix('.')) {
            return (prefix, &name[prefix.len() + 1..]);
        }
    }
    match name.rfind('.') {
        Some(at) => (&name[..at], &name[at + 1..]),
        None => ("", name),
    }
}

/// The method family a config names, for the cross-check.
fn config_allows(method: &str, scheme: Scheme) -> bool {
    let m = method;
    match scheme {
        Scheme::Gptq => m == "gptq",
        Scheme::AwqGemm => m == "awq",
        Scheme::CtPack | Scheme::CtInt8 => m == "compressed-tensors" || m == "sparseml",
        Scheme::Fp8 => matches!(
            m,
            "fp8" | "fbgemm_fp8" | "compressed-tensors" | "modelopt" | "finegrained_fp8"
        ),
        Scheme::Nvfp4 | Scheme::Mxfp4 | Scheme::Mxfp6 | Scheme::Mxfp8 => {
            matches!(
                m,
                "compressed-tensors" | "modelopt" | "mlx" | "mxfp4" | "fp8"
            )
        }
        Scheme::GptOssMxfp4 => m == "mxfp4",
        Scheme::Bnb4 | Scheme::Bnb8 => m == "bitsandbytes",
        Scheme::MlxAffine => m == "mlx",
        Scheme::Gguf => m == "gguf",
        Scheme::Other => true,
    }
}

/// A method the cross-check knows (others are not checked).
fn known_method(m: &str) -> bool {
    matches!(
        m,
        "gptq"
            | "awq"
            | "compressed-tensors"
            | "sparseml"
            | "fp8"
            | "fbgemm_fp8"
            | "modelopt"
            | "mxfp4"
            | "bitsandbytes"
            | "mlx"
            | "finegrained_fp8"
    )
}

/// Every logical tensor of a checkpoint, in the order of their first part.
pub(super) fn logical_tensors(ck: &Checkpoint, config: &QuantConfig) -> Vec<LogicalTensor> {
    if ck.container() == crate::format::ContainerKind::GGUF {
        return gguf::logical_tensors(ck);
    }
    // Most checkpoints are plain: without a config, and with no tensor
    // whose role only quantized weights have, nothing is grouped (a
    // million-tensor header costs one pass over its names).
    let quant_role = |name: &str| {
        let (_, role) = split(name);
        QUANT_ROLES.contains(&role)
            || SIGNATURE_ROLES.contains(&role)
            || role.ends_with("_blocks")
            || role.starts_with("weight.quant_state.")
            || role.starts_with("weight:")
            || role.starts_with("weight._")
    };
    if config.method.is_none() && !ck.entries().any(|(_, i)| quant_role(i.name())) {
        return Vec::new();
    }
    let mut modules: Vec<Module<'_>> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (t, info) in ck.entries() {
        let (prefix, role) = split(info.name());
        let at = *index.entry(prefix).or_insert_with(|| {
            modules.push(Module {
                prefix: prefix.to_string(),
                parts: BTreeMap::new(),
            });
            modules.len() - 1
        });
        if let Some(m) = modules.get_mut(at) {
            m.parts.insert(role.to_string(), Part { t, info });
        }
    }
    let cx = Context::new(ck, config);
    let mut out = Vec::new();
    for m in &modules {
        for mut lt in match_module(&cx, m) {
            if let Some(method) = config.method.as_deref()
                && lt.status != Status::Inconsistent
                && known_method(method)
                && !config_allows(method, lt.scheme)
            {
                lt.status = Status::Inconsistent;
                lt.message = format!(
                    "the config ({}) names quant_method \"{method}\", but the tensors are {}",
                    config
                        .path
                        .as_ref()
                        .map_or_else(|| "metadata".into(), |p| p.display().to_string()),
                    lt.label
                );
                lt.layout = None;
            }
            out.push(lt);
        }
    }
    out
}

/// What the matchers read besides the module.
struct Context<'a> {
    ck: &'a Checkpoint,
    config: &'a QuantConfig,
    method: &'a str,
    /// The dtype of the checkpoint's plain weights (F16, BF16 or F32): what
    /// compressed-tensors casts its minifloat results to.
    model_dtype: Dtype,
}

impl<'a> Context<'a> {
    fn new(ck: &'a Checkpoint, config: &'a QuantConfig) -> Self {
        Self {
            ck,
            config,
            method: config.method.as_deref().unwrap_or(""),
            model_dtype: ck
                .entries()
                .map(|(_, i)| i)
                .find(|i| {
                    i.name().ends_with(".weight")
                        && i.shape().len() == 2
                        && matches!(i.dtype(), Dtype::F16 | Dtype::BF16)
                })
                .map_or(Dtype::F32, TensorInfo::dtype),
        }
    }

    /// A small tensor's bytes, decoded as integers (g_idx, weight_shape).
    fn ints(&self, p: Part<'_>, max: u64) -> Option<Vec<i64>> {
        if p.numel() > max {
            return None;
        }
        let bytes = self.ck.small_bytes(p.t);
        let width = usize::try_from(p.dtype().bits() / 8).ok()?;
        if !matches!(p.dtype(), Dtype::I32 | Dtype::I64 | Dtype::U32) {
            return None;
        }
        Some(
            bytes
                .chunks_exact(width)
                .map(|c| {
                    if c.len() == 4 {
                        let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                        if p.dtype() == Dtype::I32 {
                            i64::from(w as i32)
                        } else {
                            i64::from(w)
                        }
                    } else {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        i64::from_le_bytes(b)
                    }
                })
                .collect(),
        )
    }
}

/// A logical tensor under construction.
struct Found {
    lt: LogicalTensor,
}

impl Found {
    fn new(name: String, scheme: Scheme, label: String, parts: Vec<(String, TensorRef)>) -> Self {
        Self {
            lt: LogicalTensor {
                name,
                scheme,
                label,
                bits: 0,
                group_size: None,
                zero_point: ZeroPoint::None,
                shape: Vec::new(),
                parts,
                status: Status::Inconsistent,
                message: String::new(),
                value_dtype: Dtype::F32,
                layout: None,
            },
        }
    }
    fn bits(mut self, bits: u32) -> Self {
        self.lt.bits = bits;
        self
    }
    fn group(mut self, group: Option<u64>) -> Self {
        self.lt.group_size = group;
        self
    }
    fn zero(mut self, z: ZeroPoint) -> Self {
        self.lt.zero_point = z;
        self
    }
    fn shape(mut self, shape: Vec<u64>) -> Self {
        self.lt.shape = shape;
        self
    }
    fn value_dtype(mut self, d: Dtype) -> Self {
        self.lt.value_dtype = d;
        self
    }
    fn decoded(mut self, layout: Layout) -> LogicalTensor {
        self.lt.status = Status::Decoded;
        self.lt.layout = Some(layout);
        self.lt
    }
    fn decoded_with(mut self, layout: Layout, warning: String) -> LogicalTensor {
        self.lt.message = warning;
        self.decoded(layout)
    }
    fn inconsistent(mut self, why: String) -> LogicalTensor {
        self.lt.status = Status::Inconsistent;
        self.lt.message = why;
        self.lt
    }
    fn recognized(mut self, why: String) -> LogicalTensor {
        self.lt.status = Status::Recognized;
        self.lt.message = why;
        self.lt
    }
}

fn parts_of(m: &Module<'_>, roles: &[&str]) -> Vec<(String, TensorRef)> {
    roles
        .iter()
        .filter_map(|r| m.get(r).map(|p| ((*r).to_string(), p.t)))
        .collect()
}

/// Every stored tensor of the module but its bias, which stays a plain
/// tensor of its own.
fn all_parts(m: &Module<'_>) -> Vec<(String, TensorRef)> {
    m.parts
        .iter()
        .filter(|(r, _)| r.as_str() != "bias")
        .map(|(r, p)| (r.clone(), p.t))
        .collect()
}

fn dims2(p: Part<'_>) -> Option<(u64, u64)> {
    match p.shape() {
        [a, b] => Some((*a, *b)),
        _ => None,
    }
}

fn is_float_scale(d: Dtype) -> bool {
    matches!(d, Dtype::F16 | Dtype::BF16 | Dtype::F32 | Dtype::F64)
}

/// The dtype a library rounds `(q - z) * s` to: the scale's, when it is a
/// 16-bit float, else F32.
fn round_dtype(scale: Dtype) -> Dtype {
    if matches!(scale, Dtype::F16 | Dtype::BF16) {
        scale
    } else {
        Dtype::F32
    }
}

/// Matches one module against every signature, in QUANT.md §8's order.
fn match_module(cx: &Context<'_>, m: &Module<'_>) -> Vec<LogicalTensor> {
    // A part with no elements may have any other dimension (the format
    // bounds only the product): nothing about its shapes can be trusted.
    if let Some(empty) = m.parts.values().find(|p| p.numel() == 0)
        && m.parts.keys().any(|r| {
            QUANT_ROLES
                .iter()
                .any(|q| r.as_str() == *q || r.ends_with("_blocks"))
        })
    {
        return vec![
            Found::new(
                m.name("weight"),
                Scheme::Other,
                "quantized (empty part)".into(),
                all_parts(m),
            )
            .inconsistent(format!("{} has no elements", empty.describe())),
        ];
    }
    if m.parts.values().any(|p| p.numel() == 0) {
        return Vec::new();
    }
    let blocks = gptoss::pairs(cx, m);
    if !blocks.is_empty() {
        return blocks;
    }
    let matchers: [fn(&Context<'_>, &Module<'_>) -> Option<LogicalTensor>; 8] = [
        bnb::bnb4,
        bnb::bnb8,
        ct::pack,
        ct::minifloat,
        gptq::gptq_or_awq,
        mlx::mlx,
        fp8::scaled,
        recognized_only,
    ];
    matchers.iter().find_map(|f| f(cx, m)).into_iter().collect()
}

/// Roles that only quantized weights have.
const QUANT_ROLES: [&str; 14] = [
    "qweight",
    "qzeros",
    "scales",
    "weight_packed",
    "weight_scale",
    "weight_scale_inv",
    "weight_global_scale",
    "weight_scale_2",
    "weight.absmax",
    "weight.quant_map",
    "SCB",
    "biases",
    "q_weight",
    "trellis",
];

/// Further roles that, with a sibling, make a quantization signature.
const SIGNATURE_ROLES: [&str; 7] = [
    "blocks",
    "scale",
    "g_idx",
    "W_q",
    "B",
    "weight_shape",
    "q_scale",
];

/// Signatures of schemes that are recognized and not decoded.
fn recognized_only(_: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let (scheme, why) = if m.has("q_weight") && m.has("q_scale") {
        (
            "EXL2",
            "EXL2 variable-bit groups are shuffled for the exllamav2 kernel",
        )
    } else if m.has("trellis") {
        (
            "EXL3",
            "EXL3 needs trellis decoding and the Hadamard transform",
        )
    } else if m.has("W_q") {
        ("HQQ", "HQQ's layout and metadata vary by version")
    } else if m.has("B") && m.has("s") {
        (
            "Marlin",
            "Marlin weights are permuted into the kernel's tiles",
        )
    } else if m.has("weight_packed") && m.has("scale_packed") && m.has("meta") {
        (
            "compressed-tensors marlin-24",
            "a legacy 2:4-sparse Marlin format",
        )
    } else if m.parts.keys().any(|r| r.starts_with("weight:")) {
        (
            "torchao",
            "torchao tensor subclasses depend on the torchao version",
        )
    } else if m.has("weight._data") && m.has("weight._scale") {
        ("quanto", "quanto is recognized by its names only")
    } else {
        return None;
    };
    Some(
        Found::new(
            m.name("weight"),
            Scheme::Other,
            format!("{scheme} (not decoded)"),
            all_parts(m),
        )
        .recognized(format!(
            "{scheme}: recognized, dequantization not supported ({why})"
        )),
    )
}

/// The label of an integer scheme: "GPTQ int4 g128", "… per-channel".
fn int_label(family: &str, bits: u32, group: Option<u64>) -> String {
    match group {
        Some(g) => format!("{family} int{bits} g{g}"),
        None => format!("{family} int{bits} per-channel"),
    }
}

/// The config value at `key` as an integer, in any of its spellings.
fn cfg_int(config: &Value, keys: &[&str]) -> Option<i64> {
    keys.iter()
        .find_map(|k| config.get(*k).and_then(Value::as_i64))
}
