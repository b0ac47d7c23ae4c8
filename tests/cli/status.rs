//! `redismutex status` on every primitive, run as a real process against a throwaway
//! `redis-server`, in text and JSON: a semaphore with real permits and a holder past its
//! deadline, the fair queue of a lock and of a semaphore with real waiters in order, the
//! fencing counter after a few acquisitions, and keys the crate did not write (garbage
//! members, scores that are no deadline; keys of other types or with no TTL, which the
//! crate refuses and status names from the refusal), reported without a panic and left
//! as they were.
#![cfg(feature = "cli")]

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common;
use crate::common::{eventually, raw, RedisServer};
use crate::run::{status_json, status_text};
use redis::aio::MultiplexedConnection;
use redismutex::{QueueEntry, RwMutex, Semaphore};
use serde_json::{json, Value};

/// The TTL of every lock and permit here: long enough that nothing expires by itself.
const TTL: Duration = Duration::from_secs(30);

/// A holder id the crate could have made, for keys written by hand.
const DEAD: &str = "deadbeefdeadbeefdeadbeefdeadbeef";

/// A throwaway server, its URL, and a connection for raw checks.
async fn setup() -> (RedisServer, String, MultiplexedConnection) {
    let server = RedisServer::start();
    let (url, conn) = (server.url(), server.conn().await);
    (server, url, conn)
}

/// The number between `prefix` and `suffix` in `line`, checked to be in `range`.
fn number_in(line: &str, prefix: &str, suffix: &str, range: std::ops::RangeInclusive<i64>) -> i64 {
    let n: i64 = line
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(suffix))
        .unwrap_or_else(|| panic!("{line:?} is not {prefix:?}<n>{suffix:?}"))
        .parse()
        .unwrap_or_else(|err| panic!("{line:?}: {err}"));
    assert!(range.contains(&n), "{line:?}: {n} out of {range:?}");
    n
}

/// The members of `<key>:queue` in order.
async fn queue(conn: &MultiplexedConnection, key: &str) -> Vec<String> {
    raw::cmd(conn, "ZRANGE", &[&format!("{key}:queue"), "0", "-1"]).await
}

/// Waits until `n` wait in the fair queue of `key`, and gives the queue.
async fn wait_queued(conn: &MultiplexedConnection, key: &str, n: usize) -> Vec<String> {
    let reached = eventually(|| async { queue(conn, key).await.len() == n }).await;
    assert!(
        reached,
        "{key}: never {n} queued: {:?}",
        queue(conn, key).await
    );
    queue(conn, key).await
}

/// `key`'s `DUMP` and PTTL: equal before and after means untouched.
async fn snapshot(conn: &MultiplexedConnection, key: &str) -> (Option<Vec<u8>>, i64) {
    (
        raw::cmd(conn, "DUMP", &[key]).await,
        raw::pttl(conn, key).await,
    )
}

/// Checks that every JSON holder or waiter's `remaining_ms` is its deadline score minus
/// the server time of the report.
fn remaining_is_score_minus_time(status: &Value, list: &Value, score: &str) {
    let time = status["server_time_ms"].as_i64().expect("server_time_ms");
    for entry in list.as_array().expect("a list") {
        let score = entry[score].as_i64().expect("a score");
        assert_eq!(entry["remaining_ms"], score - time, "{entry}");
        assert_eq!(entry["expired"], score <= time, "{entry}");
    }
}

