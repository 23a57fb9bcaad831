//! What a torch checkpoint's pickle means (PICKLE.md §3), read off the
//! machine's [`Graph`] once every global in it is allowlisted: the tensors
//! (`_rebuild_tensor_v2`/`_v3`, `_rebuild_parameter`,
//! `_rebuild_from_type_v2` over a persistent id naming a storage), named by
//! their path of dict keys and list indices; and the non-tensor leaves
//! (epoch, hyper-parameters), by the same paths. The walk is iterative and
//! visits each container once, so cycles and memo bombs end, linearly.

use std::collections::HashSet;

use super::value::{Graph, Id, Node};
use crate::dtype::Dtype;

/// Containers and leaves walked at most, over the whole object.
const MAX_VISITS: usize = 20_000_000;

/// A tensor the pickle describes: a view of a storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDesc {
    /// Its path in the object (`model.layers.0.weight`).
    pub name: String,
    /// The storage's key (a zip entry `<root>/data/<key>`, or a legacy
    /// record), as written.
    pub storage: String,
    /// The element type.
    pub dtype: Dtype,
    /// The storage's length in elements, as its persistent id declares it.
    pub storage_numel: u64,
    /// The first element, in elements from the storage's start.
    pub offset: u64,
    /// The logical shape.
    pub shape: Vec<u64>,
    /// Strides in elements, one per dimension.
    pub strides: Vec<u64>,
}

/// What a checkpoint's object holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contents {
    /// Every tensor, in the walk's order (dict and list order).
    pub tensors: Vec<TensorDesc>,
    /// The non-tensor leaves: path → JSON value.
    pub metadata: Vec<(String, serde_json::Value)>,
}

/// Why the object is not a checkpoint that can be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// A tensor or storage is not as torch writes it.
    #[error("tensor {name:?}: {message}")]
    Invalid {
        /// The tensor's path.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A dtype with no safetensors name.
    #[error("tensor {name:?}: dtype {dtype} has no safetensors dtype")]
    UnsupportedDtype {
        /// The tensor's path.
        name: String,
        /// The dtype as torch names it.
        dtype: String,
    },
    /// More to walk than [`MAX_VISITS`], or names longer than
    /// [`MAX_NAME_BYTES`] in all.
    #[error(
        "the checkpoint's object has more than {MAX_VISITS} parts, or names of more than {MAX_NAME_BYTES} bytes in all"
    )]
    TooComplex,
}

impl ObjectError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            ObjectError::Invalid { .. } => "InvalidCheckpoint",
            ObjectError::UnsupportedDtype { .. } => "UnsupportedDtype",
            ObjectError::TooComplex => "TooComplex",
        }
    }
}

/// The dtype of a typed storage class (`torch.FloatStorage`).
fn storage_dtype(name: &str) -> Option<Result<Dtype, String>> {
    let d = match name.strip_suffix("Storage")? {
        "Double" => Dtype::F64,
        "Float" => Dtype::F32,
        "Half" => Dtype::F16,
        "BFloat16" => Dtype::BF16,
        "Long" => Dtype::I64,
        "Int" => Dtype::I32,
        "Short" => Dtype::I16,
        "Char" => Dtype::I8,
        "Byte" => Dtype::U8,
        "Bool" => Dtype::Bool,
        "ComplexFloat" => Dtype::C64,
        "Untyped" => return None,
        other => return Some(Err(format!("{other}Storage"))),
    };
    Some(Ok(d))
}

/// The bytes of one element of a storage class (`torch.FloatStorage` 4,
/// `torch.storage.UntypedStorage` 1), where it is one that is read.
pub fn storage_element_size(class: &str) -> Option<u64> {
    match storage_dtype(class) {
        Some(Ok(d)) => Some(u64::from(d.bits() / 8).max(1)),
        Some(Err(_)) => None,
        None => (class == "UntypedStorage").then_some(1),
    }
}

