//! The HTTP client remote reads go through.
//!
//! - `ureq` 3, blocking, with rustls; certificates are checked by the
//!   platform's verifier (`rustls-platform-verifier`: on Linux the system
//!   store, `/etc/ssl/certs`), so a corporate CA installed there works.
//! - Proxies from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and `NO_PROXY`
//!   (ureq reads them).
//! - Timeouts to connect and for every read ([`Settings::timeout`]).
//! - Redirects are followed here, not by ureq, at most
//!   [`Settings::max_redirects`]: the Hub token is sent only to a URL on
//!   the endpoint's own origin, never to a redirect target elsewhere (the
//!   Hub sends large files to a CDN).
//! - A response's body is read only up to the bytes asked for, and its
//!   length is checked: a body cut short is an error, never short data.

use std::io::Read as _;
use std::ops::Range;
use std::sync::Arc;

use ureq::http::{HeaderMap, Response, StatusCode};

use super::url;
use super::{RemoteError, Settings};
use crate::jobs::CancelToken;

// Part of the client's public face (`http::Version`); the type lives in
// `version.rs` so that the cache need not import the client.
pub use super::version::Version;

/// What a range request gave.
#[derive(Debug, Clone)]
pub struct RangeReply {
    /// The file's version as this response gave it.
    pub version: Version,
    /// False when the server ignored `Range` and sent the file from its
    /// start (only the bytes asked for were read).
    pub ranges: bool,
    /// True for `304 Not Modified` (a conditional request whose version
    /// still holds): no bytes were sent.
    pub not_modified: bool,
    /// Bytes handed to the sink.
    pub bytes: u64,
}

/// The client: one connection pool, the settings, the endpoint's origin.
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    /// The same, never through a proxy: for loopback addresses, which a
    /// proxy cannot reach.
    direct: ureq::Agent,
    settings: Arc<Settings>,
    endpoint: Option<String>,
}

/// Pieces a body is read in.
const READ_PIECE: usize = 256 * 1024;

impl Client {
    /// A client with these settings.
    pub fn new(settings: Arc<Settings>) -> Self {
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build();
        let builder = || {
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .tls_config(tls.clone())
                .user_agent(concat!("tensorscope/", env!("CARGO_PKG_VERSION")))
                .timeout_connect(Some(settings.timeout))
                .timeout_recv_response(Some(settings.timeout))
                .timeout_per_read(Some(settings.timeout))
                .max_idle_connections_per_host(settings.parallel.max(1) * 2)
        };
        let endpoint = url::origin(&settings.hf_endpoint);
        Self {
            agent: ureq::Agent::new_with_config(builder().build()),
            direct: ureq::Agent::new_with_config(builder().proxy(None).build()),
            settings,
            endpoint,
        }
    }

