//! The `dcp` target: the input as a distributed checkpoint's `.metadata`,
//! beside the `.distcp` files of a real two-rank save, opened and, when
//! it opens, read by every verb's path (`tensorscope_fuzz::frameworks`).

#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

static DIR: LazyLock<PathBuf> = LazyLock::new(|| tensorscope_fuzz::scratch("dcp"));

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tensorscope_fuzz::frameworks(&DIR, data, ".metadata");
});
