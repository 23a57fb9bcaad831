//! The Windows registry behind [`super::registry`]'s rules (through
//! `winreg`), and the shell told that associations changed.

use std::io;
use std::path::Path;

use winreg::RegKey;
use winreg::enums::{HKEY_CURRENT_USER, KEY_SET_VALUE};

use super::Report;
use super::registry::{self, Registry};

/// `HKEY_CURRENT_USER`.
struct CurrentUser(RegKey);

fn missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl Registry for CurrentUser {
    fn get(&self, key: &str, name: &str) -> io::Result<Option<String>> {
        let k = match self.0.open_subkey(key) {
            Ok(k) => k,
            Err(e) if missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        match k.get_value::<String, _>(name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if missing(&e) => Ok(None),
            // A value that is not text is still someone's value.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                Ok(Some("(a value that is not text)".to_owned()))
            }
            Err(e) => Err(e),
        }
    }

    fn set(&mut self, key: &str, name: &str, value: &str) -> io::Result<()> {
        let (k, _) = self.0.create_subkey(key)?;
        k.set_value(name, &value.to_owned())
    }

    fn delete_value(&mut self, key: &str, name: &str) -> io::Result<()> {
        match self
            .0
            .open_subkey_with_flags(key, KEY_SET_VALUE)
            .and_then(|k| k.delete_value(name))
        {
            Err(e) if !missing(&e) => Err(e),
            _ => Ok(()),
        }
    }

    fn exists(&self, key: &str) -> io::Result<bool> {
        match self.0.open_subkey(key) {
            Ok(_) => Ok(true),
            Err(e) if missing(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn is_empty(&self, key: &str) -> io::Result<bool> {
        match self.0.open_subkey(key).and_then(|k| k.query_info()) {
            Ok(info) => Ok(info.sub_keys == 0 && info.values == 0),
            Err(e) if missing(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn value_names(&self, key: &str) -> io::Result<Vec<String>> {
        match self.0.open_subkey(key) {
            Ok(k) => k.enum_values().map(|v| v.map(|(name, _)| name)).collect(),
            Err(e) if missing(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn delete_tree(&mut self, key: &str) -> io::Result<()> {
        match self.0.delete_subkey_all(key) {
            Err(e) if !missing(&e) => Err(e),
            _ => Ok(()),
        }
    }
}

/// Registers `exe`'s GUI program (`tensorscope-gui.exe` beside it) for
/// every container, for the current user.
pub fn install(exe: &Path) -> io::Result<Report> {
    let gui = crate::platform::paths::for_people(&super::gui_program(exe));
    let Some(gui) = gui.to_str() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the program's path is not Unicode: {}", gui.display()),
        ));
    };
    let mut reg = CurrentUser(RegKey::predef(HKEY_CURRENT_USER));
    let steps = registry::install(&mut reg, gui)?;
    crate::platform::windows::associations_changed();
    Ok(Report {
        steps,
        ..Report::default()
    })
}

/// Removes what [`install`] wrote.
pub fn uninstall() -> io::Result<Report> {
    let mut reg = CurrentUser(RegKey::predef(HKEY_CURRENT_USER));
    let steps = registry::uninstall(&mut reg)?;
    crate::platform::windows::associations_changed();
    Ok(Report {
        steps,
        ..Report::default()
    })
}
