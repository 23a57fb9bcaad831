//! ONNX in the table of containers: a file named `.onnx`, its external
//! data opened beside it (locally inside its folder, remotely by the URL
//! beside it, asking each file's size only).

use super::OnnxError;
use crate::format::LoadError;
use crate::format::containers::{Container, ContainerKind, Opening, Probe};
use crate::format::opened::{Siblings, fetch_whole, into_file, refusal};

/// The largest model file read to list its tensors (protobuf's own limit).
const MAX_MODEL: u64 = 2 << 30;

/// ONNX's entry.
pub(crate) const CONTAINER: Container = Container {
    id: "onnx",
    label: "ONNX",
    has_data_section: false,
    separator: '.',
    claims: |p: &Probe<'_>| p.extension == Some("onnx"),
    open,
    refuse: None,
    expand: None,
    folder: None,
};

fn error(path: &std::path::Path, e: &OnnxError) -> LoadError {
    refusal(path, e.kind(), e.to_string(), e.tensor())
}

fn open(o: Opening) -> Result<crate::format::StoredFile, LoadError> {
    let Opening { path, source, .. } = o;
    fetch_whole(&path, &source, MAX_MODEL)?;
    let siblings = Siblings::new(&path, source.remote().is_some());
    let opened =
        super::open(source.bytes(), &|name| siblings.size(name)).map_err(|e| error(&path, &e))?;
    let others = siblings.take(&opened.files)?;
    into_file(path, source, ContainerKind::of(&CONTAINER), opened, others)
}
