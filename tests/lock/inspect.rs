//! Inspection (`RwMutex::inspect`, `Semaphore::inspect`, `lua/inspect.lua`) on every
//! state of a lock key: free, a writer, readers, a waiting writer's intent, a semaphore
//! with an expired entry, a fair queue; the snapshot's clock, the waiting writer's id,
//! every key's TTL, each permit's deadline and the queue's tickets and deadlines, as
//! stored; the keys a request refuses refused alike with nothing changed; the key built
//! as a request builds it; and the script writes nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::either::Either;
use crate::common::wrong_type::assert_wrong_type;
use crate::common::{self, eventually, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, LockState, Mode, Quorum, RwMutex, Semaphore};

type C = MultiplexedConnection;

const TTL: Duration = Duration::from_secs(30);

fn semaphore(conn: &C, name: &str, permits: u32) -> Semaphore<C> {
    Semaphore::builder(conn.clone(), name, permits)
        .ttl(TTL)
        .build()
        .unwrap()
}

/// `time` in milliseconds since the Unix epoch, as the scripts store deadlines.
fn ms(time: SystemTime) -> i64 {
    i64::try_from(time.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// The score of `member` in the sorted set `key`, as a deadline.
async fn score_time(conn: &C, key: &str, member: &str) -> SystemTime {
    let score: i64 = raw::cmd(conn, "ZSCORE", &[key, member]).await;
    UNIX_EPOCH + Duration::from_millis(u64::try_from(score).unwrap())
}

/// The TTL is within (0, TTL].
#[track_caller]
fn assert_ttl_within(state: &LockState) {
    let ttl = state.ttl().expect("a held key has a TTL");
    assert!(ttl > Duration::ZERO && ttl <= TTL, "{ttl:?}");
}

/// Whether `a` and `b` are the same state, but for their TTLs, which run down between
/// two reads.
#[track_caller]
fn assert_same_but_ttl(a: &LockState, b: &LockState) {
    assert_eq!(a.mode(), b.mode());
    assert_eq!(a.holders(), b.holders());
    assert_eq!(a.waiting_writer(), b.waiting_writer());
    assert_eq!(a.last_fencing_token(), b.last_fencing_token());
    assert_eq!(a.queue(), b.queue());
    assert_eq!(a.ttl().is_some(), b.ttl().is_some());
}

/// Everything stored on the server, key by key: its type, its value (`DUMP`) and whether
/// it has a TTL; and the server's count of writes since the last save.
async fn stored(conn: &C) -> (Vec<(String, String, Vec<u8>, bool)>, i64) {
    let mut keys: Vec<String> = raw::cmd(conn, "KEYS", &["*"]).await;
    keys.sort();
    let mut all = Vec::new();
    for key in keys {
        let kind = raw::key_type(conn, &key).await;
        let dump: Vec<u8> = raw::cmd(conn, "DUMP", &[&key]).await;
        let expires = raw::pttl(conn, &key).await > 0;
        all.push((key, kind, dump, expires));
    }
    let info: String = raw::cmd(conn, "INFO", &["persistence"]).await;
    let dirty = info
        .lines()
        .find_map(|line| line.strip_prefix("rdb_changes_since_last_save:"))
        .expect("INFO persistence gives rdb_changes_since_last_save")
        .trim()
        .parse()
        .unwrap();
    (all, dirty)
}

#[tokio::test]
async fn a_free_lock_is_free_and_a_writer_is_its_id_its_ttl_and_its_token() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "orders", TTL);

    let free = mx.inspect("42").await.unwrap();
    assert_eq!(free.mode(), None);
    assert!(free.holders().is_empty() && free.queue().is_empty());
    assert_eq!((free.ttl(), free.last_fencing_token()), (None, None));
    assert_eq!(
        (free.waiting_writer().is_some(), free.permits_in_use()),
        (false, 0)
    );

    let guard = mx.write().key("42").await.unwrap();
    let held = mx.inspect("42").await.unwrap();
    assert_eq!(held.mode(), Some(Mode::Write));
    assert_eq!(held.holders(), [guard.id()]);
    assert_eq!(held.permits_in_use(), 1);
    assert_ttl_within(&held);
    assert_eq!(held.last_fencing_token(), Some(guard.fencing_token()));
    // Another key of the mutex, and the name itself, are other locks.
    assert_eq!(mx.inspect("43").await.unwrap().mode(), None);
    assert_eq!(mx.inspect("").await.unwrap().mode(), None);
    // A clone, or another handle on another connection, sees the same.
    let other = common::mutex(&server.conn().await, "orders", TTL);
    assert_same_but_ttl(&other.inspect("42").await.unwrap(), &held);
    guard.unlock().await.unwrap();

    // Released: free, and the fence key keeps the last token.
    let after = mx.inspect("42").await.unwrap();
    assert_eq!((after.mode(), after.ttl()), (None, None));
    assert!(after.holders().is_empty());
    assert_eq!(after.last_fencing_token(), held.last_fencing_token());

    // The name itself: `""` is the lock key `<name>`.
    let whole = mx.write().await.unwrap();
    let state = mx.inspect("").await.unwrap();
    assert_eq!(state.holders(), [whole.id()]);
    assert_eq!(state.last_fencing_token(), Some(whole.fencing_token()));
}

