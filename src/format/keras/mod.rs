//! Keras 3's `.keras` archive: a zip of `config.json`, `metadata.json` and
//! `model.weights.h5`. Its weights are the HDF5 member, read in place (Keras
//! stores it, not deflated); the two JSON members are its metadata.

use std::ops::Range;
use std::sync::Arc;

use crate::format::LoadError;
use crate::format::containers::{Container, ContainerKind, Opening, Probe};
use crate::format::decode::{Data, Decode, DecodeError, Sink};
use crate::format::opened::{into_file, refusal, remote_unsupported};
use crate::format::zip::Archive;
use crate::jobs::CancelToken;

/// The weights' member.
const WEIGHTS: &str = "model.weights.h5";

/// The JSON members read as metadata, each at most this long.
const MAX_JSON: u64 = 4 << 20;

/// Keras's entry.
pub(crate) const CONTAINER: Container = Container {
    id: "keras",
    label: "Keras",
    has_data_section: false,
    separator: '/',
    claims: |p: &Probe<'_>| {
        p.extension == Some("keras")
            && (p.remote
                || p.archive
                    .is_some_and(|a| a.members().iter().any(|m| m.name == WEIGHTS)))
    },
    open,
    refuse: Some(|p: &Probe<'_>, path: &std::path::Path| {
        (p.extension == Some("keras")).then(|| {
            refusal(
                path,
                "NotKerasArchive",
                format!("a .keras file is a zip holding {WEIGHTS}; this one is not"),
                None,
            )
        })
    }),
    expand: None,
    folder: None,
};

/// A decoder of the HDF5 member, which sees the member as its file.
#[derive(Debug)]
struct InMember {
    inner: Arc<dyn Decode>,
    at: Range<u64>,
}

impl Decode for InMember {
    fn ranges(&self) -> Vec<(usize, Range<u64>)> {
        self.inner
            .ranges()
            .into_iter()
            .map(|(k, r)| {
                let shift = if k == 0 { self.at.start } else { 0 };
                (k, r.start + shift..r.end + shift)
            })
            .collect()
    }

    fn decode(
        &self,
        files: &[&[u8]],
        cancel: &CancelToken,
        sink: Sink<'_>,
    ) -> Result<(), DecodeError> {
        let whole = files.first().copied().unwrap_or(&[]);
        let member = whole
            .get(self.at.start as usize..self.at.end as usize)
            .unwrap_or(&[]);
        let mut shifted = files.to_vec();
        if let Some(first) = shifted.first_mut() {
            *first = member;
        }
        self.inner.decode(&shifted, cancel, sink)
    }
}

/// A JSON member's text, parsed, as metadata (`None` when absent or not
/// JSON; at most [`MAX_JSON`] bytes).
fn json_member(bytes: &[u8], archive: &Archive, name: &str) -> Option<serde_json::Value> {
    let m = archive.members().iter().find(|m| m.name == name)?;
    let text = archive.prefix(bytes, m, MAX_JSON).ok()?;
    serde_json::from_slice(&text).ok()
}

fn open(o: Opening) -> Result<crate::format::StoredFile, LoadError> {
    let Opening {
        path,
        source,
        archive,
    } = o;
    if source.remote().is_some() {
        return Err(remote_unsupported(&path, "Keras"));
    }
    let Some(archive) = archive else {
        return Err(refusal(&path, "NotKerasArchive", "not a zip".into(), None));
    };
    let bytes = source.bytes();
    let Some(m) = archive.members().iter().find(|m| m.name == WEIGHTS) else {
        return Err(refusal(
            &path,
            "NotKerasArchive",
            format!("the archive holds no {WEIGHTS}"),
            None,
        ));
    };
    if !m.stored || m.encrypted || m.compressed_size != m.size {
        return Err(refusal(
            &path,
            "KerasCompressed",
            format!(
                "{WEIGHTS} is compressed or encrypted in the archive; Keras stores it as is, and only a stored member is read in place"
            ),
            None,
        ));
    }
    let at = m.data_start..m.data_start.saturating_add(m.size);
    let Some(member) = bytes.get(at.start as usize..at.end as usize) else {
        return Err(refusal(
            &path,
            "Truncated",
            format!(
                "{WEIGHTS} claims bytes {}..{} of a {}-byte file",
                at.start,
                at.end,
                bytes.len()
            ),
            None,
        ));
    };
    let mut opened = crate::format::hdf5::open(member)
        .map_err(|e| refusal(&path, e.kind(), format!("{WEIGHTS}: {e}"), e.tensor()))?;
    for t in &mut opened.tensors {
        // Offsets in the archive, not in its member.
        for (key, value) in &mut t.facts {
            if *key == "offset"
                && let Some(n) = value.as_u64()
            {
                *value = (n + at.start).into();
            }
        }
        t.data = match std::mem::replace(
            &mut t.data,
            Data::Plain {
                file: 0,
                range: 0..0,
                big_endian: false,
            },
        ) {
            Data::Plain {
                file,
                range,
                big_endian,
            } => Data::Plain {
                file,
                range: range.start + at.start..range.end + at.start,
                big_endian,
            },
            Data::Decoded(inner) => Data::Decoded(Arc::new(InMember {
                inner,
                at: at.clone(),
            })),
        };
    }
    for name in ["config.json", "metadata.json"] {
        if let Some(v) = json_member(bytes, &archive, name) {
            opened.metadata.push((name.to_owned(), v));
        }
    }
    opened.header_len = opened.header_len.saturating_add(at.start);
    let file = into_file(
        path,
        source,
        ContainerKind::of(&CONTAINER),
        opened,
        Vec::new(),
    )?;
    Ok(file.with_zip(Some(archive)))
}
