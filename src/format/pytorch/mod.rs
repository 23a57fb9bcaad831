//! PyTorch checkpoints (PICKLE.md), read without running them. This first
//! part is the pickle machine, the security boundary: [`pickle`] reads any
//! pickle into a graph of plain values and names every global it would
//! import; [`allowlist`] says which of those torch's `weights_only` loader
//! allows. Nothing here imports or calls anything. [`objects`] reads the
//! tensors and leaves off a safe graph; the containers are [`archive`]
//! (`torch.save`'s zip), [`legacy`] (the format before it) and [`bare`] (a
//! pickle alone, which holds no tensors).

pub mod allowlist;
pub mod archive;
pub mod bare;
mod file;
pub mod legacy;
pub mod objects;
pub mod pickle;
mod remote;
mod text;
pub mod value;

use crate::format::containers::{Container, Probe};

/// PyTorch files in the table of containers: a `torch.save` zip (a
/// `data.pkl` among its members; any zip, remotely, whose directory is
/// read from its end) or the legacy format's magic.
pub(crate) const CONTAINER: Container = Container {
    id: "pytorch",
    label: "PyTorch",
    has_data_section: false,
    separator: '.',
    claims: |p: &Probe<'_>| {
        if p.remote {
            return crate::format::zip::is_zip(p.bytes);
        }
        p.bytes.starts_with(legacy::MAGIC)
            || p.archive.is_some_and(|a| {
                a.members()
                    .iter()
                    .any(|m| m.name == "data.pkl" || m.name.ends_with("/data.pkl"))
            })
    },
    open: |o| {
        if o.source.remote().is_some() {
            remote::open_remote(o.path, o.source)
        } else {
            file::open_local(o)
        }
    },
    refuse: None,
    expand: None,
    folder: None,
};

/// A bare pickle (local): no tensors, only what its pickle names.
pub(crate) const PICKLE: Container = Container {
    id: "pickle",
    label: "Python pickle",
    has_data_section: false,
    separator: '.',
    claims: |p: &Probe<'_>| !p.remote && p.bytes.first() == Some(&bare::PROTO),
    open: file::open_bare,
    refuse: None,
    expand: None,
    folder: None,
};

/// What a torch file's pickle says beyond its tensors: the globals it
/// names, those outside the allowlist, and its non-tensor leaves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PickleReport {
    /// Every global named, `module.name` as written, sorted.
    pub globals: Vec<String>,
    /// Those not allowlisted: when any, the file is unsafe and not read.
    pub unsafe_globals: Vec<String>,
    /// The non-tensor leaves: path → JSON value.
    pub leaves: Vec<(String, serde_json::Value)>,
}

/// The globals of `globals` (`module.name`) that are not allowlisted,
/// sorted: what makes a file unsafe.
pub fn unsafe_globals<'a>(globals: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    unsafe_globals_beyond(globals, &[])
}

/// [`unsafe_globals`] for a container whose pickles may also name `also`
/// (`module.name` each: DCP's and DeepSpeed's record classes).
pub fn unsafe_globals_beyond<'a>(
    globals: impl IntoIterator<Item = &'a String>,
    also: &[&str],
) -> Vec<String> {
    let mut out: Vec<String> = globals
        .into_iter()
        .filter(|g| {
            !also.contains(&g.as_str())
                && g.rsplit_once('.')
                    .is_none_or(|(module, name)| !allowlist::is_allowed(module, name))
        })
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests;
