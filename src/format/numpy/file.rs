//! A NumPy file into the model: a `.npy` (local, or remote with its
//! header fetched first) or a local `.npz` archive; what NumPy says of
//! each array kept beside it ([`NumpyParts`]).

use std::path::{Path, PathBuf};

use super::{NpyTensor, NumpyError, Opened};
use crate::format::containers::{ContainerKind, Opening, Probe};
use crate::format::file::Parts;
use crate::format::stored::Encoding;
use crate::format::zip::ZipError;
use crate::format::{Header, LoadError, StoredFile};
use crate::source::Source;

/// What a NumPy file adds to the model.
#[derive(Debug)]
pub struct NumpyParts {
    extras: Vec<NpyTensor>,
    other_members: Vec<String>,
    is_archive: bool,
}

impl NumpyParts {
    /// True for an `.npz` archive.
    pub fn is_archive(&self) -> bool {
        self.is_archive
    }

    /// An archive's members that are not arrays.
    pub fn other_members(&self) -> &[String] {
        &self.other_members
    }

    /// What NumPy says of the tensor at `index` of the header.
    pub fn tensor(&self, index: usize) -> Option<&NpyTensor> {
        self.extras.get(index)
    }
}

/// The tensor name of a local `.npy` at `path`: its file name less `.npy`.
fn npy_name(path: &Path) -> String {
    path.file_name()
        .map(|n| super::name_of_file(&n.to_string_lossy()))
        .unwrap_or_default()
}

/// The tensor name of a remote `.npy`: the URL's last segment, without its
/// query or fragment, less `.npy`.
fn npy_name_of_url(url: &Path) -> String {
    let text = url.to_string_lossy();
    let last = text
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or("");
    super::name_of_file(last)
}

/// NumPy claims a `.npy` by its magic; a local zip with a `*.npy` member
/// or named `.npz`; and a local `.npz` that is no zip, for its verdict.
pub(super) fn claims(p: &Probe<'_>) -> bool {
    if p.bytes.starts_with(super::header::MAGIC) {
        return true;
    }
    if p.remote {
        return false;
    }
    // numpy's own test of a member's name (case-sensitive).
    #[allow(clippy::case_sensitive_file_extension_comparisons)]
    let arrays = p
        .archive
        .is_some_and(|a| a.members().iter().any(|m| m.name.ends_with(".npy")));
    arrays || p.extension == Some("npz")
}

/// A file named `.npy` that is none: NumPy's verdict.
pub(super) fn refuse(p: &Probe<'_>, path: &Path) -> Option<LoadError> {
    let error = match p.extension {
        Some("npy") if p.bytes.is_empty() => NumpyError::Empty,
        Some("npy") => NumpyError::BadMagic,
        _ => return None,
    };
    Some(LoadError::Numpy {
        path: path.to_path_buf(),
        error,
    })
}

/// Opens a claimed NumPy file.
pub(super) fn open(o: Opening) -> Result<StoredFile, LoadError> {
    let Opening {
        path,
        source,
        archive,
    } = o;
    if !source.bytes().starts_with(super::header::MAGIC) {
        let opened = super::open_npz(source.bytes(), archive);
        return into_file(path, source, opened);
    }
    // A remote `.npy` is read by ranges as a safetensors file is: its
    // header fetched whole first.
    let (_header, name) = match source.remote() {
        Some(_) => (fetch_header(&path, &source)?, npy_name_of_url(&path)),
        None => (None, npy_name(&path)),
    };
    let opened = super::open_npy(source.bytes(), name);
    into_file(path, source, opened)
}

/// A remote `.npy`'s header, fetched (and kept while it is parsed) when
/// the first block does not hold it.
fn fetch_header(path: &Path, source: &Source) -> Result<Option<crate::source::Fetched>, LoadError> {
    let header_end = super::header::header_end(source.bytes())
        .ok()
        .flatten()
        .map(|end| 0..end.min(source.len()));
    match header_end {
        Some(r) if !source.is_present(r.clone()) => source
            .fetch(
                r,
                &crate::jobs::CancelToken::default(),
                &crate::jobs::Progress::new(),
            )
            .map(Some)
            .map_err(|error| LoadError::Remote {
                path: path.to_path_buf(),
                error,
            }),
        _ => Ok(None),
    }
}

/// A NumPy file read into the model, or why it is refused.
fn into_file(
    path: PathBuf,
    source: Source,
    opened: Result<Opened, NumpyError>,
) -> Result<StoredFile, LoadError> {
    let opened = opened.map_err(|error| LoadError::Numpy {
        path: path.clone(),
        error,
    })?;
    let header = Header::of_container(opened.header_bytes, opened.tensors);
    let parts = NumpyParts {
        extras: opened.extras,
        other_members: opened.other_members,
        is_archive: opened.is_archive,
    };
    Ok(StoredFile::assemble(
        path,
        source,
        header,
        ContainerKind::NUMPY,
        opened.placements,
    )
    .with_zip(opened.archive)
    .with_parts(parts))
}

impl Parts for NumpyParts {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn facts(&self, index: usize) -> Vec<(&'static str, serde_json::Value)> {
        let Some(t) = self.tensor(index) else {
            return Vec::new();
        };
        let mut out = vec![
            ("descr", serde_json::Value::from(t.descr.clone())),
            (
                "format_version",
                serde_json::Value::from(format!("{}.{}", t.version.0, t.version.1)),
            ),
            ("fortran_order", serde_json::Value::from(t.fortran_order)),
        ];
        if let Some(m) = &t.member {
            out.push(("member", serde_json::Value::from(m.clone())));
        }
        out
    }

    fn warnings(&self) -> Vec<(&'static str, String)> {
        // An archive's other members (a README.txt) are not tensors: said once.
        let others = &self.other_members;
        if others.is_empty() {
            return Vec::new();
        }
        let shown: Vec<String> = others.iter().take(5).map(|m| format!("{m:?}")).collect();
        let more = others.len().saturating_sub(shown.len());
        vec![(
            "NpzOtherMembers",
            format!(
                "the archive holds {} member(s) that are not .npy arrays and are not tensors: {}{}",
                others.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        )]
    }

    fn describe(&self, file: &StoredFile) -> Option<String> {
        let label = file.kind().label();
        if !self.is_archive {
            return Some(format!("{label} .npy array"));
        }
        let total = file.header().tensors().len();
        let deflated = (0..total)
            .filter(|&i| {
                file.placement(i)
                    .is_some_and(|p| p.storage().encoding != Encoding::Plain)
            })
            .count();
        Some(format!(
            "{label} .npz archive · {deflated} of {total} arrays deflated"
        ))
    }

    fn zip_error(&self, path: &Path, error: ZipError) -> LoadError {
        LoadError::Numpy {
            path: path.to_path_buf(),
            error: NumpyError::Zip(error),
        }
    }
}

impl StoredFile {
    /// What a NumPy file adds (`None` for other containers).
    pub fn numpy(&self) -> Option<&NumpyParts> {
        self.parts()
    }
}
