//! A program with no tokio dependency of its own: `program.rs`, built as the one binary of
//! a package whose manifest names only `redismutex` (feature `blocking`, by path) and
//! `redis`, and run against a server on plain threads. The package is written under the
//! target folder and built `--offline`, from the crates the crate's own build fetched.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fixture::{exists, raw, RedisServer};

/// Writes the program's package under the target folder; its manifest.
fn package(root: &Path, target: &Path) -> PathBuf {
    let dir = target.join("blocking-user");
    std::fs::create_dir_all(&dir).expect("make the package folder");
    let manifest = format!(
        r#"[package]
name = "blocking-user"
version = "0.0.0"
edition = "2021"
publish = false

[[bin]]
name = "blocking-user"
path = {program:?}

[dependencies]
redismutex = {{ path = {root:?}, features = ["blocking"] }}
redis = {{ version = "1.8", default-features = false }}

[workspace]
"#,
        program = root.join("tests/blocking/program.rs"),
        root = root,
    );
    let path = dir.join("Cargo.toml");
    std::fs::write(&path, manifest).expect("write the manifest");
    path
}

#[test]
fn a_program_without_tokio_locks_waits_and_releases() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let manifest = package(root, &target);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(&manifest)
        .arg("--")
        .arg(server.url())
        .env("CARGO_TARGET_DIR", target.join("blocking-user/target"))
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Two threads took the lock in turn, the second with a larger fencing token.
    let tokens: Vec<u64> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("held with fencing token "))
        .map(|token| token.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 2, "stdout:\n{stdout}");
    assert!(tokens[1] > tokens[0], "{tokens:?}");
    assert!(stdout.contains("permit held"), "stdout:\n{stdout}");
    assert!(
        !exists(&mut conn, "nightly:report"),
        "the program left no lock behind"
    );
}
