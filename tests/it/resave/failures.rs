//! Failed saves: the source is never overwritten, and a short write, a
//! cancel or an unwritable folder leaves every target as it was and no
//! temporary file behind.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use safetensors::Dtype as RefDtype;
use tensorscope::Dtype;
use tensorscope::format::{Checkpoint, INDEX_FILE_NAME};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::resave::{ResaveError, ResaveOptions, plan, resave};

use super::{f32_bytes, listing, model, ours, run, source, t, two_shard_source};
use crate::fixtures::{reference_file, write};

#[test]
fn the_source_is_never_overwritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let original = std::fs::read(&src).expect("src");
    let ck = Checkpoint::open(&src).expect("open");
    let hard = dir.path().join("hard.safetensors");
    std::fs::hard_link(&src, &hard).expect("hard link");
    let soft = dir.path().join("soft.safetensors");
    std::os::unix::fs::symlink(&src, &soft).expect("symlink");
    for out in [
        src.clone(),
        hard.clone(),
        soft.clone(),
        dir.path().to_path_buf(),
        dir.path().join(".").join("model.safetensors"),
    ] {
        let e = run(&ck, &out, &ResaveOptions::default()).expect_err("refused");
        assert!(
            matches!(e, ResaveError::WouldOverwriteSource { .. }),
            "{}: {e}",
            out.display()
        );
        assert!(e.to_string().contains("another name"), "{e}");
    }
    assert_eq!(std::fs::read(&src).expect("src"), original);
    assert_eq!(
        listing(dir.path()),
        ["hard.safetensors", "model.safetensors", "soft.safetensors"]
    );
    // A sharded source: writing new shards over its own.
    let sharded = dir.path().join("sharded");
    let idx = two_shard_source(&sharded);
    let ck = Checkpoint::open(&idx).expect("open");
    for out in [sharded.clone(), idx.clone()] {
        let e = run(
            &ck,
            &out,
            &ResaveOptions {
                max_shard_bytes: Some(16),
                ..ResaveOptions::default()
            },
        )
        .expect_err("refused");
        assert_eq!(e.kind(), "WouldOverwriteSource", "{e}");
    }
    assert_eq!(ours(&idx).len(), 3);
}

/// A target that exists with known content, to check it stays as it was.
fn existing_target(dir: &Path) -> PathBuf {
    write(dir, "target.safetensors", b"previous content")
}

#[test]
fn a_short_write_leaves_the_target_and_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    let target = existing_target(dir.path());
    for fail_after in [0u64, 7, 100, 400] {
        let e = run(
            &ck,
            &target,
            &ResaveOptions {
                fail_after_bytes: Some(fail_after),
                ..ResaveOptions::default()
            },
        )
        .expect_err("short write");
        assert_eq!(e.kind(), "Io", "{e}");
        assert!(
            e.to_string().contains("failed to write whole buffer"),
            "{e}"
        );
        assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
        assert_eq!(
            listing(dir.path()),
            ["model.safetensors", "target.safetensors"]
        );
    }
    // In a sharded output the failure comes in a later shard: no shard
    // and no index is renamed, and the folder this call made is removed.
    let out = dir.path().join("shards");
    let opts = ResaveOptions {
        max_shard_bytes: Some(100),
        ..ResaveOptions::default()
    };
    let p = plan(&ck, &out, &opts).expect("plan");
    assert!(p.files.len() >= 3);
    // Learn the first shard's size from a write that succeeds, then fail
    // just past it, inside the second shard.
    let probe = dir.path().join("probe");
    let ok = run(&ck, &probe, &opts).expect("probe");
    std::fs::remove_dir_all(&probe).expect("rm probe");
    let first_file = ok.files[0].file_size + 10;
    let e = run(
        &ck,
        &out,
        &ResaveOptions {
            fail_after_bytes: Some(first_file),
            ..opts.clone()
        },
    )
    .expect_err("short write");
    assert_eq!(e.kind(), "Io", "{e}");
    assert!(!out.exists(), "the created folder is removed");
    // Into an existing folder with an old index: it stays.
    std::fs::create_dir(&out).expect("mkdir");
    let old_index = write(&out, INDEX_FILE_NAME, b"{\"old\": true}");
    let e = run(
        &ck,
        &out,
        &ResaveOptions {
            fail_after_bytes: Some(first_file),
            ..opts.clone()
        },
    )
    .expect_err("short write");
    assert_eq!(e.kind(), "Io");
    assert_eq!(listing(&out), [INDEX_FILE_NAME]);
    assert_eq!(
        std::fs::read(&old_index).expect("index"),
        b"{\"old\": true}"
    );
    run(&ck, &out, &opts).expect("then it works");
    assert_eq!(ours(&out).len(), model().len());
}

