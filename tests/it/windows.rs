//! The Windows build under wine (`scripts/test-windows`): what only
//! Windows has. Each test steps aside unless the program under test is a
//! `.exe` run by wine (`TENSORSCOPE_TEST_EXE`, `TENSORSCOPE_TEST_RUNNER`).

use crate::exe::OutputOnceMore as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fixtures::{small_model, write};

/// True when the program under test is the Windows build under wine.
fn under_wine() -> bool {
    crate::exe::foreign()
        && std::env::var("TENSORSCOPE_TEST_RUNNER").is_ok_and(|r| r.contains("wine"))
        && crate::exe::path()
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("exe"))
}

/// `wine reg ARGS...`: exit code and stdout.
fn reg(args: &[&str]) -> (i32, String) {
    let runner = std::env::var("TENSORSCOPE_TEST_RUNNER").expect("runner");
    let mut words = runner.split_whitespace();
    let out = Command::new(words.next().expect("runner"))
        .args(words)
        .arg("reg")
        .args(args)
        .output_once_more()
        .expect("run reg");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A value as `reg query KEY /v NAME` (or `/ve`) prints it; `None` when
/// the key or value is missing.
fn reg_value(key: &str, name: &str) -> Option<String> {
    let (code, out) = if name.is_empty() {
        reg(&["query", key, "/ve"])
    } else {
        reg(&["query", key, "/v", name])
    };
    if code != 0 {
        return None;
    }
    out.lines().find_map(|l| {
        let l = l.trim_start();
        let rest = if name.is_empty() {
            l.strip_prefix("(Default)")
                .or_else(|| l.strip_prefix("(default)"))?
        } else {
            l.strip_prefix(name)?
        };
        let rest = rest.trim_start();
        let rest = rest.strip_prefix("REG_SZ")?.trim();
        (rest != "(value not set)").then(|| rest.to_owned())
    })
}

/// The whole per-user classes tree, as `reg export` writes it.
fn classes_snapshot(dir: &Path, name: &str) -> String {
    let file = dir.join(name);
    let (code, _) = reg(&[
        "export",
        r"HKCU\Software\Classes",
        &file.to_string_lossy(),
        "/y",
    ]);
    assert_eq!(code, 0, "reg export");
    let bytes = std::fs::read(&file).expect("exported");
    // UTF-16LE with a BOM.
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = crate::exe::command()
        .args(args)
        .output_once_more()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Windows path of a path on this machine (wine's `Z:` drive).
fn windows_path(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

#[test]
fn install_desktop_registers_prog_ids_and_uninstall_removes_exactly_them() {
    if !under_wine() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // Another program's association, which must stay as it is.
    let (code, _) = reg(&[
        "add",
        r"HKCU\Software\Classes\.pt",
        "/ve",
        "/d",
        "Other.Pt",
        "/f",
    ]);
    assert_eq!(code, 0);
    let before = classes_snapshot(dir.path(), "before.reg");

    let (code, stdout, stderr) = run(&["--install-desktop"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let exe = crate::exe::path();
    let gui = windows_path(&exe.with_file_name("tensorscope-gui.exe"));
    let command = format!("\"{gui}\" \"%1\"");
    for prog in [
        "Tensorscope.Safetensors",
        "Tensorscope.Npy",
        "Tensorscope.Npz",
        "Tensorscope.PyTorch",
        "Tensorscope.Gguf",
        "Tensorscope.Onnx",
        "Tensorscope.TensorFlow",
        "Tensorscope.Keras",
        "Tensorscope.Hdf5",
        "Tensorscope.Flax",
    ] {
        let key = format!(r"HKCU\Software\Classes\{prog}");
        assert!(reg_value(&key, "").is_some(), "{prog}: {stdout}");
        assert_eq!(
            reg_value(&format!(r"{key}\shell\open\command"), "").as_deref(),
            Some(command.as_str()),
            "{prog}"
        );
        assert_eq!(
            reg_value(&format!(r"{key}\DefaultIcon"), "").as_deref(),
            Some(format!("\"{gui}\",0").as_str()),
            "{prog}"
        );
    }
    let default = |ext: &str| reg_value(&format!(r"HKCU\Software\Classes\.{ext}"), "");
    assert_eq!(
        default("safetensors").as_deref(),
        Some("Tensorscope.Safetensors")
    );
    assert_eq!(default("gguf").as_deref(), Some("Tensorscope.Gguf"));
    assert_eq!(default("npz").as_deref(), Some("Tensorscope.Npz"));
    assert_eq!(default("pth").as_deref(), Some("Tensorscope.PyTorch"));
    assert_eq!(
        default("pt").as_deref(),
        Some("Other.Pt"),
        "another program's default stays"
    );
    assert_eq!(default("bin"), None, ".bin is never claimed");
    assert_eq!(default("onnx").as_deref(), Some("Tensorscope.Onnx"));
    assert_eq!(default("keras").as_deref(), Some("Tensorscope.Keras"));
    for (ext, prog) in [
        ("index", "Tensorscope.TensorFlow"),
        ("h5", "Tensorscope.Hdf5"),
        ("hdf5", "Tensorscope.Hdf5"),
        ("msgpack", "Tensorscope.Flax"),
    ] {
        assert_eq!(default(ext), None, ".{ext} is never claimed");
        assert!(
            reg_value(
                &format!(r"HKCU\Software\Classes\.{ext}\OpenWithProgids"),
                prog
            )
            .is_some(),
            ".{ext}"
        );
    }
    assert!(
        reg_value(
            r"HKCU\Software\Classes\.bin\OpenWithProgids",
            "Tensorscope.PyTorch"
        )
        .is_some()
    );
    assert!(
        reg_value(
            r"HKCU\Software\Classes\Applications\tensorscope-gui.exe",
            "FriendlyAppName"
        )
        .is_some()
    );

    let (code, stdout, stderr) = run(&["--uninstall-desktop"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let after = classes_snapshot(dir.path(), "after.reg");
    assert_eq!(
        before, after,
        "the uninstall left or took something: {stdout}"
    );
    assert_eq!(
        reg(&["query", r"HKCU\Software\Tensorscope"]).0,
        1,
        "the manifest is gone"
    );
    reg(&["delete", r"HKCU\Software\Classes\.pt", "/f"]);
}

#[test]
fn windows_paths_open_in_every_spelling() {
    if !under_wine() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // A folder deep enough that the path passes 260 characters.
    let mut deep = dir.path().to_path_buf();
    while deep.as_os_str().len() < 300 {
        deep.push("a-folder-with-a-long-name");
    }
    std::fs::create_dir_all(&deep).expect("mkdir");
    let file = write(&deep, "m.safetensors", &small_model());
    let short = write(dir.path(), "m.safetensors", &small_model());
    let backslashes = windows_path(&short);
    let spellings: Vec<String> = vec![
        backslashes.clone(),
        backslashes.replace('\\', "/"),
        format!(r"\\?\{backslashes}"),
        windows_path(&file),
        format!(r"\\?\{}", windows_path(&file)),
        // A folder holding one checkpoint.
        windows_path(&deep),
    ];
    for path in &spellings {
        let (code, stdout, stderr) = run(&["info", path, "--json"]);
        assert_eq!(code, 0, "{path}: {stdout}{stderr}");
        let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
        assert_eq!(doc["tensors"].as_array().map(Vec::len), Some(6), "{path}");
    }
    // A path relative to the working folder.
    let out = crate::exe::command()
        .args(["validate", "m.safetensors", "--json"])
        .current_dir(dir.path())
        .output_once_more()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_shard_index_cannot_name_a_device_or_a_drive() {
    if !under_wine() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "m.safetensors", &small_model());
    for shard in [
        r"C:\windows\win.ini",
        "NUL.safetensors",
        r"\\server\share\m.safetensors",
    ] {
        let index = serde_json::json!({
            "metadata": {},
            "weight_map": {"a": shard},
        });
        let path = write(
            dir.path(),
            "model.safetensors.index.json",
            index.to_string().as_bytes(),
        );
        let (code, stdout, _) = run(&["validate", &windows_path(&path), "--json"]);
        assert_eq!(code, 1, "{shard}: {stdout}");
    }
}

/// Wine's `%LOCALAPPDATA%` on this machine (wine sets it from its prefix,
/// whatever the environment says).
fn wine_local_app_data() -> PathBuf {
    let prefix = std::env::var_os("WINEPREFIX").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".wine"),
        PathBuf::from,
    );
    let users = prefix.join("drive_c").join("users");
    let user = std::env::var("USER").unwrap_or_else(|_| "root".to_owned());
    users.join(user).join("AppData").join("Local")
}

#[test]
fn remote_files_are_cached_in_local_app_data() {
    if !under_wine() {
        return;
    }
    let server = crate::remote::server::Server::start();
    server.file("/m.safetensors", small_model());
    let cache = wine_local_app_data().join("tensorscope").join("cache");
    let count = || std::fs::read_dir(&cache).map_or(0, Iterator::count);
    let before = count();
    let out = crate::exe::command()
        .args(["info", &server.url("/m.safetensors"), "--json"])
        .env_remove("TENSORSCOPE_CACHE_DIR")
        .output_once_more()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(count() > before, "no new entry in {}", cache.display());
}
