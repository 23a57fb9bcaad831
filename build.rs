//! What `tensorscope --version` says about the build: the commit it was
//! built from. From git when the source is a checkout (the build script
//! runs again when HEAD moves), else from `$TENSORSCOPE_COMMIT` (a source
//! tarball, a wheel's sdist), else `unknown`.
//!
//! For Windows it also compiles the programs' resources (the icon, the
//! version information, the manifest: `assets/windows/`) with the
//! toolchain's resource compiler (`windres` for the GNU targets, `rc.exe`
//! for MSVC) and links them into each program.

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
    let commit = commit.unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=TENSORSCOPE_COMMIT={commit}");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("windows") {
        for (name, description) in [
            (
                "tensorscope",
                "Tensorscope: explore machine-learning checkpoints (command line and explorer)",
            ),
            (
                "tensorscope-gui",
                "Tensorscope: explore machine-learning checkpoints",
            ),
        ] {
            // The explorer-only program exists with the `gui` feature.
            if name == "tensorscope-gui" && std::env::var_os("CARGO_FEATURE_GUI").is_none() {
                continue;
            }
            if let Err(e) = windows_resources(name, description, &commit) {
                panic!(
                    "the Windows resources of {name}.exe could not be compiled: {e} \
                     (install the MinGW-w64 binutils, or set WINDRES / RC)"
                );
            }
        }
    }
}

/// A path as a resource script quotes it (`/` separators, which both
/// compilers read).
fn rc_path(p: &std::path::Path) -> String {
    p.display().to_string().replace('\\', "/")
}

/// Compiles `assets/windows/tensorscope.rc.in` for the program `name` and
/// links the result into it.
fn windows_resources(name: &str, description: &str, commit: &str) -> Result<(), String> {
    let var = |k: &str| std::env::var(k).map_err(|e| format!("{k}: {e}"));
    let root = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    let out = PathBuf::from(var("OUT_DIR")?);
    let assets = root.join("assets").join("windows");
    for f in [
        "tensorscope.rc.in",
        "tensorscope.ico",
        "tensorscope.exe.manifest",
    ] {
        println!("cargo:rerun-if-changed={}", assets.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=WINDRES");
    println!("cargo:rerun-if-env-changed=RC");
    let template = std::fs::read_to_string(assets.join("tensorscope.rc.in"))
        .map_err(|e| format!("assets/windows/tensorscope.rc.in: {e}"))?;
    let version = var("CARGO_PKG_VERSION")?;
    let script = template
        .replace("@NAME@", name)
        .replace("@DESCRIPTION@", description)
        .replace("@VERSION@", &version)
        .replace("@COMMIT@", &commit.replace('"', ""))
        .replace("@MAJOR@", &var("CARGO_PKG_VERSION_MAJOR")?)
        .replace("@MINOR@", &var("CARGO_PKG_VERSION_MINOR")?)
        .replace("@PATCH@", &var("CARGO_PKG_VERSION_PATCH")?)
        .replace("@ICON@", &rc_path(&assets.join("tensorscope.ico")))
        .replace(
            "@MANIFEST@",
            &rc_path(&assets.join("tensorscope.exe.manifest")),
        );
    let rc = out.join(format!("{name}.rc"));
    std::fs::write(&rc, script).map_err(|e| format!("{}: {e}", rc.display()))?;
    let msvc = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("msvc");
    let compiled = if msvc {
        let res = out.join(format!("{name}.res"));
        let rc_exe = std::env::var("RC").unwrap_or_else(|_| "rc.exe".to_owned());
        run(Command::new(rc_exe)
            .arg("/nologo")
            .arg("/fo")
            .arg(&res)
            .arg(&rc))?;
        res
    } else {
        let obj = out.join(format!("{name}-resources.o"));
        let windres = std::env::var("WINDRES").unwrap_or_else(|_| {
            let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
            let prefixed = format!("{arch}-w64-mingw32-windres");
            if Command::new(&prefixed).arg("--version").output().is_ok() {
                prefixed
            } else {
                "windres".to_owned()
            }
        });
        run(Command::new(windres)
            .arg("--input")
            .arg(&rc)
            .arg("--output-format=coff")
            .arg("--output")
            .arg(&obj))?;
        obj
    };
    println!("cargo:rustc-link-arg-bin={name}={}", compiled.display());
    Ok(())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
