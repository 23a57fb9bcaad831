//! Archives (SCAN.md): a zip's member names (absolute or `..` paths are
//! `archive-path`), the pickles it holds (`*.pkl` members: a torch zip's
//! `data.pkl`, any other), its NumPy object arrays (whose data is a
//! pickle), and a `.keras` archive's `config.json`. Nothing is extracted:
//! members are read from the map (a deflated one inflated in memory,
//! within a bound). A PyTorch DCP `.distcp` file, whose archives are
//! written back to back, is walked record by record.

use std::ops::Range;

use super::pickles::{self, Allow};
use super::{Finding, Rule, View};
use crate::format::zip::{self, Archive, Member};

/// The largest member read as a pickle, an object array or a config.
const MAX_MEMBER: u64 = 256 << 20;

/// The bytes of an `.npy` member's start read for its header.
const NPY_HEAD: u64 = 1 << 20;

/// What an archive was found to be.
pub(super) struct Judged {
    /// The container, by its members and name (`None`: a zip that holds
    /// no checkpoint).
    pub format: Option<&'static str>,
    /// Why it fails validation here (a broken directory, a member that
    /// cannot be read), when it does.
    pub invalid: Option<String>,
}

/// True when `name` ends with `extension` (`.pkl`), in any case.
fn has_extension(name: &str, extension: &str) -> bool {
    let (n, e) = (name.as_bytes(), extension.as_bytes());
    n.len() >= e.len() && n[n.len() - e.len()..].eq_ignore_ascii_case(e)
}

/// True when a member's name leaves the folder it is extracted into: an
/// absolute path (`/x`, `\x`, `C:\x`) or a `..` component.
pub(super) fn escapes(name: &str) -> bool {
    let b = name.as_bytes();
    name.starts_with(['/', '\\'])
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
        || name.split(['/', '\\']).any(|c| c == "..")
}

/// The `archive-path` finding of a member named `name` whose local
/// header is at byte `at`, when its name leaves its folder.
fn escaping(name: &str, at: u64, out: &mut Vec<Finding>) {
    if escapes(name) {
        out.push(Finding::new(
            Rule::ArchivePath,
            format!(
                "the member {} has an absolute path or a '..' component: extracted, it lands outside its folder",
                crate::text::safe_text(name, 200)
            ),
            Some(name.to_owned()),
            Some(at),
        ));
    }
}

/// The allowlist of a file's pickles, by its name: DeepSpeed's state
/// files may name DeepSpeed's records.
pub(super) fn allow_for(name: &str) -> Allow {
    let name = name.to_ascii_lowercase();
    if name.ends_with("_model_states.pt") || name.ends_with("_optim_states.pt") {
        Allow::DeepSpeed
    } else {
        Allow::Torch
    }
}

/// Judges the zip `view` (named `name`, with `extension`, lower case);
/// `beside` reads a file beside it (a `.distcp`'s `.metadata`).
pub(super) fn judge(
    view: &View<'_>,
    name: &str,
    extension: Option<&str>,
    beside: &dyn Fn(&str) -> Option<Vec<u8>>,
    out: &mut Vec<Finding>,
) -> Result<Judged, String> {
    if extension == Some("distcp") {
        if view.remote.is_some() {
            // Its archives' pickles lie among its tensor data, which a scan
            // does not download: judged as not read, never as safe.
            return Ok(Judged {
                format: Some("dcp"),
                invalid: Some(
                    "a remote .distcp file is not read (its pickles lie among its tensor data): download the checkpoint's folder and scan it".into(),
                ),
            });
        }
        let metadata = beside(crate::format::dcp::METADATA);
        return Ok(distcp(view, name, metadata, out));
    }
    let by_name = match extension {
        Some("keras") => Some("keras"),
        Some("npz") => Some("numpy"),
        Some("pt" | "pth" | "bin" | "ckpt") => Some("pytorch"),
        _ => None,
    };
    let archive = match view.remote {
        None => zip::open(view.all()).map_err(|e| e.to_string()),
        Some(remote) => match zip::fetch_directory(remote, view.all()) {
            Ok(a) => Ok(a),
            Err(zip::Fetch::Remote(e)) => return Err(e.to_string()),
            Err(zip::Fetch::Zip(e)) => Err(e.to_string()),
        },
    };
    let mut archive = match archive {
        Ok(a) => a,
        Err(why) => {
            return Ok(Judged {
                format: by_name,
                invalid: by_name.map(|_| why),
            });
        }
    };
    let members = archive.members().to_vec();
    let has = |leaf: &str| members.iter().any(|m| m.name == leaf);
    let files: Vec<&Member> = members.iter().filter(|m| !m.is_dir).collect();
    let format = if by_name == Some("keras") || (has("config.json") && has("model.weights.h5")) {
        Some("keras")
    } else if by_name.is_some() {
        by_name
    } else if !files.is_empty() && files.iter().all(|m| has_extension(&m.name, ".npy")) {
        Some("numpy")
    } else if files.iter().any(|m| has_extension(&m.name, ".pkl")) {
        Some("pytorch")
    } else {
        None
    };
    if format.is_none() {
        return Ok(Judged {
            format,
            invalid: None,
        });
    }
    let mut invalid = None;
    let keras = format == Some("keras");
    members_rules(
        view,
        &mut archive,
        allow_for(name),
        keras,
        0,
        out,
        &mut invalid,
    )?;
    Ok(Judged { format, invalid })
}

