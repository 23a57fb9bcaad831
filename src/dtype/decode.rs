//! Bit-exact decoding of tensor bytes into `f64` / `f32` values.
//!
//! Everything here takes the raw little-endian bytes of one tensor (a slice of
//! the mapped file) and never panics, whatever the bytes: a slice that ends
//! inside an element simply has one element fewer. Element indices are `u64`
//! because shapes are; an index that does not fit the slice decodes nothing.
//!
//! * Real floats of 8 bits or fewer go through 2^bits-entry lookup tables
//!   computed at compile time from their bit layouts ([`code_table`]); they
//!   match `ml_dtypes` 0.6.0 code for code, sign of zero included.
//! * F16 and BF16 use `half`'s slice conversions (SIMD where the CPU has it).
//! * Everything else is `from_le_bytes` on fixed-size chunks.
//!
//! Sub-byte packing (FORMAT.md, "Sub-byte packing"):
//! * F4: element 0 is the **low** nibble of byte 0, element 1 the high nibble.
//!   This is fixed by the format (`torch.float4_e2m1fn_x2`), so
//!   [`BitOrder`] does not apply to F4.
//! * F6: the format fixes no order; [`BitOrder::LsbFirst`] (the default) and
//!   [`BitOrder::MsbFirst`] describe the two bit streams we support. Four F6
//!   elements always fill exactly three bytes.
//!
//! Streaming statistics call [`decode_f64`] (or the faster [`decode_f32`]) on
//! chunks of a fixed-size buffer, so memory use does not grow with the tensor.
//!
//! This file holds the decoders; `packing` knows where F4/F6 codes sit in
//! the bytes, `tables` the small float code tables, `display` how a raw
//! code is printed.

mod display;
mod packing;
mod tables;
#[cfg(test)]
mod tests;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

pub use display::format_code_hex;
pub use packing::BitOrder;
pub use tables::{code_table, code_table_f32};

use crate::dtype::Dtype;
use packing::{f6_code, unpack_f4, unpack_f6};
use tables::SmallTables;

/// How many whole elements of `dtype` fit in `byte_len` bytes. A trailing
/// partial element is not counted.
pub fn element_count(dtype: Dtype, byte_len: usize) -> u64 {
    let len = byte_len as u64;
    match dtype.bits() {
        4 => len.saturating_mul(2),
        // 3 bytes hold 4 elements; 1 and 2 leftover bytes hold 1 and 2 more
        // (8 bits ≥ 6, 16 bits ≥ 12 but < 18). Written this way so that no
        // multiplication of the byte length can overflow.
        6 => (len / 3).saturating_mul(4).saturating_add(len % 3),
        bits => len / u64::from(bits / 8),
    }
}

/// Whether every value of `dtype` is exactly representable as `f32`, so that
/// [`decode_f32`] accepts it. False for F64, I32, U32, I64 and U64.
pub const fn f32_is_exact(dtype: Dtype) -> bool {
    !matches!(
        dtype,
        Dtype::F64 | Dtype::I32 | Dtype::U32 | Dtype::I64 | Dtype::U64
    )
}

/// The raw code of element `index`, or `None` when the element is not wholly
/// inside `bytes`.
///
/// Sub-byte elements are unpacked (F4 low nibble first, F6 by `order`); wider
/// elements are read as little-endian unsigned integers of their width. For
/// C64 the code is the little-endian u64 of the 8 bytes: the real part's f32
/// bits in the low half, the imaginary part's in the high half.
pub fn code_at(dtype: Dtype, bytes: &[u8], index: u64, order: BitOrder) -> Option<u64> {
    if index >= element_count(dtype, bytes.len()) {
        return None;
    }
    match dtype.bits() {
        4 => {
            let byte = *bytes.get(usize::try_from(index / 2).ok()?)?;
            let nibble = if index.is_multiple_of(2) {
                byte & 0x0f
            } else {
                byte >> 4
            };
            Some(u64::from(nibble))
        }
        6 => Some(f6_code(bytes, index, order) as u64),
        bits => {
            let size = (bits / 8) as usize;
            let start = usize::try_from(index).ok()?.checked_mul(size)?;
            let element = bytes.get(start..start.checked_add(size)?)?;
            let mut word = [0u8; 8];
            word.get_mut(..size)?.copy_from_slice(element);
            Some(u64::from_le_bytes(word))
        }
    }
}

