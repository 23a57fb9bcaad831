//! What a scan's PATH names (SCAN.md): a file; a folder, walked
//! recursively (every regular file, in sorted order; symlinks are not
//! followed out of the tree, and a symlinked folder is not entered); an
//! `http(s)://` URL of a file; or a Hugging Face repository (`hf://ORG/REPO`,
//! `{endpoint}/ORG/REPO`), listed through the Hub's API, every file of it.

use std::path::{Path, PathBuf};

use super::{Row, ScanError};
use crate::source::remote::{self, hub};

/// The largest repository listing read.
const MAX_LISTING: u64 = 64 << 20;

/// One file to judge.
#[derive(Debug, Clone)]
pub struct Target {
    /// The file as reached from the argument.
    pub shown: String,
    place: Place,
}

#[derive(Debug, Clone)]
enum Place {
    Local(PathBuf),
    Remote(String),
}

/// Why a PATH names nothing to scan (exit 2).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct TargetError {
    /// What is wrong, with the PATH.
    pub message: String,
    /// Files skipped while walking (symlinks out of the tree), with why.
    pub skipped: Vec<String>,
}

impl Target {
    /// Judges the file.
    pub fn judge(&self) -> Result<Row, ScanError> {
        match &self.place {
            Place::Local(p) => super::scan_file(p, self.shown.clone()),
            Place::Remote(url) => super::scan_url(url, self.shown.clone()),
        }
    }

    /// True for a remote file.
    pub fn is_remote(&self) -> bool {
        matches!(self.place, Place::Remote(_))
    }
}

fn error(message: String) -> TargetError {
    TargetError {
        message,
        skipped: Vec::new(),
    }
}

/// The files `location` names, in order, and the files skipped on the way
/// (a symlink out of the tree), each with why.
pub fn targets(location: &str) -> Result<Vec<Target>, TargetError> {
    targets_noting(location, &mut Vec::new())
}

/// [`targets`], adding what was skipped to `skipped`.
pub fn targets_noting(
    location: &str,
    skipped: &mut Vec<String>,
) -> Result<Vec<Target>, TargetError> {
    if remote::is_remote(location) {
        return remote_targets(location);
    }
    let root = Path::new(location);
    let meta = std::fs::metadata(root).map_err(|e| error(format!("{location}: {e}")))?;
    if !meta.is_dir() {
        return Ok(vec![Target {
            shown: location.to_owned(),
            place: Place::Local(root.to_path_buf()),
        }]);
    }
    let real_root = std::fs::canonicalize(root).map_err(|e| error(format!("{location}: {e}")))?;
    let mut found: Vec<(Vec<std::ffi::OsString>, PathBuf)> = Vec::new();
    let mut stack: Vec<(PathBuf, Vec<std::ffi::OsString>)> = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| error(format!("{}: {e}", dir.display())))?;
            let path = entry.path();
            let mut rel = rel.clone();
            rel.push(entry.file_name());
            let kind = entry
                .file_type()
                .map_err(|e| error(format!("{}: {e}", path.display())))?;
            if kind.is_dir() {
                stack.push((path, rel));
            } else if kind.is_file() {
                found.push((rel, path));
            } else if kind.is_symlink() {
                match std::fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(&real_root) && target.is_file() => {
                        found.push((rel, path));
                    }
                    Ok(target) if target.is_dir() => skipped.push(format!(
                        "{}: a symlink to a folder, not entered",
                        path.display()
                    )),
                    Ok(_) => skipped.push(format!(
                        "{}: a symlink out of the tree, not followed",
                        path.display()
                    )),
                    Err(e) => skipped.push(format!("{}: a broken symlink ({e})", path.display())),
                }
            }
        }
    }
    // Sorted as the relative paths' text is (`/` between the parts), byte
    // by byte: `a.txt` before `a/b`, as `sort` and Python's `sorted` give.
    found.sort_by_cached_key(|(rel, _)| {
        rel.iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/")
    });
    Ok(found
        .into_iter()
        .map(|(rel, path)| {
            let joined: PathBuf = rel.iter().fold(root.to_path_buf(), |p, c| p.join(c));
            Target {
                shown: joined.to_string_lossy().into_owned(),
                place: Place::Local(path),
            }
        })
        .collect())
}

