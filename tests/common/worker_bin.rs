//! Finds `examples/fault_worker.rs`, built for the profile and target directory of the
//! running test binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of the `fault_worker` binary; builds it first (once per test process) so
/// that it is never missing nor older than its source.
///
/// The test binary is `<target>/<profile>/deps/<test>-<hash>`, the worker
/// `<target>/<profile>/examples/fault_worker`. `cargo test` builds examples; `cargo
/// test --test faults_server` does not, hence the build here (a no-op when up to date).
/// It runs `$CARGO` (or `cargo`) with the same target directory and profile.
pub fn path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(build)
}

fn build() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary under <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("a target directory");
    let profile = profile_dir
        .file_name()
        .and_then(|name| name.to_str())
        .expect("a profile directory");
    let worker = profile_dir.join("examples").join("fault_worker");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(&cargo);
    command
        .args(["build", "--quiet", "--example", "fault_worker"])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let built = command.status();
    match built {
        Ok(status) if status.success() => {}
        Ok(status) if worker.exists() => {
            eprintln!("`{cargo} build --example fault_worker` failed ({status}); using {worker:?}")
        }
        Err(err) if worker.exists() => {
            eprintln!("cannot run {cargo} ({err}); using {worker:?} as it is")
        }
        outcome => panic!(
            "the fault worker {worker:?} is missing and `{cargo} build --example fault_worker \
             --target-dir {target_dir:?}` failed: {outcome:?}"
        ),
    }
    assert!(worker.exists(), "{worker:?} missing after the build");
    worker
}
