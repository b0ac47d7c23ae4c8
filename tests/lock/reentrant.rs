//! Reentrancy (`Builder::reentrant`): the task that holds a lock takes it again as a
//! nested guard; other tasks, and every task without the option, wait as usual.

use std::time::Duration;

use crate::common;
use crate::common::{at_once, eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Guard, ReadGuard, RwMutex};
use tokio_util::sync::CancellationToken;

const TTL: Duration = Duration::from_secs(30);

fn reentrant(conn: &MultiplexedConnection, ttl: Duration) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), "jobs")
        .ttl(ttl)
        .reentrant(true)
        .build()
        .unwrap()
}

/// A plain mutex on the same locks, over a connection of its own.
async fn stranger(server: &RedisServer) -> RwMutex<MultiplexedConnection> {
    common::mutex(&server.conn().await, "jobs", TTL)
}

/// Commands the server has processed so far (this `INFO` included).
async fn commands(conn: &MultiplexedConnection) -> u64 {
    let info: String = raw::cmd(conn, "INFO", &["stats"]).await;
    info.lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("INFO stats has total_commands_processed")
}

/// A nested guard shares its outer guard's acquisition. (Its kind, which the request
/// asked for, is its type: a `ReadGuard` from `read`, a `WriteGuard` from `write`.)
fn assert_nested(nested: &impl Guard, outer: &impl Guard) {
    assert_eq!(nested.key(), outer.key());
    assert_eq!(nested.id(), outer.id(), "one acquisition");
    assert_eq!(nested.fencing_token(), outer.fencing_token());
    assert_eq!(nested.valid_until(), outer.valid_until());
    assert!(!nested.is_cancelled());
}

#[tokio::test]
async fn the_holding_task_nests_write_in_write_read_in_write_and_read_in_read() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    let outer = mx.write().key("w").await.unwrap();
    let fence = raw::stored_token(&conn, "jobs:w:fence").await;
    let before = commands(&conn).await;
    let write = at_once(mx.write().key("w")).await.unwrap();
    let read = at_once(mx.read().key("w")).await.unwrap();
    let try_write = at_once(mx.try_write().key("w")).await.unwrap().unwrap();
    let try_read = at_once(mx.try_read().key("w")).await.unwrap().unwrap();
    // The rules look at the outermost guard: a write inside a read inside a write nests.
    let write_in_read = at_once(mx.write().key("w")).await.unwrap();
    assert_eq!(
        commands(&conn).await,
        before + 1,
        "nesting sent nothing to Redis (only the second INFO counts)"
    );
    assert_nested(&write, &outer);
    assert_nested(&read, &outer);
    assert_nested(&try_write, &outer);
    assert_nested(&try_read, &outer);
    assert_nested(&write_in_read, &outer);
    assert_eq!(
        raw::key_type(&conn, "jobs:w").await,
        "string",
        "still a write lock"
    );
    assert_eq!(raw::get(&conn, "jobs:w").await.as_deref(), Some(outer.id()));
    assert_eq!(raw::stored_token(&conn, "jobs:w:fence").await, fence);
    assert!(format!("{write:?}").contains("nested: true"), "{write:?}");
    assert!(format!("{outer:?}").contains("nested: false"), "{outer:?}");

    let outer = mx.read().key("r").await.unwrap();
    let read = at_once(mx.read().key("r")).await.unwrap();
    let try_read = at_once(mx.try_read().key("r")).await.unwrap().unwrap();
    assert_nested(&read, &outer);
    assert_nested(&try_read, &outer);
    assert_eq!(raw::key_type(&conn, "jobs:r").await, "set");
    assert_eq!(raw::members(&conn, "jobs:r").await, [outer.id()]);
}

