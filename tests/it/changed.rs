//! A file cut short while it is read (a download resumed, a checkpoint
//! saved over): every reader ends with the file's `Changed` error, never a
//! crash (SIGBUS) and never a result, in the library and in the CLI.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use tensorscope::diff::{DiffError, DiffOptions, diff};
use tensorscope::export::{ExportError, ExportOptions, export_tensor};
use tensorscope::format::{Checkpoint, LoadError};
use tensorscope::jobs::{CancelToken, Progress};
use tensorscope::resave::{ResaveError, ResaveOptions, resave};
use tensorscope::stats::{StatsError, StatsOptions, scan};

use crate::fixtures::with_header;

/// Elements per tensor of the test file: 4 tensors of 16 MiB of F32, so
/// that a reader is still reading when the file is cut, even on a loaded
/// machine.
const ELEMENTS: u64 = 1 << 22;

/// Writes 4 F32 tensors of random-looking values; returns the path and the
/// length of its header (8 + N).
fn four_tensors(dir: &Path, name: &str) -> (PathBuf, u64) {
    let entries: Vec<String> = (0..4)
        .map(|i| {
            format!(
                r#""w{i}":{{"dtype":"F32","shape":[{ELEMENTS}],"data_offsets":[{},{}]}}"#,
                4 * ELEMENTS * i,
                4 * ELEMENTS * (i + 1)
            )
        })
        .collect();
    let header = format!("{{{}}}", entries.join(","));
    let data_len = usize::try_from(16 * ELEMENTS).expect("small");
    let mut bytes = with_header(&header, 0);
    let start = bytes.len() as u64;
    let mut x = 0x1234_5678_u32;
    bytes.reserve(data_len);
    for _ in 0..4 * ELEMENTS {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let v = f32::from(u16::try_from(x >> 16).expect("16 bits")) / 65_536.0 - 0.5;
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    let path = dir.join(name);
    std::fs::write(&path, &bytes).expect("write");
    (path, start)
}

/// A progress counter that cuts `path` down to `keep` bytes (from the
/// reader's own thread, as another program would from outside) once the
/// reader has done `after` units of its work.
fn truncating_progress(path: &Path, keep: u64, after: u64) -> Arc<Progress> {
    let me: Arc<OnceLock<Weak<Progress>>> = Arc::new(OnceLock::new());
    let fired = Arc::new(AtomicBool::new(false));
    let path = path.to_path_buf();
    let progress = Arc::new(Progress::with_notify({
        let me = Arc::clone(&me);
        move || {
            let Some(p) = me.get().and_then(Weak::upgrade) else {
                return;
            };
            if p.done() >= after && !fired.swap(true, Ordering::SeqCst) {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .expect("open to truncate");
                f.set_len(keep).expect("truncate");
            }
        }
    }));
    let _ = me.set(Arc::downgrade(&progress));
    progress
}

fn assert_changed(e: &LoadError, path: &Path) {
    assert_eq!(e.kind(), "Changed", "{e}");
    assert!(
        e.message().contains("changed while being read"),
        "{}",
        e.message()
    );
    assert_eq!(e.path(), path);
}

#[test]
fn stats_of_a_file_cut_short_mid_read_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, start) = four_tensors(dir.path(), "m.safetensors");
    let ck = Checkpoint::open(&path).expect("open");
    // Cut to the header and one MiB, after a third of the work.
    let progress = truncating_progress(&path, start + (1 << 20), 8 * ELEMENTS);
    let r = scan(
        &ck,
        ck.tensors(),
        &StatsOptions::default(),
        &CancelToken::new(),
        &progress,
    );
    match r {
        Err(StatsError::Load(e)) => assert_changed(&e, &path),
        other => panic!("expected a Changed error, got {other:?}"),
    }
}

