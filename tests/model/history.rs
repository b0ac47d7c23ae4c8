//! Every commit that changes a script of `lua/` changes the model in the same commit
//! (`docs/model.md`, "When a script changes"), from the commit that added the model on.
//! Read from the repository's history with `git`; in a copy without one (the published
//! package) there is nothing to read, and the test says so and passes.

use std::process::Command;

/// `git` in the crate's directory: its output, or `None` when there is no repository.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The commit that added the model, when there is a repository that has it.
fn model_added() -> Option<String> {
    let added = git(&[
        "log",
        "--diff-filter=A",
        "--format=%H",
        "--",
        "tests/model/store.rs",
    ])?;
    added.lines().last().map(str::to_owned)
}

/// The commits of `range` that change `lua/` but not `tests/model/scripts/`; `None` when
/// the history does not reach that far (a shallow clone).
fn unmodelled(range: &str) -> Option<Vec<String>> {
    let changed = git(&["log", "--format=%H", range, "--", "lua/"])?;
    let mut missing = Vec::new();
    for commit in changed.lines() {
        let files = git(&["show", "--name-only", "--format=", commit])?;
        if !files.lines().any(|f| f.starts_with("tests/model/scripts/")) {
            missing.push(commit.to_owned());
        }
    }
    Some(missing)
}

/// `unmodelled(range)`, or `None` with a line saying why nothing was checked.
fn history(range: impl FnOnce(&str) -> String) -> Option<Vec<String>> {
    let found = model_added().and_then(|since| unmodelled(&range(&since)));
    if found.is_none() {
        eprintln!("no history of the model here (no repository, or a shallow clone): not checked");
    }
    found
}

#[test]
fn every_script_change_changes_the_model_in_the_same_commit() {
    let Some(missing) = history(|since| format!("{since}^..HEAD")) else {
        return;
    };
    assert!(
        missing.is_empty(),
        "commits that change lua/ but not tests/model/scripts/: {missing:?}"
    );
}

/// The check sees script changes: before the model, every one of them changed no model.
#[test]
fn the_check_finds_the_script_changes_made_before_the_model() {
    let Some(before) = history(|since| format!("{since}^")) else {
        return;
    };
    assert!(
        before.len() > 10,
        "only {} script changes found before the model",
        before.len()
    );
}
