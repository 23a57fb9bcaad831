//! The `tensorflow` target: the input as a TensorBundle's `.index`, whose
//! every data shard is the input itself (so entries can point into bytes
//! the fuzzer controls), opened and, when it opens, every tensor of at
//! most [`DECODE_LIMIT`] bytes decoded (its CRC checked, its slices
//! assembled).
//!
//! What the target does is [`tensorflow`]; the libFuzzer entry is only in
//! the fuzz build.

#![cfg_attr(not(test), no_main)]

use tensorscope::format::decode::Data;
use tensorscope::format::tensorflow;
use tensorscope::jobs::CancelToken;

#[cfg(not(test))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tensorflow(data);
});

/// Bytes a tensor may have to be decoded.
pub const DECODE_LIMIT: u64 = 1 << 20;

/// The target: see the module's documentation.
pub fn tensorflow(data: &[u8]) {
    let _ = tensorflow::is_index(data);
    let len = data.len() as u64;
    let Ok(opened) = tensorflow::open(data, "ckpt", &|_| Ok(len)) else {
        return;
    };
    let mut files: Vec<&[u8]> = vec![data];
    files.extend(opened.files.iter().map(|_| data));
    let cancel = CancelToken::new();
    for t in &opened.tensors {
        let bytes = t.dtype.byte_len(&t.shape).unwrap_or(u64::MAX);
        if bytes > DECODE_LIMIT {
            continue;
        }
        let Data::Decoded(d) = &t.data else {
            continue;
        };
        let _ = d.ranges();
        let mut got = 0u64;
        let r = d.decode(&files, &cancel, &mut |b| {
            got += b.len() as u64;
            Ok(())
        });
        assert!(
            r.is_err() || got == bytes,
            "{}: {got} bytes of {bytes}",
            t.name
        );
    }
}
