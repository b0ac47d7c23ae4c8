//! Feature `cli`: the `redismutex` command run as a real process against servers the
//! tests start: `lock` and `status` on one server and on several (quorum), the status of
//! every primitive, `unlock --force`, a lock handed between shell steps by its lease
//! (`lock --detach`, `renew --lease`, `unlock --lease`), the spinner on a terminal, `--url` (passwords,
//! TLS), the lock key as the library forms it (`--hash-tag-keys`, on a Redis Cluster too),
//! and the exit codes the help lists. `run.rs` runs `status` for them all.
#![cfg(feature = "cli")]

#[path = "../common/mod.rs"]
mod common;

mod help;
mod keys;
mod keyspace;
mod lease;
mod lock;
mod quorum;
mod run;
mod status;
mod terminal;
mod unlock;
mod url;
