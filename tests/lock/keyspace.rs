//! Waiting on keyspace notifications (`Notifier::keyspace_events`) on one server: a Go
//! holder's silent `DEL`, or its readers' last `SREM`, wakes the waiter at once; a
//! release by this crate (which publishes and deletes) still wakes once; a downgrade,
//! which publishes without deleting, still wakes readers; and a server with them off
//! is reported by `check_keyspace_events`, while its waiters still get in by their timers.
//! Without keyspace events, a waiter on a lock never heard from probes at short,
//! doubling sleeps (its first hand-off behind a Go holder, and what that costs).

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::proxy::{Fault, Proxy};
use crate::common::raw::{self, subscribers};
use crate::common::{eventually, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, Notifier, RwMutex, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A 10 s TTL: a waiter's fallback timer is then 5 s, and the first sleep on a key never
/// heard from is still 750 ms or more, so a wake-up within [`PROMPT`] of a release is
/// the keyspace notification.
const TTL: Duration = Duration::from_secs(10);
/// How soon after a release a waiter woken by its notification has the lock.
const PROMPT: Duration = Duration::from_millis(150);
/// How long the Go holders hold before they release.
const GO_HOLDS: Duration = Duration::from_millis(300);

/// A server with keyspace notifications set as each test needs them (never the default).
async fn server(flags: &str) -> (RedisServer, MultiplexedConnection) {
    let server = RedisServer::start();
    let conn = server.conn().await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "notify-keyspace-events", flags]).await;
    (server, conn)
}

fn keyspace_notifier(client: redis::Client) -> Notifier {
    Notifier::new(client).keyspace_events()
}

fn mutex(conn: &MultiplexedConnection, notifier: Notifier) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .lock_intent(true)
        .notifier(notifier)
        .build()
        .unwrap()
}

fn spawn_write(mx: &RwMutex<MultiplexedConnection>) -> JoinHandle<(Instant, WriteGuard)> {
    let mx = mx.clone();
    tokio::spawn(async move {
        let guard = mx.write().await.unwrap();
        (Instant::now(), guard)
    })
}

async fn joined(task: JoinHandle<(Instant, WriteGuard)>) -> (Instant, WriteGuard) {
    tokio::time::timeout(LIVENESS, task)
        .await
        .expect("acquired in time")
        .unwrap()
}

/// Waits until one connection listens on both the release and the keyspace channel of
/// the lock key `jobs`.
async fn subscribed_to_both(conn: &MultiplexedConnection) {
    assert!(
        eventually(|| async {
            subscribers(conn, "jobs:released").await == 1
                && subscribers(conn, "__keyspace@0__:jobs").await == 1
        })
        .await,
        "subscribed to jobs:released and __keyspace@0__:jobs"
    );
}

async fn evalsha_calls(conn: &MultiplexedConnection) -> u64 {
    raw::calls(conn, "evalsha").await.0 + raw::calls(conn, "eval").await.0
}

