//! `tensorscope validate`: the reference's verdict, with our evidence.

use std::fmt::Write as _;

use serde::Serialize;

use super::output::{Output, display_name, path_string, report_error};
use super::{EXIT_NO, EXIT_OK, ValidateArgs};
use crate::format::{Checkpoint, LoadError, Warning};

/// Why a file is invalid, in `validate --json`.
#[derive(Debug, Serialize)]
pub struct VerdictError {
    /// The reference's kind (or ShardMissing, ShardInvalid, IndexMismatch,
    /// InvalidIndex for a shard index).
    pub kind: &'static str,
    /// The specific message with its evidence.
    pub message: String,
    /// The tensor the error is about, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// The shard the error is about (shard indexes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// For `ShardInvalid`: the reference kind of the shard's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_error_kind: Option<&'static str>,
    /// Another format recognised by its signature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_format: Option<&'static str>,
    /// The rule that was broken, in plain words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// For `UnsafePickle`: the globals the pickle would import.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub globals: Vec<String>,
}

/// The `validate --json` document: the verdict and the warnings.
#[derive(Debug, Serialize)]
pub struct ValidateDoc {
    /// What was checked, as given.
    pub path: String,
    /// The verdict: true when the reference reader would accept the file.
    pub valid: bool,
    /// Why it is invalid; `null` when valid.
    pub error: Option<VerdictError>,
    /// Quirks the reference accepts (they do not make the file invalid).
    pub warnings: Vec<Warning>,
}

impl ValidateDoc {
    /// The document for a checkpoint that opened.
    pub fn valid(ck: &Checkpoint) -> Self {
        Self {
            path: path_string(ck.path()),
            valid: true,
            error: None,
            warnings: ck.warnings().to_vec(),
        }
    }

    /// The document for a checkpoint rejected by a check.
    pub fn invalid(e: &LoadError) -> Self {
        let format = e.format_error();
        Self {
            path: path_string(e.path()),
            valid: false,
            error: Some(VerdictError {
                kind: e.kind(),
                message: e.message(),
                tensor: e.tensor().map(str::to_owned),
                shard: e.shard().map(str::to_owned),
                shard_error_kind: match e {
                    LoadError::ShardInvalid { error, .. } => Some(error.kind()),
                    _ => None,
                },
                detected_format: format
                    .and_then(crate::format::FormatError::detected_format)
                    .map(crate::format::ForeignFormat::id),
                rule: format.map(crate::format::FormatError::rule),
                globals: e.unsafe_globals().to_vec(),
            }),
            warnings: Vec::new(),
        }
    }

    /// The human-readable form printed without `--json`: `valid` or the error,
    /// then the warnings.
    pub fn to_text(&self) -> String {
        let mut s = match &self.error {
            None => format!("valid: {}\n", self.path),
            Some(e) => format!(
                "invalid ({}): {}\n  {}\n",
                e.kind,
                self.path,
                display_name(&e.message)
            ),
        };
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {}", display_name(&w.message));
        }
        s
    }
}

/// Runs `validate` and returns its exit code (0 valid, 1 invalid, 2 when
/// the file cannot be read).
pub fn run(args: &ValidateArgs, out: &mut Output, cancel: &crate::jobs::CancelToken) -> i32 {
    let opened = Checkpoint::open(&args.file).and_then(|ck| {
        ck.readable()?;
        ck.verify_data(cancel)?;
        Ok(ck)
    });
    let (doc, code) = match opened {
        Ok(ck) => (ValidateDoc::valid(&ck), EXIT_OK),
        Err(e) if e.is_verdict() => (ValidateDoc::invalid(&e), EXIT_NO),
        Err(e) => return report_error(out, args.common.json, &e),
    };
    if args.common.json {
        out.json(&doc);
    } else {
        out.text(&doc.to_text());
    }
    code
}
