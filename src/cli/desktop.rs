//! Desktop integration on Linux: `tensorscope --install-desktop` installs
//! the `.desktop` entry, the MIME types of the containers it opens
//! (`application/x-safetensors`, `application/x-npy`, `application/x-npz`,
//! `application/x-pytorch`, `application/x-gguf`)
//! and the icon for the current user (XDG data dirs), and makes Tensorscope
//! their default handler, so a double-click on a checkpoint opens it.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The desktop entry template (its `Exec=` line is rewritten on install).
pub const DESKTOP_ENTRY: &str = include_str!("../../assets/tensorscope.desktop");
/// The shared-mime-info description of every container opened.
pub const MIME_XML: &str = include_str!("../../assets/tensorscope-mime.xml");
/// The scalable icon.
pub const ICON_SVG: &str = include_str!("../../assets/tensorscope.svg");
/// The MIME type of safetensors files.
pub const MIME_TYPE: &str = "application/x-safetensors";
/// Every MIME type Tensorscope opens (the `.desktop` file's `MimeType=`).
pub const MIME_TYPES: &[&str] = &[
    MIME_TYPE,
    "application/x-npy",
    "application/x-npz",
    "application/x-pytorch",
    "application/x-gguf",
];
/// The desktop entry's file name.
pub const DESKTOP_FILE: &str = "tensorscope.desktop";

/// What an install did, step by step.
#[derive(Debug, Default)]
pub struct InstallReport {
    /// Every file created or replaced, in the order written (so a failed
    /// install can say how far it got).
    pub written: Vec<PathBuf>,
    /// Helper programs run, and how each went.
    pub steps: Vec<String>,
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_DATA_HOME`, else `~/.local/share`.
pub fn data_home() -> io::Result<PathBuf> {
    match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(p) => Ok(PathBuf::from(p)),
        None => home_dir().map(|h| h.join(".local/share")).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "neither XDG_DATA_HOME nor HOME is set",
            )
        }),
    }
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> io::Result<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(p) => Ok(PathBuf::from(p)),
        None => home_dir().map(|h| h.join(".config")).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "neither XDG_CONFIG_HOME nor HOME is set",
            )
        }),
    }
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

fn write(path: &Path, text: &str, report: &mut InstallReport) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)?;
    report.written.push(path.to_path_buf());
    Ok(())
}

fn run_tool(report: &mut InstallReport, program: &str, args: &[&std::ffi::OsStr]) -> bool {
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
fn set_default_in_mimeapps(config: &Path, report: &mut InstallReport) -> io::Result<()> {
    let path = config.join("mimeapps.list");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let lines = MIME_TYPES.iter().fold(String::new(), |mut s, t| {
        s.push_str(t);
        s.push('=');
        s.push_str(DESKTOP_FILE);
        s.push_str(";\n");
        s
    });
    let ours = |l: &str| MIME_TYPES.iter().any(|t| l.starts_with(&format!("{t}=")));
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

/// Installs the desktop entry, MIME type and icon for the current user
/// and makes Tensorscope the default handler of every container it opens.
pub fn install(exe: &Path) -> io::Result<InstallReport> {
    let mut report = InstallReport::default();
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
    args.extend(MIME_TYPES.iter().map(|t| std::ffi::OsStr::new(*t)));
    let set = run_tool(&mut report, "xdg-mime", &args);
    if !set {
        set_default_in_mimeapps(&config, &mut report)?;
        report
            .steps
            .push("mimeapps.list: default handler set directly".into());
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
        for t in MIME_TYPES {
            assert!(MIME_XML.contains(&format!("type=\"{t}\"")), "{t}");
        }
    }

    #[test]
    fn mimeapps_list_is_updated_in_place() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        std::fs::write(
            dir.join("mimeapps.list"),
            "[Added Associations]\ntext/plain=x.desktop;\n[Default Applications]\napplication/x-safetensors=old.desktop;\ntext/plain=x.desktop;\n",
        )
        .expect("write");
        let mut r = InstallReport::default();
        set_default_in_mimeapps(dir, &mut r).expect("set");
        let s = std::fs::read_to_string(dir.join("mimeapps.list")).expect("read");
        for t in MIME_TYPES {
            assert!(s.contains(&format!("{t}=tensorscope.desktop;")), "{s}");
        }
        assert!(!s.contains("old.desktop"));
        assert!(s.contains("text/plain=x.desktop;"));
    }
}
