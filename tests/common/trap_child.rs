//! The script of a child that traps a signal, for `sh -c SCRIPT sh FILE` under the
//! command-line tests: it notes in FILE (`$1`) that it started, then loops until it is
//! ended.

/// Notes the start as a line `ready` in `$1`.
pub const READY: &str = r#"echo ready >> "$1""#;

/// Notes the start by writing the shell's pid to `$1`.
pub const PID: &str = r#"echo $$ > "$1""#;

/// A script that runs `on_signal` on `signal` (`TERM`, `INT`; an empty `on_signal`
/// ignores it), runs `started`, then loops until it is ended. Each loop step is short,
/// so that a shell left behind by a killed `sh` does not linger.
pub fn trapping(signal: &str, on_signal: &str, started: &str) -> String {
    format!("trap '{on_signal}' {signal}; {started}; while :; do sleep 0.05; done")
}
