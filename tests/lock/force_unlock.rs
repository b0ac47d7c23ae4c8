//! Forced release (`RwMutex::force_unlock`, `Semaphore::force_unlock`): a live writer,
//! readers and permits forced out (their tokens fire `Lost` at the next renewal, an exec
//! is refused at once, the next token is larger), waiters woken at once, a Go client's
//! lock, a free lock, keys the crate did not write, and bad keys.

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::wrong_type::assert_wrong_type;
use crate::common::{self, at_once, eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Guard, RwMutex, Semaphore};
use tokio::time::Instant;

type Mx = RwMutex<MultiplexedConnection>;

/// Long enough that no lock expires, and no renewal comes, while a test runs.
const LONG: Duration = Duration::from_secs(30);
/// Short enough that a renewal comes within a liveness bound (every 500 ms).
const SHORT: Duration = Duration::from_secs(1);

/// Waits (at most [`LIVENESS`]) for the guard's token, and gives its reason.
async fn fired(guard: &impl Guard) -> Option<CancelReason> {
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .expect("the token fires at the next renewal");
    guard.cancel_reason()
}

#[tokio::test]
async fn a_live_writer_is_forced_out_learns_it_at_its_next_renewal_and_the_next_token_is_larger() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "jobs", SHORT);
    let holder = mx.write().key("42").await.unwrap();
    let fence_before = raw::stored_token(&conn, "jobs:42:fence").await;
    assert_eq!(fence_before, holder.fencing_token());

    assert!(at_once(mx.force_unlock("42")).await.unwrap());
    assert!(
        !raw::exists(&conn, "jobs:42").await,
        "the writer's key is gone"
    );
    assert_eq!(
        raw::stored_token(&conn, "jobs:42:fence").await,
        fence_before + 1,
        "the fence counter is raised by one"
    );
    assert!(
        raw::pttl(&conn, "jobs:42:fence").await > 0,
        "the fence key keeps its TTL"
    );

    assert_eq!(fired(&holder).await, Some(CancelReason::Lost));
    let next = at_once(mx.write().key("42")).await.unwrap();
    assert!(
        next.fencing_token() > holder.fencing_token(),
        "{} after {}",
        next.fencing_token(),
        holder.fencing_token()
    );
    assert!(
        !holder.unlock().await.unwrap(),
        "the forced-out writer held nothing"
    );
    assert_eq!(raw::get(&conn, "jobs:42").await.as_deref(), Some(next.id()));
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn a_forced_out_writers_exec_is_refused_at_once_and_writes_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // No renewal comes while the test runs: the exec is what finds the loss.
    let mx = common::mutex(&conn, "jobs", LONG);
    let holder = mx.write().await.unwrap();
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    assert!(!holder.is_cancelled(), "no renewal has come yet");

    let mut pipe = redis::pipe();
    pipe.set("data", "stale").ignore().incr("data:writes", 1);
    let refused = at_once(holder.exec::<(i64,)>(&pipe)).await;
    assert!(
        matches!(&refused, Err(Error::NotHeld { key, .. }) if key == "jobs"),
        "{refused:?}"
    );
    assert_eq!(holder.cancel_reason(), Some(CancelReason::Lost));
    assert!(!raw::exists(&conn, "data").await, "nothing of the exec ran");
    assert!(!raw::exists(&conn, "data:writes").await);
}

#[tokio::test]
async fn every_reader_is_forced_out_at_once() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "jobs", SHORT);
    let first = mx.read().await.unwrap();
    let second = mx.read().await.unwrap();
    assert_eq!(raw::members(&conn, "jobs").await.len(), 2);

    assert!(at_once(mx.force_unlock("")).await.unwrap());
    assert!(
        !raw::exists(&conn, "jobs").await,
        "the readers' set is gone"
    );
    assert_eq!(fired(&first).await, Some(CancelReason::Lost));
    assert_eq!(fired(&second).await, Some(CancelReason::Lost));
    let writer = at_once(mx.try_write())
        .await
        .unwrap()
        .expect("a writer gets in once the readers are gone");
    assert!(writer.fencing_token() > first.fencing_token().max(second.fencing_token()));
    writer.unlock().await.unwrap();
}

