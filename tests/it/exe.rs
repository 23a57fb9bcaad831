//! The program the command-line tests run: this build's `tensorscope`, or
//! the one `$TENSORSCOPE_TEST_EXE` names with `$TENSORSCOPE_TEST_RUNNER`
//! in front (`scripts/test-windows`: the Windows `.exe` under `wine`), so
//! that the same tests check every build of the command line.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// The program under test.
pub fn path() -> PathBuf {
    std::env::var_os("TENSORSCOPE_TEST_EXE")
        .filter(|p| !p.is_empty())
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_tensorscope")),
            PathBuf::from,
        )
}

/// True when the program under test is not this build's own (another
/// system's build, run through `$TENSORSCOPE_TEST_RUNNER`): tests of what
/// only the native build can show (signals, `ulimit`, `/proc`) step aside.
pub fn foreign() -> bool {
    std::env::var_os("TENSORSCOPE_TEST_EXE").is_some_and(|p| !p.is_empty())
}

/// The runner's words, if any (`wine`).
fn runner() -> Vec<OsString> {
    std::env::var("TENSORSCOPE_TEST_RUNNER")
        .ok()
        .map(|r| r.split_whitespace().map(OsString::from).collect())
        .unwrap_or_default()
}

/// A command that runs the program under test.
pub fn command() -> Command {
    let mut words = runner();
    if words.is_empty() {
        return Command::new(path());
    }
    let mut cmd = Command::new(words.remove(0));
    cmd.args(words).arg(path());
    cmd
}

/// `Command::output`, run once more when the program under test ran in
/// the emulator and ended with nothing at all on stdout and stderr.
///
/// Wine 8.0 now and then ends a program before it wrote anything (seen on
/// a few runs in a hundred and fifty, each time on a different test, with
/// `WINEDEBUG=-all` hiding why), where every other run of the same
/// command prints its document. Every command the tests run prints
/// something, so that one case runs again, once, and says so on the
/// test's stdout; the native build never runs anything twice.
pub trait OutputOnceMore {
    /// See the trait.
    fn output_once_more(&mut self) -> std::io::Result<std::process::Output>;
}

impl OutputOnceMore for Command {
    fn output_once_more(&mut self) -> std::io::Result<std::process::Output> {
        let out = self.output()?;
        if foreign() && out.stdout.is_empty() && out.stderr.is_empty() {
            println!(
                "{:?}: the emulator ended the program with no output ({:?}); running it again",
                self, out.status
            );
            return self.output();
        }
        Ok(out)
    }
}
