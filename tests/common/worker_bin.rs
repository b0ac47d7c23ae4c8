//! Finds an example binary (`examples/fault_worker.rs`, `examples/metrics.rs`), built for
//! the profile, target directory and features of the running test binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of the `fault_worker` binary; builds it first (once per test process) so
/// that it is never missing nor older than its source.
pub fn path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| example("fault_worker"))
}

/// Builds the example `name` (a no-op when up to date) and returns its path.
///
/// The test binary is `<target>/<profile>/deps/<test>-<hash>`, the example
/// `<target>/<profile>/examples/<name>`. `cargo test` builds examples; `cargo test
/// --test faults` does not, hence the build here. It runs `$CARGO` (or `cargo`)
/// with the same target directory, profile and features as the test, and without the
/// variables cargo set for the test: a build script that reads one of them (ring's reads
/// `CARGO_MANIFEST_DIR`) would see it changed and rebuild. When the build fails and an
/// older binary exists, that one is used.
pub fn example(name: &str) -> PathBuf {
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
    let binary = profile_dir.join("examples").join(name);

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(&cargo);
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy();
        let for_the_test = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
        ]
        .iter()
        .any(|prefix| var.starts_with(prefix))
            || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR"].contains(&&*var);
        if for_the_test {
            command.env_remove(&*var);
        }
    }
    command
        .args(["build", "--quiet", "--example", name])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    let features = features();
    if !features.is_empty() {
        command.arg("--features").arg(features.join(","));
    }
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) if binary.exists() => {
            eprintln!("`{cargo} build --example {name}` failed ({status}); using {binary:?}")
        }
        Err(err) if binary.exists() => {
            eprintln!("cannot run {cargo} ({err}); using {binary:?} as it is")
        }
        outcome => panic!(
            "the example {binary:?} is missing and `{cargo} build --example {name} \
             --target-dir {target_dir:?}` failed: {outcome:?}"
        ),
    }
    assert!(binary.exists(), "{binary:?} missing after the build");
    binary
}

/// The crate features the running test was built with.
fn features() -> Vec<&'static str> {
    let mut features = Vec::new();
    features.extend(cfg!(feature = "cluster").then_some("cluster"));
    features.extend(cfg!(feature = "cli").then_some("cli"));
    features.extend(cfg!(feature = "metrics").then_some("metrics"));
    features.extend(cfg!(feature = "sentinel").then_some("sentinel"));
    features
}
