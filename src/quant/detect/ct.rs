//! compressed-tensors (QUANT.md §3): `pack-quantized` INT codes in I32,
//! and the minifloat formats packed in U8 (NVFP4, MXFP4, MXFP6), with
//! ModelOpt's NVFP4 beside them (same packing, a multiplying global scale).

use serde_json::Value;

use super::{
    Context, Found, Grid, Layout, LogicalTensor, Module, Scale, Scheme, ZeroPoint, dims2,
    int_label, is_float_scale, parts_of, round_dtype,
};
use crate::dtype::Dtype;

/// The `weights` arguments of the config group that targets `module`.
pub(super) fn weight_args<'a>(cx: &'a Context<'_>, module: &str) -> Option<&'a Value> {
    let body = &cx.config.body;
    let matches = |target: &str| {
        if let Some(re) = target.strip_prefix("re:") {
            regex::Regex::new(re).is_ok_and(|r| r.is_match(module))
        } else {
            // Class names (Linear, …) cannot be checked against a file:
            // any target that is not a module path matches.
            target == module || !target.contains('.')
        }
    };
    let ignored = body
        .get("ignore")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter().filter_map(Value::as_str).any(|t| {
                t.strip_prefix("re:").map_or(t == module, |re| {
                    regex::Regex::new(re).is_ok_and(|r| r.is_match(module))
                })
            })
        });
    if ignored {
        return None;
    }
    // A group naming the module (exactly or by regex) wins over one that
    // targets a class such as `Linear`.
    let groups = body.get("config_groups")?.as_object()?;
    let targets = |g: &Value| -> Vec<String> {
        g.get("targets")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let by_name = groups.values().find(|g| {
        targets(g)
            .iter()
            .any(|t| (t.starts_with("re:") || t.contains('.')) && matches(t))
    });
    by_name
        .or_else(|| {
            groups
                .values()
                .find(|g| targets(g).iter().any(|t| matches(t)))
        })?
        .get("weights")
}

fn arg_int(args: Option<&Value>, key: &str) -> Option<u64> {
    args?.get(key)?.as_u64()
}

