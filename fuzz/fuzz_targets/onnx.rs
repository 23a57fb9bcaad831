//! The `onnx` target: the input as an ONNX model through the ONNX reader,
//! every external file it names standing for 4 KiB of patterned bytes,
//! and, when it opens, every tensor of at most 1 MiB read: its plain range
//! checked against its file, its decoder run to the end.
//!
//! What the target does is [`onnx`] (the libFuzzer entry is only in the
//! fuzz build).

#![cfg_attr(not(test), no_main)]

use tensorscope::format::decode::Data;
use tensorscope::format::onnx;
use tensorscope::jobs::CancelToken;

#[cfg(not(test))]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    onnx(data);
});

/// Bytes of each external file the model names.
pub const EXTERNAL_LEN: usize = 4096;

/// Tensors larger than this are not read.
pub const READ_LIMIT: u64 = 1 << 20;

/// The target: see the module's documentation.
pub fn onnx(data: &[u8]) {
    let external: Vec<u8> = (0..EXTERNAL_LEN)
        .map(|i| u8::try_from(i * 31 % 251).unwrap_or(0))
        .collect();
    let size = |location: &str| {
        assert!(
            onnx::location_is_inside(location).is_ok(),
            "a size is asked only for a location inside"
        );
        if location.starts_with("missing") {
            Err(std::io::Error::new(std::io::ErrorKind::NotFound, "missing"))
        } else {
            Ok(EXTERNAL_LEN as u64)
        }
    };
    let Ok(opened) = onnx::open(data, &size) else {
        return;
    };
    let mut files: Vec<&[u8]> = vec![data];
    files.extend(opened.files.iter().map(|_| external.as_slice()));
    let cancel = CancelToken::new();
    for t in &opened.tensors {
        let Some(len) = t.dtype.byte_len(&t.shape) else {
            panic!("an opened tensor's size fits in u64");
        };
        if len > READ_LIMIT {
            continue;
        }
        match &t.data {
            Data::Plain { file, range, .. } => {
                let bytes = files.get(*file).expect("a plain tensor's file exists");
                assert_eq!(range.end - range.start, len);
                assert!(range.end <= bytes.len() as u64);
            }
            Data::Decoded(d) => {
                let _ = d.ranges();
                let mut got = 0u64;
                if d.decode(&files, &cancel, &mut |b| {
                    got += b.len() as u64;
                    Ok(())
                })
                .is_ok()
                {
                    assert_eq!(got, len, "a decoded tensor is exactly its size");
                }
            }
        }
    }
}
