//! `redismutex status`: who holds a lock, read without changing anything.

mod quorum;
mod verdict;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};
use serde::Serialize;

use crate::args::StatusArgs;
use crate::exit;
use crate::nodes::Nodes;

/// What `status` reports about one lock key.
#[derive(Debug, Serialize)]
struct Status {
    key: String,
    /// `free`, `write`, `read`, or `foreign` (a key of another type).
    state: &'static str,
    /// The Redis `TYPE` of the lock key (`none` when free).
    #[serde(rename = "type")]
    kind: String,
    writer: Option<String>,
    readers: Vec<String>,
    reader_count: usize,
    /// The lock key's PTTL in milliseconds (-1: no TTL); absent when free.
    pttl_ms: Option<i64>,
    /// `<key>:lock-intent`: a waiting writer's id (`1` from Go).
    intent: Option<Part>,
    /// `<key>:fence`: the last fencing token.
    fence: Option<Part>,
}

/// A sub-key of the lock that exists.
#[derive(Debug, Serialize)]
struct Part {
    key: String,
    #[serde(rename = "type")]
    kind: String,
    /// Its value when it is a string.
    value: Option<String>,
    pttl_ms: i64,
}

pub(crate) async fn run(urls: &[String], args: StatusArgs) -> u8 {
    let key = args.lock_key();
    let nodes = match Nodes::open(urls, &key) {
        Ok(nodes) => nodes,
        Err(code) => return code,
    };
    let [node] = nodes.list() else {
        return quorum::run(&nodes, &key, args.json).await;
    };
    let status = async {
        let mut conn = node.client.get_multiplexed_async_connection().await?;
        read(&mut conn, &key).await
    };
    let status = match status.await {
        Ok(status) => status,
        Err(err) => return exit::redis_error(&node.url, &key, &err),
    };
    if args.json {
        print_json(&status)
    } else {
        print!("{}", text(&status));
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

/// Reads the lock key and its intent and fence keys (TYPE, PTTL, GET, SMEMBERS only).
async fn read(conn: &mut MultiplexedConnection, key: &str) -> RedisResult<Status> {
    let (kind, pttl) = kind_and_pttl(conn, key).await?;
    let mut status = Status {
        key: key.to_owned(),
        state: "free",
        kind: kind.clone(),
        writer: None,
        readers: Vec::new(),
        reader_count: 0,
        pttl_ms: (kind != "none").then_some(pttl),
        intent: part(conn, &format!("{key}:lock-intent")).await?,
        fence: part(conn, &format!("{key}:fence")).await?,
    };
    match kind.as_str() {
        "none" => {}
        "string" => {
            status.state = "write";
            status.writer = redis::cmd("GET").arg(key).query_async(conn).await?;
        }
        "set" => {
            status.state = "read";
            let mut readers: Vec<String> =
                redis::cmd("SMEMBERS").arg(key).query_async(conn).await?;
            readers.sort();
            status.reader_count = readers.len();
            status.readers = readers;
        }
        _ => status.state = "foreign",
    }
    Ok(status)
}

async fn kind_and_pttl(conn: &mut MultiplexedConnection, key: &str) -> RedisResult<(String, i64)> {
    let (kind, pttl): (Value, i64) = redis::pipe()
        .cmd("TYPE")
        .arg(key)
        .cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await?;
    let kind = match kind {
        Value::SimpleString(kind) => kind,
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        _ => "unknown".to_owned(),
    };
    Ok((kind, pttl))
}

/// The sub-key `key` if it exists.
async fn part(conn: &mut MultiplexedConnection, key: &str) -> RedisResult<Option<Part>> {
    let (kind, pttl_ms) = kind_and_pttl(conn, key).await?;
    if kind == "none" {
        return Ok(None);
    }
    let value = if kind == "string" {
        let bytes: Vec<u8> = redis::cmd("GET").arg(key).query_async(conn).await?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
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

fn text(status: &Status) -> String {
    let pttl = status.pttl_ms.map(ms).unwrap_or_default();
    let mut out = match status.state {
        "free" => format!("{}: free\n", status.key),
        "write" => format!(
            "{}: write-locked by {} ({pttl})\n",
            status.key,
            status.writer.as_deref().unwrap_or("?")
        ),
        "read" => {
            let mut out = format!(
                "{}: read-locked by {} reader(s) ({pttl})\n",
                status.key, status.reader_count
            );
            for reader in &status.readers {
                out.push_str(&format!("  reader {reader}\n"));
            }
            out
        }
        _ => format!(
            "{}: holds a {}, not a lock (left untouched)\n",
            status.key, status.kind
        ),
    };
    for (label, part) in [("intent", &status.intent), ("fence", &status.fence)] {
        match part {
            None => out.push_str(&format!("{label}: none\n")),
            Some(part) => out.push_str(&format!(
                "{label}: {} ({}, {})\n",
                part.value.as_deref().unwrap_or("-"),
                part.kind,
                ms(part.pttl_ms)
            )),
        }
    }
    out
}

/// A PTTL as text: `PTTL 3512 ms`, or `no TTL`.
fn ms(pttl: i64) -> String {
    if pttl < 0 {
        "no TTL".to_owned()
    } else {
        format!("PTTL {pttl} ms")
    }
}