#[tokio::test]
async fn a_nested_guard_going_keeps_the_lock_and_the_outer_guard_going_ends_them_all() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);
    let other = stranger(&server).await;

    let outer = mx.write().await.unwrap();
    let unlocked = mx.write().await.unwrap();
    let dropped = mx.read().await.unwrap();
    let cancelled = mx.try_write().await.unwrap().unwrap();
    assert!(unlocked.unlock().await.unwrap(), "held: Ok(true)");
    drop(dropped);
    cancelled.cancellation_token().cancel();
    assert_eq!(cancelled.cancel_reason(), Some(CancelReason::Cancelled));
    assert!(!outer.is_cancelled());
    assert_eq!(
        outer.cancel_reason(),
        None,
        "the outer status records nothing"
    );
    assert!(other.try_write().await.unwrap().is_none(), "still held");
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(outer.id()));

    let nested = mx.read().await.unwrap();
    let watch = nested.cancellation_token().clone();
    drop(outer);
    let taken = tokio::time::timeout(LIVENESS, other.write()).await;
    assert!(matches!(taken, Ok(Ok(_))), "{taken:?}");
    assert!(
        watch.is_cancelled(),
        "the outer guard going fired the nested token"
    );
    assert_eq!(nested.cancel_reason(), Some(CancelReason::Cancelled));
    assert!(!nested.unlock().await.unwrap(), "not held: Ok(false)");
    drop(taken);

    let outer = mx.write().key("u").await.unwrap();
    let nested = mx.read().key("u").await.unwrap();
    assert!(outer.unlock().await.unwrap());
    assert!(nested.is_cancelled());
    assert!(!raw::exists(&conn, "jobs:u").await);
    assert!(!nested.unlock().await.unwrap());
}

#[tokio::test]
async fn a_write_inside_a_read_is_refused_at_once() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    let outer = mx.read().key("r").await.unwrap();
    let nested_read = mx.read().key("r").await.unwrap();
    // No timeout: without the refusal this waits for its own task forever.
    let refused = [
        at_once(mx.write().key("r")).await.map(Some),
        at_once(mx.try_write().key("r")).await,
    ];
    for refused in refused {
        let err = refused.unwrap_err();
        assert!(
            matches!(err, Error::WouldDeadlock { ref key, .. } if key == "jobs:r"),
            "{err:?}"
        );
        assert_eq!(err.key(), Some("jobs:r"));
        let text = err.to_string();
        assert!(
            text.contains("\"jobs:r\"") && text.contains("wait for itself"),
            "{text}"
        );
    }
    assert!(!outer.is_cancelled() && !nested_read.is_cancelled());
    assert_eq!(raw::members(&conn, "jobs:r").await, [outer.id()]);
    assert!(!raw::exists(&conn, "jobs:r:lock-intent").await);
}

#[tokio::test]
async fn another_task_on_the_same_mutex_is_not_the_holder() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    let outer = mx.write().key("w").await.unwrap();
    let (tried, waited) = tokio::spawn({
        let mx = mx.clone();
        async move {
            let tried = mx.try_write().key("w").await.map(|guard| guard.is_some());
            let waited = mx.read().key("w").timeout(Duration::from_millis(200)).await;
            (tried, waited)
        }
    })
    .await
    .unwrap();
    assert!(matches!(tried, Ok(false)), "{tried:?}");
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(!outer.is_cancelled());

    // Readers share the lock, each under its own id; only the holder's write is refused.
    let outer = mx.read().key("r").await.unwrap();
    let (read, tried) = tokio::spawn({
        let mx = mx.clone();
        async move {
            let tried = mx.try_write().key("r").await.map(|guard| guard.is_some());
            let read = mx.read().key("r").await.unwrap();
            (read, tried)
        }
    })
    .await
    .unwrap();
    assert_ne!(read.id(), outer.id(), "acquired, not nested");
    assert!(matches!(tried, Ok(false)), "waits, not refused: {tried:?}");
    let mut both = vec![outer.id().to_owned(), read.id().to_owned()];
    both.sort();
    assert_eq!(raw::members(&conn, "jobs:r").await, both);
}

