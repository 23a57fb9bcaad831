#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::LazyLock;

static DIR: LazyLock<PathBuf> = LazyLock::new(|| tensorscope_fuzz::scratch("pytorch"));

fuzz_target!(|data: &[u8]| {
    tensorscope_fuzz::pytorch(&DIR, data);
});
