//! The refresher: one task per mutex renews every lock in batches, and gives each guard
//! its own outcome.

use std::future::IntoFuture;
use std::time::Duration;

use crate::common;
use crate::common::{eventually, on_a_stopped_clock, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, RwMutex};

/// Script round trips that ran (`EVALSHA`, and `EVAL` after a `NOSCRIPT`), with the
/// failed `EVALSHA`s left out.
async fn scripts_run(conn: &MultiplexedConnection) -> u64 {
    let (evalsha, noscript) = raw::calls(conn, "evalsha").await;
    let (eval, _) = raw::calls(conn, "eval").await;
    evalsha + eval - noscript
}

/// Three guards acquired at one instant come due together: one script renews all three,
/// and each guard gets what its own key says: the healthy one is extended, the one whose
/// key another holder took and the one whose key ran out in Redis fire as lost, and
/// nothing is sent for them.
#[tokio::test]
async fn one_batch_keeps_the_healthy_lock_and_reports_the_lost_and_the_expired() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let url = server.url();
    let ttl = Duration::from_secs(2);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let holder = on_a_stopped_clock(move || async move {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let mx = common::mutex(&conn, "batch", ttl);
        let (healthy, lost, expired) = tokio::join!(
            mx.write().key("healthy"),
            mx.write().key("lost"),
            mx.write().key("expired"),
        );
        let (healthy, lost, expired) = (healthy.unwrap(), lost.unwrap(), expired.unwrap());
        let before = healthy.valid_until();
        ready_tx.send(()).unwrap();
        go_rx.await.unwrap();
        // The renewals come due: every guard was acquired at this same instant.
        tokio::time::advance(ttl / 2).await;
        let mut spins = 0;
        while !(lost.is_cancelled() && expired.is_cancelled() && healthy.valid_until() > before) {
            spins += 1;
            assert!(spins < 5_000, "no renewal in 5 s");
            std::thread::sleep(Duration::from_millis(1));
            tokio::task::yield_now().await;
        }
        let outcome = (
            healthy.cancel_reason(),
            lost.cancel_reason(),
            expired.cancel_reason(),
            healthy.valid_until() - before,
        );
        done_tx.send(outcome).unwrap();
        // Held until the test has looked at the keys.
        std::thread::sleep(Duration::from_millis(300));
        drop((healthy, lost, expired));
    });
    tokio::task::spawn_blocking(move || ready_rx.recv_timeout(LIVENESS))
        .await
        .unwrap()
        .expect("the three guards were acquired");
    let other = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    raw::cmd::<()>(&conn, "SET", &["batch:lost", other, "PX", "60000"]).await;
    raw::cmd::<i64>(&conn, "PEXPIRE", &["batch:expired", "1"]).await;
    assert!(eventually(|| async { !raw::exists(&conn, "batch:expired").await }).await);
    let scripts = scripts_run(&conn).await;
    let pexpires = raw::calls(&conn, "pexpire").await.0;
    go_tx.send(()).unwrap();

    let (healthy, lost, expired, extended) = tokio::time::timeout(LIVENESS, done_rx)
        .await
        .expect("the renewal was answered")
        .unwrap();
    assert_eq!(healthy, None, "the healthy lock is kept");
    assert_eq!(lost, Some(CancelReason::Lost));
    assert_eq!(
        expired,
        Some(CancelReason::Lost),
        "a key gone from Redis is lost"
    );
    assert_eq!(extended, ttl / 2, "extended from the renewal's send time");
    assert_eq!(
        scripts_run(&conn).await - scripts,
        1,
        "one script renewed all three"
    );
    assert_eq!(
        raw::calls(&conn, "pexpire").await.0 - pexpires,
        1,
        "only the healthy key was extended"
    );
    assert!(raw::pttl(&conn, "batch:healthy").await > 1_500);
    assert_eq!(raw::get(&conn, "batch:lost").await.as_deref(), Some(other));
    assert!(raw::pttl(&conn, "batch:lost").await > 50_000, "untouched");
    assert!(!raw::exists(&conn, "batch:expired").await, "not taken back");
    holder.join().unwrap();
    assert!(eventually(|| async { !raw::exists(&conn, "batch:healthy").await }).await);
}