#[tokio::test]
async fn status_of_a_semaphore_with_two_of_three_permits_and_an_expired_holder() {
    let (_server, url, conn) = setup().await;
    let semaphore = Semaphore::builder(conn.clone(), "jobs", 3)
        .ttl(TTL)
        .build()
        .unwrap();
    let a = semaphore.acquire().await.unwrap();
    let b = semaphore.acquire().await.unwrap();
    // A holder that crashed 5 s past its deadline, which no acquire has dropped since.
    let dead_score = raw::server_ms(&conn).await - 5000;
    let _: i64 = raw::cmd(&conn, "ZADD", &["jobs", &dead_score.to_string(), DEAD]).await;
    let before = snapshot(&conn, "jobs").await;

    let text = status_text(&[&url], "jobs", &["--permits", "3"]).await;
    assert_eq!(text.len(), 7, "{text:?}");
    number_in(
        &text[0],
        "jobs: semaphore, in use: 2 of 3, expired: 1 (PTTL ",
        " ms)",
        1..=30_000,
    );
    number_in(
        &text[1],
        &format!("  holder {DEAD} expired "),
        &format!(" ms ago, not yet removed (score {dead_score})"),
        5000..=10_000,
    );
    let mut live = BTreeSet::new();
    for line in &text[2..4] {
        let (id, rest) = line
            .strip_prefix("  holder ")
            .and_then(|rest| rest.split_once(' '))
            .unwrap_or_else(|| panic!("{text:?}"));
        live.insert(id.to_owned());
        let score = rest.rsplit_once("(score ").unwrap().1.trim_end_matches(')');
        let stored: String = raw::cmd(&conn, "ZSCORE", &["jobs", id]).await;
        assert_eq!(score, stored, "the deadline is the stored score: {text:?}");
        number_in(
            rest,
            "deadline in ",
            &format!(" ms (score {score})"),
            1..=30_000,
        );
    }
    assert_eq!(live, [a.id(), b.id()].map(str::to_owned).into(), "{text:?}");
    assert_eq!(text[4..6], ["queue: none", "intent: none"], "{text:?}");
    let last = format!("last fencing token: {} (PTTL ", b.fencing_token());
    number_in(&text[6], &last, " ms)", 1..=86_400_000);
    // Without --permits, the count is not known: Redis does not store it.
    let plain = status_text(&[&url], "jobs", &[]).await;
    assert!(
        plain[0].starts_with("jobs: semaphore, in use: 2, expired: 1 (PTTL "),
        "{plain:?}"
    );

    let status = status_json(&[&url], "jobs", &["--permits", "3"]).await;
    assert_eq!(
        (&status["state"], &status["type"]),
        (&json!("semaphore"), &json!("zset"))
    );
    assert_eq!(
        (&status["writer"], &status["reader_count"]),
        (&Value::Null, &json!(0))
    );
    let held = &status["semaphore"];
    assert_eq!(
        [
            &held["holder_count"],
            &held["in_use"],
            &held["expired"],
            &held["permits"]
        ],
        [&json!(3), &json!(2), &json!(1), &json!(3)],
        "{status}"
    );
    assert_eq!(held["holders"][0]["id"], DEAD, "{status}");
    assert_eq!(held["holders"][0]["score"], dead_score, "{status}");
    remaining_is_score_minus_time(&status, &held["holders"], "score");
    assert_eq!(status["last_fencing_token"], b.fencing_token(), "{status}");
    assert_eq!(status["fence"]["value"], b.fencing_token().to_string());
    assert_eq!(status["queue"], Value::Null);
    let plain = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(plain["semaphore"]["permits"], Value::Null, "{plain}");

    assert_eq!(
        snapshot(&conn, "jobs").await.0,
        before.0,
        "status only reads"
    );
    // The expired holder counts for nothing: a third permit is free, and its acquire
    // drops the expired holder, as status said it would.
    let c = semaphore
        .try_acquire()
        .await
        .unwrap()
        .expect("a third permit");
    let text = status_text(&[&url], "jobs", &["--permits", "3"]).await;
    assert!(
        text[0].starts_with("jobs: semaphore, in use: 3 of 3, expired: 0 "),
        "{text:?}"
    );
    assert!(!text.iter().any(|line| line.contains(DEAD)), "{text:?}");
    for permit in [a, b, c] {
        assert!(permit.unlock().await.unwrap());
    }
}

