//! The Lua scripts in `lua/`, run directly: the wire protocol the protocol guide
//! (`redismutex::guide::protocol`) documents. Each is sent as the crate sends it
//! (`tests/common/scripts.rs`).

use crate::common::{raw, scripts, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::Value;

pub(super) const ID_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub(super) const ID_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const ID_C: &str = "cccccccccccccccccccccccccccccccc";
/// The fence retention the scripts are called with: a day.
pub(super) const FENCE_MS: u64 = 86_400_000;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

async fn lock(conn: &MultiplexedConnection, id: &str, ttl: u64, intent: bool) -> Value {
    scripts::script("lock.lua")
        .key("k")
        .key("k:lock-intent")
        .key("k:fence")
        .arg(id)
        .arg(ttl)
        .arg(if intent { "1" } else { "0" })
        .arg(FENCE_MS)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

async fn rlock(conn: &MultiplexedConnection, id: &str, ttl: u64) -> Value {
    rlock_counting(conn, id, ttl, false).await
}

/// `rlock.lua` with ARGV[4]: `counting` takes the fence key as a checked counter.
async fn rlock_counting(conn: &MultiplexedConnection, id: &str, ttl: u64, counting: bool) -> Value {
    scripts::script("rlock.lua")
        .key("k")
        .key("k:lock-intent")
        .key("k:fence")
        .arg(id)
        .arg(ttl)
        .arg(FENCE_MS)
        .arg(if counting { "1" } else { "0" })
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

async fn refresh(conn: &MultiplexedConnection, id: &str, ttl: u64) -> i64 {
    scripts::script("refresh.lua")
        .key("k")
        .arg(id)
        .arg(ttl)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

/// `unlock.lua` for a writer's id: 1 held and removed, + 2 when it published.
async fn unlock(conn: &MultiplexedConnection, id: &str, clear_intent: bool) -> i64 {
    unlock_as(conn, id, clear_intent, "w").await
}

async fn unlock_as(conn: &MultiplexedConnection, id: &str, clear_intent: bool, mode: &str) -> i64 {
    let script = scripts::script("unlock.lua");
    let mut invocation = script.key("k");
    if clear_intent {
        invocation.key("k:lock-intent");
    }
    invocation
        .arg(id)
        .arg("k:released")
        .arg(mode)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

/// `downgrade.lua`: 1 now a reader, + 2 when the writer's key was replaced and published.
async fn downgrade(conn: &MultiplexedConnection, id: &str, ttl: u64) -> i64 {
    scripts::script("downgrade.lua")
        .key("k")
        .arg(id)
        .arg(ttl)
        .arg("k:released")
        .arg("0")
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

/// The fencing token of an acquired reply (a positive integer); panics on any other.
fn token(reply: &Value) -> i64 {
    match reply {
        Value::Int(token) if *token > 0 => *token,
        other => panic!("expected acquired, got {other:?}"),
    }
}

/// The PTTL of a blocked reply (`-1 - pttl`); panics on any other.
fn blocked_pttl(reply: &Value) -> i64 {
    match reply {
        Value::Int(blocked) if *blocked < 0 => -1 - *blocked,
        other => panic!("expected blocked, got {other:?}"),
    }
}

#[tokio::test]
async fn lock_is_idempotent_for_one_id_and_blocks_others() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let first = token(&lock(&conn, ID_A, 5000, false).await);
    raw::cmd::<i64>(&conn, "PEXPIRE", &["k", "1000"]).await;
    let resent = token(&lock(&conn, ID_A, 5000, false).await);
    assert!(resent > first, "a resent acquire succeeds with a new token");
    assert!(raw::pttl(&conn, "k").await > 4000, "and resets the TTL");
    let pttl = blocked_pttl(&lock(&conn, ID_B, 5000, false).await);
    assert!((1..=5000).contains(&pttl));
    assert!(
        !raw::exists(&conn, "k:lock-intent").await,
        "no intent unless asked"
    );
    blocked_pttl(&rlock(&conn, ID_B, 5000).await);
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_A));
}

#[tokio::test]
async fn rlock_counts_on_a_checked_fence_and_reports_one_that_is_not_a_counter() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    raw::cmd::<()>(
        &conn,
        "SET",
        &["k:fence", "1700000000000000", "PX", "600000"],
    )
    .await;
    assert_eq!(
        token(&rlock_counting(&conn, ID_A, 5000, true).await),
        1_700_000_000_000_001
    );
    let pttl = raw::pttl(&conn, "k:fence").await;
    assert!(
        (1..=600_000).contains(&pttl),
        "counting leaves the TTL: {pttl}"
    );

    // Gone (expired, or a restart): restarts at the server clock, with a TTL.
    raw::cmd::<i64>(&conn, "DEL", &["k:fence"]).await;
    let clock = i64::try_from(raw::server_us(&conn).await).unwrap();
    assert!(token(&rlock_counting(&conn, ID_B, 5000, true).await) >= clock);
    assert!(raw::pttl(&conn, "k:fence").await > 600_000);

    // Not a counter any more: nothing taken, a non-integer left as it was.
    raw::cmd::<()>(&conn, "SET", &["k:fence", "abc", "PX", "600000"]).await;
    let reply = rlock_counting(&conn, "cccccccccccccccccccccccccccccccc", 5000, true).await;
    assert_eq!(reply, Value::Array(vec![bulk("unchecked")]));
    assert_eq!(raw::get(&conn, "k:fence").await.as_deref(), Some("abc"));
    assert_eq!(raw::members(&conn, "k").await.len(), 2, "no reader added");
}

#[tokio::test]
async fn rlock_is_idempotent_and_never_shortens_the_set_ttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let first = token(&rlock(&conn, ID_A, 9000).await);
    let resent = token(&rlock(&conn, ID_A, 9000).await);
    assert!(resent > first, "a resent acquire succeeds with a new token");
    assert_eq!(raw::members(&conn, "k").await, vec![ID_A]);
    assert!(token(&rlock(&conn, ID_B, 1000).await) > resent);
    assert!(raw::pttl(&conn, "k").await > 8000);
    assert_eq!(refresh(&conn, ID_B, 1000).await, 1);
    assert!(raw::pttl(&conn, "k").await > 8000);
    blocked_pttl(&lock(&conn, "cccccccccccccccccccccccccccccccc", 5000, false).await);
}

#[tokio::test]
async fn a_failed_writer_sets_its_own_intent_and_leaves_another_writers() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    rlock(&conn, ID_A, 5000).await;

    blocked_pttl(&lock(&conn, ID_B, 9000, true).await);
    assert_eq!(
        raw::get(&conn, "k:lock-intent").await.as_deref(),
        Some(ID_B)
    );
    assert!(raw::pttl(&conn, "k:lock-intent").await > 8000);
    raw::cmd::<i64>(&conn, "PEXPIRE", &["k:lock-intent", "3000"]).await;
    blocked_pttl(&lock(&conn, ID_B, 9000, true).await);
    assert!(
        raw::pttl(&conn, "k:lock-intent").await > 8000,
        "a waiting writer renews its own intent"
    );
    blocked_pttl(&lock(&conn, "cccccccccccccccccccccccccccccccc", 1000, true).await);
    assert_eq!(
        raw::get(&conn, "k:lock-intent").await.as_deref(),
        Some(ID_B),
        "another waiting writer leaves it"
    );
    assert!(
        raw::pttl(&conn, "k:lock-intent").await > 8000,
        "and its TTL"
    );
    let intent_pttl = blocked_pttl(&rlock(&conn, "dddddddddddddddddddddddddddddddd", 5000).await);
    assert!(
        intent_pttl > 8000,
        "readers are blocked for the intent's PTTL"
    );
    assert_eq!(
        refresh(&conn, ID_A, 5000).await,
        1,
        "present readers keep their lock"
    );

    assert_eq!(
        unlock_as(&conn, ID_A, false, "r").await,
        3,
        "the last reader publishes"
    );
    token(&lock(&conn, "cccccccccccccccccccccccccccccccc", 9000, true).await);
    assert_eq!(
        raw::get(&conn, "k:lock-intent").await.as_deref(),
        Some(ID_B),
        "acquiring leaves another writer's intent"
    );
    assert_eq!(
        unlock(&conn, "cccccccccccccccccccccccccccccccc", false).await,
        3
    );
    token(&lock(&conn, ID_B, 9000, true).await);
    assert!(
        !raw::exists(&conn, "k:lock-intent").await,
        "acquiring deletes the writer's own intent"
    );
}

