//! The claims table of `docs/testing.md` against the suite: every test it names
//! (`binary::module::function`, as `cargo nextest list` prints a binary and a test) is a
//! function of that binary, and no row points at a test file instead of its functions.
//! A module of `tests/layers.rs`; reads the sources as text and needs no Redis.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use super::rust_files;

/// The module path of a file of a test binary: `tests/lock/exec/holders.rs` is
/// `exec::holders` in `lock`, `tests/lock/exec/mod.rs` is `exec`, the root file is empty.
fn module_of(binary_dir: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(binary_dir).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
        parts.pop();
    }
    parts
}

/// Whether `binary` has a function named by `path` (the test's path in the binary): a
/// file whose module path begins the test's declares `fn <name>`, where the name is the
/// path's last part or, for a test generated per case (`test::on_3_nodes`), the one
/// before it.
fn has_test(binary: &str, path: &[&str]) -> bool {
    let tests = root().join("tests");
    let (dir, files) = if tests.join(binary).is_dir() {
        let mut files = Vec::new();
        rust_files(&tests.join(binary), &mut files);
        (tests.join(binary), files)
    } else {
        (tests.clone(), vec![tests.join(format!("{binary}.rs"))])
    };
    let names = path.iter().rev().take(2);
    names.into_iter().any(|name| {
        let declared = [format!("fn {name}("), format!("fn {name}<")];
        files.iter().any(|file| {
            let module = if dir == tests {
                Vec::new()
            } else {
                module_of(&dir, file)
            };
            module.len() < path.len()
                && module.iter().zip(path).all(|(a, b)| a == b)
                && fs::read_to_string(file)
                    .is_ok_and(|text| declared.iter().any(|d| text.contains(d.as_str())))
        })
    })
}

/// The test binaries: each folder under `tests/` with a `main.rs`, and each file.
fn binaries() -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root().join("tests")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.join("main.rs").is_file() || path.extension().is_some_and(|e| e == "rs") {
            out.push(name);
        }
    }
    out
}

#[test]
fn every_test_the_claims_table_names_exists() {
    let doc = fs::read_to_string(root().join("docs/testing.md")).unwrap();
    let table = doc
        .split("## Claims and the tests that back them")
        .nth(1)
        .expect("docs/testing.md has its claims table");
    let binaries = binaries();
    let (mut named, mut missing, mut files) = (0, Vec::new(), Vec::new());
    for row in table.lines().filter(|l| l.starts_with("| ")) {
        let cell = row.trim_end().trim_end_matches('|').trim_end();
        let cell = &cell[cell.rfind(" | ").map_or(0, |at| at + 3)..];
        for quoted in cell.split('`').skip(1).step_by(2) {
            if quoted.starts_with("tests/") && quoted.ends_with(".rs") {
                files.push(quoted.to_owned());
            }
            let parts: Vec<&str> = quoted.split("::").collect();
            let word = |p: &&str| {
                !p.is_empty() && p.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
            };
            if parts.len() < 2 || !parts.iter().all(word) || !binaries.iter().any(|b| b == parts[0])
            {
                continue;
            }
            named += 1;
            if !has_test(parts[0], &parts[1..]) {
                missing.push(quoted.to_owned());
            }
        }
    }
    assert!(named > 100, "the check read the table: {named} tests named");
    assert!(
        missing.is_empty(),
        "the claims table names tests that do not exist: {missing:#?}"
    );
    assert!(
        files.is_empty(),
        "rows name a test file, not its tests: {files:#?}"
    );
}

#[test]
fn the_check_finds_a_test_and_misses_a_made_up_one() {
    assert!(has_test(
        "lock",
        &[
            "exec",
            "holders",
            "a_fired_token_is_refused_without_a_round_trip"
        ]
    ));
    assert!(!has_test(
        "lock",
        &["exec", "holders", "no_such_test_anywhere"]
    ));
    assert!(!has_test(
        "lock",
        &[
            "no_such_module",
            "a_fired_token_is_refused_without_a_round_trip"
        ]
    ));
}
