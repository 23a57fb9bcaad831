//! What the float passes read: [`View`]s that decode blocks of F32, F16,
//! BF16, F64 and C64 values straight from the mapped bytes, and the
//! [`FloatLane`] types (f32, f64) they decode into.

use std::ops::Range;

use super::tiny_bits;
use crate::dtype::Dtype;
use crate::dtype::decode::{BitOrder, decode_c64_f32, decode_f32, decode_f64};
use crate::quant::Keep;
use crate::stats::kernel::Wide;
use crate::stats::kernel::{BLOCK, Keyed, Lane, Specials, f32_bytes};
use crate::stats::moments::Moments;
use crate::stats::simd::{block_f64, block_wide, f64s};
use crate::stats::smallest_normal;

/// A float type the passes run on (f32 for F32 and the C64 parts, f64 for
/// F64 and C64 magnitudes).
pub(crate) trait FloatLane: Lane + Keyed {
    /// Exponent bias (127 for f32, 1023 for f64).
    const BIAS: i32;
    /// Exponent field of the largest (all-ones) code.
    const MAX_FIELD: usize;
    /// Significant bits of [`Keyed::key`].
    const KEY_BITS: u32;
    /// Specials, range and moments of a block.
    fn summarize(vals: &[Self], smallest_normal: f64) -> (Specials, Moments);
    /// The exponent field of the value's bits.
    fn field(self) -> usize;
    /// The inverse of [`Keyed::key`].
    fn from_key(key: u64) -> Self;
    /// A value of the type (exact for the range of a view's values).
    fn from_f64(x: f64) -> Self;
    /// The values as f64, when they are (for the f64 filter).
    fn f64s(vals: &[Self]) -> Option<&[f64]>;
}

impl FloatLane for f32 {
    const BIAS: i32 = 127;
    const MAX_FIELD: usize = 255;
    const KEY_BITS: u32 = 32;

    fn summarize(vals: &[f32], smallest_normal: f64) -> (Specials, Moments) {
        // The copy below is a `memcpy`; some CPUs (AMD Zen) run one of
        // them 30× slower when its destination lies just past its source
        // modulo 4096 bytes (4K aliasing), as two stack buffers can: the
        // destination is moved 256 bytes along when it would.
        let mut buffer = [0u8; 4 * BLOCK + 256];
        let gap = (buffer.as_ptr() as usize).wrapping_sub(vals.as_ptr() as usize) % 4096;
        let shift = if gap < 256 { 256 } else { 0 };
        let (_, bytes) = buffer.split_at_mut(shift);
        let mut sp = Specials::default();
        let mut m = Moments::default();
        for part in vals.chunks(BLOCK) {
            let bytes = f32_bytes(part, bytes);
            let (s, pm) = block_wide(Wide::F32, bytes, tiny_bits(smallest_normal));
            sp.merge(&s);
            m.merge(&pm);
        }
        (sp, m)
    }
    fn field(self) -> usize {
        ((self.to_bits() >> 23) & 0xff) as usize
    }
    fn from_key(key: u64) -> f32 {
        let k = key as u32;
        f32::from_bits(if k & 0x8000_0000 == 0 {
            !k
        } else {
            k & 0x7fff_ffff
        })
    }
    #[allow(clippy::cast_possible_truncation)]
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn f64s(_: &[f32]) -> Option<&[f64]> {
        None
    }
}

impl FloatLane for f64 {
    const BIAS: i32 = 1023;
    const MAX_FIELD: usize = 2047;
    const KEY_BITS: u32 = 64;

    fn summarize(vals: &[f64], smallest_normal: f64) -> (Specials, Moments) {
        block_f64(vals, smallest_normal)
    }
    fn field(self) -> usize {
        ((self.to_bits() >> 52) & 0x7ff) as usize
    }
    fn from_key(key: u64) -> f64 {
        f64::from_bits(if key >> 63 == 0 {
            !key
        } else {
            key & !(1 << 63)
        })
    }
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn f64s(vals: &[f64]) -> Option<&[f64]> {
        Some(vals)
    }
}

