//! ONNX models (FRAMEWORKS.md, "ONNX"): a `ModelProto` protobuf read in
//! place by our own bounded wire reader ([`wire`]; not prost, which would
//! copy every bytes field: a 2 GB model with inline `raw_data` would be
//! copied whole, while here `raw_data` stays a range of the mapped file).
//!
//! The tensors are the main graph's initializers under their names and
//! each main-graph `Constant` node's `value` tensor under the node's first
//! output ([`model`]); their bytes are `raw_data` in place
//! ([`Data::Plain`]), a typed field or a BOOL ([`Data::Decoded`],
//! [`decode`]), or an external file beside the model ([`Data::Plain`] of
//! file `k + 1`), its location checked lexically ([`location_is_inside`])
//! before its size is asked.

mod container;
mod decode;
mod error;
mod location;
mod model;
mod tensor;
pub mod wire;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value as J, json};

pub(crate) use container::CONTAINER;
pub use decode::OnnxDecoder;
pub use error::OnnxError;
pub use location::location_is_inside;

use crate::dtype::Dtype;
use crate::format::decode::{Data, Opened, Tensor};
use tensor::{Place, TensorMsg};

/// A tensor read, before the external files are sized.
struct Pending {
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    numel: u64,
    byte_len: u64,
    place: Place,
    parts: Vec<std::ops::Range<usize>>,
    storage: tensor::Storage,
    source: &'static str,
}

/// Opens the ONNX model `bytes` (file 0), its headers only: every tensor's
/// type, shape and bytes are checked, none is read. External data files
/// become [`Opened::files`] (file `k + 1` for `files[k]`), named by their
/// normalised locations; `external_size(location)` gives a file's size,
/// asked once per file and only after every tensor's location passed
/// [`location_is_inside`] (so a model with one location outside asks
/// nothing). The callback's `NotFound` error is `ExternalDataMissing`,
/// `InvalidInput` is `ExternalDataOutside` (for a path that resolves
/// outside the folder through a symlink), any other
/// `ExternalDataUnreadable`.
pub fn open(
    bytes: &[u8],
    external_size: &dyn Fn(&str) -> std::io::Result<u64>,
) -> Result<Opened, OnnxError> {
    let m = model::read_model(bytes)?;
    let g = model::read_graph(bytes, &m.graph)?;

    let mut pending = Vec::new();
    let mut names = HashSet::new();
    let found = g
        .initializers
        .iter()
        .map(|r| (None, vec![r.clone()], "initializer"))
        .chain(
            g.constants
                .iter()
                .map(|c| (Some(c.name.clone()), c.parts.clone(), "constant")),
        );
    for (name, parts, source) in found {
        let msg = TensorMsg::read(bytes, &parts)?;
        let name = name.unwrap_or_else(|| msg.name.clone().unwrap_or_default());
        let ty = tensor::check_type(&name, &msg)?;
        let place = tensor::locate(&name, &msg, &ty)?;
        if !names.insert(name.clone()) {
            return Err(OnnxError::DuplicateName { tensor: name });
        }
        pending.push(Pending {
            name,
            dtype: ty.dtype,
            shape: ty.shape,
            numel: ty.numel,
            byte_len: ty.byte_len,
            place,
            parts,
            storage: ty.storage,
            source,
        });
    }

    let mut files: Vec<String> = Vec::new();
    let mut sizes: HashMap<String, (usize, u64)> = HashMap::new();
    let mut tensors = Vec::with_capacity(pending.len());
    for p in pending {
        tensors.push(finish(p, &mut files, &mut sizes, external_size)?);
    }

    let mut warnings = Vec::new();
    if g.sparse > 0 {
        warnings.push(format!("{} sparse initializer(s) are not listed", g.sparse));
    }
    if m.dropped > 0 {
        warnings.push(format!(
            "{} metadata_props or opset_import entries past the first {} are not kept",
            m.dropped,
            model::MAX_ENTRIES
        ));
    }
    if g.other_constants > 0 {
        warnings.push(format!(
            "{} Constant node(s) hold no `value` tensor (value_float, value_ints, sparse_value, ...) and are not listed",
            g.other_constants
        ));
    }

    Ok(Opened {
        tensors,
        metadata: metadata(&m, &g),
        facts: facts(&m),
        files,
        warnings,
        header_len: bytes.len() as u64,
        pickle: None,
    })
}

