//! Event-driven waiting: a release wakes waiters through Pub/Sub (or at once within the
//! process), holders that publish nothing are still noticed, one release wakes one writer
//! or all readers, a lost subscriber connection is survived, and a writer's intent is its
//! own.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::proxy::{Fault, Proxy};
use crate::common::raw::subscribers;
use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, ReadGuard, RwMutex, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A 10 s TTL: a waiter's fallback timer is then 5 s, far longer than anything below
/// waits, so whatever wakes it sooner is the notification.
const TTL: Duration = Duration::from_secs(10);

fn notified(server: &RedisServer, conn: &MultiplexedConnection) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap()
}

/// A mutex with no notifier: its releases publish, but it wakes nobody locally.
fn plain(conn: &MultiplexedConnection) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .build()
        .unwrap()
}

/// Calls of each command since the last `CONFIG RESETSTAT`.
async fn command_calls(conn: &MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = raw::cmd(conn, "INFO", &["commandstats"]).await;
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let calls = rest.split(',').next()?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

async fn evalsha_calls(conn: &MultiplexedConnection) -> u64 {
    let calls = command_calls(conn).await;
    calls.get("evalsha").copied().unwrap_or(0) + calls.get("eval").copied().unwrap_or(0)
}

fn spawn_write(mx: &RwMutex<MultiplexedConnection>) -> JoinHandle<Result<WriteGuard, Error>> {
    let mx = mx.clone();
    tokio::spawn(async move { mx.write().await })
}

fn spawn_read(mx: &RwMutex<MultiplexedConnection>) -> JoinHandle<Result<ReadGuard, Error>> {
    let mx = mx.clone();
    tokio::spawn(async move { mx.read().await })
}

async fn joined<G>(task: JoinHandle<Result<G, Error>>) -> G {
    tokio::time::timeout(LIVENESS, task)
        .await
        .expect("acquired in time")
        .unwrap()
        .unwrap()
}

/// Makes `mx`'s notifier hear one release message on its lock: a waiter after a blocked
/// attempt on a lock whose releases were heard sleeps until woken or its fallback timer,
/// where on a lock never heard from it probes at 750 ms, doubling (`keyspace.rs` and
/// `waiting.rs` test that).
async fn hear_a_release(mx: &RwMutex<MultiplexedConnection>, conn: &MultiplexedConnection) {
    let holder = mx.write().await.unwrap();
    let waiter = spawn_write(mx);
    assert!(eventually(|| async { subscribers(conn, "jobs:released").await == 1 }).await);
    assert!(holder.unlock().await.unwrap());
    drop(joined(waiter).await);
    // The message comes back (through a slow connection too).
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_blocked_waiter_sleeps_and_a_release_elsewhere_wakes_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, &conn);
    hear_a_release(&mx, &conn).await;
    let holder = plain(&server.conn().await).write().await.unwrap();
    let waiter = spawn_write(&mx);
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    tokio::time::sleep(Duration::from_millis(100)).await;

    raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent = evalsha_calls(&conn).await;
    assert!(sent <= 1, "a notified waiter polled: {sent} scripts in 1 s");

    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    let guard = joined(waiter).await;
    let waited = released.elapsed();
    assert!(
        waited < Duration::from_secs(2),
        "woken by the release, not its 5 s timer: {waited:?}"
    );
    drop(guard);
    assert!(
        eventually(|| async { subscribers(&conn, "jobs:released").await == 0 }).await,
        "the subscription is dropped when nobody waits"
    );
}

#[tokio::test]
async fn a_go_release_that_publishes_nothing_is_noticed_by_the_fallback_timer() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(Duration::from_secs(1))
        .notifier(server.client())
        .build()
        .unwrap();
    let waiter = spawn_write(&mx);
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);

    go.unlock("jobs", &go_id).await;
    let unlocked = Instant::now();
    let guard = joined(waiter).await;
    let waited = unlocked.elapsed();
    // The Go key had 60 s left; the timer is at most half the waiter's TTL.
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    assert!(guard.unlock().await.unwrap());
}

/// After one release that came without a message (a Go holder's), the waiters on that
/// lock poll: each later wait behind a Go holder ends within a poll of its release, not
/// at the fallback timer (2 s here: TTL 4 s, the Go key's PTTL 60 s), which ends the first.
#[tokio::test]
async fn after_a_release_without_a_message_the_waiters_on_that_lock_poll() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(Duration::from_secs(4))
        .notifier(server.client())
        .build()
        .unwrap();
    let mut waited = Vec::new();
    for _ in 0..3 {
        let go_id = GoPeer::new_id();
        assert_eq!(go.write("jobs", &go_id, false).await, None);
        let waiter = spawn_write(&mx);
        assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        go.unlock("jobs", &go_id).await;
        let unlocked = Instant::now();
        let guard = joined(waiter).await;
        waited.push(unlocked.elapsed());
        assert!(guard.unlock().await.unwrap());
    }
    // The first wait ends at a probing sleep (750 ms; the Go holder held 300 ms), not
    // at the fallback timer (2 s): the lock was never heard from.
    assert!(
        waited[0] >= Duration::from_millis(100) && waited[0] < Duration::from_millis(1000),
        "the first wait ends at the first probe: {waited:?}"
    );
    for later in &waited[1..] {
        assert!(*later < Duration::from_millis(500), "polled: {waited:?}");
    }
}