/// compressed-tensors version as (major, minor), when the config has one.
fn version(cx: &Context<'_>) -> Option<(u64, u64)> {
    let v = cx.config.str_field("version")?;
    let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

const PACK_ROLES: [&str; 5] = [
    "weight_packed",
    "weight_shape",
    "weight_scale",
    "weight_zero_point",
    "weight_g_idx",
];

/// `weight_packed` (I32) + `weight_shape`: pack-quantized INT 1-8 bit.
#[expect(
    clippy::too_many_lines,
    reason = "one check after another, each with its evidence"
)]
pub(super) fn pack(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let packed = m.get("weight_packed")?;
    let shape_part = m.get("weight_shape")?;
    let found = Found::new(
        m.name("weight"),
        Scheme::CtPack,
        "CT int".into(),
        parts_of(m, &PACK_ROLES),
    );
    let Some(&[n, k]) = cx.ints(shape_part, 8).as_deref() else {
        return Some(found.inconsistent(format!(
            "weight_shape must hold two integers: {}",
            shape_part.describe()
        )));
    };
    let (n, k) = (n.max(0) as u64, k.max(0) as u64);
    let Some(scale) = m.get("weight_scale") else {
        return Some(found.inconsistent("pack-quantized without weight_scale".into()));
    };
    // A per-tensor scale (`strategy: tensor`) is one value for every row.
    let per_tensor = scale.numel() == 1 && scale.shape().len() <= 2;
    let scale_dims = if per_tensor {
        Some((n, 1))
    } else {
        dims2(scale)
    };
    let (Some((rows, cols)), Some((sr, sc))) = (dims2(packed), scale_dims) else {
        return Some(found.inconsistent(format!(
            "pack-quantized parts must be 2-D: {}, {}",
            packed.describe(),
            scale.describe()
        )));
    };
    if packed.dtype() != Dtype::I32 || !is_float_scale(scale.dtype()) {
        return Some(found.inconsistent(format!(
            "pack-quantized wants I32 codes and float scales: {}, {}",
            packed.describe(),
            scale.describe()
        )));
    }
    if rows != n || sr != n || n == 0 || k == 0 || sc == 0 {
        return Some(found.inconsistent(format!(
            "pack-quantized shapes disagree with weight_shape [{n}, {k}]: {}, {}",
            packed.describe(),
            scale.describe()
        )));
    }
    let args = weight_args(cx, &m.prefix);
    let dense_cols = |b: u64| (k * b).div_ceil(32);
    let padded_cols = |b: u64| k.div_ceil(32 / b);
    let (bits, dense) = match arg_int(args, "num_bits") {
        Some(b) if (1..=8).contains(&b) => {
            let old = version(cx).is_some_and(|v| v < (0, 17));
            if padded_cols(b) == cols && (old || dense_cols(b) != cols) {
                (b, b.is_power_of_two())
            } else if dense_cols(b) == cols {
                (b, true)
            } else {
                return Some(found.inconsistent(format!(
                    "the config says {b} bits, but {} holds {cols} words per row for K = {k} \
                     ({} dense, {} padded)",
                    packed.describe(),
                    dense_cols(b),
                    padded_cols(b)
                )));
            }
        }
        _ => match (1..=8u64).find(|&b| dense_cols(b) == cols) {
            Some(b) => (b, true),
            None => match (1..=8u64).find(|&b| padded_cols(b) == cols) {
                Some(b) => (b, false),
                None => {
                    return Some(found.inconsistent(format!(
                        "{} fits no bit width for K = {k}",
                        packed.describe()
                    )));
                }
            },
        },
    };
    let bits = bits as u32;
    let group = if sc == 1 {
        None
    } else {
        let g = arg_int(args, "group_size")
            .filter(|&g| g > 0)
            .unwrap_or_else(|| k.div_ceil(sc));
        if k.div_ceil(g) != sc {
            return Some(found.inconsistent(format!(
                "{} has {sc} scale columns, but K = {k} in groups of {g} needs {}",
                scale.describe(),
                k.div_ceil(g)
            )));
        }
        Some(g)
    };
    let width = group.unwrap_or(k);
    let zero = match m.get("weight_zero_point") {
        None => {
            if args
                .and_then(|a| a.get("symmetric"))
                .and_then(Value::as_bool)
                == Some(false)
            {
                return Some(
                    found.inconsistent("asymmetric in the config, but no weight_zero_point".into()),
                );
            }
            None
        }
        Some(z) => match dims2(z) {
            // Packed down N as the weights are packed: densely, or (before
            // 0.17) 32/b codes per word.
            Some((zr, zc))
                if zc == sc
                    && zr
                        == if dense {
                            (n * u64::from(bits)).div_ceil(32)
                        } else {
                            n.div_ceil(u64::from(32 / bits))
                        } =>
            {
                Some((z.t, true))
            }
            Some((zr, zc)) if zc == sc && zr == n => Some((z.t, false)),
            _ => {
                return Some(found.inconsistent(format!(
                    "weight_zero_point has the wrong shape: {} (scales {})",
                    z.describe(),
                    scale.describe()
                )));
            }
        },
    };
    if let Some(z) = zero
        && !matches!(
            cx.ck.info(z.0).map(crate::TensorInfo::dtype),
            Some(Dtype::I32 | Dtype::I8)
        )
    {
        return Some(found.inconsistent("weight_zero_point must be I32 or I8".into()));
    }
    let g_idx = m.get("weight_g_idx");
    if let Some(g) = g_idx {
        let ok = g.shape() == [k]
            && g.dtype() == Dtype::I32
            && cx
                .ints(g, 1 << 22)
                .is_some_and(|v| v.iter().all(|&x| x >= 0 && (x as u64) < sc));
        if !ok {
            return Some(found.inconsistent(format!(
                "weight_g_idx must be I32 [{k}] with groups below {sc}: {}",
                g.describe()
            )));
        }
    }
    let mut found = found
        .bits(bits)
        .group(group)
        .zero(if zero.is_some() {
            ZeroPoint::Stored
        } else {
            ZeroPoint::None
        })
        .shape(vec![n, k])
        .value_dtype(round_dtype(scale.dtype()));
    found.lt.label = if per_tensor {
        format!("CT int{bits} per-tensor")
    } else {
        int_label("CT", bits, group)
    };
    Some(found.decoded(Layout::CtPack {
        packed: packed.t,
        scale: Scale {
            t: scale.t,
            dtype: scale.dtype(),
            grid: Grid {
                rows: if per_tensor { n } else { 1 },
                width,
                cols: sc,
            },
        },
        zero,
        g_idx: g_idx.map(|g| g.t),
        bits,
        n,
        k,
        dense,
        row_bytes: cols * 4,
    }))
}

