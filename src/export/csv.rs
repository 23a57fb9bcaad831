//! Text of one element for `.csv` export: integers exact, floats in the
//! shortest form that reads back to the same value (`1.5`, `1e-7`,
//! `-0.0`, `nan`, `inf`, `-inf`), complex numbers as `re+imj` (numpy's and
//! Python's complex syntax), booleans as 0/1; and the rows of a whole
//! tensor, streamed ([`write_csv`]).

use std::fmt::Write as _;
use std::io::{self, Write};

use half::{bf16, f16};

use super::{CHUNK_ELEMENTS, Encoding, ExportOptions, TensorView};
use crate::dtype::Dtype;
use crate::dtype::decode::{code_at, code_table_f32};
use crate::fsio::write_chunk;
use crate::jobs::{CancelToken, Progress};

/// Appends the text of the element whose raw code is `code` (as
/// [`crate::dtype::decode::code_at`] returns it).
pub fn push_element(out: &mut String, dtype: Dtype, code: u64, encoding: Encoding) {
    let raw = encoding == Encoding::RawCodes;
    match dtype {
        Dtype::Bool => out.push(if code == 0 { '0' } else { '1' }),
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => {
            let _ = write!(out, "{code}");
        }
        // The casts reinterpret exactly the element's bits (code_at fills
        // no higher bits).
        Dtype::I8 => {
            let _ = write!(out, "{}", code as u8 as i8);
        }
        Dtype::I16 => {
            let _ = write!(out, "{}", code as u16 as i16);
        }
        Dtype::I32 => {
            let _ = write!(out, "{}", code as u32 as i32);
        }
        Dtype::I64 => {
            let _ = write!(out, "{}", code as i64);
        }
        Dtype::F16 => push_f32(out, f16::from_bits(code as u16).to_f32()),
        Dtype::BF16 if raw => {
            let _ = write!(out, "{code}");
        }
        Dtype::BF16 => push_f32(out, bf16::from_bits(code as u16).to_f32()),
        Dtype::F32 => push_f32(out, f32::from_bits(code as u32)),
        Dtype::F64 => push_f64(out, f64::from_bits(code)),
        Dtype::C64 => {
            let re = f32::from_bits(code as u32);
            let im = f32::from_bits((code >> 32) as u32);
            push_f32(out, re);
            if !im.is_sign_negative() || im.is_nan() {
                out.push('+');
            }
            push_f32(out, im);
            out.push('j');
        }
        Dtype::F4
        | Dtype::F6E2M3
        | Dtype::F6E3M2
        | Dtype::F8E5M2
        | Dtype::F8E4M3
        | Dtype::F8E8M0
        | Dtype::F8E4M3Fnuz
        | Dtype::F8E5M2Fnuz => {
            let value = code_table_f32(dtype)
                .and_then(|t| t.get(usize::try_from(code).ok()?).copied())
                .filter(|_| !raw);
            match value {
                Some(v) => push_f32(out, v),
                None => {
                    let _ = write!(out, "{code}");
                }
            }
        }
    }
}

fn push_f32(out: &mut String, v: f32) {
    if v.is_nan() {
        // Python and numpy read "nan" whatever the sign.
        out.push_str("nan");
    } else {
        // Debug is the shortest round-trip form, with an exponent for very
        // large or small magnitudes (Display would print 40 digits).
        let _ = write!(out, "{v:?}");
    }
}

fn push_f64(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("nan");
    } else {
        let _ = write!(out, "{v:?}");
    }
}

/// The `.csv` text of a tensor: one row per index of the first axis,
/// written a chunk of elements at a time.
pub(super) fn write_csv(
    w: &mut dyn Write,
    view: TensorView<'_>,
    opts: &ExportOptions,
    elements: u64,
    cancel: &CancelToken,
    progress: &Progress,
) -> io::Result<()> {
    // With no elements there is nothing to write (not even the empty rows
    // of a [n, 0] tensor: n may be 2^63). Otherwise every dimension is at
    // least 1 and the row length is at most the element count.
    if elements == 0 {
        return Ok(());
    }
    let row_len: u64 = view
        .shape
        .get(1..)
        .unwrap_or_default()
        .iter()
        .fold(1u64, |a, &d| a.saturating_mul(d))
        .max(1);
    // One chunk of text per CHUNK_ELEMENTS elements (at most ~25 bytes
    // each), written and counted as elements done.
    let mut text = String::with_capacity(1 << 20);
    let mut first = 0u64;
    while first < elements {
        let n = (elements - first).min(CHUNK_ELEMENTS as u64);
        text.clear();
        for i in first..first + n {
            let code = code_at(view.dtype, view.bytes, i, opts.bit_order).unwrap_or(0);
            push_element(&mut text, view.dtype, code, opts.encoding);
            text.push(if (i + 1) % row_len == 0 { '\n' } else { ',' });
        }
        write_chunk(w, text.as_bytes(), n, cancel, progress)?;
        first += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(dtype: Dtype, code: u64, encoding: Encoding) -> String {
        let mut s = String::new();
        push_element(&mut s, dtype, code, encoding);
        s
    }

    #[test]
    fn elements() {
        assert_eq!(text(Dtype::I8, 0xff, Encoding::Values), "-1");
        assert_eq!(text(Dtype::I64, u64::MAX, Encoding::Values), "-1");
        assert_eq!(
            text(Dtype::U64, u64::MAX, Encoding::Values),
            "18446744073709551615"
        );
        assert_eq!(text(Dtype::Bool, 7, Encoding::Values), "1");
        assert_eq!(text(Dtype::F32, 0x3fc0_0000, Encoding::Values), "1.5");
        assert_eq!(text(Dtype::F32, 0x7fc0_0000, Encoding::Values), "nan");
        assert_eq!(text(Dtype::F32, 0xff80_0000, Encoding::Values), "-inf");
        assert_eq!(
            text(Dtype::F64, 1e-300f64.to_bits(), Encoding::Values),
            "1e-300"
        );
        assert_eq!(text(Dtype::BF16, 0x3f80, Encoding::Values), "1.0");
        assert_eq!(text(Dtype::BF16, 0x3f80, Encoding::RawCodes), "16256");
        assert_eq!(text(Dtype::F4, 0xf, Encoding::Values), "-6.0");
        assert_eq!(text(Dtype::F4, 0xf, Encoding::RawCodes), "15");
        let c = u64::from(1.5f32.to_bits()) | (u64::from((-2.0f32).to_bits()) << 32);
        assert_eq!(text(Dtype::C64, c, Encoding::Values), "1.5-2.0j");
        let c = u64::from(0.0f32.to_bits()) | (u64::from(f32::NAN.to_bits()) << 32);
        assert_eq!(text(Dtype::C64, c, Encoding::Values), "0.0+nanj");
    }
}