#[tokio::test]
async fn unlock_removes_only_its_own_id_and_clears_only_its_own_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    lock(&conn, ID_A, 5000, false).await;
    assert_eq!(unlock(&conn, ID_B, false).await, 0);
    assert_eq!(
        unlock_as(&conn, ID_A, false, "r").await,
        0,
        "a writer's id is no reader"
    );
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_A));
    assert_eq!(unlock(&conn, ID_A, false).await, 3, "removed and published");
    assert!(!raw::exists(&conn, "k").await);
    assert_eq!(
        unlock(&conn, ID_A, false).await,
        0,
        "a second unlock finds nothing"
    );

    rlock(&conn, ID_A, 5000).await;
    rlock(&conn, ID_B, 5000).await;
    rlock(&conn, ID_C, 5000).await;
    assert_eq!(
        unlock(&conn, ID_A, false).await,
        0,
        "a reader's id is no writer"
    );
    assert_eq!(
        unlock_as(&conn, ID_A, false, "r").await,
        1,
        "two other readers remain: no message"
    );
    assert_eq!(
        unlock_as(&conn, ID_C, false, "r").await,
        3,
        "one reader is left (an upgrade may wait for it): published"
    );
    assert_eq!(unlock_as(&conn, ID_B, false, "r").await, 3);
    assert!(!raw::exists(&conn, "k").await);

    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", ID_A, "PX", "5000"]).await;
    assert_eq!(unlock(&conn, ID_A, false).await, 0);
    assert!(
        raw::exists(&conn, "k:lock-intent").await,
        "intent kept unless asked"
    );
    for other in ["1", ID_B] {
        raw::cmd::<()>(&conn, "SET", &["k:lock-intent", other, "PX", "5000"]).await;
        assert_eq!(unlock(&conn, ID_A, true).await, 0);
        assert_eq!(
            raw::get(&conn, "k:lock-intent").await.as_deref(),
            Some(other),
            "another writer's intent is left"
        );
    }
    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", ID_A, "PX", "5000"]).await;
    assert_eq!(
        unlock(&conn, ID_A, true).await,
        2,
        "its own intent: deleted, published"
    );
    assert!(!raw::exists(&conn, "k:lock-intent").await);

    raw::cmd::<i64>(&conn, "HSET", &["k:lock-intent", "f", "v"]).await;
    unlock(&conn, ID_B, true).await;
    assert_eq!(
        raw::key_type(&conn, "k:lock-intent").await,
        "hash",
        "a foreign intent key is left"
    );
}

