//! macOS: the open-document events of Finder (see `open_files`).

/// Starts receiving Finder's open-document events (not yet written).
pub(super) fn install_open_documents() {}
