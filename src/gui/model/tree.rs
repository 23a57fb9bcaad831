//! The tree view of the tensor table: names grouped by dotted prefix, only
//! the children of open groups listed, and numbered children (`layers.0` …
//! `layers.31`) folded into one pattern line with its per-layer template
//! and the layers that differ from it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{QuantRows, natural_cmp, row_name};
use crate::format::Checkpoint;

/// One line of the tree view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeRow {
    /// A group of tensors sharing a dotted prefix.
    Group {
        /// The full prefix, such as `model.layers.0`.
        prefix: String,
        /// Nesting depth (0 at the top).
        depth: usize,
        /// Tensors under it (after filtering).
        count: usize,
        /// Their bytes in all, saturating.
        bytes: u64,
        /// Whether its children are shown.
        expanded: bool,
    },
    /// The numbered children of a group (`model.layers.0` … `.31`) folded
    /// into one line: `model.layers.[0-31]`.
    Pattern(Box<Pattern>),
    /// A role of a pattern's per-layer template.
    Role {
        /// Its name under a layer (`self_attn.q_proj.weight`).
        role: String,
        /// The dtype (or quantization scheme) most layers have.
        dtype: String,
        /// The shape most layers have.
        shape: Vec<u64>,
        /// The layers that have it.
        layers: usize,
        /// The tensor of the first such layer (a click selects it).
        example: usize,
        /// Nesting depth.
        depth: usize,
    },
    /// A layer that differs from the template, and how.
    Odd {
        /// What differs (`layer 5: mlp.down_proj.weight is F16, not F32`).
        text: String,
        /// The tensor concerned, when it exists.
        tensor: Option<usize>,
        /// Nesting depth.
        depth: usize,
    },
    /// A tensor (index into `ck.tensors`).
    Tensor {
        /// Index into the checkpoint's tensors.
        index: usize,
        /// Nesting depth, for the indent.
        depth: usize,
    },
}

/// The numbered layers under one prefix, as one line of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The prefix the numbers follow (`model.layers`).
    pub prefix: String,
    /// Nesting depth.
    pub depth: usize,
    /// The smallest and largest layer number.
    pub first: u64,
    /// See `first`.
    pub last: u64,
    /// Layers (numbered children).
    pub layers: usize,
    /// Roles of the template (the tensors of a typical layer).
    pub roles: usize,
    /// Tensors under all the layers.
    pub tensors: usize,
    /// Their values (a quantized weight by its logical shape).
    pub parameters: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Layers that differ from the template.
    pub odd_layers: usize,
    /// Whether the template and the layers are shown.
    pub expanded: bool,
}

impl Pattern {
    /// The key of a pattern in the set of open groups.
    pub fn key(prefix: &str) -> String {
        format!("{prefix}.[*]")
    }

    /// `model.layers.[0-31]`.
    pub fn title(&self) -> String {
        format!("{}.[{}-{}]", self.prefix, self.first, self.last)
    }
}

/// What the tree needs of a tensor: its name, dtype label and shape,
/// values and bytes (a quantized weight's logical ones).
struct Facts<'a> {
    ck: &'a Checkpoint,
    quant: Option<&'a QuantRows>,
}

impl<'a> Facts<'a> {
    fn name(&self, i: usize) -> &'a str {
        row_name(self.ck, self.quant, i)
    }

    fn dtype_shape(&self, i: usize) -> (&'a str, &'a [u64]) {
        match self.quant.and_then(|q| q.logical_at(i)) {
            Some(lt) => (lt.label(), lt.shape()),
            None => self
                .ck
                .entry(i)
                .map_or(("", &[]), |(_, info)| (info.dtype().name(), info.shape())),
        }
    }

    fn size(&self, i: usize) -> (u64, u64) {
        match (self.quant.and_then(|q| q.logical_at(i)), self.ck.entry(i)) {
            (Some(lt), _) => (lt.numel(), lt.stored_bytes(self.ck)),
            (None, Some((_, info))) => (info.numel(), info.nbytes()),
            _ => (0, 0),
        }
    }
}