/// The value of one raw code (as [`code_at`] returns it), or `None` when the
/// code has more bits than the dtype. C64 gives its real part; BOOL gives 1.0
/// for any non-zero byte; I64/U64 beyond 2^53 round to the nearest f64.
pub fn code_to_f64(dtype: Dtype, code: u64) -> Option<f64> {
    let bits = dtype.bits();
    if bits < 64 && code >> bits != 0 {
        return None;
    }
    // The casts below keep exactly the dtype's bits: the check above proved
    // that nothing higher is set.
    Some(match dtype {
        Dtype::F4
        | Dtype::F6E2M3
        | Dtype::F6E3M2
        | Dtype::F8E5M2
        | Dtype::F8E4M3
        | Dtype::F8E8M0
        | Dtype::F8E4M3Fnuz
        | Dtype::F8E5M2Fnuz => *code_table(dtype)?.get(usize::try_from(code).ok()?)?,
        Dtype::Bool => {
            if code == 0 {
                0.0
            } else {
                1.0
            }
        }
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => code as f64,
        Dtype::I8 => f64::from(code as u8 as i8),
        Dtype::I16 => f64::from(code as u16 as i16),
        Dtype::I32 => f64::from(code as u32 as i32),
        Dtype::I64 => code as i64 as f64,
        Dtype::F16 => f16::from_bits(code as u16).to_f64(),
        Dtype::BF16 => bf16::from_bits(code as u16).to_f64(),
        Dtype::F32 | Dtype::C64 => f64::from(f32::from_bits(code as u32)),
        Dtype::F64 => f64::from_bits(code),
    })
}

/// The value of element `index` (C64: its real part), or `None` when the
/// element is not wholly inside `bytes`. For many elements use [`decode_f64`].
pub fn decode_one_f64(dtype: Dtype, bytes: &[u8], index: u64, order: BitOrder) -> Option<f64> {
    code_to_f64(dtype, code_at(dtype, bytes, index, order)?)
}

/// Decodes elements `first..first + out.len()` of a tensor of `dtype` whose
/// bytes are `bytes` into `out`, and returns how many were written: fewer than
/// `out.len()` when the slice ends first (decoding stops at the last whole
/// element), 0 when `first` is past the end.
///
/// Every dtype decodes: integers as f64 (I64/U64 beyond 2^53 round to the
/// nearest f64), BOOL as 1.0 for any non-zero byte and 0.0 otherwise. **C64
/// writes its real parts only**, to stay consistent with [`decode_one_f64`];
/// use [`decode_c64`] for both parts. `order` matters only for F6.
pub fn decode_f64(
    dtype: Dtype,
    bytes: &[u8],
    first: u64,
    out: &mut [f64],
    order: BitOrder,
) -> usize {
    match dtype {
        Dtype::F64 => map_le(bytes, first, out, |c: &[u8; 8]| f64::from_le_bytes(*c)),
        Dtype::I32 => map_le(bytes, first, out, |c: &[u8; 4]| {
            f64::from(i32::from_le_bytes(*c))
        }),
        Dtype::U32 => map_le(bytes, first, out, |c: &[u8; 4]| {
            f64::from(u32::from_le_bytes(*c))
        }),
        Dtype::I64 => map_le(bytes, first, out, |c: &[u8; 8]| {
            i64::from_le_bytes(*c) as f64
        }),
        Dtype::U64 => map_le(bytes, first, out, |c: &[u8; 8]| {
            u64::from_le_bytes(*c) as f64
        }),
        // Every remaining dtype is exact in f32, hence in f64.
        _ => decode_exact(dtype, bytes, first, out, order).unwrap_or(0),
    }
}