#[tokio::test]
async fn readers_are_their_ids_sorted_and_the_token_is_the_last_readers() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "feed", TTL);
    let mut readers = Vec::new();
    for _ in 0..4 {
        readers.push(mx.read().await.unwrap());
    }
    let state = mx.inspect("").await.unwrap();
    assert_eq!(state.mode(), Some(Mode::Read));
    let mut ids: Vec<String> = readers.iter().map(|r| r.id().to_owned()).collect();
    ids.sort();
    assert_eq!(state.holders(), ids.as_slice());
    assert_eq!(state.permits_in_use(), 4);
    assert_ttl_within(&state);
    let last = readers.last().unwrap().fencing_token();
    assert_eq!(state.last_fencing_token(), Some(last));
    assert!(state.waiting_writer().is_none());
}

#[tokio::test]
async fn a_writer_waiting_with_its_intent_is_seen_beside_the_readers_it_waits_for() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "feed")
        .ttl(TTL)
        .lock_intent(true)
        .build()
        .unwrap();
    let reader = mx.read().await.unwrap();
    assert!(mx.inspect("").await.unwrap().waiting_writer().is_none());
    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    assert!(
        eventually(|| async { mx.inspect("").await.unwrap().waiting_writer().is_some() }).await,
        "the waiting writer's intent is seen"
    );
    let state = mx.inspect("").await.unwrap();
    assert_eq!(state.mode(), Some(Mode::Read));
    assert_eq!(state.holders(), [reader.id()]);
    assert!(raw::exists(&conn, "feed:lock-intent").await);

    reader.unlock().await.unwrap();
    let writer = writer.await.unwrap().unwrap();
    let state = mx.inspect("").await.unwrap();
    assert_eq!(state.holders(), [writer.id()]);
    assert!(
        state.waiting_writer().is_none(),
        "acquiring deleted the intent"
    );
}

#[tokio::test]
async fn a_semaphore_counts_its_unexpired_permits_and_leaves_the_expired_in_place() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = semaphore(&conn, "exports", 3);
    let first = sem.acquire().await.unwrap();
    let second = sem.acquire().await.unwrap();
    // A holder whose deadline has passed by the server's clock, still in the key.
    let stale = "0123456789abcdef0123456789abcdef";
    let past = (raw::server_ms(&conn).await - 1000).to_string();
    let _: i64 = raw::cmd(&conn, "ZADD", &["exports", &past, stale]).await;

    let state = sem.inspect("").await.unwrap();
    assert_eq!(state.mode(), Some(Mode::Read), "its holders share it");
    assert_eq!(state.permits_in_use(), 2);
    let mut ids = state.holders().to_vec();
    ids.sort();
    let mut held = vec![first.id().to_owned(), second.id().to_owned()];
    held.sort();
    assert_eq!(ids, held, "the expired entry is not counted");
    assert_ttl_within(&state);
    assert_eq!(state.last_fencing_token(), Some(second.fencing_token()));
    let stored: i64 = raw::cmd(&conn, "ZCARD", &["exports"]).await;
    assert_eq!(stored, 3, "inspection removed nothing");

    // Every permit run out: free, though the key is there.
    first.unlock().await.unwrap();
    second.unlock().await.unwrap();
    assert!(raw::exists(&conn, "exports").await);
    let state = sem.inspect("").await.unwrap();
    assert_eq!(
        (state.mode(), state.ttl(), state.permits_in_use()),
        (None, None, 0)
    );
}

