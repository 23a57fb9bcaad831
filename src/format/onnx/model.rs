//! The paths of a `ModelProto` that are read, at a fixed depth: the
//! model's own fields, its graph (`initializer`, and each `Constant` node's
//! `value` tensor), nothing below. A subgraph (an `If`'s branch, a
//! `Loop`'s body) is a payload skipped by its length, so nesting costs
//! nothing and nothing recurses.

use std::ops::Range;

use super::error::OnnxError;
use super::tensor::{entry, utf8};
use super::wire::{Fields, Value, fields_of};

/// Doc strings and metadata values are kept up to this many bytes.
pub const MAX_TEXT: usize = 4096;

/// Tensors (initializers and Constant nodes) a model may hold at most: a
/// bound on memory no real model comes near.
pub const MAX_TENSORS: usize = 1 << 20;

/// `metadata_props` and `opset_import` entries kept at most (the rest are
/// counted, not kept).
pub const MAX_ENTRIES: usize = 4096;

/// Times a singular message field (`graph`, an attribute's `t`) may be
/// repeated on the wire (protobuf merges the parts; onnx writes one).
pub const MAX_PARTS: usize = 64;

fn too_many_parts(at: usize, what: &str) -> OnnxError {
    OnnxError::Protobuf {
        at: at as u64,
        what: format!("{what} is repeated more than {MAX_PARTS} times"),
    }
}

/// The model's own fields.
#[derive(Debug, Default)]
pub struct ModelHeader {
    /// `ir_version`.
    pub ir_version: Option<i64>,
    /// `producer_name`.
    pub producer_name: Option<String>,
    /// `producer_version`.
    pub producer_version: Option<String>,
    /// `domain`.
    pub domain: Option<String>,
    /// `model_version`.
    pub model_version: Option<i64>,
    /// `doc_string` (cut to [`MAX_TEXT`]).
    pub doc_string: Option<String>,
    /// `opset_import` as (domain, version), the first [`MAX_ENTRIES`].
    pub opsets: Vec<(String, i64)>,
    /// `metadata_props` as (key, value), cut to [`MAX_TEXT`], the first
    /// [`MAX_ENTRIES`].
    pub props: Vec<(String, String)>,
    /// `metadata_props` and `opset_import` entries not kept.
    pub dropped: u64,
    /// The `graph` field's payloads (several merge into one graph).
    pub graph: Vec<Range<usize>>,
}

/// A main-graph `Constant` node's tensor.
#[derive(Debug)]
pub struct Constant {
    /// The node's first output: the tensor's name.
    pub name: String,
    /// The `value` attribute's `t` payloads.
    pub parts: Vec<Range<usize>>,
}

/// The graph's fields that are read.
#[derive(Debug, Default)]
pub struct Graph {
    /// `name`.
    pub name: Option<String>,
    /// `doc_string` (cut to [`MAX_TEXT`]).
    pub doc_string: Option<String>,
    /// Each `initializer`'s payload.
    pub initializers: Vec<Range<usize>>,
    /// Each `Constant` node with a `value` tensor.
    pub constants: Vec<Constant>,
    /// `Constant` nodes holding no `value` tensor (`value_float`, ...).
    pub other_constants: u64,
    /// `sparse_initializer`s (not listed).
    pub sparse: u64,
}

/// Text of a string field, not UTF-8 bytes replaced, cut to [`MAX_TEXT`]
/// bytes (on a character boundary).
pub fn text(bytes: &[u8], r: &Range<usize>) -> String {
    let raw = bytes.get(r.clone()).unwrap_or_default();
    let cut = raw.len() > MAX_TEXT;
    let mut s = String::from_utf8_lossy(raw.get(..MAX_TEXT).unwrap_or(raw)).into_owned();
    if cut {
        // The cut may have split a character: drop its replacement.
        if s.ends_with('\u{fffd}') {
            s.pop();
        }
        s.push('…');
    }
    s
}

/// Reads the `ModelProto` that is all of `bytes`.
pub fn read_model(bytes: &[u8]) -> Result<ModelHeader, OnnxError> {
    let mut model = ModelHeader::default();
    for field in Fields::new(bytes, 0..bytes.len()) {
        let field = field?;
        match (field.number, &field.value) {
            (1, Value::Varint(v)) => model.ir_version = Some(*v as i64),
            (2, Value::Len(r)) => model.producer_name = Some(text(bytes, r)),
            (3, Value::Len(r)) => model.producer_version = Some(text(bytes, r)),
            (4, Value::Len(r)) => model.domain = Some(text(bytes, r)),
            (5, Value::Varint(v)) => model.model_version = Some(*v as i64),
            (6, Value::Len(r)) => model.doc_string = Some(text(bytes, r)),
            (7, Value::Len(r)) => {
                if model.graph.len() >= MAX_PARTS {
                    return Err(too_many_parts(field.at, "the graph field"));
                }
                model.graph.push(r.clone());
            }
            (8, Value::Len(r)) => {
                let (mut domain, mut version) = (String::new(), 0i64);
                for item in Fields::new(bytes, r.clone()) {
                    let item = item?;
                    match (item.number, &item.value) {
                        (1, Value::Len(d)) => domain = text(bytes, d),
                        (2, Value::Varint(v)) => version = *v as i64,
                        _ => {}
                    }
                }
                if model.opsets.len() < MAX_ENTRIES {
                    model.opsets.push((domain, version));
                } else {
                    model.dropped += 1;
                }
            }
            (14, Value::Len(r)) => {
                if model.props.len() >= MAX_ENTRIES {
                    model.dropped += 1;
                    continue;
                }
                let (k, v) = entry(bytes, r.clone())?;
                model
                    .props
                    .push((text(k, &(0..k.len())), text(v, &(0..v.len()))));
            }
            _ => {}
        }
    }
    Ok(model)
}