/// Like [`decode_f64`] but into `f32`, for the dtypes where that is exact
/// (see [`f32_is_exact`]): about twice the values per cache line for the
/// statistics and the heatmap. Returns `None`, writing nothing, for F64, I32,
/// U32, I64 and U64, whose values f32 would round. C64 writes its real parts;
/// see [`decode_c64_f32`].
pub fn decode_f32(
    dtype: Dtype,
    bytes: &[u8],
    first: u64,
    out: &mut [f32],
    order: BitOrder,
) -> Option<usize> {
    decode_exact(dtype, bytes, first, out, order)
}

/// Decodes complex elements `first..` of a C64 tensor into real and imaginary
/// parts; writes `min(re.len(), im.len())` elements at most and returns how
/// many it wrote.
pub fn decode_c64(bytes: &[u8], first: u64, re: &mut [f64], im: &mut [f64]) -> usize {
    decode_pairs(bytes, first, re, im, f64::from)
}

/// [`decode_c64`] in f32, which is exact: C64 parts are f32.
pub fn decode_c64_f32(bytes: &[u8], first: u64, re: &mut [f32], im: &mut [f32]) -> usize {
    decode_pairs(bytes, first, re, im, |v| v)
}

/// An output element type that holds every value of the f32-exact dtypes.
trait Lane: Copy + Default + 'static {
    /// The small float tables in this type.
    fn tables() -> &'static SmallTables<Self>;
    /// Widens an f32 (exactly).
    fn from_f32(value: f32) -> Self;
    /// Converts F16 values with `half`'s slice routine; `src` and `dst` have
    /// the same length.
    fn from_f16s(src: &[f16], dst: &mut [Self]);
    /// Converts BF16 values as `from_f16s` does F16 ones (exact).
    fn from_bf16s(src: &[bf16], dst: &mut [Self]);
}

impl Lane for f64 {
    fn tables() -> &'static SmallTables<f64> {
        &tables::TABLES_F64
    }
    fn from_f32(value: f32) -> f64 {
        f64::from(value)
    }
    fn from_f16s(src: &[f16], dst: &mut [f64]) {
        src.convert_to_f64_slice(dst);
    }
    fn from_bf16s(src: &[bf16], dst: &mut [f64]) {
        src.convert_to_f64_slice(dst);
    }
}