/// The rules over an archive's members, the archive starting at byte
/// `base` of the file: `archive-path` for each; the pickles of each `*.pkl`
/// member (against `allow`), each `.npy` member's object array and, for a
/// Keras archive, its `config.json`. A member that cannot be read is the
/// archive's `invalid`; a remote file that cannot be read is the error.
fn members_rules(
    view: &View<'_>,
    archive: &mut Archive,
    allow: Allow,
    keras: bool,
    base: u64,
    out: &mut Vec<Finding>,
    invalid: &mut Option<String>,
) -> Result<(), String> {
    let members = archive.members().to_vec();
    for m in &members {
        escaping(&m.name, base + m.header_start, out);
    }
    for m in members.iter().filter(|m| !m.is_dir) {
        let is_pickle = has_extension(&m.name, ".pkl");
        let is_npy = has_extension(&m.name, ".npy");
        let is_config = keras && m.name == "config.json";
        if !(is_pickle || is_npy || is_config) {
            continue;
        }
        let place = format!("member {}", crate::text::safe_text(&m.name, 200));
        let read = if is_npy {
            // The header first; the whole member only for an object array.
            member_bytes(view, archive, m, Some(NPY_HEAD))
        } else {
            member_bytes(view, archive, m, None)
        };
        let bytes = match read {
            Ok(b) => b,
            Err(Failure::Remote(e)) => return Err(e),
            Err(Failure::Member(why)) => {
                invalid.get_or_insert(format!("{place}: {why}"));
                continue;
            }
        };
        // A remote member's data start is known once it was fetched.
        let at = base
            + archive
                .members()
                .get(m.index)
                .map_or(m.data_start, |f| f.data_start);
        if is_pickle {
            let place = format!("the pickle of {place}");
            if let Err(e) = pickles::stream(&bytes, pickles::MAX_PICKLES, allow, &place, at, out) {
                invalid.get_or_insert(format!("{place}: {e}"));
            }
        } else if is_npy {
            match crate::format::numpy::header::pickled_data(&bytes) {
                Ok(Some(data)) => {
                    let whole = match member_bytes(view, archive, m, None) {
                        Ok(b) => b,
                        Err(Failure::Remote(e)) => return Err(e),
                        Err(Failure::Member(why)) => {
                            invalid.get_or_insert(format!("{place}: {why}"));
                            continue;
                        }
                    };
                    object_array(&whole, data, &place, at, out, invalid);
                }
                // A member of a dtype not read here is still an array.
                Ok(None) => {}
                Err(e) if e.kind() == "NumpyUnsupportedDtype" => {}
                Err(e) => {
                    invalid.get_or_insert(format!("{place}: {e}"));
                }
            }
        } else {
            match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(config) => super::keras::findings(&config, &m.name, out),
                Err(e) => {
                    invalid.get_or_insert(format!("{place} is no JSON: {e}"));
                }
            }
        }
    }
    Ok(())
}

/// The pickle of an object array (an `.npy`, or a member of an `.npz`)
/// whose data starts at `data`: numpy's reconstruct globals are outside
/// the allowlist, so such an array is unsafe.
pub(super) fn object_array(
    npy: &[u8],
    data: u64,
    place: &str,
    at: u64,
    out: &mut Vec<Finding>,
    invalid: &mut Option<String>,
) {
    let pickle = npy.get(data as usize..).unwrap_or_default();
    let named = format!("the object array of {place}");
    if let Err(e) = pickles::stream(pickle, 1, Allow::Torch, &named, at + data, out) {
        invalid.get_or_insert(format!(
            "the object array of {place} is not a pickle numpy writes: {e}"
        ));
    }
}

enum Failure {
    Remote(String),
    Member(String),
}