/// A URL's files: the URL itself, or every file of a Hub repository.
fn remote_targets(location: &str) -> Result<Vec<Target>, TargetError> {
    let client = remote::client();
    let endpoint = client.settings().hf_endpoint.clone();
    let hub_path = hub::parse(location, &endpoint).map_err(|e| error(e.to_string()))?;
    let Some(repo) = hub_path else {
        return Ok(vec![Target {
            shown: location.to_owned(),
            place: Place::Remote(location.to_owned()),
        }]);
    };
    let hf = location
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("hf://"));
    // The repository, or a folder of it: the files under `folder`.
    let (files, folder) = match &repo.path {
        None => (list(location, &endpoint, &repo)?, String::new()),
        Some(path) => {
            // A folder when the listing says the path is no file but
            // holds some; else the file alone.
            let folder = format!("{}/", path.trim_end_matches('/'));
            match list(location, &endpoint, &repo) {
                Ok(files)
                    if !files.contains(path) && files.iter().any(|f| f.starts_with(&folder)) =>
                {
                    (files, folder)
                }
                _ => {
                    return Ok(vec![Target {
                        shown: location.to_owned(),
                        place: Place::Remote(repo.resolve(&endpoint, path)),
                    }]);
                }
            }
        }
    };
    let base = location.trim_end_matches('/');
    Ok(files
        .iter()
        .filter_map(|f| {
            let rest = f.strip_prefix(&folder)?;
            let url = repo.resolve(&endpoint, f);
            Some(Target {
                shown: if hf {
                    format!("{base}/{rest}")
                } else {
                    url.clone()
                },
                place: Place::Remote(url),
            })
        })
        .collect())
}

/// Every file of a Hub repository at its revision, sorted, by the Hub's
/// API (`/api/models/ORG/REPO/revision/REV`: `siblings`).
fn list(location: &str, endpoint: &str, repo: &hub::HubPath) -> Result<Vec<String>, TargetError> {
    let client = remote::client();
    let listing = format!(
        "{}/api/models/{}/revision/{}",
        endpoint.trim_end_matches('/'),
        repo.repo,
        repo.revision
    );
    let body = client
        .read_small(&listing, MAX_LISTING)
        .map_err(|e| error(format!("{location}: the repository cannot be listed: {e}")))?
        .ok_or_else(|| {
            error(format!(
                "{location}: the repository {} (revision {}) cannot be listed: the Hub answered 404",
                repo.repo, repo.revision
            ))
        })?;
    listed_files(&body).map_err(|why| error(format!("{location}: the repository's listing {why}")))
}

/// The file names of a Hub listing (`siblings[].rfilename`), checked: no
/// empty or `..` part, no absolute path; sorted.
fn listed_files(body: &[u8]) -> Result<Vec<String>, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("is no JSON: {e}"))?;
    let siblings = doc
        .get("siblings")
        .and_then(serde_json::Value::as_array)
        .ok_or("has no \"siblings\" list")?;
    let mut files = Vec::with_capacity(siblings.len());
    for s in siblings {
        let name = s
            .get("rfilename")
            .and_then(serde_json::Value::as_str)
            .ok_or("has a sibling with no \"rfilename\"")?;
        if name.starts_with('/')
            || name
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(format!(
                "names the file {:?}, which is no path inside the repository",
                crate::text::safe_text(name, 200)
            ));
        }
        files.push(name.to_owned());
    }
    files.sort();
    files.dedup();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_checked_and_sorted() {
        let body = br#"{"siblings": [{"rfilename": "b.bin"}, {"rfilename": "a/x.safetensors"}]}"#;
        assert_eq!(listed_files(body).unwrap(), ["a/x.safetensors", "b.bin"]);
        for bad in [
            &br#"{"siblings": [{"rfilename": "../x"}]}"#[..],
            br#"{"siblings": [{"rfilename": "/x"}]}"#,
            br#"{"x": 1}"#,
        ] {
            assert!(listed_files(bad).is_err());
        }
    }

    #[test]
    fn a_folder_is_walked_sorted_and_a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
        std::fs::write(dir.path().join("b/c/z.bin"), b"x").unwrap();
        std::fs::write(dir.path().join("a.txt"), b"x").unwrap();
        std::fs::write(dir.path().join("b/a.txt"), b"x").unwrap();
        std::fs::write(dir.path().join("b.txt"), b"x").unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let shown: Vec<String> = targets(&root)
            .unwrap()
            .into_iter()
            .map(|t| t.shown[root.len()..].replace('\\', "/"))
            .collect();
        assert_eq!(shown, ["/a.txt", "/b.txt", "/b/a.txt", "/b/c/z.bin"]);
        assert!(targets(&format!("{root}/missing")).is_err());
    }
}