#[tokio::test]
async fn a_fair_queue_is_its_waiters_in_order_without_those_past_their_deadline() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (mx, holder, waiters) = fair_line(&conn, &[false, true, false]).await;
    let state = mx.inspect("").await.unwrap();
    let stored: Vec<String> = raw::cmd(&conn, "ZRANGE", &["line:queue", "0", "-1"]).await;
    let queue: Vec<String> = state.queue().iter().map(ToString::to_string).collect();
    assert_eq!(queue, stored);
    let kinds: Vec<&str> = queue.iter().map(|m| &m[..2]).collect();
    assert_eq!(kinds, ["w:", "r:", "w:"], "in arrival order");
    assert!(queue.iter().all(|m| m.len() == 34));
    assert_eq!(state.holders(), [holder.id()]);
    // A plain handle on the same lock sees the queue too.
    assert_same_but_ttl(
        &common::mutex(&conn, "line", TTL).inspect("").await.unwrap(),
        &state,
    );

    // A waiter whose deadline has passed is left out, and stays stored. (The live
    // waiters go first: their own attempts would clear it.)
    for waiter in waiters {
        waiter.abort();
    }
    assert!(
        eventually(|| async { mx_queue_len(&conn).await == 0 }).await,
        "the aborted waiters left the queue"
    );
    lapsed_waiter(&conn, "99").await;
    assert!(mx.inspect("").await.unwrap().queue().is_empty());
    assert_eq!(mx_queue_len(&conn).await, 1, "inspection removed nothing");
}

async fn mx_queue_len(conn: &C) -> usize {
    raw::cmd::<usize>(conn, "ZCARD", &["line:queue"]).await
}

/// A fair mutex `line` on `conn`, its write lock held, and a waiter queued behind it for
/// each of `reads` (a reader when true), in that order: each queued before the next.
async fn fair_line(
    conn: &C,
    reads: &[bool],
) -> (
    RwMutex<C>,
    redismutex::WriteGuard,
    Vec<tokio::task::JoinHandle<Result<Either, Error>>>,
) {
    let mx = RwMutex::builder(conn.clone(), "line")
        .ttl(TTL)
        .fair(true)
        .build()
        .unwrap();
    let holder = mx.write().await.unwrap();
    let state = mx.inspect("").await.unwrap();
    assert!(state.queue().is_empty() && state.queue_tickets().is_empty());
    let mut waiters = Vec::new();
    for (n, &read) in reads.iter().enumerate() {
        let mx = mx.clone();
        waiters.push(tokio::spawn(async move {
            if read {
                mx.read().await.map(Either::from)
            } else {
                mx.write().await.map(Either::from)
            }
        }));
        let queued = n + 1;
        assert!(
            eventually(|| async { mx_queue_len(conn).await == queued }).await,
            "waiter {queued} queued"
        );
    }
    (mx, holder, waiters)
}

/// A waiter stored in `line`'s queue with `ticket` whose deadline passed a second ago (by
/// the server's clock), the queue's keys then given a TTL of a minute: its member and
/// that deadline in milliseconds.
async fn lapsed_waiter(conn: &C, ticket: &str) -> (&'static str, i64) {
    let gone = "w:0123456789abcdef0123456789abcdef";
    let past = raw::server_ms(conn).await - 1000;
    let _: i64 = raw::cmd(conn, "ZADD", &["line:queue", ticket, gone]).await;
    let _: i64 = raw::cmd(
        conn,
        "ZADD",
        &["line:queue-deadline", &past.to_string(), gone],
    )
    .await;
    // The queue's keys carry a TTL, as the fair scripts leave them.
    for key in ["line:queue", "line:queue-deadline"] {
        let _: i64 = raw::cmd(conn, "PEXPIRE", &[key, "60000"]).await;
    }
    (gone, past)
}

