//! Display formatting of raw codes, shared by the CLI, the CSV export and
//! the GUI's tables so that every face prints a code the same way.

use crate::dtype::Dtype;

/// A raw code in hex, zero-padded to the dtype's width: `0x7f` for an 8-bit
/// code, `0xa` for F4, `0x3c00` for F16.
pub fn format_code_hex(dtype: Dtype, code: u64) -> String {
    let digits = dtype.bits().div_ceil(4) as usize;
    format!("{code:#0width$x}", width = digits + 2)
}
