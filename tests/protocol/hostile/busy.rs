//! A server busy in another client's script, and a server too slow to answer before a
//! wait ends: typed errors (BUSY refusals or a timeout) naming the key, at once, locks
//! that work again after SCRIPT KILL, and no intent left behind.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::binaries::server_version;
use crate::common::hostile::{
    assert_every_acquire_refused, assert_names_key, assert_refused, dbsize, try_cmd, PROMPT,
};
use crate::common::{at_once, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Refusal, RwMutex};

// 1. A server busy in another client's script.

/// The setting after which a script makes the server answer BUSY: `busy-reply-threshold`
/// from Redis 7.0, `lua-time-limit` (its alias since) before.
fn busy_threshold() -> &'static str {
    if server_version().at_least(7, 0) {
        "busy-reply-threshold"
    } else {
        "lua-time-limit"
    }
}

/// A connection without a response timeout, to run a script that never ends by itself.
async fn patient_conn(server: &RedisServer) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// Starts an endless Lua loop on its own connection; the handle yields its reply.
async fn start_busy_script(
    server: &RedisServer,
) -> tokio::task::JoinHandle<redis::RedisResult<redis::Value>> {
    let mut busy = patient_conn(server).await;
    tokio::spawn(async move {
        redis::cmd("EVAL")
            .arg("local i = 0 while true do i = i + 1 end")
            .arg(0)
            .query_async(&mut busy)
            .await
    })
}

/// Checks that the busy script ended by SCRIPT KILL, not otherwise.
async fn assert_killed(busy: tokio::task::JoinHandle<redis::RedisResult<redis::Value>>) {
    let killed = at_once(busy).await.unwrap().unwrap_err();
    assert!(killed.to_string().contains("Script killed"), "{killed}");
}

#[tokio::test]
async fn a_busy_script_gives_busy_refusals_and_locks_work_after_script_kill() {
    common::init_tracing();
    let server = RedisServer::start();
    let admin = patient_conn(&server).await;
    raw::cmd::<()>(&admin, "CONFIG", &["SET", busy_threshold(), "100"]).await;
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "busy", Duration::from_millis(400));
    let held = mx.write().key("held").await.unwrap();

    let busy = start_busy_script(&server).await;
    // Past busy-reply-threshold, Redis answers every other command with BUSY.
    let probe = &conn;
    let is_busy = common::eventually(move || async move {
        try_cmd::<String>(probe, "PING", &[])
            .await
            .is_err_and(|err| err.code() == Some("BUSY"))
    })
    .await;
    assert!(is_busy, "the script did not make the server busy");

    // The threshold (100 ms) is below redis-rs's response timeout (500 ms), so a request
    // sent now gets the BUSY reply rather than timing out.
    assert_every_acquire_refused(&mx, "k", Refusal::Busy, "BUSY").await;

    // The held guard cannot refresh (each try gets BUSY and is retried every ttl/8), so it
    // expires at its validity deadline; its release is refused too, and reported.
    at_once(held.cancelled()).await;
    assert_eq!(held.cancel_reason(), Some(CancelReason::Expired));
    let released = at_once(held.unlock()).await.unwrap_err();
    assert_refused(&released, "busy:held", Refusal::Busy, "BUSY");

    let killed: String = raw::cmd(&admin, "SCRIPT", &["KILL"]).await;
    assert_eq!(killed, "OK");
    assert_killed(busy).await;

    // Afterwards everything works again. The guard gave up a few ms before its key
    // expires (the drift margin), so wait for that, then the lock is free.
    let gone = common::eventually(move || async move { !raw::exists(probe, "busy:held").await });
    assert!(gone.await, "the expired lock's key did not expire");
    let again = mx.try_write().key("k").await.unwrap().expect("free");
    let taken = mx.try_write().key("held").await.unwrap().expect("expired");
    assert!(again.unlock().await.unwrap());
    assert!(taken.unlock().await.unwrap());
    assert_eq!(dbsize(&conn).await, 2, "only the two fence keys are left");
}

#[tokio::test]
async fn a_busy_script_past_the_response_timeout_gives_a_timeout_error() {
    let server = RedisServer::start();
    let admin = patient_conn(&server).await;
    // Redis reads nothing from other clients until the script has run this long, so a
    // request sent earlier waits for it: 1 s is past redis-rs's 500 ms response timeout.
    raw::cmd::<()>(&admin, "CONFIG", &["SET", busy_threshold(), "1000"]).await;
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "slow");

    let busy = start_busy_script(&server).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // the script is running
    let started = Instant::now();
    let err = at_once(mx.try_write().key("k")).await.unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Redis { key, source, .. } => {
            assert_eq!(key, "slow:k");
            assert!(source.is_timeout(), "{source:?}");
        }
        other => panic!("expected a timed-out Redis error, got {other:?}"),
    }
    assert_names_key(&err, "slow:k");
    assert!(
        took >= Duration::from_millis(450) && took < PROMPT,
        "{took:?}"
    );

    // SCRIPT KILL, too, is read only once the threshold has passed.
    let killed: String = raw::cmd(&admin, "SCRIPT", &["KILL"]).await;
    assert_eq!(killed, "OK");
    assert_killed(busy).await;

    // The timed-out request did not take the lock (it was answered BUSY in the end), and
    // the same connection works.
    let guard = mx.try_write().key("k").await.unwrap().expect("free");
    assert!(guard.unlock().await.unwrap());
}

// 2. A slow server (found with the 1 MiB keys of `tests/protocol/hostile/names.rs`, whose
// first attempt can outlast a short wait): a wait that ends while its first attempt is in
// flight.

#[tokio::test]
async fn a_wait_that_gives_up_during_its_first_attempt_clears_the_intent_it_sets() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "slow")
        .ttl(Duration::from_secs(10))
        .lock_intent(true)
        .build()
        .unwrap();
    let holder = mx.write().await.unwrap();

    // Frozen, the server reads the attempt only after the wait has timed out and
    // cleaned up; then it runs the attempt (which sets the intent, as the lock is held)
    // and the clean-up after it, in that order, on the one connection.
    server.pause();
    let waited = mx.write().timeout(Duration::from_millis(50)).await;
    server.resume();
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    tokio::time::sleep(Duration::from_millis(200)).await; // both have run
    assert!(
        !raw::exists(&conn, "slow:lock-intent").await,
        "intent left for {} ms, keeping readers out",
        raw::pttl(&conn, "slow:lock-intent").await
    );
    assert!(holder.unlock().await.unwrap());
}
