//! A remote torch zip, opened from its end (PICKLE.md §9): the end records,
//! the central directory and `data.pkl` are read by exact ranges, never a
//! storage. A storage's data start is where `torch.save` puts it, and is
//! checked against its local header when the storage is fetched.

use std::collections::HashMap;
use std::path::PathBuf;

use super::archive::{MAX_PICKLE_BYTES, TorchError};
use super::file::{Unverified, into_file};
use crate::format::containers::ContainerKind;
use crate::format::zip::{self, Directory, ZipError};
use crate::format::{LoadError, StoredFile};
use crate::source::{RemoteError, Source};

/// Bytes of the end read first: the end record (22), the ZIP64 locator
/// (20), and the directory itself when the archive is small.
const TAIL_GUESS: u64 = 4096;
/// The longest end: the records and a comment of 65,535 bytes.
const TAIL_MAX: u64 = 22 + 20 + 65_535;
/// A local header's extra field read with the member, before its length
/// is known (`torch.save` pads to 64 bytes: at most 67 with its `FB`
/// field, plus the ZIP64 sizes).
const EXTRA_GUESS: u64 = 256;
/// A central directory longer than this is refused (a million members).
const MAX_DIRECTORY: u64 = 256 << 20;

/// The refusal of a remote zip that is no torch zip (an `.npz`).
fn remote_archive(path: PathBuf) -> LoadError {
    LoadError::Numpy {
        path,
        error: crate::format::numpy::NumpyError::RemoteArchive,
    }
}

/// Opens the remote torch zip whose first block `source` holds.
pub(super) fn open_remote(path: PathBuf, source: Source) -> Result<StoredFile, LoadError> {
    {
        let Some(remote) = source.remote() else {
            return Err(remote_archive(path));
        };
        let len = source.len();
        let fail = |error: RemoteError| LoadError::Remote {
            path: path.clone(),
            error,
        };
        let zip_error = |e: ZipError| LoadError::Pytorch {
            path: path.clone(),
            error: TorchError::Zip(e),
        };
        let slice = |r: std::ops::Range<u64>| -> &[u8] {
            let b = source.bytes();
            b.get(r.start as usize..(r.end as usize).min(b.len()))
                .unwrap_or_default()
        };
        let mut tail = TAIL_GUESS.min(len);
        let directory = loop {
            let start = len - tail;
            remote.read_into_map(start..len).map_err(fail)?;
            match zip::locate_directory(slice(start..len), start, len).map_err(zip_error)? {
                Directory::NotInTail if tail < TAIL_MAX.min(len) => tail = TAIL_MAX.min(len),
                Directory::NotInTail => {
                    return Err(zip_error(ZipError::Archive(
                        "no end-of-central-directory record in its last bytes".into(),
                    )));
                }
                Directory::Zip64Record(at) => {
                    remote.read_into_map(at..at + 56).map_err(fail)?;
                    break zip::zip64_directory(slice(at..at + 56), at).map_err(zip_error)?;
                }
                at @ Directory::At(_) => break at,
            }
        };
        let Directory::At(range) = directory else {
            return Err(zip_error(ZipError::Archive("no central directory".into())));
        };
        if range.end - range.start > MAX_DIRECTORY {
            return Err(zip_error(ZipError::Archive(format!(
                "its central directory is {} bytes; at most {MAX_DIRECTORY} are read",
                range.end - range.start
            ))));
        }
        remote.read_into_map(range).map_err(fail)?;
        let mut archive = zip::open_directory(source.bytes()).map_err(zip_error)?;
        let is_torch = archive
            .members()
            .iter()
            .any(|m| m.name == "data.pkl" || m.name.ends_with("/data.pkl"));
        if !is_torch {
            return Err(remote_archive(path));
        }
        // The members read at open: the pickle and the byte order.
        let wanted: Vec<usize> = archive
            .members()
            .iter()
            .filter(|m| {
                let leaf = m.name.rsplit('/').next().unwrap_or("");
                let depth = m.name.matches('/').count();
                depth <= 1 && (leaf == "data.pkl" || leaf == "byteorder")
            })
            .map(|m| m.index)
            .collect();
        for index in wanted {
            let Some(m) = archive.members().get(index).cloned() else {
                continue;
            };
            if m.compressed_size > MAX_PICKLE_BYTES {
                return Err(zip_error(ZipError::Archive(format!(
                    "{:?} is {} bytes; at most {MAX_PICKLE_BYTES} are read",
                    m.name, m.compressed_size
                ))));
            }
            let guess = m
                .header_start
                .saturating_add(30 + m.name.len() as u64 + EXTRA_GUESS)
                .saturating_add(m.compressed_size)
                .min(len);
            remote.read_into_map(m.header_start..guess).map_err(fail)?;
            let start = zip::local_data_start(source.bytes(), m.header_start).ok_or_else(|| {
                zip_error(ZipError::Archive(format!(
                    "member {:?} has no local header at byte {}",
                    m.name, m.header_start
                )))
            })?;
            let end = start.saturating_add(m.compressed_size).min(len);
            if end > guess {
                remote.read_into_map(guess..end).map_err(fail)?;
            }
            archive.set_data_start(index, start);
        }
        let storages: HashMap<u64, usize> = archive
            .members()
            .iter()
            .map(|m| (m.data_start, m.index))
            .collect();
        let read = crate::format::pytorch::archive::read(source.bytes(), &archive);
        let unverified = Unverified::new(storages);
        into_file(
            path,
            source,
            read,
            Some(archive),
            ContainerKind::PYTORCH,
            Some(unverified),
        )
    }
}