#[tokio::test]
async fn a_key_that_expires_is_noticed_at_its_pttl() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    raw::cmd::<()>(&conn, "SET", &["jobs", "crashed-holder", "PX", "800"]).await;
    let started = Instant::now();
    let guard = joined(spawn_write(&notified(&server, &conn))).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(2),
        "woken at the blocker's PTTL, not its 5 s timer: {waited:?}"
    );
    drop(guard);
}

/// A key that expires (a holder that crashed) marks nothing: its waiter slept to the
/// PTTL and was on time. The next waiter on the lock, behind a live holder, still sleeps
/// for the release message (at most a few scripts in a second), and is woken by it.
#[tokio::test]
async fn a_key_that_expired_leaves_the_next_waiter_sleeping_for_the_message() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, &conn);
    raw::cmd::<()>(&conn, "SET", &["jobs", "crashed-holder", "PX", "500"]).await;
    let guard = joined(spawn_write(&mx)).await;
    assert!(guard.unlock().await.unwrap());

    let holder = plain(&server.conn().await).write().await.unwrap();
    let waiter = spawn_write(&mx);
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let scripts = evalsha_calls(&conn).await;
    assert!(scripts <= 3, "{scripts} scripts in 1 s: the waiter polls");
    assert!(holder.unlock().await.unwrap());
    let started = Instant::now();
    let guard = joined(waiter).await;
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "woken by the message"
    );
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn one_release_wakes_one_writer_and_local_writers_go_in_arrival_order() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let holder = plain(&server.conn().await).write().await.unwrap();
    let mx = notified(&server, &conn);
    let mut waiters = Vec::new();
    for _ in 0..8 {
        waiters.push(spawn_write(&mx));
        // Arrival order is the order they join the queue.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
    assert!(holder.unlock().await.unwrap());
    let mut order = Vec::new();
    for (i, waiter) in waiters.into_iter().enumerate() {
        let guard = joined(waiter).await;
        if i == 0 {
            // The unlock, then the first waiter's script: nobody else was woken.
            let sent = evalsha_calls(&conn).await;
            assert!(sent <= 3, "one release set off {sent} scripts");
        }
        order.push(i);
        assert!(guard.unlock().await.unwrap());
    }
    assert_eq!(order, (0..8).collect::<Vec<_>>());
    let calls = evalsha_calls(&conn).await;
    assert!(
        calls <= 8 * 3,
        "8 hand-offs took {calls} scripts (acquire + unlock each, and a few spare)"
    );
}

#[tokio::test]
async fn one_release_wakes_every_waiting_reader_together() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let holder = plain(&server.conn().await).write().await.unwrap();
    let mx = notified(&server, &conn);
    let readers: Vec<_> = (0..8).map(|_| spawn_read(&mx)).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    let mut guards = Vec::new();
    for reader in readers {
        guards.push(joined(reader).await);
    }
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "every reader woken by the release, not by its 5 s timer: {:?}",
        released.elapsed()
    );
    assert_eq!(
        raw::members(&conn, "jobs").await.len(),
        8,
        "all share the lock"
    );
    let sent = evalsha_calls(&conn).await;
    assert!(sent <= 8 + 2, "8 readers took {sent} scripts");
}

