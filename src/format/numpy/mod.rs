//! NumPy containers (NUMPY.md): a `.npy` file holds one array, an `.npz`
//! archive one array a `*.npy` member. Both are read into the checkpoint
//! model as stored tensors: the array's bytes where they lie (a slice of
//! the file, or a deflated member's stream), its byte order, and Fortran
//! order as strides. Nothing is ever unpickled: object arrays are refused
//! by their descr before a byte of their data is looked at.

mod file;
pub mod header;
mod npz;

pub use file::NumpyParts;

/// NumPy files in the table of containers.
pub(crate) const CONTAINER: crate::format::containers::Container =
    crate::format::containers::Container {
        id: "numpy",
        label: "NumPy",
        has_data_section: false,
        separator: '.',
        claims: file::claims,
        open: file::open,
        refuse: Some(file::refuse),
        expand: None,
        folder: None,
    };

use crate::format::TensorInfo;
use crate::format::stored::{Encoding, Layout, Placement, Storage};
pub use header::NpyHeader;

/// Why a NumPy file, or a member of an archive, is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumpyError {
    /// The file is empty.
    #[error("the file is empty")]
    Empty,
    /// The first six bytes are not `\x93NUMPY`.
    #[error("not a .npy array: it does not start with the magic \\x93NUMPY")]
    BadMagic,
    /// A format version other than 1.0, 2.0 or 3.0.
    #[error("format version {major}.{minor} is not read (1.0, 2.0 and 3.0 are)")]
    Version {
        /// The major version byte.
        major: u8,
        /// The minor version byte.
        minor: u8,
    },
    /// The header's length field is larger than what is read.
    #[error("the header is {length} bytes long; at most {max} are read")]
    HeaderTooLong {
        /// The declared header length.
        length: u64,
        /// The most that is read.
        max: u64,
    },
    /// The file (or member) ends before what its header says it holds.
    #[error("{what} needs {needed} bytes but the file holds {found}")]
    Truncated {
        /// What was cut short (the header, the data).
        what: &'static str,
        /// Bytes needed from the start of the `.npy`.
        needed: u64,
        /// Bytes there are.
        found: u64,
    },
    /// The header is not the dict literal the format fixes.
    #[error("invalid header: {0}")]
    Header(String),
    /// A dtype with no tensor type here, or one that is never read.
    #[error("dtype {descr:?} is refused: {why}")]
    Dtype {
        /// The descr as written.
        descr: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// The element count or byte size of the shape overflows 64 bits.
    #[error("the shape {shape:?} overflows 64 bits in elements or bytes")]
    Overflow {
        /// The shape.
        shape: Vec<u64>,
    },
    /// The archive cannot be read, or holds two members of one name.
    #[error("{0}")]
    Zip(crate::format::zip::ZipError),
    /// An archive member named `*.npy` that is not a valid `.npy`.
    #[error("member {member:?}: {error}")]
    Member {
        /// The member's name in the archive.
        member: String,
        /// Why it is refused.
        error: Box<NumpyError>,
    },
    /// A member declares fewer bytes than its array needs.
    #[error("member {member:?} declares {declared} bytes but its array needs {needed}")]
    MemberSize {
        /// The member's name.
        member: String,
        /// Its declared uncompressed size.
        declared: u64,
        /// The bytes its `.npy` header and data need.
        needed: u64,
    },
    /// A member is kept in a way that is not read (encrypted, or
    /// compressed with another method than deflate).
    #[error("member {member:?} is {how}; only stored and deflated members are read")]
    MemberEncoding {
        /// The member's name.
        member: String,
        /// How it is kept.
        how: String,
    },
    /// A remote zip archive: its directory is at its end, which is not
    /// fetched.
    #[error(
        "a remote .npz (or other zip) is not read: its directory is at its end; download it and open the copy"
    )]
    RemoteArchive,
    /// A zip archive with no `*.npy` member.
    #[error("the zip archive holds no .npy member ({members} members)")]
    NoArrays {
        /// How many members it has.
        members: usize,
    },
}