#[tokio::test]
async fn keys_a_request_refuses_are_refused_alike_and_left_as_they_were() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "k", TTL);
    let sem = semaphore(&conn, "k", 2);
    let set = |args: &'static [&'static str]| {
        let conn = conn.clone();
        async move {
            let _: redis::Value = raw::cmd(&conn, args[0], &args[1..]).await;
        }
    };
    // A hash at the lock key, and at each key beside it.
    for (key, setup) in [
        ("k:a", &["HSET", "k:a", "f", "v"][..]),
        (
            "k:b:lock-intent",
            &["HSET", "k:b:lock-intent", "f", "v"][..],
        ),
        ("k:c:fence", &["HSET", "k:c:fence", "f", "v"][..]),
        ("k:d:queue", &["HSET", "k:d:queue", "f", "v"][..]),
        (
            "k:e:queue-deadline",
            &["HSET", "k:e:queue-deadline", "f", "v"][..],
        ),
    ] {
        set(setup).await;
        let _: i64 = raw::cmd(&conn, "PEXPIRE", &[key, "60000"]).await;
        let lock = key.split(':').nth(1).unwrap();
        let before = stored(&conn).await;
        assert_wrong_type(mx.inspect(lock).await, key, "hash");
        assert_wrong_type(sem.inspect(lock).await, key, "hash");
        assert_eq!(stored(&conn).await, before, "{key} left as it was");
    }
    // Each handle refuses the other's form.
    set(&["ZADD", "k:sem", "1", "x"]).await;
    set(&["SET", "k:str", "x", "PX", "60000"]).await;
    set(&["SADD", "k:set", "x"]).await;
    assert_wrong_type(mx.inspect("sem").await, "k:sem", "zset");
    assert_wrong_type(sem.inspect("str").await, "k:str", "string");
    assert_wrong_type(sem.inspect("set").await, "k:set", "set");
    // A fence that is not a token.
    set(&["SET", "k:f:fence", "abc", "PX", "60000"]).await;
    assert_wrong_type(mx.inspect("f").await, "k:f:fence", "non-integer string");
    assert_wrong_type(sem.inspect("f").await, "k:f:fence", "non-integer string");
    assert_eq!(raw::get(&conn, "k:f:fence").await.as_deref(), Some("abc"));
    // A lock key with no TTL (the sorted set and the set above have none either).
    set(&["SET", "k:forever", "0123456789abcdef0123456789abcdef"]).await;
    for result in [
        mx.inspect("forever").await,
        mx.inspect("set").await,
        sem.inspect("sem").await,
    ] {
        assert!(
            matches!(&result, Err(Error::NoExpiry { key, .. }) if key.starts_with("k:")),
            "{result:?}"
        );
    }
    assert_eq!(
        raw::pttl(&conn, "k:forever").await,
        -1,
        "left without a TTL"
    );
}

#[tokio::test]
async fn the_key_is_built_and_checked_as_a_request_builds_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let tagged = RwMutex::builder(conn.clone(), "orders")
        .ttl(TTL)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let guard = tagged.write().key("42").await.unwrap();
    assert_eq!(guard.key(), "orders:{42}");
    assert_eq!(tagged.inspect("42").await.unwrap().holders(), [guard.id()]);
    // The untagged name is another key: free.
    assert_eq!(
        common::mutex(&conn, "orders", TTL)
            .inspect("42")
            .await
            .unwrap()
            .mode(),
        None
    );
    // A key that defeats the tag tagging adds (its keys would cross slots).
    assert!(matches!(
        tagged.inspect("}x").await,
        Err(Error::InvalidKey { key, .. }) if key == "orders:{}x}"
    ));
    for bad in ["a:fence", "b:lock-intent", "c:queue-deadline"] {
        let result = common::mutex(&conn, "orders", TTL).inspect(bad).await;
        assert!(
            matches!(&result, Err(Error::InvalidKey { .. })),
            "{bad}: {result:?}"
        );
    }
    let long = "k".repeat(redismutex::MAX_KEY_BYTES);
    assert!(matches!(
        common::mutex(&conn, "orders", TTL).inspect(&long).await,
        Err(Error::InvalidKey { .. })
    ));
    // Options every request refuses are refused alike.
    let nameless = RwMutex::new(conn.clone(), "");
    assert!(matches!(
        nameless.inspect("42").await,
        Err(Error::InvalidOptions(_))
    ));
}