/// The dtype a `torch.<name>` dtype global names.
pub(crate) fn torch_dtype(name: &str) -> Result<Dtype, String> {
    Ok(match name {
        "float64" | "double" => Dtype::F64,
        "float32" | "float" => Dtype::F32,
        "float16" | "half" => Dtype::F16,
        "bfloat16" => Dtype::BF16,
        "float8_e4m3fn" => Dtype::F8E4M3,
        "float8_e5m2" => Dtype::F8E5M2,
        "float8_e4m3fnuz" => Dtype::F8E4M3Fnuz,
        "float8_e5m2fnuz" => Dtype::F8E5M2Fnuz,
        "float8_e8m0fnu" => Dtype::F8E8M0,
        "int64" | "long" => Dtype::I64,
        "int32" | "int" => Dtype::I32,
        "int16" | "short" => Dtype::I16,
        "int8" => Dtype::I8,
        "uint8" => Dtype::U8,
        "uint16" => Dtype::U16,
        "uint32" => Dtype::U32,
        "uint64" => Dtype::U64,
        "bool" => Dtype::Bool,
        "complex64" | "cfloat" => Dtype::C64,
        other => return Err(other.to_owned()),
    })
}

/// Reads the object at `graph.root`. The caller has checked that every
/// global in the graph is allowlisted.
pub fn contents(graph: &Graph) -> Result<Contents, ObjectError> {
    let mut out = Contents::default();
    let mut seen: HashSet<Id> = HashSet::new();
    let mut paths = Paths::default();
    let mut todo: Vec<(Id, usize)> = vec![(graph.root, 0)];
    let mut visits = 0usize;
    while let Some((id, path)) = todo.pop() {
        visits += 1;
        if visits > MAX_VISITS {
            return Err(ObjectError::TooComplex);
        }
        let Some(node) = graph.get(id) else { continue };
        // Children are pushed in reverse, so they are walked in order.
        let mut children: Vec<(Id, usize)> = Vec::new();
        match node {
            Node::Dict(pairs) => {
                if !seen.insert(id) {
                    continue;
                }
                for &(k, v) in pairs {
                    children.push((v, paths.child(path, key_text(graph, k))));
                }
            }
            Node::List(items) | Node::Tuple(items) => {
                if let Some(value) = leaf_list(graph, items) {
                    out.metadata.push((paths.name(path)?, value));
                    continue;
                }
                if !seen.insert(id) {
                    continue;
                }
                for (i, &v) in items.iter().enumerate() {
                    children.push((v, paths.child(path, i.to_string())));
                }
            }
            Node::Call { func, .. } => match graph.global_of(*func) {
                Some(("collections", "OrderedDict" | "Counter")) => {
                    if !seen.insert(id) {
                        continue;
                    }
                    if let Node::Call { items, .. } = node {
                        for &(k, v) in items {
                            children.push((v, paths.child(path, key_text(graph, k))));
                        }
                    }
                }
                _ => {
                    if let Some(t) = tensor(graph, id, &paths.name(path)?)? {
                        out.tensors.push(t);
                    }
                }
            },
            other => {
                if let Some(value) = leaf(graph, other) {
                    out.metadata.push((paths.name(path)?, value));
                }
            }
        }
        todo.extend(children.into_iter().rev());
    }
    Ok(out)
}

/// Bytes of names spelled out at most, over the whole object: a name is
/// its whole path, so a deep object (100,000 nested lists) could otherwise
/// spell quadratically many.
const MAX_NAME_BYTES: usize = 64 << 20;

/// The paths walked, each its parent and its last segment: a child costs
/// its segment, not a copy of its parent's path; a name is spelled out
/// only for a tensor or a leaf.
struct Paths {
    parent: Vec<usize>,
    segment: Vec<String>,
    spelled: usize,
}

impl Default for Paths {
    /// The root's (empty) path, index 0.
    fn default() -> Self {
        Paths {
            parent: vec![0],
            segment: vec![String::new()],
            spelled: 0,
        }
    }
}

