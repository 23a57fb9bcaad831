//! What `--install-desktop` writes to the Windows registry and what
//! `--uninstall-desktop` removes, over any [`Registry`] (the real one in
//! `windows.rs`; a map in the tests, so the rules are tested everywhere).
//!
//! Everything is per user, under `HKCU\Software\Classes`, following
//! Windows' file-association rules ("File Types and Associations"):
//! - a ProgID per container (`Tensorscope.Safetensors`, …): its
//!   description, `DefaultIcon` (`"…\tensorscope-gui.exe",0`) and
//!   `shell\open\command` (`"…\tensorscope-gui.exe" "%1"`);
//! - `Applications\tensorscope-gui.exe`: the program's name, command,
//!   icon and `SupportedTypes`, for *Open with*;
//! - each extension's `OpenWithProgids` lists the ProgID; an extension's
//!   default is set only when no other program holds it (a `.bin` is never
//!   claimed: Tensorscope is only offered for it);
//! - `HKCU\Software\Tensorscope\Desktop` records the keys that did not
//!   exist before, so that uninstalling removes exactly what installing
//!   wrote: our ProgIDs and application key, our values, the defaults that
//!   name our ProgIDs, and the keys we created once they are empty. Other
//!   programs' values under the same extensions stay.

use std::io;

use super::CONTAINERS;

/// The per-user classes root, below `HKEY_CURRENT_USER`.
pub const CLASSES: &str = r"Software\Classes";
/// Where the install records what it created.
pub const MANIFEST: &str = r"Software\Tensorscope\Desktop";
/// The manifest's parent, removed when nothing else is in it.
const VENDOR: &str = r"Software\Tensorscope";

/// The registry below `HKEY_CURRENT_USER`, as the rules need it. Keys are
/// paths with `\`; the value name `""` is a key's default value.
pub trait Registry {
    /// A string value, `None` when the key or the value does not exist.
    fn get(&self, key: &str, name: &str) -> io::Result<Option<String>>;
    /// Sets a string value, creating the key and its parents.
    fn set(&mut self, key: &str, name: &str, value: &str) -> io::Result<()>;
    /// Removes a value; not an error when it is not there.
    fn delete_value(&mut self, key: &str, name: &str) -> io::Result<()>;
    /// Whether the key exists.
    fn exists(&self, key: &str) -> io::Result<bool>;
    /// Whether the key has neither values nor subkeys (false when missing).
    fn is_empty(&self, key: &str) -> io::Result<bool>;
    /// The names of the key's values (none when it is missing).
    fn value_names(&self, key: &str) -> io::Result<Vec<String>>;
    /// Removes a key and everything below it; not an error when missing.
    fn delete_tree(&mut self, key: &str) -> io::Result<()>;
}

fn class(key: &str) -> String {
    format!(r"{CLASSES}\{key}")
}

/// The application key of the program named `file_name`.
fn app_key(file_name: &str) -> String {
    class(&format!(r"Applications\{file_name}"))
}

/// Sets `key`'s value, first recording the key in the manifest when it
/// (or, below the classes root, a parent of it) does not exist yet.
fn set_recording(
    reg: &mut dyn Registry,
    key: &str,
    name: &str,
    value: &str,
    steps: &mut Vec<String>,
) -> io::Result<()> {
    let mut created = Vec::new();
    let mut at = key;
    while at.len() > CLASSES.len() && !reg.exists(at)? {
        created.push(at.to_owned());
        at = match at.rfind('\\') {
            Some(i) => &at[..i],
            None => break,
        };
    }
    for k in created {
        reg.set(MANIFEST, &format!("created:{k}"), "1")?;
    }
    reg.set(key, name, value)?;
    let shown = if name.is_empty() { "(default)" } else { name };
    let value = if value.is_empty() { "\"\"" } else { value };
    steps.push(format!(r"HKCU\{key}: {shown} = {value}"));
    Ok(())
}

