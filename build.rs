//! What `tensorscope --version` says about the build: the commit it was
//! built from. From git when the source is a checkout (the build script
//! runs again when HEAD moves), else from `$TENSORSCOPE_COMMIT` (a source
//! tarball, a wheel's sdist), else `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=TENSORSCOPE_COMMIT");
    let from_env = std::env::var("TENSORSCOPE_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    let commit = from_env.or_else(|| {
        // Run again when HEAD moves: HEAD itself (a checkout), the branch it
        // names (a commit), and the packed refs (a fetch, a gc).
        if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
            println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
            if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(PathBuf::from) {
                let common = if common.is_absolute() {
                    common
                } else {
                    std::env::current_dir()
                        .map(|d| d.join(&common))
                        .unwrap_or(common)
                };
                println!(
                    "cargo:rerun-if-changed={}",
                    common.join("packed-refs").display()
                );
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    println!("cargo:rerun-if-changed={}", common.join(branch).display());
                }
            }
        }
        let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
        let date = git(&["log", "-1", "--format=%cs", "HEAD"]);
        Some(match date {
            Some(d) => format!("{hash} ({d})"),
            None => hash,
        })
    });
    println!(
        "cargo:rustc-env=TENSORSCOPE_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".to_owned())
    );
}
