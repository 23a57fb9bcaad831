//! What each fuzz target does with one input, shared by the targets
//! (`fuzz_targets/`) and by `tests/it/fuzz_regressions.rs`, which replays the
//! seeds and every committed crash through the same calls. Each function
//! ignores `Ok` and `Err`: the only failure is a panic, a hang or an abort.

use std::path::Path;

use tensorscope::diff::{DiffOptions, diff};
use tensorscope::export::{ExportOptions, export_tensor};
use tensorscope::format::{Checkpoint, INDEX_FILE_NAME, parse};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::stats::{self, StatsOptions};

/// The shard every `index` input sits next to, as the index names it.
pub const SHARD_NAME: &str = "model-00001-of-00001.safetensors";

/// Elements and bytes the `readers` target reads at most per input (over
/// all tensors); larger inputs are parsed and opened but not read.
pub const READ_LIMIT: u64 = 1 << 20;

/// The shard of the `index` target: one F32 tensor `a` of shape `[2]`.
pub fn shard_bytes() -> Vec<u8> {
    let mut header = String::from(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#);
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&1.0f32.to_le_bytes());
    bytes.extend_from_slice(&(-2.5f32).to_le_bytes());
    bytes
}

/// `header`: the validating parser on the input as a whole file.
pub fn header(data: &[u8]) {
    let _ = parse(data);
}

/// `index`: the input as `model.safetensors.index.json` in `dir`, next to
/// [`SHARD_NAME`] (written once), opened as a checkpoint.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn index(dir: &Path, data: &[u8]) {
    let shard = dir.join(SHARD_NAME);
    if !shard.exists() {
        std::fs::write(&shard, shard_bytes()).expect("the fixed shard can be written");
    }
    let path = dir.join(INDEX_FILE_NAME);
    std::fs::write(&path, data).expect("the index can be written");
    if let Ok(ck) = Checkpoint::open(&path) {
        let _ = ck.data_bytes();
        let _ = ck.warnings();
    }
}

/// `readers`: if the parser accepts the input, it is written to `dir`,
/// opened, scanned for statistics, diffed against itself, and its first
/// tensor exported to `.npy` and `.csv`.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn readers(dir: &Path, data: &[u8]) {
    if parse(data).is_err() {
        return;
    }
    let path = dir.join("input.safetensors");
    std::fs::write(&path, data).expect("the input can be written");
    let Ok(ck) = Checkpoint::open(&path) else {
        return;
    };
    read_all(dir, &ck, &["out.npy", "out.csv"]);
}

/// `frameworks`: the input written to `dir` as `name` (`input.onnx`,
/// `ckpt.index`, `input.h5`, `input.msgpack`; for a TensorFlow index, also
/// as its one data shard), opened as a checkpoint and, when it opens and
/// its tensors are small, read by every verb's path. A `.metadata` (DCP's
/// index) gets the `.distcp` files of a real two-rank save beside it.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn frameworks(dir: &Path, data: &[u8], name: &str) {
    let path = dir.join(name);
    std::fs::write(&path, data).expect("the input can be written");
    // A distributed checkpoint's index: the ranks' files it names beside it
    // (a two-rank FSDP2 save by torch).
    if name == ".metadata" {
        for (file, bytes) in DCP_RANKS {
            std::fs::write(dir.join(file), bytes).expect("the input can be written");
        }
    }
    if let Some(prefix) = name.strip_suffix(".index") {
        std::fs::write(dir.join(format!("{prefix}.data-00000-of-00001")), data)
            .expect("the input can be written");
    }
    let Ok(ck) = Checkpoint::open(&path) else {
        return;
    };
    let _ = ck.verify_data(&CancelToken::new());
    read_all(dir, &ck, &["out.npy", "out.csv"]);
}

/// When `ck`'s tensors are small ([`READ_LIMIT`]): every tensor scanned,
/// the checkpoint diffed against itself, its first tensor exported to each
/// of `outputs` in `dir`.
fn read_all(dir: &Path, ck: &Checkpoint, outputs: &[&str]) {
    let (numel, nbytes) = ck.entries().fold((0u64, 0u64), |(n, b), (_, info)| {
        (
            n.saturating_add(info.numel()),
            b.saturating_add(info.nbytes()),
        )
    });
    if numel > READ_LIMIT || nbytes > READ_LIMIT {
        return;
    }
    let cancel = CancelToken::new();
    let _ = stats::scan(
        ck,
        ck.tensors(),
        &StatsOptions::default(),
        &cancel,
        &Progress::new(),
    );
    let _ = diff(ck, ck, &DiffOptions::default(), &cancel, &Progress::new());
    if let Some(&first) = ck.tensors().first() {
        for out in outputs {
            let _ = export_tensor(
                ck,
                first,
                &dir.join(out),
                &ExportOptions::default(),
                &cancel,
                &Progress::new(),
            );
        }
    }
}