/// Registers `exe` (the GUI program's absolute path) as the opener of
/// every container; returns what it did, a line a step.
pub fn install(reg: &mut dyn Registry, exe: &str) -> io::Result<Vec<String>> {
    let mut steps = Vec::new();
    let file_name = exe.rsplit(['\\', '/']).next().unwrap_or(exe);
    let command = format!("\"{exe}\" \"%1\"");
    let icon = format!("\"{exe}\",0");
    reg.set(MANIFEST, "program", exe)?;
    for c in CONTAINERS {
        let prog = class(c.prog_id);
        reg.delete_tree(&prog)?;
        set_recording(reg, &prog, "", c.description, &mut steps)?;
        reg.set(&prog, "FriendlyTypeName", c.description)?;
        set_recording(reg, &format!(r"{prog}\DefaultIcon"), "", &icon, &mut steps)?;
        set_recording(
            reg,
            &format!(r"{prog}\shell\open\command"),
            "",
            &command,
            &mut steps,
        )?;
    }
    let app = app_key(file_name);
    reg.delete_tree(&app)?;
    set_recording(reg, &app, "FriendlyAppName", "Tensorscope", &mut steps)?;
    reg.set(&format!(r"{app}\DefaultIcon"), "", &icon)?;
    set_recording(
        reg,
        &format!(r"{app}\shell\open\command"),
        "",
        &command,
        &mut steps,
    )?;
    for c in CONTAINERS {
        for ext in c.extensions.iter().chain(c.shared_extensions) {
            reg.set(&format!(r"{app}\SupportedTypes"), &format!(".{ext}"), "")?;
            let key = class(&format!(".{ext}"));
            set_recording(
                reg,
                &format!(r"{key}\OpenWithProgids"),
                c.prog_id,
                "",
                &mut steps,
            )?;
        }
        for ext in c.extensions {
            let key = class(&format!(".{ext}"));
            match reg.get(&key, "")? {
                Some(other) if !other.is_empty() && other != c.prog_id => steps.push(format!(
                    r"HKCU\{key}: left its default ({other}) as it is; Tensorscope is offered in Open with"
                )),
                _ => set_recording(reg, &key, "", c.prog_id, &mut steps)?,
            }
        }
    }
    Ok(steps)
}

/// Removes what [`install`] wrote; returns what it did, a line a step.
pub fn uninstall(reg: &mut dyn Registry) -> io::Result<Vec<String>> {
    let mut steps = Vec::new();
    let mut delete_tree = |reg: &mut dyn Registry, key: &str| -> io::Result<()> {
        if reg.exists(key)? {
            reg.delete_tree(key)?;
            steps.push(format!(r"removed HKCU\{key}"));
        }
        Ok(())
    };
    let program = reg.get(MANIFEST, "program")?;
    for c in CONTAINERS {
        delete_tree(reg, &class(c.prog_id))?;
    }
    let mut programs = vec![
        "tensorscope-gui.exe".to_owned(),
        "tensorscope.exe".to_owned(),
    ];
    if let Some(p) = &program
        && let Some(name) = p.rsplit(['\\', '/']).next()
    {
        programs.push(name.to_owned());
    }
    for name in &programs {
        delete_tree(reg, &app_key(name))?;
    }
    for c in CONTAINERS {
        for ext in c.extensions.iter().chain(c.shared_extensions) {
            let key = class(&format!(".{ext}"));
            let open_with = format!(r"{key}\OpenWithProgids");
            if reg.get(&open_with, c.prog_id)?.is_some() {
                reg.delete_value(&open_with, c.prog_id)?;
                steps.push(format!(r"removed HKCU\{open_with}: {}", c.prog_id));
            }
            if reg.get(&key, "")?.as_deref() == Some(c.prog_id) {
                reg.delete_value(&key, "")?;
                steps.push(format!(r"removed HKCU\{key}: (default) = {}", c.prog_id));
            }
        }
    }
    // The keys the install created, innermost first, once empty.
    let mut created: Vec<String> = reg
        .value_names(MANIFEST)?
        .into_iter()
        .filter_map(|n| n.strip_prefix("created:").map(str::to_owned))
        .collect();
    created.sort_by_key(|k| std::cmp::Reverse(k.len()));
    for k in created {
        if reg.is_empty(&k)? {
            reg.delete_tree(&k)?;
            steps.push(format!(r"removed HKCU\{k}"));
        }
    }
    if reg.exists(MANIFEST)? {
        reg.delete_tree(MANIFEST)?;
        if reg.is_empty(VENDOR)? {
            reg.delete_tree(VENDOR)?;
        }
        steps.push(format!(r"removed HKCU\{VENDOR}"));
    }
    Ok(steps)
}

/// A registry in memory: the tests' registry, and a model of the real one
/// (keys are case-insensitive there; here they are compared as written).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MemoryRegistry {
    /// Every key, with its values by name.
    pub keys: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

