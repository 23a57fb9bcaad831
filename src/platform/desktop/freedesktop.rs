//! Desktop integration on freedesktop desktops (Linux): `tensorscope
//! --install-desktop` installs the `.desktop` entry, the MIME types of the
//! containers it opens (`application/x-safetensors`, `application/x-npy`,
//! `application/x-npz`, `application/x-pytorch`, `application/x-gguf`,
//! `application/x-onnx`, `application/x-tensorflow-index`,
//! `application/x-keras`, `application/x-flax-msgpack`; HDF5 files are
//! shared-mime-info's `application/x-hdf`) and the icon for the current
//! user (XDG data dirs), and makes Tensorscope the default handler of the
//! containers with extensions of their own, so a double-click on a
//! checkpoint opens it (the others are offered: *Open with*);
//! `--uninstall-desktop` removes those files and handler lines again.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Report;

/// The desktop entry template (its `Exec=` line is rewritten on install).
pub const DESKTOP_ENTRY: &str = include_str!("../../../assets/tensorscope.desktop");
/// The shared-mime-info description of every container opened.
pub const MIME_XML: &str = include_str!("../../../assets/tensorscope-mime.xml");
/// The scalable icon.
pub const ICON_SVG: &str = include_str!("../../../assets/tensorscope.svg");
/// The MIME type of safetensors files.
pub const MIME_TYPE: &str = "application/x-safetensors";
/// Every MIME type Tensorscope opens (the `.desktop` file's `MimeType=`).
/// (`super::CONTAINERS`' MIME types; a test keeps the two lists equal.)
pub const MIME_TYPES: &[&str] = &[
    MIME_TYPE,
    "application/x-npy",
    "application/x-npz",
    "application/x-pytorch",
    "application/x-gguf",
    "application/x-onnx",
    "application/x-tensorflow-index",
    "application/x-keras",
    "application/x-hdf",
    "application/x-flax-msgpack",
];
/// The types of [`MIME_TYPES`] that shared-mime-info already defines: in
/// the desktop entry's `MimeType=`, never redefined in [`MIME_XML`].
pub const SYSTEM_MIME_TYPES: &[&str] = &["application/x-hdf"];
/// The desktop entry's file name.
pub const DESKTOP_FILE: &str = "tensorscope.desktop";

/// The MIME types Tensorscope is made the default handler of: those of the
/// containers that claim a default ([`super::Container::claims_default`]).
/// The rest of [`MIME_TYPES`] (a `.h5` is any program's HDF5 data) are
/// only offered, through the desktop entry's `MimeType=`.
pub fn default_mime_types() -> Vec<&'static str> {
    super::CONTAINERS
        .iter()
        .filter(|c| c.claims_default())
        .map(|c| c.mime)
        .collect()
}

fn missing(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("neither XDG_{what}_HOME nor HOME is set"),
    )
}

