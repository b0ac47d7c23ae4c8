//! `WriteGuard::downgrade`: a write lock becomes a read lock in one step, with no writer in
//! between, in the Go key layout, kept alive and released as a reader's.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::common;
use crate::common::go_peer::GoPeer;
use crate::common::{at_once, eventually, raw, scripts, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, ReadGuard, RwMutex};

const KEY: &str = "doc";

/// Whether the server has run `downgrade.lua` (it caches every script it runs).
async fn downgrade_ran(conn: &MultiplexedConnection) -> bool {
    scripts::cached(&mut conn.clone(), "downgrade.lua").await
}

#[tokio::test]
async fn a_waiting_reader_gets_in_and_a_waiting_writer_stays_out_until_release() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    let mx = common::mutex(&conn, KEY, ttl);
    // The reader waits by notification: its fallback timer is half the TTL (15 s), so
    // only the downgrade's message can let it in within LIVENESS. The writer polls.
    let readers = RwMutex::builder(server.conn().await, KEY)
        .ttl(ttl)
        .notifier(server.client())
        .build()
        .unwrap();
    let writers = common::mutex(&server.conn().await, KEY, ttl);

    let guard = mx.write().await.unwrap();
    let reader = tokio::spawn(async move { readers.read().await });
    let writer = tokio::spawn(async move { writers.write().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!reader.is_finished() && !writer.is_finished());

    let guard: ReadGuard = at_once(guard.downgrade()).await.unwrap();
    let reader = tokio::time::timeout(LIVENESS, reader)
        .await
        .expect("the waiting reader gets in after the downgrade")
        .unwrap()
        .unwrap();
    let mut both = vec![guard.id().to_string(), reader.id().to_string()];
    both.sort();
    assert_eq!(raw::members(&conn, KEY).await, both, "they share one set");
    assert!(reader.fencing_token() > guard.fencing_token());

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "a writer got in beside readers");
    assert!(at_once(reader.unlock()).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "a writer got in while the downgraded guard held the lock"
    );
    assert!(at_once(guard.unlock()).await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, writer)
        .await
        .expect("the writer gets in after the release")
        .unwrap()
        .unwrap();
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
}