#[tokio::test]
async fn without_the_option_the_holding_task_waits_for_itself() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let plain = RwMutex::builder(conn.clone(), "jobs").ttl(TTL);
    assert!(
        format!("{plain:?}").contains("reentrant: false"),
        "{plain:?}"
    );
    let plain = plain.build().unwrap();
    assert!(!plain.reentrant());
    let on = RwMutex::builder(conn.clone(), "jobs").reentrant(true);
    assert!(format!("{on:?}").contains("reentrant: true"), "{on:?}");
    assert!(on.build().unwrap().reentrant());

    let outer = plain.write().await.unwrap();
    assert!(plain.try_write().await.unwrap().is_none());
    assert!(plain.try_read().await.unwrap().is_none());
    let waited = plain.write().timeout(Duration::from_millis(200)).await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(!outer.is_cancelled());
}

#[test]
fn outside_any_task_the_thread_is_the_holder() {
    let server = RedisServer::start();
    let runtimes = [
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    ];
    for (round, runtime) in runtimes.into_iter().enumerate() {
        runtime.block_on(async {
            assert!(tokio::task::try_id().is_none(), "not a spawned task");
            let conn = server.conn().await;
            let mx = reentrant(&conn, TTL);
            let key = format!("b{round}");
            let outer = mx.write().key(&key).await.unwrap();
            let nested = at_once(mx.write().key(&key)).await.unwrap();
            assert_nested(&nested, &outer);
            // On the current-thread runtime this task runs on the very same thread.
            let tried = tokio::spawn({
                let (mx, key) = (mx.clone(), key.clone());
                async move { mx.try_write().key(key).await.map(|guard| guard.is_some()) }
            })
            .await
            .unwrap();
            assert!(matches!(tried, Ok(false)), "round {round}: {tried:?}");
        });
    }
}

#[tokio::test]
async fn a_guard_counts_for_the_task_that_acquired_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    // Acquired here, moved to another task: this body can still nest, that task cannot.
    let outer = mx.write().await.unwrap();
    let id = outer.id().to_owned();
    let tried = tokio::spawn({
        let mx = mx.clone();
        async move {
            let tried = mx.try_write().await.map(|guard| guard.is_some());
            (outer, tried)
        }
    });
    let (outer, tried) = tried.await.unwrap();
    assert!(matches!(tried, Ok(false)), "{tried:?}");
    let nested = at_once(mx.write()).await.unwrap();
    assert_eq!(nested.id(), id);
    drop((nested, outer));

    // Acquired by a task and handed back: this body is not its holder.
    let outer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().key("t").await }
    })
    .await
    .unwrap()
    .unwrap();
    assert!(mx.try_write().key("t").await.unwrap().is_none());
    assert!(!outer.is_cancelled());
}

#[tokio::test]
async fn after_the_outer_token_fired_a_request_acquires_anew() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    let old = mx.write().await.unwrap();
    old.cancellation_token().cancel();
    let fresh = at_once(mx.write()).await.unwrap();
    assert_ne!(fresh.id(), old.id(), "acquired, not nested");
    assert!(fresh.fencing_token() > old.fencing_token());
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(fresh.id()));
    // The old guard going leaves the new guard's entry alone.
    drop(old);
    let nested = at_once(mx.try_write()).await.unwrap().unwrap();
    assert_nested(&nested, &fresh);
    drop((nested, fresh));

    // A fired read lock refuses no write: the write waits for the release and acquires.
    let old = mx.read().key("r").await.unwrap();
    old.cancellation_token().cancel();
    let fresh = at_once(mx.write().key("r")).await.unwrap();
    assert_ne!(fresh.id(), old.id());
    assert_eq!(raw::get(&conn, "jobs:r").await.as_deref(), Some(fresh.id()));
}