/// `$XDG_DATA_HOME`, else `~/.local/share`.
pub fn data_home() -> io::Result<PathBuf> {
    crate::platform::dirs::data().ok_or_else(|| missing("DATA"))
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> io::Result<PathBuf> {
    crate::platform::dirs::config().ok_or_else(|| missing("CONFIG"))
}

/// Quotes a path for a desktop entry's `Exec` key (the spec's rules: double
/// quotes around arguments with reserved characters, with `"`, `` ` ``,
/// `$` and `\` escaped, and `%` doubled).
pub fn exec_quote(path: &str) -> String {
    let path = path.replace('%', "%%");
    let reserved = |c: char| c.is_whitespace() || "\"'\\><~|&;$*?#()`".contains(c);
    if !path.chars().any(reserved) {
        return path;
    }
    let mut out = String::from("\"");
    for c in path.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The desktop entry with `Exec=` naming `exe`.
pub fn desktop_entry(exe: &Path) -> String {
    DESKTOP_ENTRY
        .lines()
        .map(|l| {
            if l.starts_with("Exec=") {
                format!("Exec={} %F", exec_quote(&exe.to_string_lossy()))
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn write(path: &Path, text: &str, report: &mut Report) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)?;
    report.written.push(path.to_path_buf());
    Ok(())
}

fn run_tool(report: &mut Report, program: &str, args: &[&std::ffi::OsStr]) -> bool {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => {
            report.steps.push(format!("{program}: ok"));
            true
        }
        Ok(out) => {
            report.steps.push(format!(
                "{program}: failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            false
        }
        Err(e) => {
            report.steps.push(format!("{program}: not run ({e})"));
            false
        }
    }
}

/// Sets the default application in `mimeapps.list` directly (used when
/// `xdg-mime` is missing or fails).
fn set_default_in_mimeapps(config: &Path, report: &mut Report) -> io::Result<()> {
    let path = config.join("mimeapps.list");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let defaults = default_mime_types();
    let lines = defaults.iter().fold(String::new(), |mut s, t| {
        s.push_str(t);
        s.push('=');
        s.push_str(DESKTOP_FILE);
        s.push_str(";\n");
        s
    });
    let ours = |l: &str| defaults.iter().any(|t| l.starts_with(&format!("{t}=")));
    let mut out = String::new();
    let mut in_defaults = false;
    let mut done = false;
    for l in old.lines() {
        let trimmed = l.trim();
        if trimmed.starts_with('[') {
            if in_defaults && !done {
                out.push_str(&lines);
                done = true;
            }
            in_defaults = trimmed == "[Default Applications]";
        } else if in_defaults && ours(trimmed) {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    if !done {
        if !in_defaults {
            out.push_str("[Default Applications]\n");
        }
        out.push_str(&lines);
    }
    write(&path, &out, report)
}

/// Installs the desktop entry, MIME types and icon for the current user
/// and makes Tensorscope the default handler of the containers that claim
/// a default ([`default_mime_types`]).
pub fn install(exe: &Path) -> io::Result<Report> {
    let mut report = Report::default();
    let data = data_home()?;
    let config = config_home()?;
    let apps = data.join("applications");
    write(&apps.join(DESKTOP_FILE), &desktop_entry(exe), &mut report)?;
    write(
        &data.join("mime/packages/tensorscope.xml"),
        MIME_XML,
        &mut report,
    )?;
    write(
        &data.join("icons/hicolor/scalable/apps/tensorscope.svg"),
        ICON_SVG,
        &mut report,
    )?;
    run_tool(
        &mut report,
        "update-mime-database",
        &[data.join("mime").as_os_str()],
    );
    run_tool(&mut report, "update-desktop-database", &[apps.as_os_str()]);
    std::fs::create_dir_all(&config)?;
    let mut args: Vec<&std::ffi::OsStr> = vec!["default".as_ref(), DESKTOP_FILE.as_ref()];
    args.extend(default_mime_types().into_iter().map(std::ffi::OsStr::new));
    let set = run_tool(&mut report, "xdg-mime", &args);
    if !set {
        set_default_in_mimeapps(&config, &mut report)?;
        report
            .steps
            .push("mimeapps.list: default handler set directly".into());
    }
    Ok(report)
}

/// The files `install` writes under the data home.
fn installed_files(data: &Path) -> [PathBuf; 3] {
    [
        data.join("applications").join(DESKTOP_FILE),
        data.join("mime/packages/tensorscope.xml"),
        data.join("icons/hicolor/scalable/apps/tensorscope.svg"),
    ]
}

/// `mimeapps.list` without Tensorscope as a default handler: our entry
/// taken out of each of our types' lists, a line left empty dropped.
fn without_our_defaults(old: &str) -> String {
    let mut out = String::new();
    let mut in_defaults = false;
    for l in old.lines() {
        let trimmed = l.trim();
        if trimmed.starts_with('[') {
            in_defaults = trimmed == "[Default Applications]";
        } else if in_defaults
            && let Some((key, value)) = trimmed.split_once('=')
            && MIME_TYPES.contains(&key.trim())
        {
            let rest: Vec<&str> = value
                .split(';')
                .filter(|d| !d.is_empty() && *d != DESKTOP_FILE)
                .collect();
            if !rest.is_empty() {
                out.push_str(key.trim());
                out.push('=');
                out.push_str(&rest.join(";"));
                out.push_str(";\n");
            }
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Removes what `install` wrote for the current user: the entry, the MIME
/// types, the icon, and Tensorscope as the default handler; other
/// applications' lines in `mimeapps.list` stay as they are.
pub fn uninstall() -> io::Result<Report> {
    let mut report = Report::default();
    let data = data_home()?;
    for path in installed_files(&data) {
        match std::fs::remove_file(&path) {
            Ok(()) => report.removed.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    run_tool(
        &mut report,
        "update-mime-database",
        &[data.join("mime").as_os_str()],
    );
    let apps = data.join("applications");
    run_tool(&mut report, "update-desktop-database", &[apps.as_os_str()]);
    let list = config_home()?.join("mimeapps.list");
    if let Ok(old) = std::fs::read_to_string(&list) {
        let new = without_our_defaults(&old);
        if new != old {
            std::fs::write(&list, new)?;
            report.steps.push(format!(
                "{}: Tensorscope is no longer a default handler",
                list.display()
            ));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_lines_are_quoted() {
        assert_eq!(exec_quote("/usr/bin/tensorscope"), "/usr/bin/tensorscope");
        assert_eq!(exec_quote("/opt/my apps/ts"), "\"/opt/my apps/ts\"");
        assert_eq!(exec_quote("/a$b"), "\"/a\\$b\"");
        assert_eq!(exec_quote("/a%b"), "/a%%b");
        let entry = desktop_entry(Path::new("/opt/ts/tensorscope"));
        assert!(entry.contains("\nExec=/opt/ts/tensorscope %F\n"));
        let listed = format!("MimeType={};", MIME_TYPES.join(";"));
        assert!(entry.contains(&listed), "{entry}");
    }

    #[test]
    fn every_container_is_listed_and_ours_are_described() {
        let mimes: Vec<&str> = super::super::CONTAINERS.iter().map(|c| c.mime).collect();
        assert_eq!(mimes, MIME_TYPES);
        for t in SYSTEM_MIME_TYPES {
            assert!(MIME_TYPES.contains(t), "{t}");
        }
        for c in super::super::CONTAINERS {
            // Our types are in the XML with a glob per extension; a type
            // shared-mime-info defines is not redefined.
            let system = SYSTEM_MIME_TYPES.contains(&c.mime);
            let declared = format!("<mime-type type=\"{}\">", c.mime);
            assert_eq!(MIME_XML.contains(&declared), !system, "{}", c.mime);
            let described = MIME_XML
                .split("</mime-type>")
                .find(|t| t.contains(&declared))
                .unwrap_or_default();
            // (A shared extension's glob may be narrower:
            // `pytorch_model*.bin`.)
            for ext in c.extensions.iter().chain(c.shared_extensions) {
                assert_eq!(
                    described.contains(&format!("*.{ext}\"")),
                    !system,
                    "{}: *.{ext}",
                    c.mime
                );
            }
            // A shared extension's glob weighs less than the default (50),
            // so that another program's type of it wins.
            if !c.claims_default() && !system {
                assert!(described.contains("weight=\"20\""), "{}", c.mime);
            }
        }
        assert_eq!(
            default_mime_types(),
            [
                "application/x-safetensors",
                "application/x-npy",
                "application/x-npz",
                "application/x-pytorch",
                "application/x-gguf",
                "application/x-onnx",
                "application/x-keras",
            ]
        );
    }

    #[test]
    fn uninstall_takes_only_our_entries_out_of_mimeapps_list() {
        let old = "[Added Associations]\napplication/x-npy=tensorscope.desktop;\n[Default Applications]\napplication/x-safetensors=tensorscope.desktop;\napplication/x-npy=other.desktop;tensorscope.desktop;\ntext/plain=tensorscope.desktop;\n";
        let new = without_our_defaults(old);
        assert_eq!(
            new,
            "[Added Associations]\napplication/x-npy=tensorscope.desktop;\n[Default Applications]\napplication/x-npy=other.desktop;\ntext/plain=tensorscope.desktop;\n"
        );
    }

    #[test]
    fn mimeapps_list_is_updated_in_place() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        std::fs::write(
            dir.join("mimeapps.list"),
            "[Added Associations]\ntext/plain=x.desktop;\n[Default Applications]\napplication/x-safetensors=old.desktop;\napplication/x-hdf=hdfview.desktop;\ntext/plain=x.desktop;\n",
        )
        .expect("write");
        let mut r = Report::default();
        set_default_in_mimeapps(dir, &mut r).expect("set");
        let s = std::fs::read_to_string(dir.join("mimeapps.list")).expect("read");
        for t in default_mime_types() {
            assert!(s.contains(&format!("{t}=tensorscope.desktop;")), "{s}");
        }
        assert!(!s.contains("old.desktop"));
        assert!(s.contains("text/plain=x.desktop;"));
        // HDF5 files stay with the program that opens them; `.index` and
        // `.msgpack` files are offered, not claimed.
        assert!(s.contains("application/x-hdf=hdfview.desktop;\n"), "{s}");
        for t in [
            "application/x-hdf",
            "application/x-tensorflow-index",
            "application/x-flax-msgpack",
        ] {
            assert!(!s.contains(&format!("{t}=tensorscope.desktop")), "{s}");
        }
    }
}
