//! The source files under a folder, for the checks that read the crate as text
//! (`tests/layers.rs`, `tests/claims.rs`).

use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}