#[tokio::test]
async fn a_nested_guard_with_a_parent_ends_with_either() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);
    let other = stranger(&server).await;

    let outer = mx.write().await.unwrap();
    let parent = CancellationToken::new();
    let nested = mx.read().parent(parent.clone()).await.unwrap();
    let watch = nested.cancellation_token().clone();
    parent.cancel();
    tokio::time::timeout(LIVENESS, watch.cancelled())
        .await
        .expect("the parent fires the nested token itself, not only a look at it");
    assert_eq!(nested.cancel_reason(), Some(CancelReason::ParentCancelled));
    assert!(!outer.is_cancelled(), "the lock is kept");
    assert!(other.try_write().await.unwrap().is_none());
    let refused = at_once(mx.write().parent(parent.clone())).await;
    assert!(matches!(refused, Err(Error::Cancelled)), "{refused:?}");

    let parent = CancellationToken::new();
    let nested = mx.write().parent(parent.clone()).await.unwrap();
    drop(outer);
    assert!(nested.is_cancelled(), "the outer guard going ends it");
    assert!(!parent.is_cancelled(), "and never cancels the parent");
    drop(nested);

    // An outer guard whose parent fires passes its reason on.
    let parent = CancellationToken::new();
    let outer = at_once(mx.write().key("p").parent(parent.clone()))
        .await
        .unwrap();
    let nested = mx.read().key("p").await.unwrap();
    parent.cancel();
    assert_eq!(nested.cancel_reason(), Some(CancelReason::ParentCancelled));
    assert_eq!(outer.cancel_reason(), Some(CancelReason::ParentCancelled));
}

#[tokio::test]
async fn a_nested_guard_follows_the_outer_refreshes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, Duration::from_millis(400));

    let outer = mx.write().await.unwrap();
    let nested = mx.read().await.unwrap();
    let first = nested.valid_until();
    // Three TTLs: only the outer guard's refreshes keep the nested guard valid.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!outer.is_cancelled());
    assert!(!nested.is_cancelled(), "{:?}", nested.cancel_reason());
    assert!(nested.valid_until() > first);
    assert_eq!(nested.valid_until(), outer.valid_until());
    assert!(nested.unlock().await.unwrap());

    // The outer lock lost: the nested guard sees it too.
    let nested = mx.read().await.unwrap();
    let _: i64 = raw::cmd(&conn, "DEL", &["jobs"]).await;
    assert!(eventually(|| std::future::ready(nested.is_cancelled())).await);
    assert_eq!(nested.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(outer.cancel_reason(), Some(CancelReason::Lost));
}

#[tokio::test]
async fn a_nested_write_guard_downgrades_alone_and_the_lock_stays_the_outer_writers() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    let outer = mx.write().key("d").await.unwrap();
    let nested = at_once(mx.write().key("d")).await.unwrap();
    // A read guard now, by its type; the outer guard is still a `WriteGuard`.
    let nested: ReadGuard = at_once(nested.downgrade()).await.unwrap();
    assert_eq!(nested.id(), outer.id());
    // Nothing was sent: the key is still the outer writer's string.
    assert_eq!(raw::key_type(&conn, "jobs:d").await, "string");
    assert_eq!(raw::get(&conn, "jobs:d").await.as_deref(), Some(outer.id()));
    let stranger = stranger(&server).await;
    assert!(stranger.try_read().key("d").await.unwrap().is_none());
    drop(nested);
    drop(outer);
    assert!(eventually(|| async { !raw::exists(&conn, "jobs:d").await }).await);
}

#[tokio::test]
async fn after_the_outer_guard_is_downgraded_a_write_inside_it_is_refused() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = reentrant(&conn, TTL);

    let outer = mx.write().key("d").await.unwrap();
    let outer = at_once(outer.downgrade()).await.unwrap();
    assert_eq!(raw::key_type(&conn, "jobs:d").await, "set");
    // A read inside it still nests; a write would wait for the task's own read lock.
    let read = at_once(mx.read().key("d")).await.unwrap();
    assert_eq!(read.id(), outer.id());
    match at_once(mx.write().key("d")).await {
        Err(Error::WouldDeadlock { key, .. }) => assert_eq!(key, "jobs:d"),
        other => panic!("a write inside a downgraded guard: {other:?}"),
    }
    drop(read);
    outer.unlock().await.unwrap();
}
