//! The folders Tensorscope keeps things in, each where its platform puts
//! such things.
//!
//! | | Linux | macOS | Windows |
//! | --- | --- | --- | --- |
//! | cache (remote files) | `$XDG_CACHE_HOME/tensorscope`, `~/.cache/tensorscope` | `$XDG_CACHE_HOME/tensorscope`, `~/Library/Caches/tensorscope` | `%LOCALAPPDATA%\tensorscope\cache` |
//! | settings | `$XDG_CONFIG_HOME`, `~/.config` | `~/Library/Application Support` | `%APPDATA%` |
//!
//! The explorer's own settings (the window, recent files) are kept by
//! eframe in the settings folder's `tensorscope` (`%APPDATA%\tensorscope`
//! on Windows). `$TENSORSCOPE_CACHE_DIR` overrides the cache everywhere.

use std::path::PathBuf;

/// An environment variable that is set and not blank.
fn var(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.to_string_lossy().trim().is_empty())
        .map(PathBuf::from)
}

/// The user's home folder (`$HOME` on Unix, `%USERPROFILE%` on Windows).
pub fn home() -> Option<PathBuf> {
    #[cfg(windows)]
    let home = var("USERPROFILE").or_else(std::env::home_dir);
    #[cfg(not(windows))]
    let home = var("HOME");
    home.filter(|h| h.is_absolute())
}

/// The cache of remote files (without `$TENSORSCOPE_CACHE_DIR`, which the
/// caller reads first); `None` when the platform names none.
pub fn cache() -> Option<PathBuf> {
    #[cfg(windows)]
    {
        var("LOCALAPPDATA")
            .map(|d| d.join("tensorscope").join("cache"))
            .or_else(|| {
                home().map(|h| {
                    h.join("AppData")
                        .join("Local")
                        .join("tensorscope")
                        .join("cache")
                })
            })
    }
    #[cfg(target_os = "macos")]
    {
        var("XDG_CACHE_HOME")
            .map(|d| d.join("tensorscope"))
            .or_else(|| home().map(|h| h.join("Library/Caches/tensorscope")))
    }
    #[cfg(not(any(windows, target_os = "macos")))]
    {
        var("XDG_CACHE_HOME")
            .map(|d| d.join("tensorscope"))
            .or_else(|| home().map(|h| h.join(".cache").join("tensorscope")))
    }
}

/// The per-user settings folder (XDG's config home, Application Support,
/// or `%APPDATA%`); `None` when the platform names none.
pub fn config() -> Option<PathBuf> {
    #[cfg(windows)]
    {
        var("APPDATA").or_else(|| home().map(|h| h.join("AppData").join("Roaming")))
    }
    #[cfg(target_os = "macos")]
    {
        home().map(|h| h.join("Library/Application Support"))
    }
    #[cfg(not(any(windows, target_os = "macos")))]
    {
        var("XDG_CONFIG_HOME").or_else(|| home().map(|h| h.join(".config")))
    }
}

/// The per-user data folder (XDG's data home; Windows' `%APPDATA%`).
pub fn data() -> Option<PathBuf> {
    #[cfg(windows)]
    {
        config()
    }
    #[cfg(target_os = "macos")]
    {
        config()
    }
    #[cfg(not(any(windows, target_os = "macos")))]
    {
        var("XDG_DATA_HOME").or_else(|| home().map(|h| h.join(".local").join("share")))
    }
}