/// A sequence of float values decoded from a tensor's bytes.
pub(crate) trait View: Sync {
    /// The value type blocks decode into.
    type T: FloatLane;
    /// Elements of the tensor (C64: complex elements, not parts).
    fn len(&self) -> u64;
    /// Bytes read per element (for progress and chunking).
    fn element_bytes(&self) -> u64;
    /// Decodes elements `first..` into `out`; returns how many.
    fn decode(&self, first: u64, out: &mut [Self::T]) -> usize;
    /// Values below this (and not zero) are subnormal.
    fn smallest_normal(&self) -> f64;
    /// The elements `range` in place, and their format, when the view is
    /// one of the [`Wide`] formats as stored (F32, F16, BF16 tensors): the
    /// fused scan then reads the mapped bytes without decoding them first.
    fn raw(&self, range: Range<u64>) -> Option<(Wide, &[u8])> {
        let _ = range;
        None
    }
    /// The elements `range` as `(value, count)` pairs, a batch at a time,
    /// when the view's values come in runs of few values under one scale
    /// (GGUF's table types, [`crate::quant::Dequantizer::value_pairs`]):
    /// the passes then handle a value once per run, not once per element.
    /// `keep` picks the values of a run's table that are wanted. With
    /// `codes` (and no `keep`), the view also counts the elements' codes
    /// where it has any (a pass that sees each element once asks for
    /// them: the first pass, or the moments). False when the view has no
    /// pairs (the passes decode it instead).
    fn pairs(
        &self,
        range: Range<u64>,
        keep: Option<Keep<'_>>,
        codes: bool,
        f: &mut dyn FnMut(&[f32], &[u32]),
    ) -> bool {
        let _ = (range, keep, codes, f);
        false
    }
    /// The elements `range` in place, when the view's bytes are already
    /// values of its lane type, aligned (an F64 tensor on this
    /// little-endian CPU): the passes then read the mapped bytes, with no
    /// copy into a buffer.
    fn in_place(&self, range: Range<u64>) -> Option<&[Self::T]> {
        let _ = range;
        None
    }
}

/// The values of an F32 tensor.
pub(crate) struct F32View<'a>(pub &'a [u8]);

impl View for F32View<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        (self.0.len() / 4) as u64
    }
    fn element_bytes(&self) -> u64 {
        4
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        decode_f32(Dtype::F32, self.0, first, out, BitOrder::LsbFirst).unwrap_or(0)
    }
    fn smallest_normal(&self) -> f64 {
        smallest_normal(Dtype::F32).unwrap_or(0.0)
    }
    fn raw(&self, range: Range<u64>) -> Option<(Wide, &[u8])> {
        Some((Wide::F32, byte_range(self.0, range, 4)?))
    }
}

/// The values of an F16 or BF16 tensor, widened to f32 (exactly). Used for
/// statistics without histograms; with them, counting the 65,536 codes
/// ([`crate::stats::codes`]) is faster.
pub(crate) struct HalfView<'a> {
    /// The tensor's bytes (little-endian, two per element).
    pub bytes: &'a [u8],
    /// F16 or BF16: the two decode differently.
    pub dtype: Dtype,
}

impl View for HalfView<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        (self.bytes.len() / 2) as u64
    }
    fn element_bytes(&self) -> u64 {
        2
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        decode_f32(self.dtype, self.bytes, first, out, BitOrder::LsbFirst).unwrap_or(0)
    }
    fn smallest_normal(&self) -> f64 {
        smallest_normal(self.dtype).unwrap_or(0.0)
    }
    fn raw(&self, range: Range<u64>) -> Option<(Wide, &[u8])> {
        let kind = if self.dtype == Dtype::F16 {
            Wide::F16
        } else {
            Wide::BF16
        };
        Some((kind, byte_range(self.bytes, range, 2)?))
    }
}