#[tokio::test]
async fn no_writer_gets_in_between_the_write_lock_and_the_read_lock() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    let mx = common::mutex(&conn, KEY, ttl);
    // The referee: how many write sections the competitors have entered, and whether
    // one is in its section now.
    let entered = Arc::new(AtomicU64::new(0));
    let writing = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));

    // Two competing writers on connections of their own: one waiting by notification
    // (woken by every release), one trying as fast as it can.
    let waiting = RwMutex::builder(server.conn().await, KEY)
        .ttl(ttl)
        .notifier(server.client())
        .build()
        .unwrap();
    let trying = common::mutex(&server.conn().await, KEY, ttl);
    let section = {
        let (entered, writing) = (Arc::clone(&entered), Arc::clone(&writing));
        move || {
            entered.fetch_add(1, Ordering::SeqCst);
            writing.store(true, Ordering::SeqCst);
            let writing = Arc::clone(&writing);
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                writing.store(false, Ordering::SeqCst);
            }
        }
    };
    let competitors = [
        tokio::spawn({
            let (stop, section) = (Arc::clone(&stop), section.clone());
            async move {
                while !stop.load(Ordering::SeqCst) {
                    let guard = waiting.write().await.unwrap();
                    section().await;
                    guard.unlock().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }),
        tokio::spawn({
            let stop = Arc::clone(&stop);
            async move {
                while !stop.load(Ordering::SeqCst) {
                    if let Some(guard) = trying.try_write().await.unwrap() {
                        section().await;
                        guard.unlock().await.unwrap();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }),
    ];

    for round in 0..60 {
        let guard = at_once(mx.write()).await.unwrap();
        let before = entered.load(Ordering::SeqCst);
        assert!(!writing.load(Ordering::SeqCst), "round {round}: overlap");
        // Let the competitors find the lock taken and wait.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let guard = at_once(guard.downgrade()).await.unwrap();
        assert_eq!(
            entered.load(Ordering::SeqCst),
            before,
            "round {round}: a writer got in between the write lock and the read lock"
        );
        assert!(!writing.load(Ordering::SeqCst), "round {round}: overlap");
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(entered.load(Ordering::SeqCst), before, "round {round}");
        assert!(at_once(guard.unlock()).await.unwrap());
        // Let the competitors in between rounds.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for competitor in competitors {
        at_once(competitor).await.unwrap();
    }
    assert!(
        entered.load(Ordering::SeqCst) >= 5,
        "the competitors took the lock between rounds: {}",
        entered.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn a_downgraded_lock_is_a_readers_set_kept_alive_and_released_as_one() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(300);
    let mx = common::mutex(&conn, KEY, ttl);

    let guard = mx.write().await.unwrap();
    let (id, token) = (guard.id().to_string(), guard.fencing_token());
    let guard: ReadGuard = at_once(guard.downgrade()).await.unwrap();
    assert_eq!((guard.id(), guard.key()), (id.as_str(), KEY));
    assert_eq!(guard.fencing_token(), token, "the same acquisition");
    assert_eq!(raw::key_type(&conn, KEY).await, "set");
    assert_eq!(raw::members(&conn, KEY).await, vec![id.clone()]);
    let pttl = raw::pttl(&conn, KEY).await;
    assert!((1..=300).contains(&pttl), "PTTL {pttl}");

    // 1.2 s, four TTLs: the refresh keeps the set alive.
    for _ in 0..24 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
        assert_eq!(raw::members(&conn, KEY).await, vec![id.clone()]);
    }

    let later = at_once(mx.read()).await.unwrap();
    assert!(later.fencing_token() > token, "later acquisitions count on");
    assert!(at_once(later.unlock()).await.unwrap());
    assert!(
        at_once(guard.unlock()).await.unwrap(),
        "released as a reader"
    );
    assert!(!raw::exists(&conn, KEY).await);
}

#[tokio::test]
async fn a_lost_lock_is_not_held_and_nothing_is_changed() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_secs(30));

    // Deleted.
    let guard = mx.write().await.unwrap();
    let token = guard.cancellation_token().clone();
    raw::cmd::<i64>(&conn, "DEL", &[KEY]).await;
    let err = at_once(guard.downgrade()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NotHeld { key, .. } if key == KEY),
        "{err:?}"
    );
    assert_eq!(err.key(), Some(KEY));
    assert!(err.to_string().contains("\"doc\""), "{err}");
    assert!(token.is_cancelled(), "the token fires");
    assert!(downgrade_ran(&conn).await, "Redis was asked");
    assert!(!raw::exists(&conn, KEY).await, "nothing created");

    // Taken over by another writer: its lock is left alone.
    let guard = mx.write().await.unwrap();
    raw::cmd::<i64>(&conn, "DEL", &[KEY]).await;
    let other = common::mutex(&server.conn().await, KEY, Duration::from_secs(30));
    let other = at_once(other.write()).await.unwrap();
    let err = at_once(guard.downgrade()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NotHeld { key, .. } if key == KEY),
        "{err:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(other.id()));
    assert!(!other.is_cancelled());
    assert!(at_once(other.unlock()).await.unwrap());
}

#[tokio::test]
async fn a_fired_token_is_not_held_and_nothing_is_sent() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_millis(300));

    // Expired: the server froze past the TTL, so the deadline has passed.
    let guard = mx.write().await.unwrap();
    server.pause();
    tokio::time::sleep(Duration::from_millis(450)).await;
    server.resume();
    let err = at_once(guard.downgrade()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NotHeld { key, .. } if key == KEY),
        "{err:?}"
    );

    // Cancelled through the token: released, not downgraded.
    let guard = mx.write().await.unwrap();
    guard.cancellation_token().cancel();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Cancelled));
    let err = at_once(guard.downgrade()).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err:?}");
    assert!(eventually(|| async { !raw::exists(&conn, KEY).await }).await);

    assert!(!downgrade_ran(&conn).await, "nothing was sent");
}

#[tokio::test]
async fn go_readers_share_a_downgraded_lock_and_go_writers_wait() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_secs(4));
    let go = GoPeer::new(server.conn().await, 4000);
    let (go_reader, go_writer) = (GoPeer::new_id(), GoPeer::new_id());

    let guard = mx.write().await.unwrap();
    assert!(
        go.read(KEY, &go_reader).await.is_some(),
        "blocked by a writer"
    );
    let guard = at_once(guard.downgrade()).await.unwrap();
    assert_eq!(go.read(KEY, &go_reader).await, None, "Go reads beside it");
    let mut both = vec![guard.id().to_string(), go_reader.clone()];
    both.sort();
    assert_eq!(raw::members(&conn, KEY).await, both);
    assert_eq!(go.refresh(KEY, &go_reader).await, 1);

    let pttl = go.write(KEY, &go_writer, false).await;
    assert!(
        pttl.is_some_and(|pttl| pttl > 0),
        "Go writer blocked: {pttl:?}"
    );
    assert!(at_once(guard.unlock()).await.unwrap());
    assert_eq!(raw::members(&conn, KEY).await, vec![go_reader.clone()]);
    assert!(
        go.write(KEY, &go_writer, false).await.is_some(),
        "Go reader holds"
    );
    go.unlock(KEY, &go_reader).await;
    assert_eq!(go.write(KEY, &go_writer, false).await, None);
    assert_eq!(
        raw::get(&conn, KEY).await.as_deref(),
        Some(go_writer.as_str())
    );
}

