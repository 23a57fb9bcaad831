//! Where a checkpoint's quantization config lives, read as hostile input:
//! `config.json` (`quantization_config`, or MLX's `quantization`),
//! `quantize_config.json` (old GPTQ files), `hf_quant_config.json` (NVIDIA
//! ModelOpt) beside the file or in the snapshot folder, and the file's
//! `__metadata__` (`format: mlx`).
//!
//! A config is at most [`MAX_CONFIG_BYTES`]; a bigger one, or one that is
//! not JSON, is recorded as a [`ConfigProblem`] and the tensors decide
//! alone.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Config files larger than this are not read (real ones are a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The quantization config that applies to a checkpoint.
#[derive(Debug, Clone, Default)]
pub struct QuantConfig {
    /// The file it came from (`None` when it came from `__metadata__` or
    /// there is none).
    pub path: Option<PathBuf>,
    /// `quant_method` (lowercase), or `modelopt` for `hf_quant_config.json`,
    /// `mlx` for MLX's `quantization`.
    pub method: Option<String>,
    /// The config object itself (`quantization_config`, `quantization`, …).
    pub body: Value,
    /// Config files that were found but could not be used.
    pub problems: Vec<ConfigProblem>,
}

/// A config file that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl QuantConfig {
    /// A field of the config as a string (lowercased).
    pub fn str_field(&self, key: &str) -> Option<String> {
        self.body
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
    }

    /// A field of the config as an integer.
    pub fn int_field(&self, key: &str) -> Option<i64> {
        self.body.get(key).and_then(Value::as_i64)
    }

    /// A field of the config as a boolean.
    pub fn bool_field(&self, key: &str) -> Option<bool> {
        self.body.get(key).and_then(Value::as_bool)
    }
}

/// Reads a JSON file of at most [`MAX_CONFIG_BYTES`].
pub(crate) fn read_json(path: &Path) -> Result<Option<Value>, String> {
    // Beside a remote checkpoint: the file at the URL, as hostile as a
    // local one and under the same cap.
    if let Some(url) = path.to_str()
        && crate::source::remote::is_remote(url)
    {
        let text = crate::source::remote::client()
            .read_small(url, MAX_CONFIG_BYTES)
            .map_err(|e| format!("cannot be read: {e}"))?;
        return text
            .map(|t| serde_json::from_slice(&t).map_err(|e| format!("is not valid JSON: {e}")))
            .transpose();
    }
    // Only a regular file: opening a FIFO (or a device) of that name would
    // wait for a writer forever, and the job opening the checkpoint with it.
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Err("is not a regular file: not read".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot be read: {e}")),
    };
    let len = file.metadata().map_or(0, |m| m.len());
    if len > MAX_CONFIG_BYTES {
        return Err(format!(
            "is {len} bytes, more than the {MAX_CONFIG_BYTES} a config may have: not read"
        ));
    }
    let mut text = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "grew past the {MAX_CONFIG_BYTES} bytes a config may have: not read"
        ));
    }
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| format!("is not valid JSON: {e}"))
}

/// The folder whose config files apply to the checkpoint opened at `path`
/// (the folder itself, or the folder of a file or shard index).
pub fn config_folder(path: &Path) -> Option<&Path> {
    if path.is_dir() {
        Some(path)
    } else {
        path.parent()
    }
}

/// Finds and reads the quantization config of the checkpoint opened at
/// `path`, whose first file's `__metadata__` is `metadata`.
pub fn find(path: &Path, metadata_format: Option<&str>) -> QuantConfig {
    let mut out = QuantConfig::default();
    if let Some(dir) = config_folder(path) {
        for (name, key) in [
            ("config.json", "quantization_config"),
            ("quantize_config.json", ""),
            ("hf_quant_config.json", "quantization"),
        ] {
            let file = dir.join(name);
            let value = match read_json(&file) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(message) => {
                    out.problems.push(ConfigProblem {
                        path: file,
                        message: format!("{name} {message}"),
                    });
                    continue;
                }
            };
            if let Some((method, body)) = pick(name, key, &value) {
                out.path = Some(file);
                out.method = Some(method);
                out.body = body;
                return out;
            }
        }
    }
    if metadata_format.is_some_and(|f| f.eq_ignore_ascii_case("mlx")) {
        out.method = Some("mlx".into());
    }
    out
}

/// The method and body of a config file's quantization section, if any.
fn pick(name: &str, key: &str, value: &Value) -> Option<(String, Value)> {
    let method_of = |v: &Value| {
        v.get("quant_method")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
    };
    match name {
        "config.json" => {
            if let Some(q) = value.get(key).filter(|v| v.is_object()) {
                // MLX writes the same object under both keys, without a
                // quant_method.
                let method = method_of(q).unwrap_or_else(|| {
                    if value.get("quantization").is_some_and(Value::is_object) {
                        "mlx".into()
                    } else {
                        "unknown".into()
                    }
                });
                return Some((method, q.clone()));
            }
            let q = value.get("quantization").filter(|v| v.is_object())?;
            Some(("mlx".into(), q.clone()))
        }
        "quantize_config.json" => {
            let method = method_of(value).unwrap_or_else(|| "gptq".into());
            value.is_object().then(|| (method, value.clone()))
        }
        _ => {
            let q = value.get(key).filter(|v| v.is_object())?;
            Some(("modelopt".into(), q.clone()))
        }
    }
}

#[cfg(test)]
mod read_tests {
    use super::*;

    /// A FIFO or a folder in a config file's place is named, never waited
    /// on or read.
    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("config.json");
        std::fs::create_dir(&folder).expect("mkdir");
        let e = read_json(&folder).expect_err("a folder");
        assert!(e.contains("not a regular file"), "{e}");
        let fifo = dir.path().join("quantize_config.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            let e = read_json(&fifo).expect_err("a FIFO");
            assert!(e.contains("not a regular file"), "{e}");
        }
        assert_eq!(read_json(&dir.path().join("absent.json")), Ok(None));
    }
}