#[tokio::test]
async fn a_semaphores_permits_are_all_returned_and_their_holders_learn_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = Semaphore::builder(conn.clone(), "exports", 2)
        .ttl(SHORT)
        .build()
        .unwrap();
    let first = sem.acquire().key("eu").await.unwrap();
    let second = sem.acquire().key("eu").await.unwrap();
    assert!(at_once(sem.try_acquire().key("eu"))
        .await
        .unwrap()
        .is_none());

    assert!(at_once(sem.force_unlock("eu")).await.unwrap());
    assert!(!raw::exists(&conn, "exports:eu").await);
    for permit in [&first, &second] {
        tokio::time::timeout(LIVENESS, permit.cancelled())
            .await
            .expect("the permit's token fires at its next renewal");
        assert_eq!(permit.cancel_reason(), Some(CancelReason::Lost));
    }
    let next = at_once(sem.try_acquire().key("eu"))
        .await
        .unwrap()
        .expect("a permit is free");
    assert!(next.fencing_token() > first.fencing_token().max(second.fencing_token()));
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn a_semaphore_whose_permits_all_ran_out_held_nothing_and_is_cleared() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = Semaphore::new(conn.clone(), "exports", 2);
    // A holder whose deadline (1 ms after the epoch) passed long ago, not yet removed.
    let _: i64 = raw::cmd(&conn, "ZADD", &["exports", "1", &GoPeer::new_id()]).await;
    let _: i64 = raw::cmd(&conn, "PEXPIRE", &["exports", "60000"]).await;
    assert!(!at_once(sem.force_unlock("")).await.unwrap());
    assert!(
        !raw::exists(&conn, "exports").await,
        "the run-out entry went"
    );
}

/// A holder on a mutex with no notifier; a waiter on one with a notifier, subscribed; the
/// lock forced by `forcer`: the waiter gets the lock well before its fallback timer.
async fn a_waiter_is_woken(forcer: impl FnOnce(&Mx, &Mx) -> Mx) {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let plain = common::mutex(&server.conn().await, "jobs", LONG);
    let notified = RwMutex::builder(conn.clone(), "jobs")
        .ttl(LONG)
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap();
    let holder = plain.write().await.unwrap();
    let waiter = {
        let notified = notified.clone();
        tokio::spawn(async move { notified.write().await })
    };
    assert!(
        eventually(|| async { raw::subscribers(&conn, "jobs:released").await == 1 }).await,
        "the waiter subscribed"
    );
    assert!(
        eventually(|| async { raw::get(&conn, "jobs:lock-intent").await.is_some() }).await,
        "the waiter set its intent"
    );

    let forced = Instant::now();
    assert!(forcer(&plain, &notified).force_unlock("").await.unwrap());
    let guard = tokio::time::timeout(LIVENESS, waiter)
        .await
        .expect("woken by the forced release, not its timer (the holder's 30 s PTTL)")
        .unwrap()
        .unwrap();
    assert!(forced.elapsed() < LIVENESS);
    assert!(guard.fencing_token() > holder.fencing_token());
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(guard.id()));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_waiting_writer_elsewhere_is_woken_by_the_release_channel() {
    // Forced through the mutex without a notifier: only the message reaches the waiter.
    a_waiter_is_woken(|plain, _| plain.clone()).await;
}

#[tokio::test]
async fn a_waiting_writer_of_the_same_notifier_is_woken() {
    a_waiter_is_woken(|_, notified| notified.clone()).await;
}

#[tokio::test]
async fn the_lock_intent_and_the_fair_queue_are_left_to_the_waiters() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "jobs", LONG);
    let holder = mx.write().await.unwrap();
    let waiter = GoPeer::new_id();
    let _: () = raw::cmd(&conn, "SET", &["jobs:lock-intent", &waiter, "PX", "60000"]).await;
    let member = format!("w:{waiter}");
    for (key, score) in [
        ("jobs:queue", "1"),
        ("jobs:queue-deadline", "99999999999999"),
    ] {
        let _: i64 = raw::cmd(&conn, "ZADD", &[key, score, &member]).await;
        let _: i64 = raw::cmd(&conn, "PEXPIRE", &[key, "60000"]).await;
    }

    assert!(at_once(mx.force_unlock("")).await.unwrap());
    assert!(!raw::exists(&conn, "jobs").await);
    assert_eq!(
        raw::get(&conn, "jobs:lock-intent").await.as_deref(),
        Some(waiter.as_str())
    );
    for key in ["jobs:queue", "jobs:queue-deadline"] {
        let members: Vec<String> = raw::cmd(&conn, "ZRANGE", &[key, "0", "-1"]).await;
        assert_eq!(members, vec![member.clone()], "{key}");
    }
    assert_eq!(
        raw::stored_token(&conn, "jobs:fence").await,
        holder.fencing_token() + 1,
        "the fence counter is raised by one"
    );
}

