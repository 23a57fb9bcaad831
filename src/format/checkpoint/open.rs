//! Opening a checkpoint: a file, a shard index or a folder, local or
//! remote; an index's shards a few at once, checked against its weight map.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::{
    Checkpoint, CheckpointKind, INDEX_FILE_NAME, MAX_INDEX_BYTES, Shard, TORCH_INDEX_NAME,
    TensorRef, Warning,
};
use crate::format::LoadError;
use crate::format::file::StoredFile;
use crate::source::remote::sibling_keeping_query;

impl Checkpoint {
    /// Opens a safetensors file, a shard index (`*.json`), or a folder that
    /// holds one of them.
    ///
    /// An `http://`, `https://` or `hf://` location opens the remote file or
    /// index it names (see [`crate::source::remote`]): only headers are read.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        if let Some(location) = path.to_str()
            && crate::source::remote::is_remote(location)
        {
            return Self::open_remote(location);
        }
        let path = match resolve_folder(path)? {
            Resolved::File(file) => file,
            Resolved::Folder(dir, names) => return Self::open_folder(&dir, &names),
            Resolved::DcpHf(files) => {
                let file = crate::format::dcp::hf::open(&files)?;
                let first = files.first().cloned().unwrap_or_default();
                return Ok(Self::single(first, file));
            }
        };
        let is_index = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.to_ascii_lowercase().ends_with(".json"));
        if is_index {
            let text = read_index(&path)?;
            let folder = path.parent().unwrap_or_else(|| Path::new("."));
            Self::open_index(&path, &text, &|name| {
                StoredFile::open(&folder.join(name)).map_err(|e| match e {
                    LoadError::Io { path, source } => LoadError::ShardMissing {
                        shard: name.to_owned(),
                        path,
                        source,
                    },
                    other => other,
                })
            })
        } else {
            let file = StoredFile::open(&path)?;
            // A file that names the others of its checkpoint (a split
            // GGUF's first part) opens them all.
            let folder = path.parent().unwrap_or_else(|| Path::new("."));
            let open_part = |name: &str| StoredFile::open(&folder.join(name));
            Ok(Self::expand(&path, file, &open_part)?)
        }
    }

    /// A folder of NumPy files as one checkpoint: each `.npy` a tensor,
    /// each `.npz` its members, in file-name order, a few files at once.
    /// A name two files give is read from the first (a warning says so).
    fn open_folder(dir: &Path, names: &[String]) -> Result<Self, LoadError> {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let opened = open_all(&refs, &|name| StoredFile::open(&dir.join(name)));
        let mut parts = Vec::with_capacity(names.len());
        for (name, file) in names.iter().zip(opened) {
            parts.push((name.clone(), file?));
        }
        Ok(Self::of_parts(
            dir.to_path_buf(),
            parts,
            |shard, tensor, first| {
                format!(
                    "{shard:?} also holds tensor {tensor:?}, which {first:?} holds first; the first is the one read by name"
                )
            },
        ))
    }

    /// [`Checkpoint::open`], refusing a checkpoint no verb may read (a
    /// PyTorch file whose pickle is unsafe): what the readers call.
    pub fn open_readable(path: &Path) -> Result<Self, LoadError> {
        let ck = Self::open(path)?;
        ck.readable()?;
        Ok(ck)
    }

    /// A file as its checkpoint: with the files it names when its
    /// container says it begins several, else alone.
    fn expand(
        path: &Path,
        file: StoredFile,
        open_part: &(dyn Fn(&str) -> Result<StoredFile, LoadError> + Sync),
    ) -> Result<Self, LoadError> {
        let Some(expand) = file.kind().entry().expand else {
            return Ok(Self::single(path.to_path_buf(), file));
        };
        match expand(path, file, open_part) {
            Ok(ck) => Ok(ck),
            Err((_, Some(e))) => Err(e),
            Err((file, None)) => Ok(Self::single(path.to_path_buf(), file)),
        }
    }

    /// A checkpoint of one file.
    fn single(path: PathBuf, file: StoredFile) -> Self {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let warnings = format_warnings(&file, None);
        let tensors = (0..file.header().tensors().len())
            .map(|index| TensorRef { shard: 0, index })
            .collect();
        Self::new(
            path,
            CheckpointKind::Single,
            vec![Shard { name, file }],
            tensors,
            warnings,
        )
    }

    /// Opens a remote file or shard index (a URL or a Hub location); an
    /// index's shards are opened header by header, a few at once.
    fn open_remote(location: &str) -> Result<Self, LoadError> {
        use crate::source::remote::{self, hub};
        let client = remote::client();
        let remote_error = |error| LoadError::Remote {
            path: location.into(),
            error,
        };
        let rule = hub::IndexRule {
            name: INDEX_FILE_NAME,
            max_bytes: MAX_INDEX_BYTES,
        };
        let located = hub::locate(client, location, rule).map_err(remote_error)?;
        let url = located.url.clone();
        let path = PathBuf::from(&url);
        let not_found = |e: LoadError, file: &str| match (&located.hub, e) {
            (Some(h), LoadError::Remote { path, error }) if error.kind() == "NotFound" => {
                LoadError::Remote {
                    path,
                    error: hub::not_found(h, file),
                }
            }
            (_, other) => other,
        };
        let is_index = url
            .split(['?', '#'])
            .next()
            .is_some_and(|u| u.to_ascii_lowercase().ends_with(".json"));
        if !is_index {
            let name = url
                .split(['?', '#'])
                .next()
                .and_then(|u| u.rsplit('/').next())
                .unwrap_or("")
                .to_owned();
            let file = match StoredFile::open_url(&url) {
                // A repository of PyTorch weights only: its index, else
                // its pytorch_model.bin.
                Err(LoadError::Remote { error, .. })
                    if error.kind() == "NotFound"
                        && located.hub.as_ref().is_some_and(|h| h.path.is_none()) =>
                {
                    if let Some(h) = &located.hub {
                        let endpoint = client.settings().hf_endpoint.clone();
                        let index = h.resolve(&endpoint, TORCH_INDEX_NAME);
                        if let Ok(Some(text)) = client.read_small(&index, MAX_INDEX_BYTES) {
                            return Self::open_remote_index(
                                Path::new(&index),
                                &index,
                                &text,
                                &not_found,
                            );
                        }
                        let weights = h.resolve(&endpoint, "pytorch_model.bin");
                        let file = StoredFile::open_url(&weights).map_err(|e| {
                            not_found(e, "model.safetensors, model.safetensors.index.json or pytorch_model.bin")
                        })?;
                        return Ok(Self::single(PathBuf::from(&weights), file));
                    }
                    return Err(not_found(
                        LoadError::Remote {
                            path: path.clone(),
                            error,
                        },
                        &name,
                    ));
                }
                other => other.map_err(|e| not_found(e, &name))?,
            };
            // The files it names, beside it, by URL.
            let open_part = |part: &str| {
                StoredFile::open_url(&sibling_keeping_query(&url, part))
                    .map_err(|e| not_found(e, part))
            };
            return Self::expand(&path, file, &open_part);
        }
        let text = match located.index {
            Some(t) => t,
            None => client
                .read_small(&url, MAX_INDEX_BYTES)
                .map_err(|error| LoadError::Remote {
                    path: path.clone(),
                    error,
                })?
                .ok_or_else(|| LoadError::Remote {
                    path: path.clone(),
                    error: remote::RemoteError::new(
                        "NotFound",
                        format!("{url}: HTTP 404, no such file"),
                    ),
                })?,
        };
        Self::open_remote_index(&path, &url, &text, &not_found)
    }

    /// A remote shard index at `url` (its bytes `text`): each shard opened
    /// by the URL beside it.
    fn open_remote_index(
        path: &Path,
        url: &str,
        text: &[u8],
        not_found: &(dyn Fn(LoadError, &str) -> LoadError + Sync),
    ) -> Result<Self, LoadError> {
        use crate::source::remote;
        Self::open_index(path, text, &|name| {
            let shard_url =
                remote::sibling_url(url, name).ok_or_else(|| LoadError::InvalidIndex {
                    path: path.to_path_buf(),
                    message: format!("shard name {name:?} gives no URL"),
                })?;
            StoredFile::open_url(&shard_url).map_err(|e| match not_found(e, name) {
                LoadError::Remote { path, error } => LoadError::Remote {
                    path,
                    error: remote::RemoteError::new(
                        error.kind(),
                        format!("shard {name:?} named by the index: {}", error.message()),
                    ),
                },
                other => other,
            })
        })
    }

    /// A sharded checkpoint from its index's bytes; `open_shard` opens a
    /// shard by the name the index gives it. Shards are opened a few at
    /// once (remote ones wait on the network), in name order.
    fn open_index(
        path: &Path,
        text: &[u8],
        open_shard: &(dyn Fn(&str) -> Result<StoredFile, LoadError> + Sync),
    ) -> Result<Self, LoadError> {
        let invalid = |message: String| LoadError::InvalidIndex {
            path: path.to_path_buf(),
            message,
        };
        let index: serde_json::Value =
            serde_json::from_slice(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let Some(object) = index.as_object() else {
            return Err(invalid("the index is not a JSON object".into()));
        };
        let Some(map) = object.get("weight_map").and_then(|v| v.as_object()) else {
            return Err(invalid("it has no \"weight_map\" object".into()));
        };
        let metadata = object.get("metadata").cloned().unwrap_or_default();
        let total_size = metadata.get("total_size").and_then(json_u64);

        let torch_shards = names_torch_shards(path);
        let mut weight_map: BTreeMap<&str, &str> = BTreeMap::new();
        for (tensor, shard) in map {
            let Some(shard) = shard.as_str() else {
                return Err(invalid(format!(
                    "weight_map entry {tensor:?} is not a file name string"
                )));
            };
            check_shard_name(shard, torch_shards).map_err(|why| {
                invalid(format!(
                    "shard name {shard:?} (for tensor {tensor:?}) {why}"
                ))
            })?;
            weight_map.insert(tensor, shard);
        }
        let shard_names: Vec<&str> = weight_map
            .values()
            .copied()
            .collect::<BTreeSet<&str>>()
            .into_iter()
            .collect();
        let opened = open_all(&shard_names, open_shard);
        let mut shards = Vec::with_capacity(shard_names.len());
        let mut warnings = Vec::new();
        for (name, file) in shard_names.iter().zip(opened) {
            let file = file.map_err(|e| match e {
                LoadError::Format {
                    path,
                    error,
                    repeated,
                } => LoadError::ShardInvalid {
                    shard: (*name).to_owned(),
                    path,
                    error,
                    repeated,
                },
                other => other,
            })?;
            warnings.extend(format_warnings(&file, Some(name)));
            shards.push(Shard {
                name: (*name).to_owned(),
                file,
            });
        }
        // Where each name really is.
        let mut found: HashMap<&str, Vec<usize>> = HashMap::new();
        for (s, shard) in shards.iter().enumerate() {
            for t in shard.file.header().tensors() {
                found.entry(t.name()).or_default().push(s);
            }
        }
        // A shard whose pickle is unsafe has no tensors built: it is
        // reported (its globals), not a mismatch.
        let unsafe_shards: BTreeSet<&str> = shards
            .iter()
            .filter(|s| !s.file.unsafe_globals().is_empty())
            .map(|s| s.name.as_str())
            .collect();
        for (tensor, shard) in &weight_map {
            let holders = found.get(tensor).map(Vec::as_slice).unwrap_or_default();
            if !unsafe_shards.contains(shard) && !holders.iter().any(|&s| shards[s].name == *shard)
            {
                return Err(LoadError::IndexMismatch {
                    tensor: (*tensor).to_owned(),
                    shard: (*shard).to_owned(),
                    found_in: holders.first().map(|&s| shards[s].name.clone()),
                    path: path.to_path_buf(),
                });
            }
        }
        let mut tensors = Vec::new();
        let mut data_total: u64 = 0;
        for (s, shard) in shards.iter().enumerate() {
            for (index, t) in shard.file.header().tensors().iter().enumerate() {
                match weight_map.get(t.name()) {
                    Some(owner) if *owner == shard.name => {}
                    Some(owner) => {
                        warnings.push(Warning {
                            kind: "ShardDuplicate",
                            message: format!(
                                "shard {:?} also holds tensor {:?}, which the index maps to {owner:?}; this copy is ignored",
                                shard.name, t.name()
                            ),
                            tensor: Some(t.name().to_owned()),
                            shard: Some(shard.name.clone()),
                        });
                        continue;
                    }
                    None => warnings.push(Warning {
                        kind: "NotInWeightMap",
                        message: format!(
                            "shard {:?} holds tensor {:?}, which the index's weight_map does not list",
                            shard.name, t.name()
                        ),
                        tensor: Some(t.name().to_owned()),
                        shard: Some(shard.name.clone()),
                    }),
                }
                data_total = data_total.saturating_add(t.nbytes());
                tensors.push(TensorRef { shard: s, index });
            }
        }
        match (metadata.get("total_size"), total_size) {
            (None, _) => {}
            (Some(_), Some(declared)) if declared == data_total => {}
            (Some(_), Some(declared)) => warnings.push(Warning {
                kind: "TotalSizeMismatch",
                message: format!(
                    "metadata.total_size is {declared} but the tensors hold {data_total} bytes"
                ),
                tensor: None,
                shard: None,
            }),
            (Some(v), None) => warnings.push(Warning {
                kind: "TotalSizeMismatch",
                message: format!(
                    "metadata.total_size is {v}, not a byte count; the tensors hold {data_total} bytes"
                ),
                tensor: None,
                shard: None,
            }),
        }
        Ok(Self::new(
            path.to_path_buf(),
            CheckpointKind::Sharded {
                metadata,
                total_size,
                index_bytes: text.len() as u64,
            },
            shards,
            tensors,
            warnings,
        ))
    }
}

