//! The Lua scripts in `lua/`, run directly: the wire protocol README documents.

mod common;

use common::{raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

const LOCK: &str = include_str!("../lua/lock.lua");
const RLOCK: &str = include_str!("../lua/rlock.lua");
const REFRESH: &str = include_str!("../lua/refresh.lua");
const UNLOCK: &str = include_str!("../lua/unlock.lua");

const ID_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const ID_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// The fence retention the scripts are called with: a day.
const FENCE_MS: u64 = 86_400_000;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

async fn lock(conn: &MultiplexedConnection, id: &str, ttl: u64, intent: bool) -> Value {
    Script::new(LOCK)
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
    Script::new(RLOCK)
        .key("k")
        .key("k:lock-intent")
        .key("k:fence")
        .arg(id)
        .arg(ttl)
        .arg(FENCE_MS)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

async fn refresh(conn: &MultiplexedConnection, id: &str, ttl: u64) -> i64 {
    Script::new(REFRESH)
        .key("k")
        .arg(id)
        .arg(ttl)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

async fn unlock(conn: &MultiplexedConnection, id: &str, clear_intent: bool) -> i64 {
    let script = Script::new(UNLOCK);
    let mut invocation = script.key("k");
    if clear_intent {
        invocation.key("k:lock-intent");
    }
    invocation
        .arg(id)
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

/// The fencing token of an `{"acquired", token}` reply; panics on any other reply.
fn token(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if items.first() == Some(&bulk("acquired")) => match items.get(1) {
            Some(Value::Int(token)) if *token > 0 => *token,
            other => panic!("acquired without a token: {other:?}"),
        },
        other => panic!("expected acquired, got {other:?}"),
    }
}

fn blocked_pttl(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if items.first() == Some(&bulk("blocked")) => match items.get(1) {
            Some(Value::Int(pttl)) => *pttl,
            other => panic!("blocked without a PTTL: {other:?}"),
        },
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
async fn a_failed_writer_sets_the_intent_without_shortening_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    rlock(&conn, ID_A, 5000).await;

    blocked_pttl(&lock(&conn, ID_B, 9000, true).await);
    assert_eq!(raw::get(&conn, "k:lock-intent").await.as_deref(), Some("1"));
    assert!(raw::pttl(&conn, "k:lock-intent").await > 8000);
    blocked_pttl(&lock(&conn, "cccccccccccccccccccccccccccccccc", 1000, true).await);
    assert!(
        raw::pttl(&conn, "k:lock-intent").await > 8000,
        "a shorter intent shortened it"
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

    assert_eq!(unlock(&conn, ID_A, false).await, 1);
    token(&lock(&conn, ID_B, 9000, true).await);
    assert!(
        !raw::exists(&conn, "k:lock-intent").await,
        "acquiring deletes the intent"
    );
}

#[tokio::test]
async fn unlock_removes_only_its_own_id_and_clears_intent_on_request() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    lock(&conn, ID_A, 5000, false).await;
    assert_eq!(unlock(&conn, ID_B, false).await, 0);
    assert_eq!(raw::get(&conn, "k").await.as_deref(), Some(ID_A));
    assert_eq!(unlock(&conn, ID_A, false).await, 1);
    assert!(!raw::exists(&conn, "k").await);
    assert_eq!(
        unlock(&conn, ID_A, false).await,
        0,
        "a second unlock finds nothing"
    );

    raw::cmd::<()>(&conn, "SET", &["k:lock-intent", "1", "PX", "5000"]).await;
    assert_eq!(unlock(&conn, ID_B, false).await, 0);
    assert!(
        raw::exists(&conn, "k:lock-intent").await,
        "intent kept unless asked"
    );
    assert_eq!(unlock(&conn, ID_B, true).await, 0);
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
