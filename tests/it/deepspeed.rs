//! DeepSpeed ZeRO checkpoints (DISTRIBUTED.md §1, §6, §9) against the
//! folders DeepSpeed itself wrote (`scripts/make_distributed_fixtures.py
//! deepspeed`, `tests/data/deepspeed/MANIFEST.json`): every global tensor's
//! name, dtype, shape and bytes as `zero_to_fp32` rebuilds them, opened
//! through `latest`, as the step folder and as its model-states file; the
//! `zero` and `pickle` reports; every verb; and hostile folders refused.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::Digest;
use tensorscope::format::Checkpoint;
use tensorscope::jobs::{CancelToken, Progress};

use crate::pytorch::build::{run, zip_of};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/deepspeed")
}

fn manifest() -> Value {
    let text = std::fs::read(data_dir().join("MANIFEST.json")).expect("manifest");
    serde_json::from_slice(&text).expect("manifest JSON")
}

fn fixtures() -> Vec<(Value, PathBuf)> {
    manifest()["fixtures"]
        .as_array()
        .expect("fixtures")
        .iter()
        .map(|f| {
            (
                f.clone(),
                data_dir().join(f["folder"].as_str().expect("folder")),
            )
        })
        .collect()
}

/// The ways a fixture opens: the folder holding `latest`, the step
/// folder, and the step folder's first model-states file.
fn ways(entry: &Value, dir: &Path) -> Vec<PathBuf> {
    let step = dir.join(entry["step_folder"].as_str().expect("step folder"));
    let first = entry["layout"]["model_files"][0]
        .as_str()
        .expect("model file");
    vec![dir.to_path_buf(), step.clone(), step.join(first)]
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn sha(bytes: &[u8]) -> String {
    hex(&sha2::Sha256::digest(bytes))
}

fn names(entry: &Value) -> Vec<&str> {
    entry["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect()
}

#[test]
fn every_global_tensor_reads_as_zero_to_fp32_rebuilds_it() {
    for (entry, dir) in fixtures() {
        for path in ways(&entry, &dir) {
            let what = path.display().to_string();
            let ck = Checkpoint::open_readable(&path).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(ck.container().id(), "deepspeed", "{what}");
            let got: Vec<&str> = ck.entries().map(|(_, i)| i.name()).collect();
            assert_eq!(got, names(&entry), "{what}: zero_to_fp32's names and order");
            for t in entry["not_reconstructed"].as_array().expect("list") {
                let name = t["name"].as_str().expect("name");
                assert!(ck.find(name).is_none(), "{what}: {name} is not rebuilt");
            }
            let all = ck.tensors().to_vec();
            let _fetched = ck
                .fetch(&all, &CancelToken::new(), &Progress::new())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            for t in entry["tensors"].as_array().expect("tensors") {
                let name = t["name"].as_str().expect("name");
                let r = ck.find(name).expect("found");
                let info = ck.info(r).expect("info");
                assert_eq!(info.dtype().name(), t["dtype"], "{what}: {name}");
                assert_eq!(
                    serde_json::json!(info.shape()),
                    t["shape"],
                    "{what}: {name}"
                );
                assert_eq!(
                    sha(ck.bytes(r)),
                    t["sha256"].as_str().expect("sha256"),
                    "{what}: {name}: bytes"
                );
            }
        }
    }
}

#[test]
fn info_reports_the_zero_layout_the_roles_and_the_pickle() {
    for (entry, dir) in fixtures() {
        for path in ways(&entry, &dir) {
            let what = path.display().to_string();
            let tmp = tempfile::tempdir().expect("tmp");
            let r = run(tmp.path(), &["info", path.to_str().expect("utf-8")]);
            assert_eq!(r.code, 0, "{what}: {}", r.doc);
            assert_eq!(r.doc["format"], "deepspeed", "{what}");
            assert_eq!(r.doc["zero"], entry["zero"], "{what}");
            let tensors = r.doc["tensors"].as_array().expect("tensors");
            assert_eq!(tensors.len(), names(&entry).len(), "{what}");
            for t in entry["tensors"].as_array().expect("tensors") {
                let got = tensors
                    .iter()
                    .find(|g| g["name"] == t["name"])
                    .unwrap_or_else(|| panic!("{what}: {}", t["name"]));
                assert_eq!(got["dtype"], t["dtype"], "{what}");
                assert_eq!(got["shape"], t["shape"], "{what}");
                assert_eq!(got["role"], t["kind"], "{what}: {}", t["name"]);
                if let Some(target) = t.get("alias_of") {
                    assert_eq!(&got["alias_of"], target, "{what}");
                }
            }
            let mut globals: Vec<String> = entry["pickle"]["globals"]
                .as_array()
                .expect("globals")
                .iter()
                .map(|g| g.as_str().expect("global").to_owned())
                .collect();
            globals.sort();
            assert_eq!(
                r.doc["pickle"]["globals"],
                serde_json::json!(globals),
                "{what}"
            );
            assert_eq!(
                r.doc["pickle"]["unsafe_globals"],
                serde_json::json!([]),
                "{what}"
            );
            assert_eq!(r.doc["metadata"]["ds_version"], "0.19.8", "{what}");
        }
    }
}

/// The data of a `.npy` file: what follows its header.
fn npy_data(bytes: &[u8]) -> &[u8] {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (len, at) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    &bytes[at + len..]
}

#[test]
fn every_verb_works_on_the_global_tensors() {
    for (entry, dir) in fixtures() {
        for path in ways(&entry, &dir).into_iter().take(2) {
            let what = path.display().to_string();
            let path = path.to_str().expect("utf-8");
            let tmp = tempfile::tempdir().expect("tmp");
            let r = run(tmp.path(), &["validate", path]);
            assert_eq!(
                (r.code, &r.doc["valid"]),
                (0, &Value::Bool(true)),
                "{what}: {}",
                r.doc
            );
            let r = run(tmp.path(), &["stats", path]);
            assert_eq!(r.code, 0, "{what}: {}", r.doc);
            for (t, s) in entry["tensors"]
                .as_array()
                .expect("tensors")
                .iter()
                .zip(r.doc["tensors"].as_array().expect("stats"))
            {
                assert_eq!(s["name"], t["name"], "{what}");
                let n: u64 = t["shape"]
                    .as_array()
                    .expect("shape")
                    .iter()
                    .map(|d| d.as_u64().expect("dim"))
                    .product();
                assert_eq!(s["count"], n, "{what}: {}", t["name"]);
            }
            let out = tmp.path().join("consolidated.safetensors");
            let r = run(
                tmp.path(),
                &["resave", path, "-o", out.to_str().expect("utf-8")],
            );
            assert_eq!(r.code, 0, "{what}: {}", r.doc);
            // The consolidated file, read by the official crate: deepspeed's
            // tensors, byte for byte, and nothing else.
            let bytes = std::fs::read(&out).expect("read");
            let st = safetensors::SafeTensors::deserialize(&bytes).expect("oracle");
            let mut stored: Vec<String> = st.names().into_iter().map(str::to_owned).collect();
            stored.sort();
            let mut want: Vec<String> = names(&entry).into_iter().map(str::to_owned).collect();
            want.sort();
            assert_eq!(stored, want, "{what}");
            for t in entry["tensors"].as_array().expect("tensors") {
                let name = t["name"].as_str().expect("name");
                let view = st
                    .tensor(name)
                    .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
                assert_eq!(format!("{:?}", view.dtype()), t["dtype"], "{what}: {name}");
                assert_eq!(
                    sha(view.data()),
                    t["sha256"].as_str().expect("sha256"),
                    "{what}: {name}"
                );
            }
            let r = run(tmp.path(), &["diff", path, out.to_str().expect("utf-8")]);
            assert_eq!(r.code, 0, "{what}: {}", r.doc);
            // A parameter cut across the ranks, exported.
            let npy = tmp.path().join("t.npy");
            let r = run(
                tmp.path(),
                &[
                    "export",
                    path,
                    "embed.weight",
                    "-o",
                    npy.to_str().expect("utf-8"),
                ],
            );
            assert_eq!(r.code, 0, "{what}: {}", r.doc);
            let t = entry["tensors"]
                .as_array()
                .expect("tensors")
                .iter()
                .find(|t| t["name"] == "embed.weight")
                .expect("embed.weight");
            let exported = std::fs::read(&npy).expect("npy");
            assert_eq!(
                sha(npy_data(&exported)),
                t["sha256"].as_str().expect("sha256"),
                "{what}"
            );
        }
    }
}

#[test]
fn a_model_states_file_with_no_optimizer_file_beside_it_opens_as_pytorch() {
    let tmp = tempfile::tempdir().expect("tmp");
    let file = tmp.path().join("mp_rank_00_model_states.pt");
    std::fs::copy(
        data_dir().join("zero2/global_step1/mp_rank_00_model_states.pt"),
        &file,
    )
    .expect("copy");
    let ck = Checkpoint::open_readable(&file).expect("opens");
    assert_eq!(ck.container().id(), "pytorch");
    assert!(ck.find("module.embed.weight").is_some());
}

/// A copy of fixture `folder` (its `latest`, scripts and step folder) in
/// a temporary folder, at `ckpt/`.
fn copied(folder: &str) -> tempfile::TempDir {
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("read_dir") {
            let e = e.expect("entry");
            if e.path().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
            }
        }
    }
    let tmp = tempfile::tempdir().expect("tmp");
    copy_dir(&data_dir().join(folder), &tmp.path().join("ckpt"));
    tmp
}

