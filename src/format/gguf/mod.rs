//! GGUF, llama.cpp's container (GGUF.md): the header reader ([`header`]:
//! the key/value table, the tensor infos, the data section's start, every
//! count and length checked against the file), the type tables
//! ([`types`]), the file into the model ([`open`]: stored types as their
//! dtype, block types as their bytes for the quantization layer) and the
//! block types' values ([`dequant`]).

pub mod dequant;
mod file;
pub mod header;
pub mod names;
pub mod open;
pub(crate) mod split;
pub mod types;

use crate::format::LoadError;
use crate::format::containers::{Container, Probe};

/// GGUF in the table of containers: its magic; a `.gguf` that is no GGUF
/// gets GGUF's own verdict; a split model's first part opens the others.
pub(crate) const CONTAINER: Container = Container {
    id: "gguf",
    label: "GGUF",
    has_data_section: true,
    separator: '.',
    claims: |p: &Probe<'_>| p.bytes.starts_with(header::MAGIC),
    open: file::open_file,
    refuse: Some(|p: &Probe<'_>, path: &std::path::Path| {
        (p.extension == Some("gguf")).then(|| {
            let error = header::parse(p.bytes)
                .err()
                .unwrap_or_else(|| header::GgufError::Magic(String::new()));
            LoadError::Gguf {
                path: path.to_path_buf(),
                error,
            }
        })
    }),
    expand: Some(split::open),
    folder: None,
};

#[cfg(test)]
mod tests;
