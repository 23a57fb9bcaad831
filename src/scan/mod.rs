//! `scan`: a security gate over files (SCAN.md). Every file is judged by
//! its content, without executing, extracting or writing anything:
//! `safe`, `unsafe` (a finding of the rules below), `invalid` (a file of a
//! known container that fails its validation) or `unknown` (not a
//! checkpoint). A scan reads headers and pickles, never tensor data.
//!
//! `judge.rs` recognises a file and runs the rules over a [`View`] of its
//! bytes (a local map, or a remote file read by ranges, so that both give
//! the same row); `pickles.rs` the globals of every pickle against the
//! allowlist; `zips.rs` archives (member paths, pickled members, object
//! arrays, a `.keras` config), `keras.rs` and `gguf.rs` their rules;
//! `targets.rs` what a PATH names (a file, a folder walked, a URL, a Hub
//! repository listed).

mod gguf;
mod judge;
mod keras;
mod pickles;
mod targets;
mod zips;

use std::ops::Range;
use std::path::Path;

use serde::Serialize;

use crate::source::RemoteFile;

pub use targets::{Target, TargetError, targets, targets_noting};

/// The rules a finding is of (`rule` in a row; a SARIF rule each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Rule {
    /// A pickle imports a global outside torch's `weights_only` allowlist.
    #[serde(rename = "pickle-unsafe-global")]
    PickleUnsafeGlobal,
    /// A `.keras` config holds a `Lambda` layer.
    #[serde(rename = "keras-lambda")]
    KerasLambda,
    /// A `.keras` config names a module or package other than Keras.
    #[serde(rename = "keras-custom-module")]
    KerasCustomModule,
    /// A GGUF chat template reaches Python internals.
    #[serde(rename = "gguf-chat-template")]
    GgufChatTemplate,
    /// A zip member has an absolute path or a `..` component.
    #[serde(rename = "archive-path")]
    ArchivePath,
    /// The file fails its container's validation.
    #[serde(rename = "invalid")]
    Invalid,
}

impl Rule {
    /// Every rule, in the order SCAN.md lists them.
    pub const ALL: [Rule; 6] = [
        Rule::PickleUnsafeGlobal,
        Rule::KerasLambda,
        Rule::KerasCustomModule,
        Rule::GgufChatTemplate,
        Rule::ArchivePath,
        Rule::Invalid,
    ];

    /// The rule's id.
    pub fn id(self) -> &'static str {
        match self {
            Rule::PickleUnsafeGlobal => "pickle-unsafe-global",
            Rule::KerasLambda => "keras-lambda",
            Rule::KerasCustomModule => "keras-custom-module",
            Rule::GgufChatTemplate => "gguf-chat-template",
            Rule::ArchivePath => "archive-path",
            Rule::Invalid => "invalid",
        }
    }

    /// One line on what the rule finds.
    pub fn summary(self) -> &'static str {
        match self {
            Rule::PickleUnsafeGlobal => {
                "A pickle imports a global outside torch's weights_only allowlist"
            }
            Rule::KerasLambda => "A Keras config holds a Lambda layer, whose code runs at load",
            Rule::KerasCustomModule => "A Keras config names a module or package other than Keras",
            Rule::GgufChatTemplate => "A GGUF chat template reaches Python internals",
            Rule::ArchivePath => "An archive member has an absolute path or a '..' component",
            Rule::Invalid => "The file fails its container's validation",
        }
    }

    /// What the finding means and what to do about it (SARIF's help).
    pub fn help(self) -> &'static str {
        match self {
            Rule::PickleUnsafeGlobal => {
                "Loading this file with pickle (torch.load with weights_only=False, numpy.load with allow_pickle=True, joblib, pandas) imports and may call the named global: it can run any code. Load only files whose pickles import torch's weights_only allowlist, or convert the checkpoint to safetensors where it was made."
            }
            Rule::KerasLambda => {
                "A Lambda layer stores Python code that keras.models.load_model runs when safe_mode is off. Rebuild the layer as a registered subclass, or do not load the file."
            }
            Rule::KerasCustomModule => {
                "The config deserializes objects from a module or package outside Keras: loading the model imports and runs that code. Load it only if you trust that package."
            }
            Rule::GgufChatTemplate => {
                "The chat template reaches Python internals (__class__, __globals__, __subclasses__, __import__, os., popen): rendering it with Jinja can run code (the class of CVE-2024-34359). Replace the template or render it in a sandboxed environment."
            }
            Rule::ArchivePath => {
                "An archive member named with an absolute path or a '..' component writes outside the target folder when the archive is extracted (zip slip)."
            }
            Rule::Invalid => {
                "The file is named or marked as a checkpoint container but fails that container's validation: it is corrupt, truncated or crafted. Loaders may behave unpredictably on it."
            }
        }
    }
}

