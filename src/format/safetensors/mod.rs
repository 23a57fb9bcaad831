//! Safetensors: the header, checked as the reference implementation checks
//! it (`parse.rs`, `parse/json.rs`), its errors named by the reference's
//! kinds (`error.rs`), the other formats a rejected file may be
//! (`detect.rs`), and the writer, which lays files out as the reference
//! writer does (`write.rs`). The header's model ([`Header`],
//! [`TensorInfo`]) is what every container is read into.

mod detect;
mod error;
mod parse;
pub mod write;

pub use detect::detect_foreign;
pub use error::{ForeignFormat, FormatError, FormatWarning, OverflowStage};
pub use parse::{Header, MAX_HEADER_SIZE, N_LEN, Rejected, TensorInfo, parse, parse_explained};

/// Safetensors in the table of containers: the default, tried before the
/// others (see [`crate::format::containers`]).
pub(crate) const CONTAINER: crate::format::containers::Container =
    crate::format::containers::Container {
        id: "safetensors",
        label: "safetensors",
        has_data_section: true,
        separator: '.',
        // Asked first, by `StoredFile`, and never through the table.
        claims: |_| false,
        open: |o| {
            let header =
                parse(o.source.bytes()).map_err(|error| crate::format::LoadError::Format {
                    path: o.path.clone(),
                    error,
                    repeated: Vec::new(),
                })?;
            Ok(crate::format::StoredFile::assemble(
                o.path,
                o.source,
                header,
                crate::format::ContainerKind::SAFETENSORS,
                Vec::new(),
            ))
        },
        refuse: None,
        expand: None,
        folder: None,
    };

/// True when `bytes` (of a file of `len` bytes) are a safetensors file's,
/// valid or not: an 8-byte header length that fits the file and a header
/// that starts with `{`. Its verdict is then safetensors', whatever the
/// first byte says to another container's sniffing (a length whose low
/// byte is 0x80 looks like a pickle's first opcode).
pub fn is_its_own(bytes: &[u8], len: u64) -> bool {
    let Some(n) = bytes.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
        return false;
    };
    let n = u64::from_le_bytes(n);
    bytes.get(8) == Some(&b'{') && n <= len.saturating_sub(N_LEN)
}