#[tokio::test]
async fn refresh_reports_zero_and_changes_nothing_when_not_held() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    assert_eq!(refresh(&conn, ID_A, 5000).await, 0, "no key");
    lock(&conn, ID_B, 5000, false).await;
    assert_eq!(refresh(&conn, ID_A, 9000).await, 0, "another writer");
    assert!(raw::pttl(&conn, "k").await <= 5000);
    raw::cmd::<i64>(&conn, "DEL", &["k"]).await;
    raw::cmd::<i64>(&conn, "RPUSH", &["k", ID_A]).await;
    assert_eq!(refresh(&conn, ID_A, 5000).await, 0, "a list");
    assert_eq!(raw::pttl(&conn, "k").await, -1);
}

#[tokio::test]
async fn downgrade_turns_only_its_own_writers_key_into_a_readers_set() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    assert_eq!(downgrade(&conn, ID_A, 5000).await, 0, "nothing held");
    assert!(!raw::exists(&conn, "k").await, "nothing created");

    lock(&conn, ID_B, 5000, false).await;
    assert_eq!(downgrade(&conn, ID_A, 5000).await, 0, "another writer's");
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_B));
    assert_eq!(unlock(&conn, ID_B, false).await, 3);

    let minted = token(&lock(&conn, ID_A, 5000, false).await);
    let fence = raw::stored_token(&conn, "k:fence").await;
    assert_eq!(fence, minted as u64);
    assert_eq!(
        downgrade(&conn, ID_A, 9000).await,
        3,
        "replaced and published"
    );
    assert_eq!(raw::key_type(&conn, "k").await, "set");
    assert_eq!(raw::members(&conn, "k").await, vec![ID_A.to_string()]);
    let pttl = raw::pttl(&conn, "k").await;
    assert!((8000..=9000).contains(&pttl), "PTTL {pttl}");
    assert_eq!(
        raw::stored_token(&conn, "k:fence").await,
        fence,
        "no token minted"
    );

    // A resent downgrade finds the set holding its id: success, nothing published, the
    // TTL raised but never lowered.
    assert_eq!(downgrade(&conn, ID_A, 20_000).await, 1);
    assert!(raw::pttl(&conn, "k").await > 19_000);
    assert_eq!(downgrade(&conn, ID_A, 100).await, 1);
    assert!(raw::pttl(&conn, "k").await > 19_000, "never shortened");
    assert_eq!(raw::members(&conn, "k").await, vec![ID_A.to_string()]);

    // Now a reader like any other: another reader joins, a writer is blocked, and
    // refresh and unlock treat the id as a reader's.
    token(&rlock(&conn, ID_B, 5000).await);
    blocked_pttl(&lock(&conn, "cccccccccccccccccccccccccccccccc", 5000, false).await);
    assert_eq!(refresh(&conn, ID_A, 5000).await, 1);
    assert_eq!(
        unlock(&conn, ID_A, false).await,
        0,
        "no writer's id any more"
    );
    assert_eq!(
        unlock_as(&conn, ID_A, false, "r").await,
        3,
        "one reader left: published"
    );
    assert_eq!(
        downgrade(&conn, ID_A, 5000).await,
        0,
        "a set without the id"
    );
    assert_eq!(raw::members(&conn, "k").await, vec![ID_B.to_string()]);
    assert_eq!(unlock_as(&conn, ID_B, false, "r").await, 3);

    raw::cmd::<i64>(&conn, "HSET", &["k", "f", "v"]).await;
    assert_eq!(downgrade(&conn, ID_A, 5000).await, 0, "a foreign type");
    assert_eq!(raw::key_type(&conn, "k").await, "hash");
    assert_eq!(raw::pttl(&conn, "k").await, -1, "no TTL put on it");
}

#[tokio::test]
async fn downgrade_completes_out_of_memory() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let conn = server.conn().await;
    lock(&conn, ID_A, 5000, false).await;
    // An empty server may use less than 1 MB; with 2 MB of filler it is surely over.
    raw::cmd::<()>(&conn, "SET", &["filler", &"x".repeat(2 << 20)]).await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "maxmemory", "1mb"]).await;
    let probe = redis::cmd("SADD")
        .arg("probe")
        .arg("1")
        .query_async::<()>(&mut conn.clone())
        .await
        .unwrap_err();
    assert_eq!(probe.code(), Some("OOM"), "{probe}");

    // DEL comes first, and a script that has written is let finish: the SADD after it
    // is not refused, so the lock is never left deleted.
    assert_eq!(downgrade(&conn, ID_A, 5000).await, 3);
    assert_eq!(raw::members(&conn, "k").await, vec![ID_A.to_string()]);
    assert!(raw::pttl(&conn, "k").await > 4000);
}