/// A group of the tree: its children by name part (borrowed from the
/// tensor names: no string is made per tensor), in first-seen order.
#[derive(Default)]
struct Node<'a> {
    children: BTreeMap<&'a str, Node<'a>>,
    order: Vec<&'a str>,
    tensors: Vec<usize>,
    count: usize,
    bytes: u64,
}

impl Node<'_> {
    /// Every tensor under the node, with its name below it: the end of its
    /// name after `skip` bytes (the node's own dotted prefix and a dot).
    fn gather<'a>(&self, skip: usize, out: &mut Vec<(&'a str, usize)>, facts: &Facts<'a>) {
        for &i in &self.tensors {
            let name = facts.name(i);
            out.push((name.get(skip..).unwrap_or(name), i));
        }
        for child in self.children.values() {
            child.gather(skip, out, facts);
        }
    }
}

/// Layers a pattern lists as odd at most (the count is exact).
const MAX_ODD_SHOWN: usize = 200;

/// The template of numbered layers and how each one departs from it.
struct Template {
    /// `(role, dtype, shape, layers having it, first tensor)`, in the
    /// first layer's order.
    roles: Vec<(String, String, Vec<u64>, usize, usize)>,
    /// `(text, tensor)` for each difference, in layer order.
    odd: Vec<(String, Option<usize>)>,
    odd_layers: usize,
}

/// The template of `layers` (number, tensors with their names in the
/// layer): each role that more than half of the layers have, with the
/// dtype and shape most of them have; a layer differs when it lacks a
/// role, has another, or has another dtype or shape.
fn template<'a>(layers: &[(u64, Vec<(&'a str, usize)>)], facts: &Facts<'a>) -> Template {
    let mut seen: HashMap<&str, HashMap<(&str, &[u64]), usize>> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (_, tensors) in layers {
        for &(role, i) in tensors {
            let kinds = seen.entry(role).or_insert_with(|| {
                order.push(role);
                HashMap::new()
            });
            *kinds.entry(facts.dtype_shape(i)).or_insert(0) += 1;
            first.entry(role).or_insert(i);
        }
    }
    let majority = layers.len() / 2;
    let mut roles = Vec::new();
    let mut typical: BTreeMap<&str, (&str, &[u64])> = BTreeMap::new();
    for role in order {
        let Some(kinds) = seen.get(role) else {
            continue;
        };
        let having: usize = kinds.values().sum();
        if having <= majority {
            continue;
        }
        // The most common kind; ties to the smallest, so the choice does
        // not depend on the map's order.
        let Some((&(dtype, shape), _)) = kinds
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        else {
            continue;
        };
        typical.insert(role, (dtype, shape));
        roles.push((
            role.to_owned(),
            dtype.to_owned(),
            shape.to_vec(),
            having,
            first.get(role).copied().unwrap_or(0),
        ));
    }
    // Roles in natural order (`experts.2` before `experts.10`).
    roles.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    let mut odd = Vec::new();
    let mut odd_layers = 0;
    for (number, tensors) in layers {
        let mut differs = false;
        let mut note = |text: String, tensor: Option<usize>| {
            differs = true;
            if odd.len() < MAX_ODD_SHOWN {
                odd.push((format!("layer {number}: {text}"), tensor));
            }
        };
        for &(role, i) in tensors {
            match typical.get(role) {
                None => note(format!("has {role}, which most layers lack"), Some(i)),
                Some(&(dtype, shape)) => {
                    let (d, sh) = facts.dtype_shape(i);
                    if d != dtype {
                        note(format!("{role} is {d}, not {dtype}"), Some(i));
                    } else if sh != shape {
                        note(
                            format!(
                                "{role} is {}, not {}",
                                crate::text::fmt_shape(sh),
                                crate::text::fmt_shape(shape)
                            ),
                            Some(i),
                        );
                    }
                }
            }
        }
        let present: std::collections::HashSet<&str> = tensors.iter().map(|(r, _)| *r).collect();
        for role in typical.keys() {
            if !present.contains(role) {
                note(format!("lacks {role}"), None);
            }
        }
        if differs {
            odd_layers += 1;
        }
    }
    Template {
        roles,
        odd,
        odd_layers,
    }
}