#[tokio::test]
async fn over_a_quorum_inspection_is_refused_saying_why_and_sends_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let nodes = vec![conn.clone(), server.conn().await, server.conn().await];
    let mx = RwMutex::new(Quorum::new(nodes).unwrap(), "orders");
    let (evalsha, _) = raw::calls(&conn, "evalsha").await;
    match mx.inspect("42").await {
        Err(Error::InvalidOptions(message)) => {
            assert!(message.contains("orders:42"), "{message}");
            assert!(message.contains("quorum"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(raw::calls(&conn, "evalsha").await.0, evalsha);
    assert_eq!(raw::calls(&conn, "eval").await.0, 0);
}

#[tokio::test]
async fn the_script_writes_nothing_in_any_state() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let id = "0123456789abcdef0123456789abcdef";
    let waiter = "r:fedcba9876543210fedcba9876543210";
    let gone = "w:00000000000000000000000000000000";
    let now = raw::server_ms(&conn).await;
    let (future, past) = ((now + 60_000).to_string(), (now - 1000).to_string());
    for args in [
        &["SET", "w", id, "PX", "60000"][..],
        &["SET", "w:lock-intent", id, "PX", "60000"][..],
        &["SET", "w:fence", "17", "PX", "60000"][..],
        &["ZADD", "w:queue", "1", waiter, "2", gone][..],
        &["PEXPIRE", "w:queue", "60000"][..],
        &["ZADD", "w:queue-deadline", &future, waiter, &past, gone][..],
        &["PEXPIRE", "w:queue-deadline", "60000"][..],
        &["SADD", "r", id][..],
        &["PEXPIRE", "r", "60000"][..],
        &["ZADD", "s", &future, id, &past, "expired"][..],
        &["PEXPIRE", "s", "60000"][..],
    ] {
        let _: redis::Value = raw::cmd(&conn, args[0], &args[1..]).await;
    }
    let mx = common::mutex(&conn, "w", TTL);
    let before = stored(&conn).await;
    let writer = mx.inspect("").await.unwrap();
    assert_eq!(writer.holders(), [id]);
    assert!(writer.waiting_writer().is_some());
    assert_eq!(writer.last_fencing_token(), Some(17));
    assert_eq!(
        writer
            .queue()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [waiter]
    );
    let readers = common::mutex(&conn, "r", TTL).inspect("").await.unwrap();
    assert_eq!(
        (readers.mode(), readers.holders()),
        (Some(Mode::Read), &[id.to_owned()][..])
    );
    let permits = semaphore(&conn, "s", 1).inspect("").await.unwrap();
    assert_eq!(permits.holders(), [id]);
    for name in ["w", "r", "free"] {
        common::mutex(&conn, name, TTL).inspect("").await.unwrap();
    }
    semaphore(&conn, "s", 1).inspect("").await.unwrap();
    let (keys, dirty) = stored(&conn).await;
    assert_eq!(keys, before.0, "every key, value and TTL as it was");
    assert_eq!(dirty, before.1, "the server counted no write");
}

#[tokio::test]
async fn the_snapshot_is_read_at_one_server_time_between_two_reads_of_the_clock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "clock", TTL);
    let before = raw::server_ms(&conn).await;
    let state = mx.inspect("").await.unwrap();
    let after = raw::server_ms(&conn).await;
    let read = ms(state.server_time());
    assert!(
        before <= read && read <= after,
        "{before} <= {read} <= {after}"
    );
    // A free key is read at a server time too, and the clock goes on.
    let later = mx.inspect("").await.unwrap();
    assert!(later.server_time() >= state.server_time());
}

#[tokio::test]
async fn the_waiting_writer_is_the_id_of_the_writer_that_then_holds_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "feed")
        .ttl(TTL)
        .lock_intent(true)
        .build()
        .unwrap();
    let reader = mx.read().await.unwrap();
    assert_eq!(mx.inspect("").await.unwrap().waiting_writer(), None);
    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().await }
    });
    assert!(eventually(|| raw::exists(&conn, "feed:lock-intent")).await);
    let state = mx.inspect("").await.unwrap();
    let waiting = state.waiting_writer().expect("a writer waits").to_owned();
    assert!(state.waiting_writer().is_some());
    assert_eq!(
        Some(waiting.clone()),
        raw::get(&conn, "feed:lock-intent").await
    );
    reader.unlock().await.unwrap();
    let writer = writer.await.unwrap().unwrap();
    assert_eq!(writer.id(), waiting, "the writer that waited took the lock");
    let state = mx.inspect("").await.unwrap();
    assert_eq!(state.waiting_writer(), None);
    writer.unlock().await.unwrap();

    // The Go package's writers store "1".
    let _: () = raw::cmd(&conn, "SET", &["go:lock-intent", "1", "PX", "60000"]).await;
    assert_eq!(
        common::mutex(&conn, "go", TTL)
            .inspect("")
            .await
            .unwrap()
            .waiting_writer(),
        Some("1")
    );
}

