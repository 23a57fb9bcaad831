//! One byte per element times a scale (QUANT.md §3, §5): FP8 weights with
//! `weight_scale_inv` (DeepSeek), `weight_scale` (compressed-tensors,
//! ModelOpt, FBGEMM) or `scale`, MXFP8 (U8 E8M0 scales per 32), and
//! compressed-tensors' I8 weights (with a zero point when asymmetric).

use serde_json::Value;

use super::{
    Context, Found, Grid, Layout, LogicalTensor, Module, Part, Scale, Scheme, ZeroPoint, dims2,
    int_label, is_float_scale, parts_of, round_dtype,
};
use crate::dtype::Dtype;

const ROLES: [&str; 6] = [
    "weight",
    "weight_scale_inv",
    "weight_scale",
    "scale",
    "weight_zero_point",
    "input_scale",
];

fn is_f8(d: Dtype) -> bool {
    matches!(
        d,
        Dtype::F8E4M3 | Dtype::F8E5M2 | Dtype::F8E4M3Fnuz | Dtype::F8E5M2Fnuz
    )
}

/// The grid a scale of `shape` spans over a weight `[n, k]`, preferring
/// `block` (the config's `weight_block_size`) for 2-D grids.
fn grid_of(shape: &[u64], n: u64, k: u64, block: Option<(u64, u64)>) -> Option<(Grid, String)> {
    let numel: u64 = shape.iter().product();
    if numel == 1 {
        return Some((
            Grid {
                rows: n.max(1),
                width: k.max(1),
                cols: 1,
            },
            "per-tensor".into(),
        ));
    }
    let (r, c) = match shape {
        [r] => (*r, 1),
        [r, c] | [1, r, c] => (*r, *c),
        _ => return None,
    };
    if (r, c) == (n, k) {
        return Some((
            Grid {
                rows: 1,
                width: 1,
                cols: k,
            },
            "per-element".into(),
        ));
    }
    if r == n && c == 1 {
        return Some((
            Grid {
                rows: 1,
                width: k.max(1),
                cols: 1,
            },
            "per-channel".into(),
        ));
    }
    let (bh, bw) = match block {
        Some((bh, bw)) if bh > 0 && bw > 0 && n.div_ceil(bh) == r && k.div_ceil(bw) == c => {
            (bh, bw)
        }
        _ => {
            let side = |len: u64, cells: u64| {
                if cells == 0 {
                    return None;
                }
                [128, 64, 32, 16, 256]
                    .into_iter()
                    .find(|&b| len.div_ceil(b) == cells)
                    .or_else(|| {
                        Some(len.div_ceil(cells)).filter(|&b| b > 0 && len.div_ceil(b) == cells)
                    })
            };
            (side(n, r)?, side(k, c)?)
        }
    };
    let label = if bh == 1 {
        format!("g{bw}")
    } else if bh == bw {
        format!("block {bh}")
    } else {
        format!("block {bh}×{bw}")
    };
    Some((
        Grid {
            rows: bh,
            width: bw,
            cols: c,
        },
        label,
    ))
}

pub(super) fn scaled(cx: &Context<'_>, m: &Module<'_>) -> Option<LogicalTensor> {
    let weight = m.get("weight")?;
    let code = weight.dtype();
    if !is_f8(code) && code != Dtype::I8 {
        return None;
    }
    let scale: Part<'_> = ["weight_scale_inv", "weight_scale", "scale"]
        .into_iter()
        .find_map(|r| m.get(r))?;
    let int8 = code == Dtype::I8;
    let scheme = if int8 { Scheme::CtInt8 } else { Scheme::Fp8 };
    let label = if int8 { "CT int8" } else { "FP8" };
    let found = Found::new(m.name("weight"), scheme, label.into(), parts_of(m, &ROLES)).bits(8);
    let Some((n, k)) = dims2(weight) else {
        return Some(found.inconsistent(format!("the weight must be 2-D: {}", weight.describe())));
    };
    let found = found.shape(vec![n, k]);
    let mx = scale.dtype() == Dtype::U8 || scale.dtype() == Dtype::F8E8M0;
    if !is_float_scale(scale.dtype()) && !mx {
        return Some(found.inconsistent(format!(
            "the scale must be a float or E8M0: {}",
            scale.describe()
        )));
    }
    let block = cx
        .config
        .body
        .get("weight_block_size")
        .and_then(Value::as_array)
        .and_then(|a| Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?)));
    let Some((grid, how)) = (if mx && scale.dtype() == Dtype::U8 {
        (dims2(scale) == Some((n, k.div_ceil(32)))).then(|| {
            (
                Grid {
                    rows: 1,
                    width: 32,
                    cols: k.div_ceil(32),
                },
                "g32".to_string(),
            )
        })
    } else {
        grid_of(scale.shape(), n, k, block)
    }) else {
        return Some(found.inconsistent(format!(
            "the scale {} spans no grid of the weight {}",
            scale.describe(),
            weight.describe()
        )));
    };
    let scale_dtype = if mx { Dtype::F8E8M0 } else { scale.dtype() };
    let zero = match m.get("weight_zero_point") {
        Some(z)
            if z.shape() == scale.shape()
                && matches!(
                    z.dtype(),
                    Dtype::I8 | Dtype::I32 | Dtype::F32 | Dtype::F16 | Dtype::BF16
                ) =>
        {
            Some(Scale {
                t: z.t,
                dtype: z.dtype(),
                grid,
            })
        }
        Some(z) => {
            return Some(found.inconsistent(format!(
                "weight_zero_point {} does not match the scale {}",
                z.describe(),
                scale.describe()
            )));
        }
        None => None,
    };
    let mut found = found
        .group((grid.width < k).then_some(grid.width))
        .zero(if zero.is_some() {
            ZeroPoint::Stored
        } else {
            ZeroPoint::None
        })
        .value_dtype(round_dtype(scale_dtype));
    found.lt.label = if int8 {
        int_label("CT", 8, found.lt.group_size)
    } else if scale.dtype() == Dtype::U8 {
        found.lt.scheme = Scheme::Mxfp8;
        "MXFP8".into()
    } else if mx {
        format!("FP8 {how} (ue8m0)")
    } else {
        let e = if matches!(code, Dtype::F8E5M2 | Dtype::F8E5M2Fnuz) {
            "FP8 E5M2"
        } else {
            "FP8"
        };
        format!("{e} {how}")
    };
    Some(found.decoded(Layout::Scaled {
        weight: weight.t,
        code,
        scale: Scale {
            t: scale.t,
            dtype: scale_dtype,
            grid,
        },
        zero,
        per_127: false,
        n,
        k,
    }))
}
