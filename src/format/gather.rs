//! Reading a stored tensor in logical C order, little-endian: byte-swapped
//! or strided elements are gathered block by block into a bounded buffer
//! and handed on, so memory never grows with the tensor's size.

use crate::dtype::Dtype;
use crate::jobs::{CancelToken, Cancelled};

use super::stored::{ByteOrder, Layout};

/// Bytes handed on at a time.
pub const BLOCK_BYTES: usize = 1 << 20;

/// Why a gather stopped.
#[derive(Debug)]
pub enum GatherError<E> {
    /// The token was cancelled.
    Cancelled,
    /// The sink failed.
    Sink(E),
}

impl<E> From<Cancelled> for GatherError<E> {
    fn from(_: Cancelled) -> Self {
        GatherError::Cancelled
    }
}

/// The unit whose bytes a byte swap reverses: the element, or each half of
/// a complex number.
fn swap_unit(dtype: Dtype) -> usize {
    match dtype {
        Dtype::C64 => 4,
        other => (other.bits() / 8).max(1) as usize,
    }
}

/// Hands `sink` the elements of a tensor of `dtype` and `shape` that
/// `layout` places in `storage` (whose elements are in `order`), in C
/// order and little-endian, at most [`BLOCK_BYTES`] at a time.
///
/// The layout was checked against the storage when its placement was
/// made; an element that is out of reach anyway ends the gather with the
/// bytes it has (the caller's length check then refuses the result).
pub fn gather<E>(
    storage: &[u8],
    dtype: Dtype,
    shape: &[u64],
    order: ByteOrder,
    layout: &Layout,
    cancel: &CancelToken,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), GatherError<E>> {
    let element = (dtype.bits() / 8).max(1) as usize;
    let unit = swap_unit(dtype);
    let swap = order == ByteOrder::Big && unit > 1;
    let numel = shape.iter().product::<u64>();
    if numel == 0 {
        return Ok(());
    }
    let fix = |block: &mut [u8]| {
        if swap {
            for u in block.chunks_exact_mut(unit) {
                u.reverse();
            }
        }
    };
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK_BYTES.min(numel as usize * element));
    let mut flush = |buf: &mut Vec<u8>| -> Result<(), GatherError<E>> {
        cancel.check()?;
        fix(buf);
        sink(buf).map_err(GatherError::Sink)?;
        buf.clear();
        Ok(())
    };
    let c_order = layout.is_c_order(shape);
    if c_order {
        let start = match layout {
            Layout::Strided { offset, .. } => *offset as usize * element,
            Layout::Contiguous => 0,
        };
        let len = numel as usize * element;
        let Some(bytes) = storage.get(start..start.saturating_add(len)) else {
            return Ok(());
        };
        let step = (BLOCK_BYTES / element).max(1) * element;
        for block in bytes.chunks(step) {
            buf.extend_from_slice(block);
            flush(&mut buf)?;
        }
        return Ok(());
    }
    let Layout::Strided { offset, strides } = layout else {
        return Ok(());
    };
    let rank = shape.len();
    let (inner_len, inner_stride) = (shape[rank - 1] as usize, strides[rank - 1] as usize);
    let outer = &shape[..rank - 1];
    let mut index = vec![0u64; rank - 1];
    loop {
        let base = outer
            .iter()
            .zip(strides)
            .zip(&index)
            .fold(*offset as usize, |acc, ((_, &s), &i)| {
                acc + i as usize * s as usize
            });
        for j in 0..inner_len {
            let at = (base + j * inner_stride) * element;
            let Some(e) = storage.get(at..at + element) else {
                return Ok(());
            };
            buf.extend_from_slice(e);
            if buf.len() >= BLOCK_BYTES {
                flush(&mut buf)?;
            }
        }
        // The next index of the outer dimensions, last fastest.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                if !buf.is_empty() {
                    flush(&mut buf)?;
                }
                return Ok(());
            }
            d -= 1;
            index[d] += 1;
            if index[d] < outer[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        storage: &[u8],
        dtype: Dtype,
        shape: &[u64],
        order: ByteOrder,
        layout: &Layout,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        gather::<()>(
            storage,
            dtype,
            shape,
            order,
            layout,
            &CancelToken::default(),
            &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            },
        )
        .expect("gathered");
        out
    }

    #[test]
    fn fortran_order_and_byte_swap() {
        // A 2x3 u16 matrix [[1,2,3],[4,5,6]] stored column-major, big-endian.
        let column_major: Vec<u8> = [1u16, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let out = run(
            &column_major,
            Dtype::U16,
            &[2, 3],
            ByteOrder::Big,
            &Layout::fortran(&[2, 3]),
        );
        let want: Vec<u8> = (1u16..=6).flat_map(u16::to_le_bytes).collect();
        assert_eq!(out, want);
        // Complex numbers swap each half.
        let z: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let out = run(&z, Dtype::C64, &[1], ByteOrder::Big, &Layout::Contiguous);
        let want: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(out, want);
    }

    #[test]
    fn a_view_with_an_offset_and_a_large_tensor() {
        // Every other element of row 1 and 2 of a 3x4 i32 storage.
        let storage: Vec<u8> = (0i32..12).flat_map(i32::to_le_bytes).collect();
        let layout = Layout::Strided {
            offset: 4,
            strides: vec![4, 2],
        };
        let out = run(&storage, Dtype::I32, &[2, 2], ByteOrder::Little, &layout);
        let want: Vec<u8> = [4i32, 6, 8, 10]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(out, want);
        // More than a block, in Fortran order: every value in its C place.
        let (r, c) = (700u64, 500u64);
        let column_major: Vec<u8> = (0..c)
            .flat_map(|j| (0..r).map(move |i| (i * c + j) as f32))
            .flat_map(f32::to_le_bytes)
            .collect();
        let out = run(
            &column_major,
            Dtype::F32,
            &[r, c],
            ByteOrder::Little,
            &Layout::fortran(&[r, c]),
        );
        let want: Vec<u8> = (0..r * c)
            .map(|v| v as f32)
            .flat_map(f32::to_le_bytes)
            .collect();
        assert_eq!(out, want);
    }
}
