//! PICKLE.md §6: the payloads found in the wild, each in the container it
//! comes in, through every verb with `--json`. Each would create a canary
//! file if anything ran it: the canary never appears, the globals are
//! named verbatim, `validate` says invalid, the readers refuse, and the
//! working folder stays empty.

use crate::exe::OutputOnceMore as _;
use std::path::Path;

use super::build::{T, f32s, legacy, legacy_keys, legacy_object, run, state_dict, su, torch_zip};

/// `(file name, bytes, the unsafe globals it must name)` for a canary at
/// `canary`.
fn payloads(canary: &Path) -> Vec<(&'static str, Vec<u8>, Vec<&'static str>)> {
    let touch = format!("touch {}", canary.display());
    let cmd = su(&touch);
    let py = su(&format!("open({:?}, 'w')", canary.display().to_string()));
    let zipped = |payload: Vec<u8>| {
        let pickle = state_dict(&[("w", T::f32("0", &[2, 3]).pickle()), ("x", payload)]);
        torch_zip(&pickle, &[("0", f32s(6))])
    };
    // os.system through REDUCE, as protocol 2 spells it.
    let system = [&b"cposix\nsystem\n"[..], &cmd, b"\x85R"].concat();
    let eval = [&b"c__builtin__\neval\n"[..], &py, b"\x85R"].concat();
    let exec = [&b"cbuiltins\nexec\n"[..], &py, b"\x85R"].concat();
    let popen = [
        &b"csubprocess\nPopen\n("[..],
        &su("sh"),
        &su("-c"),
        &cmd,
        b"l\x85R",
    ]
    .concat();
    let commands = [&b"ccommands\nPopen\n"[..], &cmd, b"\x85R"].concat();
    // Protocol 4: STACK_GLOBAL over memoized operands.
    let stack_global = [
        &su("posix")[..],
        b"\x94",
        &su("system"),
        b"\x94h\x00h\x01\x93",
        &cmd,
        b"\x85R",
    ]
    .concat();
    // INST: MARK args INST module name (imports and calls in one opcode).
    let inst = [&b"("[..], &cmd, b"iposix\nsystem\n"].concat();
    // getattr(__import__('os'), 'system')(cmd).
    let getattr = [
        &b"c__builtin__\ngetattr\n(c__builtin__\n__import__\n"[..],
        &su("os"),
        b"\x85R",
        &su("system"),
        b"tR",
        &cmd,
        b"\x85R",
    ]
    .concat();
    let save = [
        &b"ctorch.serialization\nsave\n("[..],
        b"K\x01",
        &su(&canary.display().to_string()),
        b"tR",
    ]
    .concat();
    // A bare pickle named like weights.
    let bare = [&b"\x80\x02"[..], &system, b"."].concat();
    // Legacy files: the payload in the object, and in the storage keys.
    let object_payload = {
        let mut o = legacy_object(&[("w", T::f32("0", &[2, 3]))]);
        let at = o.len() - 2;
        o.splice(at..at, [su("x"), system.clone()].concat());
        o
    };
    let legacy_main = legacy(true, &object_payload, &legacy_keys(&["0"]), &[(6, f32s(6))]);
    let evil_keys = [&b"\x80\x02]("[..], &su("0"), &system, b"e."].concat();
    let legacy_keys_payload = legacy(
        true,
        &legacy_object(&[("w", T::f32("0", &[2, 3]))]),
        &evil_keys,
        &[(6, f32s(6))],
    );
    vec![
        ("system.pt", zipped(system), vec!["posix.system"]),
        ("eval.pt", zipped(eval), vec!["__builtin__.eval"]),
        ("exec.pt", zipped(exec), vec!["builtins.exec"]),
        ("popen.pt", zipped(popen), vec!["subprocess.Popen"]),
        ("commands.pt", zipped(commands), vec!["commands.Popen"]),
        (
            "stack_global.pt",
            zipped(stack_global),
            vec!["posix.system"],
        ),
        ("inst.pt", zipped(inst), vec!["posix.system"]),
        (
            "getattr.pt",
            zipped(getattr),
            vec!["__builtin__.__import__", "__builtin__.getattr"],
        ),
        ("save.pt", zipped(save), vec!["torch.serialization.save"]),
        ("weights.bin", bare, vec!["posix.system"]),
        ("legacy_main.pt", legacy_main, vec!["posix.system"]),
        ("legacy_keys.pt", legacy_keys_payload, vec!["posix.system"]),
    ]
}

#[test]
fn no_payload_runs_and_each_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let canary = dir.path().join("CANARY");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("work");
    let clean = dir.path().join("clean.pt");
    std::fs::write(
        &clean,
        torch_zip(
            &state_dict(&[("w", T::f32("0", &[2, 3]).pickle())]),
            &[("0", f32s(6))],
        ),
    )
    .expect("clean");
    let clean = clean.to_str().expect("utf-8");
    for (name, bytes, named) in payloads(&canary) {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).expect("write");
        let path = file.to_str().expect("utf-8");
        let r = run(&work, &["info", path]);
        assert!(r.code == 0 || r.code == 1, "{name}: info: {}", r.doc);
        assert_eq!(
            r.doc["pickle"]["unsafe_globals"],
            serde_json::json!(named),
            "{name}: {}",
            r.doc
        );
        let globals = r.doc["pickle"]["globals"].as_array().expect("globals");
        for g in &named {
            assert!(globals.iter().any(|x| x == g), "{name}: {g} not in globals");
        }
        let r = run(&work, &["validate", path]);
        assert_eq!(
            (r.code, &r.doc["valid"]),
            (1, &false.into()),
            "{name}: {}",
            r.doc
        );
        let text = r.doc.to_string();
        for g in &named {
            assert!(
                text.contains(g),
                "{name}: validate does not name {g}: {text}"
            );
        }
        for args in [
            vec!["stats", path],
            vec!["export", path, "w", "-o", "w.npy"],
            vec!["resave", path, "-o", "w.safetensors"],
            vec!["diff", path, clean],
            vec!["diff", clean, path],
        ] {
            let r = run(&work, &args);
            assert_eq!(r.code, 2, "{name}: {args:?}: {}", r.doc);
            assert_eq!(r.doc["error"]["kind"], "UnsafePickle", "{name}: {args:?}");
        }
        assert!(!canary.exists(), "{name}: the payload ran");
        let left: Vec<_> = std::fs::read_dir(&work).expect("list").collect();
        assert!(left.is_empty(), "{name}: {left:?}");
    }
    // Not even the text verbs run anything.
    for (name, _, _) in payloads(&canary) {
        let file = dir.path().join(name);
        let out = crate::exe::command()
            .args(["info", file.to_str().expect("utf-8")])
            .current_dir(&work)
            .output_once_more()
            .expect("run");
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "{name}: {:?}",
            out.status
        );
    }
    assert!(!canary.exists(), "a payload ran");
}
