//! The fencing counter never goes back: tokens keep increasing across unlocks, the lock
//! key's and the fence key's expiry, server restarts without persistence and Go holders
//! (which mint nothing); a counter ahead of the clock counts up, and an exhausted one is
//! refused rather than wrapped.

use std::time::Duration;

use crate::common;
use crate::common::either::Either;
use crate::common::go_peer::GoPeer;
use crate::common::raw::stored_token;
use crate::common::wrong_type::assert_wrong_type;
use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redismutex::{Error, RwMutex};

#[tokio::test]
async fn tokens_increase_across_unlocks_and_the_lock_keys_expiry() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lk", Duration::from_secs(4));
    let mut tokens = Vec::new();

    // Unlocks, by every way of taking the lock.
    for _ in 0..2 {
        for mode in 0..4 {
            let guard = match mode {
                0 => Either::from(mx.write().await.unwrap()),
                1 => Either::from(mx.read().await.unwrap()),
                2 => Either::from(mx.try_write().await.unwrap().expect("free")),
                _ => Either::from(mx.try_read().await.unwrap().expect("free")),
            };
            tokens.push(guard.fencing_token());
            assert!(guard.unlock().await.unwrap());
        }
    }

    // A Go-protocol holder with a 100 ms TTL that never unlocks: its key expires.
    let go = GoPeer::new(server.conn().await, 100);
    assert_eq!(go.write("lk", &GoPeer::new_id(), false).await, None);
    assert!(
        mx.try_write().await.unwrap().is_none(),
        "the Go writer holds it"
    );
    assert!(eventually(|| async { raw::pttl(&conn, "lk").await == -2 }).await);
    let after_go = mx.write().timeout(LIVENESS).await.unwrap();
    tokens.push(after_go.fencing_token());
    assert!(after_go.unlock().await.unwrap());

    // Our own holder whose key expires under it before its next refresh (in 2 s).
    let stalled = mx.write().await.unwrap();
    tokens.push(stalled.fencing_token());
    raw::cmd::<i64>(&conn, "PEXPIRE", &["lk", "30"]).await;
    assert!(eventually(|| async { raw::pttl(&conn, "lk").await == -2 }).await);
    let other = common::mutex(&server.conn().await, "lk", Duration::from_secs(4));
    let next = other.write().timeout(LIVENESS).await.unwrap();
    tokens.push(next.fencing_token());
    assert!(
        !stalled.unlock().await.unwrap(),
        "the stalled holder had lost it"
    );
    assert_eq!(raw::get(&conn, "lk").await.as_deref(), Some(next.id()));
    assert!(next.unlock().await.unwrap());

    assert_eq!(tokens.len(), 11);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens must strictly increase: {tokens:?}"
    );
    assert_eq!(stored_token(&conn, "lk:fence").await, tokens[10]);
}

