//! A remote torch zip, opened from its end (PICKLE.md §9): the end records,
//! the central directory and `data.pkl` are read by exact ranges, never a
//! storage. A storage's data start is where `torch.save` puts it, and is
//! checked against its local header when the storage is fetched.

use std::collections::HashMap;
use std::path::PathBuf;

use super::archive::{MAX_PICKLE_BYTES, TorchError};
use super::file::{Unverified, into_file};
use crate::format::containers::ContainerKind;
use crate::format::zip::{self, ZipError};
use crate::format::{LoadError, StoredFile};
use crate::source::{RemoteError, Source};

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
        let fail = |error: RemoteError| LoadError::Remote {
            path: path.clone(),
            error,
        };
        let zip_error = |e: ZipError| LoadError::Pytorch {
            path: path.clone(),
            error: TorchError::Zip(e),
        };
        let fetch_error = |e: zip::Fetch| match e {
            zip::Fetch::Remote(e) => fail(e),
            zip::Fetch::Zip(e) => zip_error(e),
        };
        let mut archive = zip::fetch_directory(remote, source.bytes()).map_err(fetch_error)?;
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
            zip::fetch_member(
                remote,
                source.bytes(),
                &mut archive,
                index,
                MAX_PICKLE_BYTES,
            )
            .map_err(fetch_error)?;
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