const MINI_ROLES: [&str; 6] = [
    "weight_packed",
    "weight",
    "weight_scale",
    "weight_global_scale",
    "weight_scale_2",
    "input_global_scale",
];

/// `weight_packed` U8 with F8 or U8 scales (compressed-tensors NVFP4,
/// MXFP4, MXFP6), and ModelOpt's `weight` U8 + `weight_scale` F8 +
/// `weight_scale_2`.
pub(super) fn minifloat(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let (packed, modelopt) = match (m.get("weight_packed"), m.get("weight")) {
        (Some(p), _) if p.dtype() == Dtype::U8 => (p, false),
        (None, Some(w)) if w.dtype() == Dtype::U8 && m.has("weight_scale_2") => (w, true),
        _ => return None,
    };
    let scale = m.get("weight_scale")?;
    let global = if modelopt {
        m.get("weight_scale_2")
    } else {
        m.get("weight_global_scale")
    };
    let name = m.name("weight");
    let parts = parts_of(m, &MINI_ROLES);
    let (Some((n, cols)), Some((sr, sc))) = (dims2(packed), dims2(scale)) else {
        return Some(
            Found::new(name, Scheme::Nvfp4, "FP4".into(), parts).inconsistent(format!(
                "packed FP4/FP6 parts must be 2-D: {}, {}",
                packed.describe(),
                scale.describe()
            )),
        );
    };
    let f8_scale = matches!(scale.dtype(), Dtype::F8E4M3);
    let (scheme, label, code, group, k) = if f8_scale {
        (Scheme::Nvfp4, "NVFP4", Dtype::F4, 16, cols * 2)
    } else if scale.dtype() == Dtype::U8 && cols * 2 == sc * 32 {
        (Scheme::Mxfp4, "MXFP4", Dtype::F4, 32, cols * 2)
    } else if scale.dtype() == Dtype::U8 && cols * 4 == sc * 32 * 3 {
        (Scheme::Mxfp6, "MXFP6", Dtype::F6E2M3, 32, sc * 32)
    } else {
        return Some(
            Found::new(name, Scheme::Nvfp4, "FP4".into(), parts).inconsistent(format!(
                "packed weights {} do not fit the scales {} of NVFP4 (F8_E4M3, K/16), MXFP4 or \
                 MXFP6 (U8, K/32)",
                packed.describe(),
                scale.describe()
            )),
        );
    };
    let found = Found::new(name, scheme, label.into(), parts)
        .bits(code.bits())
        .group(Some(group))
        .shape(vec![n, k]);
    if sr != n || sc != k.div_ceil(group) {
        return Some(found.inconsistent(format!(
            "{label}: {} for weights {} (expected [{n}, {}])",
            scale.describe(),
            packed.describe(),
            k.div_ceil(group)
        )));
    }
    if scheme == Scheme::Nvfp4 && global.is_none() {
        return Some(found.inconsistent(format!(
            "NVFP4 without its global scale ({})",
            if modelopt {
                "weight_scale_2"
            } else {
                "weight_global_scale"
            }
        )));
    }
    if let Some(g) = global
        && (g.numel() != 1 || g.dtype() != Dtype::F32)
    {
        return Some(found.inconsistent(format!(
            "the global scale must be one F32: {}",
            g.describe()
        )));
    }
    let mut found = if modelopt {
        found
    } else {
        // compressed-tensors casts the result to the model's dtype.
        found.value_dtype(cx.model_dtype)
    };
    if modelopt {
        found.lt.label = "NVFP4 (ModelOpt)".into();
    }
    Some(found.decoded(Layout::Minifloat {
        packed: packed.t,
        code,
        scale: Scale {
            t: scale.t,
            dtype: if f8_scale {
                Dtype::F8E4M3
            } else {
                Dtype::F8E8M0
            },
            grid: Grid {
                rows: 1,
                width: group,
                cols: sc,
            },
        },
        global: global.map(|g| (g.t, !modelopt)),
        rows: n,
        k,
        row_bytes: cols,
    }))
}
