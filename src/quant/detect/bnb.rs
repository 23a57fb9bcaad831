//! bitsandbytes (QUANT.md §6): 4-bit NF4/FP4 with a self-describing JSON
//! blob, and LLM.int8 (`SCB`).

use serde_json::Value;

use super::{
    Context, Found, Grid, Layout, LogicalTensor, Module, Nested, Scale, Scheme, ZeroPoint,
    all_parts, dims2,
};
use crate::dtype::Dtype;

/// The quant-state blob is a few hundred bytes; more is refused.
const MAX_BLOB: u64 = 64 * 1024;

pub(super) fn bnb4(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let (role, blob) = m
        .parts
        .iter()
        .find(|(r, _)| r.starts_with("weight.quant_state.bitsandbytes__"))?;
    let quant_type = role
        .rsplit("__")
        .next()
        .unwrap_or("nf4")
        .to_ascii_uppercase();
    let found = Found::new(
        m.name("weight"),
        Scheme::Bnb4,
        format!("bnb {quant_type}"),
        all_parts(m),
    )
    .bits(4);
    if blob.dtype() != Dtype::U8 || blob.numel() > MAX_BLOB {
        return Some(found.inconsistent(format!(
            "the quant state must be a small U8 blob: {}",
            blob.describe()
        )));
    }
    let state: Value = match serde_json::from_slice(&cx.ck.small_bytes(blob.t)) {
        Ok(v) => v,
        Err(e) => {
            return Some(found.inconsistent(format!(
                "the quant state {} is not JSON: {e}",
                blob.describe()
            )));
        }
    };
    let shape: Option<Vec<u64>> = state
        .get("shape")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_u64).collect());
    let blocksize = state.get("blocksize").and_then(Value::as_u64).unwrap_or(0);
    let (Some(shape), true) = (shape, blocksize > 0) else {
        return Some(
            found.inconsistent(format!("the quant state lacks shape or blocksize: {state}")),
        );
    };
    let Some(numel) = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) else {
        return Some(found.inconsistent(format!("the quant state's shape {shape:?} overflows")));
    };
    let found = found.shape(shape.clone()).group(Some(blocksize));
    let value_dtype = match state.get("dtype").and_then(Value::as_str) {
        Some("bfloat16" | "torch.bfloat16") => Dtype::BF16,
        Some("float16" | "torch.float16") => Dtype::F16,
        _ => Dtype::F32,
    };
    let (Some(weight), Some(absmax), Some(map)) = (
        m.get("weight"),
        m.get("weight.absmax"),
        m.get("weight.quant_map"),
    ) else {
        return Some(found.inconsistent(
            "bitsandbytes 4-bit needs weight, weight.absmax and weight.quant_map".into(),
        ));
    };
    let nblocks = numel.div_ceil(blocksize);
    if weight.info.nbytes() < numel.div_ceil(2) {
        return Some(found.inconsistent(format!(
            "{} holds {} bytes, but {numel} elements of 4 bits need {}",
            weight.describe(),
            weight.info.nbytes(),
            numel.div_ceil(2)
        )));
    }
    if map.dtype() != Dtype::F32 || map.numel() != 16 {
        return Some(found.inconsistent(format!(
            "the quant_map must be F32 [16]: {}",
            map.describe()
        )));
    }
    if absmax.numel() != nblocks {
        return Some(found.inconsistent(format!(
            "{} for {numel} elements in blocks of {blocksize}: {nblocks} expected",
            absmax.describe()
        )));
    }
    let nested = if absmax.dtype() == Dtype::U8 {
        let (Some(na), Some(nm)) = (
            m.get("weight.nested_absmax"),
            m.get("weight.nested_quant_map"),
        ) else {
            return Some(found.inconsistent(
                "a U8 absmax needs weight.nested_absmax and weight.nested_quant_map".into(),
            ));
        };
        let nb = state
            .get("nested_blocksize")
            .and_then(Value::as_u64)
            .unwrap_or(256);
        let offset = state
            .get("nested_offset")
            .and_then(Value::as_f64)
            .unwrap_or(0.0) as f32;
        if nb == 0
            || na.dtype() != Dtype::F32
            || na.numel() != nblocks.div_ceil(nb)
            || nm.dtype() != Dtype::F32
            || nm.numel() != 256
        {
            return Some(found.inconsistent(format!(
                "double quantization parts disagree: {}, {} (nested blocksize {nb})",
                na.describe(),
                nm.describe()
            )));
        }
        Some(Nested {
            absmax: na.t,
            map: nm.t,
            blocksize: nb,
            offset,
        })
    } else if absmax.dtype() == Dtype::F32 {
        None
    } else {
        return Some(
            found.inconsistent(format!("absmax must be F32 or U8: {}", absmax.describe())),
        );
    };
    let mut found = found.value_dtype(value_dtype);
    found.lt.label = format!(
        "bnb {quant_type} b{blocksize}{}",
        if nested.is_some() {
            " double-quant"
        } else {
            ""
        }
    );
    Some(found.decoded(Layout::Bnb4 {
        weight: weight.t,
        absmax: absmax.t,
        quant_map: map.t,
        nested,
        numel,
        blocksize,
    }))
}

pub(super) fn bnb8(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let scb = m.get("SCB")?;
    let weight = m.get("weight")?;
    let found = Found::new(
        m.name("weight"),
        Scheme::Bnb8,
        "bnb int8".into(),
        all_parts(m),
    )
    .bits(8)
    .zero(ZeroPoint::None);
    let Some((n, k)) = dims2(weight) else {
        return Some(found.inconsistent(format!(
            "LLM.int8 weight must be 2-D: {}",
            weight.describe()
        )));
    };
    if weight.dtype() != Dtype::I8 || scb.dtype() != Dtype::F32 || scb.numel() != n {
        return Some(found.inconsistent(format!(
            "LLM.int8 wants weight I8 [N, K] and SCB F32 [N]: {}, {}",
            weight.describe(),
            scb.describe()
        )));
    }
    if let Some(f) = m.get("weight_format") {
        let code = cx_first_byte(cx, f);
        if code != Some(0) {
            return Some(found.shape(vec![n, k]).recognized(format!(
                "LLM.int8 weight_format {code:?} (a GPU tile layout): recognized, not decoded"
            )));
        }
    }
    Some(found.shape(vec![n, k]).decoded(Layout::Scaled {
        weight: weight.t,
        code: Dtype::I8,
        scale: Scale {
            t: scb.t,
            dtype: Dtype::F32,
            grid: Grid {
                rows: 1,
                width: k.max(1),
                cols: 1,
            },
        },
        zero: None,
        per_127: true,
        n,
        k,
    }))
}

fn cx_first_byte(cx: &Context<'_>, p: super::Part<'_>) -> Option<u8> {
    cx.ck.small_bytes(p.t).first().copied()
}
