//! A container read through [`decode`](super::decode) into the model: its
//! tensors' infos and placements, the files beside it that hold some of
//! them, and what it says beyond the model ([`Said`]). The containers
//! added this way (ONNX, TensorFlow, HDF5, Flax) share this and differ
//! only in their readers.

use std::path::{Path, PathBuf};

use super::containers::ContainerKind;
use super::decode::{Data, Opened};
use super::file::Parts;
use super::stored::{ByteOrder, Decoder, Encoding, Layout, Placement, Storage};
use super::{Header, LoadError, StoredFile, TensorInfo};
use crate::source::Source;

/// What a container read through `decode` says beyond the model.
#[derive(Debug, Default)]
pub(crate) struct Said {
    metadata: serde_json::Map<String, serde_json::Value>,
    facts: Vec<Vec<(&'static str, serde_json::Value)>>,
    file_facts: serde_json::Map<String, serde_json::Value>,
    warnings: Vec<String>,
    pickle: Option<crate::format::pytorch::PickleReport>,
}

impl Parts for Said {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn metadata(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        Some(self.metadata.clone())
    }

    fn facts(&self, index: usize) -> Vec<(&'static str, serde_json::Value)> {
        self.facts.get(index).cloned().unwrap_or_default()
    }

    fn pickle(&self) -> Option<&crate::format::pytorch::PickleReport> {
        self.pickle.as_ref()
    }

    fn unsafe_globals(&self) -> &[String] {
        self.pickle.as_ref().map_or(&[], |p| &p.unsafe_globals)
    }

    fn refusal(&self, path: &Path) -> Option<LoadError> {
        let globals = &self.pickle.as_ref()?.unsafe_globals;
        (!globals.is_empty()).then(|| LoadError::Pytorch {
            path: path.to_path_buf(),
            error: crate::format::pytorch::archive::TorchError::Unsafe {
                globals: globals.clone(),
            },
        })
    }

    fn describe(&self, file: &StoredFile) -> Option<String> {
        let label = file.kind().label();
        Some(match file.other_files().count() {
            0 => format!("{label} file"),
            1 => format!("{label} file · its data in 1 file beside it"),
            n => format!("{label} file · its data in {n} files beside it"),
        })
    }

    fn file_facts(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        (!self.file_facts.is_empty()).then(|| self.file_facts.clone())
    }

    fn zip_error(&self, path: &Path, error: super::zip::ZipError) -> LoadError {
        refusal(path, "BadZip", error.to_string(), None)
    }

    fn warnings(&self) -> Vec<(&'static str, String)> {
        self.warnings
            .iter()
            .map(|w| ("ContainerNote", w.clone()))
            .collect()
    }
}

/// The refusal of a container read through `decode`.
pub(crate) fn refusal(
    path: &Path,
    kind: &'static str,
    message: String,
    tensor: Option<&str>,
) -> LoadError {
    LoadError::Container {
        path: path.to_path_buf(),
        kind,
        message,
        tensor: tensor.map(str::to_owned),
    }
}

/// `opened` (read from `source`, at `path`) into the model; `others` are
/// the files [`Opened::files`] names, opened, in that order.
pub(crate) fn into_file(
    path: PathBuf,
    source: Source,
    kind: ContainerKind,
    opened: Opened,
    others: Vec<(String, Source)>,
) -> Result<StoredFile, LoadError> {
    let mut infos = Vec::with_capacity(opened.tensors.len());
    let mut placements = Vec::with_capacity(opened.tensors.len());
    let mut facts = Vec::with_capacity(opened.tensors.len());
    let mut seen = std::collections::HashSet::with_capacity(opened.tensors.len());
    for (id, t) in opened.tensors.into_iter().enumerate() {
        let bad = |message: String| refusal(&path, "InvalidTensor", message, Some(&t.name));
        if !seen.insert(t.name.clone()) {
            return Err(refusal(
                &path,
                "DuplicateTensor",
                format!("two tensors are named {:?}", t.name),
                Some(&t.name),
            ));
        }
        let nbytes = t
            .dtype
            .byte_len(&t.shape)
            .ok_or_else(|| bad(format!("tensor {:?}: its size overflows", t.name)))?;
        let (storage, order) = match &t.data {
            Data::Plain {
                file,
                range,
                big_endian,
            } => {
                let len = match file {
                    0 => source.len(),
                    k => others.get(k - 1).map_or(0, |(_, s)| s.len()),
                };
                if range.end < range.start || range.end > len || range.end - range.start != nbytes {
                    return Err(bad(format!(
                        "tensor {:?}: bytes {}..{} of file {file} ({len} bytes) do not hold its {nbytes} bytes",
                        t.name, range.start, range.end
                    )));
                }
                let order = if *big_endian {
                    ByteOrder::Big
                } else {
                    ByteOrder::Little
                };
                let storage = Storage {
                    file: *file,
                    file_range: range.clone(),
                    skip: 0,
                    len: nbytes,
                    encoding: Encoding::Plain,
                };
                (storage, order)
            }
            Data::Decoded(d) => {
                let storage = Storage {
                    file: 0,
                    file_range: 0..0,
                    skip: 0,
                    len: nbytes,
                    encoding: Encoding::Decoded(Decoder(d.clone())),
                };
                (storage, ByteOrder::Little)
            }
        };
        let begin = match &t.data {
            Data::Plain { range, .. } => range.start,
            Data::Decoded(_) => 0,
        };
        let info = TensorInfo::new(t.name.clone(), t.dtype, t.shape.clone(), begin)
            .ok_or_else(|| bad(format!("tensor {:?}: its size overflows", t.name)))?;
        let placement = Placement::new(t.dtype, &t.shape, order, Layout::Contiguous, storage, id)
            .map_err(|e| bad(format!("tensor {:?}: {e}", t.name)))?;
        infos.push(info);
        placements.push(placement);
        facts.push(t.facts);
    }
    let said = Said {
        metadata: opened.metadata.into_iter().collect(),
        facts,
        file_facts: opened.facts,
        warnings: opened.warnings,
        pickle: opened.pickle,
    };
    let texts = said
        .metadata
        .iter()
        .map(|(k, v)| {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            (k.clone(), text)
        })
        .collect();
    let header = Header::of_container(opened.header_len, infos).with_metadata(texts);
    Ok(StoredFile::assemble(path, source, header, kind, placements)
        .with_parts(said)
        .with_others(others))
}

/// The files beside a container's first file that it names (external
/// data, data shards): each opened once, when its size is first asked,
/// and kept for the model. Locally a name must resolve (symlinks
/// followed) inside the first file's folder; remotely it is the URL
/// beside the first, and opening it asks for its size only (one byte).
pub(crate) struct Siblings<'a> {
    path: &'a Path,
    remote: bool,
    opened: std::sync::Mutex<Vec<(String, Source)>>,
}

