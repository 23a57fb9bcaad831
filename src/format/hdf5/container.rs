//! HDF5 in the table of containers: the signature at offset 0 or after a
//! user block (512, 1024, 2048, … bytes).

use crate::format::LoadError;
use crate::format::containers::{Container, Opening, Probe};
use crate::format::opened::{open_local_file, refusal};

/// HDF5's entry.
pub(crate) const CONTAINER: Container = Container {
    id: "hdf5",
    label: "HDF5",
    has_data_section: false,
    separator: '/',
    claims: |p: &Probe<'_>| {
        if p.remote {
            return p.bytes.starts_with(super::SIGNATURE);
        }
        super::find_superblock(p.bytes).is_some()
    },
    open,
    refuse: Some(|p: &Probe<'_>, path: &std::path::Path| {
        matches!(p.extension, Some("h5" | "hdf5")).then(|| {
            refusal(
                path,
                "BadSignature",
                "no HDF5 signature at byte 0 or after a user block of 512, 1024, … bytes".into(),
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