impl NumpyError {
    /// A stable kind for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            NumpyError::Empty => "NumpyEmpty",
            NumpyError::BadMagic => "NumpyBadMagic",
            NumpyError::Version { .. } => "NumpyVersion",
            NumpyError::HeaderTooLong { .. } => "NumpyHeaderTooLong",
            NumpyError::Truncated { .. } => "NumpyTruncated",
            NumpyError::Header(_) => "NumpyInvalidHeader",
            NumpyError::Dtype { .. } => "NumpyUnsupportedDtype",
            NumpyError::Overflow { .. } => "NumpyOverflow",
            NumpyError::Zip(crate::format::zip::ZipError::Duplicate) => "NpzDuplicateMember",
            NumpyError::Zip(crate::format::zip::ZipError::Stream { .. }) => "NpzBrokenMember",
            NumpyError::Zip(_) => "NpzInvalidArchive",
            NumpyError::Member { error, .. } => error.kind(),
            NumpyError::MemberSize { .. } => "NpzMemberSize",
            NumpyError::MemberEncoding { .. } => "NpzMemberEncoding",
            NumpyError::NoArrays { .. } => "NpzNoArrays",
            NumpyError::RemoteArchive => "NpzRemote",
        }
    }

    /// The archive member the error is about, if any.
    pub fn member(&self) -> Option<&str> {
        match self {
            NumpyError::Member { member, .. }
            | NumpyError::MemberSize { member, .. }
            | NumpyError::MemberEncoding { member, .. }
            | NumpyError::Zip(crate::format::zip::ZipError::Stream { member, .. }) => Some(member),
            _ => None,
        }
    }
}

/// What NumPy says of one stored tensor, beyond the model's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyTensor {
    /// The `.npy` format version.
    pub version: (u8, u8),
    /// The descr as written.
    pub descr: String,
    /// True when stored column-major.
    pub fortran_order: bool,
    /// The archive member (`.npz` only).
    pub member: Option<String>,
    /// True when the member is deflated.
    pub deflated: bool,
}

/// A NumPy file read into the model.
#[derive(Debug)]
pub struct Opened {
    /// Bytes of the headers (the `.npy` header, or every member's local
    /// header, `.npy` header and the central directory).
    pub header_bytes: u64,
    /// The tensors, in the file's order.
    pub tensors: Vec<TensorInfo>,
    /// Where each one's bytes lie.
    pub placements: Vec<Placement>,
    /// What NumPy says of each.
    pub extras: Vec<NpyTensor>,
    /// An archive's members that are not arrays (`README.txt`), by name.
    pub other_members: Vec<String>,
    /// True for an `.npz`.
    pub is_archive: bool,
    /// The archive's directory, for decoding deflated members.
    pub(crate) archive: Option<crate::format::zip::Archive>,
}

/// The tensor name a `.npy` file gives its array: the file's name less
/// its `.npy` suffix.
pub fn name_of_file(file_name: &str) -> String {
    file_name
        .strip_suffix(".npy")
        .unwrap_or(file_name)
        .to_owned()
}

/// Reads a `.npy` file (`bytes`, the whole file) holding tensor `name`.
pub fn open_npy(bytes: &[u8], name: String) -> Result<Opened, NumpyError> {
    let h = header::parse_header(bytes)?;
    let end = h
        .data_offset
        .checked_add(h.nbytes)
        .ok_or_else(|| NumpyError::Overflow {
            shape: h.shape.clone(),
        })?;
    if end > bytes.len() as u64 {
        return Err(NumpyError::Truncated {
            what: "the data",
            needed: end,
            found: bytes.len() as u64,
        });
    }
    let storage = Storage {
        file: 0,
        file_range: h.data_offset..end,
        skip: 0,
        len: h.nbytes,
        encoding: Encoding::Plain,
    };
    let (info, placement, extra) = tensor(name, &h, storage, 0, None)?;
    Ok(Opened {
        header_bytes: h.data_offset,
        tensors: vec![info],
        placements: vec![placement],
        extras: vec![extra],
        other_members: Vec::new(),
        is_archive: false,
        archive: None,
    })
}

pub use npz::open_npz;

/// The model's entry, placement and NumPy facts of one array.
fn tensor(
    name: String,
    h: &NpyHeader,
    storage: Storage,
    storage_id: usize,
    member: Option<String>,
) -> Result<(TensorInfo, Placement, NpyTensor), NumpyError> {
    let deflated = storage.encoding != Encoding::Plain;
    let begin = if deflated {
        0
    } else {
        storage.file_range.start
    };
    let layout = if h.fortran_order {
        Layout::fortran(&h.shape)
    } else {
        Layout::Contiguous
    };
    let overflow = || NumpyError::Overflow {
        shape: h.shape.clone(),
    };
    let info = TensorInfo::new(name, h.dtype, h.shape.clone(), begin).ok_or_else(overflow)?;
    let placement = Placement::new(h.dtype, &h.shape, h.byte_order, layout, storage, storage_id)
        .map_err(NumpyError::Header)?;
    Ok((
        info,
        placement,
        NpyTensor {
            version: h.version,
            descr: h.descr.clone(),
            fortran_order: h.fortran_order,
            member,
            deflated,
        },
    ))
}