#[tokio::test]
async fn a_downgrade_dropped_after_its_first_poll_leaves_nothing() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_secs(30));
    let guard = mx.write().await.unwrap();
    // Polled once (the downgrade has begun; the request may not be out yet), then dropped.
    let mut downgrade = Box::pin(guard.downgrade());
    let first = std::future::poll_fn(|cx| Poll::Ready(downgrade.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "{first:?}");
    drop(downgrade);
    assert!(
        eventually(|| async { !raw::exists(&conn, KEY).await }).await,
        "left {:?}",
        raw::key_type(&conn, KEY).await
    );
}

/// Runs a downgrade on another key, so the server caches the script: a dropped EVALSHA
/// then runs, with no NOSCRIPT and no EVAL to send after the drop.
async fn warm_up(mx: &RwMutex<MultiplexedConnection>) {
    let warm = mx.write().key("warm").await.unwrap();
    let warm = at_once(warm.downgrade()).await.unwrap();
    assert!(at_once(warm.unlock()).await.unwrap());
}

/// Drops a downgrade while the server is frozen, so its request waits unanswered in the
/// server's socket with the release behind it, then lets the server run both.
async fn drop_a_downgrade_in_flight(server: &RedisServer, mx: &RwMutex<MultiplexedConnection>) {
    let guard = mx.write().await.unwrap();
    server.pause();
    let dropped = tokio::time::timeout(Duration::from_millis(100), guard.downgrade()).await;
    assert!(dropped.is_err(), "{dropped:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.resume();
}

#[tokio::test]
async fn a_downgrade_dropped_in_flight_that_runs_leaves_nothing() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_secs(30));
    warm_up(&mx).await;
    let sadds = raw::calls(&conn, "sadd").await.0;

    drop_a_downgrade_in_flight(&server, &mx).await;
    assert!(
        eventually(|| async { !raw::exists(&conn, KEY).await }).await,
        "left {:?}",
        raw::members(&conn, KEY).await
    );
    assert_eq!(
        raw::calls(&conn, "sadd").await.0,
        sadds + 1,
        "the dropped downgrade ran, before the release"
    );
}

#[tokio::test]
async fn a_downgrade_dropped_in_flight_that_never_runs_leaves_nothing() {
    common::init_tracing();
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_secs(30));

    // Not cached: the dropped EVALSHA gets NOSCRIPT and its EVAL is never sent.
    drop_a_downgrade_in_flight(&server, &mx).await;
    assert!(
        eventually(|| async { !raw::exists(&conn, KEY).await }).await,
        "left {:?}",
        raw::key_type(&conn, KEY).await
    );
    assert_eq!(
        raw::calls(&conn, "sadd").await.0,
        0,
        "the downgrade never ran"
    );
}

/// On a Redis Cluster the downgrade publishes by `SPUBLISH` in the lock key's slot (by
/// `PUBLISH` on Redis 6.2, which has no sharded Pub/Sub): a reader waiting through a
/// cluster notifier (fallback timer 15 s) is woken by it.
#[cfg(feature = "cluster")]
#[tokio::test]
async fn on_a_cluster_a_downgrade_wakes_readers_by_its_message() {
    use crate::common::cluster::{slot, Cluster};
    use crate::common::cluster_pubsub;
    use redismutex::Notifier;

    eprintln!("the downgrade's message by {}", cluster_pubsub::kind());
    common::init_tracing();
    let cluster = Cluster::start();
    let ttl = Duration::from_secs(30);
    let holder = RwMutex::builder(cluster.conn().await, "{dg}")
        .ttl(ttl)
        .build()
        .unwrap();
    let readers = RwMutex::builder(cluster.conn().await, "{dg}")
        .ttl(ttl)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap();

    let guard = holder.write().key("1").await.unwrap();
    let reader = tokio::spawn(async move { readers.read().key("1").await });
    // Subscribed, the reader no longer polls: only the message wakes it before 15 s.
    let channel = "{dg}:1:released";
    let master = cluster.master_of_slot(slot(channel));
    let subscribed = || cluster_pubsub::subscribed(&cluster, master, channel, 1);
    assert!(eventually(subscribed).await, "the reader never subscribed");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!reader.is_finished());
    let guard = at_once(guard.downgrade()).await.unwrap();
    let reader = tokio::time::timeout(LIVENESS, reader)
        .await
        .expect("the waiting reader is woken by the downgrade's message")
        .unwrap()
        .unwrap();
    let members: Vec<String> = redis::cmd("SMEMBERS")
        .arg("{dg}:1")
        .query_async(&mut cluster.conn().await)
        .await
        .unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(at_once(reader.unlock()).await.unwrap());
    assert!(at_once(guard.unlock()).await.unwrap());
}
