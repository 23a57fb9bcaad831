//! What a series says beyond its tensors: their layers and roles
//! aggregated, and the events (a tensor's first NaN or Inf, frozen
//! tensors, update spikes, tensors that appear or vanish).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::Serialize;

use super::{Event, GroupSeries, LayerSeries, RoleSeries, TensorSeries};

/// What an event is about.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The first step at which the tensors hold a NaN or an Inf.
    Nonfinite,
    /// Tensors whose bytes never change across the series (at the first
    /// step).
    Frozen,
    /// A pair whose update ratio exceeds 10× that tensor's median ratio
    /// (of at least 4).
    Spike,
    /// Tensors new at a step (against the step before).
    Appeared,
    /// Tensors gone from a step (against the step before).
    Vanished,
}

impl EventKind {
    /// The kind as the JSON and the text name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nonfinite => "nonfinite",
            Self::Frozen => "frozen",
            Self::Spike => "spike",
            Self::Appeared => "appeared",
            Self::Vanished => "vanished",
        }
    }
}

/// A spike is a ratio above this many times the tensor's median.
const SPIKE_FACTOR: f64 = 10.0;
/// Ratios a tensor needs at least for a spike.
const SPIKE_MIN_PAIRS: usize = 4;

/// The layer of a name: the first `.layers.N.`, `.h.N.` or `.blocks.N.`.
pub fn layer_of(name: &str) -> Option<u64> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE
        .get_or_init(|| Regex::new(r"\.(?:layers|h|blocks)\.(\d+)\.").ok())
        .as_ref()?;
    re.captures(name)?.get(1)?.as_str().parse().ok()
}

/// The role of a tensor by its name: `norms`, `embeddings`, `attention`,
/// `mlp`, else `other`.
pub fn role_of(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    let has = |keys: &[&str]| keys.iter().any(|k| n.contains(k));
    if has(&["norm", ".ln_", "ln_f", "ln1", "ln2"]) {
        "norms"
    } else if has(&["embed", "wte", "wpe", "lm_head", "tok_embeddings"]) {
        "embeddings"
    } else if has(&[
        "attn",
        "attention",
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "qkv",
    ]) {
        "attention"
    } else if has(&[
        "mlp",
        "ffn",
        "feed_forward",
        "fc1",
        "fc2",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]) {
        "mlp"
    } else {
        "other"
    }
}

/// Roles in the order they are listed.
const ROLES: [&str; 5] = ["embeddings", "attention", "mlp", "norms", "other"];

/// The aggregate of `members` (tensors of one group).
fn group(members: &[&TensorSeries]) -> GroupSeries {
    let steps = members.first().map_or(0, |t| t.l2_norm.len());
    let mut l2 = vec![None; steps];
    let mut ratio = vec![None; steps];
    for i in 0..steps {
        let norms: Vec<f64> = members.iter().filter_map(|t| t.l2_norm[i]).collect();
        if !norms.is_empty() {
            let sq: f64 = norms.iter().map(|x| x * x).sum();
            l2[i] = Some(sq.sqrt()).filter(|x| x.is_finite());
        }
        let (mut upd, mut prev, mut any) = (0f64, 0f64, false);
        for t in members {
            if let (Some(u), Some(Some(p))) =
                (t.update_norm[i], i.checked_sub(1).map(|j| t.l2_norm[j]))
            {
                upd += u * u;
                prev += p * p;
                any = true;
            }
        }
        if any && prev > 0.0 {
            ratio[i] = Some((upd / prev).sqrt()).filter(|x| x.is_finite());
        }
    }
    GroupSeries {
        l2_norm: l2,
        update_ratio: ratio,
    }
}

/// Every layer's aggregate, by layer number.
pub fn layers(tensors: &[TensorSeries]) -> Vec<LayerSeries> {
    let mut by: BTreeMap<u64, Vec<&TensorSeries>> = BTreeMap::new();
    for t in tensors {
        if let Some(l) = layer_of(&t.name) {
            by.entry(l).or_default().push(t);
        }
    }
    by.into_iter()
        .map(|(layer, members)| LayerSeries {
            layer,
            figures: group(&members),
        })
        .collect()
}

/// Every role's aggregate (the roles that have tensors).
pub fn roles(tensors: &[TensorSeries]) -> Vec<RoleSeries> {
    ROLES
        .iter()
        .filter_map(|&role| {
            let members: Vec<&TensorSeries> = tensors
                .iter()
                .filter(|t| role_of(&t.name) == role)
                .collect();
            (!members.is_empty()).then(|| RoleSeries {
                role,
                figures: group(&members),
            })
        })
        .collect()
}

/// The median of values (the mean of the middle two of an even count).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some(f64::midpoint(v[n / 2 - 1], v[n / 2])),
    }
}

/// The events of a series whose steps are `steps`, in step order (and by
/// kind within a step), each listing its tensors by name.
pub fn events(tensors: &[TensorSeries], steps: &[u64]) -> Vec<Event> {
    let mut found: BTreeMap<(usize, EventKind), Vec<String>> = BTreeMap::new();
    let mut add = |i: usize, kind: EventKind, name: &str| {
        found.entry((i, kind)).or_default().push(name.to_owned());
    };
    for t in tensors {
        if let Some(i) = t.nonfinite.iter().position(|c| c.is_some_and(|c| c > 0)) {
            add(i, EventKind::Nonfinite, &t.name);
        }
        let everywhere = t.shapes.iter().all(Option::is_some);
        if steps.len() >= 2 && everywhere && t.same_bytes.iter().skip(1).all(|&s| s) {
            add(0, EventKind::Frozen, &t.name);
        }
        let ratios: Vec<(usize, f64)> = t
            .update_ratio
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, (*r)?)))
            .collect();
        if ratios.len() >= SPIKE_MIN_PAIRS
            && let Some(m) = median(ratios.iter().map(|&(_, r)| r).collect())
        {
            for &(i, r) in &ratios {
                if r > SPIKE_FACTOR * m {
                    add(i, EventKind::Spike, &t.name);
                }
            }
        }
        for i in 1..t.shapes.len() {
            match (&t.shapes[i - 1], &t.shapes[i]) {
                (None, Some(_)) => add(i, EventKind::Appeared, &t.name),
                (Some(_), None) => add(i, EventKind::Vanished, &t.name),
                _ => {}
            }
        }
    }
    found
        .into_iter()
        .filter_map(|((i, kind), mut names)| {
            names.sort();
            Some(Event {
                kind,
                step: *steps.get(i)?,
                tensors: names,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_roles_and_medians() {
        assert_eq!(layer_of("model.layers.12.mlp.up_proj.weight"), Some(12));
        assert_eq!(layer_of("transformer.h.3.attn.c_attn.weight"), Some(3));
        assert_eq!(layer_of("x.blocks.0.layers.5.w"), Some(0));
        assert_eq!(layer_of("layers.2.w"), None);
        assert_eq!(layer_of("model.embed_tokens.weight"), None);
        assert_eq!(
            role_of("model.layers.0.post_attention_layernorm.weight"),
            "norms"
        );
        assert_eq!(
            role_of("model.layers.0.self_attn.q_proj.weight"),
            "attention"
        );
        assert_eq!(role_of("model.layers.0.mlp.down_proj.weight"), "mlp");
        assert_eq!(role_of("model.embed_tokens.weight"), "embeddings");
        assert_eq!(role_of("score.bias"), "other");
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
