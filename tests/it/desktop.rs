//! `tensorscope --install-desktop` against a temporary XDG data and config
//! home: the entry validates and the default handler is Tensorscope.
//! (desktop-file-utils, xdg-utils and shared-mime-info: see the README.)

use crate::exe::OutputOnceMore as _;
use std::path::Path;
use std::process::Command;

fn tool(name: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output_once_more()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn install_desktop_registers_the_mime_type_and_handler() {
    if crate::exe::foreign() {
        return; // freedesktop's integration; Windows' is scripts/test-windows'
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let config = dir.path().join("config");
    // The program with `flag`, its XDG homes in the temporary folder.
    let run = |flag: &str| {
        crate::exe::command()
            .arg(flag)
            .env("XDG_DATA_HOME", &data)
            .env("XDG_CONFIG_HOME", &config)
            .env("HOME", dir.path())
            .output_once_more()
            .expect("run")
    };
    let out = run("--install-desktop");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entry_path = data.join("applications/tensorscope.desktop");
    let entry = std::fs::read_to_string(&entry_path).expect("desktop entry");
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_tensorscope")).expect("exe");
    assert!(
        entry.contains(&format!("Exec={} %F", exe.display())),
        "{entry}"
    );
    assert!(
        entry.contains(
            "MimeType=application/x-safetensors;application/x-npy;application/x-npz;application/x-pytorch;application/x-gguf;application/x-onnx;application/x-tensorflow-index;application/x-keras;application/x-hdf;application/x-flax-msgpack;"
        ),
        "{entry}"
    );
    assert!(data.join("mime/packages/tensorscope.xml").is_file());
    assert!(
        data.join("icons/hicolor/scalable/apps/tensorscope.svg")
            .is_file()
    );

    if tool("desktop-file-validate") {
        let v = Command::new("desktop-file-validate")
            .arg(&entry_path)
            .output_once_more()
            .expect("validate");
        assert!(
            v.status.success() && v.stdout.is_empty(),
            "desktop-file-validate: {}{}",
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr)
        );
    } else {
        eprintln!("desktop-file-validate not installed: entry not validated");
    }
    if tool("update-mime-database") {
        // The MIME database now maps *.safetensors to the type.
        let globs = std::fs::read_to_string(data.join("mime/globs2")).expect("globs2");
        for glob in [
            "application/x-safetensors:*.safetensors",
            "application/x-npy:*.npy",
            "application/x-npz:*.npz",
            "application/x-pytorch:*.pt",
            "application/x-pytorch:*.ckpt",
            "application/x-pytorch:pytorch_model*.bin",
            "application/x-gguf:*.gguf",
            "application/x-onnx:*.onnx",
            "20:application/x-tensorflow-index:*.index",
            "application/x-keras:*.keras",
            "20:application/x-flax-msgpack:*.msgpack",
        ] {
            assert!(globs.contains(glob), "{glob}: {globs}");
        }
        // HDF5 is shared-mime-info's type: not redefined here.
        assert!(!globs.contains("hdf"), "{globs}");
        let subclasses = std::fs::read_to_string(data.join("mime/subclasses")).expect("subclasses");
        assert!(
            subclasses.contains("application/x-keras application/zip"),
            "{subclasses}"
        );
    }
    // Tensorscope opens the containers with extensions of their own on a
    // double-click.
    for mime in [
        "application/x-safetensors",
        "application/x-npy",
        "application/x-npz",
        "application/x-pytorch",
        "application/x-gguf",
        "application/x-onnx",
        "application/x-keras",
    ] {
        let query = if tool("xdg-mime") {
            let q = Command::new("xdg-mime")
                .args(["query", "default", mime])
                .env("XDG_DATA_HOME", &data)
                .env("XDG_CONFIG_HOME", &config)
                .env("HOME", dir.path())
                .output_once_more()
                .expect("xdg-mime");
            String::from_utf8_lossy(&q.stdout).trim().to_owned()
        } else {
            eprintln!("xdg-mime not installed: reading mimeapps.list");
            read_default(&config.join("mimeapps.list"), mime)
        };
        assert_eq!(query, "tensorscope.desktop", "{mime}");
    }
    // Those known by shared extensions (`.index`, `.h5`, `.msgpack`) are
    // offered, never made Tensorscope's by default.
    for mime in [
        "application/x-tensorflow-index",
        "application/x-hdf",
        "application/x-flax-msgpack",
    ] {
        assert_eq!(
            read_default(&config.join("mimeapps.list"), mime),
            "",
            "{mime}"
        );
        if tool("update-desktop-database") {
            let cache = std::fs::read_to_string(data.join("applications/mimeinfo.cache"))
                .expect("mimeinfo.cache");
            assert!(
                cache.contains(&format!("{mime}=tensorscope.desktop;")),
                "{mime}: {cache}"
            );
        }
    }

    // --uninstall-desktop takes back exactly that.
    let out = run("--uninstall-desktop");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!entry_path.exists());
    assert!(!data.join("mime/packages/tensorscope.xml").exists());
    assert!(
        !data
            .join("icons/hicolor/scalable/apps/tensorscope.svg")
            .exists()
    );
    let list = std::fs::read_to_string(config.join("mimeapps.list")).unwrap_or_default();
    assert!(!list.contains("tensorscope.desktop"), "{list}");
    if tool("update-mime-database") {
        let globs = std::fs::read_to_string(data.join("mime/globs2")).unwrap_or_default();
        assert!(!globs.contains("application/x-safetensors"), "{globs}");
    }
}

fn read_default(list: &Path, mime: &str) -> String {
    let text = std::fs::read_to_string(list).unwrap_or_default();
    let prefix = format!("{mime}=");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim_end_matches(';').to_owned())
        .unwrap_or_default()
}