#[tokio::test]
async fn a_go_writers_silent_del_wakes_a_keyspace_waiter_at_once() {
    let (server, conn) = server("Kgx").await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    let notifier = keyspace_notifier(server.client());
    notifier.check_keyspace_events().await.unwrap();
    let waiter = spawn_write(&mutex(&conn, notifier));
    subscribed_to_both(&conn).await;

    tokio::time::sleep(GO_HOLDS).await;
    go.unlock("jobs", &go_id).await;
    let released = Instant::now();
    let (acquired, guard) = joined(waiter).await;
    let waited = acquired.saturating_duration_since(released);
    assert!(waited < PROMPT, "in {waited:?} after the Go DEL");
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn the_last_go_readers_srem_wakes_a_keyspace_writer_and_the_first_does_not() {
    let (server, conn) = server("Kgx").await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let (first, last) = (GoPeer::new_id(), GoPeer::new_id());
    assert_eq!(go.read("jobs", &first).await, None);
    assert_eq!(go.read("jobs", &last).await, None);
    let waiter = spawn_write(&mutex(&conn, keyspace_notifier(server.client())));
    subscribed_to_both(&conn).await;

    tokio::time::sleep(GO_HOLDS).await;
    go.unlock("jobs", &first).await;
    tokio::time::sleep(GO_HOLDS).await;
    assert!(!waiter.is_finished(), "one Go reader still holds the lock");
    go.unlock("jobs", &last).await;
    let released = Instant::now();
    let (acquired, guard) = joined(waiter).await;
    let waited = acquired.saturating_duration_since(released);
    assert!(waited < PROMPT, "in {waited:?} after the last SREM");
    assert!(guard.unlock().await.unwrap());
}

/// A local release wakes the first waiter at once; its key's `del` event and its
/// message come back 150 ms later (a slow subscriber connection), long after the first
/// waiter took the lock: neither may wake the second.
#[tokio::test]
async fn a_local_release_with_its_del_and_its_message_wakes_nobody_twice() {
    let (server, conn) = server("Kgx").await;
    let proxy = Proxy::start(server.port()).await;
    proxy.set(Fault::Delay {
        base: Duration::from_millis(150),
        jitter: Duration::ZERO,
    });
    let mx = mutex(
        &conn,
        keyspace_notifier(redis::Client::open(proxy.url()).unwrap()),
    );
    drop(joined(spawn_write(&mx)).await); // loads the scripts
    let holder = mx.write().await.unwrap();
    let first = spawn_write(&mx);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = spawn_write(&mx);
    subscribed_to_both(&conn).await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
    assert!(holder.unlock().await.unwrap());
    let first = joined(first).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        evalsha_calls(&conn).await,
        2,
        "the unlock and the first waiter's script; the late del and echo woke the second"
    );
    drop(first);
    drop(joined(second).await);
}