/// Whether a script failed on `OOM`: the error's code from Redis 7.0, or (Redis 6.2)
/// inside the `ERR Error running script` that wraps it.
pub(crate) fn out_of_memory(err: &redis::RedisError) -> bool {
    err.code() == Some("OOM") || err.to_string().contains("-OOM command not allowed")
}

/// The error of the script `name` (`lock.lua` or `semaphore.lua`) on `keys` as a fair request of
/// [`ID_A`] that waits: TTL 9 s, the third argument `1` (set the intent; one permit), no
/// clock floor.
async fn fair_wait_refused(
    conn: &MultiplexedConnection,
    name: &str,
    keys: &[&str],
) -> redis::RedisError {
    scripts::script(name)
        .key(keys)
        .arg(ID_A)
        .arg(9_000)
        .arg("1")
        .arg(FENCE_MS)
        .arg("0")
        .arg("wait")
        .invoke_async::<Value>(&mut conn.clone())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn blocked_fair_requests_are_refused_out_of_memory_with_nothing_changed() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let conn = server.conn().await;
    // A writer blocked by another, with its own intent already set (3 s left): joining
    // the queue is refused; before, the intent's PEXPIRE (allowed) let it through.
    lock(&conn, ID_B, 60_000, false).await;
    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", ID_A, "PX", "3000"]).await;
    // A semaphore of one permit with a live holder and a run-out one: dropping the run-out
    // holder (a removal, allowed) let the queue's ZADD through.
    let now = raw::server_ms(&conn).await;
    let (live, past) = ((now + 60_000).to_string(), (now - 1_000).to_string());
    raw::cmd::<()>(&conn, "ZADD", &["s", &live, ID_B, &past, "cccc"]).await;
    raw::cmd::<()>(&conn, "PEXPIRE", &["s", "60000"]).await;
    raw::cmd::<()>(&conn, "SET", &["filler", &"x".repeat(2 << 20)]).await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "maxmemory", "1mb"]).await;

    let lock_keys = [
        "k",
        "k:lock-intent",
        "k:fence",
        "k:queue",
        "k:queue-deadline",
    ];
    let writer = fair_wait_refused(&conn, "lock.lua", &lock_keys).await;
    assert!(out_of_memory(&writer), "{writer}");
    let permit = fair_wait_refused(
        &conn,
        "semaphore.lua",
        &["s", "s:fence", "s:queue", "s:queue-deadline"],
    )
    .await;
    assert!(out_of_memory(&permit), "{permit}");

    for queue in ["k:queue", "k:queue-deadline", "s:queue", "s:queue-deadline"] {
        assert!(!raw::exists(&conn, queue).await, "{queue} not made");
    }
    let intent = raw::pttl(&conn, "k:lock-intent").await;
    assert!(
        intent > 0 && intent <= 3000,
        "intent not extended: {intent}"
    );
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_B));
    let holders: Vec<String> = raw::cmd(&conn, "ZRANGE", &["s", "0", "-1"]).await;
    assert_eq!(holders, ["cccc", ID_B], "the run-out holder still there");
}

/// Puts at `key` the `n`th of the states `renew.lua` must treat as `refresh.lua` does: our
/// writer's id, another's, nothing, a readers' set with and without us, a permit of ours
/// live and run out, a hash, our id with no TTL.
pub(super) async fn set_state(conn: &MultiplexedConnection, key: &str, n: usize) {
    let far = (raw::server_ms(conn).await + 60_000).to_string();
    let past = (raw::server_ms(conn).await - 1_000).to_string();
    match n {
        0 => raw::cmd::<()>(conn, "SET", &[key, ID_A, "PX", "1000"]).await,
        1 => raw::cmd::<()>(conn, "SET", &[key, ID_B, "PX", "1000"]).await,
        2 => {}
        3 => {
            raw::cmd::<i64>(conn, "SADD", &[key, ID_A, ID_B]).await;
            raw::cmd::<i64>(conn, "PEXPIRE", &[key, "1000"]).await;
        }
        4 => {
            raw::cmd::<i64>(conn, "SADD", &[key, ID_B]).await;
            raw::cmd::<i64>(conn, "PEXPIRE", &[key, "1000"]).await;
        }
        5 => {
            raw::cmd::<i64>(conn, "ZADD", &[key, &far, ID_A]).await;
            raw::cmd::<i64>(conn, "PEXPIRE", &[key, "1000"]).await;
        }
        6 => {
            raw::cmd::<i64>(conn, "ZADD", &[key, &past, ID_A, &far, ID_B]).await;
            raw::cmd::<i64>(conn, "PEXPIRE", &[key, "1000"]).await;
        }
        7 => {
            raw::cmd::<i64>(conn, "HSET", &[key, "f", ID_A]).await;
        }
        8 => raw::cmd::<()>(conn, "SET", &[key, ID_A]).await,
        _ => unreachable!(),
    }
}

pub(super) const STATES: usize = 9;