impl MemoryRegistry {
    fn under(key: &str, k: &str) -> bool {
        k == key || k.starts_with(&format!("{key}\\"))
    }
}

impl Registry for MemoryRegistry {
    fn get(&self, key: &str, name: &str) -> io::Result<Option<String>> {
        Ok(self.keys.get(key).and_then(|v| v.get(name)).cloned())
    }

    fn set(&mut self, key: &str, name: &str, value: &str) -> io::Result<()> {
        let mut at = key;
        while let Some(i) = at.rfind('\\') {
            at = &at[..i];
            self.keys.entry(at.to_owned()).or_default();
        }
        self.keys
            .entry(key.to_owned())
            .or_default()
            .insert(name.to_owned(), value.to_owned());
        Ok(())
    }

    fn delete_value(&mut self, key: &str, name: &str) -> io::Result<()> {
        if let Some(v) = self.keys.get_mut(key) {
            v.remove(name);
        }
        Ok(())
    }

    fn exists(&self, key: &str) -> io::Result<bool> {
        Ok(self.keys.contains_key(key))
    }

    fn is_empty(&self, key: &str) -> io::Result<bool> {
        Ok(self
            .keys
            .get(key)
            .is_some_and(std::collections::BTreeMap::is_empty)
            && !self.keys.keys().any(|k| k != key && Self::under(key, k)))
    }

    fn value_names(&self, key: &str) -> io::Result<Vec<String>> {
        Ok(self
            .keys
            .get(key)
            .map(|v| v.keys().cloned().collect())
            .unwrap_or_default())
    }

