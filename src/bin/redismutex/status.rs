//! `redismutex status`: who holds a lock or a semaphore, who waits in its fair queue, and
//! its last fencing token, from one snapshot of the server. Its one read is
//! `RwMutex::inspect` or `Semaphore::inspect` (the read-only script `lua/inspect.lua`)
//! on a handle over the server's connection (`snapshot.rs`); a key the crate refuses is
//! reported from the refusal, and nothing else is read. `view.rs` makes the snapshot into
//! a [`Status`]; `text.rs` prints one server's, `quorum.rs` every node's side by side.

mod cells;
mod described;
mod member;
mod millis;
mod queue;
mod quorum;
mod semaphore;
mod snapshot;
mod table;
mod text;
mod verdict;
mod view;

use std::error::Error as StdError;

use redismutex::Error;
use serde::Serialize;

use crate::args::StatusArgs;
use crate::chain::chain;
use crate::exit;
use crate::nodes::Nodes;
use snapshot::Target;

/// How many members of a sorted set (a semaphore's holders, a queue's waiters) are listed
/// at most; the counts are always whole.
const LISTED: usize = 1000;

/// What `status` reports about one lock key.
#[derive(Debug, Serialize)]
struct Status {
    /// The lock key (or semaphore key).
    key: String,
    /// `free`, `write`, `read`, `semaphore`, or `foreign`: a key the crate refuses (the
    /// lock key or a key beside it of another type, or with no TTL), or a sorted set
    /// that is no semaphore; left untouched.
    state: &'static str,
    /// The Redis `TYPE` of the lock key (`none` when free); `None` for a refused key
    /// whose refusal did not name the lock key's type (another key was refused).
    #[serde(rename = "type")]
    kind: Option<String>,
    /// The writer's id (`write`).
    writer: Option<String>,
    /// The readers' ids, sorted (`read`).
    readers: Vec<String>,
    /// How many readers.
    reader_count: usize,
    /// The lock key's PTTL in milliseconds; absent when free, or not read (refused).
    pttl_ms: Option<i64>,
    /// `<key>:lock-intent`: a waiting writer's id (`1` from Go).
    intent: Option<Part>,
    /// `<key>:fence`: the fencing counter.
    fence: Option<Part>,
    /// The server clock (`TIME`) in milliseconds when the snapshot was read: every
    /// deadline score was compared with it. Absent when the crate refused the key.
    server_time_ms: Option<i64>,
    /// The last fencing token minted for the key: `fence`'s value.
    last_fencing_token: Option<u64>,
    /// What each holder recorded of itself (host, pid, program, label, since when) and
    /// its time left: one entry per holder, in the order `writer`, `readers` or the
    /// semaphore's `holders` list them.
    #[serde(rename = "holder_info")]
    described: Vec<described::Described>,
    /// A semaphore's holders and permits in use (`semaphore`).
    semaphore: Option<semaphore::Holders>,
    /// The fair queue, when `<key>:queue` or `<key>:queue-deadline` exists.
    queue: Option<queue::Queue>,
    /// Why the key is `foreign` when its type does not say it alone: a sorted set that
    /// is no semaphore, another key of the lock refused, or a key with no TTL.
    note: Option<String>,
}

impl Status {
    /// Whether the crate refused the lock's keys, so that only the refusal is known:
    /// no holder, queue, intent or fence was read.
    fn refused(&self) -> bool {
        self.server_time_ms.is_none()
    }
}

/// A sub-key of the lock that exists.
#[derive(Debug, Serialize)]
struct Part {
    /// The key.
    key: String,
    /// Its Redis `TYPE`.
    #[serde(rename = "type")]
    kind: String,
    /// Its value when it is a string.
    value: Option<String>,
    /// Its PTTL in milliseconds.
    pttl_ms: i64,
}

/// Why a server gave no status.
#[derive(Debug)]
enum Failure {
    /// It could not be reached.
    Connect(redis::RedisError),
    /// The inspection failed: a Redis error, or the crate refusing the name or the key.
    Inspect(Error),
    /// The task reading a node of a quorum failed.
    Task(tokio::task::JoinError),
}

impl Failure {
    /// The error.
    fn error(&self) -> &(dyn StdError + 'static) {
        match self {
            Self::Connect(err) => err,
            Self::Inspect(err) => err,
            Self::Task(err) => err,
        }
    }

    /// Whether the name or the key is one no request could use: the command line's
    /// fault, not the server's.
    fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Inspect(Error::InvalidKey { .. } | Error::InvalidOptions(_))
        )
    }

    /// Prints the failure on one line, naming the server `url` and the lock `key`, and
    /// gives the exit code: [`exit::USAGE`] for a name or key no request could use,
    /// else [`exit::REDIS`].
    fn exit(&self, url: &str, key: &str) -> u8 {
        if self.is_usage() {
            eprintln!("redismutex: {}", chain(self.error()));
            return exit::USAGE;
        }
        exit::redis_error(url, key, self.error())
    }
}

/// Runs `status`: on one server, or on the nodes of a quorum; gives the exit code.
pub(crate) async fn run(urls: &[String], args: StatusArgs) -> u8 {
    let key = match args.target.lock_key() {
        Ok(key) => key,
        Err(code) => return code,
    };
    let nodes = match Nodes::open(urls, &key) {
        Ok(nodes) => nodes,
        Err(code) => return code,
    };
    let target = Target::of(&args, key.clone());
    let [node] = nodes.list() else {
        return quorum::run(&nodes, &target, args.json).await;
    };
    let status = match read(&node.client, &target).await {
        Ok(status) => status,
        Err(failure) => return failure.exit(&node.url, &key),
    };
    if args.json {
        print_json(&status)
    } else {
        print!("{}", text::status(&status));
        0
    }
}

/// Connects to the server of `client` and reads the status of `target` there: one
/// snapshot.
async fn read(client: &redis::Client, target: &Target) -> Result<Status, Failure> {
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(Failure::Connect)?;
    let snapshot = snapshot::take(conn, target)
        .await
        .map_err(Failure::Inspect)?;
    Ok(view::status(target.lock_key(), &snapshot, target.permits))
}

/// Prints `value` as JSON on one line; 0, or [`exit::REDIS`] if it cannot be.
fn print_json(value: &impl Serialize) -> u8 {
    match serde_json::to_string(value) {
        Ok(json) => {
            println!("{json}");
            0
        }
        Err(err) => {
            eprintln!("redismutex: {err}");
            exit::REDIS
        }
    }
}