#[tokio::test]
async fn key_ttls_are_every_existing_key_in_order_with_its_pttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let id = "0123456789abcdef0123456789abcdef";
    let waiter = "w:fedcba9876543210fedcba9876543210";
    for args in [
        &["SET", "all", id, "PX", "50000"][..],
        &["SET", "all:lock-intent", id, "PX", "40000"][..],
        &["SET", "all:fence", "3", "PX", "30000"][..],
        &["ZADD", "all:queue", "1", waiter][..],
        &["PEXPIRE", "all:queue", "20000"][..],
        &["ZADD", "all:queue-deadline", "1", waiter][..],
        &["PEXPIRE", "all:queue-deadline", "10000"][..],
    ] {
        let _: redis::Value = raw::cmd(&conn, args[0], &args[1..]).await;
    }
    let state = common::mutex(&conn, "all", TTL).inspect("").await.unwrap();
    let names: Vec<&str> = state
        .key_ttls()
        .iter()
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "all",
            "all:lock-intent",
            "all:fence",
            "all:queue",
            "all:queue-deadline"
        ]
    );
    for ((key, ttl), set) in state.key_ttls().iter().zip([50, 40, 30, 20, 10]) {
        let set = Duration::from_secs(set);
        assert!(
            *ttl <= set && *ttl > set - Duration::from_secs(5),
            "{key}: {ttl:?} of {set:?}"
        );
    }
    assert_eq!(
        Some(state.key_ttls()[0].1),
        state.ttl(),
        "the lock key's is ttl()"
    );

    // Only the keys that exist: after an unlock, the fence.
    let mx = common::mutex(&conn, "once", TTL);
    mx.write().await.unwrap().unlock().await.unwrap();
    let state = mx.inspect("").await.unwrap();
    let names: Vec<&str> = state
        .key_ttls()
        .iter()
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(names, ["once:fence"]);
    assert!(common::mutex(&conn, "none", TTL)
        .inspect("")
        .await
        .unwrap()
        .key_ttls()
        .is_empty());

    // A semaphore key whose every permit ran out is free, yet listed while it exists.
    let past = (raw::server_ms(&conn).await - 1000).to_string();
    let _: i64 = raw::cmd(&conn, "ZADD", &["spent", &past, id]).await;
    let _: i64 = raw::cmd(&conn, "PEXPIRE", &["spent", "60000"]).await;
    let state = semaphore(&conn, "spent", 1).inspect("").await.unwrap();
    assert_eq!((state.mode(), state.ttl()), (None, None));
    assert_eq!(state.key_ttls().len(), 1);
    assert_eq!(state.key_ttls()[0].0, "spent");
    assert!(state.key_ttls()[0].1 > Duration::from_secs(55));
}