/// Member `m`'s bytes (at most `max` of its start, when given): the map's
/// slice of a stored member, or the member inflated in memory (within
/// [`MAX_MEMBER`]); a remote member's bytes fetched first.
fn member_bytes(
    view: &View<'_>,
    archive: &mut Archive,
    m: &Member,
    max: Option<u64>,
) -> Result<Vec<u8>, Failure> {
    let want = max.map_or(m.size, |n| n.min(m.size));
    if max.is_none() && m.size > MAX_MEMBER {
        return Err(Failure::Member(format!(
            "it is {} bytes; at most {MAX_MEMBER} are read",
            m.size
        )));
    }
    let mut m = m.clone();
    if let Some(remote) = view.remote {
        match zip::fetch_member(remote, view.all(), archive, m.index, MAX_MEMBER) {
            Ok(()) => {}
            Err(zip::Fetch::Remote(e)) => return Err(Failure::Remote(e.to_string())),
            Err(zip::Fetch::Zip(e)) => return Err(Failure::Member(e.to_string())),
        }
        if let Some(fresh) = archive.members().get(m.index) {
            m = fresh.clone();
        }
    }
    if m.encrypted || m.unsupported.is_some() {
        return Err(Failure::Member(
            "it is encrypted or compressed by a method this reader does not read".into(),
        ));
    }
    if m.stored {
        let end = m.data_start.saturating_add(want);
        return match view.all().get(m.data_start as usize..end as usize) {
            Some(b) if end <= m.data_start.saturating_add(m.compressed_size) => Ok(b.to_vec()),
            _ => Err(Failure::Member(format!(
                "its bytes {}..{end} are past the archive's end or its stored length",
                m.data_start
            ))),
        };
    }
    archive
        .prefix(view.all(), &m, want)
        .map_err(|e| Failure::Member(e.to_string()))
}

/// A DCP `.distcp` file (`file_name`): `torch.save` archives written back
/// to back, found through the `.metadata` beside it (`metadata`: its
/// bytes), whose storage entries give each archive's span; every `*.pkl`
/// member's pickle judged against DCP's allowlist.
fn distcp(
    view: &View<'_>,
    file_name: &str,
    metadata: Option<Vec<u8>>,
    out: &mut Vec<Finding>,
) -> Judged {
    let invalid = distcp_spans(file_name, metadata)
        .and_then(|spans| {
            let mut invalid = None;
            for span in spans {
                let bytes = view.get(span.clone())?;
                if (bytes.len() as u64) < span.end - span.start {
                    return Err(format!(
                        "a storage entry is bytes {}..{} of a file of {} bytes",
                        span.start,
                        span.end,
                        view.len()
                    ));
                }
                let nested = View {
                    bytes,
                    remote: None,
                };
                match zip::open(bytes) {
                    Ok(mut archive) => members_rules(
                        &nested,
                        &mut archive,
                        Allow::Dcp,
                        false,
                        span.start,
                        out,
                        &mut invalid,
                    )?,
                    Err(e) => {
                        invalid.get_or_insert(format!("the archive at byte {}: {e}", span.start));
                    }
                }
            }
            Ok(invalid)
        })
        .unwrap_or_else(Some);
    Judged {
        format: Some("dcp"),
        invalid,
    }
}

/// The spans of `file_name` that `.metadata`'s storage entries name,
/// sorted, each once.
fn distcp_spans(file_name: &str, metadata: Option<Vec<u8>>) -> Result<Vec<Range<u64>>, String> {
    let index = crate::format::dcp::METADATA;
    let bytes = metadata.ok_or_else(|| {
        format!(
            "a .distcp file is read through the {index} beside it, which is missing or unreadable"
        )
    })?;
    let parsed = crate::format::pytorch::pickle::parse(&bytes)
        .map_err(|f| format!("the {index} beside it: {}", f.error))?;
    let meta = crate::format::dcp::metadata::read(&parsed.graph)
        .map_err(|m| format!("the {index} beside it: {m}"))?;
    let mut spans: Vec<Range<u64>> = meta
        .storage
        .values()
        .filter(|s| s.relative_path == file_name)
        .map(|s| s.offset..s.offset.saturating_add(s.length))
        .collect();
    spans.sort_by_key(|r| (r.start, r.end));
    spans.dedup();
    Ok(spans)
}

#[cfg(test)]
mod tests {
    use super::escapes;

    #[test]
    fn escaping_names() {
        for n in [
            "/abs/x.npy",
            "C:\\x",
            "c:/x",
            "..\\x",
            "../x",
            "a/../../b",
            "\\x",
            "a/..",
        ] {
            assert!(escapes(n), "{n}");
        }
        for n in [
            "x.npy",
            "archive/data.pkl",
            "a..b/c",
            "..x",
            "a/...",
            "dir/",
        ] {
            assert!(!escapes(n), "{n}");
        }
    }
}
