//! Feature `cli`: the `redismutex` command run as a real process against servers the
//! tests start: `lock` and `status` on one server and on several (quorum), the status of
//! every primitive, `unlock --force`, the spinner on a terminal, and `--url` (passwords,
//! TLS).
#![cfg(feature = "cli")]

#[path = "../common/mod.rs"]
mod common;

mod lock;
mod quorum;
mod status;
mod terminal;
mod unlock;
mod url;
