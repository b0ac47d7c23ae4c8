//! The command line, parsed by clap.

use std::ffi::OsString;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Run a program under a distributed read-write lock on Redis, see who holds one, or
/// release one by force.
/// Speaks the protocol of the redismutex crate and of the Go package redismutex.
#[derive(Debug, Parser)]
#[command(name = "redismutex", version)]
pub(crate) struct Cli {
    /// The Redis server: `redis://[user:password@]host[:port][/db]`, or `rediss://` for
    /// TLS. Give it N >= 2 times, one independent master each, for quorum mode: `lock`
    /// holds the lock while a majority (N/2 + 1) of the nodes holds it, `status`
    /// shows every node's view and whether a majority agrees, and `unlock --force`
    /// clears every node.
    #[arg(
        long = "url",
        value_name = "URL",
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379/",
        action = ArgAction::Append
    )]
    urls: Vec<String>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--url` after the subcommand: these add to the ones before it.
#[derive(Debug, Args)]
pub(crate) struct Urls {
    /// The Redis server, as `redismutex --url`; give it N >= 2 times for quorum mode.
    /// With no `--url` at all, `REDIS_URL`, then `redis://127.0.0.1:6379/`.
    #[arg(long = "url", value_name = "URL", action = ArgAction::Append)]
    urls: Vec<String>,
}

impl Cli {
    /// Parses the command line (clap exits on bad arguments, with 2) and gives it with
    /// the servers it names: the `--url`s before the subcommand, then those after it;
    /// with none, `REDIS_URL`, then the default.
    pub(crate) fn parse_with_urls() -> (Self, Vec<String>) {
        let mut matches = Self::command().get_matches();
        let before_given = matches.value_source("urls") == Some(ValueSource::CommandLine);
        let cli = Self::from_arg_matches_mut(&mut matches).unwrap_or_else(|err| err.exit());
        let after = match &cli.command {
            Command::Lock(args) => &args.urls.urls,
            Command::Status(args) => &args.urls.urls,
            Command::Unlock(args) => &args.urls.urls,
        };
        let urls = match (before_given, after.is_empty()) {
            (_, true) => cli.urls.clone(),
            (true, false) => cli.urls.iter().chain(after).cloned().collect(),
            (false, false) => after.clone(),
        };
        (cli, urls)
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Take the lock NAME (exclusive unless --read), run CMD with it held, release it
    /// when CMD exits, and exit with CMD's exit code. Without CMD, hold the lock until
    /// interrupted. With several --url, the lock is taken in quorum mode: held while a
    /// majority of the nodes holds it.
    #[command(
        after_help = "Exit codes: CMD's own (128+N if signal N killed it); 0 when \
        holding without CMD until SIGINT/SIGTERM; 75 busy with --no-wait (or -E N); 124 \
        --timeout ran out; 70 the lock was lost while held; 69 a Redis error (with several \
        --url: no majority of the nodes reachable or answering); 127/126 CMD \
        not found/not runnable; 128+N a signal N ended the wait; 2 bad arguments."
    )]
    Lock(LockArgs),
    /// Show who holds the lock or semaphore NAME: the writer, the readers, or a
    /// semaphore's holders and their deadlines (by the server's clock); its PTTL; the
    /// waiters of its fair queue in order; a waiting writer's intent; the last fencing
    /// token. With several --url, each node's view side by side and whether a majority
    /// of the nodes holds the lock the same way. Reads only.
    Status(StatusArgs),
    /// Release the lock or semaphore NAME by force, whoever holds it (--force is
    /// required): the writer, every reader, every permit. For an operator clearing what a
    /// crashed run left behind: a holder that is still alive keeps running until its next
    /// refresh (up to ttl/2) finds the lock gone. Waiters are woken at once; the fencing
    /// counter, a waiting writer's intent and the fair queue are kept. With several
    /// --url, every node is cleared.
    #[command(
        after_help = "Exit codes: 0 something was held and is released; 1 nothing was \
        held (the lock was free); 69 a Redis error (a key that is not a lock, or one with \
        no TTL, is left untouched; with several --url: fewer than a majority of the \
        nodes answering); 2 bad arguments, a bad key, or no --force."
    )]
    Unlock(UnlockArgs),
}

#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// The lock's name (the mutex name).
    pub(crate) name: String,
    /// Lock `<NAME>:<KEY>` instead of `<NAME>`.
    #[arg(long)]
    pub(crate) key: Option<String>,
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
    #[arg(long, short = 'E', default_value_t = crate::exit::BUSY)]
    pub(crate) conflict_exit_code: u8,
    /// While waiting for the exclusive lock, keep new readers out (the lock intent).
    #[arg(long)]
    pub(crate) intent: bool,
    /// When the lock is lost, how long CMD has after SIGTERM before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub(crate) grace: Duration,
    #[command(flatten)]
    pub(crate) urls: Urls,
    /// The program to run with the lock held, and its arguments.
    #[arg(last = true)]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The lock's name (the mutex name).
    pub(crate) name: String,
    /// Show `<NAME>:<KEY>` instead of `<NAME>`.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// A semaphore's permit count, to show "in use: N of M" (Redis does not store it:
    /// each client gives its own).
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) permits: Option<u32>,
    #[command(flatten)]
    pub(crate) urls: Urls,
}

#[derive(Debug, Args)]
pub(crate) struct UnlockArgs {
    /// The lock's name (the mutex or semaphore name).
    pub(crate) name: String,
    /// Release `<NAME>:<KEY>` instead of `<NAME>`.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// Release the lock whoever holds it. Required: a process releases its own lock when
    /// its `lock` run ends; there is no other release from the command line.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) urls: Urls,
}

impl UnlockArgs {
    /// The lock key, as the mutex forms it.
    pub(crate) fn lock_key(&self) -> String {
        lock_key(&self.name, self.key.as_deref())
    }
}

impl LockArgs {
    /// The lock key, as the mutex forms it.
    pub(crate) fn lock_key(&self) -> String {
        lock_key(&self.name, self.key.as_deref())
    }
}

impl StatusArgs {
    /// The lock key, as the mutex forms it.
    pub(crate) fn lock_key(&self) -> String {
        lock_key(&self.name, self.key.as_deref())
    }
}

fn lock_key(name: &str, key: Option<&str>) -> String {
    match key {
        None | Some("") => name.to_owned(),
        Some(key) => format!("{name}:{key}"),
    }
}

/// A duration in human units (`humantime`): `500ms`, `4s`, `2m`, `1h 30m`.
fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|err| format!("{err} (try 500ms, 4s or 2m)"))
}