/// The step folder of a copy.
fn step(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("ckpt/global_step1")
}

/// Rewrites the torch zip `file` with `edit` applied to its `data.pkl`
/// (a new zip, so that the CRC-32s hold).
fn edit_pickle(file: &Path, edit: impl Fn(&mut Vec<u8>)) {
    let bytes = std::fs::read(file).expect("read");
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("zip");
    let mut entries = Vec::new();
    for i in 0..z.len() {
        let mut m = z.by_index(i).expect("member");
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut m, &mut data).expect("member bytes");
        let name = m.name().expect("name").into_owned();
        if name.ends_with("/data.pkl") {
            edit(&mut data);
        }
        entries.push((name, data));
    }
    let refs: Vec<(&str, Vec<u8>)> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.clone()))
        .collect();
    std::fs::write(file, zip_of(&refs, false)).expect("write");
}

/// Replaces the first `from` after `anchor` with `to` (same length).
fn replace_after(bytes: &mut [u8], anchor: &[u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let a = find(bytes, anchor)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(anchor)))
        + anchor.len();
    let at = a + find(&bytes[a..], from)
        .unwrap_or_else(|| panic!("{from:?} not found after the anchor"));
    bytes[at..at + from.len()].copy_from_slice(to);
}

/// Every verb on `path` ends cleanly with the kind, and no output file is
/// left.
fn assert_refused(tmp: &tempfile::TempDir, path: &Path, kind: &str) {
    let path = path.to_str().expect("utf-8");
    let out = tmp.path().join("out.safetensors");
    let npy = tmp.path().join("out.npy");
    for args in [
        vec!["info", path],
        vec!["stats", path],
        vec!["resave", path, "-o", out.to_str().expect("utf-8")],
        vec![
            "export",
            path,
            "embed.weight",
            "-o",
            npy.to_str().expect("utf-8"),
        ],
    ] {
        let r = run(tmp.path(), &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.doc);
        assert_eq!(r.doc["error"]["kind"], kind, "{args:?}: {}", r.doc);
    }
    let r = run(tmp.path(), &["validate", path]);
    match r.code {
        1 => assert_eq!(r.doc["valid"], false, "{}", r.doc),
        2 => assert_eq!(r.doc["error"]["kind"], kind, "{}", r.doc),
        other => panic!("validate exited {other}: {}", r.doc),
    }
    assert!(!out.exists(), "no output is left");
    assert!(!npy.exists(), "no output is left");
}