#[test]
fn a_diff_with_a_file_cut_short_mid_read_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, start) = four_tensors(dir.path(), "a.safetensors");
    let (b, _) = four_tensors(dir.path(), "b.safetensors");
    let (ca, cb) = (
        Checkpoint::open(&a).expect("a"),
        Checkpoint::open(&b).expect("b"),
    );
    let progress = truncating_progress(&b, start, 8 * ELEMENTS);
    let r = diff(
        &ca,
        &cb,
        &DiffOptions::default(),
        &CancelToken::new(),
        &progress,
    );
    match r {
        Err(DiffError::Load(e)) => assert_changed(&e, &b),
        other => panic!("expected a Changed error, got {other:?}"),
    }
}

#[test]
fn an_export_or_resave_of_a_file_cut_short_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    for ext in ["npy", "csv", "bin", "png"] {
        let (path, start) = four_tensors(dir.path(), &format!("src-{ext}.safetensors"));
        let ck = Checkpoint::open(&path).expect("open");
        let t = ck.find("w1").expect("w1");
        let out = dir.path().join(format!("out.{ext}"));
        let progress = truncating_progress(&path, start, 1);
        let opts = ExportOptions {
            size_limit: tensorscope::export::SizeLimit::Ignore,
            ..ExportOptions::default()
        };
        let r = export_tensor(&ck, t, &out, &opts, &CancelToken::new(), &progress);
        match r {
            Err(ExportError::Load(e)) => assert_changed(&e, &path),
            other => panic!(".{ext}: expected a Changed error, got {other:?}"),
        }
        assert!(!out.exists(), ".{ext}: no result may be left");
    }
    let (path, start) = four_tensors(dir.path(), "src-resave.safetensors");
    let ck = Checkpoint::open(&path).expect("open");
    let out = dir.path().join("resaved.safetensors");
    let progress = truncating_progress(&path, start, 1);
    let r = resave(
        &ck,
        &out,
        &ResaveOptions::default(),
        &CancelToken::new(),
        &progress,
    );
    match r {
        Err(ResaveError::Load(e)) => assert_changed(&e, &path),
        other => panic!("resave: expected a Changed error, got {other:?}"),
    }
    assert!(!out.exists());
    let temps = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .count();
    assert_eq!(temps, 0, "no temporary file may be left");
}

/// Waits until process `pid` has mapped `path`.
#[cfg(target_os = "linux")]
fn wait_until_mapped(pid: u32, path: &Path) {
    let target = std::fs::canonicalize(path).expect("canonical");
    let target = target.to_string_lossy().into_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mapped = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|maps| maps.lines().any(|l| l.ends_with(target.as_str())));
        assert!(Instant::now() < deadline, "the file was never mapped");
        if mapped {
            return;
        }
        std::thread::yield_now();
    }
}

/// The CLI, with the file cut short by another process while `stats` and
/// `diff` read it: one JSON error document, exit 2, no signal.
#[cfg(target_os = "linux")]
#[test]
fn the_cli_survives_a_file_cut_short_mid_read() {
    use std::os::unix::process::ExitStatusExt as _;
    if crate::exe::foreign() {
        // Windows refuses to shorten a mapped file (wine reads on from its
        // own copy, so the race has no answer there); the Windows guard's
        // check is examples/fault_guard.rs.
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (other, _) = four_tensors(dir.path(), "other.safetensors");
    for verb in ["stats", "diff"] {
        let (path, start) = four_tensors(dir.path(), &format!("{verb}.safetensors"));
        let mut cmd = crate::exe::command();
        cmd.arg(verb);
        if verb == "diff" {
            cmd.arg(&other);
        }
        let child = cmd
            .arg(&path)
            .arg("--json")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run tensorscope");
        wait_until_mapped(child.id(), &path);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open")
            .set_len(start + 4096)
            .expect("truncate");
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.signal(), None, "{verb}: killed by a signal");
        assert_eq!(out.status.code(), Some(2), "{verb}");
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(doc["error"]["kind"], "Changed", "{verb}: {doc}");
    }
}
