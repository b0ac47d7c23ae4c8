//! The texts of `lua/*.lua`, assembled as the crate sends them, and mutated copies of
//! them (the seeded bugs of `mutants`).

use std::collections::BTreeMap;
use std::path::Path;

use super::common_scripts::{BASE, SHARED, WITH_SHARED};

/// The files of `lua/` by file name ("lock.lua" → its text, as in the file). Each
/// script is run as the crate sends it ([`Scripts::source`]): after `base.lua` and, for
/// the scripts of `WITH_SHARED`, after `shared.lua`, so a mutation of either of those
/// reaches every script that includes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scripts {
    files: BTreeMap<String, String>,
}

impl Scripts {
    /// Every `*.lua` file of this crate's `lua/`.
    ///
    /// # Panics
    /// If `lua/` cannot be read.
    pub fn from_dir() -> Scripts {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        let mut files = BTreeMap::new();
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "lua") {
                let name = path.file_name().expect("a file name");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
                files.insert(name.to_string_lossy().into_owned(), text);
            }
        }
        Scripts { files }
    }

    /// A copy with the first occurrence of `from` in `file` replaced by `to`; `Err` when
    /// there is no such file or `from` is not in it exactly once.
    pub fn mutated(&self, file: &str, from: &str, to: &str) -> Result<Scripts, String> {
        let text = self
            .files
            .get(file)
            .ok_or_else(|| format!("no file {file} in lua/"))?;
        match text.matches(from).count() {
            1 => {}
            n => return Err(format!("{from:?} occurs {n} times in {file}, not once")),
        }
        let mut copy = self.clone();
        copy.files
            .insert(file.to_owned(), text.replacen(from, to, 1));
        Ok(copy)
    }

    /// The script `name` ("lock.lua") as the crate sends it (tests/common/scripts.rs's
    /// rule): base.lua, then shared.lua for the scripts of `WITH_SHARED`, then the file,
    /// joined by newlines.
    ///
    /// # Panics
    /// If there is no such file.
    pub fn source(&self, name: &str) -> String {
        let file = |name: &str| -> &str {
            self.files
                .get(name)
                .unwrap_or_else(|| panic!("no file {name} in lua/"))
        };
        if WITH_SHARED.contains(&name) {
            format!("{}\n{}\n{}", file(BASE), file(SHARED), file(name))
        } else {
            format!("{}\n{}", file(BASE), file(name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembled_as_the_crate_sends_them() {
        let scripts = Scripts::from_dir();
        for name in ["lock.lua", "unlock.lua", "retake.lua", "exec.lua"] {
            assert_eq!(
                scripts.source(name),
                super::super::common_scripts::source(name)
            );
        }
    }

    #[test]
    fn a_mutation_changes_one_place_or_is_refused() {
        let scripts = Scripts::from_dir();
        let mutated = scripts
            .mutated(
                "shared.lua",
                "local function fence_last(key)",
                "local function fence_last(k)",
            )
            .expect("once in shared.lua");
        assert_ne!(mutated.source("lock.lua"), scripts.source("lock.lua"));
        assert_eq!(mutated.source("unlock.lua"), scripts.source("unlock.lua"));
        assert!(scripts.mutated("lock.lua", "no such text", "x").is_err());
        assert!(scripts.mutated("lock.lua", "KEYS[1]", "x").is_err());
        assert!(scripts.mutated("nope.lua", "a", "b").is_err());
    }
}