/// What a key holds, for comparing: its type, its members or value, and whether its PTTL
/// reached the TTL.
pub(super) async fn state(conn: &MultiplexedConnection, key: &str) -> (String, Vec<String>, bool) {
    let kind = raw::key_type(conn, key).await;
    let content = match kind.as_str() {
        "string" => raw::get(conn, key).await.into_iter().collect(),
        "set" => raw::members(conn, key).await,
        "zset" => raw::cmd(conn, "ZRANGE", &[key, "0", "-1"]).await,
        "hash" => raw::cmd(conn, "HKEYS", &[key]).await,
        _ => Vec::new(),
    };
    (kind, content, raw::pttl(conn, key).await > 2_000)
}

#[tokio::test]
async fn renew_treats_each_key_exactly_as_refresh_does_whatever_the_writer_hint() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    for hint in ["w", "-"] {
        raw::cmd::<()>(&conn, "FLUSHALL", &[]).await;
        let mut expected = Vec::new();
        for n in 0..STATES {
            set_state(&conn, "k", n).await;
            let reply = refresh(&conn, ID_A, 5000).await;
            expected.push((reply, state(&conn, "k").await));
            raw::cmd::<i64>(&conn, "DEL", &["k"]).await;
        }
        let keys: Vec<String> = (0..STATES).map(|n| format!("b{n}")).collect();
        for (n, key) in keys.iter().enumerate() {
            set_state(&conn, key, n).await;
        }
        let script = scripts::script("renew.lua");
        let mut renew = script.prepare_invoke();
        for key in &keys {
            renew.key(key);
        }
        renew.arg(5000).arg(hint.repeat(STATES));
        for _ in &keys {
            renew.arg(ID_A);
        }
        let before = raw::server_ms(&conn).await;
        let mut replies: Vec<i64> = renew.invoke_async(&mut conn.clone()).await.unwrap();
        let after = raw::server_ms(&conn).await;
        assert_eq!(replies.len(), STATES + 1, "a reply per key, then the time");
        // The last: the server's clock in microseconds, read while the script ran.
        let server_us = replies.pop().unwrap();
        assert!(
            (before * 1000..=(after + 1) * 1000).contains(&server_us),
            "{before} ms <= {server_us} us <= {after} ms"
        );
        for (n, key) in keys.iter().enumerate() {
            let found = (replies[n], state(&conn, key).await);
            assert_eq!(found, expected[n], "state {n}, hint {hint}");
        }
        assert_eq!(
            replies,
            [1, 0, 0, 1, 0, 1, 0, 0, 1],
            "held: ours, ours among readers, our live permit, ours with no TTL"
        );
    }
}

/// `exec.lua` for `id` on lock key `k`, with one command: `INCR data` (`k` marks its key).
async fn exec_incr(conn: &MultiplexedConnection, id: &str) -> Value {
    scripts::script("exec.lua")
        .key("k")
        .key("data")
        .arg(id)
        .arg(1)
        .arg("ak")
        .arg("INCR")
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn exec_runs_its_commands_only_for_the_id_holding_the_lock_in_every_form() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let not_held = Value::Array(vec![Value::Int(0), Value::Int(1)]);
    let ran = |n: i64| Value::Array(vec![Value::Int(1), Value::Int(n)]);
    // Free.
    assert_eq!(exec_incr(&conn, ID_A).await, not_held);
    // A writer's string: its id, another id.
    raw::cmd::<()>(&conn, "SET", &["k", ID_A, "PX", "60000"]).await;
    assert_eq!(exec_incr(&conn, ID_A).await, ran(1));
    assert_eq!(exec_incr(&conn, ID_B).await, not_held);
    // A readers' set: a member, not a member.
    raw::cmd::<()>(&conn, "DEL", &["k"]).await;
    raw::cmd::<i64>(&conn, "SADD", &["k", ID_A]).await;
    assert_eq!(exec_incr(&conn, ID_A).await, ran(2));
    assert_eq!(exec_incr(&conn, ID_B).await, not_held);
    // A semaphore: a deadline after the server's TIME, one before it (left in place).
    raw::cmd::<()>(&conn, "DEL", &["k"]).await;
    let later = (raw::server_ms(&conn).await + 60_000).to_string();
    raw::cmd::<i64>(&conn, "ZADD", &["k", &later, ID_A, "1", ID_B]).await;
    assert_eq!(exec_incr(&conn, ID_A).await, ran(3));
    assert_eq!(exec_incr(&conn, ID_B).await, not_held);
    assert_eq!(raw::cmd::<i64>(&conn, "ZCARD", &["k"]).await, 2);
    // A type this protocol does not use.
    raw::cmd::<()>(&conn, "DEL", &["k"]).await;
    raw::cmd::<i64>(&conn, "HSET", &["k", "f", ID_A]).await;
    assert_eq!(exec_incr(&conn, ID_A).await, not_held);
    assert_eq!(
        raw::get(&conn, "data").await.as_deref(),
        Some("3"),
        "ran 3 times"
    );
    // A failing command: its number and error text, the one before it ran.
    raw::cmd::<()>(&conn, "SET", &["k", ID_A, "PX", "60000"]).await;
    let failed: Value = scripts::script("exec.lua")
        .key("k")
        .key("data")
        .key("k:h")
        .arg(ID_A)
        .arg(1)
        .arg("ak")
        .arg("INCR")
        .arg("ak")
        .arg("LPUSH")
        .invoke_async(&mut conn.clone())
        .await
        .unwrap();
    let Value::Array(items) = failed else {
        panic!("{failed:?}")
    };
    assert_eq!(items[..2], [Value::Int(2), Value::Int(2)]);
    // `ERR Wrong number of args ...` (Redis 6.2: `@user_script: ...: Wrong number of args ...`).
    assert!(
        matches!(&items[2], Value::BulkString(err)
            if String::from_utf8_lossy(err).to_lowercase().contains("wrong number of arg")),
        "{items:?}"
    );
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("4"));
    // Two lock keys: both must be held; the reply names the first that is not.
    raw::cmd::<i64>(&conn, "SADD", &["k2", ID_A]).await;
    let both = |id: &'static str| {
        let conn = conn.clone();
        async move {
            scripts::script("exec.lua")
                .key("k")
                .key("k2")
                .key("data")
                .arg(id)
                .arg(2)
                .arg("ak")
                .arg("INCR")
                .invoke_async::<Value>(&mut conn.clone())
                .await
                .unwrap()
        }
    };
    assert_eq!(both(ID_A).await, ran(5));
    raw::cmd::<i64>(&conn, "SREM", &["k2", ID_A]).await;
    assert_eq!(
        both(ID_A).await,
        Value::Array(vec![Value::Int(0), Value::Int(2)])
    );
    assert_eq!(both(ID_B).await, not_held);
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("5"));
}