/// The bytes of elements `range` of `width` bytes each.
fn byte_range(bytes: &[u8], range: Range<u64>, width: u64) -> Option<&[u8]> {
    let start = usize::try_from(range.start.checked_mul(width)?).ok()?;
    let end = usize::try_from(range.end.checked_mul(width)?).ok()?;
    bytes.get(start..end)
}

/// The values of an F64 tensor.
pub(crate) struct F64View<'a>(pub &'a [u8]);

impl View for F64View<'_> {
    type T = f64;
    fn len(&self) -> u64 {
        (self.0.len() / 8) as u64
    }
    fn element_bytes(&self) -> u64 {
        8
    }
    fn decode(&self, first: u64, out: &mut [f64]) -> usize {
        decode_f64(Dtype::F64, self.0, first, out, BitOrder::LsbFirst)
    }
    fn smallest_normal(&self) -> f64 {
        f64::MIN_POSITIVE
    }
    fn in_place(&self, range: Range<u64>) -> Option<&[f64]> {
        f64s(byte_range(self.0, range, 8)?)
    }
}

/// The real or imaginary parts of a C64 tensor.
pub(crate) struct C64Part<'a> {
    /// The tensor's bytes (eight per element: real, then imaginary f32).
    pub bytes: &'a [u8],
    /// Imaginary (true) or real (false) parts.
    pub imag: bool,
}

impl View for C64Part<'_> {
    type T = f32;
    fn len(&self) -> u64 {
        (self.bytes.len() / 8) as u64
    }
    fn element_bytes(&self) -> u64 {
        8
    }
    fn decode(&self, first: u64, out: &mut [f32]) -> usize {
        let mut other = [0f32; BLOCK];
        let n = out.len().min(BLOCK);
        let (Some(out), Some(other)) = (out.get_mut(..n), other.get_mut(..n)) else {
            return 0;
        };
        if self.imag {
            decode_c64_f32(self.bytes, first, other, out)
        } else {
            decode_c64_f32(self.bytes, first, out, other)
        }
    }
    fn smallest_normal(&self) -> f64 {
        smallest_normal(Dtype::F32).unwrap_or(0.0)
    }
}

/// The magnitudes |z| of a C64 tensor, in f64: `sqrt(re² + im²)` (exact
/// squares, one rounding for the sum and one for the root); +Inf when
/// either part is infinite, as `hypot` and numpy say, NaN otherwise when
/// either part is NaN.
pub(crate) struct C64Abs<'a>(pub &'a [u8]);

impl View for C64Abs<'_> {
    type T = f64;
    fn len(&self) -> u64 {
        (self.0.len() / 8) as u64
    }
    fn element_bytes(&self) -> u64 {
        8
    }
    fn decode(&self, first: u64, out: &mut [f64]) -> usize {
        let mut re = [0f32; BLOCK];
        let mut im = [0f32; BLOCK];
        let n = out.len().min(BLOCK);
        let (Some(re), Some(im)) = (re.get_mut(..n), im.get_mut(..n)) else {
            return 0;
        };
        let got = decode_c64_f32(self.0, first, re, im);
        for ((o, &r), &i) in out.iter_mut().zip(re.iter()).zip(im.iter()).take(got) {
            *o = magnitude(r, i);
        }
        got
    }
    fn smallest_normal(&self) -> f64 {
        smallest_normal(Dtype::F32).unwrap_or(0.0)
    }
}

/// |re + i·im| as [`C64Abs`] defines it.
pub(crate) fn magnitude(re: f32, im: f32) -> f64 {
    if re.is_infinite() || im.is_infinite() {
        f64::INFINITY
    } else {
        let (r, i) = (f64::from(re), f64::from(im));
        (r * r + i * i).sqrt()
    }
}
