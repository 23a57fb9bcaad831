//! How a stored tensor's bytes lie in its file, for every container: byte
//! order, layout (C-contiguous, or an element offset and strides over a
//! storage other tensors may share) and encoding (as is, or deflated in a
//! zip member). A [`Placement`] is made by a container reader and checked
//! there against the storage it points into, so code that reads through it
//! (`gather`) trusts its bounds.

use std::ops::Range;

use super::decode::Decode;
use crate::dtype::Dtype;

/// The byte order of a stored tensor's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Little-endian: what every reader above the format sees.
    Little,
    /// Big-endian: swapped when read.
    Big,
}

impl ByteOrder {
    /// The name used in JSON (`"little"`, `"big"`).
    pub const fn id(self) -> &'static str {
        match self {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        }
    }
}

/// Where a tensor's elements are in its storage, in elements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Layout {
    /// C order from the storage's first element.
    Contiguous,
    /// Element `(i0, …, ik)` is the storage's element `offset + Σ ij·strides[j]`.
    Strided {
        /// The first element's index in the storage.
        offset: u64,
        /// One stride per dimension, in elements.
        strides: Vec<u64>,
    },
}

impl Layout {
    /// Column-major (Fortran) order for `shape`, as strides over a storage
    /// of its own.
    pub fn fortran(shape: &[u64]) -> Self {
        let mut strides = Vec::with_capacity(shape.len());
        let mut step = 1u64;
        for &d in shape {
            strides.push(step);
            step = step.saturating_mul(d.max(1));
        }
        Layout::Strided { offset: 0, strides }
    }

    /// True when reading it in C order needs no gather: contiguous, or
    /// strides that are C order's own, from any first element (a dimension
    /// of one element may carry any stride).
    pub fn is_c_order(&self, shape: &[u64]) -> bool {
        match self {
            Layout::Contiguous => true,
            Layout::Strided { strides, .. } => {
                let mut step = 1u64;
                let mut ok = true;
                for (&d, &s) in shape.iter().zip(strides).rev() {
                    if d > 1 && s != step {
                        ok = false;
                    }
                    step = step.saturating_mul(d);
                }
                ok
            }
        }
    }

    /// The number of storage elements the layout reaches for `shape`: one
    /// past its largest index (0 for an empty tensor); `None` on overflow.
    pub fn extent(&self, shape: &[u64]) -> Option<u64> {
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
        if numel == 0 {
            return Some(0);
        }
        match self {
            Layout::Contiguous => Some(numel),
            Layout::Strided { offset, strides } => {
                if strides.len() != shape.len() {
                    return None;
                }
                shape
                    .iter()
                    .zip(strides)
                    .try_fold(*offset, |acc, (&d, &s)| {
                        acc.checked_add((d - 1).checked_mul(s)?)
                    })?
                    .checked_add(1)
            }
        }
    }
}

/// How a storage's bytes are kept in the file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Decoded by its container (chunks, slices, typed fields): C order,
    /// little-endian, from the bytes of the checkpoint's files.
    Decoded(Decoder),
    /// As they are: the storage is a slice of the file.
    Plain,
    /// A deflated zip member: decoded as a stream.
    Deflated {
        /// The member's index in the archive's central directory.
        member: usize,
        /// The member's uncompressed size, as the archive declares it.
        declared_size: u64,
    },
}

/// A container's [`Decode`], compared by identity.
#[derive(Debug, Clone)]
pub struct Decoder(pub std::sync::Arc<dyn Decode>);

impl PartialEq for Decoder {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Decoder {}

impl std::hash::Hash for Decoder {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(std::sync::Arc::as_ptr(&self.0).cast::<u8>(), state);
    }
}

/// The bytes a tensor is read from: a range of the file, as is or deflated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Storage {
    /// The file: 0 for the one opened, `k` for the `k`-th file beside it
    /// that the container names (an ONNX model's external data).
    pub file: usize,
    /// The bytes in the file: the storage itself (plain), or the member's
    /// compressed stream (deflated).
    pub file_range: Range<u64>,
    /// Bytes of the decoded stream before the storage's first element (a
    /// deflated `.npy` member's header).
    pub skip: u64,
    /// The storage's length in bytes, decoded.
    pub len: u64,
    /// How the bytes are kept.
    pub encoding: Encoding,
}

/// Where a tensor of a container other than plain safetensors lies, and
/// how to read it. Made by a container reader, which checks that the
/// layout stays inside the storage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    byte_order: ByteOrder,
    layout: Layout,
    storage: Storage,
    /// Tensors over the same storage share this id (tied weights).
    storage_id: usize,
}