/// `force_unlock.lua` on `key`, publishing `ID_B` on its release channel.
async fn force_unlock(conn: &MultiplexedConnection, key: &str) -> Value {
    scripts::script("force_unlock.lua")
        .key(key)
        .key(format!("{key}:fence"))
        .key(format!("{key}:fence-granted"))
        .arg(format!("{key}:released"))
        .arg(ID_B)
        .arg("0")
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn force_unlock_removes_every_holder_of_a_lock_and_refuses_every_other_key() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // Per state of `set_state`: the reply, and whether the key is then gone.
    let expected = [
        (Value::Int(3), true), // a writer's string
        (Value::Int(3), true), // another writer's string
        (Value::Int(0), true), // free
        (Value::Int(3), true), // a readers' set
        (Value::Int(3), true), // another readers' set
        (Value::Int(3), true), // a live permit
        (Value::Int(3), true), // a run-out permit and a live one
        (
            Value::Array(vec![bulk("wrongtype"), bulk("k7"), bulk("hash")]),
            false,
        ),
        (Value::Array(vec![bulk("noexpiry"), bulk("k8")]), false),
    ];
    for (n, (reply, gone)) in expected.into_iter().enumerate() {
        let key = format!("k{n}");
        set_state(&conn, &key, n).await;
        for (suffix, value) in [("fence", "41"), ("lock-intent", ID_A)] {
            let name = format!("{key}:{suffix}");
            raw::cmd::<()>(&conn, "SET", &[&name, value, "PX", "60000"]).await;
        }
        let before = state(&conn, &key).await;
        assert_eq!(force_unlock(&conn, &key).await, reply, "state {n}");
        if gone {
            assert!(!raw::exists(&conn, &key).await, "state {n}");
        } else {
            assert_eq!(state(&conn, &key).await, before, "state {n} untouched");
        }
        // Raised by one when the key was deleted (its TTL kept), else untouched.
        let fence = raw::get(&conn, &format!("{key}:fence")).await;
        let raised = if existed(&reply) && gone { "42" } else { "41" };
        assert_eq!(fence.as_deref(), Some(raised), "state {n}: the fence");
        let fence_ttl = raw::pttl(&conn, &format!("{key}:fence")).await;
        assert!(fence_ttl > 0, "state {n}: the fence's TTL is kept");
        // The granted key marks the forced release with the raised counter, and the
        // counter's TTL.
        let granted = format!("{key}:fence-granted");
        if existed(&reply) && gone {
            assert_eq!(raw::get(&conn, &granted).await.as_deref(), Some("42"));
            let granted_ttl = raw::pttl(&conn, &granted).await;
            assert!(granted_ttl > 0 && granted_ttl <= 60_000, "state {n}");
        } else {
            assert!(!raw::exists(&conn, &granted).await, "state {n}");
        }
        let intent = raw::get(&conn, &format!("{key}:lock-intent")).await;
        assert_eq!(
            intent.as_deref(),
            Some(ID_A),
            "state {n}: the intent is kept"
        );
    }

    // A semaphore whose every permit ran out held nothing, and is cleared all the same.
    let past = (raw::server_ms(&conn).await - 1_000).to_string();
    raw::cmd::<i64>(&conn, "ZADD", &["old", &past, ID_A]).await;
    raw::cmd::<i64>(&conn, "PEXPIRE", &["old", "60000"]).await;
    assert_eq!(force_unlock(&conn, "old").await, Value::Int(2));
    assert!(!raw::exists(&conn, "old").await);
    assert!(
        !raw::exists(&conn, "old:fence").await,
        "an absent fence key is not created"
    );
    assert!(!raw::exists(&conn, "old:fence-granted").await);

    // A fence key that is not a counter (not an integer, or the exhausted 2^53 - 1) is
    // left as it is; the lock is released all the same.
    for (n, fence) in ["not-a-counter", "9007199254740991"]
        .into_iter()
        .enumerate()
    {
        let key = format!("odd{n}");
        set_state(&conn, &key, 0).await;
        let name = format!("{key}:fence");
        raw::cmd::<()>(&conn, "SET", &[&name, fence, "PX", "60000"]).await;
        assert_eq!(force_unlock(&conn, &key).await, Value::Int(3), "{fence}");
        assert!(!raw::exists(&conn, &key).await);
        assert_eq!(raw::get(&conn, &name).await.as_deref(), Some(fence));
        assert!(!raw::exists(&conn, &format!("{key}:fence-granted")).await);
    }
}