/// The default domain's opset version (`""` or `ai.onnx`; the last such
/// entry).
pub fn default_opset(m: &ModelHeader) -> Option<i64> {
    m.opsets
        .iter()
        .rev()
        .find(|(d, _)| d.is_empty() || d == "ai.onnx")
        .map(|(_, v)| *v)
}

/// Reads the graph stored in `parts` of `bytes`.
pub fn read_graph(bytes: &[u8], parts: &[Range<usize>]) -> Result<Graph, OnnxError> {
    let mut graph = Graph::default();
    for field in fields_of(bytes, parts) {
        let field = field?;
        match (field.number, &field.value) {
            (1, Value::Len(r)) => match read_node(bytes, r)? {
                Node::Other => {}
                Node::OtherConstant => graph.other_constants += 1,
                Node::Constant(c) => {
                    check_count(&graph, field.at)?;
                    graph.constants.push(c);
                }
            },
            (2, Value::Len(r)) => graph.name = Some(text(bytes, r)),
            (5, Value::Len(r)) => {
                check_count(&graph, field.at)?;
                graph.initializers.push(r.clone());
            }
            (10, Value::Len(r)) => graph.doc_string = Some(text(bytes, r)),
            (15, Value::Len(_)) => graph.sparse += 1,
            _ => {}
        }
    }
    Ok(graph)
}

/// Refuses a tensor past [`MAX_TENSORS`].
fn check_count(graph: &Graph, at: usize) -> Result<(), OnnxError> {
    if graph.initializers.len() + graph.constants.len() >= MAX_TENSORS {
        return Err(OnnxError::Protobuf {
            at: at as u64,
            what: format!("the graph holds more than {MAX_TENSORS} tensors"),
        });
    }
    Ok(())
}

enum Node {
    Other,
    OtherConstant,
    Constant(Constant),
}

/// A node: a `Constant` of the default domain with a `value` tensor, or
/// not. Its first pass reads only `op_type` and `domain`.
fn read_node(bytes: &[u8], r: &Range<usize>) -> Result<Node, OnnxError> {
    let (mut op_type, mut domain) = (&[][..], &[][..]);
    for f in Fields::new(bytes, r.clone()) {
        let f = f?;
        if let (4 | 7, Value::Len(p)) = (f.number, &f.value) {
            let s = bytes.get(p.clone()).unwrap_or_default();
            if f.number == 4 {
                op_type = s;
            } else {
                domain = s;
            }
        }
    }
    if op_type != b"Constant" || !(domain.is_empty() || domain == b"ai.onnx") {
        return Ok(Node::Other);
    }
    let mut name = None;
    let mut parts = None;
    for f in Fields::new(bytes, r.clone()) {
        let f = f?;
        match (f.number, &f.value) {
            (2, Value::Len(_)) if name.is_none() => {
                name = Some(utf8(bytes, &f, "a Constant node's output name")?);
            }
            (5, Value::Len(a)) if parts.is_none() => parts = value_tensor(bytes, a)?,
            _ => {}
        }
    }
    Ok(match (name, parts) {
        (Some(name), Some(parts)) => Node::Constant(Constant { name, parts }),
        _ => Node::OtherConstant,
    })
}

/// The `t` payloads of an attribute named `value`, if it has one.
fn value_tensor(bytes: &[u8], r: &Range<usize>) -> Result<Option<Vec<Range<usize>>>, OnnxError> {
    let mut name = &[][..];
    let mut parts = Vec::new();
    for f in Fields::new(bytes, r.clone()) {
        let f = f?;
        match (f.number, &f.value) {
            (1, Value::Len(p)) => name = bytes.get(p.clone()).unwrap_or_default(),
            (5, Value::Len(p)) => {
                if parts.len() >= MAX_PARTS {
                    return Err(too_many_parts(f.at, "an attribute's t"));
                }
                parts.push(p.clone());
            }
            _ => {}
        }
    }
    Ok((name == b"value" && !parts.is_empty()).then_some(parts))
}
