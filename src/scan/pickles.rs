//! Every pickle a file holds, read by the pickle machine (never loaded):
//! the globals it would import, each one outside the allowlist a finding.
//! Globals named before a pickle stops parsing count too: `pickle.load`
//! would have imported (and called) them before reaching the fault.

use super::{Finding, Rule};
use crate::format::pytorch::pickle::{self, PickleError};

/// The allowlist a pickle is held to: torch's `weights_only` globals, and
/// for the pickles of a distributed checkpoint its own record classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Allow {
    /// Torch's `weights_only` allowlist (PICKLE.md).
    Torch,
    /// With PyTorch DCP's metadata records (`.metadata`, a `.distcp`'s
    /// bytes entries).
    Dcp,
    /// With DeepSpeed's records (`*_model_states.pt`, `*_optim_states.pt`).
    DeepSpeed,
}

impl Allow {
    fn beyond(self) -> &'static [&'static str] {
        match self {
            Allow::Torch => &[],
            Allow::Dcp => crate::format::dcp::ALLOWED,
            Allow::DeepSpeed => crate::format::deepspeed::ALLOWED,
        }
    }
}

/// The most pickles read back to back from one stream (a bare file of
/// several, a legacy torch file's five).
pub(super) const MAX_PICKLES: usize = 64;

/// The findings of the globals `globals` named by the pickle `place`
/// (`"the pickle"`, `"the pickle of member \"archive/data.pkl\""`) at byte
/// `at` of the file.
pub(super) fn findings_of<'a>(
    globals: impl IntoIterator<Item = &'a String>,
    allow: Allow,
    place: &str,
    at: u64,
    out: &mut Vec<Finding>,
) {
    let refused = crate::format::pytorch::unsafe_globals_beyond(globals, allow.beyond());
    for g in refused {
        let message = if g == "?.?" {
            format!(
                "{place} imports a global by STACK_GLOBAL from values that are not plain strings"
            )
        } else {
            format!("{place} imports {}", crate::text::safe_text(&g, 200))
        };
        if out
            .iter()
            .any(|f| f.rule == Rule::PickleUnsafeGlobal && f.evidence.as_deref() == Some(&g))
        {
            continue;
        }
        out.push(Finding::new(
            Rule::PickleUnsafeGlobal,
            message,
            Some(g),
            Some(at),
        ));
    }
}

/// Reads the pickle at the start of `bytes` (byte `at` of the file) and
/// adds its findings; returns where it ended, or why it did not parse.
pub(super) fn one(
    bytes: &[u8],
    at: u64,
    allow: Allow,
    place: &str,
    out: &mut Vec<Finding>,
) -> Result<usize, PickleError> {
    match pickle::parse(bytes) {
        Ok(p) => {
            findings_of(&p.globals, allow, place, at, out);
            Ok(p.end)
        }
        Err(f) => {
            findings_of(&f.globals, allow, place, at, out);
            Err(f.error)
        }
    }
}

/// True when `bytes` start as a pickle of protocol 2 or later does.
pub(super) fn starts_pickle(bytes: &[u8]) -> bool {
    matches!(bytes, [0x80, 2..=5, ..])
}

/// Reads the pickles of a stream back to back (at most `max`): the first
/// must parse; each one after it is read while the bytes go on as a pickle
/// of protocol 2 or later does. `place` names the stream in the findings'
/// messages (`"the pickle"`, `"the pickle of member \"archive/data.pkl\""`)
/// and `at` is where it starts in the file. Returns the first pickle's
/// error.
pub(super) fn stream(
    bytes: &[u8],
    max: usize,
    allow: Allow,
    place: &str,
    at: u64,
    out: &mut Vec<Finding>,
) -> Result<(), PickleError> {
    let mut read = 0usize;
    for n in 0..max {
        let rest = bytes.get(read..).unwrap_or_default();
        if n > 0 && !starts_pickle(rest) {
            break;
        }
        let start = at + read as u64;
        let named = if n == 0 {
            place.to_owned()
        } else {
            format!("{place} (pickle {} of the stream, at byte {start})", n + 1)
        };
        match one(rest, start, allow, &named, out) {
            Ok(end) => read += end,
            Err(e) if n == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(out: &[Finding]) -> Vec<&str> {
        out.iter().filter_map(|f| f.evidence.as_deref()).collect()
    }

    #[test]
    fn a_protocol_0_global_is_a_finding_and_an_allowed_one_is_not() {
        let mut out = Vec::new();
        stream(
            b"cos\nsystem\n(S'echo hi'\ntR.",
            4,
            Allow::Torch,
            "the pickle",
            0,
            &mut out,
        )
        .unwrap();
        assert_eq!(evidence(&out), ["os.system"]);
        assert!(out[0].message.contains("os.system"));
        let mut out = Vec::new();
        stream(
            b"\x80\x02ccollections\nOrderedDict\n)R.",
            4,
            Allow::Torch,
            "the pickle",
            0,
            &mut out,
        )
        .unwrap();
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn stack_global_is_resolved_through_the_memo() {
        // PROTO 4, "posix" memoized, "system", STACK_GLOBAL, STOP.
        let p = b"\x80\x04\x8c\x05posix\x94\x8c\x06system\x94\x93.";
        let mut out = Vec::new();
        stream(p, 4, Allow::Torch, "the pickle", 0, &mut out).unwrap();
        assert_eq!(evidence(&out), ["posix.system"]);
    }

    #[test]
    fn a_second_pickle_and_a_truncated_one_are_read() {
        let mut p = b"\x80\x02}q\x00.".to_vec();
        p.extend_from_slice(b"\x80\x02cbuiltins\neval\nq\x00X\x02\x00\x00\x001+q\x01\x85R");
        let mut out = Vec::new();
        stream(&p, MAX_PICKLES, Allow::Torch, "the pickle", 0, &mut out).unwrap();
        assert_eq!(evidence(&out), ["builtins.eval"]);
        // Cut after REDUCE: the first pickle fails, and still names it.
        let mut out = Vec::new();
        let e = stream(
            &p[6..],
            MAX_PICKLES,
            Allow::Torch,
            "the pickle",
            0,
            &mut out,
        )
        .unwrap_err();
        assert_eq!(e.kind(), "InvalidPickle");
        assert_eq!(evidence(&out), ["builtins.eval"]);
    }

    #[test]
    fn dcp_records_pass_only_for_dcp() {
        let p = b"\x80\x02ctorch.distributed.checkpoint.metadata\nMetadata\n)R.";
        let mut out = Vec::new();
        stream(p, 1, Allow::Dcp, "the pickle", 0, &mut out).unwrap();
        assert!(out.is_empty());
        stream(p, 1, Allow::Torch, "the pickle", 0, &mut out).unwrap();
        assert_eq!(
            evidence(&out),
            ["torch.distributed.checkpoint.metadata.Metadata"]
        );
    }
}