/// Opens every shard, at most [`SHARDS_AT_ONCE`] at a time, keeping the
/// order of `names`.
fn open_all(
    names: &[&str],
    open_shard: &(dyn Fn(&str) -> Result<StoredFile, LoadError> + Sync),
) -> Vec<Result<StoredFile, LoadError>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<StoredFile, LoadError>>>> =
        names.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..SHARDS_AT_ONCE.min(names.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(name) = names.get(i) else { return };
                    let r = open_shard(name);
                    if let Some(slot) = slots.get(i) {
                        *slot
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(r);
                    }
                }
            });
        }
    });
    slots
        .into_iter()
        .zip(names)
        .map(|(m, name)| {
            m.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or_else(|| open_shard(name))
        })
        .collect()
}

/// A safetensors index (`*.safetensors.index.json`) names safetensors
/// shards; any other (a `pytorch_model.bin.index.json`) PyTorch files too.
fn names_torch_shards(index: &Path) -> bool {
    !index
        .to_string_lossy()
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
        .ends_with(".safetensors.index.json")
}

/// Shards whose headers are read at once.
const SHARDS_AT_ONCE: usize = 8;

fn json_u64(v: &serde_json::Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    // Some writers store the size as a float or a string.
    if let Some(f) = v.as_f64()
        && f >= 0.0
        && f.fract() == 0.0
        && f < 18_446_744_073_709_551_616.0
    {
        return Some(f as u64);
    }
    v.as_str().and_then(|s| s.trim().parse().ok())
}

