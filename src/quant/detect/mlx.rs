//! MLX (QUANT.md §7): `weight` U32 with `scales` (+ `biases` for affine),
//! the mode and group from the config's `quantization` (per-layer
//! overrides included), else from the shapes.

use serde_json::Value;

use super::{
    Context, Found, Grid, Layout, LogicalTensor, Module, Scale, Scheme, ZeroPoint, dims2,
    int_label, is_float_scale, parts_of, round_dtype,
};
use crate::dtype::Dtype;

const ROLES: [&str; 3] = ["weight", "scales", "biases"];

#[expect(
    clippy::too_many_lines,
    reason = "one check after another, each with its evidence"
)]
pub(super) fn mlx(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let weight = m.get("weight").filter(|w| w.dtype() == Dtype::U32)?;
    let scales = m.get("scales")?;
    let biases = m.get("biases");
    let body = &cx.config.body;
    // A per-layer override: `"<module>": {group_size, bits}`.
    let layer = body.get(&m.prefix).filter(|v| v.is_object());
    let field = |k: &str| {
        layer
            .and_then(|l| l.get(k))
            .or_else(|| body.get(k))
            .and_then(Value::as_u64)
    };
    let mode = layer
        .and_then(|l| l.get("mode"))
        .or_else(|| body.get("mode"))
        .and_then(Value::as_str)
        .unwrap_or(if biases.is_some() { "affine" } else { "" })
        .to_ascii_lowercase();
    let found = Found::new(
        m.name("weight"),
        Scheme::MlxAffine,
        "MLX".into(),
        parts_of(m, &ROLES),
    );
    let (Some((n, words)), Some((sn, sc))) = (dims2(weight), dims2(scales)) else {
        return Some(found.inconsistent(format!(
            "MLX weight and scales must be 2-D: {}, {}",
            weight.describe(),
            scales.describe()
        )));
    };
    if sn != n || sc == 0 {
        return Some(found.inconsistent(format!(
            "MLX scales {} do not fit the weight {}",
            scales.describe(),
            weight.describe()
        )));
    }
    let bytes = words * 4;
    if mode == "affine" {
        let Some(biases) = biases else {
            return Some(found.inconsistent("MLX affine needs biases".into()));
        };
        if biases.shape() != scales.shape()
            || !is_float_scale(scales.dtype())
            || biases.dtype() != scales.dtype()
        {
            return Some(found.inconsistent(format!(
                "MLX biases must match the scales: {}, {}",
                biases.describe(),
                scales.describe()
            )));
        }
        let fits = |g: u64| {
            let k = sc.checked_mul(g).filter(|&k| k > 0)?;
            (words * 32 % k == 0)
                .then(|| words * 32 / k)
                .filter(|b| matches!(b, 2 | 3 | 4 | 5 | 6 | 8))
        };
        // The shapes give bits × group only: 8-bit g32, 4-bit g64 and 2-bit
        // g128 look alike. The config decides; without it MLX's default
        // group (64) is assumed, and said.
        let (cfg_group, cfg_bits) = (field("group_size"), field("bits"));
        let candidates: Vec<(u64, u64)> = cfg_group
            .map_or_else(|| vec![64, 32, 128], |g| vec![g])
            .into_iter()
            .filter_map(|g| fits(g).map(|b| (g, b)))
            .filter(|&(_, b)| cfg_bits.is_none_or(|c| c == b))
            .collect();
        let Some(&(group, bits)) = candidates.first() else {
            return Some(found.inconsistent(format!(
                "MLX: {} and scales {} fit no group size with {} (config group_size {}, bits {})",
                weight.describe(),
                scales.describe(),
                "2, 3, 4, 5, 6 or 8 bits",
                cfg_group.map_or("none".into(), |g| g.to_string()),
                cfg_bits.map_or("none".into(), |b| b.to_string())
            )));
        };
        let warning = if cfg_group.is_none() && candidates.len() > 1 {
            format!(
                "the config gives no group_size: assumed {group} ({bits} bits); the shapes also fit {}",
                candidates[1..]
                    .iter()
                    .map(|(g, b)| format!("{b} bits in groups of {g}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        };
        let k = sc * group;
        let mut found = found
            .bits(bits as u32)
            .group(Some(group))
            .zero(ZeroPoint::Bias)
            .shape(vec![n, k])
            .value_dtype(round_dtype(scales.dtype()));
        found.lt.label = int_label("MLX", bits as u32, Some(group));
        return Some(found.decoded_with(
            Layout::MlxAffine {
                weight: weight.t,
                scales: scales.t,
                biases: biases.t,
                bits: bits as u32,
                n,
                k,
                group,
            },
            warning,
        ));
    }
    if scales.dtype() != Dtype::U8 {
        return Some(found.inconsistent(format!(
            "MLX mode \"{mode}\" wants U8 scales: {}",
            scales.describe()
        )));
    }
    // FP modes: mxfp4 (32 per scale, 2 per byte), nvfp4 (16, 2), mxfp8 (32, 1).
    let pick = match mode.as_str() {
        "mxfp4" => Some((Scheme::Mxfp4, 32, 2)),
        "nvfp4" => Some((Scheme::Nvfp4, 16, 2)),
        "mxfp8" => Some((Scheme::Mxfp8, 32, 1)),
        "" => [
            (Scheme::Mxfp4, 32, 2),
            (Scheme::Mxfp8, 32, 1),
            (Scheme::Nvfp4, 16, 2),
        ]
        .into_iter()
        .find(|&(_, g, per)| bytes * per == sc * g),
        _ => None,
    };
    let Some((scheme, group, per)) = pick else {
        return Some(found.recognized(format!("MLX mode \"{mode}\": recognized, not decoded")));
    };
    let k = sc * group;
    let mut found = Found { lt: found.lt };
    found.lt.scheme = scheme;
    let found = found
        .group(Some(group))
        .shape(vec![n, k])
        .bits(if per == 2 { 4 } else { 8 });
    if bytes * per != k {
        return Some(found.inconsistent(format!(
            "MLX {mode}: {} holds {} codes per row, the scales {} say {k}",
            weight.describe(),
            bytes * per,
            scales.describe()
        )));
    }
    let grid = Grid {
        rows: 1,
        width: group,
        cols: sc,
    };
    let mut found = found;
    found.lt.label = match scheme {
        Scheme::Mxfp4 => "MXFP4 (MLX)",
        Scheme::Nvfp4 => "NVFP4 (MLX)",
        _ => "MXFP8 (MLX)",
    }
    .into();
    let scale_dtype = if scheme == Scheme::Nvfp4 {
        Dtype::F8E4M3
    } else {
        Dtype::F8E8M0
    };
    let scale = Scale {
        t: scales.t,
        dtype: scale_dtype,
        grid,
    };
    Some(if per == 2 {
        found.decoded(Layout::Minifloat {
            packed: weight.t,
            code: Dtype::F4,
            scale,
            global: None,
            rows: n,
            k,
            row_bytes: bytes,
        })
    } else {
        found.decoded(Layout::Scaled {
            weight: weight.t,
            code: Dtype::F8E4M3,
            scale,
            zero: None,
            per_127: false,
            n,
            k,
        })
    })
}
