//! Quantized checkpoints: fixture generators built from the formulas of
//! QUANT.md, each with the values the writing library would dequantize to.

mod cli;
mod decode;
pub mod r#gen;
mod mutate;
mod resave;