#[tokio::test]
async fn status_lists_a_locks_fair_queue_in_order_and_the_first_is_served_next() {
    let (server, url, conn) = setup().await;
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .fair(true)
        .notifier(server.client())
        .build()
        .unwrap();
    let holder = mx.write().await.unwrap();
    let first = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    wait_queued(&conn, "jobs", 1).await;
    let second = tokio::spawn({
        let mx = mx.clone();
        async move { mx.read().await }
    });
    let members = wait_queued(&conn, "jobs", 2).await;
    let writer = members[0]
        .strip_prefix("w:")
        .expect("a writer first")
        .to_owned();
    let reader = members[1]
        .strip_prefix("r:")
        .expect("a reader second")
        .to_owned();
    // The library gives the same members typed, in the same order.
    let state = mx.inspect("").await.unwrap();
    let typed = [
        QueueEntry::Writer(writer.clone()),
        QueueEntry::Reader(reader.clone()),
    ];
    assert_eq!(state.queue(), typed);
    let tickets: Vec<_> = state
        .queue_tickets()
        .iter()
        .map(|(entry, _)| entry)
        .collect();
    assert_eq!(tickets, typed.iter().collect::<Vec<_>>());
    assert_eq!(
        typed.map(|entry| entry.to_string()),
        *members,
        "shown as stored"
    );

    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(text.len(), 6, "{text:?}");
    assert!(text[0].starts_with(&format!("jobs: write-locked by {} ", holder.id())));
    number_in(
        &text[1],
        "queue: 2 waiter(s), the first is next (PTTL ",
        " ms)",
        1..=30_000,
    );
    for (line, (place, kind, id, member)) in text[2..4].iter().zip([
        (1, "writer", &writer, &members[0]),
        (2, "reader", &reader, &members[1]),
    ]) {
        let score: String = raw::cmd(&conn, "ZSCORE", &["jobs:queue-deadline", member]).await;
        number_in(
            line,
            &format!("  {place}. {kind} {id} deadline in "),
            &format!(" ms (ticket {place}, score {score})"),
            1..=30_000,
        );
    }

    let status = status_json(&[&url], "jobs", &[]).await;
    let queue = &status["queue"];
    assert_eq!(queue["key"], "jobs:queue", "{status}");
    assert_eq!(queue["deadline_key"], "jobs:queue-deadline", "{status}");
    assert_eq!(
        (&queue["state"], &queue["waiter_count"]),
        (&json!("waiting"), &json!(2))
    );
    let waiters: Vec<(Value, Value, Value, Value)> = queue["waiters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["position"].clone(),
                w["kind"].clone(),
                w["id"].clone(),
                w["ticket"].clone(),
            )
        })
        .collect();
    assert_eq!(
        waiters,
        [
            (json!(1), json!("writer"), json!(writer), json!(1)),
            (json!(2), json!("reader"), json!(reader), json!(2)),
        ],
        "{status}"
    );
    remaining_is_score_minus_time(&status, &queue["waiters"], "deadline");

    // The first is served next, with the id status showed; the reader is then first.
    assert!(holder.unlock().await.unwrap());
    let got = common::at_once(first).await.unwrap().unwrap();
    assert_eq!(got.id(), writer);
    let text = status_text(&[&url], "jobs", &[]).await;
    assert!(
        text[1].starts_with("queue: 1 waiter(s), the first is next "),
        "{text:?}"
    );
    assert!(
        text[2].starts_with(&format!("  1. reader {reader} deadline in ")),
        "{text:?}"
    );
    assert!(got.unlock().await.unwrap());
    let got = common::at_once(second).await.unwrap().unwrap();
    assert_eq!(got.id(), reader);
    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(
        text[1..3],
        [format!("  reader {reader}"), "queue: none".to_owned()]
    );
    assert!(got.unlock().await.unwrap());
}

