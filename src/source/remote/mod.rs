//! Remote checkpoints: files read over HTTP(S) in byte ranges, through an
//! on-disk cache, and Hugging Face Hub repositories.
//!
//! - [`http`]: the client (`ureq`, rustls with the platform's certificate
//!   store), redirects followed by hand so that a token goes to the Hub's
//!   host only, every response's version (ETag, or Last-Modified and size)
//!   checked against the file's.
//! - [`cache`]: one entry per URL in the user's cache folder: a sparse file
//!   as long as the remote file, a bitmap of the chunks it holds, a size cap
//!   with the least recently used out.
//! - [`file`]: [`RemoteFile`], what the format reads: the header in at most
//!   two range requests, tensor bytes in chunks, a few in flight.
//! - [`hub`]: `hf://ORG/REPO[@REVISION][/PATH]` and Hub web links.
//!
//! Every server is hostile until checked: sizes are compared with what was
//! asked before anything is written, a body is read only up to the bytes
//! asked for, and every failure is a [`RemoteError`] naming the URL.

pub mod cache;
pub mod file;
pub mod http;
pub mod hub;
mod url;
mod version;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use file::{Pin, RemoteFile};
pub use http::Client;

/// The URL of the file `name` in the folder of `url` (a shard beside its
/// index).
pub fn sibling_url(url: &str, name: &str) -> Option<String> {
    url::sibling(url, name)
}

/// The URL of file `name` beside the file at `url`, its query kept (a
/// split model's parts).
pub fn sibling_keeping_query(url: &str, name: &str) -> String {
    url::sibling_keeping_query(url, name)
}

/// True when `location` names a remote file (`http://`, `https://` or
/// `hf://`) rather than a local path.
pub fn is_remote(location: &str) -> bool {
    let lower = |p: &str| {
        location
            .get(..p.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(p))
    };
    lower("http://") || lower("https://") || lower("hf://")
}

/// What a remote read may use: where the cache is and how large it may
/// grow, the Hub's endpoint and token, the client's limits.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The cache folder (`$TENSORSCOPE_CACHE_DIR`, else the platform's:
    /// `$XDG_CACHE_HOME/tensorscope` or `~/.cache/tensorscope` on Linux,
    /// `~/Library/Caches/tensorscope` on macOS,
    /// `%LOCALAPPDATA%\tensorscope\cache` on Windows; else
    /// `$TMPDIR/tensorscope-cache`); `None` when none is known, and remote
    /// files cannot be opened.
    pub cache_dir: Option<PathBuf>,
    /// The cache's size cap in bytes (`$TENSORSCOPE_CACHE_MAX`, such as
    /// `4G` or `500M`; default 4 GiB).
    pub cache_max: u64,
    /// The Hub's endpoint (`$HF_ENDPOINT`, default `https://huggingface.co`).
    pub hf_endpoint: String,
    /// The Hub token (`$HF_TOKEN`, else the file `huggingface_hub` writes).
    pub hf_token: Option<String>,
    /// Timeout to connect, and for each read of a response
    /// (`$TENSORSCOPE_HTTP_TIMEOUT` seconds; default 30).
    pub timeout: Duration,
    /// Redirects followed before giving up.
    pub max_redirects: u32,
    /// Chunks fetched at once.
    pub parallel: usize,
}

/// Default cache cap: 4 GiB.
pub const DEFAULT_CACHE_MAX: u64 = 4 << 30;

impl Settings {
    /// The settings the environment gives.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let home = crate::platform::dirs::home();
        let cache_dir = var("TENSORSCOPE_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(crate::platform::dirs::cache)
            .or_else(|| var("TMPDIR").map(|d| PathBuf::from(d).join("tensorscope-cache")));
        let cache_max = var("TENSORSCOPE_CACHE_MAX")
            .and_then(|v| parse_size(&v))
            .unwrap_or(DEFAULT_CACHE_MAX);
        let hf_endpoint = var("HF_ENDPOINT")
            .unwrap_or_else(|| "https://huggingface.co".into())
            .trim_end_matches('/')
            .to_owned();
        let hf_token = var("HF_TOKEN").or_else(|| {
            let path = var("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| {
                var("HF_HOME")
                    .map(PathBuf::from)
                    .or_else(|| home.as_ref().map(|h| h.join(".cache").join("huggingface")))
                    .map(|d| d.join("token"))
            })?;
            let text = read_small_file(&path)?;
            let token = text.trim();
            (!token.is_empty()).then(|| token.to_owned())
        });
        let timeout = var("TENSORSCOPE_HTTP_TIMEOUT")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0 && *s < 86_400.0)
            .map_or(Duration::from_secs(30), Duration::from_secs_f64);
        Self {
            cache_dir,
            cache_max,
            hf_endpoint,
            hf_token,
            timeout,
            max_redirects: 10,
            parallel: 4,
        }
    }
}

/// A token file of at most 4 KiB, read only if it is a regular file.
fn read_small_file(path: &std::path::Path) -> Option<String> {
    use std::io::Read as _;
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// `4G`, `500M`, `64K`, `1T` or a byte count; binary units.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let shift = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// The process's client, made once from [`Settings::from_env`] (or from
/// what [`configure`] set before the first remote read).
pub fn client() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| Client::new(Arc::new(configured().clone())))
}

static CONFIGURED: OnceLock<Settings> = OnceLock::new();

fn configured() -> &'static Settings {
    CONFIGURED.get_or_init(Settings::from_env)
}

/// Sets the settings the process's client will use, before its first
/// remote read (for tests and embedders); false when it is too late.
pub fn configure(settings: Settings) -> bool {
    CONFIGURED.set(settings).is_ok()
}

/// Bytes of tensor data a reader should fetch and hold at once from
/// remote files: half the cache cap, between 16 and 256 MiB.
pub fn batch_bytes() -> u64 {
    (client().settings().cache_max / 2).clamp(16 << 20, 256 << 20)
}

/// Why a remote read failed. Each names the URL; the kinds are stable for
/// JSON output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RemoteError {
    kind: &'static str,
    message: String,
}

impl RemoteError {
    pub(crate) fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// A stable identifier: `HttpStatus`, `Unauthorized`, `NotFound`,
    /// `RateLimited`, `RangeIgnored`, `RemoteChanged`, `Transport`,
    /// `TooManyRedirects`, `BadResponse`, `Cache`, `BadUrl`, `NotFetched`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// What went wrong, for people.
    pub fn message(&self) -> &str {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_locations_and_sizes() {
        assert!(is_remote("https://h/x.safetensors"));
        assert!(is_remote("HTTP://h/x"));
        assert!(is_remote("hf://org/repo"));
        assert!(!is_remote("./https:/x"));
        assert!(!is_remote("model.safetensors"));
        assert_eq!(parse_size("4G"), Some(4 << 30));
        assert_eq!(parse_size("500M"), Some(500 << 20));
        assert_eq!(parse_size("64 KiB"), Some(64 << 10));
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("1X"), None);
        assert_eq!(parse_size("99999999999999T"), None);
    }
}