#[tokio::test]
async fn a_go_clients_writer_and_readers_are_forced_out_and_its_intent_kept() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let mx = common::mutex(&conn, "jobs", LONG);

    let writer = GoPeer::new_id();
    assert_eq!(go.write("jobs", &writer, false).await, None);
    // A second Go writer waits with its intent set ("1", as Go writes it).
    assert!(go.write("jobs", &GoPeer::new_id(), true).await.is_some());
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    assert!(!raw::exists(&conn, "jobs").await);
    assert_eq!(
        raw::get(&conn, "jobs:lock-intent").await.as_deref(),
        Some("1")
    );
    assert_eq!(
        go.refresh("jobs", &writer).await,
        0,
        "the Go writer lost it"
    );
    let _: i64 = raw::cmd(&conn, "DEL", &["jobs:lock-intent"]).await;

    let readers = [GoPeer::new_id(), GoPeer::new_id()];
    for reader in &readers {
        assert_eq!(go.read("jobs", reader).await, None);
    }
    assert_eq!(raw::members(&conn, "jobs").await.len(), 2);
    assert!(at_once(mx.force_unlock("")).await.unwrap());
    assert!(!raw::exists(&conn, "jobs").await);
    assert_eq!(go.refresh("jobs", &readers[0]).await, 0);
}

#[tokio::test]
async fn a_free_lock_gives_false_and_nothing_is_written() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "jobs", LONG);
    assert!(!at_once(mx.force_unlock("")).await.unwrap());
    assert!(!at_once(mx.force_unlock("7")).await.unwrap());
    let sem = Semaphore::new(conn.clone(), "exports", 1);
    assert!(!at_once(sem.force_unlock("")).await.unwrap());
    let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["*"]).await;
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn a_key_the_crate_did_not_write_is_refused_and_left_as_it_is() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "jobs", LONG);
    let _: i64 = raw::cmd(&conn, "HSET", &["jobs", "field", "value"]).await;
    let _: i64 = raw::cmd(&conn, "PEXPIRE", &["jobs", "60000"]).await;
    assert_wrong_type(at_once(mx.force_unlock("")).await, "jobs", "hash");
    assert_eq!(raw::key_type(&conn, "jobs").await, "hash");
    let value: Option<String> = raw::cmd(&conn, "HGET", &["jobs", "field"]).await;
    assert_eq!(value.as_deref(), Some("value"));

    // A string with no TTL: no request of the crate leaves one.
    let _: () = raw::cmd(&conn, "SET", &["jobs:config", "data"]).await;
    let refused = at_once(mx.force_unlock("config")).await;
    assert!(
        matches!(&refused, Err(Error::NoExpiry { key, .. }) if key == "jobs:config"),
        "{refused:?}"
    );
    assert_eq!(
        raw::get(&conn, "jobs:config").await.as_deref(),
        Some("data")
    );
    assert_eq!(raw::pttl(&conn, "jobs:config").await, -1);
}

#[tokio::test]
async fn the_lock_key_is_built_and_checked_as_a_request_builds_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let tagged = RwMutex::builder(conn.clone(), "jobs")
        .ttl(LONG)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let holder = tagged.write().key("42").await.unwrap();
    assert_eq!(holder.key(), "jobs:{42}");
    assert!(at_once(tagged.force_unlock("42")).await.unwrap());
    assert!(!raw::exists(&conn, "jobs:{42}").await);

    let mx = common::mutex(&conn, "jobs", LONG);
    let other = mx.write().await.unwrap();
    for bad in ["x:fence", "x:lock-intent", "x:queue"] {
        let refused = at_once(mx.force_unlock(bad)).await;
        assert!(
            matches!(&refused, Err(Error::InvalidKey { key, .. }) if key == &format!("jobs:{bad}")),
            "{bad}: {refused:?}"
        );
    }
    let too_long = "k".repeat(1 << 20);
    assert!(matches!(
        at_once(mx.force_unlock(&too_long)).await,
        Err(Error::InvalidKey { .. })
    ));
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(other.id()));
    other.unlock().await.unwrap();
}
