//! `redismutex status`: who holds a lock or a semaphore, who waits in its fair queue, and
//! its last fencing token, read without changing anything (`TIME`, `TYPE`, `PTTL`, `GET`,
//! `SMEMBERS` and sorted-set reads only).

mod cells;
mod member;
mod queue;
mod quorum;
mod read;
mod semaphore;
mod table;
mod text;
mod verdict;

use redis::aio::MultiplexedConnection;
use redis::RedisResult;
use serde::Serialize;

use crate::args::StatusArgs;
use crate::exit;
use crate::nodes::Nodes;

/// What `status` reports about one lock key.
#[derive(Debug, Serialize)]
struct Status {
    /// The lock key (or semaphore key).
    key: String,
    /// `free`, `write`, `read`, `semaphore`, or `foreign` (a key of another type, or a
    /// sorted set that is no semaphore: left untouched).
    state: &'static str,
    /// The Redis `TYPE` of the lock key (`none` when free).
    #[serde(rename = "type")]
    kind: String,
    /// The writer's id (`write`).
    writer: Option<String>,
    /// The readers' ids, sorted (`read`).
    readers: Vec<String>,
    /// How many readers.
    reader_count: usize,
    /// The lock key's PTTL in milliseconds (-1: no TTL); absent when free.
    pttl_ms: Option<i64>,
    /// `<key>:lock-intent`: a waiting writer's id (`1` from Go).
    intent: Option<Part>,
    /// `<key>:fence`: the fencing counter.
    fence: Option<Part>,
    /// The server clock (`TIME`) in milliseconds when the key was read: every deadline
    /// score is compared with it.
    server_time_ms: i64,
    /// The last fencing token minted for the key: `fence`'s value when it is one.
    last_fencing_token: Option<u64>,
    /// A semaphore's holders and permits in use (`semaphore`).
    semaphore: Option<semaphore::Holders>,
    /// The fair queue, when `<key>:queue` or `<key>:queue-deadline` exists.
    queue: Option<queue::Queue>,
    /// Why the key is `foreign` when its type does not say it alone (a sorted set that
    /// is no semaphore).
    note: Option<String>,
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
    /// Its PTTL in milliseconds (-1: no TTL).
    pttl_ms: i64,
}

impl Part {
    /// The fencing token it holds, when it is a string as the scripts write a token: a
    /// positive decimal integer with no sign or leading zero.
    fn token(&self) -> Option<u64> {
        let value = self.value.as_deref().filter(|_| self.kind == "string")?;
        let token: u64 = value.parse().ok()?;
        (token > 0 && token.to_string() == value).then_some(token)
    }
}

/// Runs `status`: on one server, or on the nodes of a quorum; gives the exit code.
pub(crate) async fn run(urls: &[String], args: StatusArgs) -> u8 {
    let key = args.lock_key();
    let nodes = match Nodes::open(urls, &key) {
        Ok(nodes) => nodes,
        Err(code) => return code,
    };
    let [node] = nodes.list() else {
        return quorum::run(&nodes, &key, &args).await;
    };
    let status = async {
        let mut conn = node.client.get_multiplexed_async_connection().await?;
        read(&mut conn, &key, args.permits).await
    };
    let status = match status.await {
        Ok(status) => status,
        Err(err) => return exit::redis_error(&node.url, &key, &err),
    };
    if args.json {
        print_json(&status)
    } else {
        print!("{}", text::status(&status));
        0
    }
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

/// Reads the lock key, its intent, fence and queue keys, at the server's `TIME`;
/// `permits` is the semaphore's permit count if known (`--permits`).
async fn read(
    conn: &mut MultiplexedConnection,
    key: &str,
    permits: Option<u32>,
) -> RedisResult<Status> {
    let now = read::server_time_ms(conn).await?;
    let (kind, pttl) = read::kind_and_pttl(conn, key).await?;
    let fence = part(conn, &format!("{key}:fence")).await?;
    let mut status = Status {
        key: key.to_owned(),
        state: "free",
        kind: kind.clone(),
        writer: None,
        readers: Vec::new(),
        reader_count: 0,
        pttl_ms: (kind != "none").then_some(pttl),
        intent: part(conn, &format!("{key}:lock-intent")).await?,
        last_fencing_token: fence.as_ref().and_then(Part::token),
        fence,
        server_time_ms: now,
        semaphore: None,
        queue: queue::read(conn, key, now).await?,
        note: None,
    };
    match kind.as_str() {
        "none" => {}
        "string" => {
            status.state = "write";
            status.writer = read::get(conn, key).await?;
        }
        "set" => {
            status.state = "read";
            let readers = read::members(conn, key).await?;
            status.reader_count = readers.len();
            status.readers = readers;
        }
        "zset" => match semaphore::read(conn, key, now, permits).await? {
            Ok(holders) => {
                status.state = "semaphore";
                status.semaphore = Some(holders);
            }
            Err(note) => (status.state, status.note) = ("foreign", Some(note)),
        },
        _ => status.state = "foreign",
    }
    Ok(status)
}

/// The sub-key `key` if it exists.
async fn part(conn: &mut MultiplexedConnection, key: &str) -> RedisResult<Option<Part>> {
    let (kind, pttl_ms) = read::kind_and_pttl(conn, key).await?;
    if kind == "none" {
        return Ok(None);
    }
    let value = if kind == "string" {
        read::get(conn, key).await?
    } else {
        None
    };
    Ok(Some(Part {
        key: key.to_owned(),
        kind,
        value,
        pttl_ms,
    }))
}
