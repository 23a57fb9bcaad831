//! The version of a remote file (ETag, or Last-Modified, and size): what
//! the client checks every response against and the cache stores with an
//! entry.

/// The version of a remote file: what every response must repeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Version {
    /// The `ETag`, when the server sends one.
    pub etag: Option<String>,
    /// `Last-Modified`, used when there is no ETag.
    pub last_modified: Option<String>,
    /// The file's length in bytes.
    pub size: u64,
}

impl Version {
    /// True when `other` describes the same file: same size, and the same
    /// ETag (or, without ETags, the same Last-Modified).
    pub fn same_as(&self, other: &Version) -> bool {
        if self.size != other.size {
            return false;
        }
        match (&self.etag, &other.etag) {
            (Some(a), Some(b)) => a == b,
            _ => match (&self.last_modified, &other.last_modified) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let v = |e: Option<&str>, l: Option<&str>, s| Version {
            etag: e.map(Into::into),
            last_modified: l.map(Into::into),
            size: s,
        };
        assert!(v(Some("a"), None, 1).same_as(&v(Some("a"), Some("x"), 1)));
        assert!(!v(Some("a"), None, 1).same_as(&v(Some("b"), None, 1)));
        assert!(!v(Some("a"), None, 1).same_as(&v(Some("a"), None, 2)));
        assert!(v(None, Some("t"), 1).same_as(&v(None, Some("t"), 1)));
        assert!(!v(None, Some("t"), 1).same_as(&v(None, Some("u"), 1)));
    }
}