    /// The settings this client was made with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Sends a GET for `url` with `headers`, following redirects; the
    /// response is any status but a redirect.
    fn send(
        &self,
        url: &str,
        headers: &[(&str, String)],
    ) -> Result<(Response<ureq::Body>, String), RemoteError> {
        let mut current = url.to_owned();
        let mut seen = Vec::new();
        for _ in 0..=self.settings.max_redirects {
            let agent = if url::is_loopback(&current) {
                &self.direct
            } else {
                &self.agent
            };
            let mut request = agent.get(&current);
            for (k, v) in headers {
                request = request.header(*k, v);
            }
            if let (Some(token), Some(endpoint)) = (&self.settings.hf_token, &self.endpoint)
                && url::origin(&current).as_ref() == Some(endpoint)
            {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            let response = request.call().map_err(|e| transport(&current, &e))?;
            let status = response.status();
            if !status.is_redirection() || status == StatusCode::NOT_MODIFIED {
                return Ok((response, current));
            }
            let Some(next) =
                header(response.headers(), "location").and_then(|l| url::join(&current, &l))
            else {
                return Err(RemoteError::new(
                    "BadResponse",
                    format!(
                        "{} answered {} without a usable Location",
                        url::display(&current),
                        status.as_u16()
                    ),
                ));
            };
            if seen.contains(&next) {
                return Err(RemoteError::new(
                    "TooManyRedirects",
                    format!("{} redirects in a loop", url::display(url)),
                ));
            }
            seen.push(current);
            current = next;
        }
        Err(RemoteError::new(
            "TooManyRedirects",
            format!(
                "{} redirected more than {} times",
                url::display(url),
                self.settings.max_redirects
            ),
        ))
    }

    /// Reads the bytes `range` of `url` into `sink`, piece by piece.
    ///
    /// With `expect`, the response must be of that version. With
    /// `if_none_match`, `expect` is what the cache holds instead: the
    /// request is conditional, a `304 Not Modified` (no bytes) says it still
    /// holds, and any other version is taken as the file's new one. A server that ignores `Range` is answered by reading the
    /// start of its full response, for a range that starts at 0 only.
    pub fn read_range(
        &self,
        target: &str,
        range: Range<u64>,
        expect: Option<&Version>,
        if_none_match: bool,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), RemoteError>,
        cancel: &CancelToken,
    ) -> Result<RangeReply, RemoteError> {
        let shown = url::display(target);
        if range.is_empty() {
            return Err(RemoteError::new(
                "BadUrl",
                format!("an empty range of {shown} was asked for"),
            ));
        }
        let mut headers = vec![("Range", format!("bytes={}-{}", range.start, range.end - 1))];
        if if_none_match && let Some(v) = expect {
            if let Some(etag) = &v.etag {
                headers.push(("If-None-Match", etag.clone()));
            } else if let Some(lm) = &v.last_modified {
                headers.push(("If-Modified-Since", lm.clone()));
            }
        }
        let (response, final_url) = self.send(target, &headers)?;
        let status = response.status();
        let h = response.headers().clone();
        let mut version = Version {
            etag: header(&h, "etag"),
            last_modified: header(&h, "last-modified"),
            size: 0,
        };
        let (start, len, ranges) = match status.as_u16() {
            304 if if_none_match && expect.is_some() => {
                let mut version = expect.cloned().unwrap_or_default();
                if let Some(e) = header(&h, "etag") {
                    version.etag = Some(e);
                }
                return Ok(RangeReply {
                    version,
                    ranges: true,
                    not_modified: true,
                    bytes: 0,
                });
            }
            206 => {
                let Some((start, end, total)) =
                    header(&h, "content-range").and_then(|v| content_range(&v))
                else {
                    return Err(bad(&shown, "a 206 response without a valid Content-Range"));
                };
                version.size = total;
                let wanted_end = range.end.min(total);
                if start != range.start || end + 1 != wanted_end {
                    return Err(bad(
                        &shown,
                        &format!(
                            "bytes {start}-{end} were sent where {}-{} were asked for",
                            range.start,
                            wanted_end.saturating_sub(1)
                        ),
                    ));
                }
                (start, end + 1 - start, true)
            }
            200 => {
                let Some(total) = header(&h, "content-length").and_then(|v| v.parse().ok()) else {
                    return Err(RemoteError::new(
                        "RangeIgnored",
                        format!(
                            "{shown}: the server ignored the Range request and gave no length; it cannot be read in parts"
                        ),
                    ));
                };
                version.size = total;
                if range.start != 0 {
                    return Err(RemoteError::new(
                        "RangeIgnored",
                        format!(
                            "{shown}: the server ignores Range requests, so reading bytes {}-{} would download the whole {total}-byte file first; refused (download the file and open the copy)",
                            range.start,
                            range.end - 1
                        ),
                    ));
                }
                (0, range.end.min(total), false)
            }
            416 => {
                let total = header(&h, "content-range").and_then(|v| {
                    v.strip_prefix("bytes */")
                        .and_then(|t| t.trim().parse().ok())
                });
                match total {
                    Some(total) if range.start >= total => {
                        version.size = total;
                        (range.start, 0, true)
                    }
                    _ => {
                        return Err(bad(
                            &shown,
                            "416 Range Not Satisfiable for a range inside the file",
                        ));
                    }
                }
            }
            _ => return Err(status_error(&final_url, status, &h)),
        };
        // A revalidation takes whatever version the server has now; a read
        // of an open file must find the version it was opened at.
        if let Some(expected) = expect
            && !if_none_match
            && !expected.same_as(&version)
        {
            return Err(changed(&shown, expected, &version));
        }
        let _ = start;
        let mut reader = response.into_body().into_reader();
        let mut buf = vec![
            0u8;
            READ_PIECE
                .min(usize::try_from(len).unwrap_or(READ_PIECE))
                .max(1)
        ];
        let mut got: u64 = 0;
        while got < len {
            cancel
                .check()
                .map_err(|_| RemoteError::new("Cancelled", "cancelled"))?;
            let want = usize::try_from((len - got).min(buf.len() as u64)).unwrap_or(buf.len());
            let n = match reader.read(&mut buf[..want]) {
                Ok(0) => {
                    return Err(RemoteError::new(
                        "Transport",
                        format!(
                            "{shown}: the response ended after {got} of the {len} bytes asked for"
                        ),
                    ));
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(RemoteError::new(
                        "Transport",
                        format!(
                            "{shown}: reading the response failed after {got} of {len} bytes: {e}"
                        ),
                    ));
                }
            };
            sink(&buf[..n])?;
            got += n as u64;
        }
        Ok(RangeReply {
            version,
            ranges,
            not_modified: false,
            bytes: got,
        })
    }

