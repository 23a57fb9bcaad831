//! PyTorch checkpoints (PICKLE.md), read without running them. This first
//! part is the pickle machine, the security boundary: [`pickle`] reads any
//! pickle into a graph of plain values and names every global it would
//! import; [`allowlist`] says which of those torch's `weights_only` loader
//! allows. Nothing here imports or calls anything. The container readers
//! (zip, legacy, index) and the tensors built from the graph come next.

pub mod allowlist;
pub mod archive;
pub mod objects;
pub mod pickle;
mod text;
pub mod value;

/// The globals of `globals` (`module.name`) that are not allowlisted,
/// sorted: what makes a file unsafe.
pub fn unsafe_globals<'a>(globals: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = globals
        .into_iter()
        .filter(|g| {
            g.rsplit_once('.')
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
