//! What ships beside the binary, generated from its one definition of the
//! command line: the completion scripts and the man page name every verb
//! and every flag its `--help` lists, and `--version` says what a bug
//! report needs.

use crate::exe::OutputOnceMore as _;

fn tensorscope(args: &[&str]) -> (i32, String) {
    let out = crate::exe::command()
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output_once_more()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

const VERBS: [&str; 7] = [
    "info",
    "validate",
    "stats",
    "diff",
    "export",
    "resave",
    "completions",
];

/// The long flags `tensorscope [VERB] --help` lists.
fn flags(verb: Option<&str>) -> Vec<String> {
    let mut args: Vec<&str> = verb.into_iter().collect();
    args.push("--help");
    let (code, help) = tensorscope(&args);
    assert_eq!(code, 0, "{args:?}");
    let mut out: Vec<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .split('=')
                .next()
                .unwrap_or(w)
                .to_owned()
        })
        .collect();
    out.sort();
    out.dedup();
    assert!(!out.is_empty(), "{args:?}: no flags in {help}");
    out
}

#[test]
fn completions_name_every_verb_and_flag() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, script) = tensorscope(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        for verb in VERBS {
            assert!(script.contains(verb), "{shell}: no {verb}");
        }
        for verb in VERBS {
            for flag in flags(Some(verb)) {
                let bare = flag.trim_start_matches('-');
                // fish writes `-l json`, the others `--json`.
                assert!(
                    script.contains(&flag) || script.contains(&format!("-l {bare}")),
                    "{shell}: {verb} {flag} is not completed"
                );
            }
        }
    }
    let (code, bash) = tensorscope(&["completions", "bash"]);
    assert_eq!(code, 0);
    assert!(bash.starts_with("_tensorscope()"), "{bash}");
    // Not a file to open in a window.
    let (code, _) = tensorscope(&["completions", "tcsh"]);
    assert_eq!(code, 2);
}

#[test]
fn the_man_page_documents_every_verb_and_flag() {
    let (code, page) = tensorscope(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH tensorscope 1"), "{page}");
    let roff = |flag: &str| flag.replace('-', "\\-");
    for flag in flags(None) {
        assert!(page.contains(&roff(&flag)), "man: {flag}");
    }
    for verb in VERBS {
        assert!(
            page.contains(&format!(".SH \"TENSORSCOPE {}\"", verb.to_uppercase())),
            "man: no section for {verb}"
        );
        for flag in flags(Some(verb)) {
            assert!(page.contains(&roff(&flag)), "man: {verb} {flag}");
        }
    }
}

#[test]
fn version_names_the_commit_and_the_vector_instructions() {
    let (code, text) = tensorscope(&["--version"]);
    assert_eq!(code, 0);
    assert!(
        text.starts_with(&format!("tensorscope {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let commit = text
        .lines()
        .find_map(|l| l.strip_prefix("commit: "))
        .unwrap_or_else(|| panic!("no commit line: {text}"));
    assert!(!commit.is_empty(), "{text}");
    let sets = text
        .lines()
        .find_map(|l| l.strip_prefix("vector instructions (chosen at run time): "))
        .unwrap_or_else(|| panic!("no vector line: {text}"));
    assert!(
        ["AVX2", "AVX-512", "portable", "F16C"]
            .iter()
            .any(|s| sets.contains(s)),
        "{text}"
    );
    let (code, short) = tensorscope(&["-V"]);
    assert_eq!(
        (code, short.trim()),
        (
            0,
            format!("tensorscope {}", env!("CARGO_PKG_VERSION")).as_str()
        )
    );
}
