//! What the containers' tests share: the SHA-256 of bytes as the fixtures'
//! manifests write it (`tests/data/<container>/MANIFEST.json`).

use std::fmt::Write as _;

use sha2::Digest as _;

/// The SHA-256 of `data` in lower-case hex.
pub(crate) fn sha256(data: &[u8]) -> String {
    sha2::Sha256::digest(data)
        .iter()
        .fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_answers() {
        assert_eq!(
            super::sha256(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            super::sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