impl Placement {
    /// A placement, checked: the dtype is whole bytes, `layout` has one
    /// stride per dimension and reaches no element past `storage`'s end.
    pub fn new(
        dtype: Dtype,
        shape: &[u64],
        byte_order: ByteOrder,
        layout: Layout,
        storage: Storage,
        storage_id: usize,
    ) -> Result<Self, String> {
        let element = u64::from(dtype.bits().div_ceil(8)).max(1);
        let reach = layout
            .extent(shape)
            .and_then(|e| dtype.byte_len(&[e]))
            .ok_or_else(|| "its layout's reach overflows 64 bits".to_owned())?;
        if reach > storage.len {
            return Err(format!(
                "its layout reaches {reach} bytes ({} elements of {element} bytes) but the storage holds {}",
                reach / element,
                storage.len
            ));
        }
        let placement = Self {
            byte_order,
            layout,
            storage,
            storage_id,
        };
        if !placement.is_native(shape) && !dtype.bits().is_multiple_of(8) {
            return Err(format!(
                "a {} tensor can only be stored little-endian and contiguous",
                dtype.name()
            ));
        }
        Ok(placement)
    }

    /// The elements' byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// Where the elements are in the storage.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The storage read from.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The id of the storage (shared by tied tensors).
    pub fn storage_id(&self) -> usize {
        self.storage_id
    }

    /// True when the tensor's bytes are a slice of the file in C order,
    /// little-endian: read in place, no copy.
    pub fn is_native(&self, shape: &[u64]) -> bool {
        self.byte_order == ByteOrder::Little
            && self.layout.is_c_order(shape)
            && self.storage.encoding == Encoding::Plain
    }

    /// The tensor's bytes in the file when it [`is_native`](Self::is_native).
    pub fn native_range(&self, shape: &[u64], nbytes: u64) -> Option<Range<u64>> {
        if !self.is_native(shape) {
            return None;
        }
        let offset = match &self.layout {
            Layout::Strided { offset, .. } if !shape.contains(&0) => *offset,
            _ => 0,
        };
        let element = nbytes.checked_div(shape.iter().product::<u64>().max(1))?;
        let start = self
            .storage
            .file_range
            .start
            .checked_add(offset.checked_mul(element)?)?;
        Some(start..start.checked_add(nbytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_order_and_extent() {
        assert!(Layout::Contiguous.is_c_order(&[3, 4]));
        let c = Layout::Strided {
            offset: 0,
            strides: vec![4, 1],
        };
        assert!(c.is_c_order(&[3, 4]));
        assert_eq!(c.extent(&[3, 4]), Some(12));
        let f = Layout::fortran(&[3, 4]);
        assert!(!f.is_c_order(&[3, 4]));
        assert_eq!(
            f,
            Layout::Strided {
                offset: 0,
                strides: vec![1, 3]
            }
        );
        assert_eq!(f.extent(&[3, 4]), Some(12));
        // A vector in Fortran order is C order.
        assert!(Layout::fortran(&[5]).is_c_order(&[5]));
        assert!(Layout::fortran(&[1, 5]).is_c_order(&[1, 5]));
        assert_eq!(Layout::fortran(&[3, 0]).extent(&[3, 0]), Some(0));
        let view = Layout::Strided {
            offset: 2,
            strides: vec![8, 2],
        };
        assert_eq!(view.extent(&[2, 3]), Some(2 + 8 + 4 + 1));
    }

    #[test]
    fn placements_stay_inside_their_storage() {
        let storage = |len| Storage {
            file: 0,
            file_range: 100..100 + len,
            skip: 0,
            len,
            encoding: Encoding::Plain,
        };
        let ok = Placement::new(
            Dtype::F32,
            &[3, 4],
            ByteOrder::Big,
            Layout::Contiguous,
            storage(48),
            0,
        )
        .expect("fits");
        assert!(!ok.is_native(&[3, 4]));
        let e = Placement::new(
            Dtype::F32,
            &[3, 4],
            ByteOrder::Little,
            Layout::fortran(&[3, 4]),
            storage(47),
            0,
        )
        .expect_err("short");
        assert!(e.contains("holds 47"), "{e}");
        let native = Placement::new(
            Dtype::F32,
            &[2],
            ByteOrder::Little,
            Layout::Contiguous,
            storage(8),
            0,
        )
        .expect("fits");
        assert_eq!(native.native_range(&[2], 8), Some(100..108));
        assert!(
            Placement::new(
                Dtype::F4,
                &[2],
                ByteOrder::Big,
                Layout::Contiguous,
                storage(1),
                0
            )
            .is_err()
        );
    }
}
