//! The NumPy `.npy` header: magic, version, and the dict literal
//! `{'descr': …, 'fortran_order': False, 'shape': (…), }` padded with spaces
//! and a newline so the data starts at a multiple of 64 bytes. Version 1.0
//! (2-byte header length) when the header fits 65535 bytes, else 2.0
//! (4-byte length), as `numpy.lib.format` does.
//!
//! Also the data of the dtypes numpy has no type for, converted on the way
//! (`write_converted`); the others are copied as they are.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{CHUNK_ELEMENTS, Encoding, ExportOptions, TensorView};
use crate::dtype::Dtype;
use crate::dtype::decode::{code_at, decode_f32};
use crate::fsio::write_chunk;
use crate::jobs::{CancelToken, Progress};

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The data type of the exported array (numpy's `descr`), and whether the
/// tensor's bytes are copied as they are (`true`) or decoded/unpacked.
///
/// Native numpy dtypes keep their type; BF16, the F8s, F6s and F4 become
/// float32 values, or with [`Encoding::RawCodes`] their codes (BF16 as
/// uint16, the others as one uint8 per element).
pub fn descr(dtype: Dtype, encoding: Encoding) -> (&'static str, bool) {
    let raw = encoding == Encoding::RawCodes;
    match dtype {
        Dtype::Bool => ("|b1", false),
        Dtype::U8 => ("|u1", true),
        Dtype::I8 => ("|i1", true),
        Dtype::U16 => ("<u2", true),
        Dtype::I16 => ("<i2", true),
        Dtype::U32 => ("<u4", true),
        Dtype::I32 => ("<i4", true),
        Dtype::U64 => ("<u8", true),
        Dtype::I64 => ("<i8", true),
        Dtype::F16 => ("<f2", true),
        Dtype::F32 => ("<f4", true),
        Dtype::F64 => ("<f8", true),
        Dtype::C64 => ("<c8", true),
        Dtype::BF16 if raw => ("<u2", true),
        Dtype::F8E5M2 | Dtype::F8E4M3 | Dtype::F8E8M0 | Dtype::F8E4M3Fnuz | Dtype::F8E5M2Fnuz
            if raw =>
        {
            ("|u1", true)
        }
        Dtype::F4 | Dtype::F6E2M3 | Dtype::F6E3M2 if raw => ("|u1", false),
        Dtype::BF16
        | Dtype::F8E5M2
        | Dtype::F8E4M3
        | Dtype::F8E8M0
        | Dtype::F8E4M3Fnuz
        | Dtype::F8E5M2Fnuz
        | Dtype::F4
        | Dtype::F6E2M3
        | Dtype::F6E3M2 => ("<f4", false),
    }
}

/// The complete header (magic through the newline) and its version.
pub fn header(descr: &str, shape: &[u64]) -> (Vec<u8>, (u8, u8)) {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (");
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            dict.push_str(", ");
        }
        let _ = write!(dict, "{d}");
    }
    if shape.len() == 1 {
        dict.push(',');
    }
    dict.push_str("), }");
    for (version, len_bytes) in [((1u8, 0u8), 2usize), ((2, 0), 4)] {
        let prefix = MAGIC.len() + 2 + len_bytes;
        // The dict, spaces, then '\n', ending on a multiple of 64.
        let total = (prefix + dict.len() + 1).next_multiple_of(64);
        let header_len = total - prefix;
        if len_bytes == 2 && header_len > usize::from(u16::MAX) {
            continue;
        }
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[version.0, version.1]);
        if len_bytes == 2 {
            out.extend_from_slice(&(header_len as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header_len as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out.resize(total - 1, b' ');
        out.push(b'\n');
        return (out, version);
    }
    // A shape has at most as many dims as the 100 MB safetensors header can
    // hold, so version 2.0's 4-byte length always fits.
    (Vec::new(), (2, 0))
}

/// The `.npy` data of dtypes that are not copied: BOOL normalised to 0/1,
/// small floats and BF16 as float32, F4/F6 codes unpacked to bytes.
pub(super) fn write_converted(
    w: &mut dyn Write,
    view: TensorView<'_>,
    opts: &ExportOptions,
    elements: u64,
    cancel: &CancelToken,
    progress: &Progress,
) -> io::Result<()> {
    let bytes_per_element = f64::from(view.dtype.bits()) / 8.0;
    let mut values = vec![0f32; CHUNK_ELEMENTS];
    let mut out: Vec<u8> = Vec::with_capacity(CHUNK_ELEMENTS * 4);
    let mut first = 0u64;
    while first < elements {
        let n = (elements - first).min(CHUNK_ELEMENTS as u64) as usize;
        out.clear();
        match (view.dtype, opts.encoding) {
            (Dtype::Bool, _) => {
                let start = first as usize;
                let chunk = view.bytes.get(start..start + n).unwrap_or_default();
                out.extend(chunk.iter().map(|&b| u8::from(b != 0)));
            }
            (_, Encoding::RawCodes) => {
                // F4 and F6: one code per byte.
                out.extend((first..first + n as u64).map(|i| {
                    code_at(view.dtype, view.bytes, i, opts.bit_order).unwrap_or(0) as u8
                }));
            }
            _ => {
                let got = decode_f32(
                    view.dtype,
                    view.bytes,
                    first,
                    &mut values[..n],
                    opts.bit_order,
                )
                .unwrap_or(0);
                for v in &values[..got] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        if out.is_empty() {
            // The size was checked, so this cannot happen; never loop forever.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the tensor's bytes end early",
            ));
        }
        // Progress counts source bytes, as the copied dtypes do.
        let work = (n as f64 * bytes_per_element) as u64;
        write_chunk(w, &out, work, cancel, progress)?;
        first += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_match_numpy() {
        // numpy.lib.format.write_array_header_1_0 output for these arrays.
        let (h, v) = header("<f4", &[2, 3]);
        assert_eq!(v, (1, 0));
        assert_eq!(h.len(), 128);
        let text = std::str::from_utf8(&h[10..]).expect("ascii");
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(text.ends_with(" \n"));
        let (h, _) = header("|b1", &[]);
        assert!(
            std::str::from_utf8(&h[10..])
                .expect("ascii")
                .contains("'shape': (), }")
        );
        let (h, _) = header("<u2", &[7]);
        assert!(
            std::str::from_utf8(&h[10..])
                .expect("ascii")
                .contains("'shape': (7,), }")
        );
        let (h, v) = header("<f4", &vec![1; 30_000]);
        assert_eq!(v, (2, 0));
        assert_eq!(h.len() % 64, 0);
        let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
        assert_eq!(len + 12, h.len());
    }
}
