//! The command line, parsed by clap.

use std::ffi::OsString;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::exit;

/// Run a program under a distributed read-write lock on Redis, hand a held lock from one
/// shell step to the next, see who holds one, or release one by force.
/// Speaks the protocol of the redismutex crate and of the Go package redismutex.
#[derive(Debug, Parser)]
#[command(name = "redismutex", version)]
pub(crate) struct Cli {
    /// `--url`s before the subcommand.
    #[command(flatten)]
    urls: Urls,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The environment variable naming the server when no `--url` does.
const URL_ENV: &str = "REDIS_URL";

/// The server when neither a `--url` nor [`URL_ENV`] names one.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

/// `--url`, accepted before the subcommand and after it (the two add up).
#[derive(Debug, Default, Args)]
pub(crate) struct Urls {
    /// The Redis server: `redis://[user:password@]host[:port][/db]`, or `rediss://` for
    /// TLS; with no `--url` at all, `REDIS_URL`, then `redis://127.0.0.1:6379/`. Give it
    /// N >= 2 times (before or after the subcommand: they add up), one independent master
    /// each, for quorum mode: `lock` holds the lock while a majority (N/2 + 1) of the
    /// nodes holds it, `status` shows every node's view and whether a majority agrees,
    /// and `unlock --force` clears every node.
    #[arg(long = "url", value_name = "URL", action = ArgAction::Append)]
    urls: Vec<String>,
}

impl Cli {
    /// The servers the command line names: the `--url`s before the subcommand, then
    /// those after it; with none, `REDIS_URL`, then `redis://127.0.0.1:6379/`.
    pub(crate) fn urls(&self) -> Vec<String> {
        let after = &self.command.urls().urls;
        let given: Vec<String> = self.urls.urls.iter().chain(after).cloned().collect();
        if !given.is_empty() {
            return given;
        }
        vec![std::env::var(URL_ENV).unwrap_or_else(|_| DEFAULT_URL.to_owned())]
    }
}

/// The lock every subcommand works on, as the command line names it: `NAME`, `--key`
/// and `--hash-tag-keys` (its lock key is formed by the library: `target.rs`), and the
/// `--url`s after the subcommand.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// The lock's name (the mutex or semaphore name).
    pub(crate) name: String,
    /// The key after the name: the lock key is `<NAME>:<KEY>` instead of `<NAME>`.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// Hash-tag the lock key as the crate's `Builder::hash_tag_keys` does:
    /// `<NAME>:{<KEY>}`, or `{<NAME>}` without --key, unless it carries a tag of its own
    /// (its keys then share one Redis Cluster slot). Give it when the programs that use
    /// the lock turn that option on.
    #[arg(long)]
    pub(crate) hash_tag_keys: bool,
    #[command(flatten)]
    urls: Urls,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Take the lock NAME (exclusive unless --read), run CMD with it held, release it
    /// when CMD exits, and exit with CMD's exit code. Without CMD, hold the lock until
    /// interrupted. With several --url, the lock is taken in quorum mode: held while a
    /// majority of the nodes holds it.
    #[command(after_help = exit::lock_help())]
    Lock(LockArgs),
    /// Show who holds the lock or semaphore NAME: the writer, the readers, or a
    /// semaphore's holders and their deadlines (by the server's clock), with each
    /// holder's host, pid, program, label and since when, when it recorded them (every
    /// `lock` run does; a program does with `Builder::describe_holder`); its PTTL; the
    /// waiters of its fair queue in order; a waiting writer's intent; the last fencing
    /// token. With several --url, each node's view side by side and whether a majority
    /// of the nodes holds the lock the same way. Reads only.
    Status(StatusArgs),
    /// Release the hold a lease names (--lease LEASE, printed by `lock --detach`): that
    /// hold only, never another holder's. Or release the lock or semaphore NAME by force,
    /// whoever holds it (--force is required): the writer, every reader, every permit.
    /// For an operator clearing what a crashed run left behind: a holder that is still
    /// alive keeps running until its next refresh (up to ttl/2) finds the lock gone.
    /// Waiters are woken at once; the fencing counter, a waiting writer's intent and the
    /// fair queue are kept. With several --url, every node is cleared.
    #[command(after_help = exit::unlock_help())]
    Unlock(UnlockArgs),
    /// Extend the hold a lease names (--lease LEASE, printed by `lock --detach`) by
    /// --ttl, without taking it over: the lease stays the same. Exits with 1 when the
    /// hold is gone (expired, released, attached elsewhere).
    #[command(after_help = exit::renew_help())]
    Renew(RenewArgs),
}