/// A shard name must be a relative path inside the index's folder. The
/// name is checked, not the resolved path: a Hugging Face snapshot's files
/// are symlinks into `../../blobs/` and must open.
fn check_shard_name(name: &str, torch: bool) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.contains('\0') {
        return Err("contains a NUL byte");
    }
    if name.starts_with('/') || name.starts_with('\\') || name.as_bytes().get(1) == Some(&b':') {
        return Err("is an absolute path");
    }
    if name.split(['/', '\\']).any(|part| part == "..") {
        return Err("leaves the index's folder (`..`)");
    }
    // Refused on every system, so that a file gets one verdict everywhere.
    if name.contains(':') {
        return Err("names a drive or a Windows alternate data stream (`:`)");
    }
    if name
        .split(['/', '\\'])
        .any(crate::platform::paths::is_windows_device_name)
    {
        return Err("names a Windows device (CON, NUL, COM1, …)");
    }
    let extension = name.rsplit_once('.').map_or("", |(_, e)| e);
    if torch {
        if extension != "safetensors" && !crate::format::TORCH_EXTENSIONS.contains(&extension) {
            return Err("does not end in .safetensors or a PyTorch file's extension");
        }
    } else if extension != "safetensors" {
        return Err("does not end in .safetensors");
    }
    Ok(())
}

