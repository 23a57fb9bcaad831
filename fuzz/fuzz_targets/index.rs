#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::LazyLock;

static DIR: LazyLock<PathBuf> = LazyLock::new(|| tensorscope_fuzz::scratch("index"));

fuzz_target!(|data: &[u8]| {
    tensorscope_fuzz::index(&DIR, data);
});