#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    #[command(flatten)]
    pub(crate) target: Target,
    /// Take a shared (read) lock instead of the exclusive one.
    #[arg(long, short = 's')]
    pub(crate) read: bool,
    /// How long the lock lives in Redis without a refresh (it is refreshed every ttl/2
    /// while held): `500ms`, `4s`, `2m`.
    #[arg(long, default_value = "4s", value_parser = duration)]
    pub(crate) ttl: Duration,
    /// Give up waiting after this long (exit code 124).
    #[arg(long, short = 'w', value_parser = duration, conflicts_with = "no_wait")]
    pub(crate) timeout: Option<Duration>,
    /// Make one attempt; if the lock is busy, exit with the conflict code (75).
    #[arg(long, short = 'n')]
    pub(crate) no_wait: bool,
    /// The exit code for a busy lock with --no-wait.
    #[arg(long, short = 'E', default_value_t = exit::BUSY)]
    pub(crate) conflict_exit_code: u8,
    /// While waiting for the exclusive lock, keep new readers out (the lock intent).
    #[arg(long)]
    pub(crate) intent: bool,
    /// While waiting, listen also to the Redis keyspace notifications of the lock key,
    /// so that a holder that publishes nothing (a Go client of the redismutex package)
    /// wakes the wait at once when it releases. The servers must have them on
    /// (`CONFIG SET notify-keyspace-events Kgx`): checked first on every server, and the
    /// run fails (exit code 69) with what to set when one has them off.
    #[arg(long)]
    pub(crate) keyspace_events: bool,
    /// Take the lock, print its lease (one line) and exit with the lock still held: it
    /// lives for --ttl unless `renew --lease` extends it, and `unlock --lease` releases
    /// it (a program attaches it with `RwMutex::attach_write` or `attach_read`). For a
    /// lock held across shell steps.
    #[arg(long, conflicts_with = "command")]
    pub(crate) detach: bool,
    /// A label recorded with this holder, shown by `status` (at most 256 bytes, no
    /// control characters).
    #[arg(long)]
    pub(crate) label: Option<String>,
    /// When the lock is lost, how long CMD has after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub(crate) grace: Duration,
    /// The program to run with the lock held, and its arguments.
    #[arg(last = true)]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) target: Target,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// A semaphore's permit count, to show "in use: N of M" (Redis does not store it:
    /// each client gives its own).
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) permits: Option<u32>,
}

/// `unlock`: by lease, or by force. Its lock's name is optional (a lease names its keys),
/// so it does not use [`Target`].
#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    /// The lock's name (the mutex or semaphore name); not with --lease.
    #[arg(required_unless_present = "lease")]
    pub(crate) name: Option<String>,
    /// The key after the name: the lock key is `<NAME>:<KEY>` instead of `<NAME>`.
    #[arg(long, requires = "name")]
    pub(crate) key: Option<String>,
    /// Hash-tag the lock key as `lock --hash-tag-keys` does.
    #[arg(long, requires = "name")]
    pub(crate) hash_tag_keys: bool,
    /// Release the hold this lease names (printed by `lock --detach`), and only it: exit
    /// code 1 when it was no longer held (nothing is changed then).
    #[arg(long, value_name = "LEASE", conflicts_with_all = ["name", "force"])]
    pub(crate) lease: Option<String>,
    /// Release the lock NAME whoever holds it. Required without --lease: a process
    /// releases its own lock when its `lock` run ends.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    urls: Urls,
}

impl UnlockArgs {
    /// The lock NAME names, when given.
    pub(crate) fn target(&self) -> Option<Target> {
        Some(Target {
            name: self.name.clone()?,
            key: self.key.clone(),
            hash_tag_keys: self.hash_tag_keys,
            urls: Urls::default(),
        })
    }
}

/// `renew`: a lease and the TTL to extend its hold by.
#[derive(Debug, Args)]
pub(crate) struct RenewArgs {
    /// The hold to extend, as `lock --detach` printed it.
    #[arg(long, value_name = "LEASE")]
    pub(crate) lease: String,
    /// How long the hold lives from now without another renewal: `500ms`, `4s`, `2m`.
    #[arg(long, default_value = "4s", value_parser = duration)]
    pub(crate) ttl: Duration,
    #[command(flatten)]
    urls: Urls,
}

impl Command {
    /// The `--url`s given after the subcommand.
    pub(crate) fn urls(&self) -> &Urls {
        match self {
            Self::Lock(args) => &args.target.urls,
            Self::Status(args) => &args.target.urls,
            Self::Unlock(args) => &args.urls,
            Self::Renew(args) => &args.urls,
        }
    }
}

/// A duration in human units (`humantime`): `500ms`, `4s`, `2m`, `1h 30m`.
fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|err| format!("{err} (try 500ms, 4s or 2m)"))
}