impl<'a> Siblings<'a> {
    /// The files beside `path` (remote when `remote`).
    pub(crate) fn new(path: &'a Path, remote: bool) -> Self {
        Self {
            path,
            remote,
            opened: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The size of file `name`, opening it (once). An error of kind
    /// `InvalidInput` says it resolves outside the folder; `NotFound`
    /// that it is missing.
    pub(crate) fn size(&self, name: &str) -> std::io::Result<u64> {
        let mut opened = self
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, s)) = opened.iter().find(|(n, _)| n == name) {
            return Ok(s.len());
        }
        let source = if self.remote {
            self.open_remote(name)?
        } else {
            self.open_local(name)?
        };
        let len = source.len();
        opened.push((name.to_owned(), source));
        Ok(len)
    }

    fn open_local(&self, name: &str) -> std::io::Result<Source> {
        let folder = self.path.parent().unwrap_or(Path::new("."));
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        let root = std::fs::canonicalize(folder)?;
        let real = std::fs::canonicalize(folder.join(name))?;
        if !real.starts_with(&root) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name:?} resolves outside the model's folder"),
            ));
        }
        let meta = std::fs::metadata(&real)?;
        if !meta.is_file() {
            return Err(super::file::not_a_regular_file());
        }
        let file = std::fs::File::open(&real)?;
        Ok(Source::Local(crate::source::map::Mapping::map(&file)?))
    }

    fn open_remote(&self, name: &str) -> std::io::Result<Source> {
        let url = self.path.to_string_lossy();
        let sibling = crate::source::remote::sibling_keeping_query(&url, name);
        crate::source::RemoteFile::open_sized(crate::source::remote::client(), &sibling)
            .map(Source::Remote)
            .map_err(|e| {
                let kind = if e.kind() == "NotFound" {
                    std::io::ErrorKind::NotFound
                } else {
                    std::io::ErrorKind::Other
                };
                std::io::Error::new(kind, e.message().to_owned())
            })
    }

    /// The files `names` gives, in that order (each opened if it was not).
    pub(crate) fn take(self, names: &[String]) -> Result<Vec<(String, Source)>, LoadError> {
        for name in names {
            self.size(name).map_err(|e| LoadError::Io {
                path: self.path.to_path_buf(),
                source: std::sync::Arc::new(std::io::Error::new(
                    e.kind(),
                    format!("{name:?}: {e}"),
                )),
            })?;
        }
        let mut opened = self
            .opened
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if let Some(at) = opened.iter().position(|(n, _)| n == name) {
                out.push(opened.swap_remove(at));
            }
        }
        Ok(out)
    }
}

/// A remote first file read whole into its cache map (an ONNX model, a
/// TensorFlow index: what their readers parse), at most `max` bytes.
pub(crate) fn fetch_whole(path: &Path, source: &Source, max: u64) -> Result<(), LoadError> {
    let Some(remote) = source.remote() else {
        return Ok(());
    };
    let len = source.len();
    if len > max {
        return Err(refusal(
            path,
            "RemoteTooLarge",
            format!("the file is {len} bytes; at most {max} are read to list its tensors"),
            None,
        ));
    }
    remote
        .read_into_map(0..len)
        .map_err(|error| LoadError::Remote {
            path: path.to_path_buf(),
            error,
        })
}

/// A container of one local file (HDF5, Flax): refused over HTTP, else its
/// bytes read by `read` into the model; `read`'s error is its
/// `(kind, message, tensor)`.
pub(crate) fn open_local_file(
    o: super::containers::Opening,
    container: &'static super::containers::Container,
    read: impl FnOnce(&[u8]) -> Result<Opened, (&'static str, String, Option<String>)>,
) -> Result<StoredFile, LoadError> {
    let super::containers::Opening { path, source, .. } = o;
    if source.remote().is_some() {
        return Err(remote_unsupported(&path, container.label));
    }
    let opened = read(source.bytes())
        .map_err(|(kind, message, tensor)| refusal(&path, kind, message, tensor.as_deref()))?;
    into_file(
        path,
        source,
        ContainerKind::of(container),
        opened,
        Vec::new(),
    )
}

/// The refusal of a container that is not read over HTTP.
pub(crate) fn remote_unsupported(path: &Path, what: &str) -> LoadError {
    LoadError::Remote {
        path: path.to_path_buf(),
        error: crate::source::RemoteError::new(
            "RemoteUnsupported",
            format!("{what} files are not read over HTTP; download the file and open the copy"),
        ),
    }
}
