//! Sub-byte packing: where the F4 and F6 codes of element `k` sit in the
//! bytes, for both F6 bit orders ([`BitOrder`]), and their unpacking
//! through a code table.

use std::fmt;

use super::element_count;
use crate::dtype::Dtype;

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
/// Decodes F4 elements, low nibble first.
pub(super) fn unpack_f4<T: Copy>(
    table: &[T; 16],
    bytes: &[u8],
    first: u64,
    out: &mut [T],
) -> usize {
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
pub(super) fn f6_word(group: [u8; 3], order: BitOrder) -> u32 {
    let [a, b, c] = group.map(u32::from);
    match order {
        BitOrder::LsbFirst => a | b << 8 | c << 16,
        BitOrder::MsbFirst => a << 16 | b << 8 | c,
    }
}

/// Element `k` (0‥3) of a group word.
pub(super) fn f6_field(word: u32, k: usize, order: BitOrder) -> usize {
    let shift = match order {
        BitOrder::LsbFirst => 6 * k,
        BitOrder::MsbFirst => 18 - 6 * k,
    };
    ((word >> shift) & 0x3f) as usize
}

/// The code of F6 element `index`, reading missing bytes as zero. Callers
/// check first that the element is wholly present.
pub(super) fn f6_code(bytes: &[u8], index: u64, order: BitOrder) -> usize {
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
pub(super) fn unpack_f6<T: Copy>(
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
