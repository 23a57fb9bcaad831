//! Recognising other checkpoint formats by their first bytes, so that a
//! rejected file can be named. Only consulted after a file has failed one of
//! the header checks: a valid safetensors file may start with any bytes.

use super::error::ForeignFormat;

/// Names the format whose signature starts `bytes`, if any.
pub fn detect_foreign(bytes: &[u8]) -> Option<ForeignFormat> {
    if bytes.starts_with(b"PK\x03\x04") {
        return Some(ForeignFormat::PytorchZip);
    }
    if bytes.starts_with(b"GGUF") {
        return Some(ForeignFormat::Gguf);
    }
    if bytes.starts_with(b"\x93NUMPY") {
        return Some(ForeignFormat::Npy);
    }
    if bytes.starts_with(b"\x89HDF\r\n\x1a\n") {
        return Some(ForeignFormat::Hdf5);
    }
    match bytes {
        [0x80, 2 | 3, ..] | [0x80, 4 | 5, 0x95, ..] => Some(ForeignFormat::Pickle),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        assert_eq!(
            detect_foreign(b"PK\x03\x04rest"),
            Some(ForeignFormat::PytorchZip)
        );
        assert_eq!(detect_foreign(b"GGUF\x03\0\0\0"), Some(ForeignFormat::Gguf));
        assert_eq!(detect_foreign(b"\x93NUMPY\x01\0"), Some(ForeignFormat::Npy));
        assert_eq!(
            detect_foreign(b"\x89HDF\r\n\x1a\n"),
            Some(ForeignFormat::Hdf5)
        );
        assert_eq!(detect_foreign(b"\x80\x02}q\0"), Some(ForeignFormat::Pickle));
        assert_eq!(
            detect_foreign(b"\x80\x04\x95\x10\0"),
            Some(ForeignFormat::Pickle)
        );
        assert_eq!(detect_foreign(b"\x80\x04}"), None);
        assert_eq!(detect_foreign(b"\x80\x06\x95"), None);
        assert_eq!(detect_foreign(b"{}"), None);
        assert_eq!(detect_foreign(b""), None);
    }
}