#[tokio::test]
async fn permit_deadlines_are_every_permit_expired_or_not_with_its_stored_deadline() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = semaphore(&conn, "exports", 3);
    let first = sem.acquire().await.unwrap();
    let second = sem.acquire().await.unwrap();
    let stale = "0123456789abcdef0123456789abcdef";
    let past = raw::server_ms(&conn).await - 1000;
    let _: i64 = raw::cmd(&conn, "ZADD", &["exports", &past.to_string(), stale]).await;

    let state = sem.inspect("").await.unwrap();
    let deadlines = state.permit_deadlines();
    assert_eq!(deadlines.len(), 3, "the expired permit too: {deadlines:?}");
    assert_eq!(deadlines[0].0, stale, "the first to run out first");
    assert_eq!(deadlines[0].1.map(ms), Some(past));
    for (id, deadline) in &deadlines[1..] {
        assert!([first.id(), second.id()].contains(&id.as_str()), "{id}");
        assert_eq!(*deadline, Some(score_time(&conn, "exports", id).await));
    }
    assert!(
        deadlines.windows(2).all(|w| w[0].1 <= w[1].1),
        "{deadlines:?}"
    );
    // The holders are the permits whose deadline is after the server time.
    let mut after: Vec<&str> = deadlines
        .iter()
        .filter(|(_, deadline)| deadline.unwrap() > state.server_time())
        .map(|(id, _)| id.as_str())
        .collect();
    after.sort_unstable();
    let mut holders: Vec<&str> = state.holders().iter().map(String::as_str).collect();
    holders.sort_unstable();
    assert_eq!(holders, after);
    assert_eq!(holders.len(), 2);

    // A score that is not a whole number of milliseconds is no deadline.
    let _: i64 = raw::cmd(&conn, "ZADD", &["exports", "1.5", "odd"]).await;
    let state = sem.inspect("").await.unwrap();
    assert_eq!(state.permit_deadlines()[0], ("odd".to_owned(), None));
    // A read-write lock has no permits.
    let guard = common::mutex(&conn, "plain", TTL).write().await.unwrap();
    assert!(common::mutex(&conn, "plain", TTL)
        .inspect("")
        .await
        .unwrap()
        .permit_deadlines()
        .is_empty());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn the_queues_tickets_and_deadlines_are_as_stored_lapsed_waiters_included() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (mx, holder, waiters) = fair_line(&conn, &[false, true]).await;
    // A waiter whose deadline has passed, still stored, with a ticket that is not whole.
    // The live waiters' own attempts clear a lapsed waiter: a snapshot counts when the
    // lapsed one was still stored after it (then it was during it too).
    let mut taken = None;
    for _ in 0..10 {
        let (gone, past) = lapsed_waiter(&conn, "99.5").await;
        let stored: Vec<String> = raw::cmd(&conn, "ZRANGE", &["line:queue", "0", "-1"]).await;
        // The waiters push their deadlines on while they wait: the snapshot's lie
        // between the stored ones read before it and after it.
        let mut before = Vec::new();
        for member in &stored[..2] {
            before.push(score_time(&conn, "line:queue-deadline", member).await);
        }
        let state = mx.inspect("").await.unwrap();
        let after: Vec<String> = raw::cmd(&conn, "ZRANGE", &["line:queue", "0", "-1"]).await;
        if stored.len() == 3 && after.iter().any(|member| member == gone) {
            taken = Some((gone, past, stored, before, state));
            break;
        }
    }
    let (gone, past, stored, before, state) = taken.expect("a snapshot with the lapsed waiter");
    let tickets: Vec<(String, Option<u64>)> = state
        .queue_tickets()
        .iter()
        .map(|(member, ticket)| (member.to_string(), *ticket))
        .collect();
    assert_eq!(
        tickets,
        [
            (stored[0].clone(), Some(1)),
            (stored[1].clone(), Some(2)),
            (gone.to_string(), None)
        ],
        "in queue order, with their arrival tickets"
    );
    assert_eq!(
        state
            .queue()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        &stored[..2],
        "queue() leaves the lapsed one out"
    );

    let deadlines = state.queue_deadlines();
    assert_eq!(deadlines.len(), 3, "{deadlines:?}");
    assert_eq!(
        (deadlines[0].0.to_string(), deadlines[0].1),
        (
            gone.to_string(),
            Some(UNIX_EPOCH + Duration::from_millis(u64::try_from(past).unwrap()))
        )
    );
    assert!(
        deadlines[0].1.unwrap() <= state.server_time(),
        "it has passed"
    );
    for (member, deadline) in &deadlines[1..] {
        let member = member.to_string();
        let at = stored[..2]
            .iter()
            .position(|m| *m == member)
            .expect(&member);
        let after = score_time(&conn, "line:queue-deadline", &member).await;
        let deadline_at = deadline.expect("a waiter's deadline is whole milliseconds");
        assert!(
            before[at] <= deadline_at && deadline_at <= after,
            "{member}: {:?} <= {deadline_at:?} <= {after:?}",
            before[at]
        );
        assert!(deadline.unwrap() > state.server_time(), "still waiting");
    }
    holder.unlock().await.unwrap();
    for waiter in waiters {
        waiter.abort();
    }
}