    /// Reads a whole small file (a shard index, a config): `Ok(None)` for
    /// 404, an error past `max` bytes (read no further).
    ///
    /// A copy is kept in the cache folder with its ETag: the next read
    /// asks with `If-None-Match`, and a `304` costs no body bytes.
    pub fn read_small(&self, target: &str, max: u64) -> Result<Option<Vec<u8>>, RemoteError> {
        let shown = url::display(target);
        let kept = super::cache::small_file(&self.settings, target);
        let stored = kept
            .as_ref()
            .and_then(super::cache::SmallFile::load)
            .filter(|(_, b)| b.len() as u64 <= max);
        let headers: Vec<(&str, String)> = stored
            .as_ref()
            .map(|(etag, _)| vec![("If-None-Match", etag.clone())])
            .unwrap_or_default();
        let (response, final_url) = self.send(target, &headers)?;
        let status = response.status();
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if status == StatusCode::NOT_MODIFIED
            && let Some((_, bytes)) = stored
        {
            return Ok(Some(bytes));
        }
        let etag = header(response.headers(), "etag");
        if !status.is_success() {
            return Err(status_error(&final_url, status, response.headers()));
        }
        let declared: Option<u64> =
            header(response.headers(), "content-length").and_then(|v| v.parse().ok());
        if declared.is_some_and(|d| d > max) {
            return Err(RemoteError::new(
                "BadResponse",
                format!(
                    "{shown} is {} bytes, more than the {max} read for such a file",
                    declared.unwrap_or(0)
                ),
            ));
        }
        let mut text = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(max + 1)
            .read_to_end(&mut text)
            .map_err(|e| RemoteError::new("Transport", format!("{shown}: reading failed: {e}")))?;
        if text.len() as u64 > max {
            return Err(RemoteError::new(
                "BadResponse",
                format!("{shown} is more than the {max} bytes read for such a file"),
            ));
        }
        if declared.is_some_and(|d| d != text.len() as u64) {
            return Err(RemoteError::new(
                "Transport",
                format!(
                    "{shown}: the response ended after {} of {} bytes",
                    text.len(),
                    declared.unwrap_or(0)
                ),
            ));
        }
        if let (Some(kept), Some(etag)) = (kept, etag) {
            kept.store(&etag, &text);
        }
        Ok(Some(text))
    }
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// `bytes A-B/TOTAL` → (A, B, TOTAL), checked: A ≤ B < TOTAL.
fn content_range(value: &str) -> Option<(u64, u64, u64)> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (span, total) = rest.split_once('/')?;
    let (a, b) = span.split_once('-')?;
    let (a, b, total): (u64, u64, u64) = (
        a.trim().parse().ok()?,
        b.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (a <= b && b < total).then_some((a, b, total))
}

fn bad(shown: &str, what: &str) -> RemoteError {
    RemoteError::new("BadResponse", format!("{shown}: {what}"))
}

fn changed(shown: &str, was: &Version, now: &Version) -> RemoteError {
    let tag = |v: &Version| {
        v.etag
            .clone()
            .or_else(|| v.last_modified.clone())
            .unwrap_or_else(|| "-".into())
    };
    RemoteError::new(
        "RemoteChanged",
        format!(
            "{shown} changed on the server while being read (version {} of {} bytes, now {} of {} bytes); reopen it",
            tag(was),
            was.size,
            tag(now),
            now.size
        ),
    )
}

/// The error for a status that is not what was asked for.
fn status_error(target: &str, status: StatusCode, h: &HeaderMap) -> RemoteError {
    let shown = url::display(target);
    let code = status.as_u16();
    match code {
        401 | 403 => RemoteError::new(
            "Unauthorized",
            format!(
                "{shown}: HTTP {code}: the file is private or gated. On the Hugging Face Hub, accept the model's terms on its page, then set HF_TOKEN to an access token (or log in with `hf auth login`, which writes the token file)"
            ),
        ),
        404 => RemoteError::new("NotFound", format!("{shown}: HTTP 404, no such file")),
        429 => RemoteError::new(
            "RateLimited",
            format!(
                "{shown}: HTTP 429, too many requests{}",
                header(h, "retry-after").map_or_else(
                    || "; retry later".into(),
                    |s| format!("; the server asks to retry after {s} s")
                )
            ),
        ),
        _ => RemoteError::new(
            "HttpStatus",
            format!(
                "{shown}: HTTP {code} {}",
                status.canonical_reason().unwrap_or("")
            ),
        ),
    }
}

fn transport(target: &str, e: &ureq::Error) -> RemoteError {
    let shown = url::display(target);
    let why = match e {
        ureq::Error::Timeout(_) => "no answer in time (timed out)".to_owned(),
        ureq::Error::HostNotFound => "the host was not found".to_owned(),
        ureq::Error::ConnectionFailed => "the connection failed".to_owned(),
        other => other.to_string(),
    };
    RemoteError::new("Transport", format!("{shown}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges() {
        assert_eq!(content_range("bytes 0-9/100"), Some((0, 9, 100)));
        assert_eq!(content_range("bytes 5-4/100"), None);
        assert_eq!(content_range("bytes 0-100/100"), None);
        assert_eq!(content_range("bytes */100"), None);
        assert_eq!(content_range("items 0-1/2"), None);
    }
}
