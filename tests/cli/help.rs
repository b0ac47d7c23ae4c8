//! The help of `lock` and `unlock` lists the exit codes of `src/bin/redismutex/exit.rs`,
//! read from its constants: every constant is listed, and every code listed is one (or 0).
#![cfg(feature = "cli")]

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::cli_run::BIN;

/// The values of the `u8` constants of `exit.rs`.
fn exit_codes() -> BTreeSet<u32> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/bin/redismutex/exit.rs");
    let source = std::fs::read_to_string(path).unwrap();
    source
        .lines()
        .filter_map(|line| line.strip_prefix("pub(crate) const "))
        .filter_map(|rest| rest.split_once(": u8 = "))
        .map(|(_, value)| value.trim_end_matches(';').parse().unwrap())
        .collect()
}

/// The numbers in the `Exit codes:` paragraph of `redismutex SUBCOMMAND --help`.
fn listed(subcommand: &str) -> BTreeSet<u32> {
    let out = Command::new(BIN)
        .args([subcommand, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let (_, codes) = help
        .split_once("Exit codes:")
        .expect("an Exit codes paragraph");
    codes
        .split(|c: char| !c.is_ascii_digit())
        .filter(|word| !word.is_empty())
        .map(|word| word.parse().unwrap())
        .collect()
}

#[test]
fn the_help_lists_the_exit_codes_of_exit_rs() {
    let codes = exit_codes();
    assert!(codes.len() >= 10, "{codes:?}");
    assert!(codes.contains(&71), "EX_OSERR for the runtime and signals");
    let (lock, unlock) = (listed("lock"), listed("unlock"));
    for code in &codes {
        assert!(
            lock.contains(code) || unlock.contains(code),
            "exit code {code} is in exit.rs but in no help"
        );
    }
    for code in lock.iter().chain(&unlock) {
        assert!(
            *code == 0 || codes.contains(code),
            "the help lists {code}, which exit.rs does not define"
        );
    }
    assert!(lock.contains(&71) && lock.contains(&69) && unlock.contains(&1));
}