#[tokio::test]
async fn tokens_increase_after_the_fence_key_expires() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "short")
        .ttl(Duration::from_millis(100))
        .fence_retention(Duration::from_millis(200))
        .build()
        .unwrap();

    let first = mx.write().await.unwrap();
    let before = first.fencing_token();
    assert_eq!(stored_token(&conn, "short:fence").await, before);
    let pttl = raw::pttl(&conn, "short:fence").await;
    assert!((1..=200).contains(&pttl), "fence PTTL {pttl}");
    assert!(first.unlock().await.unwrap());
    assert!(eventually(|| async { raw::pttl(&conn, "short:fence").await == -2 }).await);

    let clock = raw::server_us(&conn).await;
    let reader = mx.read().await.unwrap();
    assert!(
        reader.fencing_token() > before,
        "{} after {before}",
        reader.fencing_token()
    );
    assert!(
        reader.fencing_token() >= clock,
        "with no counter the server clock seeds the token: {} < {clock}",
        reader.fencing_token()
    );
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn tokens_increase_across_a_server_restart_without_persistence() {
    let mut server = RedisServer::start();
    let before = {
        let mx = RwMutex::new(server.conn().await, "rs");
        let guard = mx.write().await.unwrap();
        let token = guard.fencing_token();
        assert!(guard.unlock().await.unwrap());
        token
    };

    server.restart();
    let conn = server.conn().await;
    assert!(
        !raw::exists(&conn, "rs:fence").await,
        "the server came back empty"
    );
    let clock = raw::server_us(&conn).await;
    let mx = RwMutex::new(conn.clone(), "rs");
    let guard = mx.write().await.unwrap();
    assert!(
        guard.fencing_token() > before,
        "{} after {before}",
        guard.fencing_token()
    );
    assert!(guard.fencing_token() >= clock, "the server clock seeds it");
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn go_clients_mint_nothing_and_tokens_after_a_go_holder_are_larger() {
    const KEY: &str = "shared:doc";
    const FENCE: &str = "shared:doc:fence";
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "shared")
        .lock_intent(true)
        .build()
        .unwrap();
    let go = GoPeer::new(server.conn().await, 4000);
    let mut minted = Vec::new();

    let guard = mx.write().key("doc").await.unwrap();
    minted.push(guard.fencing_token());
    assert!(
        go.write(KEY, &GoPeer::new_id(), false).await.is_some(),
        "Rust excludes Go"
    );
    assert!(guard.unlock().await.unwrap());
    let reader = mx.read().key("doc").await.unwrap();
    minted.push(reader.fencing_token());
    assert!(reader.unlock().await.unwrap());

    // A Go writer holds the key: it touches nothing but the lock key, and ours are kept
    // out (a writer's first attempt may count the counter up: that only leaves a gap).
    let fence_before: Vec<u8> = raw::cmd(&conn, "DUMP", &[FENCE]).await;
    let go_id = GoPeer::new_id();
    assert_eq!(go.write(KEY, &go_id, false).await, None);
    let fence_after: Vec<u8> = raw::cmd(&conn, "DUMP", &[FENCE]).await;
    assert_eq!(fence_before, fence_after, "the Go writer minted nothing");
    let counted_before = stored_token(&conn, FENCE).await;
    assert!(mx.try_write().key("doc").await.unwrap().is_none());
    assert!(mx.try_read().key("doc").await.unwrap().is_none());
    let waited = mx
        .write()
        .key("doc")
        .timeout(Duration::from_millis(100))
        .await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    let counted = stored_token(&conn, FENCE).await;
    assert!(
        (counted_before..=counted_before + 2).contains(&counted),
        "only the writers' fast first attempts counted: {counted_before} -> {counted}"
    );
    go.unlock(KEY, &go_id).await;

    let after_go = mx.write().key("doc").await.unwrap();
    assert!(
        minted.iter().all(|&t| t < after_go.fencing_token()),
        "{} after {minted:?}",
        after_go.fencing_token()
    );
    minted.push(after_go.fencing_token());
    assert!(after_go.unlock().await.unwrap());

    // A Go reader beside ours: only ours mints.
    let go_reader = GoPeer::new_id();
    assert_eq!(go.read(KEY, &go_reader).await, None);
    let unchanged = stored_token(&conn, FENCE).await;
    assert_eq!(unchanged, minted[2], "the Go reader minted nothing");
    let _ = counted;
    let reader = mx.read().key("doc").await.unwrap();
    assert!(reader.fencing_token() > minted[2]);
    assert_eq!(stored_token(&conn, FENCE).await, reader.fencing_token());
    go.unlock(KEY, &go_reader).await;
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn a_counter_ahead_of_the_clock_still_counts_up() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ahead = raw::server_us(&conn).await + 3_600_000_000; // an hour ahead
    let ahead_text = ahead.to_string();
    raw::cmd::<()>(&conn, "SET", &["lk:fence", &ahead_text, "PX", "600000"]).await;
    let mx = RwMutex::new(conn.clone(), "lk");

    let writer = mx.write().await.unwrap();
    assert_eq!(
        writer.fencing_token(),
        ahead + 1,
        "last + 1 beats the clock"
    );
    assert!(writer.unlock().await.unwrap());
    let reader = mx.read().await.unwrap();
    assert_eq!(reader.fencing_token(), ahead + 2);
    let pttl = raw::pttl(&conn, "lk:fence").await;
    assert!(pttl > 86_000_000, "the mint renewed the retention: {pttl}");
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn a_counter_at_the_largest_exact_integer_is_refused_not_wrapped() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let max = (1u64 << 53) - 1;
    let below = (max - 1).to_string();
    raw::cmd::<()>(&conn, "SET", &["lk:fence", &below, "PX", "600000"]).await;
    let mx = RwMutex::new(conn.clone(), "lk");
    let last = mx.try_write().await.unwrap().expect("free");
    assert_eq!(last.fencing_token(), max, "the last exact token is minted");
    assert!(last.unlock().await.unwrap());
    assert_wrong_type(mx.try_write().await, "lk:fence", "exhausted counter");
    assert_wrong_type(mx.try_read().await, "lk:fence", "exhausted counter");
    assert_eq!(raw::get(&conn, "lk:fence").await, Some(max.to_string()));
}