#[tokio::test]
async fn status_lists_a_semaphores_fair_queue() {
    let (server, url, conn) = setup().await;
    let semaphore = Semaphore::builder(conn.clone(), "jobs", 1)
        .ttl(TTL)
        .fair(true)
        .notifier(server.client())
        .build()
        .unwrap();
    let permit = semaphore.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire().await }
    });
    let members = wait_queued(&conn, "jobs", 1).await;
    let id = members[0].strip_prefix("p:").expect("a permit").to_owned();

    let text = status_text(&[&url], "jobs", &["--permits", "1"]).await;
    assert!(
        text[0].starts_with("jobs: semaphore, in use: 1 of 1, expired: 0 "),
        "{text:?}"
    );
    let holder = format!("  holder {} deadline in ", permit.id());
    assert!(text[1].starts_with(&holder), "{text:?}");
    assert!(
        text[2].starts_with("queue: 1 waiter(s), the first is next (PTTL "),
        "{text:?}"
    );
    assert!(
        text[3].starts_with(&format!("  1. permit {id} deadline in ")),
        "{text:?}"
    );
    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["queue"]["waiters"][0]["kind"], "permit", "{status}");
    assert_eq!(status["queue"]["waiters"][0]["id"], json!(id), "{status}");

    assert!(permit.unlock().await.unwrap());
    let got = common::at_once(waiter).await.unwrap().unwrap();
    assert_eq!(got.id(), id, "the waiter status showed got the permit");
    assert!(got.unlock().await.unwrap());
}

#[tokio::test]
async fn status_names_the_last_fencing_token_after_a_few_acquisitions() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", TTL);
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let guard = mx.write().await.unwrap();
        tokens.push(guard.fencing_token());
        assert!(guard.unlock().await.unwrap());
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    let last = tokens[2];

    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(
        text[..3],
        ["jobs: free", "queue: none", "intent: none"],
        "{text:?}"
    );
    let prefix = format!("last fencing token: {last} (PTTL ");
    number_in(&text[3], &prefix, " ms)", 1..=86_400_000);
    let status = status_json(&[&url], "jobs", &[]).await;
    assert_eq!(status["last_fencing_token"], last, "{status}");
    assert_eq!(status["fence"]["value"], last.to_string(), "{status}");
    // The next token is above the one status showed.
    let guard = mx.read().await.unwrap();
    assert!(guard.fencing_token() > last);
    assert!(guard.unlock().await.unwrap());

    // A fence key the scripts did not write: the crate refuses the lock (as a request
    // would), so status says which key holds what, and reads nothing more of it.
    let _: () = raw::cmd(&conn, "SET", &["other:fence", "12abc"]).await;
    let text = status_text(&[&url], "other", &[]).await;
    assert_eq!(
        text,
        ["other: not usable as a lock (left untouched): other:fence holds a non-integer string"]
    );
    let status = status_json(&[&url], "other", &[]).await;
    assert_eq!(
        (&status["state"], &status["type"]),
        (&json!("foreign"), &Value::Null),
        "{status}"
    );
    assert_eq!(status["last_fencing_token"], Value::Null, "{status}");
    assert_eq!(status["fence"], Value::Null, "not read: {status}");
    assert_eq!(status["note"], "other:fence holds a non-integer string");
    assert_eq!(
        raw::get(&conn, "other:fence").await.as_deref(),
        Some("12abc")
    );
}

