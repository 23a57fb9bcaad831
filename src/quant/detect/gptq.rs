//! GPTQ (QUANT.md §1) and AWQ GEMM (§2): `qweight` + `qzeros` + `scales`
//! (+ `g_idx` for GPTQ), told apart by `g_idx`, the config and the shapes.

use super::{
    Context, Found, Layout, LogicalTensor, Module, Scheme, ZeroPoint, cfg_int, dims2, int_label,
    is_float_scale, parts_of, round_dtype,
};
use crate::dtype::Dtype;

/// Elements of a `g_idx` read to check its range (4 Mi columns).
const MAX_G_IDX: u64 = 1 << 22;

const ROLES: [&str; 4] = ["qweight", "qzeros", "scales", "g_idx"];

pub(super) fn gptq_or_awq(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let (qweight, qzeros, scales) = (m.get("qweight")?, m.get("qzeros")?, m.get("scales")?);
    let body = &cx.config.body;
    let format = cx.config.str_field("checkpoint_format").unwrap_or_default();
    let version = cx.config.str_field("version").unwrap_or_default();
    let is_awq = if m.has("g_idx") {
        false
    } else if cx.method == "awq" {
        true
    } else if cx.method == "gptq" {
        false
    } else {
        // AWQ packs along N: scales have 8 columns per qweight column.
        let (q, s) = (dims2(qweight), dims2(scales));
        matches!((q, s), (Some((_, qc)), Some((_, sc))) if qc.checked_mul(8) == Some(sc))
    };
    let name = m.name("weight");
    let parts = parts_of(m, &ROLES);
    if is_awq {
        let found = Found::new(name, Scheme::AwqGemm, "AWQ int4".into(), parts)
            .bits(4)
            .zero(ZeroPoint::Stored);
        if !version.is_empty() && version != "gemm" {
            return Some(found.recognized(format!(
                "AWQ version \"{version}\": recognized, dequantization not supported \
                 (only the GEMM layout is decoded)"
            )));
        }
        return Some(awq(found, qweight, qzeros, scales, body));
    }
    let found = Found::new(name, Scheme::Gptq, "GPTQ".into(), parts);
    if matches!(
        format.as_str(),
        "marlin" | "gptq_p" | "gguf" | "bitblas" | "qqq"
    ) {
        return Some(found.recognized(format!(
            "GPTQ checkpoint_format \"{format}\": recognized, dequantization not supported"
        )));
    }
    let v1 = !matches!(format.as_str(), "gptq_v2");
    Some(gptq(cx, m, found, v1))
}

fn awq(
    found: Found,
    qweight: super::Part<'_>,
    qzeros: super::Part<'_>,
    scales: super::Part<'_>,
    body: &serde_json::Value,
) -> LogicalTensor {
    let (Some((k, words)), Some((zr, zc)), Some((groups, n))) =
        (dims2(qweight), dims2(qzeros), dims2(scales))
    else {
        return found.inconsistent("AWQ parts must be 2-D".into());
    };
    if qweight.dtype() != Dtype::I32 || qzeros.dtype() != Dtype::I32 {
        return found.inconsistent(format!(
            "AWQ qweight and qzeros must be I32: {} and {}",
            qweight.describe(),
            qzeros.describe()
        ));
    }
    if !is_float_scale(scales.dtype()) {
        return found.inconsistent(format!("AWQ scales must be floats: {}", scales.describe()));
    }
    if words.checked_mul(8) != Some(n) || zc != words || zr != groups || groups == 0 {
        return found.inconsistent(format!(
            "AWQ GEMM shapes disagree: {}, {}, {} (expected qweight [K, N/8], qzeros [K/G, N/8], \
             scales [K/G, N])",
            qweight.describe(),
            qzeros.describe(),
            scales.describe()
        ));
    }
    if k % groups != 0 {
        return found.inconsistent(format!(
            "AWQ: K = {k} rows of qweight is not a multiple of the {groups} scale groups"
        ));
    }
    let group = k / groups;
    if let Some(g) = cfg_int(body, &["group_size", "q_group_size"])
        && g > 0
        && g as u64 != group
    {
        return found.inconsistent(format!(
            "AWQ: the config says group_size {g}, the shapes say {group} ({k} rows for {groups} groups)"
        ));
    }
    if let Some(b) = cfg_int(body, &["bits", "w_bit"])
        && b != 4
    {
        return found.inconsistent(format!("AWQ: the config says {b} bits; AWQ GEMM packs 4"));
    }
    let mut found = found
        .group(Some(group))
        .shape(vec![n, k])
        .value_dtype(round_dtype(scales.dtype()));
    found.lt.label = int_label("AWQ", 4, Some(group));
    found.decoded(Layout::Awq {
        qweight: qweight.t,
        qzeros: qzeros.t,
        scales: scales.t,
        n,
        k,
        group,
    })
}