pub(super) fn format_warnings(file: &StoredFile, shard: Option<&str>) -> Vec<Warning> {
    let mut out: Vec<Warning> = file
        .header()
        .warnings()
        .iter()
        .map(|w| Warning {
            kind: w.kind(),
            message: match shard {
                Some(s) => format!("shard {s:?}: {w}"),
                None => w.to_string(),
            },
            tensor: w.tensor().map(str::to_owned),
            shard: shard.map(str::to_owned),
        })
        .collect();
    // What the container warns of (an archive's other members).
    for (kind, message) in file.container_warnings() {
        out.push(Warning {
            kind,
            message,
            tensor: None,
            shard: shard.map(str::to_owned),
        });
    }
    out
}

/// What a path given to open is.
enum Resolved {
    /// A file, or the one file a folder holds.
    File(PathBuf),
    /// A folder of NumPy files (their names, sorted), opened as one.
    Folder(PathBuf, Vec<String>),
    /// A folder of DCP's HuggingFace-writer shards (sorted).
    DcpHf(Vec<PathBuf>),
}

/// A folder opens as the index inside it, else its only safetensors file;
/// with no safetensors there, as its PyTorch shard index, else its `.npy`
/// and `.npz` files as one checkpoint, else its PyTorch weights
/// (`pytorch_model.bin`, or its only PyTorch file: a Trainer's folder also
/// holds `training_args.bin` and `optimizer.pt`, which are not the model).
fn resolve_folder(path: &Path) -> Result<Resolved, LoadError> {
    if !path.is_dir() {
        return Ok(Resolved::File(path.to_path_buf()));
    }
    let io = |source: std::io::Error| LoadError::Io {
        path: path.to_path_buf(),
        source: source.into(),
    };
    let preferred = path.join(INDEX_FILE_NAME);
    if preferred.is_file() {
        return Ok(Resolved::File(preferred));
    }
    let mut indexes = Vec::new();
    let mut files = Vec::new();
    let mut torch_indexes = Vec::new();
    let mut torch_files = Vec::new();
    let mut numpy = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let lower = name.to_ascii_lowercase();
        let extension = lower.rsplit_once('.').map_or("", |(_, e)| e);
        if name.ends_with(".safetensors.index.json") {
            indexes.push(entry.path());
        } else if name.ends_with(".safetensors") {
            files.push(entry.path());
        } else if crate::format::is_torch_index_name(&name) {
            torch_indexes.push(entry.path());
        } else if crate::format::TORCH_EXTENSIONS.contains(&extension) {
            torch_files.push(entry.path());
        } else if matches!(extension, "npy" | "npz") {
            numpy.push(entry.path());
        }
    }
    indexes.sort();
    files.sort();
    torch_indexes.sort();
    torch_files.sort();
    numpy.sort();
    let several = |what: &str, n: usize| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{FOLDER_HOLDS} {n} {what}; open one of them"),
        ))
    };
    if indexes.is_empty() && files.is_empty() {
        match torch_indexes.as_slice() {
            [one] => return Ok(Resolved::File(one.clone())),
            [] => {}
            many => return Err(several("PyTorch shard indexes", many.len())),
        }
        match numpy.as_slice() {
            [one] => return Ok(Resolved::File(one.clone())),
            [] => {}
            many => {
                let names = many
                    .iter()
                    .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                    .collect();
                return Ok(Resolved::Folder(path.to_path_buf(), names));
            }
        }
        let weights = torch_files
            .iter()
            .find(|p| p.file_name().is_some_and(|n| n == TORCH_WEIGHTS_NAME));
        // A container that keeps a model as a folder of PyTorch files (a
        // DeepSpeed step folder), before they are taken one by one.
        if weights.is_none()
            && !torch_files.is_empty()
            && let Some(file) = container_folder(path)
        {
            return Ok(Resolved::File(file));
        }
        match (weights, torch_files.as_slice()) {
            (Some(one), _) | (None, [one]) => return Ok(Resolved::File(one.clone())),
            (None, []) => {}
            (None, many) => {
                return Err(several(
                    "PyTorch files and no pytorch_model.bin",
                    many.len(),
                ));
            }
        }
    }
    if indexes.is_empty() && files.is_empty() {
        // A container that keeps a model as a folder (a SavedModel).
        if let Some(file) = container_folder(path) {
            return Ok(Resolved::File(file));
        }
    }
    match (indexes.as_slice(), files.as_slice()) {
        // A distributed checkpoint written by torch's HuggingFace writer:
        // its shards (one is enough) are chunks of the global tensors.
        ([], many) if crate::format::dcp::hf::is_hf_folder(many) => {
            Ok(Resolved::DcpHf(many.to_vec()))
        }
        ([one], _) | ([], [one]) => Ok(Resolved::File(one.clone())),
        ([], []) => Err(io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{FOLDER_HOLDS} no checkpoint: no .safetensors file, shard index, NumPy file or pytorch_model.bin"
            ),
        ))),
        ([], many) => Err(several(".safetensors files and no shard index", many.len())),
        (many, _) => Err(several("shard indexes", many.len())),
    }
}

