//! The containers read, in one table: how each is recognised, opened, and
//! named. Everything below `format/` that is not a container's own folder
//! reaches a container through the table (`format::CONTAINERS`), so adding
//! one is its folder and its line there.
//!
//! Safetensors is the default container: a file is tried as safetensors
//! first, and a file that no container claims gets safetensors' verdict.

use std::path::{Path, PathBuf};

use super::zip::Archive;
use super::{LoadError, StoredFile};
use crate::source::Source;

/// What a container is asked to recognise a file by.
pub(crate) struct Probe<'a> {
    /// The file's bytes (for a remote file, its first block only).
    pub bytes: &'a [u8],
    /// The file name's extension, lower case.
    pub extension: Option<&'a str>,
    /// The file's last name, lower case (a file whose name its spec fixes:
    /// DeepSpeed's `latest`, `*_model_states.pt`).
    pub name: &'a str,
    /// True for a remote file.
    pub remote: bool,
    /// A local zip's directory, read once for every container that asks.
    pub archive: Option<&'a Archive>,
}

/// A file being opened, once a container claimed it.
pub(crate) struct Opening {
    /// Where it was opened from (a path or a URL).
    pub path: PathBuf,
    /// Its bytes.
    pub source: Source,
    /// A local zip's directory, when the file is a zip.
    pub archive: Option<Archive>,
}

/// Opens the rest of a checkpoint that a file begins (a split GGUF's
/// other parts), by the file names the first file gives; `Err((file,
/// None))` when the file stands alone.
pub(crate) type Expand = fn(
    &Path,
    StoredFile,
    &(dyn Fn(&str) -> Result<StoredFile, LoadError> + Sync),
) -> Result<super::Checkpoint, (StoredFile, Option<LoadError>)>;

/// One container: its names and how it is read.
pub struct Container {
    /// `info --json`'s `format`.
    pub id: &'static str,
    /// The name people know it by, for the explorer.
    pub label: &'static str,
    /// True when its tensors lie in one data section that their
    /// `data_offsets` count from (safetensors, GGUF).
    pub has_data_section: bool,
    /// What its names' parts are joined with (`.` for PyTorch's module
    /// paths, `/` for TensorFlow's, HDF5's and Flax's), for the explorer's
    /// tree.
    pub separator: char,
    /// True when the file is this container's, by its content (the name
    /// only where the spec says so).
    pub(crate) claims: fn(&Probe<'_>) -> bool,
    /// Reads the claimed file's header into the model.
    pub(crate) open: fn(Opening) -> Result<StoredFile, LoadError>,
    /// The verdict on a file named as this container's files are that no
    /// container claimed (a `.gguf` that is no GGUF); `None` leaves it to
    /// safetensors.
    pub(crate) refuse: Option<fn(&Probe<'_>, &Path) -> Option<LoadError>>,
    /// For a container whose first file names the others.
    pub(crate) expand: Option<Expand>,
    /// The file a folder opens as, for a container that keeps a model as
    /// a folder (a SavedModel's `variables/variables.index`), asked when
    /// the folder holds no safetensors, PyTorch or NumPy checkpoint.
    pub(crate) folder: Option<fn(&Path) -> Option<PathBuf>>,
}

/// The container a file is: an entry of the table, compared by id.
#[derive(Clone, Copy)]
pub struct ContainerKind(&'static Container);

impl ContainerKind {
    /// The kind of an entry of the table.
    pub const fn of(container: &'static Container) -> Self {
        Self(container)
    }

    /// The identifier of `info --json`'s `format`.
    pub const fn id(self) -> &'static str {
        self.0.id
    }

    /// True when the container's tensors lie in one data section that
    /// their `data_offsets` count from (safetensors, GGUF); false when
    /// they are anywhere in the file (NumPy).
    pub const fn has_data_section(self) -> bool {
        self.0.has_data_section
    }

    /// The name people know the container by, for the explorer.
    pub const fn label(self) -> &'static str {
        self.0.label
    }

    /// What its tensor names' parts are joined with.
    pub const fn name_separator(self) -> char {
        self.0.separator
    }

    pub(crate) fn entry(self) -> &'static Container {
        self.0
    }
}

impl PartialEq for ContainerKind {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ContainerKind {}

impl std::hash::Hash for ContainerKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state);
    }
}

impl std::fmt::Debug for ContainerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContainerKind({})", self.0.id)
    }
}

/// The extension of `path` and its last name, lower case (for a URL, the
/// last segment without its query).
pub(crate) fn names_of(path: &Path) -> (String, Option<String>) {
    let text = path.to_string_lossy();
    let last = text
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit(['/', '\\']).next())
        .unwrap_or("")
        .to_ascii_lowercase();
    let extension = last.rsplit_once('.').map(|(_, e)| e.to_owned());
    (last, extension)
}