/// Whether a `force_unlock.lua` reply says the key existed (an integer other than 0).
fn existed(reply: &Value) -> bool {
    matches!(reply, Value::Int(bits) if *bits != 0)
}

/// `retake.lua` on `k` for `id`, as the writer (`"w"`) or a reader (`"r"`), with the
/// guard's `token`.
async fn retake(conn: &MultiplexedConnection, id: &str, hold: &str, token: u64) -> Value {
    scripts::script("retake.lua")
        .key("k")
        .key("k:lock-intent")
        .key("k:fence")
        .key("k:fence-granted")
        .arg(id)
        .arg(1000)
        .arg(hold)
        .arg(token)
        .arg(FENCE_MS)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

/// Deletes the keys of `k`.
async fn clear(conn: &MultiplexedConnection) {
    raw::cmd::<i64>(
        conn,
        "DEL",
        &["k", "k:lock-intent", "k:fence", "k:fence-granted"],
    )
    .await;
}

#[tokio::test]
async fn retake_takes_a_lock_back_only_while_no_token_past_the_guards_was_granted() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let fence = || async { raw::get(&conn, "k:fence").await };

    // A node restarted empty: taken back as the writer, the counter set to the token
    // (no token minted), both with their TTLs.
    assert_eq!(retake(&conn, ID_A, "w", 100).await, Value::Int(1));
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_A));
    assert!((1..=1000).contains(&raw::pttl(&conn, "k").await));
    assert_eq!(fence().await.as_deref(), Some("100"));
    assert!(raw::pttl(&conn, "k:fence").await > 1000);
    let granted = raw::get(&conn, "k:fence-granted").await;
    assert_eq!(granted.as_deref(), Some("100"));

    // The key expired, the counter at the token (or below it): taken back, the counter
    // raised to the token at most.
    for (counter, after) in [("100", "100"), ("42", "100")] {
        clear(&conn).await;
        raw::cmd::<()>(&conn, "SET", &["k:fence", counter, "PX", "60000"]).await;
        assert_eq!(
            retake(&conn, ID_A, "w", 100).await,
            Value::Int(1),
            "{counter}"
        );
        assert_eq!(fence().await.as_deref(), Some(after));
    }

    // A token granted past the guard's (a forced release marked it, or another holder
    // was granted it there): not taken back, as the writer or a reader, and nothing
    // changed.
    for hold in ["w", "r"] {
        clear(&conn).await;
        raw::cmd::<()>(&conn, "SET", &["k:fence", "101", "PX", "60000"]).await;
        raw::cmd::<()>(&conn, "SET", &["k:fence-granted", "101", "PX", "60000"]).await;
        assert_eq!(
            retake(&conn, ID_A, hold, 100).await,
            Value::Int(0),
            "{hold}"
        );
        assert!(!raw::exists(&conn, "k").await, "{hold}");
        assert_eq!(fence().await.as_deref(), Some("101"));
    }

    // The counter past the token but nothing granted past it (another candidate's first
    // round minted there, won no majority and released): taken back, the counter left
    // where it is and the granted token raised to the guard's.
    for granted in [None, Some("100"), Some("7")] {
        clear(&conn).await;
        raw::cmd::<()>(&conn, "SET", &["k:fence", "104", "PX", "60000"]).await;
        if let Some(granted) = granted {
            raw::cmd::<()>(&conn, "SET", &["k:fence-granted", granted, "PX", "60000"]).await;
        }
        assert_eq!(
            retake(&conn, ID_A, "w", 100).await,
            Value::Int(1),
            "{granted:?}"
        );
        assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_A));
        assert_eq!(fence().await.as_deref(), Some("104"));
        let now_granted = raw::get(&conn, "k:fence-granted").await;
        assert_eq!(now_granted.as_deref(), Some("100"), "{granted:?}");
        assert!(raw::pttl(&conn, "k:fence-granted").await > 0);
    }

    // Another writer holds it: not taken back; readers hold it: not as the writer.
    clear(&conn).await;
    raw::cmd::<()>(&conn, "SET", &["k", ID_B, "PX", "60000"]).await;
    assert_eq!(retake(&conn, ID_A, "w", 100).await, Value::Int(0));
    assert_eq!(retake(&conn, ID_A, "r", 100).await, Value::Int(0));
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_B));
    assert!(!raw::exists(&conn, "k:fence").await, "nothing written");
    clear(&conn).await;
    raw::cmd::<i64>(&conn, "SADD", &["k", ID_B]).await;
    raw::cmd::<i64>(&conn, "PEXPIRE", &["k", "60000"]).await;
    assert_eq!(retake(&conn, ID_A, "w", 100).await, Value::Int(0));

    // As a reader: it joins the other readers, the set's longer PTTL kept.
    assert_eq!(retake(&conn, ID_A, "r", 100).await, Value::Int(1));
    let mut members = raw::members(&conn, "k").await;
    members.sort();
    assert_eq!(members, vec![ID_A.to_owned(), ID_B.to_owned()]);
    assert!(raw::pttl(&conn, "k").await > 1000);

    // A waiting writer's intent does not keep the reader out: it holds a majority of the
    // nodes already (a refresh's take-back, or a top-up of a bare majority).
    clear(&conn).await;
    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", ID_B, "PX", "60000"]).await;
    assert_eq!(retake(&conn, ID_A, "r", 100).await, Value::Int(1));
    assert_eq!(raw::members(&conn, "k").await, vec![ID_A.to_owned()]);
    assert_eq!(
        raw::get(&conn, "k:lock-intent").await.as_deref(),
        Some(ID_B),
        "the writer's intent stays"
    );
    raw::cmd::<i64>(&conn, "DEL", &["k"]).await;
    raw::cmd::<i64>(&conn, "SADD", &["k", ID_A]).await;
    raw::cmd::<i64>(&conn, "PEXPIRE", &["k", "500"]).await;
    assert_eq!(retake(&conn, ID_A, "r", 100).await, Value::Int(1));
    assert!(
        raw::pttl(&conn, "k").await > 500,
        "its PTTL raised to the TTL"
    );

    // The writer's own intent goes with the retake; another's stays.
    clear(&conn).await;
    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", ID_A, "PX", "60000"]).await;
    assert_eq!(retake(&conn, ID_A, "w", 100).await, Value::Int(1));
    assert!(!raw::exists(&conn, "k:lock-intent").await);
    clear(&conn).await;
    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", ID_B, "PX", "60000"]).await;
    assert_eq!(retake(&conn, ID_A, "w", 100).await, Value::Int(1));
    assert_eq!(
        raw::get(&conn, "k:lock-intent").await.as_deref(),
        Some(ID_B)
    );

    // Keys of other types, or without a TTL, are refused and left as they are.
    clear(&conn).await;
    raw::cmd::<i64>(&conn, "HSET", &["k", "f", "v"]).await;
    assert_eq!(
        retake(&conn, ID_A, "w", 100).await,
        Value::Array(vec![bulk("wrongtype"), bulk("k"), bulk("hash")])
    );
    clear(&conn).await;
    raw::cmd::<()>(&conn, "SET", &["k:fence", "x", "PX", "60000"]).await;
    assert_eq!(
        retake(&conn, ID_A, "r", 100).await,
        Value::Array(vec![
            bulk("wrongtype"),
            bulk("k:fence"),
            bulk("non-integer string")
        ])
    );
    clear(&conn).await;
    raw::cmd::<()>(&conn, "SET", &["k", ID_A]).await;
    assert_eq!(
        retake(&conn, ID_A, "w", 100).await,
        Value::Array(vec![bulk("noexpiry"), bulk("k")])
    );
    assert!(!raw::exists(&conn, "k:fence").await, "nothing written");
}