/// The file a folder opens as for a container that keeps a model as a
/// folder (`Container::folder`), asked in the table's order.
fn container_folder(path: &Path) -> Option<PathBuf> {
    crate::format::CONTAINERS
        .iter()
        .filter_map(|c| c.folder)
        .find_map(|folder| folder(path))
}

/// How the errors of a folder that is not one checkpoint begin (none, or
/// several files and no index): [`LoadError::is_folder_of_many`].
pub(crate) const FOLDER_HOLDS: &str = "the folder holds";

/// The weights file a PyTorch model folder holds, when it is one file.
const TORCH_WEIGHTS_NAME: &str = "pytorch_model.bin";

/// The bytes of a shard index: a regular file (a FIFO's open would wait
/// forever, a device never ends) of at most [`MAX_INDEX_BYTES`], also if it
/// grows while it is read.
fn read_index(path: &Path) -> Result<Vec<u8>, LoadError> {
    let invalid = |message: String| LoadError::InvalidIndex {
        path: path.to_path_buf(),
        message,
    };
    let io = |source: std::io::Error| LoadError::Io {
        path: path.to_path_buf(),
        source: source.into(),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(io(crate::format::file::not_a_regular_file()));
    }
    let size = meta.len();
    if size > MAX_INDEX_BYTES {
        return Err(invalid(format!(
            "the index is {size} bytes; at most {MAX_INDEX_BYTES} are read"
        )));
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path).map_err(io)?, MAX_INDEX_BYTES + 1),
        &mut text,
    )
    .map_err(io)?;
    if text.len() as u64 > MAX_INDEX_BYTES {
        return Err(invalid(format!(
            "the index grew past the {MAX_INDEX_BYTES} bytes that are read"
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::check_shard_name;

    #[test]
    fn shard_names() {
        assert!(check_shard_name("model-00001-of-00002.safetensors", false).is_ok());
        assert!(check_shard_name("sub/dir/x.safetensors", false).is_ok());
        assert!(check_shard_name("a..b.safetensors", false).is_ok());
        assert!(check_shard_name("pytorch_model-00001-of-00002.bin", true).is_ok());
        assert!(check_shard_name("pytorch_model-00001-of-00002.bin", false).is_err());
        for bad in [
            "",
            "/etc/x.safetensors",
            "../x.safetensors",
            "a/../../x.safetensors",
            "a\\..\\x.safetensors",
            "C:x.safetensors",
            "x.json",
            "x.bin.exe",
            "x\0.safetensors",
            "\\\\server\\share\\x.safetensors",
            "model.safetensors:stream.safetensors",
            "sub/c:x.safetensors",
            "nul.safetensors",
            "sub\\COM1.bin",
        ] {
            assert!(check_shard_name(bad, true).is_err(), "{bad:?}");
        }
    }
}
