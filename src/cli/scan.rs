//! `tensorscope scan PATH... [--json | --sarif]` (SCAN.md): every file
//! under each PATH judged without executing or writing anything; text for
//! people, JSON Lines, or one SARIF 2.1.0 document. Exit 0 when nothing is
//! unsafe or invalid, 1 when something is, 2 on a usage or I/O error.

use std::fmt::Write as _;
use std::time::Instant;

use clap::Args;
use rayon::prelude::*;
use serde_json::{Value, json};

use super::output::{Output, Units, with_progress_bar_in};
use super::{EXIT_ERROR, EXIT_NO, EXIT_OK};
use crate::jobs::{CancelToken, Progress};
use crate::scan::{Row, Rule, Target, Verdict, targets_noting};

/// `tensorscope scan PATH...`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Files, folders (walked recursively), https:// URLs of files, or
    /// Hugging Face repositories (hf://ORG/REPO[@REVISION], or the
    /// repository's https://huggingface.co/ORG/REPO page): every file judged.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<String>,
    /// JSON Lines: one JSON object per file on stdout, nothing else.
    #[arg(long)]
    pub json: bool,
    /// One SARIF 2.1.0 document on stdout (for code-scanning tools).
    #[arg(long, conflicts_with = "json")]
    pub sarif: bool,
}

/// Files judged at once, on every core, before their rows are written.
const BATCH: usize = 256;

/// Runs the verb.
pub fn run(args: &ScanArgs, out: &mut Output, cancel: &CancelToken) -> i32 {
    let started = Instant::now();
    let mut errors = 0usize;
    let mut all: Vec<Target> = Vec::new();
    for path in &args.paths {
        let mut skipped = Vec::new();
        match targets_noting(path, &mut skipped) {
            Ok(t) => all.extend(t),
            Err(e) => {
                say!("tensorscope: {e}");
                errors += 1;
            }
        }
        for s in skipped {
            say!("tensorscope: skipped {s}");
        }
    }
    let progress = Progress::new();
    progress.set_total(all.len() as u64);
    let mut counts = [0usize; 4];
    let mut rows: Vec<Row> = Vec::new();
    with_progress_bar_in(&progress, started, Units::Files, || {
        for batch in all.chunks(BATCH) {
            if cancel.is_cancelled() {
                break;
            }
            let judged: Vec<_> = batch
                .par_iter()
                .map(|t| {
                    let r = t.judge();
                    progress.add(1);
                    r
                })
                .collect();
            for r in judged {
                match r {
                    Ok(row) => {
                        counts[row.verdict as usize] += 1;
                        if args.sarif {
                            rows.push(row);
                        } else if args.json {
                            match serde_json::to_string(&row) {
                                Ok(line) => {
                                    out.text(&line);
                                    out.text("\n");
                                }
                                Err(e) => say!("tensorscope: cannot encode a row: {e}"),
                            }
                        } else {
                            out.text(&text_row(&row));
                        }
                    }
                    Err(e) => {
                        say!("tensorscope: cannot scan {e}");
                        errors += 1;
                    }
                }
            }
        }
    });
    if cancel.is_cancelled() {
        say!("tensorscope: cancelled");
        return EXIT_ERROR;
    }
    if args.sarif {
        out.json(&sarif(&rows));
    } else if !args.json {
        let [safe, unsafe_, invalid, unknown] = counts;
        out.text(&format!(
            "{} files: {safe} safe, {unsafe_} unsafe, {invalid} invalid, {unknown} not checkpoints{}\n",
            safe + unsafe_ + invalid + unknown,
            if errors > 0 {
                format!(", {errors} not read")
            } else {
                String::new()
            }
        ));
    }
    if errors > 0 {
        EXIT_ERROR
    } else if counts[Verdict::Unsafe as usize] + counts[Verdict::Invalid as usize] > 0 {
        EXIT_NO
    } else {
        EXIT_OK
    }
}

/// A row for people: the verdict, the format, the path; a line per finding.
fn text_row(row: &Row) -> String {
    let mut s = format!(
        "{:<8}{:<12}{}\n",
        row.verdict.name(),
        row.format.unwrap_or("-"),
        crate::text::display_name(&row.path)
    );
    for f in &row.findings {
        let _ = writeln!(
            s,
            "    {}: {}",
            f.rule.id(),
            crate::text::display_name(&f.message)
        );
    }
    s
}

/// The SARIF 2.1.0 document of `rows`: one run, a rule per rule id that
/// occurs, a result per finding.
pub fn sarif(rows: &[Row]) -> Value {
    let mut used: Vec<Rule> = rows
        .iter()
        .flat_map(|r| r.findings.iter().map(|f| f.rule))
        .collect();
    used.sort();
    used.dedup();
    let rules: Vec<Value> = used
        .iter()
        .map(|r| {
            json!({
                "id": r.id(),
                "name": r.id(),
                "shortDescription": {"text": r.summary()},
                "fullDescription": {"text": r.help()},
                "help": {"text": r.help()},
                "defaultConfiguration": {"level": "error"},
            })
        })
        .collect();
    let mut results = Vec::new();
    for row in rows {
        for f in &row.findings {
            let index = used.iter().position(|r| *r == f.rule).unwrap_or(0);
            let mut location = json!({"artifactLocation": {"uri": row.uri}});
            if let Some(at) = f.offset {
                location["region"] = json!({"byteOffset": at});
            }
            let mut result = json!({
                "ruleId": f.rule.id(),
                "ruleIndex": index,
                "level": "error",
                "message": {"text": f.message},
                "locations": [{"physicalLocation": location}],
            });
            if let Some(e) = &f.evidence {
                result["properties"] = json!({"evidence": e, "format": row.format});
            }
            results.push(result);
        }
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "tensorscope",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    })
}
