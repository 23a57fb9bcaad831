//! GGUF, llama.cpp's container (GGUF.md): the header reader ([`header`]:
//! the key/value table, the tensor infos, the data section's start, every
//! count and length checked against the file), the type tables
//! ([`types`]), the file into the model ([`open`]: stored types as their
//! dtype, block types as their bytes for the quantization layer) and the
//! block types' values ([`dequant`]).

pub mod dequant;
pub mod header;
pub mod names;
pub mod open;
pub mod types;

#[cfg(test)]
mod tests;
