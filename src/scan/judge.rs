//! One file judged: recognised by its content (its name only where its
//! content says nothing: a protocol-0 pickle, a file too broken to
//! recognise), the rules of its container run over its bytes, then the
//! container's own validation (opening it as every verb does, which reads
//! headers and pickles, never tensor data).

use std::fmt::Write as _;
use std::path::Path;

use super::pickles::{self, Allow};
use super::{Finding, Row, Rule, ScanError, Verdict, View, zips};
use crate::format::containers::{Probe, names_of};
use crate::format::{CONTAINERS, LoadError, StoredFile};
use crate::source::RemoteFile;
use crate::source::map::Mapping;

/// The largest file beside one read for it (a `.distcp`'s `.metadata`).
const MAX_BESIDE: u64 = 256 << 20;

/// A remote file of a container not read over HTTP up to this long is
/// fetched whole to be validated.
const VALIDATE_WHOLE: u64 = 64 << 20;

/// Files up to this long are read into memory, longer ones mapped.
const READ_WHOLE: u64 = 1 << 20;

/// The first bytes looked at to recognise a file.
const HEAD: u64 = 64 * 1024;

/// The bytes of a pickle file read at first, then at most (a remote file
/// is read in growing steps while its pickles reach further).
const PICKLE_STEPS: [u64; 3] = [1 << 20, 32 << 20, 256 << 20];

/// The names a container is known by, when the content says nothing.
fn format_by_name(extension: Option<&str>) -> Option<&'static str> {
    Some(match extension? {
        "safetensors" => "safetensors",
        "npy" | "npz" => "numpy",
        "pt" | "pth" | "bin" | "ckpt" => "pytorch",
        "pkl" | "pickle" => "pickle",
        "gguf" => "gguf",
        "keras" => "keras",
        "onnx" => "onnx",
        _ => return None,
    })
}

/// What the content said, before validation.
struct Judged {
    format: Option<&'static str>,
    findings: Vec<Finding>,
    /// Why it fails its container here, when it does.
    invalid: Option<String>,
    /// True when the container's opener is asked too.
    validate: bool,
    /// Its tensors, when the container opened it.
    tensors: Option<u64>,
}

impl Judged {
    fn of(format: Option<&'static str>) -> Self {
        Self {
            format,
            findings: Vec::new(),
            invalid: None,
            validate: format.is_some(),
            tensors: None,
        }
    }
}