/// The tensor with its bytes placed: an external file sized (once per
/// file) and its range checked against the size.
fn finish(
    p: Pending,
    files: &mut Vec<String>,
    sizes: &mut HashMap<String, (usize, u64)>,
    external_size: &dyn Fn(&str) -> std::io::Result<u64>,
) -> Result<Tensor, OnnxError> {
    let bool = p.dtype == Dtype::Bool;
    let mut facts = vec![("source", J::from(p.source))];
    let decoded = |source| {
        Data::Decoded(Arc::new(OnnxDecoder {
            tensor: p.name.clone(),
            source,
        }))
    };
    let data = match &p.place {
        Place::Empty => Data::Plain {
            file: 0,
            range: 0..0,
            big_endian: false,
        },
        Place::Raw(r) => {
            let range = r.start as u64..r.end as u64;
            if bool {
                decoded(decode::Source::RawBool { file: 0, range })
            } else {
                Data::Plain {
                    file: 0,
                    range,
                    big_endian: false,
                }
            }
        }
        Place::Typed => {
            let per = if p.dtype == Dtype::C64 { 2 } else { 1 };
            decoded(decode::Source::Typed {
                parts: p.parts.clone(),
                storage: p.storage,
                bool,
                count: p.numel.saturating_mul(per),
            })
        }
        Place::External {
            location,
            offset,
            length,
        } => {
            let (index, file_size) = if let Some(&known) = sizes.get(location) {
                known
            } else {
                let size = external_size(location).map_err(|e| {
                    let (tensor, location, message) =
                        (p.name.clone(), location.clone(), e.to_string());
                    match e.kind() {
                        std::io::ErrorKind::NotFound => OnnxError::ExternalDataMissing {
                            tensor,
                            location,
                            message,
                        },
                        std::io::ErrorKind::InvalidInput => OnnxError::ExternalDataOutside {
                            tensor,
                            location,
                            why: message,
                        },
                        _ => OnnxError::ExternalDataUnreadable {
                            tensor,
                            location,
                            message,
                        },
                    }
                })?;
                files.push(location.clone());
                let known = (files.len(), size);
                sizes.insert(location.clone(), known);
                known
            };
            let end = offset.checked_add(p.byte_len);
            if end.is_none_or(|e| e > file_size) {
                return Err(OnnxError::ExternalDataShort {
                    tensor: p.name,
                    location: location.clone(),
                    offset: *offset,
                    end: end.unwrap_or(u64::MAX),
                    file_size,
                });
            }
            let range = *offset..offset.saturating_add(p.byte_len);
            facts.push(("location", J::from(location.as_str())));
            facts.push(("offset", J::from(*offset)));
            if let Some(l) = length {
                facts.push(("length", J::from(*l)));
            }
            if bool {
                decoded(decode::Source::RawBool { file: index, range })
            } else {
                Data::Plain {
                    file: index,
                    range,
                    big_endian: false,
                }
            }
        }
    };
    Ok(Tensor {
        name: p.name,
        dtype: p.dtype,
        shape: p.shape,
        data,
        facts,
    })
}

/// `info`'s `onnx` object: `ir_version`, `opset`, `producer` always (0,
/// null and "" when absent), `producer_version`, `domain` and
/// `model_version` when set.
fn facts(m: &model::ModelHeader) -> serde_json::Map<String, J> {
    let mut f = serde_json::Map::new();
    f.insert("ir_version".into(), J::from(m.ir_version.unwrap_or(0)));
    f.insert(
        "opset".into(),
        model::default_opset(m).map_or(J::Null, J::from),
    );
    f.insert(
        "producer".into(),
        J::from(m.producer_name.clone().unwrap_or_default()),
    );
    if let Some(v) = &m.producer_version {
        f.insert("producer_version".into(), J::from(v.as_str()));
    }
    if let Some(v) = &m.domain {
        f.insert("domain".into(), J::from(v.as_str()));
    }
    if let Some(v) = m.model_version {
        f.insert("model_version".into(), J::from(v));
    }
    f
}

/// The model's metadata: our keys (`producer_name`, `producer_version`,
/// `ir_version`, `opset_import` as `domain:version` strings, `domain`,
/// `model_version`, `doc_string`, `graph.name`, `graph.doc_string`), then
/// `metadata_props` under their keys (under `metadata_props.KEY` where a
/// key is one of ours).
fn metadata(m: &model::ModelHeader, g: &model::Graph) -> Vec<(String, J)> {
    let mut out: Vec<(String, J)> = Vec::new();
    let mut put = |k: &str, v: J| out.push((k.to_owned(), v));
    if let Some(v) = &m.producer_name {
        put("producer_name", J::from(v.as_str()));
    }
    if let Some(v) = &m.producer_version {
        put("producer_version", J::from(v.as_str()));
    }
    if let Some(v) = m.ir_version {
        put("ir_version", J::from(v));
    }
    put(
        "opset_import",
        J::Array(
            m.opsets
                .iter()
                .map(|(d, v)| J::from(format!("{d}:{v}")))
                .collect(),
        ),
    );
    if let Some(v) = &m.domain {
        put("domain", J::from(v.as_str()));
    }
    if let Some(v) = m.model_version {
        put("model_version", J::from(v));
    }
    if let Some(v) = &m.doc_string {
        put("doc_string", J::from(v.as_str()));
    }
    if let Some(v) = &g.name {
        put("graph.name", J::from(v.as_str()));
    }
    if let Some(v) = &g.doc_string {
        put("graph.doc_string", J::from(v.as_str()));
    }
    let ours: HashSet<String> = out.iter().map(|(k, _)| k.clone()).collect();
    for (k, v) in &m.props {
        let key = if ours.contains(k) {
            format!("metadata_props.{k}")
        } else {
            k.clone()
        };
        out.push((key, json!(v)));
    }
    out
}
