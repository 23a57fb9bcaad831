//! Flax in the table of containers: a msgpack map named `.msgpack`.

use crate::format::LoadError;
use crate::format::containers::{Container, Opening, Probe};
use crate::format::opened::{open_local_file, refusal};

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
    open_local_file(o, &CONTAINER, |bytes| {
        super::open(bytes).map_err(|e| (e.kind(), e.to_string(), e.tensor().map(str::to_owned)))
    })
}
