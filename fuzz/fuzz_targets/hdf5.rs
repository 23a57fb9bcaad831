//! The `hdf5` target: the input through the HDF5 reader (as a whole file,
//! and as the `model.weights.h5` member a `.keras` archive hands over),
//! then every tensor it lists read back: a plain range checked against
//! the input, a decoded one streamed to its end, for tensors of at most
//! [`DECODE_LIMIT`] bytes.
//!
//! What the target does is [`hdf5`] (this file can be a module of
//! `tests/it/fuzz_regressions.rs`; the libFuzzer entry is only in the
//! fuzz build).

#![cfg_attr(not(test), no_main)]

use tensorscope::format::decode::Data;
use tensorscope::format::hdf5;
use tensorscope::jobs::CancelToken;

#[cfg(not(test))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hdf5(data);
});

/// Tensors larger than this (bytes) are listed but not decoded.
pub const DECODE_LIMIT: u64 = 1 << 20;

/// The target: see the module's documentation.
///
/// # Panics
///
/// When a plain range lies past the input or is not the tensor's size,
/// or a decoded tensor streams another number of bytes than its shape
/// holds: a bug of the reader.
pub fn hdf5(data: &[u8]) {
    let _ = hdf5::find_superblock(data);
    let Ok(opened) = hdf5::open(data) else {
        return;
    };
    let cancel = CancelToken::new();
    for t in &opened.tensors {
        let bytes = t.dtype.byte_len(&t.shape).unwrap_or(u64::MAX);
        if bytes > DECODE_LIMIT {
            continue;
        }
        match &t.data {
            Data::Plain { range, .. } => {
                assert!(
                    range.end <= data.len() as u64,
                    "a plain range past the input"
                );
                assert_eq!(
                    range.end - range.start,
                    bytes,
                    "a plain range of another size"
                );
            }
            Data::Decoded(d) => {
                let _ = d.ranges();
                let mut total = 0u64;
                let done = d.decode(&[data], &cancel, &mut |b| {
                    total += b.len() as u64;
                    Ok(())
                });
                if done.is_ok() {
                    assert_eq!(total, bytes, "a decoded tensor of another size");
                }
            }
        }
    }
}
