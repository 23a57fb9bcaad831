//! The `flax` target: the input through the Flax msgpack reader, and, when
//! it opens, every tensor of at most [`TENSOR_LIMIT`] bytes read (a plain
//! range sliced from the input, a chunked array decoded), its length
//! checked against its dtype and shape.
//!
//! What the target does is [`flax`] (this file may be a module of a test
//! that replays seeds; the libFuzzer entry is only in the fuzz build).

#![cfg_attr(not(test), no_main)]

use tensorscope::format::decode::Data;
use tensorscope::format::flax;
use tensorscope::jobs::CancelToken;

#[cfg(not(test))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    flax(data);
});

/// Tensors of more bytes than this are listed but not read.
pub const TENSOR_LIMIT: u64 = 1 << 20;

/// The target: see the module's documentation.
///
/// # Panics
///
/// When a tensor that opened reads to a length other than its shape's.
pub fn flax(data: &[u8]) {
    let _ = flax::looks_like(data);
    let Ok(opened) = flax::open(data) else {
        return;
    };
    let cancel = CancelToken::new();
    for t in &opened.tensors {
        let Some(nbytes) = t.dtype.byte_len(&t.shape) else {
            continue;
        };
        if nbytes > TENSOR_LIMIT {
            continue;
        }
        let read = match &t.data {
            Data::Plain { range, .. } => usize::try_from(range.start)
                .ok()
                .zip(usize::try_from(range.end).ok())
                .and_then(|(s, e)| data.get(s..e))
                .map(|b| b.len() as u64),
            Data::Decoded(d) => {
                let _ = d.ranges();
                let mut len = 0u64;
                d.decode(&[data], &cancel, &mut |b| {
                    len += b.len() as u64;
                    Ok(())
                })
                .ok()
                .map(|()| len)
            }
        };
        assert_eq!(read, Some(nbytes), "tensor {:?}", t.name);
    }
}
