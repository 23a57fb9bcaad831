//! Integration tests: one binary, one module per area.

mod changed;
mod cli;
mod contract;
mod dcp;
mod deepspeed;
mod desktop;
mod diff;
mod exe;
mod export;
mod fixtures;
mod frameworks;
mod fuzz_regressions;
mod gguf;
mod gguf_codes;
mod gguf_hostile;
mod gguf_verbs;
mod hostile;
mod kinds;
mod numpy;
mod oracle;
mod props;
mod pytorch;
mod quant;
mod quant_oracle;
mod remote;
mod resave;
mod scan;
mod series;
mod shards;
mod shipping;
mod stats;
#[cfg(feature = "gui")]
mod ui;
mod windows;