    fn delete_tree(&mut self, key: &str) -> io::Result<()> {
        self.keys.retain(|k, _| !Self::under(key, k));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXE: &str = r"C:\Program Files\Tensorscope\tensorscope-gui.exe";

    /// A user's registry with other programs' associations in it.
    fn lived_in() -> MemoryRegistry {
        let mut r = MemoryRegistry::default();
        r.set(r"Software\Classes\.bin", "", "BinFile").expect("set");
        r.set(r"Software\Classes\.bin\OpenWithProgids", "HexEdit.bin", "")
            .expect("set");
        r.set(r"Software\Classes\.pt", "", "Other.Pt").expect("set");
        r.set(r"Software\Classes\.h5", "", "HDFView.h5")
            .expect("set");
        r.set(
            r"Software\Classes\.npy",
            "Content Type",
            "application/x-npy",
        )
        .expect("set");
        r.set(r"Software\Classes\txtfile", "", "Text").expect("set");
        r.set(r"Software\Microsoft\Something", "x", "1")
            .expect("set");
        r
    }

    #[test]
    fn install_writes_a_prog_id_per_container_with_icon_and_command() {
        let mut r = lived_in();
        let steps = install(&mut r, EXE).expect("install");
        assert!(!steps.is_empty());
        for c in CONTAINERS {
            let prog = format!(r"Software\Classes\{}", c.prog_id);
            assert_eq!(r.get(&prog, "").expect("get"), Some(c.description.into()));
            assert_eq!(
                r.get(&format!(r"{prog}\shell\open\command"), "")
                    .expect("get"),
                Some(format!("\"{EXE}\" \"%1\""))
            );
            assert_eq!(
                r.get(&format!(r"{prog}\DefaultIcon"), "").expect("get"),
                Some(format!("\"{EXE}\",0"))
            );
            for ext in c.extensions.iter().chain(c.shared_extensions) {
                let owp = format!(r"Software\Classes\.{ext}\OpenWithProgids");
                assert_eq!(r.get(&owp, c.prog_id).expect("get"), Some(String::new()));
            }
        }
        let d = |ext: &str| {
            r.get(&format!(r"Software\Classes\.{ext}"), "")
                .expect("get")
        };
        assert_eq!(d("safetensors").as_deref(), Some("Tensorscope.Safetensors"));
        assert_eq!(d("gguf").as_deref(), Some("Tensorscope.Gguf"));
        assert_eq!(d("npy").as_deref(), Some("Tensorscope.Npy"));
        assert_eq!(d("pth").as_deref(), Some("Tensorscope.PyTorch"));
        assert_eq!(d("onnx").as_deref(), Some("Tensorscope.Onnx"));
        assert_eq!(d("keras").as_deref(), Some("Tensorscope.Keras"));
        // Another program's default is left alone; `.bin` is never claimed.
        assert_eq!(d("pt").as_deref(), Some("Other.Pt"));
        assert_eq!(d("bin").as_deref(), Some("BinFile"));
        // Nor are the other shared extensions, even where no program has
        // them: Tensorscope is only offered.
        assert_eq!(d("h5").as_deref(), Some("HDFView.h5"));
        for ext in ["index", "hdf5", "msgpack"] {
            assert_eq!(d(ext), None, ".{ext}");
        }
        let owp = |ext: &str, prog: &str| {
            r.get(&format!(r"Software\Classes\.{ext}\OpenWithProgids"), prog)
                .expect("get")
        };
        assert!(owp("index", "Tensorscope.TensorFlow").is_some());
        assert!(owp("h5", "Tensorscope.Hdf5").is_some());
        assert!(owp("hdf5", "Tensorscope.Hdf5").is_some());
        assert!(owp("msgpack", "Tensorscope.Flax").is_some());
        let app = r"Software\Classes\Applications\tensorscope-gui.exe";
        assert_eq!(
            r.get(app, "FriendlyAppName").expect("get").as_deref(),
            Some("Tensorscope")
        );
        for ext in [
            ".gguf", ".onnx", ".index", ".keras", ".h5", ".hdf5", ".msgpack",
        ] {
            assert!(
                r.get(&format!(r"{app}\SupportedTypes"), ext)
                    .expect("get")
                    .is_some(),
                "{ext}"
            );
        }
    }

    #[test]
    fn every_container_has_its_prog_id_and_extensions() {
        let progs: Vec<&str> = CONTAINERS.iter().map(|c| c.prog_id).collect();
        assert_eq!(
            progs,
            [
                "Tensorscope.Safetensors",
                "Tensorscope.Npy",
                "Tensorscope.Npz",
                "Tensorscope.PyTorch",
                "Tensorscope.Gguf",
                "Tensorscope.Onnx",
                "Tensorscope.TensorFlow",
                "Tensorscope.Keras",
                "Tensorscope.Hdf5",
                "Tensorscope.Flax",
            ]
        );
        // Every extension reaches one container, and every one is an
        // extension the explorer opens.
        let mut seen = std::collections::BTreeSet::new();
        for c in CONTAINERS {
            assert!(
                !c.extensions.is_empty() || !c.shared_extensions.is_empty(),
                "{}",
                c.prog_id
            );
            for ext in c.extensions.iter().chain(c.shared_extensions) {
                assert!(seen.insert(*ext), ".{ext} twice");
                assert!(crate::format::CHECKPOINT_EXTENSIONS.contains(ext), ".{ext}");
            }
        }
        for ext in crate::format::CHECKPOINT_EXTENSIONS {
            // A shard index is a `.json`: opened, never associated.
            assert!(*ext == "json" || seen.contains(ext), ".{ext}");
        }
    }

    #[test]
    fn uninstall_removes_exactly_what_install_wrote() {
        let before = lived_in();
        let mut r = before.clone();
        install(&mut r, EXE).expect("install");
        // Installing again (the program moved) changes nothing of that.
        install(&mut r, EXE).expect("install again");
        let steps = uninstall(&mut r).expect("uninstall");
        assert!(!steps.is_empty());
        assert_eq!(r, before, "{steps:#?}");
        // Nothing left to remove: a second uninstall does nothing.
        assert!(uninstall(&mut r).expect("again").is_empty());
        assert_eq!(r, before);
    }

    #[test]
    fn uninstall_keeps_what_others_added_after_the_install() {
        let mut r = MemoryRegistry::default();
        install(&mut r, EXE).expect("install");
        r.set(
            r"Software\Classes\.gguf\OpenWithProgids",
            "LMStudio.gguf",
            "",
        )
        .expect("set");
        uninstall(&mut r).expect("uninstall");
        assert_eq!(
            r.get(r"Software\Classes\.gguf\OpenWithProgids", "LMStudio.gguf")
                .expect("get"),
            Some(String::new())
        );
        assert!(!r.exists(r"Software\Classes\.safetensors").expect("exists"));
        assert!(
            !r.exists(r"Software\Classes\Tensorscope.Gguf")
                .expect("exists")
        );
        assert!(!r.exists(VENDOR).expect("exists"));
    }
}
