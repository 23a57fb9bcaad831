//! The lexical rule for an external-data `location` (FRAMEWORKS.md, "ONNX
//! external data"): a relative path that stays inside the model's folder
//! whatever the platform. Checked before any file is looked at; whether
//! the path resolves outside through a symlink is the caller's check.

/// Checks `location` lexically: refuses an empty path, a NUL byte, a
/// leading `/` or `\`, any `:` (a drive `C:`, a URL scheme `http:`, an
/// NTFS stream), and a `..` component (with `/` or `\` as separators).
/// The message says which rule.
pub fn location_is_inside(location: &str) -> Result<(), String> {
    if location.is_empty() {
        return Err("it is empty".to_owned());
    }
    if location.contains('\0') {
        return Err("it holds a NUL byte".to_owned());
    }
    if location.starts_with(['/', '\\']) {
        return Err("it is an absolute path".to_owned());
    }
    if location.contains(':') {
        return Err("it holds a ':' (a drive, a URL scheme or a stream name)".to_owned());
    }
    if location.split(['/', '\\']).any(|c| c == "..") {
        return Err("it has a '..' component".to_owned());
    }
    if components(location).next().is_none() {
        return Err("it names no file (only '.' components)".to_owned());
    }
    Ok(())
}

fn components(location: &str) -> impl Iterator<Item = &str> {
    location
        .split(['/', '\\'])
        .filter(|c| !c.is_empty() && *c != ".")
}

/// The location as a file name relative to the model's folder: checked by
/// [`location_is_inside`], `.` and empty components dropped, `\` read as
/// a separator, components joined with `/` (`./data/w.bin` and
/// `data\w.bin` are both `data/w.bin`).
pub fn normalise(location: &str) -> Result<String, String> {
    location_is_inside(location)?;
    Ok(components(location).collect::<Vec<_>>().join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_inside_are_kept() {
        assert_eq!(normalise("w.bin").as_deref(), Ok("w.bin"));
        assert_eq!(normalise("./w.bin").as_deref(), Ok("w.bin"));
        assert_eq!(normalise("data/./w.bin").as_deref(), Ok("data/w.bin"));
        assert_eq!(normalise("data\\w.bin").as_deref(), Ok("data/w.bin"));
        assert_eq!(normalise("a..b/w").as_deref(), Ok("a..b/w"));
    }

    #[test]
    fn paths_that_could_leave_are_refused() {
        for bad in [
            "",
            ".",
            "./",
            "../x",
            "../../x",
            "a/../../x",
            "a\\..\\x",
            "..",
            "/etc/passwd",
            "\\\\server\\share\\x",
            "C:\\x",
            "c:x",
            "https://example.com/w.bin",
            "file:///etc/passwd",
            "w.bin\0",
            "w.bin:stream",
        ] {
            assert!(location_is_inside(bad).is_err(), "{bad:?}");
        }
    }
}
