//! The little URL handling remote reads need: the origin of a URL (to
//! decide where a token may go), a redirect's target, a sibling file.

/// `scheme://authority` of an `http(s)` URL, lowercased; `None` for
/// anything else.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Credentials in the authority are never ours to send on.
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let host = match (
        scheme.as_str(),
        host.strip_suffix(":443"),
        host.strip_suffix(":80"),
    ) {
        ("https", Some(h), _) | ("http", _, Some(h)) => h.to_owned(),
        _ => host,
    };
    Some(format!("{scheme}://{host}"))
}

/// True when the URL's host is this machine (`127.0.0.0/8`, `::1`,
/// `localhost`).
pub fn is_loopback(url: &str) -> bool {
    let Some(origin) = origin(url) else {
        return false;
    };
    let host = origin.split_once("://").map_or("", |(_, h)| h);
    let host = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

/// The URL a `Location` header names, seen from `base`.
pub fn join(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    if origin(location).is_some() {
        return Some(location.to_owned());
    }
    let base_origin = origin(base)?;
    if let Some(rest) = location.strip_prefix("//") {
        let scheme = base_origin.split("://").next()?;
        let url = format!("{scheme}://{rest}");
        return origin(&url).map(|_| url);
    }
    if location.starts_with('/') {
        return Some(format!("{base_origin}{location}"));
    }
    let after = base.split_once("://")?.1;
    let scheme_len = base.len() - after.len();
    let dir = match after.find('/') {
        Some(i) => {
            let path = &base[scheme_len + i..];
            let path = path.split(['?', '#']).next().unwrap_or(path);
            &path[..=path.rfind('/').unwrap_or(0)]
        }
        None => "/",
    };
    Some(format!("{base_origin}{dir}{location}"))
}

/// The file `name` in the folder of `url` (`…/a/b.json` → `…/a/name`).
pub fn sibling(url: &str, name: &str) -> Option<String> {
    let base = url.split(['?', '#']).next().unwrap_or(url);
    let (_, rest) = base.split_once("://")?;
    let slash = rest.rfind('/')?;
    let cut = base.len() - rest.len() + slash;
    Some(format!("{}/{name}", &base[..cut]))
}

/// The URL of file `name` beside the file at `url` (its last segment
/// replaced, a query kept).
pub fn sibling_keeping_query(url: &str, name: &str) -> String {
    let (base, query) = match url.find(['?', '#']) {
        Some(at) => url.split_at(at),
        None => (url, ""),
    };
    match base.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{name}{query}"),
        None => name.to_owned(),
    }
}

/// `url` without credentials, query or fragment: for messages and cache
/// keys, which must not carry a signed link's secrets.
pub fn display(url: &str) -> String {
    let base = url.split(['?', '#']).next().unwrap_or(url);
    match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => base.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn siblings_keep_the_folder_and_the_query() {
        assert_eq!(
            super::sibling_keeping_query(
                "https://h/r/m-00001-of-00002.gguf?download=1",
                "m-00002-of-00002.gguf"
            ),
            "https://h/r/m-00002-of-00002.gguf?download=1"
        );
        assert_eq!(
            super::sibling_keeping_query("http://h/a.gguf", "b.gguf"),
            "http://h/b.gguf"
        );
    }

    use super::*;

    #[test]
    fn origins_joins_and_siblings() {
        assert_eq!(
            origin("https://User:pw@HF.co:443/a/b").as_deref(),
            Some("https://hf.co")
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/x").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin("ftp://x/y"), None);
        assert!(is_loopback("http://127.0.0.1:8080/x"));
        assert!(is_loopback("http://localhost/x"));
        assert!(is_loopback("http://[::1]:9/x"));
        assert!(!is_loopback("https://huggingface.co/x"));
        assert_eq!(origin("https:///y"), None);
        let base = "http://h:1/org/repo/resolve/main/m.safetensors?x=1";
        assert_eq!(
            join(base, "/other/f").as_deref(),
            Some("http://h:1/other/f")
        );
        assert_eq!(
            join(base, "n.safetensors").as_deref(),
            Some("http://h:1/org/repo/resolve/main/n.safetensors")
        );
        assert_eq!(
            join(base, "https://cdn/x").as_deref(),
            Some("https://cdn/x")
        );
        assert_eq!(join(base, "//cdn/x").as_deref(), Some("http://cdn/x"));
        assert_eq!(join("http://h", "f").as_deref(), Some("http://h/f"));
        assert_eq!(
            sibling("http://h/a/b/i.json", "s-1.safetensors").as_deref(),
            Some("http://h/a/b/s-1.safetensors")
        );
        assert_eq!(
            display("https://u:p@h/a?sig=secret"),
            "https://h/a".to_owned()
        );
    }
}