impl Lane for f32 {
    fn tables() -> &'static SmallTables<f32> {
        &tables::TABLES_F32
    }
    fn from_f32(value: f32) -> f32 {
        value
    }
    fn from_f16s(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn from_bf16s(src: &[bf16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
}

/// The shared decoder of every f32-exact dtype (`None` for the others).
fn decode_exact<T: Lane>(
    dtype: Dtype,
    bytes: &[u8],
    first: u64,
    out: &mut [T],
    order: BitOrder,
) -> Option<usize> {
    let t = T::tables();
    let lookup = |table: &'static [T; 256]| move |&[b]: &[u8; 1]| table[usize::from(b)];
    Some(match dtype {
        Dtype::F4 => unpack_f4(&t.f4, bytes, first, out),
        Dtype::F6E2M3 => unpack_f6(&t.f6_e2m3, bytes, first, out, order),
        Dtype::F6E3M2 => unpack_f6(&t.f6_e3m2, bytes, first, out, order),
        Dtype::F8E5M2 => map_le(bytes, first, out, lookup(&t.f8_e5m2)),
        Dtype::F8E4M3 => map_le(bytes, first, out, lookup(&t.f8_e4m3)),
        Dtype::F8E8M0 => map_le(bytes, first, out, lookup(&t.f8_e8m0)),
        Dtype::F8E4M3Fnuz => map_le(bytes, first, out, lookup(&t.f8_e4m3fnuz)),
        Dtype::F8E5M2Fnuz => map_le(bytes, first, out, lookup(&t.f8_e5m2fnuz)),
        Dtype::Bool => map_le(bytes, first, out, |&[b]: &[u8; 1]| {
            T::from_f32(if b == 0 { 0.0 } else { 1.0 })
        }),
        Dtype::U8 => map_le(bytes, first, out, |&[b]: &[u8; 1]| {
            T::from_f32(f32::from(b))
        }),
        Dtype::I8 => map_le(bytes, first, out, |&[b]: &[u8; 1]| {
            T::from_f32(f32::from(b as i8))
        }),
        Dtype::U16 => map_le(bytes, first, out, |c: &[u8; 2]| {
            T::from_f32(f32::from(u16::from_le_bytes(*c)))
        }),
        Dtype::I16 => map_le(bytes, first, out, |c: &[u8; 2]| {
            T::from_f32(f32::from(i16::from_le_bytes(*c)))
        }),
        Dtype::F16 => halves(bytes, first, out, f16::from_bits, T::from_f16s),
        Dtype::BF16 => halves(bytes, first, out, bf16::from_bits, T::from_bf16s),
        Dtype::F32 => map_le(bytes, first, out, |c: &[u8; 4]| {
            T::from_f32(f32::from_le_bytes(*c))
        }),
        Dtype::C64 => map_le(bytes, first, out, |&[r0, r1, r2, r3, ..]: &[u8; 8]| {
            T::from_f32(f32::from_le_bytes([r0, r1, r2, r3]))
        }),
        Dtype::F64 | Dtype::I32 | Dtype::U32 | Dtype::I64 | Dtype::U64 => return None,
    })
}

/// The whole `N`-byte elements from element `first` on, or `None` when
/// `first` is past the end.
fn elements<const N: usize>(bytes: &[u8], first: u64) -> Option<&[[u8; N]]> {
    let start = usize::try_from(first).ok()?.checked_mul(N)?;
    Some(bytes.get(start..)?.as_chunks::<N>().0)
}

/// Decodes byte-aligned elements of `N` bytes one by one through `decode`.
fn map_le<const N: usize, T>(
    bytes: &[u8],
    first: u64,
    out: &mut [T],
    decode: impl Fn(&[u8; N]) -> T,
) -> usize {
    let Some(src) = elements::<N>(bytes, first) else {
        return 0;
    };
    for (slot, element) in out.iter_mut().zip(src) {
        *slot = decode(element);
    }
    src.len().min(out.len())
}

/// Values per call of `half`'s slice conversion: big enough for its SIMD path
/// to pay off, small enough to live on the stack.
const HALF_BATCH: usize = 256;

/// Decodes F16 or BF16: the bytes may be unaligned, so each batch is first
/// gathered into an aligned stack buffer of `H`, then converted in one call.
fn halves<T: Lane, H: Copy + Default>(
    bytes: &[u8],
    first: u64,
    out: &mut [T],
    from_bits: fn(u16) -> H,
    convert: fn(&[H], &mut [T]),
) -> usize {
    let Some(src) = elements::<2>(bytes, first) else {
        return 0;
    };
    let n = src.len().min(out.len());
    let mut buffer = [H::default(); HALF_BATCH];
    // Both sides have n elements and are cut at the same batch size, so every
    // pair of chunks has equal lengths, as `convert` requires.
    for (dst, batch) in out[..n]
        .chunks_mut(HALF_BATCH)
        .zip(src[..n].chunks(HALF_BATCH))
    {
        for (h, element) in buffer.iter_mut().zip(batch) {
            *h = from_bits(u16::from_le_bytes(*element));
        }
        convert(&buffer[..batch.len()], dst);
    }
    n
}

/// Decodes C64 into two part slices.
fn decode_pairs<T>(
    bytes: &[u8],
    first: u64,
    re: &mut [T],
    im: &mut [T],
    widen: impl Fn(f32) -> T,
) -> usize {
    let Some(src) = elements::<8>(bytes, first) else {
        return 0;
    };
    for ((real, imag), &[r0, r1, r2, r3, i0, i1, i2, i3]) in
        re.iter_mut().zip(im.iter_mut()).zip(src)
    {
        *real = widen(f32::from_le_bytes([r0, r1, r2, r3]));
        *imag = widen(f32::from_le_bytes([i0, i1, i2, i3]));
    }
    src.len().min(re.len()).min(im.len())
}