impl Paths {
    fn child(&mut self, parent: usize, segment: String) -> usize {
        self.parent.push(parent);
        self.segment.push(segment);
        self.parent.len() - 1
    }

    /// The path's segments joined with `.` (the root's is empty).
    fn name(&mut self, mut at: usize) -> Result<String, ObjectError> {
        let mut parts: Vec<&str> = Vec::new();
        let mut len = 0usize;
        while at != 0 {
            let segment = self.segment.get(at).map_or("", String::as_str);
            len += segment.len() + 1;
            if self.spelled + len > MAX_NAME_BYTES {
                return Err(ObjectError::TooComplex);
            }
            parts.push(segment);
            at = self.parent.get(at).copied().unwrap_or(0);
        }
        self.spelled += len;
        parts.reverse();
        Ok(parts.join("."))
    }
}

/// A dict key as a path segment: a string verbatim, a number in decimal,
/// anything else as JSON text.
fn key_text(graph: &Graph, k: Id) -> String {
    match graph.get(k) {
        Some(Node::Str(s)) => s.clone(),
        Some(Node::Int(i)) => i.to_string(),
        Some(n) => leaf(graph, n).map_or_else(|| "?".to_owned(), |v| v.to_string()),
        None => "?".to_owned(),
    }
}

/// A scalar leaf's JSON value.
fn leaf(graph: &Graph, node: &Node) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match node {
        Node::None => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Int(i) => Value::from(*i),
        Node::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Node::Str(s) | Node::BigInt(s) => Value::String(s.clone()),
        Node::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        Node::Set(items) => Value::Array(
            items
                .iter()
                .filter_map(|&i| graph.get(i).and_then(|n| leaf(graph, n)))
                .collect(),
        ),
        _ => return None,
    })
}

/// A list or tuple whose every element is a scalar: one leaf.
fn leaf_list(graph: &Graph, items: &[Id]) -> Option<serde_json::Value> {
    let values: Option<Vec<_>> = items
        .iter()
        .map(|&i| match graph.get(i)? {
            Node::List(_) | Node::Tuple(_) | Node::Dict(_) | Node::Set(_) => None,
            n => leaf(graph, n),
        })
        .collect();
    values.map(serde_json::Value::Array)
}

/// The tensor a call node rebuilds, if it is one of torch's rebuilds.
pub(crate) fn tensor(
    graph: &Graph,
    call: Id,
    name: &str,
) -> Result<Option<TensorDesc>, ObjectError> {
    let invalid = |message: String| ObjectError::Invalid {
        name: name.to_owned(),
        message,
    };
    let mut call = call;
    // Parameters and subclasses wrap the tensor they rebuild.
    for _ in 0..8 {
        let Some(Node::Call { func, args, .. }) = graph.get(call) else {
            return Ok(None);
        };
        let args = graph.items_of(*args).unwrap_or_default();
        match graph.global_of(*func) {
            Some(("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state")) => {
                let Some(&inner) = args.first() else {
                    return Err(invalid("a parameter with no tensor".into()));
                };
                call = inner;
            }
            Some(("torch._tensor", "_rebuild_from_type_v2")) => {
                let (Some(&f), Some(&a)) = (args.first(), args.get(2)) else {
                    return Err(invalid("_rebuild_from_type_v2 without its function".into()));
                };
                return rebuild(graph, f, graph.items_of(a).unwrap_or_default(), name);
            }
            Some(_) => return rebuild(graph, *func, args, name),
            None => return Ok(None),
        }
    }
    Err(invalid("parameters nested too deep".into()))
}