/// Keys the crate did not write are reported as foreign or unknown, never a panic, and
/// stay as they were: with TTLs, a sorted set of other members, one whose score is no
/// deadline, and a queue of odd members and scores (the snapshot reads them, status
/// judges them); and keys the crate refuses, which the snapshot stops at and status
/// names: a sorted set and a queue with no TTL, a queue key and a fence of other types.
#[tokio::test]
async fn odd_keys_are_foreign_or_unknown_and_left_untouched() {
    let (_server, url, conn) = setup().await;
    let _: i64 = raw::cmd(&conn, "ZADD", &["board", "1", "alice"]).await;
    let _: i64 = raw::cmd(&conn, "ZADD", &["odd", "1.5", DEAD]).await;
    let _: i64 = raw::cmd(&conn, "ZADD", &["jobs:queue", "1.5", &format!("w:{DEAD}")]).await;
    let _: i64 = redis::cmd("ZADD")
        .arg("jobs:queue")
        .arg(2)
        .arg(b"junk\xff".as_slice())
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    let _: i64 = raw::cmd(
        &conn,
        "ZADD",
        &["jobs:queue-deadline", "+inf", &format!("w:{DEAD}")],
    )
    .await;
    for key in ["board", "odd", "jobs:queue", "jobs:queue-deadline"] {
        let _: i64 = raw::cmd(&conn, "PEXPIRE", &[key, "60000"]).await;
    }
    let _: i64 = raw::cmd(&conn, "ZADD", &["forever", "1", DEAD]).await;
    let _: i64 = raw::cmd(&conn, "ZADD", &["untimed:queue", "1", &format!("w:{DEAD}")]).await;
    let _: i64 = raw::cmd(&conn, "HSET", &["hashed:queue", "a", "1"]).await;
    let _: i64 = raw::cmd(&conn, "RPUSH", &["listed:fence", "7"]).await;
    let keys = [
        "board",
        "odd",
        "jobs:queue",
        "jobs:queue-deadline",
        "forever",
        "untimed:queue",
        "hashed:queue",
        "listed:fence",
    ];
    let mut before = Vec::new();
    for key in keys {
        before.push(snapshot(&conn, key).await.0);
    }

    let text = status_text(&[&url], "board", &[]).await;
    assert_eq!(
        text[0],
        r#"board: holds a zset, not a lock (left untouched): a sorted set whose member "alice" is not a permit id"#
    );
    let status = status_json(&[&url], "board", &[]).await;
    assert_eq!(
        (&status["state"], &status["type"]),
        (&json!("foreign"), &json!("zset"))
    );
    assert_eq!(status["semaphore"], Value::Null, "{status}");
    let status = status_json(&[&url], "odd", &[]).await;
    assert_eq!(status["state"], "foreign", "{status}");
    assert!(
        status["note"].as_str().unwrap().contains("not a deadline"),
        "{status}"
    );

    let text = status_text(&[&url], "jobs", &[]).await;
    assert_eq!(text[0], "jobs: free", "{text:?}");
    number_in(
        &text[1],
        "queue: 2 waiter(s), the first is next (PTTL ",
        " ms)",
        1..=60_000,
    );
    assert_eq!(
        text[2..4],
        [
            format!("  1. writer {DEAD} no deadline (ticket ?, score ?)"),
            "  2. unknown \"junk\u{fffd}\" no deadline (ticket 2, score ?)".to_owned(),
        ],
        "{text:?}"
    );
    let status = status_json(&[&url], "jobs", &[]).await;
    let waiters = &status["queue"]["waiters"];
    assert_eq!(
        (&waiters[0]["ticket"], &waiters[0]["deadline"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(
        (&waiters[1]["kind"], &waiters[1]["id"]),
        (&json!("unknown"), &Value::Null)
    );
    assert_eq!(status["last_fencing_token"], Value::Null, "{status}");

    // Refused: the snapshot stops at the key, and status names it.
    for (name, line, kind) in [
        (
            "forever",
            "forever: holds a zset, not a lock (left untouched): it has no TTL",
            json!("zset"),
        ),
        (
            "untimed",
            "untimed: not usable as a lock (left untouched): untimed:queue has no TTL",
            Value::Null,
        ),
        (
            "hashed",
            "hashed: not usable as a lock (left untouched): hashed:queue holds a hash",
            Value::Null,
        ),
        (
            "listed",
            "listed: not usable as a lock (left untouched): listed:fence holds a list",
            Value::Null,
        ),
    ] {
        assert_eq!(status_text(&[&url], name, &[]).await, [line]);
        let status = status_json(&[&url], name, &["--permits", "2"]).await;
        assert_eq!(
            (&status["state"], &status["type"]),
            (&json!("foreign"), &kind),
            "{status}"
        );
        let note = line.rsplit_once("(left untouched): ").unwrap().1;
        assert_eq!(status["note"], note, "{status}");
        assert_eq!(
            (&status["queue"], &status["server_time_ms"]),
            (&Value::Null, &Value::Null),
            "{status}"
        );
    }

    for (key, before) in keys.into_iter().zip(before) {
        assert_eq!(snapshot(&conn, key).await.0, before, "{key} changed");
    }
    for key in &keys[4..] {
        assert_eq!(raw::pttl(&conn, key).await, -1, "{key} left without a TTL");
    }
}