/// A thousand guards held on one mutex for five TTLs: each renewed once per ttl/2 at
/// most, by far fewer scripts than renewals, all still held; dropped, they leave no lock
/// key behind.
#[tokio::test]
async fn a_thousand_guards_are_renewed_in_batches_and_leave_nothing_when_dropped() {
    const GUARDS: usize = 1_000;
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(1_000);
    let mx = common::mutex(&conn, "many", ttl);
    // In bursts of 100, as a service taking a lock per job of a batch would.
    let mut guards = Vec::with_capacity(GUARDS);
    for burst in 0..GUARDS / 100 {
        let writes = (0..100).map(|n| mx.write().key((burst * 100 + n).to_string()).into_future());
        for guard in futures_util::future::join_all(writes).await {
            guards.push(guard.unwrap());
        }
    }
    let (scripts, pexpires) = (
        scripts_run(&conn).await,
        raw::calls(&conn, "pexpire").await.0,
    );
    let window = ttl * 5 / 2;
    tokio::time::sleep(window).await;
    let renewals = raw::calls(&conn, "pexpire").await.0 - pexpires;
    let script_calls = scripts_run(&conn).await - scripts;
    let halves = window.as_secs_f64() / (ttl / 2).as_secs_f64();
    let per_guard = renewals as f64 / GUARDS as f64 / halves;
    println!("{renewals} renewals by {script_calls} scripts; {per_guard:.3} per guard per ttl/2");
    assert!(
        (0.6..=1.01).contains(&per_guard),
        "{per_guard} renewals per guard per ttl/2"
    );
    assert!(
        script_calls * 10 <= renewals,
        "{script_calls} scripts for {renewals} renewals"
    );
    for guard in &guards {
        assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    }
    drop(guards);
    let left = || async {
        let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["many:*"]).await;
        keys.into_iter()
            .filter(|key| !key.ends_with(":fence"))
            .count()
    };
    assert!(
        eventually(|| async { left().await == 0 }).await,
        "{} lock keys left",
        left().await
    );
}

/// A token cancelled from outside right after the acquire, before the refresher watches
/// it, still has its lock released (within a few milliseconds, not a TTL).
#[tokio::test]
async fn a_token_cancelled_right_after_the_acquire_releases_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "young", Duration::from_secs(30));
    let parent = tokio_util::sync::CancellationToken::new();
    let guard = mx.write().parent(parent.clone()).await.unwrap();
    parent.cancel();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::ParentCancelled));
    let other = common::mutex(&server.conn().await, "young", Duration::from_secs(30));
    let again = tokio::time::timeout(Duration::from_secs(1), other.write())
        .await
        .expect("released well before the TTL")
        .unwrap();
    assert!(again.unlock().await.unwrap());
    // The guard, kept all along, reports what the release found.
    drop(guard);

    let guard = mx.write().await.unwrap();
    guard.cancellation_token().cancel();
    assert!(eventually(|| async { !raw::exists(&conn, "young").await }).await);
    assert!(
        guard.unlock().await.unwrap(),
        "what the refresher's release found: held"
    );
}

/// One mutex used from two runtimes: each runtime's guards are kept by a refresher task
/// on that runtime, so the first runtime shutting down does not stop the other's
/// renewals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_shutting_down_leaves_the_other_runtimes_guards_kept() {
    let server = RedisServer::start();
    let url = server.url();
    let ttl = Duration::from_millis(400);
    let client = redis::Client::open(url).unwrap();
    let mx = RwMutex::builder(
        client.get_connection_manager().await.unwrap(),
        "two-runtimes",
    )
    .ttl(ttl)
    .build()
    .unwrap();
    let elsewhere = mx.clone();
    let other_runtime = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let guard = elsewhere.write().key("a").await.unwrap();
            tokio::time::sleep(ttl).await;
            assert!(!guard.is_cancelled());
            std::mem::forget(guard);
        });
        // The runtime shuts down here with its refresher.
    });
    tokio::task::spawn_blocking(move || other_runtime.join())
        .await
        .unwrap()
        .unwrap();
    let guard = mx.write().key("b").await.unwrap();
    tokio::time::sleep(ttl * 3).await;
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(guard.unlock().await.unwrap());
}

/// The refresher's task runs while its mutex holds locks and ends by itself a few seconds
/// after the last one goes; the next lock starts it again.
#[tokio::test]
async fn the_refresher_task_ends_when_nothing_is_held_and_comes_back() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let mx = common::mutex(&conn, "idle", Duration::from_secs(2));
    let before = alive();
    let guard = mx.write().await.unwrap();
    assert_eq!(alive(), before + 1, "one refresher task");
    let second = mx.write().key("b").await.unwrap();
    assert_eq!(alive(), before + 1, "still one for two guards");
    assert!(guard.unlock().await.unwrap() && second.unlock().await.unwrap());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        eventually(|| async { alive() == before }).await,
        "{} tasks alive, {before} before",
        alive()
    );
    let again = mx.write().await.unwrap();
    assert_eq!(alive(), before + 1, "started again");
    assert!(again.unlock().await.unwrap());
}
