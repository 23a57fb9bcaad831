//! Tensorscope: a fast, safe explorer for safetensors checkpoints.
//!
//! The library is the whole engine: [`format`] reads and validates files
//! (zero-copy, memory-mapped), [`dtype`] decodes every element type
//! bit-exactly, [`export`] writes a tensor as `.npy`/`.csv`/`.bin`/`.png`,
//! and [`cli`] implements the scriptable command line. The
//! desktop explorer and the command line are thin layers over these.

pub mod cli;
pub mod demo;
pub mod desktop;
pub mod diff;
pub mod dtype;
pub mod export;
pub mod format;
pub mod heatmap;
pub mod jobs;
pub mod stats;
pub mod ui;

pub use dtype::Dtype;
pub use format::{Checkpoint, FormatError, Header, LoadError, SafetensorsFile, TensorInfo};