/// What a file is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// A checkpoint that validates and has no finding.
    Safe,
    /// At least one finding of a rule other than `invalid`.
    Unsafe,
    /// A file of a known container that fails its validation.
    Invalid,
    /// Not a checkpoint.
    Unknown,
}

impl Verdict {
    /// The verdict's name.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::Unsafe => "unsafe",
            Verdict::Invalid => "invalid",
            Verdict::Unknown => "unknown",
        }
    }

    /// True for the verdicts that fail a scan (exit 1).
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Unsafe | Verdict::Invalid)
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// What was found, for people.
    pub message: String,
    /// The offending text: the global, the member name, the matched token
    /// (`null` for `invalid`: every row has the same keys, which table
    /// readers such as Ray's and pandas' want).
    pub evidence: Option<String>,
    /// Where in the file, when it is known (the pickle's or member's
    /// first byte); SARIF's region.
    #[serde(skip)]
    pub offset: Option<u64>,
}

impl Finding {
    fn new(rule: Rule, message: String, evidence: Option<String>, offset: Option<u64>) -> Self {
        Self {
            rule,
            message,
            evidence,
            offset,
        }
    }
}

/// One file's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The file as reached from the argument (a URL as the URL).
    pub path: String,
    /// The container (`safetensors`, `numpy`, `pytorch`, `pickle`, `gguf`,
    /// `keras`, and the other containers' ids), `None` for no checkpoint.
    pub format: Option<&'static str>,
    /// The verdict.
    pub verdict: Verdict,
    /// Its findings; empty for safe and unknown files.
    pub findings: Vec<Finding>,
    /// Tensors, where the container was read (`null` elsewhere).
    pub tensors: Option<u64>,
    /// The file's size.
    pub bytes: u64,
    /// The file's URI (`file://` of the absolute path, or the URL), for
    /// SARIF.
    #[serde(skip)]
    pub uri: String,
}

/// Why a file could not be judged at all (exit 2): it cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ScanError {
    /// The file, as shown.
    pub path: String,
    /// Why.
    pub message: String,
}

/// A file's bytes as a scan reaches them: the whole file's length, every
/// range fetched before it is looked at (a no-op for a local map).
pub(crate) struct View<'a> {
    bytes: &'a [u8],
    remote: Option<&'a RemoteFile>,
}

impl<'a> View<'a> {
    /// The whole file's length.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The bytes of `range`, clamped to the file, fetched first when the
    /// file is remote.
    pub fn get(&self, range: Range<u64>) -> Result<&'a [u8], String> {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        if let Some(remote) = self.remote {
            remote
                .read_into_map(start..end)
                .map_err(|e| e.to_string())?;
        }
        Ok(&self.bytes[start as usize..end as usize])
    }

    /// The whole map (only the fetched ranges of a remote file are
    /// meaningful).
    pub fn all(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Judges the local file `path`, shown as `shown`.
pub fn scan_file(path: &Path, shown: String) -> Result<Row, ScanError> {
    judge::local(path, shown)
}

/// Judges the remote file `url`, shown as `shown`.
pub fn scan_url(url: &str, shown: String) -> Result<Row, ScanError> {
    judge::remote(url, shown)
}

/// Judges what `location` names when it is one file (local or remote): the
/// row of `tensorscope scan --json location`'s first line.
pub fn scan_one(location: &str) -> Result<Row, ScanError> {
    let all = targets(location).map_err(|e| ScanError {
        path: location.to_owned(),
        message: e.message,
    })?;
    match all.into_iter().next() {
        Some(t) => t.judge(),
        None => Err(ScanError {
            path: location.to_owned(),
            message: "holds no file to scan".into(),
        }),
    }
}
