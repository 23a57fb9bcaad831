//! GGUF, llama.cpp's container (GGUF.md). This first part is the header
//! reader ([`header`]: the key/value table, the tensor infos, the data
//! section's start, every count and length checked against the file) and
//! the type tables ([`types`]) and the first block decoders ([`dequant`]);
//! opening a GGUF as a checkpoint, the other decoders and the verbs build
//! on it.

pub mod dequant;
pub mod header;
pub mod types;

#[cfg(test)]
mod tests;
