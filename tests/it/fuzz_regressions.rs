//! Replays the fuzz targets' seeds (`fuzz/seeds/<target>/`) and every input
//! that once crashed one (`tests/fuzz_regressions/<target>/`) through the
//! targets' own calls, without the fuzz build: none may panic.

use std::path::{Path, PathBuf};

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod targets;

/// The `gguf` target: its work is in its own file (its libFuzzer entry is
/// left out of this build).
#[path = "../../fuzz/fuzz_targets/gguf.rs"]
#[allow(dead_code)]
mod gguf_target;

#[path = "../../fuzz/fuzz_targets/flax.rs"]
#[allow(dead_code)]
mod flax_target;
#[path = "../../fuzz/fuzz_targets/hdf5.rs"]
#[allow(dead_code)]
mod hdf5_target;
/// The other frameworks' targets: their readers alone, in their own files.
#[path = "../../fuzz/fuzz_targets/onnx.rs"]
#[allow(dead_code)]
mod onnx_target;
#[path = "../../fuzz/fuzz_targets/tensorflow.rs"]
#[allow(dead_code)]
mod tensorflow_target;

/// The input files of a folder: every file but the READMEs, sorted.
fn inputs(folder: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = read
        .map(|e| e.expect("the folder can be listed").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.eq_ignore_ascii_case("README.md"))
        })
        .collect();
    files.sort();
    files
}

/// Every seed and regression of `target`, handed to `run` one by one;
/// returns how many there were.
fn replay(target: &str, run: &mut dyn FnMut(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = inputs(&root.join("fuzz/seeds").join(target));
    files.extend(inputs(&root.join("tests/fuzz_regressions").join(target)));
    for file in &files {
        let data = std::fs::read(file).expect("the input can be read");
        eprintln!("replaying {}", file.display());
        run(&data);
    }
    files.len()
}

#[test]
fn scan_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(replay("scan", &mut |data| targets::scan(dir.path(), data)) > 0);
}

#[test]
fn header_inputs_replay() {
    assert!(replay("header", &mut targets::header) > 0);
}

#[test]
fn index_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(replay("index", &mut |data| targets::index(dir.path(), data)) > 0);
}

#[test]
fn readers_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(replay("readers", &mut |data| targets::readers(dir.path(), data)) > 0);
}

#[test]
fn the_index_seed_opens_next_to_the_fixed_shard() {
    // The seeds exercise the success path too, not only errors.
    let dir = tempfile::tempdir().expect("tempdir");
    let index = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/index/ok"))
        .expect("the seed can be read");
    targets::index(dir.path(), &index);
    let ck = tensorscope::Checkpoint::open(&dir.path().join(tensorscope::format::INDEX_FILE_NAME))
        .expect("the seed is a valid index");
    assert_eq!(ck.tensors().len(), 1);
    assert!(ck.warnings().is_empty(), "{:?}", ck.warnings());
}

#[test]
fn numpy_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(replay("numpy", &mut |data| targets::numpy(dir.path(), data)) > 0);
}

#[test]
fn pytorch_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(replay("pytorch", &mut |data| targets::pytorch(dir.path(), data)) > 0);
}

#[test]
fn gguf_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(replay("gguf", &mut |data| gguf_target::gguf(dir.path(), data)) > 0);
}

/// A framework's target: its seeds' folder, the name its file is
/// written under, its reader alone.
type Framework = (&'static str, &'static str, fn(&[u8]));

#[test]
fn the_other_frameworks_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let targets: [Framework; 4] = [
        ("onnx", "input.onnx", onnx_target::onnx),
        ("tensorflow", "ckpt.index", tensorflow_target::tensorflow),
        ("hdf5", "input.h5", hdf5_target::hdf5),
        ("flax", "input.msgpack", flax_target::flax),
    ];
    for (target, name, reader) in targets {
        let n = replay(target, &mut |data| {
            reader(data);
            targets::frameworks(dir.path(), data, name);
        });
        assert!(n > 0, "{target} has no seeds");
    }
}

#[test]
fn dcp_inputs_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = replay("dcp", &mut |data| {
        targets::frameworks(dir.path(), data, ".metadata");
    });
    assert!(n > 0, "dcp has no seeds");
}

/// Mutated seeds of the container targets: a seed with a few bytes changed
/// and maybe cut short (headers, opcodes, lengths, zip records, deflated
/// streams and storage counts broken as a byte can break them). None may
/// panic. Cases: `PROPTEST_CASES` (default 256).
mod mutations {
    use proptest::prelude::*;

    /// The seeds of a target, read once per case (they are small).
    fn seeds(target: &str) -> Vec<Vec<u8>> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/seeds")
            .join(target);
        super::inputs(&root)
            .iter()
            .map(|p| std::fs::read(p).expect("seed"))
            .collect()
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256)
    }

    /// Seed `seed` of `target` with `edits` applied, cut at `cut`.
    fn mutated(
        target: &str,
        seed: prop::sample::Index,
        edits: Vec<(prop::sample::Index, u8)>,
        cut: Option<prop::sample::Index>,
    ) -> Vec<u8> {
        let seeds = seeds(target);
        let mut data = seed.get(&seeds).clone();
        for (at, byte) in edits {
            let i = at.index(data.len());
            data[i] = byte;
        }
        if let Some(c) = cut {
            data.truncate(c.index(data.len() + 1));
        }
        data
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, .. ProptestConfig::default() })]

        #[test]
        fn mutated_numpy_files_never_panic(
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<Option<prop::sample::Index>>(),
        ) {
            let data = mutated("numpy", seed, edits, cut);
            let dir = tempfile::tempdir().expect("tempdir");
            super::targets::numpy(dir.path(), &data);
        }

        #[test]
        fn mutated_torch_files_never_panic(
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<Option<prop::sample::Index>>(),
        ) {
            let data = mutated("pytorch", seed, edits, cut);
            let dir = tempfile::tempdir().expect("tempdir");
            super::targets::pytorch(dir.path(), &data);
        }

        #[test]
        fn mutated_gguf_files_never_panic(
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<Option<prop::sample::Index>>(),
        ) {
            let data = mutated("gguf", seed, edits, cut);
            let dir = tempfile::tempdir().expect("tempdir");
            super::gguf_target::gguf(dir.path(), &data);
        }

        #[test]
        fn mutated_files_never_panic_a_scan(
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<Option<prop::sample::Index>>(),
        ) {
            let data = mutated("scan", seed, edits, cut);
            let dir = tempfile::tempdir().expect("tempdir");
            super::targets::scan(dir.path(), &data);
        }

        #[test]
        fn mutated_files_of_the_other_frameworks_never_panic(
            which in 0usize..5,
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<Option<prop::sample::Index>>(),
        ) {
            let (target, name) = [
                ("onnx", "input.onnx"),
                ("tensorflow", "ckpt.index"),
                ("hdf5", "input.h5"),
                ("flax", "input.msgpack"),
                ("dcp", ".metadata"),
            ][which];
            let data = mutated(target, seed, edits, cut);
            let dir = tempfile::tempdir().expect("tempdir");
            super::targets::frameworks(dir.path(), &data, name);
        }
    }
}
