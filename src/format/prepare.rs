//! A stored tensor that is not a C-order, little-endian slice of its file,
//! read once into scratch space in that order: a deflated storage decoded
//! as a stream, then its elements gathered (swapped, reordered) block by
//! block. Memory stays bounded; the scratch space is capped (see
//! `source::scratch`).

use super::LoadError;
use super::TensorInfo;
use super::decode::DecodeError;
use super::gather::{GatherError, gather};
use super::numpy::NumpyError;
use super::stored::{ByteOrder, Encoding, Layout, Placement};
use super::zip::ZipError;
use super::zip::{Archive, Member};
use crate::jobs::CancelToken;

/// The file a tensor is read from: its path (for errors), its bytes, and
/// the archive member of a deflated storage.
pub(super) struct ReadFrom<'a> {
    pub path: &'a std::path::Path,
    /// The bytes of the file the storage is in.
    pub bytes: &'a [u8],
    pub member: Option<(&'a Archive, &'a Member)>,
    /// Every file of the tensor's container, for a decoded storage.
    pub files: &'a [&'a [u8]],
}

/// The cancelled outcome of a read, as remote reads give it.
fn cancelled(file: &ReadFrom<'_>) -> LoadError {
    LoadError::Remote {
        path: file.path.to_path_buf(),
        error: crate::source::RemoteError::new("Cancelled", "cancelled"),
    }
}

fn scratch_error(file: &ReadFrom<'_>, info: &TensorInfo, e: &std::io::Error) -> LoadError {
    LoadError::Io {
        path: file.path.to_path_buf(),
        source: std::sync::Arc::new(std::io::Error::new(
            e.kind(),
            format!("tensor {:?}: {e}", info.name()),
        )),
    }
}

/// Hands `sink` the tensor's bytes in C order, little-endian, block by
/// block: a deflated member in C order is streamed as it is decoded; one
/// that must be reordered is decoded into temporary scratch space first.
pub(super) fn fill_c_order(
    file: &ReadFrom<'_>,
    info: &TensorInfo,
    p: &Placement,
    cancel: &CancelToken,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<(), LoadError> {
    let storage = p.storage();
    let sink_error = |e: &std::io::Error| scratch_error(file, info, e);
    // The storage's bytes: a slice of the file, or its member decoded.
    let decoded;
    let bytes: &[u8] = match &storage.encoding {
        Encoding::Decoded(d) => {
            // C order and little-endian as it comes: the container's word.
            return d.0.decode(file.files, cancel, sink).map_err(|e| match e {
                DecodeError::Cancelled => cancelled(file),
                DecodeError::Sink(e) => sink_error(&e),
                DecodeError::Invalid { kind, message } => LoadError::Container {
                    path: file.path.to_path_buf(),
                    kind,
                    message: format!("tensor {:?}: {message}", info.name()),
                    tensor: Some(info.name().to_owned()),
                },
            });
        }
        Encoding::Plain => {
            let r = &storage.file_range;
            file.bytes
                .get(r.start as usize..r.end as usize)
                .unwrap_or(&[])
        }
        Encoding::Deflated { .. } => {
            let Some((archive, member)) = file.member else {
                return Err(LoadError::Numpy {
                    path: file.path.to_path_buf(),
                    error: NumpyError::Header(format!(
                        "tensor {:?} names no member of the archive",
                        info.name()
                    )),
                });
            };
            let zip_error = |e: ZipError| match e {
                ZipError::Cancelled => cancelled(file),
                e => LoadError::Numpy {
                    path: file.path.to_path_buf(),
                    error: NumpyError::Zip(e),
                },
            };
            let in_order = p.byte_order() == ByteOrder::Little
                && p.layout().is_c_order(info.shape())
                && matches!(
                    p.layout(),
                    Layout::Contiguous | Layout::Strided { offset: 0, .. }
                )
                && storage.len == info.nbytes();
            if in_order {
                let mut failed = None;
                let streamed = archive.stream(
                    file.bytes,
                    member,
                    storage.skip,
                    storage.len,
                    cancel,
                    &mut |b| {
                        sink(b).map_err(|e| {
                            let text = e.to_string();
                            failed = Some(e);
                            text
                        })
                    },
                );
                return match (streamed, failed) {
                    (_, Some(e)) => Err(sink_error(&e)),
                    (r, None) => r.map_err(zip_error),
                };
            }
            decoded = archive
                .decode(file.bytes, member, storage.skip, storage.len, cancel)
                .map_err(zip_error)?;
            decoded.bytes()
        }
    };
    gather(
        bytes,
        info.dtype(),
        info.shape(),
        p.byte_order(),
        p.layout(),
        cancel,
        sink,
    )
    .map_err(|e| match e {
        GatherError::Cancelled => cancelled(file),
        GatherError::Sink(e) => sink_error(&e),
    })
}