/// Judges the local file `path`.
pub(super) fn local(path: &Path, shown: String) -> Result<Row, ScanError> {
    let fail = |message: String| ScanError {
        path: shown.clone(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail(
            "is not a regular file (a FIFO, a socket or a device): not read".into(),
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    // A small file is read, a large one mapped: its header and pickles
    // are all a scan looks at.
    let map = if meta.len() <= READ_WHOLE {
        Mapping::read(&file, meta.len())
    } else {
        Mapping::map(&file)
    }
    .map_err(|e| fail(e.to_string()))?;
    let view = View {
        bytes: map.bytes(),
        remote: None,
    };
    let (_, extension) = names_of(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let beside = |n: &str| -> Option<Vec<u8>> {
        let p = dir.join(n);
        let meta = std::fs::metadata(&p).ok()?;
        (meta.is_file() && meta.len() <= MAX_BESIDE)
            .then(|| std::fs::read(&p).ok())
            .flatten()
    };
    let mut judged = content(&view, &name, extension.as_deref(), &beside).map_err(fail)?;
    let len = view.len();
    if judged.validate && judged.invalid.is_none() {
        let opened = StoredFile::open_local(path.to_path_buf(), map);
        validated(&mut judged, zips::allow_for(&name), &opened);
    }
    Ok(row(judged, shown, file_uri(path), len))
}

/// Judges the remote file `url`.
pub(super) fn remote(url: &str, shown: String) -> Result<Row, ScanError> {
    let fail = |message: String| ScanError {
        path: shown.clone(),
        message,
    };
    let file = RemoteFile::open(
        crate::source::remote::client(),
        url,
        crate::format::MAX_HEADER_SIZE,
    )
    .map_err(|e| fail(e.to_string()))?;
    let view = View {
        bytes: file.bytes(),
        remote: Some(&file),
    };
    let (_, extension) = names_of(Path::new(url));
    let name = url
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    let beside = |n: &str| -> Option<Vec<u8>> {
        let sibling = crate::source::remote::sibling_keeping_query(url, n);
        crate::source::remote::client()
            .read_small(&sibling, MAX_BESIDE)
            .ok()
            .flatten()
    };
    let mut judged = content(&view, &name, extension.as_deref(), &beside).map_err(fail)?;
    if judged.validate && judged.invalid.is_none() {
        let mut opened = StoredFile::open_remote(url.into(), file.clone());
        let unread = opened
            .as_ref()
            .err()
            .is_some_and(|e| matches!(e.kind(), "RemoteUnsupported" | "NpzRemote"));
        if unread {
            // A container not read over HTTP (an `.npz`, a `.keras`, HDF5,
            // Flax): a small one is validated from a copy in memory, as the
            // local file is, so that both give one row; a large one is
            // judged by its rules alone, its tensors not counted.
            opened = if judged.format != Some("dcp") && view.len() <= VALIDATE_WHOLE {
                let bytes = view.get(0..view.len()).map_err(fail)?;
                StoredFile::open_local(url.into(), Mapping::from_bytes(bytes.to_vec()))
            } else {
                Err(LoadError::Remote {
                    path: url.into(),
                    error: crate::source::RemoteError::new("RemoteUnsupported", String::new()),
                })
            };
        } else if let Err(LoadError::Remote { error, .. }) = &opened {
            return Err(fail(error.to_string()));
        }
        validated(&mut judged, zips::allow_for(&name), &opened);
    }
    Ok(row(judged, shown, url.to_owned(), view.len()))
}

/// True for a refusal of what this reader does not read (a dtype, a
/// filter, a remote container), which says nothing against the file.
fn is_unread(kind: &str) -> bool {
    kind.contains("Unsupported") || matches!(kind, "UnknownFilter" | "NpzRemote")
}

/// The container's own verdict: its unsafe globals (ones the rules did not
/// already name), a refusal as `invalid`, a GGUF's chat templates; the
/// tensor count when it opened.
fn validated(judged: &mut Judged, allow: Allow, opened: &Result<StoredFile, LoadError>) {
    let globals = match opened {
        Ok(file) => {
            if let Some(parts) = file.gguf() {
                super::gguf::findings(&parts.metadata, &mut judged.findings);
            }
            judged.tensors = Some(file.header().tensors().len() as u64);
            file.unsafe_globals()
        }
        Err(e) if e.kind() == "UnsafePickle" => e.unsafe_globals(),
        Err(e) => {
            if !is_unread(e.kind()) {
                judged.invalid = Some(format!("{}: {}", e.kind(), e.message()));
            }
            &[]
        }
    };
    pickles::findings_of(
        globals,
        allow,
        "a pickle of the checkpoint",
        0,
        &mut judged.findings,
    );
}

/// Recognises the file (`name`, its last name as written) and runs its
/// container's rules; `beside` reads a file beside it.
fn content(
    view: &View<'_>,
    name: &str,
    extension: Option<&str>,
    beside: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Judged, String> {
    let head = view.get(0..HEAD)?;
    let len = view.len();
    if crate::format::zip::is_zip(head) || extension == Some("distcp") {
        let mut findings = Vec::new();
        let z = zips::judge(view, name, extension, beside, &mut findings)?;
        return Ok(Judged {
            findings,
            invalid: z.invalid,
            // A `.distcp` is judged by its records; its checkpoint is
            // validated through `.metadata`.
            validate: z.format.is_some() && extension != Some("distcp"),
            ..Judged::of(z.format)
        });
    }
    if head.starts_with(b"GGUF") {
        // Its chat templates are read off the opened header.
        return Ok(Judged::of(Some("gguf")));
    }
    if head.starts_with(crate::format::numpy::header::MAGIC) {
        let mut judged = Judged::of(Some("numpy"));
        match crate::format::numpy::header::pickled_data(head) {
            Ok(Some(data)) => {
                let whole = view.get(0..len.min(PICKLE_STEPS[2]))?;
                zips::object_array(
                    whole,
                    data,
                    "the file",
                    0,
                    &mut judged.findings,
                    &mut judged.invalid,
                );
                judged.validate = false;
            }
            Ok(None) => {}
            // A header of a dtype that is not read here is still a `.npy`.
            Err(e) if e.kind() == "NumpyUnsupportedDtype" => judged.validate = false,
            Err(e) => judged.invalid = Some(format!("{}: {e}", e.kind())),
        }
        return Ok(judged);
    }
    let dcp_index = name == crate::format::dcp::METADATA;
    let legacy = head.starts_with(crate::format::pytorch::legacy::MAGIC);
    let named_pickle = matches!(
        extension,
        Some("pkl" | "pickle" | "pt" | "pth" | "bin" | "ckpt" | "joblib")
    );
    if pickles::starts_pickle(head)
        || (named_pickle && !crate::format::safetensors::is_its_own(head, len))
        || looks_like_protocol_0(head)
    {
        let (format, allow, max) = if dcp_index {
            (Some("dcp"), Allow::Dcp, 1)
        } else if legacy {
            (Some("pytorch"), zips::allow_for(name), 5)
        } else {
            (Some("pickle"), zips::allow_for(name), pickles::MAX_PICKLES)
        };
        let mut judged = Judged::of(format);
        let mut result = Ok(());
        for (i, step) in PICKLE_STEPS.iter().enumerate() {
            let bytes = view.get(0..len.min(*step))?;
            judged.findings.clear();
            result = pickles::stream(bytes, max, allow, "the pickle", 0, &mut judged.findings);
            let whole = bytes.len() as u64 == len;
            if result.is_ok() || whole || i + 1 == PICKLE_STEPS.len() {
                break;
            }
        }
        if let Err(e) = result {
            if judged.findings.is_empty() && !pickles::starts_pickle(head) && !named_pickle {
                // Text that began like a pickle and is none.
                return Ok(Judged::of(None));
            }
            if judged.findings.is_empty()
                && named_pickle
                && !pickles::starts_pickle(head)
                && let Some(f) = format_by_name(extension)
                && f != "pickle"
            {
                // A `.pt`/`.bin` that is no pickle: its container's verdict.
                return Ok(Judged::of(Some(f)));
            }
            judged.invalid = Some(format!("{}: {e}", e.kind()));
        }
        // A bare pickle holds no tensors: nothing more to validate. A legacy
        // torch file and DCP's index are opened as their containers.
        judged.validate = legacy || dcp_index;
        return Ok(judged);
    }
    if crate::format::safetensors::is_its_own(head, len) {
        return Ok(Judged::of(Some("safetensors")));
    }
    let probe = Probe {
        bytes: head,
        extension,
        name,
        remote: view.remote.is_some(),
        archive: None,
    };
    if let Some(c) = CONTAINERS
        .iter()
        .find(|c| c.id != "deepspeed" && (c.claims)(&probe))
    {
        return Ok(Judged::of(Some(c.id)));
    }
    Ok(Judged::of(format_by_name(extension)))
}

/// True for text that starts as a protocol-0 pickle's `GLOBAL` does:
/// `c`, a dotted module name, a newline, a name, a newline.
fn looks_like_protocol_0(head: &[u8]) -> bool {
    let Some(rest) = head.strip_prefix(b"c") else {
        return false;
    };
    let ident = |s: &[u8]| {
        !s.is_empty()
            && s.len() <= 256
            && s.iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    };
    let mut lines = rest.splitn(3, |&b| b == b'\n');
    matches!((lines.next(), lines.next(), lines.next()), (Some(m), Some(n), Some(_)) if ident(m) && ident(n))
}

/// The row of a judged file.
fn row(judged: Judged, path: String, uri: String, bytes: u64) -> Row {
    let Judged {
        format,
        mut findings,
        invalid,
        tensors,
        ..
    } = judged;
    // An `invalid` finding goes with the `invalid` verdict only: a file
    // with a finding of another rule is unsafe whatever else is wrong.
    if let Some(why) = invalid
        && findings.is_empty()
    {
        findings.push(Finding::new(Rule::Invalid, why, None, None));
    }
    let verdict = if findings.iter().any(|f| f.rule != Rule::Invalid) {
        Verdict::Unsafe
    } else if !findings.is_empty() {
        Verdict::Invalid
    } else if format.is_none() {
        Verdict::Unknown
    } else {
        Verdict::Safe
    };
    Row {
        path,
        format,
        verdict,
        tensors: if verdict == Verdict::Safe {
            tensors
        } else {
            None
        },
        findings,
        bytes,
        uri,
    }
}

/// The `file://` URI of `path` made absolute (not resolved through
/// symlinks), its bytes outside RFC 3986's unreserved set and `/`
/// percent-encoded.
pub(super) fn file_uri(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let text = absolute.to_string_lossy().replace('\\', "/");
    let mut out = String::from("file://");
    if !text.starts_with('/') {
        // A Windows drive path: file:///C:/...
        out.push('/');
    }
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) || (b == b':' && out.len() <= 10) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        let u = file_uri(Path::new("/tmp/a b/m\u{e9}.pkl"));
        assert_eq!(u, "file:///tmp/a%20b/m%C3%A9.pkl");
    }

    /// A version 1.0 `.npy` of `descr` (a Python literal) and `data`.
    fn npy(descr: &str, data: &[u8]) -> Vec<u8> {
        let mut header = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn record_dtypes_are_pickles_only_when_numpy_pickled_them() {
        use crate::format::numpy::header::pickled_data;
        let plain = npy("[('a', '<f4')]", &[0, 0, 128, 63]);
        assert_eq!(
            pickled_data(&plain).unwrap_err().kind(),
            "NumpyUnsupportedDtype"
        );
        let pickled = npy("[('a', '|O')]", b"\x80\x03N.");
        assert!(pickled_data(&pickled).unwrap().is_some());
        let object = npy("'|O'", b"\x80\x03N.");
        assert!(pickled_data(&object).unwrap().is_some());
        assert_eq!(pickled_data(&npy("'<f4'", &[0; 4])).unwrap(), None);
        let view = View {
            bytes: &plain,
            remote: None,
        };
        let judged = content(&view, "r.npy", Some("npy"), &|_| None).unwrap();
        assert!(judged.invalid.is_none() && judged.findings.is_empty());
    }

    #[test]
    fn protocol_0() {
        assert!(looks_like_protocol_0(b"cos\nsystem\n(S'x'\ntR."));
        assert!(!looks_like_protocol_0(b"config = 1\n"));
        assert!(!looks_like_protocol_0(b"# README\n"));
    }
}