#[test]
fn a_cancelled_save_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Big enough for several 64 Ki-element conversion chunks.
    let values: Vec<f32> = (0..300_000).map(|i| i as f32 * 0.5).collect();
    let tensors = vec![
        (
            "w".to_owned(),
            t(RefDtype::F32, &[values.len()], f32_bytes(&values)),
        ),
        ("z".to_owned(), t(RefDtype::U8, &[4], vec![1, 2, 3, 4])),
    ];
    let src = write(
        dir.path(),
        "big.safetensors",
        &reference_file(&tensors, None),
    );
    let ck = Checkpoint::open(&src).expect("open");
    let target = existing_target(dir.path());
    let opts = ResaveOptions {
        conversions: vec![(Dtype::F32, Dtype::BF16)],
        ..ResaveOptions::default()
    };
    // Cancelled before it starts.
    let cancel = CancelToken::new();
    cancel.cancel();
    let e = resave(&ck, &target, &opts, &cancel, &Progress::new()).expect_err("cancelled");
    assert!(matches!(e, ResaveError::Cancelled), "{e}");
    // Cancelled midway, from the progress callback, as the GUI's button would.
    let cancel = CancelToken::new();
    let updates = Arc::new(AtomicU64::new(0));
    let progress = {
        let cancel = cancel.clone();
        let updates = Arc::clone(&updates);
        Progress::with_notify(move || {
            if updates.fetch_add(1, Ordering::Relaxed) == 3 {
                cancel.cancel();
            }
        })
    };
    let e = resave(&ck, &target, &opts, &cancel, &progress).expect_err("cancelled");
    assert!(matches!(e, ResaveError::Cancelled), "{e}");
    assert!(progress.done() > 0 && progress.done() < progress.total());
    assert_eq!(std::fs::read(&target).expect("target"), b"previous content");
    assert_eq!(
        listing(dir.path()),
        ["big.safetensors", "target.safetensors"]
    );
    // Sharded and cancelled: nothing.
    let out = dir.path().join("shards");
    let e = resave(
        &ck,
        &out,
        &ResaveOptions {
            max_shard_bytes: Some(1000),
            ..ResaveOptions::default()
        },
        &cancel,
        &Progress::new(),
    )
    .expect_err("cancelled");
    assert!(matches!(e, ResaveError::Cancelled));
    assert!(!out.exists());
}

#[test]
fn an_unwritable_folder_is_an_error_not_a_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = source(dir.path(), &[("format", "pt")]);
    let ck = Checkpoint::open(&src).expect("open");
    // A path under a regular file: no one can create it, root included.
    let e = run(&ck, &src.join("out.safetensors"), &ResaveOptions::default())
        .expect_err("not a folder");
    assert_eq!(e.kind(), "Io", "{e}");
    assert_eq!(listing(dir.path()), ["model.safetensors"]);
    // A read-only folder, where permissions apply (not to root).
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let probe = ro.join("probe");
    let enforced = std::fs::write(&probe, b"x").is_err();
    let _ = std::fs::remove_file(&probe);
    let r = run(&ck, &ro.join("out.safetensors"), &ResaveOptions::default());
    if enforced {
        let e = r.expect_err("read-only");
        assert_eq!(e.kind(), "Io", "{e}");
        assert!(listing(&ro).is_empty());
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).expect("chmod back");
}

/// Under a file-size limit (`ulimit -f`) the write fails with EFBIG instead
/// of the process dying by SIGXFSZ: a JSON error, exit 2, no file left.
#[cfg(target_os = "linux")]
#[test]
fn a_file_size_limit_ends_the_write_cleanly() {
    if crate::exe::foreign() {
        return; // ulimit -f and SIGXFSZ are this system's
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let n: u64 = 1 << 18;
    let header = format!(
        r#"{{"w":{{"dtype":"F32","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        4 * n
    );
    let src = crate::fixtures::write(
        dir.path(),
        "big.safetensors",
        &crate::fixtures::with_header(&header, usize::try_from(4 * n).expect("small")),
    );
    let target = tempfile::tempdir().expect("tempdir");
    let out = target.path().join("out.safetensors");
    // 100 blocks of 512 bytes: far less than the 1 MiB to write.
    let script = format!(
        "ulimit -f 100; exec \"$0\" resave '{}' -o '{}' --json",
        src.display(),
        out.display()
    );
    let run = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_tensorscope"))
        .output()
        .expect("run sh");
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON document");
    assert_eq!(doc["error"]["kind"], "Io", "{doc}");
    let left: Vec<_> = std::fs::read_dir(target.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
