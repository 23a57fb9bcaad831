//! The `scan` target: the input (after its first byte, which chooses the
//! file's name) judged by `scan`, as a pickle, a torch file, an `.npy`, an
//! `.npz`, a `.keras`, a GGUF, a safetensors file, a DCP index or `.distcp`
//! file, or a file with no extension (`tensorscope_fuzz::scan`).

#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

static DIR: LazyLock<PathBuf> = LazyLock::new(|| tensorscope_fuzz::scratch("scan"));

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tensorscope_fuzz::scan(&DIR, data);
});
