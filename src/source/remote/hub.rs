//! Hugging Face Hub locations.
//!
//! `hf://ORG/REPO[@REVISION][/PATH]`, and the Hub's own links
//! (`{endpoint}/ORG/REPO/blob/REV/PATH`, `…/resolve/REV/PATH`, or the
//! repository's page `{endpoint}/ORG/REPO`), become the file's
//! `{endpoint}/ORG/REPO/resolve/REV/PATH`, as `huggingface_hub` downloads
//! it. Without a PATH the repository's `model.safetensors.index.json` is
//! opened if it has one, else its `model.safetensors`. The endpoint is
//! `HF_ENDPOINT` ([`Settings::hf_endpoint`]).

use super::http::Client;
use super::{RemoteError, Settings, url};

/// A file (or the default checkpoint) of a Hub repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubPath {
    /// `ORG/REPO`.
    pub repo: String,
    /// A branch, tag or commit; `main` when not given.
    pub revision: String,
    /// The file in the repository; `None` for the default checkpoint.
    pub path: Option<String>,
}

impl HubPath {
    /// The URL the Hub serves `path` of this repository at.
    pub fn resolve(&self, endpoint: &str, path: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            endpoint.trim_end_matches('/'),
            self.repo,
            self.revision,
            path
        )
    }
}

fn bad(location: &str, why: &str) -> RemoteError {
    RemoteError::new("BadUrl", format!("{location}: {why}"))
}

/// The Hub path `location` names: `Ok(None)` for a URL that is not the
/// Hub's.
pub fn parse(location: &str, endpoint: &str) -> Result<Option<HubPath>, RemoteError> {
    if let Some(rest) = location
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("hf://"))
        .map(|_| &location[5..])
    {
        let rest = rest.trim_matches('/');
        let mut parts = rest.splitn(3, '/');
        let (Some(org), Some(repo_rev)) = (parts.next(), parts.next()) else {
            return Err(bad(location, "expected hf://ORG/REPO[@REVISION][/PATH]"));
        };
        let (repo, revision) = match repo_rev.split_once('@') {
            Some((r, rev)) => (r, rev),
            None => (repo_rev, "main"),
        };
        let path = parts.next().filter(|p| !p.is_empty()).map(str::to_owned);
        return checked(location, org, repo, revision, path).map(Some);
    }
    let Some(origin) = url::origin(location) else {
        return Ok(None);
    };
    if Some(origin.as_str()) != url::origin(endpoint).as_deref() {
        return Ok(None);
    }
    let base = url::display(location);
    let endpoint_path = endpoint
        .split_once("://")
        .and_then(|(_, r)| r.find('/').map(|i| &r[i..]))
        .unwrap_or("")
        .trim_end_matches('/');
    let after_origin = base
        .split_once("://")
        .and_then(|(_, r)| r.find('/').map(|i| &r[i..]))
        .unwrap_or("");
    let Some(path) = after_origin.strip_prefix(endpoint_path) else {
        return Ok(None);
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        [org, repo] => checked(location, org, repo, "main", None).map(Some),
        [org, repo, "blob" | "resolve", rev, rest @ ..] if !rest.is_empty() => {
            checked(location, org, repo, rev, Some(rest.join("/"))).map(Some)
        }
        // Other pages of the Hub (datasets, spaces, …) are read as plain URLs.
        _ => Ok(None),
    }
}

fn checked(
    location: &str,
    org: &str,
    repo: &str,
    revision: &str,
    path: Option<String>,
) -> Result<HubPath, RemoteError> {
    let ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.%".contains(&b))
    };
    if !ok(org) || !ok(repo) || !ok(revision) {
        return Err(bad(
            location,
            "the organisation, repository and revision may hold letters, digits, '-', '_', '.' (a revision with '/' is written with %2F)",
        ));
    }
    if let Some(p) = &path
        && p.split('/').any(|s| s.is_empty() || s == "..")
    {
        return Err(bad(location, "the file path has an empty or '..' part"));
    }
    Ok(HubPath {
        repo: format!("{org}/{repo}"),
        revision: revision.to_owned(),
        path,
    })
}

/// What a location opens: the URL of a safetensors file or shard index,
/// and the index's text when it was read while looking.
#[derive(Debug)]
pub struct Located {
    /// The URL to open.
    pub url: String,
    /// The shard index's bytes, when `url` is one and was already read.
    pub index: Option<Vec<u8>>,
    /// The Hub repository, when the location is on the Hub.
    pub hub: Option<HubPath>,
}

