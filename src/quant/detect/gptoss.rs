//! gpt-oss MoE experts (QUANT.md §4): `X_blocks` U8 `[..., K/32, 16]` and
//! `X_scales` U8 `[..., K/32]`, MXFP4 without a config; also the original
//! OpenAI layout's `X.blocks` / `X.scales`.

use super::{Context, Found, Grid, Layout, LogicalTensor, Module, Scale, Scheme};
use crate::dtype::Dtype;

pub(super) fn pairs(_cx: &Context<'_>, m: &Module<'_>) -> Vec<LogicalTensor> {
    let mut out = Vec::new();
    for (role, blocks) in &m.parts {
        let (stem, scales_role) = if role == "blocks" {
            (None, "scales".to_string())
        } else if let Some(stem) = role.strip_suffix("_blocks") {
            (Some(stem), format!("{stem}_scales"))
        } else {
            continue;
        };
        let Some(scales) = m.get(&scales_role) else {
            continue;
        };
        let name = match stem {
            Some(s) => m.name(s),
            None => m.prefix.clone(),
        };
        let parts = vec![(role.clone(), blocks.t), (scales_role.clone(), scales.t)];
        let found = Found::new(name, Scheme::GptOssMxfp4, "MXFP4".into(), parts)
            .bits(4)
            .group(Some(32));
        let bs = blocks.shape();
        let ok = blocks.dtype() == Dtype::U8
            && scales.dtype() == Dtype::U8
            && bs.len() >= 2
            && bs.last() == Some(&16)
            && scales.shape() == &bs[..bs.len() - 1];
        if !ok {
            out.push(found.inconsistent(format!(
                "MXFP4 blocks and scales disagree: {} and {} (expected U8 [..., G, 16] and U8 [..., G])",
                blocks.describe(),
                scales.describe()
            )));
            continue;
        }
        let lead = &bs[..bs.len() - 2];
        let groups = bs[bs.len() - 2];
        let k = groups * 32;
        let rows: u64 = lead.iter().product();
        let mut shape = lead.to_vec();
        shape.push(k);
        out.push(found.shape(shape).decoded(Layout::Minifloat {
            packed: blocks.t,
            code: Dtype::F4,
            scale: Scale {
                t: scales.t,
                dtype: Dtype::F8E8M0,
                grid: Grid {
                    rows: 1,
                    width: 32,
                    cols: groups,
                },
            },
            global: None,
            rows,
            k,
            row_bytes: groups * 16,
        }));
    }
    out
}
