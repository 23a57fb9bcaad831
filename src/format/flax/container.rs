//! Flax in the table of containers: a msgpack map named `.msgpack`.

use crate::format::LoadError;
use crate::format::containers::{Container, ContainerKind, Opening, Probe};
use crate::format::opened::{into_file, refusal, remote_unsupported};

/// Flax's entry.
pub(crate) const CONTAINER: Container = Container {
    id: "flax",
    label: "Flax",
    has_data_section: false,
    separator: '/',
    claims: |p: &Probe<'_>| p.extension == Some("msgpack") && super::looks_like(p.bytes),
    open,
    refuse: Some(|p: &Probe<'_>, path: &std::path::Path| {
        (p.extension == Some("msgpack")).then(|| {
            refusal(
                path,
                "NotAMap",
                "a Flax .msgpack file starts with a msgpack map; this one does not".into(),
                None,
            )
        })
    }),
    expand: None,
    folder: None,
};

fn open(o: Opening) -> Result<crate::format::StoredFile, LoadError> {
    let Opening { path, source, .. } = o;
    if source.remote().is_some() {
        return Err(remote_unsupported(&path, "Flax"));
    }
    let opened = super::open(source.bytes())
        .map_err(|e| refusal(&path, e.kind(), e.to_string(), e.tensor()))?;
    into_file(
        path,
        source,
        ContainerKind::of(&CONTAINER),
        opened,
        Vec::new(),
    )
}