/// The shard index a repository without a PATH is looked for at, and the
/// largest one read.
#[derive(Debug, Clone, Copy)]
pub struct IndexRule<'a> {
    /// Its file name (`model.safetensors.index.json`).
    pub name: &'a str,
    /// Bytes read at most.
    pub max_bytes: u64,
}

/// Turns a location (an `http(s)` URL or a Hub path) into the URL to open.
pub fn locate(
    client: &Client,
    location: &str,
    index: IndexRule<'_>,
) -> Result<Located, RemoteError> {
    let settings: &Settings = client.settings();
    let Some(hub) = parse(location, &settings.hf_endpoint)? else {
        return Ok(Located {
            url: location.to_owned(),
            index: None,
            hub: None,
        });
    };
    let endpoint = settings.hf_endpoint.as_str();
    if let Some(path) = &hub.path {
        return Ok(Located {
            url: hub.resolve(endpoint, path),
            index: None,
            hub: Some(hub),
        });
    }
    let index_url = hub.resolve(endpoint, index.name);
    match client.read_small(&index_url, index.max_bytes) {
        Ok(Some(text)) => Ok(Located {
            url: index_url,
            index: Some(text),
            hub: Some(hub),
        }),
        Ok(None) => Ok(Located {
            url: hub.resolve(endpoint, "model.safetensors"),
            index: None,
            hub: Some(hub),
        }),
        Err(e) if e.kind() == "Unauthorized" => Err(RemoteError::new(
            "Unauthorized",
            format!(
                "{}: the repository {} (revision {}) is private, gated or does not exist. {}",
                location,
                hub.repo,
                hub.revision,
                if settings.hf_token.is_some() {
                    "The token in HF_TOKEN (or the token file) was sent and refused: check it has access"
                } else {
                    "Set HF_TOKEN to an access token (or log in with `hf auth login`) and accept the model's terms on its page if it is gated"
                }
            ),
        )),
        Err(e) => Err(e),
    }
}

/// The error for a Hub file that is not there: which file, which revision.
pub fn not_found(hub: &HubPath, path: &str) -> RemoteError {
    RemoteError::new(
        "NotFound",
        format!(
            "{} has no file {path:?} at revision {:?} (or the revision does not exist)",
            hub.repo, hub.revision
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const EP: &str = "https://huggingface.co";

    #[expect(clippy::unnecessary_wraps, reason = "compared with parse's Option")]
    fn hp(repo: &str, rev: &str, path: Option<&str>) -> Option<HubPath> {
        Some(HubPath {
            repo: repo.into(),
            revision: rev.into(),
            path: path.map(Into::into),
        })
    }

    #[test]
    fn hub_locations() {
        assert_eq!(parse("hf://org/m", EP), Ok(hp("org/m", "main", None)));
        assert_eq!(
            parse("hf://org/m@v1.0/sub/x.safetensors", EP),
            Ok(hp("org/m", "v1.0", Some("sub/x.safetensors")))
        );
        assert_eq!(
            parse("https://huggingface.co/org/m/blob/main/a.safetensors", EP),
            Ok(hp("org/m", "main", Some("a.safetensors")))
        );
        assert_eq!(
            parse(
                "https://huggingface.co/org/m/resolve/abc123/a.safetensors?download=true",
                EP
            ),
            Ok(hp("org/m", "abc123", Some("a.safetensors")))
        );
        assert_eq!(
            parse("https://huggingface.co/org/m", EP),
            Ok(hp("org/m", "main", None))
        );
        assert_eq!(parse("https://example.com/org/m", EP), Ok(None));
        assert_eq!(
            parse(
                "http://127.0.0.1:9/hub/org/m/resolve/main/x.safetensors",
                "http://127.0.0.1:9/hub"
            ),
            Ok(hp("org/m", "main", Some("x.safetensors")))
        );
        assert!(parse("hf://org", EP).is_err());
        assert!(parse("hf://org/m/../x", EP).is_err());
        assert!(parse("hf://o r/m", EP).is_err());
        assert_eq!(
            hp("o/m", "main", None).map(|h| h.resolve(EP, "c.json")),
            Some("https://huggingface.co/o/m/resolve/main/c.json".to_owned())
        );
    }
}