/// `fence.lua` on `k` with `token`.
async fn raise(conn: &MultiplexedConnection, token: u64) -> Value {
    scripts::script("fence.lua")
        .key("k:fence")
        .key("k:fence-granted")
        .arg(token)
        .arg(FENCE_MS)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn fence_raises_the_counter_and_the_granted_token_and_never_lowers_them() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let read = |key: &'static str| {
        let conn = conn.clone();
        async move { raw::get(&conn, key).await }
    };
    // Absent: both set to the token, with the retention.
    assert_eq!(raise(&conn, 50).await, Value::Int(1));
    assert_eq!(read("k:fence").await.as_deref(), Some("50"));
    assert_eq!(read("k:fence-granted").await.as_deref(), Some("50"));
    assert!(raw::pttl(&conn, "k:fence-granted").await > 1000);
    // A counter ahead (first rounds that won nothing): the counter stays, the granted
    // token follows the token.
    raw::cmd::<()>(&conn, "SET", &["k:fence", "70", "PX", "60000"]).await;
    assert_eq!(raise(&conn, 60).await, Value::Int(1));
    assert_eq!(read("k:fence").await.as_deref(), Some("70"));
    assert_eq!(read("k:fence-granted").await.as_deref(), Some("60"));
    // A smaller token lowers neither.
    assert_eq!(raise(&conn, 10).await, Value::Int(1));
    assert_eq!(read("k:fence").await.as_deref(), Some("70"));
    assert_eq!(read("k:fence-granted").await.as_deref(), Some("60"));
    // A granted key that is not a token is refused, and nothing changes.
    raw::cmd::<()>(&conn, "SET", &["k:fence-granted", "x", "PX", "60000"]).await;
    assert_eq!(
        raise(&conn, 90).await,
        Value::Array(vec![
            bulk("wrongtype"),
            bulk("k:fence-granted"),
            bulk("non-integer string")
        ])
    );
    assert_eq!(read("k:fence").await.as_deref(), Some("70"));
    raw::cmd::<()>(&conn, "SET", &["k:fence-granted", "60"]).await;
    assert_eq!(
        raise(&conn, 90).await,
        Value::Array(vec![bulk("noexpiry"), bulk("k:fence-granted")])
    );
    assert_eq!(read("k:fence").await.as_deref(), Some("70"));
}
