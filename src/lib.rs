//! Tensorscope: a fast, safe explorer for safetensors checkpoints.
//!
//! The library is the whole engine, and knows no screen: [`source`] brings a
//! file's bytes (a local map, or a remote file read in ranges through a cache),
//! [`format`](mod@format) reads
//! and validates files (zero-copy, memory-mapped) and writes them,
//! [`dtype`] decodes and converts every element type bit-exactly, [`stats`]
//! summarises values, [`diff`] compares two checkpoints, [`export`] writes a
//! tensor as `.npy`/`.csv`/`.bin`/`.png`, [`resave`] writes a new checkpoint
//! from an old one, [`fsio`] writes every file atomically, and [`jobs`] carries cancellation and progress. The
//! command line (the `tensorscope` binary) and the desktop explorer
//! (`gui`, behind the default `gui` feature) are two faces over it.

pub mod arch;
/// The command line's verbs and their documents, shared by the
/// `tensorscope` binary and the Python module (one serializer for both).
#[doc(hidden)]
pub mod cli;
pub mod diff;
pub mod dtype;
pub mod export;
pub mod format;
pub mod fsio;
#[cfg(feature = "gui")]
pub mod gui;
pub mod jobs;
pub mod launch;
mod mem;
pub mod platform;
#[cfg(feature = "python")]
mod python;
pub mod quant;
pub mod resave;
pub mod scan;
pub mod series;
pub mod source;
pub mod stats;
pub mod text;

pub use dtype::Dtype;
pub use format::{Checkpoint, FormatError, Header, LoadError, StoredFile, TensorInfo};