/// Refused opened through `latest` and as the step folder.
fn assert_refused_both_ways(tmp: &tempfile::TempDir, kind: &str) {
    assert_refused(tmp, &tmp.path().join("ckpt"), kind);
    assert_refused(tmp, &step(tmp), kind);
}

#[test]
fn a_missing_ranks_optimizer_file_is_refused() {
    for (folder, file) in [
        ("zero1", "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        ("zero2", "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        ("zero3", "zero_pp_rank_0_mp_rank_00_optim_states.pt"),
    ] {
        let tmp = copied(folder);
        std::fs::remove_file(step(&tmp).join(file)).expect("remove");
        assert_refused_both_ways(&tmp, "InvalidCheckpoint");
    }
    // Two files, but not ranks 0 and 1.
    let tmp = copied("zero2");
    std::fs::rename(
        step(&tmp).join("zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        step(&tmp).join("zero_pp_rank_2_mp_rank_00_optim_states.pt"),
    )
    .expect("rename");
    assert_refused_both_ways(&tmp, "InvalidCheckpoint");
    // Stage 3 without rank 1's model-states file (its frozen fragment).
    let tmp = copied("zero3");
    std::fs::remove_file(step(&tmp).join("zero_pp_rank_1_mp_rank_00_model_states.pt"))
        .expect("remove");
    assert_refused_both_ways(&tmp, "InvalidCheckpoint");
}

#[test]
fn optimizer_files_disagreeing_on_the_partition_count_are_refused() {
    for (folder, file) in [
        ("zero2", "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        ("zero3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
    ] {
        let tmp = copied(folder);
        // `partition_count`: `[2]` in stage 2, `2` in stage 3; now 3.
        edit_pickle(&step(&tmp).join(file), |p| {
            replace_after(p, b"partition_count", b"K\x02", b"K\x03");
        });
        assert_refused_both_ways(&tmp, "InvalidCheckpoint");
    }
}

#[test]
fn flat_buffers_shorter_than_the_parameters_are_refused() {
    // Stage 2: rank 1's slice of 134 elements says 64.
    let tmp = copied("zero2");
    edit_pickle(
        &step(&tmp).join("zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        |p| {
            replace_after(
                p,
                b"single_partition_of_fp32_groups",
                b"K\x86\x85",
                b"K\x40\x85",
            );
        },
    );
    assert_refused_both_ways(&tmp, "InvalidCheckpoint");
    // Stage 3: both ranks' 136 elements say 64.
    let tmp = copied("zero3");
    for r in 0..2 {
        edit_pickle(
            &step(&tmp).join(format!("zero_pp_rank_{r}_mp_rank_00_optim_states.pt")),
            |p| replace_after(p, b"fp32_flat_groups", b"K\x88\x85", b"K\x40\x85"),
        );
    }
    assert_refused_both_ways(&tmp, "InvalidCheckpoint");
    // Stage 3: one rank's only.
    let tmp = copied("zero3");
    edit_pickle(
        &step(&tmp).join("zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        |p| replace_after(p, b"fp32_flat_groups", b"K\x88\x85", b"K\x40\x85"),
    );
    assert_refused_both_ways(&tmp, "InvalidCheckpoint");
}

#[test]
fn an_unknown_zero_stage_is_refused() {
    for (folder, file, stage) in [
        ("zero2", "zero_pp_rank_0_mp_rank_00_optim_states.pt", 2u8),
        ("zero3", "zero_pp_rank_1_mp_rank_00_optim_states.pt", 3),
    ] {
        for to in [0u8, 4, 7] {
            let tmp = copied(folder);
            edit_pickle(&step(&tmp).join(file), |p| {
                replace_after(p, b"ZeroStageEnum", &[b'K', stage], &[b'K', to]);
            });
            assert_refused_both_ways(&tmp, "UnknownZeroStage");
        }
    }
}

#[test]
fn a_latest_naming_a_path_is_refused() {
    for text in [
        "../zero2",
        "global_step1/..",
        "global_step1/",
        "/tmp",
        "..",
        ".",
        "..\\global_step1",
        "",
        "global_step9",
    ] {
        let tmp = copied("zero2");
        std::fs::write(tmp.path().join("ckpt/latest"), text).expect("write");
        assert_refused(&tmp, &tmp.path().join("ckpt"), "InvalidLatest");
    }
    // Surrounding whitespace is stripped, as DeepSpeed strips it.
    let tmp = copied("zero2");
    std::fs::write(tmp.path().join("ckpt/latest"), "  global_step1\n").expect("write");
    let ck = Checkpoint::open_readable(&tmp.path().join("ckpt")).expect("opens");
    assert_eq!(ck.container().id(), "deepspeed");
}

#[test]
fn an_unsafe_global_in_an_optimizer_file_is_reported_and_nothing_is_read() {
    let tmp = copied("zero2");
    // `fragment_address`'s module, one letter off: outside every allowlist.
    edit_pickle(
        &step(&tmp).join("zero_pp_rank_1_mp_rank_00_optim_states.pt"),
        |p| {
            replace_after(
                p,
                b"deepspeed.utils.",
                b"tensor_fragment",
                b"tensor_fragmenX",
            );
        },
    );
    let dir = tmp.path().join("ckpt");
    let r = run(tmp.path(), &["info", dir.to_str().expect("utf-8")]);
    assert!(r.code == 0 || r.code == 1, "{}", r.doc);
    assert_eq!(
        r.doc["pickle"]["unsafe_globals"],
        serde_json::json!(["deepspeed.utils.tensor_fragmenX.fragment_address"])
    );
    assert_eq!(r.doc["tensors"], serde_json::json!([]));
    for path in [dir.clone(), step(&tmp)] {
        let path = path.to_str().expect("utf-8");
        let out = tmp.path().join("out.safetensors");
        for args in [
            vec!["stats", path],
            vec!["resave", path, "-o", out.to_str().expect("utf-8")],
        ] {
            let r = run(tmp.path(), &args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.doc);
            assert_eq!(r.doc["error"]["kind"], "UnsafePickle", "{args:?}");
        }
        let r = run(tmp.path(), &["validate", path]);
        assert_eq!((r.code, &r.doc["valid"]), (1, &Value::Bool(false)));
        assert!(!out.exists());
    }
}

#[test]
fn a_deepspeed_run_with_latest_is_a_series_of_its_step_folders() {
    let tmp = tempfile::tempdir().expect("tmp");
    let run_dir = tmp.path().join("run");
    let from = data_dir().join("zero2/global_step1");
    for step in ["global_step100", "global_step200"] {
        let dir = run_dir.join(step);
        std::fs::create_dir_all(&dir).expect("mkdir");
        for e in std::fs::read_dir(&from).expect("read_dir") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), dir.join(e.file_name())).expect("copy");
        }
    }
    // What DeepSpeed leaves beside the steps: not steps.
    std::fs::write(run_dir.join("latest"), "global_step200\n").expect("latest");
    std::fs::copy(
        data_dir().join("zero2/zero_to_fp32.py"),
        run_dir.join("zero_to_fp32.py"),
    )
    .expect("copy");
    let r = run(tmp.path(), &["series", run_dir.to_str().expect("utf-8")]);
    assert_eq!(r.code, 0, "{}", r.doc);
    let steps = r.doc["steps"].as_array().expect("steps");
    let got: Vec<(u64, &str)> = steps
        .iter()
        .map(|s| {
            (
                s["step"].as_u64().expect("step"),
                s["path"].as_str().expect("path"),
            )
        })
        .collect();
    let want_paths = [
        run_dir.join("global_step100"),
        run_dir.join("global_step200"),
    ];
    assert_eq!(
        got,
        vec![
            (100, want_paths[0].to_str().expect("utf-8")),
            (200, want_paths[1].to_str().expect("utf-8")),
        ]
    );
    assert!(!r.doc["tensors"].as_array().expect("tensors").is_empty());
}