#[tokio::test]
async fn a_fence_key_changed_after_it_was_checked_is_still_handled() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "lk");
    // The first acquisition checks the fence key by script; later writers count on it
    // without a script.
    let first = mx.write().await.unwrap().fencing_token();
    let mut last = first;
    for _ in 0..3 {
        let guard = mx.write().await.unwrap();
        assert!(guard.fencing_token() > last);
        last = guard.fencing_token();
        assert_eq!(stored_token(&conn, "lk:fence").await, last);
        assert!(guard.unlock().await.unwrap());
    }

    // Deleted (as by expiry or a restart): the next token starts at the server clock
    // and the counter gets its TTL back.
    raw::cmd::<i64>(&conn, "DEL", &["lk:fence"]).await;
    let clock = raw::server_us(&conn).await;
    let guard = mx.write().await.unwrap();
    assert!(guard.fencing_token() >= clock, "{}", guard.fencing_token());
    assert!(raw::pttl(&conn, "lk:fence").await > 86_000_000);
    assert!(guard.unlock().await.unwrap());

    // Replaced by something that is no counter: a typed error, the value unchanged, no
    // lock left behind.
    raw::cmd::<()>(&conn, "SET", &["lk:fence", "not a token", "PX", "600000"]).await;
    for result in [mx.write().await.map(Some), mx.try_write().await] {
        assert_wrong_type(result, "lk:fence", "non-integer string");
    }
    assert_eq!(
        raw::get(&conn, "lk:fence").await.as_deref(),
        Some("not a token")
    );
    assert!(eventually(|| async { !raw::exists(&conn, "lk").await }).await);
}

#[tokio::test]
async fn a_counter_counted_without_a_script_gets_its_retention_back_in_time() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "lk")
        .ttl(Duration::from_millis(200))
        .fence_retention(Duration::from_secs(2))
        .build()
        .unwrap();
    // A script mints the first token and gives the counter its full retention.
    assert!(mx.write().await.unwrap().unlock().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Counted without a script: the TTL runs on.
    assert!(mx.write().await.unwrap().unlock().await.unwrap());
    let counted = raw::pttl(&conn, "lk:fence").await;
    assert!(
        counted < 1800,
        "the fast path renewed the retention: {counted}"
    );
    // Past half the retention since the script set it, the script mints again.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(mx.write().await.unwrap().unlock().await.unwrap());
    let renewed = raw::pttl(&conn, "lk:fence").await;
    assert!(
        renewed > 1900,
        "the retention ran down under the fast path: {renewed}"
    );
}
