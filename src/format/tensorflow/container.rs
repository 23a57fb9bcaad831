//! TensorFlow in the table of containers: a TensorBundle's `.index` (its
//! last 8 bytes the table magic), its data shards
//! `PREFIX.data-0000i-of-0000N` opened beside it (remotely, their sizes
//! asked only); a SavedModel folder opens by its `variables/variables.index`.

use std::path::{Path, PathBuf};

use crate::format::LoadError;
use crate::format::containers::{Container, ContainerKind, Opening, Probe};
use crate::format::opened::{Siblings, fetch_whole, into_file, refusal};

/// The largest `.index` read.
const MAX_INDEX: u64 = 1 << 30;

/// TensorFlow's entry.
pub(crate) const CONTAINER: Container = Container {
    id: "tensorflow",
    label: "TensorFlow",
    has_data_section: false,
    separator: '/',
    // A remote index: only its first block is at hand; its footer is
    // checked once it is fetched whole.
    claims: |p: &Probe<'_>| p.extension == Some("index") && (p.remote || super::is_index(p.bytes)),
    open,
    refuse: Some(|p: &Probe<'_>, path: &Path| {
        (p.extension == Some("index")).then(|| {
            let message = if p.bytes.len() < 48 {
                format!(
                    "the .index is {} bytes: a TensorBundle index holds at least its 48-byte footer",
                    p.bytes.len()
                )
            } else {
                "its last 8 bytes are not the TensorBundle table magic 57 fb 80 8b 24 75 47 db"
                    .to_owned()
            };
            refusal(path, "BadMagic", message, None)
        })
    }),
    expand: None,
    folder: Some(in_folder),
};

/// A SavedModel folder's `variables/variables.index`, else a folder's one
/// `.index` file.
fn in_folder(dir: &Path) -> Option<PathBuf> {
    let saved = dir.join("variables").join("variables.index");
    if saved.is_file() {
        return Some(saved);
    }
    let mut found = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "index") && p.is_file());
    let one = found.next()?;
    found.next().is_none().then_some(one)
}

/// The prefix of the bundle: the index's last name less `.index`.
fn prefix_of(path: &Path) -> String {
    let text = path.to_string_lossy();
    let last = text
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit(['/', std::path::MAIN_SEPARATOR]).next())
        .unwrap_or("");
    last.strip_suffix(".index").unwrap_or(last).to_owned()
}

fn open(o: Opening) -> Result<crate::format::StoredFile, LoadError> {
    let Opening { path, source, .. } = o;
    fetch_whole(&path, &source, MAX_INDEX)?;
    let siblings = Siblings::new(&path, source.remote().is_some());
    let opened = super::open(source.bytes(), &prefix_of(&path), &|name| {
        siblings.size(name)
    })
    .map_err(|e| refusal(&path, e.kind(), e.to_string(), e.tensor()))?;
    let others = siblings.take(&opened.files)?;
    into_file(path, source, ContainerKind::of(&CONTAINER), opened, others)
}