fn gptq(cx: &Context<'_>, m: &Module<'_>, found: Found, v1: bool) -> LogicalTensor {
    let (Some(qweight), Some(qzeros), Some(scales)) =
        (m.get("qweight"), m.get("qzeros"), m.get("scales"))
    else {
        return found.inconsistent("GPTQ needs qweight, qzeros and scales".into());
    };
    let body = &cx.config.body;
    let (Some((rows, n)), Some((zr, zc)), Some((groups, sn))) =
        (dims2(qweight), dims2(qzeros), dims2(scales))
    else {
        return found.inconsistent(format!(
            "GPTQ parts must be 2-D: {}, {}, {}",
            qweight.describe(),
            qzeros.describe(),
            scales.describe()
        ));
    };
    if qweight.dtype() != Dtype::I32 || qzeros.dtype() != Dtype::I32 {
        return found.inconsistent(format!(
            "GPTQ qweight and qzeros must be I32: {} and {}",
            qweight.describe(),
            qzeros.describe()
        ));
    }
    if !is_float_scale(scales.dtype()) {
        return found.inconsistent(format!("GPTQ scales must be floats: {}", scales.describe()));
    }
    if sn != n || zr != groups || groups == 0 || n == 0 {
        return found.inconsistent(format!(
            "GPTQ shapes disagree: {}, {}, {} (expected qweight [K*b/32, N], qzeros \
             [groups, N*b/32], scales [groups, N])",
            qweight.describe(),
            qzeros.describe(),
            scales.describe()
        ));
    }
    // Bits from the zero points: N*b/32 words per row.
    let Some(bits) = (zc * 32)
        .checked_rem(n)
        .filter(|&r| r == 0)
        .map(|_| (zc * 32 / n) as u32)
        .filter(|b| matches!(b, 2 | 3 | 4 | 8))
    else {
        return found.inconsistent(format!(
            "GPTQ: qzeros has {zc} words per row for N = {n} columns, which fits no bit width \
             of 2, 3, 4 or 8"
        ));
    };
    let k_from_rows = rows * 32 / u64::from(bits);
    let g_idx = m.get("g_idx");
    let k = match g_idx {
        Some(g) => {
            if g.dtype() != Dtype::I32 || g.shape().len() != 1 {
                return found.inconsistent(format!("GPTQ g_idx must be I32 [K]: {}", g.describe()));
            }
            g.numel()
        }
        None => k_from_rows,
    };
    if (rows * 32) % u64::from(bits) != 0 || k_from_rows != k || k == 0 {
        return found.inconsistent(format!(
            "GPTQ: {} holds {} rows of {bits}-bit codes, but K = {k}",
            qweight.describe(),
            rows * 32 / u64::from(bits)
        ));
    }
    if let Some(b) = cfg_int(body, &["bits"])
        && body.get("dynamic").is_none_or(serde_json::Value::is_null)
        && b != i64::from(bits)
    {
        return found.inconsistent(format!(
            "GPTQ: the config says bits = {b}, the shapes say {bits} (qzeros {zc} words per \
             row for N = {n}, qweight {rows} rows for K = {k})"
        ));
    }
    // `dynamic` overrides bits and group per module: the shapes decide.
    let dynamic = body.get("dynamic").is_some_and(|d| !d.is_null());
    let group = cfg_int(body, &["group_size"])
        .filter(|&g| g > 0 && !dynamic)
        .map_or_else(|| k.div_ceil(groups), |g| g as u64);
    if group == 0 || k.div_ceil(group) != groups {
        return found.inconsistent(format!(
            "GPTQ: {groups} scale groups do not fit K = {k} with group_size {group}"
        ));
    }
    let mut act_order = false;
    if let Some(g) = g_idx {
        let Some(values) = cx.ints(g, MAX_G_IDX) else {
            return found.inconsistent(format!("GPTQ g_idx too large to check: {}", g.describe()));
        };
        if let Some((i, v)) = values
            .iter()
            .enumerate()
            .find(|(_, v)| **v < 0 || **v as u64 >= groups)
        {
            return found.inconsistent(format!(
                "GPTQ g_idx[{i}] = {v} is outside the {groups} groups of scales"
            ));
        }
        act_order = values
            .iter()
            .enumerate()
            .any(|(i, v)| *v as u64 != i as u64 / group);
    }
    let per_channel = groups == 1;
    let mut label = int_label("GPTQ", bits, (!per_channel).then_some(group));
    if act_order {
        label.push_str(" act-order");
    }
    let sym = cx.config.bool_field("sym").unwrap_or(true);
    let warning = if v1 && !sym {
        "asymmetric GPTQ v1 zeros: exact for GPTQModel files; AutoGPTQ's asymmetric packer \
         corrupts zeros of 0 beyond repair"
            .to_string()
    } else {
        String::new()
    };
    let mut found = found
        .bits(bits)
        .group((!per_channel).then_some(group))
        .zero(if v1 {
            ZeroPoint::StoredMinusOne
        } else {
            ZeroPoint::Stored
        })
        .shape(vec![n, k])
        .value_dtype(round_dtype(scales.dtype()));
    found.lt.label = label;
    found.decoded_with(
        Layout::Gptq {
            qweight: qweight.t,
            qzeros: qzeros.t,
            scales: scales.t,
            g_idx: g_idx.map(|g| g.t),
            bits,
            n,
            k,
            group,
            groups,
            v1,
            act_order,
        },
        warning,
    )
}
