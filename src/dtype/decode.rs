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

mod tables;

use std::fmt;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

pub use tables::{code_table, code_table_f32};

use crate::dtype::Dtype;
use tables::SmallTables;

/// Bit order of packed six-bit (F6) elements. F4 ignores it: its nibble order
/// is fixed (low nibble first).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum BitOrder {
    /// Little-endian bit stream: element k occupies bits 6k‥6k+5 counting from
    /// bit 0 (the least significant) of byte 0, and the element's bit 0 is the
    /// lowest of those stream bits. The same rule gives F4 its low-nibble-first
    /// order, which is why it is Tensorscope's default.
    #[default]
    LsbFirst,
    /// Big-endian bit stream: element k occupies stream bits 6k‥6k+5 counting
    /// from the most significant bit of byte 0, the element's most significant
    /// bit first.
    MsbFirst,
}

impl BitOrder {
    /// Both orders, default first (for pickers in the UI and CLI).
    pub const ALL: [BitOrder; 2] = [BitOrder::LsbFirst, BitOrder::MsbFirst];
}

impl fmt::Display for BitOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BitOrder::LsbFirst => "LSB first",
            BitOrder::MsbFirst => "MSB first",
        })
    }
}

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

/// A raw code in hex, zero-padded to the dtype's width: `0x7f` for an 8-bit
/// code, `0xa` for F4, `0x3c00` for F16.
pub fn format_code_hex(dtype: Dtype, code: u64) -> String {
    let digits = dtype.bits().div_ceil(4) as usize;
    format!("{code:#0width$x}", width = digits + 2)
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
    /// Converts BF16 values likewise.
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

/// Decodes F4 elements, low nibble first.
fn unpack_f4<T: Copy>(table: &[T; 16], bytes: &[u8], first: u64, out: &mut [T]) -> usize {
    let Some(src) = usize::try_from(first / 2)
        .ok()
        .and_then(|start| bytes.get(start..))
    else {
        return 0;
    };
    // An odd `first` starts in the high nibble: peel that element off so the
    // loop below works on whole bytes.
    let (src, out, head) = if first % 2 == 1 {
        let (Some((&byte, src_rest)), Some((slot, out_rest))) =
            (src.split_first(), out.split_first_mut())
        else {
            return 0;
        };
        *slot = table[usize::from(byte >> 4)];
        (src_rest, out_rest, 1)
    } else {
        (src, out, 0)
    };
    let (pairs, tail) = out.as_chunks_mut::<2>();
    for (pair, &byte) in pairs.iter_mut().zip(src) {
        *pair = [
            table[usize::from(byte & 0x0f)],
            table[usize::from(byte >> 4)],
        ];
    }
    let whole = pairs.len().min(src.len());
    let mut written = head + 2 * whole;
    if let ([slot], Some(&byte)) = (tail, src.get(whole))
        && whole == pairs.len()
    {
        *slot = table[usize::from(byte & 0x0f)];
        written += 1;
    }
    written
}

/// The 24 bits of one F6 group (four elements in three bytes) as an integer
/// whose 6-bit fields are the elements; bytes past the end of the slice read
/// as zero, which only matters for elements the caller knows are incomplete.
fn f6_word(group: [u8; 3], order: BitOrder) -> u32 {
    let [a, b, c] = group.map(u32::from);
    match order {
        BitOrder::LsbFirst => a | b << 8 | c << 16,
        BitOrder::MsbFirst => a << 16 | b << 8 | c,
    }
}

/// Element `k` (0‥3) of a group word.
fn f6_field(word: u32, k: usize, order: BitOrder) -> usize {
    let shift = match order {
        BitOrder::LsbFirst => 6 * k,
        BitOrder::MsbFirst => 18 - 6 * k,
    };
    ((word >> shift) & 0x3f) as usize
}

/// The code of F6 element `index`, reading missing bytes as zero. Callers
/// check first that the element is wholly present.
fn f6_code(bytes: &[u8], index: u64, order: BitOrder) -> usize {
    let start = usize::try_from(index / 4)
        .ok()
        .and_then(|group| group.checked_mul(3))
        .unwrap_or(usize::MAX);
    let byte = |offset: usize| {
        start
            .checked_add(offset)
            .and_then(|i| bytes.get(i))
            .copied()
            .unwrap_or(0)
    };
    let word = f6_word([byte(0), byte(1), byte(2)], order);
    f6_field(word, (index % 4) as usize, order)
}

/// Decodes F6 elements: a partial group at each end element by element, the
/// whole groups between them three bytes at a time.
fn unpack_f6<T: Copy>(
    table: &[T; 64],
    bytes: &[u8],
    first: u64,
    out: &mut [T],
    order: BitOrder,
) -> usize {
    let available = element_count(Dtype::F6E2M3, bytes.len()).saturating_sub(first);
    let n = usize::try_from(available).map_or(out.len(), |a| a.min(out.len()));
    let out = &mut out[..n];

    let head_len = (((4 - first % 4) % 4) as usize).min(n);
    let (head, body) = out.split_at_mut(head_len);
    for (slot, index) in head.iter_mut().zip(first..) {
        *slot = table[f6_code(bytes, index, order)];
    }

    // `first + head_len` is a multiple of 4 here (or the body is empty).
    let group_start = first
        .checked_add(head_len as u64)
        .and_then(|i| usize::try_from(i / 4).ok())
        .and_then(|g| g.checked_mul(3))
        .unwrap_or(usize::MAX);
    let groups = bytes
        .get(group_start..)
        .unwrap_or_default()
        .as_chunks::<3>()
        .0;
    let (quads, tail) = body.as_chunks_mut::<4>();
    for (quad, &group) in quads.iter_mut().zip(groups) {
        let word = f6_word(group, order);
        *quad = [0, 1, 2, 3].map(|k| table[f6_field(word, k, order)]);
    }

    // At most 2 elements of a partial group remain, so every whole quad of
    // `out` had a whole group of bytes; the tail is what is left.
    let tail_first = first + head_len as u64 + 4 * quads.len() as u64;
    for (slot, index) in tail.iter_mut().zip(tail_first..) {
        *slot = table[f6_code(bytes, index, order)];
    }
    n
}

#[cfg(test)]
mod tests {
    use super::tables::reference::{self, same};
    use super::*;

    /// Packs codes into a bit stream, bit by bit: an implementation
    /// independent of the decoder's word arithmetic.
    fn pack(codes: &[u64], bits: u32, order: BitOrder) -> Vec<u8> {
        let total_bits = codes.len() * bits as usize;
        let mut out = vec![0u8; total_bits.div_ceil(8)];
        for (k, &code) in codes.iter().enumerate() {
            for j in 0..bits as usize {
                let stream_bit = k * bits as usize + j;
                match order {
                    BitOrder::LsbFirst => {
                        if code >> j & 1 == 1 {
                            out[stream_bit / 8] |= 1 << (stream_bit % 8);
                        }
                    }
                    BitOrder::MsbFirst => {
                        if code >> (bits as usize - 1 - j) & 1 == 1 {
                            out[stream_bit / 8] |= 0x80 >> (stream_bit % 8);
                        }
                    }
                }
            }
        }
        out
    }

    /// Every code of `dtype` in order, as tensor bytes.
    fn all_codes(dtype: Dtype, order: BitOrder) -> Vec<u8> {
        let count = 1u64 << dtype.bits();
        match dtype.bits() {
            4 | 6 => pack(&(0..count).collect::<Vec<_>>(), dtype.bits(), order),
            8 => (0..=255).collect(),
            16 => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
            _ => unreachable!(),
        }
    }

    /// Deterministic pseudo-random bytes (xorshift64).
    fn noise(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    }

    fn assert_same(dtype: Dtype, what: &str, code: usize, got: f64, want: f64) {
        assert!(
            same(got, want),
            "{dtype} {what} code {code:#x}: got {got:e} ({:#018x}), ml_dtypes {want:e} ({:#018x})",
            got.to_bits(),
            want.to_bits()
        );
    }

    #[test]
    fn every_code_of_every_reference_dtype_decodes_bit_exactly() {
        for dtype in reference::DTYPES {
            let expected = reference::values(dtype);
            let orders: &[BitOrder] = if dtype.bits() == 6 {
                &BitOrder::ALL
            } else {
                &[BitOrder::LsbFirst]
            };
            for &order in orders {
                let bytes = all_codes(dtype, order);
                let mut out64 = vec![f64::NAN; expected.len()];
                let mut out32 = vec![f32::NAN; expected.len()];
                assert_eq!(
                    decode_f64(dtype, &bytes, 0, &mut out64, order),
                    expected.len()
                );
                assert_eq!(
                    decode_f32(dtype, &bytes, 0, &mut out32, order),
                    Some(expected.len())
                );
                for (code, &want) in expected.iter().enumerate() {
                    assert_same(dtype, "decode_f64", code, out64[code], want);
                    assert_same(dtype, "decode_f32", code, f64::from(out32[code]), want);
                    let one = decode_one_f64(dtype, &bytes, code as u64, order)
                        .expect("element is present");
                    assert_same(dtype, "decode_one_f64", code, one, want);
                    assert_eq!(
                        code_at(dtype, &bytes, code as u64, order),
                        Some(code as u64)
                    );
                }
            }
        }
    }

    #[test]
    fn f4_puts_element_zero_in_the_low_nibble() {
        // 0x21: low nibble 1 (0.5), high nibble 2 (1.0); 0xf8: −0, −6.
        let bytes = [0x21, 0xf8];
        let mut out = [0.0; 4];
        assert_eq!(
            decode_f64(Dtype::F4, &bytes, 0, &mut out, BitOrder::MsbFirst),
            4
        );
        assert_eq!(
            out.map(f64::to_bits),
            [0.5, 1.0, -0.0, -6.0].map(f64::to_bits)
        );
        assert_eq!(code_at(Dtype::F4, &bytes, 0, BitOrder::LsbFirst), Some(1));
        assert_eq!(code_at(Dtype::F4, &bytes, 1, BitOrder::LsbFirst), Some(2));
        assert_eq!(code_at(Dtype::F4, &bytes, 4, BitOrder::LsbFirst), None);
    }

    #[test]
    fn f6_packs_four_elements_into_three_bytes_in_both_orders() {
        // Codes 1, 2, 3, 0x3f = 0.125, 0.25, 0.375, −7.5 in F6_E2M3.
        // LSB first: word = 1 | 2<<6 | 3<<12 | 0x3f<<18 = 0xfc3081, stored
        // little-endian. MSB first: 000001 000010 000011 111111.
        let lsb = [0x81, 0x30, 0xfc];
        let msb = [0x04, 0x20, 0xff];
        let want = [0.125, 0.25, 0.375, -7.5];
        for (bytes, order) in [(lsb, BitOrder::LsbFirst), (msb, BitOrder::MsbFirst)] {
            let mut out = [0.0; 4];
            assert_eq!(decode_f64(Dtype::F6E2M3, &bytes, 0, &mut out, order), 4);
            assert_eq!(out, want, "{order}");
            let codes: Vec<_> = (0..4)
                .map(|i| code_at(Dtype::F6E2M3, &bytes, i, order))
                .collect();
            assert_eq!(codes, [Some(1), Some(2), Some(3), Some(0x3f)], "{order}");
            assert_eq!(code_at(Dtype::F6E2M3, &bytes, 4, order), None);
        }
        assert_eq!(pack(&[1, 2, 3, 0x3f], 6, BitOrder::LsbFirst), lsb);
        assert_eq!(pack(&[1, 2, 3, 0x3f], 6, BitOrder::MsbFirst), msb);
        // The default is LSB first.
        assert_eq!(BitOrder::default(), BitOrder::LsbFirst);
    }

    #[test]
    fn partial_f6_groups_decode_only_whole_elements() {
        // 1 byte holds element 0; 2 bytes hold elements 0 and 1.
        for order in BitOrder::ALL {
            let bytes = pack(&[0x2a, 0x15, 0x3f, 0x01, 0x07], 6, order);
            assert_eq!(bytes.len(), 4);
            for len in 0..=4 {
                let slice = &bytes[..len];
                let count = element_count(Dtype::F6E3M2, len);
                assert_eq!(count, [0, 1, 2, 4, 5][len]);
                let mut out = [f64::NAN; 8];
                let written = decode_f64(Dtype::F6E3M2, slice, 0, &mut out, order);
                assert_eq!(written as u64, count, "{order} len {len}");
                for (i, &v) in out[..written].iter().enumerate() {
                    let want = decode_one_f64(Dtype::F6E3M2, &bytes, i as u64, order);
                    assert_eq!(Some(v), want, "{order} len {len} element {i}");
                }
            }
        }
    }

    #[test]
    fn sub_byte_decoding_from_any_first_element_matches_one_by_one() {
        let bytes = noise(37, 7);
        for dtype in [Dtype::F4, Dtype::F6E2M3, Dtype::F6E3M2] {
            for order in BitOrder::ALL {
                let count = element_count(dtype, bytes.len());
                for first in 0..count + 3 {
                    for out_len in [0, 1, 2, 3, 5, 8, 13, 64] {
                        let mut out = vec![f64::NAN; out_len];
                        let written = decode_f64(dtype, &bytes, first, &mut out, order);
                        let want = (out_len as u64).min(count.saturating_sub(first));
                        assert_eq!(written as u64, want, "{dtype} first {first} len {out_len}");
                        for (i, &v) in out[..written].iter().enumerate() {
                            let one = decode_one_f64(dtype, &bytes, first + i as u64, order);
                            assert_eq!(one.map(f64::to_bits), Some(v.to_bits()));
                        }
                        assert!(
                            out[written..].iter().all(|v| v.is_nan()),
                            "wrote past count"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn short_odd_and_out_of_range_input_never_panics() {
        let bytes = noise(19, 3);
        for dtype in Dtype::ALL {
            for len in 0..=bytes.len() {
                let slice = &bytes[..len];
                let count = element_count(dtype, len);
                for first in [0, 1, 2, 3, 4, 5, count, count + 1, u64::MAX / 2, u64::MAX] {
                    for out_len in [0, 1, 3, 7, 40] {
                        let want = (out_len as u64).min(count.saturating_sub(first)) as usize;
                        let mut out64 = vec![0.0; out_len];
                        let mut out32 = vec![0.0; out_len];
                        let order = BitOrder::MsbFirst;
                        assert_eq!(decode_f64(dtype, slice, first, &mut out64, order), want);
                        let n32 = decode_f32(dtype, slice, first, &mut out32, order);
                        assert_eq!(n32, f32_is_exact(dtype).then_some(want), "{dtype}");
                        if dtype == Dtype::C64 {
                            let mut im = vec![0.0; out_len + 1];
                            assert_eq!(decode_c64(slice, first, &mut out64, &mut im), want);
                        }
                    }
                    let present = first < count;
                    assert_eq!(
                        code_at(dtype, slice, first, BitOrder::LsbFirst).is_some(),
                        present
                    );
                    assert_eq!(
                        decode_one_f64(dtype, slice, first, BitOrder::LsbFirst).is_some(),
                        present
                    );
                }
            }
        }
    }

    #[test]
    fn f32_path_equals_f64_path() {
        let bytes = noise(4099, 11);
        for dtype in Dtype::ALL.into_iter().filter(|&d| f32_is_exact(d)) {
            for order in BitOrder::ALL {
                for first in [0, 1, 3] {
                    let mut out64 = vec![0.0; 3000];
                    let mut out32 = vec![0.0; 3000];
                    let n64 = decode_f64(dtype, &bytes, first, &mut out64, order);
                    let n32 = decode_f32(dtype, &bytes, first, &mut out32, order);
                    assert_eq!(Some(n64), n32, "{dtype}");
                    for (a, b) in out64[..n64].iter().zip(&out32) {
                        assert!(same(*a, f64::from(*b)), "{dtype}: {a:e} vs {b:e}");
                    }
                }
            }
        }
        for dtype in [Dtype::F64, Dtype::I32, Dtype::U32, Dtype::I64, Dtype::U64] {
            assert_eq!(
                decode_f32(dtype, &bytes, 0, &mut [0.0; 4], BitOrder::LsbFirst),
                None
            );
        }
    }

    #[test]
    fn integer_extremes_and_bool_bytes() {
        let order = BitOrder::LsbFirst;
        let decode = |dtype, bytes: &[u8]| {
            let mut out = vec![0.0; 8];
            let n = decode_f64(dtype, bytes, 0, &mut out, order);
            out.truncate(n);
            out
        };
        let mut bytes = i64::MIN.to_le_bytes().to_vec();
        bytes.extend(i64::MAX.to_le_bytes());
        bytes.extend((-1i64).to_le_bytes());
        assert_eq!(
            decode(Dtype::I64, &bytes),
            [-(2f64.powi(63)), 2f64.powi(63), -1.0]
        );
        let mut bytes = u64::MAX.to_le_bytes().to_vec();
        bytes.extend(((1u64 << 53) + 1).to_le_bytes());
        // Both round to nearest, ties to even.
        assert_eq!(decode(Dtype::U64, &bytes), [2f64.powi(64), 2f64.powi(53)]);
        assert_eq!(code_at(Dtype::U64, &bytes, 0, order), Some(u64::MAX));
        assert_eq!(code_at(Dtype::U64, &bytes, 1, order), Some((1 << 53) + 1));

        let mut bytes = i32::MIN.to_le_bytes().to_vec();
        bytes.extend(u32::MAX.to_le_bytes());
        assert_eq!(decode(Dtype::I32, &bytes), [-2_147_483_648.0, -1.0]);
        assert_eq!(
            decode(Dtype::U32, &bytes),
            [2_147_483_648.0, 4_294_967_295.0]
        );
        let bytes = [0x00, 0x80, 0xff, 0x7f];
        assert_eq!(decode(Dtype::I16, &bytes), [-32768.0, 32767.0]);
        assert_eq!(decode(Dtype::U16, &bytes), [32768.0, 32767.0]);
        assert_eq!(decode(Dtype::I8, &bytes), [0.0, -128.0, -1.0, 127.0]);
        assert_eq!(decode(Dtype::U8, &bytes), [0.0, 128.0, 255.0, 127.0]);
        assert_eq!(code_to_f64(Dtype::I8, 0x80), Some(-128.0));
        assert_eq!(code_to_f64(Dtype::I64, u64::MAX), Some(-1.0));

        let bools = [0, 1, 2, 0x80, 0xff, 0];
        assert_eq!(decode(Dtype::Bool, &bools), [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
        let mut out32 = [9.0; 6];
        assert_eq!(
            decode_f32(Dtype::Bool, &bools, 0, &mut out32, order),
            Some(6)
        );
        assert_eq!(out32, [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
        assert_eq!(decode_one_f64(Dtype::Bool, &bools, 2, order), Some(1.0));
        assert_eq!(code_at(Dtype::Bool, &bools, 2, order), Some(2));
    }

    #[test]
    fn complex_parts_and_codes() {
        let mut bytes = 1.5f32.to_le_bytes().to_vec();
        bytes.extend((-2.0f32).to_le_bytes());
        bytes.extend(f32::NEG_INFINITY.to_le_bytes());
        bytes.extend((-0.0f32).to_le_bytes());
        bytes.push(0xaa); // a stray byte: not a whole element
        let (mut re, mut im) = ([0.0; 4], [0.0; 3]);
        assert_eq!(decode_c64(&bytes, 0, &mut re, &mut im), 2);
        assert_eq!(re[..2], [1.5, f64::NEG_INFINITY]);
        assert_eq!(
            im[..2].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            [(-2.0f64).to_bits(), (-0.0f64).to_bits()]
        );
        let (mut re32, mut im32) = ([0.0f32; 1], [0.0f32; 1]);
        assert_eq!(decode_c64_f32(&bytes, 1, &mut re32, &mut im32), 1);
        assert_eq!((re32[0], im32[0]), (f32::NEG_INFINITY, -0.0));

        let mut real = [0.0; 4];
        assert_eq!(
            decode_f64(Dtype::C64, &bytes, 0, &mut real, BitOrder::LsbFirst),
            2
        );
        assert_eq!(real[..2], [1.5, f64::NEG_INFINITY]);
        assert_eq!(
            decode_one_f64(Dtype::C64, &bytes, 0, BitOrder::LsbFirst),
            Some(1.5)
        );
        let code = code_at(Dtype::C64, &bytes, 0, BitOrder::LsbFirst).expect("present");
        assert_eq!(code as u32, 1.5f32.to_bits());
        assert_eq!((code >> 32) as u32, (-2.0f32).to_bits());
    }

    #[test]
    fn codes_wider_than_the_dtype_have_no_value() {
        assert_eq!(code_to_f64(Dtype::F4, 16), None);
        assert_eq!(code_to_f64(Dtype::F6E3M2, 64), None);
        assert_eq!(code_to_f64(Dtype::U8, 256), None);
        assert_eq!(code_to_f64(Dtype::F16, 0x3c00), Some(1.0));
        assert_eq!(
            code_to_f64(Dtype::F64, u64::MAX).map(f64::is_nan),
            Some(true)
        );
    }

    #[test]
    fn hex_codes_are_padded_to_the_dtype_width() {
        assert_eq!(format_code_hex(Dtype::F4, 0xa), "0xa");
        assert_eq!(format_code_hex(Dtype::F6E2M3, 0x5), "0x05");
        assert_eq!(format_code_hex(Dtype::F8E4M3, 0x7f), "0x7f");
        assert_eq!(format_code_hex(Dtype::BF16, 0x3f80), "0x3f80");
        assert_eq!(format_code_hex(Dtype::C64, 1), "0x0000000000000001");
    }

    #[test]
    fn decoding_spans_many_half_batches() {
        let bytes = noise(2 * (3 * HALF_BATCH + 17), 5);
        for dtype in [Dtype::F16, Dtype::BF16] {
            let mut out = vec![0.0; 3 * HALF_BATCH + 40];
            let n = decode_f64(dtype, &bytes, 5, &mut out, BitOrder::LsbFirst);
            assert_eq!(n, 3 * HALF_BATCH + 12);
            for (i, &v) in out[..n].iter().enumerate() {
                let one = decode_one_f64(dtype, &bytes, 5 + i as u64, BitOrder::LsbFirst);
                assert!(same(v, one.expect("present")), "{dtype} element {i}");
            }
        }
    }
}
