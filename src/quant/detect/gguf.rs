//! GGUF's block types (GGUF.md): every tensor of a block type is a logical
//! tensor of its own name and row-major shape, its one part the stored
//! blocks (`U8`, a row of blocks per logical row). Nothing is grouped by
//! module: the type is in the tensor info.

use super::Layout;
use crate::dtype::Dtype;
use crate::format::Checkpoint;
use crate::format::gguf::types::GgmlType;
use crate::quant::{LogicalTensor, Scheme, Status, ZeroPoint};

/// The types gguf-py has no decoder for: listed, not decoded.
pub(crate) fn decodable(t: GgmlType) -> bool {
    !t.is_stored() && !matches!(t.name(), "Q8_1" | "Q8_K" | "Q1_0")
}

/// Bits per code of a block type (before its scales).
fn code_bits(t: GgmlType) -> u32 {
    let name = t.name();
    match name {
        "Q8_0" | "Q8_1" | "Q8_K" => 8,
        "Q6_K" => 6,
        "TQ1_0" | "TQ2_0" => 2,
        _ => name
            .chars()
            .find_map(|c| c.to_digit(10))
            .filter(|&d| (1..=8).contains(&d))
            .unwrap_or(0),
    }
}

/// One logical tensor per tensor of a block type of a GGUF checkpoint.
pub(super) fn logical_tensors(ck: &Checkpoint) -> Vec<LogicalTensor> {
    let mut out = Vec::new();
    for (t, info) in ck.entries() {
        let Some(g) = ck.shards().get(t.shard()).and_then(|s| s.file().gguf()) else {
            continue;
        };
        let (Some(&ty), Some(shape)) = (g.types.get(t.index()), g.shapes.get(t.index())) else {
            continue;
        };
        if ty.is_stored() {
            continue;
        }
        let (elements, _) = ty.block();
        let k = shape.last().copied().unwrap_or(1);
        let ok = decodable(ty);
        out.push(LogicalTensor {
            name: info.name().to_owned(),
            scheme: Scheme::Gguf,
            label: ty.name().to_owned(),
            bits: code_bits(ty),
            group_size: Some(elements),
            zero_point: ZeroPoint::None,
            shape: shape.clone(),
            parts: vec![("blocks".to_owned(), t)],
            status: if ok {
                Status::Decoded
            } else {
                Status::Recognized
            },
            message: if ok {
                String::new()
            } else {
                format!(
                    "{} is listed, not decoded: gguf-py, the reference, has no decoder for it",
                    ty.name()
                )
            },
            value_dtype: Dtype::F32,
            layout: ok.then_some(Layout::Gguf { blocks: t, ty, k }),
        });
    }
    out
}
