//! Paths across platforms: two paths naming one file, and a path as a
//! person reads it.
//!
//! On Windows a path may carry a drive letter (`C:\models\a.gguf`), be a
//! UNC share (`\\server\share\a.gguf`), be written with `/` or `\`, or be
//! verbatim (`\\?\C:\…`, what `canonicalize` returns, and the way past 260
//! characters); std reads all of them. Verbatim paths are only shown and
//! stored without their prefix where the plain form means the same.

use std::path::{Path, PathBuf};

/// True when `a` and `b` name the same existing file: the same device and
/// inode on Unix, the same volume and file index on Windows (so hard links
/// and symlinks to a file count as that file). False when either does not
/// exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
            return false;
        };
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(windows)]
    {
        let id = |p: &Path| {
            std::fs::File::open(p)
                .ok()
                .and_then(|f| super::windows::file_id(&f))
        };
        matches!((id(a), id(b)), (Some(x), Some(y)) if x == y)
    }
    #[cfg(not(any(unix, windows)))]
    {
        matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
    }
}

/// `path` without Windows' verbatim prefix where the plain path means the
/// same file: `\\?\C:\a\b` → `C:\a\b`, `\\?\UNC\srv\share\a` →
/// `\\srv\share\a`; kept when the plain form would be longer than 260
/// characters or holds a component the plain form reads otherwise (a
/// trailing dot or space, a reserved device name). Other paths unchanged.
pub fn for_people(path: &Path) -> PathBuf {
    let Some(text) = path.to_str() else {
        return path.to_path_buf();
    };
    let plain = if let Some(rest) = text.strip_prefix(r"\\?\UNC\") {
        format!(r"\\{rest}")
    } else if let Some(rest) = text.strip_prefix(r"\\?\") {
        let b = rest.as_bytes();
        if b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\' {
            rest.to_owned()
        } else {
            return path.to_path_buf();
        }
    } else {
        return path.to_path_buf();
    };
    let plain_ok = plain.len() < 260
        && !plain.contains('/')
        && plain
            .split('\\')
            .skip(1)
            .all(|c| !c.ends_with(['.', ' ']) && !is_windows_device_name(c));
    if plain_ok {
        PathBuf::from(plain)
    } else {
        path.to_path_buf()
    }
}

/// True for a name Windows reads as a device whatever the folder (`CON`,
/// `NUL`, `COM1`, `LPT1`, …, also with an extension: `nul.safetensors`).
pub fn is_windows_device_name(name: &str) -> bool {
    let stem = name
        .split('.')
        .next()
        .unwrap_or(name)
        .trim_end_matches([' ', '.']);
    let upper = stem.to_ascii_uppercase();
    matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || ((upper.starts_with("COM") || upper.starts_with("LPT"))
        && upper.get(3..).is_some_and(|n| {
            matches!(
                n,
                "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"
            )
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbatim_paths_are_shown_plain_where_that_means_the_same() {
        let p = |s: &str| for_people(Path::new(s));
        assert_eq!(
            p(r"\\?\C:\models\a.gguf"),
            PathBuf::from(r"C:\models\a.gguf")
        );
        assert_eq!(
            p(r"\\?\UNC\server\share\a.gguf"),
            PathBuf::from(r"\\server\share\a.gguf")
        );
        assert_eq!(p(r"\\?\C:\models\nul"), PathBuf::from(r"\\?\C:\models\nul"));
        assert_eq!(p(r"\\?\C:\models\a."), PathBuf::from(r"\\?\C:\models\a."));
        let long = format!(r"\\?\C:\{}", "d\\".repeat(200));
        assert_eq!(p(&long), PathBuf::from(&long));
        assert_eq!(p(r"\\?\Volume{x}\a"), PathBuf::from(r"\\?\Volume{x}\a"));
        assert_eq!(p("/home/u/a.gguf"), PathBuf::from("/home/u/a.gguf"));
        assert_eq!(p(r"C:\a"), PathBuf::from(r"C:\a"));
    }

    #[test]
    fn windows_device_names_are_known_with_any_extension() {
        for n in [
            "CON",
            "nul",
            "nul.safetensors",
            "Com1.bin",
            "LPT9",
            "aux.",
            "CONIN$",
        ] {
            assert!(is_windows_device_name(n), "{n}");
        }
        for n in [
            "console",
            "null.safetensors",
            "COM10",
            "com",
            "model.safetensors",
        ] {
            assert!(!is_windows_device_name(n), "{n}");
        }
    }

    #[test]
    fn a_hard_link_is_the_same_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let c = dir.path().join("c");
        std::fs::write(&a, b"x").expect("write");
        std::fs::hard_link(&a, &b).expect("link");
        std::fs::write(&c, b"x").expect("write");
        assert!(same_file(&a, &b));
        assert!(!same_file(&a, &c));
        assert!(!same_file(&a, &dir.path().join("missing")));
    }
}