/// Builds the tree view's lines from visible rows (in their order),
/// grouping names by dotted prefix. Only children of expanded groups are
/// listed, so the result stays small for huge models. Numbered children
/// (`layers.0` … `layers.31`) fold into one pattern line whose template
/// and odd layers show when it is open.
/// A quantized weight's row is placed by its logical name and counts the
/// bytes of all its parts.
pub fn tree_rows(
    ck: &Checkpoint,
    rows: &[usize],
    expanded: &BTreeSet<String>,
    quant: Option<&QuantRows>,
) -> Vec<TreeRow> {
    let facts = Facts { ck, quant };
    let mut root = Node::default();
    for &i in rows {
        if ck.entry(i).is_none() {
            continue;
        }
        let name = facts.name(i);
        let (_, bytes) = facts.size(i);
        let parts: Vec<&str> = name.split(ck.container().name_separator()).collect();
        let mut node = &mut root;
        node.count += 1;
        node.bytes = node.bytes.saturating_add(bytes);
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !node.children.contains_key(*part) {
                node.order.push(part);
            }
            node = node.children.entry(part).or_default();
            node.count += 1;
            node.bytes = node.bytes.saturating_add(bytes);
        }
        node.tensors.push(i);
    }
    let mut out = Vec::new();
    walk(&root, "", 0, expanded, &facts, &mut out);
    out
}

/// The numbered children of a node (`0`, `1`, … `31`), in number order.
fn numbered<'a>(node: &Node<'a>) -> Vec<(u64, &'a str)> {
    let mut out: Vec<(u64, &'a str)> = node
        .order
        .iter()
        .filter_map(|&k| {
            let digits = !k.is_empty() && k.bytes().all(|c| c.is_ascii_digit());
            Some((k.parse().ok().filter(|_| digits)?, k))
        })
        .collect();
    out.sort_unstable();
    out
}

fn walk(
    node: &Node<'_>,
    prefix: &str,
    depth: usize,
    expanded: &BTreeSet<String>,
    facts: &Facts<'_>,
    out: &mut Vec<TreeRow>,
) {
    let mut keys = node.order.clone();
    keys.sort_by(|a, b| natural_cmp(a, b));
    let numbers = numbered(node);
    let fold = numbers.len() >= 2;
    let mut pattern_done = false;
    for &key in &keys {
        let Some(child) = node.children.get(key) else {
            continue;
        };
        let full = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}{}{key}", facts.ck.container().name_separator())
        };
        if fold && numbers.iter().any(|&(_, k)| k == key) {
            // This node's own numbered children, folded into one line.
            if !pattern_done {
                pattern_done = true;
                pattern(node, prefix, &numbers, depth, expanded, facts, out);
            }
            continue;
        }
        let child_numbers = numbered(child);
        if child_numbers.len() >= 2
            && child_numbers.len() == child.children.len()
            && child.tensors.is_empty()
        {
            // A group of layers only (`layers`): the pattern line itself.
            pattern(child, &full, &child_numbers, depth, expanded, facts, out);
            continue;
        }
        let is_open = expanded.contains(&full);
        out.push(TreeRow::Group {
            prefix: full.clone(),
            depth,
            count: child.count,
            bytes: child.bytes,
            expanded: is_open,
        });
        if is_open {
            walk(child, &full, depth + 1, expanded, facts, out);
        }
    }
    for &i in &node.tensors {
        out.push(TreeRow::Tensor { index: i, depth });
    }
}

