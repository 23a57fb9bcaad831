//! The `quantization` object of `info --json` (DESIGN.md's contract), and
//! its text form.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::output::{display_name, path_string};
use crate::format::Checkpoint;
use crate::quant::Quantization;

/// One logical tensor.
#[derive(Debug, Serialize)]
pub struct ModuleDoc {
    /// Its logical name (`<module>.weight`).
    pub name: String,
    /// The scheme's identifier (`gptq`, `awq-gemm`, `nvfp4`, …).
    pub scheme: &'static str,
    /// What a table shows ("GPTQ int4 g128").
    pub label: String,
    /// Bits per code (0 when unknown).
    pub bits: u32,
    /// Elements per scale along the input dimension (`null`: per channel,
    /// per tensor, or unknown).
    pub group_size: Option<u64>,
    /// `none`, `stored`, `stored-minus-one` (GPTQ v1) or `bias` (MLX).
    pub zero_point: &'static str,
    /// The shape of the weight it replaces.
    pub logical_shape: Vec<u64>,
    /// The dtype its values are computed in.
    pub value_dtype: &'static str,
    /// Role → stored tensor name.
    pub parts: BTreeMap<String, String>,
    /// `decoded`, `recognized` or `inconsistent`.
    pub status: &'static str,
    /// Why it is not decoded, or a warning; empty otherwise.
    pub message: String,
}

/// The `quantization` object: `null` for a plain checkpoint.
#[derive(Debug, Serialize)]
pub struct QuantDoc {
    /// The config's `quant_method`, or the schemes the tensors show.
    pub method: String,
    /// The path of the config file used, or `null`.
    pub config: Option<String>,
    /// Config files found but not used, with why.
    pub config_problems: Vec<String>,
    /// Every logical tensor.
    pub modules: Vec<ModuleDoc>,
}

impl QuantDoc {
    /// The document of a checkpoint's quantization.
    pub fn new(ck: &Checkpoint, q: &Quantization) -> Self {
        let name_of = |t| ck.info(t).map(|i| i.name().to_owned()).unwrap_or_default();
        Self {
            method: q.method(),
            config: q.config_path().map(|p| path_string(p)),
            config_problems: q
                .config()
                .problems
                .iter()
                .map(|p| format!("{}: {}", path_string(&p.path), p.message))
                .collect(),
            modules: q
                .tensors()
                .iter()
                .map(|lt| ModuleDoc {
                    name: lt.name().to_owned(),
                    scheme: lt.scheme().id(),
                    label: lt.label().to_owned(),
                    bits: lt.bits(),
                    group_size: lt.group_size(),
                    zero_point: lt.zero_point().id(),
                    logical_shape: lt.shape().to_vec(),
                    value_dtype: lt.value_dtype().name(),
                    parts: lt
                        .parts()
                        .iter()
                        .map(|(role, t)| (role.clone(), name_of(*t)))
                        .collect(),
                    status: lt.status().id(),
                    message: lt.message().to_owned(),
                })
                .collect(),
        }
    }

    /// The text form: a summary line and one line per logical tensor.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "quantization: {} ({} logical tensors; config {})",
            display_name(&self.method),
            self.modules.len(),
            self.config.as_deref().map_or("none".into(), display_name)
        );
        for p in &self.config_problems {
            let _ = writeln!(s, "  config problem: {}", display_name(p));
        }
        for m in &self.modules {
            let shape = m
                .logical_shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(
                s,
                "  {}  {}  [{}]  {}",
                display_name(&m.name),
                display_name(&m.label),
                shape,
                m.status
            );
            if !m.message.is_empty() {
                let _ = write!(s, ": {}", display_name(&m.message));
            }
            s.push('\n');
        }
        s
    }
}