/// `_rebuild_tensor(_v2/_v3)(storage, offset, size, stride, …[, dtype])`.
fn rebuild(
    graph: &Graph,
    func: Id,
    args: &[Id],
    name: &str,
) -> Result<Option<TensorDesc>, ObjectError> {
    let invalid = |message: String| ObjectError::Invalid {
        name: name.to_owned(),
        message,
    };
    let v3 = match graph.global_of(func) {
        Some(("torch._utils", "_rebuild_tensor" | "_rebuild_tensor_v2")) => false,
        Some(("torch._utils", "_rebuild_tensor_v3")) => true,
        // Other allowlisted calls (torch.device, a set) are not tensors.
        Some(("torch._utils", other)) => {
            return Err(invalid(format!("{other} tensors are not read")));
        }
        _ => return Ok(None),
    };
    let [storage, offset, size, stride, ..] = args else {
        return Err(invalid(format!("a rebuild with {} arguments", args.len())));
    };
    let (key, kind, numel) = persistent_storage(graph, *storage).ok_or_else(|| {
        invalid("its storage is not a persistent id ('storage', type, key, location, numel)".into())
    })?;
    let dtype = match (storage_dtype(&kind), v3) {
        (Some(Ok(d)), _) => d,
        (Some(Err(other)), _) => {
            return Err(ObjectError::UnsupportedDtype {
                name: name.to_owned(),
                dtype: other,
            });
        }
        (None, true) => {
            let dtype = args
                .get(6)
                .and_then(|&d| graph.global_of(d))
                .ok_or_else(|| invalid("an untyped storage with no dtype".into()))?;
            torch_dtype(dtype.1).map_err(|dtype| ObjectError::UnsupportedDtype {
                name: name.to_owned(),
                dtype,
            })?
        }
        (None, false) => return Err(invalid("an untyped storage with no dtype".into())),
    };
    // An untyped storage counts bytes; a typed one elements.
    let element = u64::from(dtype.bits() / 8).max(1);
    let storage_numel = if storage_dtype(&kind).is_none() {
        numel / element
    } else {
        numel
    };
    let count = |id: Id, what: &str| -> Result<u64, ObjectError> {
        let v = graph
            .int_of(id)
            .ok_or_else(|| invalid(format!("its {what} is not an integer that fits 64 bits")))?;
        u64::try_from(v).map_err(|_| invalid(format!("its {what} is negative ({v})")))
    };
    let counts = |id: Id, what: &str| -> Result<Vec<u64>, ObjectError> {
        let id = size_tuple(graph, id);
        let items = graph
            .items_of(id)
            .ok_or_else(|| invalid(format!("its {what} is not a tuple")))?;
        items.iter().map(|&i| count(i, what)).collect()
    };
    let shape = counts(*size, "size")?;
    let strides = counts(*stride, "stride")?;
    if shape.len() != strides.len() {
        return Err(invalid(format!(
            "{} sizes but {} strides",
            shape.len(),
            strides.len()
        )));
    }
    Ok(Some(TensorDesc {
        name: name.to_owned(),
        storage: key,
        dtype,
        storage_numel,
        offset: count(*offset, "storage offset")?,
        shape,
        strides,
    }))
}

/// A `torch.Size(tuple)` call is its tuple.
fn size_tuple(graph: &Graph, id: Id) -> Id {
    if let Some(Node::Call { func, args, .. }) = graph.get(id)
        && graph.global_of(*func) == Some(("torch", "Size"))
        && let Some(&[inner]) = graph.items_of(*args)
    {
        return inner;
    }
    id
}

/// `('storage', torch.XStorage, key, location, numel[, view_metadata])`:
/// the key, the storage class's name and the declared count.
fn persistent_storage(graph: &Graph, id: Id) -> Option<(String, String, u64)> {
    let Node::PersId(inner) = graph.get(id)? else {
        return None;
    };
    let items = graph.items_of(*inner)?;
    if graph.str_of(*items.first()?)? != "storage" {
        return None;
    }
    let (module, class) = graph.global_of(*items.get(1)?)?;
    if !module.starts_with("torch") {
        return None;
    }
    let key = match graph.get(*items.get(2)?)? {
        Node::Str(s) => s.clone(),
        Node::Int(i) => i.to_string(),
        _ => return None,
    };
    let numel = u64::try_from(graph.int_of(*items.get(4)?)?).ok()?;
    Some((key, class.to_owned(), numel))
}