#[tokio::test]
async fn a_waiter_survives_its_subscriber_connection_being_killed() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    let waiter = spawn_write(&notified(&server, &conn));
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    tokio::time::sleep(Duration::from_millis(100)).await;

    // A release nobody hears, then the subscriber connection is killed: the waiter must
    // take the loss as a possible release and look again, not sleep out its 5 s timer.
    go.unlock("jobs", &go_id).await;
    let killed: i64 = raw::cmd(&conn, "CLIENT", &["KILL", "TYPE", "pubsub"]).await;
    assert_eq!(killed, 1);
    let started = Instant::now();
    let guard = joined(waiter).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // The hub reconnects: the next waiter is woken by a release again.
    let next = spawn_write(&notified(&server, &conn));
    assert!(
        eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await,
        "resubscribed"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    assert!(guard.unlock().await.unwrap());
    drop(joined(next).await);
    assert!(released.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn waiters_in_one_process_share_one_connection_and_one_subscription() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let holder = plain(&conn).write().await.unwrap();
    // Six mutexes, each given its own client for the same server.
    let waiters: Vec<_> = (0..6)
        .map(|_| spawn_write(&notified(&server, &conn)))
        .collect();
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    let clients: String = raw::cmd(&conn, "CLIENT", &["LIST", "TYPE", "pubsub"]).await;
    assert_eq!(clients.lines().count(), 1, "{clients}");
    // The hub (and its connection) lives on; only the subscription must go.
    let _keep = notified(&server, &conn);
    for waiter in waiters {
        waiter.abort();
    }
    assert!(
        eventually(|| async { subscribers(&conn, "jobs:released").await == 0 }).await,
        "unsubscribed when the last waiter left"
    );
    drop(holder);
}

#[tokio::test]
async fn a_giving_up_writer_leaves_another_writers_intent_in_place() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, &conn);
    let reader = mx.read().await.unwrap();
    // Another waiting writer's intent: a writer of this crate in another process (its
    // id), then a Go writer ("1").
    for other in ["0123456789abcdef0123456789abcdef", "1"] {
        raw::cmd::<()>(&conn, "SET", &["jobs:lock-intent", other, "PX", "60000"]).await;
        let mine = mx.write().timeout(Duration::from_millis(300)).await;
        assert!(matches!(mine, Err(Error::Timeout)), "{mine:?}");
        assert_eq!(
            raw::get(&conn, "jobs:lock-intent").await.as_deref(),
            Some(other),
            "the other writer still waits and keeps its intent"
        );
        assert!(raw::pttl(&conn, "jobs:lock-intent").await > 50_000);
    }

    // Its own intent it clears.
    raw::cmd::<i64>(&conn, "DEL", &["jobs:lock-intent"]).await;
    let mine = mx.write().timeout(Duration::from_millis(300)).await;
    assert!(matches!(mine, Err(Error::Timeout)), "{mine:?}");
    assert!(!raw::exists(&conn, "jobs:lock-intent").await);
    drop(reader);
}

#[tokio::test]
async fn a_writer_asleep_on_a_notification_keeps_its_intent_alive() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(Duration::from_millis(400))
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap();
    let reader = mx.read().await.unwrap();
    let writer = spawn_write(&mx);
    assert!(eventually(|| raw::exists(&conn, "jobs:lock-intent")).await);
    // Five intent TTLs: it is renewed each time the writer's timer wakes it.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        assert!(
            raw::exists(&conn, "jobs:lock-intent").await,
            "intent lapsed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(reader);
    drop(joined(writer).await);
}

#[tokio::test]
async fn a_new_reader_queues_behind_a_waiting_writer_in_the_same_process() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // No intent: only the local queue keeps the new reader behind the writer.
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .notifier(server.client())
        .build()
        .unwrap();
    let reader = mx.read().await.unwrap();
    let writer = spawn_write(&mx);
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let overtaking = mx.read().timeout(Duration::from_millis(300)).await;
    assert!(
        matches!(overtaking, Err(Error::Timeout)),
        "overtook the waiting writer: {overtaking:?}"
    );
    assert!(reader.unlock().await.unwrap());
    drop(joined(writer).await);
}

#[tokio::test]
async fn a_release_in_this_process_wakes_local_waiters_without_a_message() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // The notifier listens on another server, where nothing is published: only the
    // local wake-up can reach the waiter before its 5 s timer.
    let elsewhere = RedisServer::start();
    let econn = elsewhere.conn().await;
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .notifier(elsewhere.client())
        .build()
        .unwrap();
    let holder = mx.write().await.unwrap();
    let waiter = spawn_write(&mx);
    assert!(eventually(|| async { subscribers(&econn, "jobs:released").await == 1 }).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    drop(joined(waiter).await);
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
}

#[tokio::test]
async fn the_message_of_a_local_release_wakes_nobody_twice() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // Messages reach the notifier 150 ms late, long after the local wake-up.
    let proxy = Proxy::start(server.port()).await;
    proxy.set(Fault::Delay {
        base: Duration::from_millis(150),
        jitter: Duration::ZERO,
    });
    // With intent, every attempt is a script, so scripts count attempts.
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .lock_intent(true)
        .notifier(redis::Client::open(proxy.url()).unwrap())
        .build()
        .unwrap();
    // Loads the scripts, and the notifier hears a release on the lock.
    hear_a_release(&mx, &conn).await;
    let holder = mx.write().await.unwrap();
    let first = spawn_write(&mx);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = spawn_write(&mx);
    tokio::time::sleep(Duration::from_millis(400)).await;

    raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
    assert!(holder.unlock().await.unwrap());
    let first = joined(first).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        evalsha_calls(&conn).await,
        2,
        "the unlock and the first waiter's script; the late echo woke the second"
    );
    drop(first);
    drop(joined(second).await);
}

#[tokio::test]
async fn with_its_subscriber_server_unreachable_a_waiter_polls() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // A port nothing listens on: the notifier never connects.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("redis://{}/", closed.local_addr().unwrap());
    drop(closed);
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .notifier(redis::Client::open(dead).unwrap())
        .build()
        .unwrap();
    let holder = plain(&conn).write().await.unwrap();
    let waiter = spawn_write(&mx);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let released = Instant::now();
    assert!(holder.unlock().await.unwrap());
    drop(joined(waiter).await);
    assert!(
        released.elapsed() < Duration::from_millis(500),
        "polled (every 50 ms at most), not left to its 5 s timer: {:?}",
        released.elapsed()
    );
}