/// Scripts per acquisition of four tasks taking turns on one lock, with a notifier
/// made by `notifier`.
async fn scripts_per_acquisition(conn: &MultiplexedConnection, notifier: Notifier) -> f64 {
    const TASKS: usize = 4;
    const TURNS: usize = 25;
    let mx = mutex(conn, notifier);
    drop(mx.write().await.unwrap()); // loads the scripts
    raw::cmd::<()>(conn, "CONFIG", &["RESETSTAT"]).await;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let mx = mx.clone();
            tokio::spawn(async move {
                for _ in 0..TURNS {
                    let guard = mx.write().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    assert!(guard.unlock().await.unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(LIVENESS * 4, task)
            .await
            .expect("every turn taken in time")
            .unwrap();
    }
    // Each turn's unlock is a script too.
    evalsha_calls(conn).await as f64 / (TASKS * TURNS) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keyspace_events_a_contended_lock_sends_no_more_scripts_than_without() {
    let (server, conn) = server("Kgx").await;
    let without = scripts_per_acquisition(&conn, Notifier::new(server.client())).await;
    let with = scripts_per_acquisition(&conn, keyspace_notifier(server.client())).await;
    // A del that woke on its own would add about one script per turn.
    assert!(
        with <= without * 1.2 + 0.1,
        "{with:.2} scripts per acquisition with keyspace events, {without:.2} without"
    );
}

#[tokio::test]
async fn a_downgrade_which_publishes_without_a_del_still_wakes_readers() {
    let (server, conn) = server("Kgx").await;
    let mx = mutex(&conn, keyspace_notifier(server.client()));
    let writer = mx.write().await.unwrap();
    let reader = {
        let mx = mx.clone();
        tokio::spawn(async move {
            let guard = mx.read().await.unwrap();
            (Instant::now(), guard)
        })
    };
    subscribed_to_both(&conn).await;
    tokio::time::sleep(GO_HOLDS).await;
    let downgraded = Instant::now();
    let shared = writer.downgrade().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(LIVENESS, reader)
        .await
        .expect("read in time")
        .unwrap();
    let waited = acquired.saturating_duration_since(downgraded);
    assert!(waited < PROMPT, "in {waited:?} after the downgrade");
    drop(guard);
    drop(shared);
}

#[tokio::test]
async fn with_keyspace_events_off_the_check_names_the_node_and_the_waiter_gets_in_by_its_timer() {
    let (server, conn) = server("").await;
    let notifier = keyspace_notifier(server.client());
    let err = notifier.check_keyspace_events().await.unwrap_err();
    match &err {
        Error::KeyspaceEvents { node, reason, .. } => {
            assert!(node.contains(&server.port().to_string()), "{node}");
            assert!(reason.contains("notify-keyspace-events Kgx"), "{reason}");
        }
        other => panic!("expected KeyspaceEvents, got {other:?}"),
    }
    assert!(
        err.to_string().contains(&server.port().to_string()),
        "{err}"
    );

    let go = GoPeer::new(conn.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(Duration::from_secs(2))
        .notifier(notifier)
        .build()
        .unwrap();
    let waiter = spawn_write(&mx);
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    assert_eq!(
        subscribers(&conn, "__keyspace@0__:jobs").await,
        0,
        "no keyspace subscription on a server without them"
    );
    go.unlock("jobs", &go_id).await;
    let (_, guard) = joined(waiter).await;
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn a_keyspace_notifier_and_a_plain_one_for_one_server_are_kept_apart() {
    let (server, conn) = server("Kgx").await;
    let plain = Notifier::new(server.client());
    let keyspace = keyspace_notifier(server.client());
    let again = Notifier::new(server.client()).keyspace_events();
    // Two waiters through the two keyspace handles share one connection; the plain
    // notifier has its own, subscribed to the release channel alone.
    let holder = mutex(&server.conn().await, plain.clone())
        .write()
        .await
        .unwrap();
    let waiters = [keyspace, again, plain].map(|notifier| {
        let mx = mutex(&conn, notifier);
        tokio::spawn(async move { drop(mx.write().await.unwrap()) })
    });
    assert!(
        eventually(|| async {
            subscribers(&conn, "jobs:released").await == 2
                && subscribers(&conn, "__keyspace@0__:jobs").await == 1
        })
        .await,
        "two connections on the release channel, one on the keyspace channel"
    );
    assert!(holder.unlock().await.unwrap());
    for waiter in waiters {
        tokio::time::timeout(LIVENESS, waiter)
            .await
            .expect("acquired in time")
            .unwrap();
    }
}

/// Without keyspace events, a waiter on a lock this process never heard a release of
/// sleeps 750 ms, then doubling, instead of its fallback timer (5 s here): behind a Go
/// holder that releases after 300 ms it gets in at its first probe.
#[tokio::test]
async fn without_keyspace_events_the_first_wait_behind_a_silent_holder_ends_at_a_probe() {
    let (server, conn) = server("").await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    let waiter = spawn_write(&mutex(&conn, Notifier::new(server.client())));
    assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 1 }).await);
    tokio::time::sleep(GO_HOLDS).await;
    go.unlock("jobs", &go_id).await;
    let released = Instant::now();
    let (acquired, guard) = joined(waiter).await;
    let waited = acquired.saturating_duration_since(released);
    assert!(
        waited < Duration::from_secs(1),
        "in {waited:?} after the Go DEL, not at the 5 s timer"
    );
    assert!(guard.unlock().await.unwrap());
}

/// What probing costs: behind a holder of this crate on a lock never heard from, a
/// waiter blocked 2 s sends its attempt, its attempt once subscribed and one probe (at
/// 0.75 s; the next would be at 2.25 s); once it heard that lock's release, a second
/// such wait sends the two attempts alone.
#[tokio::test]
async fn probing_a_lock_never_heard_from_costs_one_script_in_2_s_and_stops_once_heard() {
    let (server, conn) = server("").await;
    let mx = mutex(&conn, Notifier::new(server.client()));
    let other = mutex(&server.conn().await, Notifier::new(server.client()));
    drop(other.write().await.unwrap()); // loads the scripts
    let mut sent = Vec::new();
    for _ in 0..2 {
        let holder = other.write().await.unwrap();
        raw::cmd::<()>(&conn, "CONFIG", &["RESETSTAT"]).await;
        let waiter = spawn_write(&mx);
        tokio::time::sleep(Duration::from_secs(2)).await;
        sent.push(evalsha_calls(&conn).await);
        assert!(holder.unlock().await.unwrap());
        let (_, guard) = joined(waiter).await;
        assert!(guard.unlock().await.unwrap());
        // The next wait starts with the lock free again.
        assert!(eventually(|| async { subscribers(&conn, "jobs:released").await == 0 }).await);
    }
    assert!(
        sent[0] == 3,
        "first wait: {} scripts in 2 s (two attempts and one probe)",
        sent[0]
    );
    assert!(sent[1] <= 2, "second wait: {} scripts in 2 s", sent[1]);
}