/// `numpy`: the input written as a `.npy` and as an `.npz` (the name only
/// chooses which error a file that is neither gets; the content chooses the
/// container, so its seeds hold torch zips too), opened, and, when its
/// tensors are small, scanned, diffed against itself and its first tensor
/// exported: byte-swapped, strided and deflated tensors are read through
/// scratch space.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn numpy(dir: &Path, data: &[u8]) {
    for name in ["input.npy", "input.npz"] {
        let path = dir.join(name);
        std::fs::write(&path, data).expect("the input can be written");
        let Ok(ck) = Checkpoint::open(&path) else {
            continue;
        };
        let _ = ck.verify_data(&CancelToken::new());
        for t in ck.tensors() {
            let _ = ck.stored_facts(*t);
        }
        read_all(dir, &ck, &["out.npy"]);
    }
}

/// The `pytorch` target: `data` through the pickle machine and the walk
/// of its graph, then as a torch file (zip, legacy or bare pickle) through
/// every reader, as `.pt` and as a `.bin` beside nothing else.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn pytorch(dir: &Path, data: &[u8]) {
    use tensorscope::format::pytorch::{objects, pickle};
    if let Ok(parsed) = pickle::parse_within(data, 16 << 20) {
        let _ = objects::contents(&parsed.graph);
    }
    // A small budget: most inputs run out of it, and the rest of the
    // stream is then scanned for globals.
    let _ = pickle::parse_within(data, 4096);
    let path = dir.join("input.pt");
    std::fs::write(&path, data).expect("the input can be written");
    let Ok(ck) = Checkpoint::open(&path) else {
        return;
    };
    let _ = ck.verify_data(&CancelToken::new());
    let _ = ck.unsafe_globals();
    if ck.readable().is_err() {
        return;
    }
    for t in ck.tensors() {
        let _ = ck.stored_facts(*t);
    }
    read_all(dir, &ck, &["out.npy"]);
}

/// A folder of this process for the targets' files, made on first use.
/// libFuzzer ends the process with `exit`, so a `tempfile` guard would not
/// clean up either; the folder is one per run, under the system's temp dir.
///
/// # Panics
///
/// If the folder cannot be made.
#[allow(
    clippy::disallowed_methods,
    reason = "a fuzz run is its own process, with no caller to name a folder"
)]
pub fn scratch(target: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("tensorscope-fuzz-{target}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the scratch folder can be made");
    dir
}

/// The `.metadata` of the two-rank FSDP2 fixture, written beside a fuzzed
/// `.distcp` file.
const DCP_METADATA: &[u8] = include_bytes!("../../tests/data/dcp/fsdp2_2rank/.metadata");

/// The `.distcp` files of the two-rank FSDP2 fixture, written beside a
/// fuzzed `.metadata` (its storage entries name them).
const DCP_RANKS: [(&str, &[u8]); 2] = [
    (
        "__0_0.distcp",
        include_bytes!("../../tests/data/dcp/fsdp2_2rank/__0_0.distcp"),
    ),
    (
        "__1_0.distcp",
        include_bytes!("../../tests/data/dcp/fsdp2_2rank/__1_0.distcp"),
    ),
];

/// The names a `scan` input is written as: its first byte chooses one (a
/// scan reads a file by its content, and by its name where that is silent).
pub const SCAN_NAMES: &[&str] = &[
    "input.pkl",
    "input.pt",
    "input.bin",
    "input.npy",
    "input.npz",
    "input.keras",
    "input.gguf",
    "input.safetensors",
    ".metadata",
    "__0_0.distcp",
    "input",
];

/// `scan`: the input after its first byte, written to `dir` as the name
/// that byte chooses ([`SCAN_NAMES`]), judged by `scan` (SCAN.md). A
/// `.distcp` input is judged beside the `.metadata` of a real save.
///
/// # Panics
///
/// If `dir` cannot be written to (never because of the input).
pub fn scan(dir: &Path, data: &[u8]) {
    let Some((&which, content)) = data.split_first() else {
        return;
    };
    let name = SCAN_NAMES[usize::from(which) % SCAN_NAMES.len()];
    if name.ends_with(".distcp") {
        std::fs::write(dir.join(".metadata"), DCP_METADATA).expect("the input can be written");
    }
    let path = dir.join(name);
    std::fs::write(&path, content).expect("the input can be written");
    if let Ok(row) = tensorscope::scan::scan_file(&path, name.into()) {
        assert!(row.verdict.fails() || row.findings.is_empty());
    }
}