/// The pattern line of `node`'s numbered children `numbers` (under
/// `prefix`), and when it is open the template, the odd layers and the
/// layers as groups.
fn pattern(
    node: &Node<'_>,
    prefix: &str,
    numbers: &[(u64, &str)],
    depth: usize,
    expanded: &BTreeSet<String>,
    facts: &Facts<'_>,
    out: &mut Vec<TreeRow>,
) {
    let mut layers: Vec<(u64, Vec<(&str, usize)>)> = Vec::new();
    let (mut tensors, mut parameters, mut bytes) = (0usize, 0u64, 0u64);
    for (number, k) in numbers {
        let mut list = Vec::new();
        // Names under `prefix.k.` keep what follows.
        let skip = if prefix.is_empty() {
            k.len() + 1
        } else {
            prefix.len() + k.len() + 2
        };
        if let Some(child) = node.children.get(k) {
            child.gather(skip, &mut list, facts);
        }
        for (_, i) in &list {
            let (n, b) = facts.size(*i);
            parameters = parameters.saturating_add(n);
            bytes = bytes.saturating_add(b);
        }
        tensors += list.len();
        layers.push((*number, list));
    }
    let t = template(&layers, facts);
    let is_open = expanded.contains(&Pattern::key(prefix));
    out.push(TreeRow::Pattern(Box::new(Pattern {
        prefix: prefix.to_owned(),
        depth,
        first: numbers.first().map_or(0, |(n, _)| *n),
        last: numbers.last().map_or(0, |(n, _)| *n),
        layers: numbers.len(),
        roles: t.roles.len(),
        tensors,
        parameters,
        bytes,
        odd_layers: t.odd_layers,
        expanded: is_open,
    })));
    if !is_open {
        return;
    }
    for (role, dtype, shape, having, example) in t.roles {
        out.push(TreeRow::Role {
            role,
            dtype,
            shape,
            layers: having,
            example,
            depth: depth + 1,
        });
    }
    for (text, tensor) in t.odd {
        out.push(TreeRow::Odd {
            text,
            tensor,
            depth: depth + 1,
        });
    }
    for &(_, k) in numbers {
        let Some(child) = node.children.get(k) else {
            continue;
        };
        let full = if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        };
        let open = expanded.contains(&full);
        out.push(TreeRow::Group {
            prefix: full.clone(),
            depth: depth + 1,
            count: child.count,
            bytes: child.bytes,
            expanded: open,
        });
        if open {
            walk(child, &full, depth + 2, expanded, facts, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;

    /// A pruned layer, an extra tensor and another shape each make their
    /// layer odd; the template holds the roles most layers have.
    #[test]
    fn the_template_names_how_each_odd_layer_differs() {
        use crate::format::write::{TensorSource, write_file};
        use crate::jobs::{CancelToken, Progress};
        let dir = tempfile::tempdir().expect("tempdir");
        let data = [0u8; 12];
        let mut sources = Vec::new();
        for l in 0..4 {
            for (role, n) in [("a.weight", if l == 3 { 3 } else { 2 }), ("b.weight", 2)] {
                if l == 2 && role == "b.weight" {
                    continue;
                }
                sources.push(TensorSource {
                    name: format!("blocks.{l}.{role}"),
                    dtype: Dtype::F32,
                    shape: vec![n],
                    data: &data[..4 * n as usize],
                });
            }
        }
        sources.push(TensorSource {
            name: "blocks.3.c.weight".into(),
            dtype: Dtype::F32,
            shape: vec![1],
            data: &data[..4],
        });
        let path = dir.path().join("m.safetensors");
        write_file(&path, &sources, None, &CancelToken::new(), &Progress::new()).expect("write");
        let ck = Checkpoint::open(&path).expect("open");
        let rows: Vec<usize> = (0..ck.tensors().len()).collect();
        let closed = tree_rows(&ck, &rows, &BTreeSet::new(), None);
        let Some(TreeRow::Pattern(p)) = closed.first() else {
            panic!("a pattern first: {closed:?}");
        };
        assert_eq!(
            (p.title(), p.layers, p.roles, p.tensors, p.odd_layers),
            ("blocks.[0-3]".to_owned(), 4, 2, 8, 2)
        );
        assert_eq!(closed.len(), 1, "closed, the pattern is one line");
        let open: BTreeSet<String> = [Pattern::key("blocks")].into();
        let rows = tree_rows(&ck, &rows, &open, None);
        let odd: Vec<&str> = rows
            .iter()
            .filter_map(|r| match r {
                TreeRow::Odd { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            odd,
            [
                "layer 2: lacks b.weight",
                "layer 3: a.weight is [3], not [2]",
                "layer 3: has c.weight, which most layers lack",
            ]
        );
        let roles = rows
            .iter()
            .filter(|r| matches!(r, TreeRow::Role { .. }))
            .count();
        let groups = rows
            .iter()
            .filter(|r| matches!(r, TreeRow::Group { .. }))
            .count();
        assert_eq!((roles, groups), (2, 4));
    }
}
