//! Who may exec: a stale writer may not, a live one may; readers (reads only) and permits
//! while they hold and not after; a downgraded and nested guards; a fired token sends
//! nothing.

use std::time::Duration;

use crate::common::{self, raw, scripts, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, RwMutex, Semaphore};

const TTL: Duration = Duration::from_secs(30);

/// Whether the server has run `exec.lua` (it caches every script it runs). Each test that
/// asserts it has not also asserts, later, that it has once an `exec` ran: a SHA1 the
/// crate never sends would otherwise pass for "not sent".
async fn exec_ran(conn: &MultiplexedConnection) -> bool {
    scripts::cached(&mut conn.clone(), "exec.lua").await
}

fn write_data(value: &str) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.set("data", value).ignore().incr("data:writes", 1);
    pipe
}

#[tokio::test]
async fn a_stale_holder_is_refused_and_nothing_of_it_runs_while_the_new_holder_writes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "entry", TTL);
    let stale = mx.write().await.unwrap();
    // The lock goes behind A's back (an operator, an expiry after a pause) and B takes it.
    let _: () = raw::cmd(&conn, "DEL", &["entry"]).await;
    let fresh = mx.write().await.unwrap();
    assert!(!stale.is_cancelled(), "A has not noticed yet");

    let refused = stale.exec::<(i64,)>(&write_data("from A")).await;
    assert!(
        matches!(&refused, Err(Error::NotHeld { key, .. }) if key == "entry"),
        "{refused:?}"
    );
    assert_eq!(raw::get(&conn, "data").await, None, "nothing of A's ran");
    assert!(!raw::exists(&conn, "data:writes").await);
    assert_eq!(stale.cancel_reason(), Some(CancelReason::Lost));

    let (writes,): (i64,) = fresh.exec(&write_data("from B")).await.unwrap();
    assert_eq!(writes, 1);
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("from B"));
    assert!(!fresh.is_cancelled());
    fresh.unlock().await.unwrap();
    assert!(!stale.unlock().await.unwrap(), "A's lock was lost");
}

#[tokio::test]
async fn a_fired_token_is_refused_without_a_round_trip() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "entry", TTL);
    let guard = mx.write().await.unwrap();
    guard.cancellation_token().cancel();
    let refused = guard.exec::<()>(&write_data("late")).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert!(!exec_ran(&conn).await, "the script was sent");
    assert_eq!(raw::get(&conn, "data").await, None);
    // The check sees a run when one happens: a holder's exec runs the script.
    drop(guard);
    let holder = mx.write().await.unwrap();
    let (writes,): (i64,) = holder.exec(&write_data("on time")).await.unwrap();
    assert_eq!(writes, 1);
    assert!(
        exec_ran(&conn).await,
        "exec.lua ran, and the check did not see it"
    );
    holder.unlock().await.unwrap();
}

#[tokio::test]
async fn readers_exec_while_they_hold_and_not_after() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "entry", TTL);
    let _: () = raw::cmd(&conn, "SET", &["data", "v1"]).await;
    let (first, second) = (mx.read().await.unwrap(), mx.read().await.unwrap());
    let mut pipe = redis::pipe();
    pipe.get("data").strlen("data");
    let (value, len): (String, i64) = first.exec(&pipe).await.unwrap();
    assert_eq!((value.as_str(), len), ("v1", 2));
    // The first reader's id leaves the set; the second's stays.
    let _: i64 = raw::cmd(&conn, "SREM", &["entry", first.id()]).await;
    let refused = first.exec::<(String, i64)>(&pipe).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert_eq!(first.cancel_reason(), Some(CancelReason::Lost));
    let (value, _): (String, i64) = second.exec(&pipe).await.unwrap();
    assert_eq!(value, "v1");
    assert!(!second.is_cancelled(), "the other reader's loss is not its");
    second.unlock().await.unwrap();
    let _ = first.unlock().await;
}

#[tokio::test]
async fn a_reader_is_refused_writes_and_nothing_is_sent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "entry", TTL);
    let reader = mx.read().await.unwrap();
    // A write anywhere in the pipeline refuses all of it, the reads before it too.
    let mut pipe = redis::pipe();
    pipe.get("data").set("data", "from a reader").ignore();
    let refused = reader.exec::<(Option<String>,)>(&pipe).await;
    let Err(Error::InvalidPipeline { key, reason, .. }) = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(key, "entry");
    assert!(reason.contains("command 2"), "{reason}");
    assert!(reason.contains("write"), "{reason}");
    assert!(!exec_ran(&conn).await, "the script was sent");
    assert!(!raw::exists(&conn, "data").await, "nothing of it ran");
    assert!(!reader.is_cancelled(), "a refusal is no loss");
    // The same pipeline runs for a writer.
    assert!(reader.unlock().await.unwrap());
    let writer = mx.write().await.unwrap();
    let (before,): (Option<String>,) = writer.exec(&pipe).await.unwrap();
    assert_eq!(before, None);
    assert!(
        exec_ran(&conn).await,
        "exec.lua ran, and the check did not see it"
    );
    assert_eq!(
        raw::get(&conn, "data").await.as_deref(),
        Some("from a reader")
    );
    writer.unlock().await.unwrap();
}

#[tokio::test]
async fn permits_exec_while_they_hold_and_not_once_their_deadline_passed() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = Semaphore::builder(conn.clone(), "pool", 2)
        .ttl(TTL)
        .build()
        .unwrap();
    let (first, second) = (sem.acquire().await.unwrap(), sem.acquire().await.unwrap());
    let mut pipe = redis::pipe();
    pipe.incr("jobs", 1);
    let (jobs,): (i64,) = first.exec(&pipe).await.unwrap();
    assert_eq!(jobs, 1);
    // The first permit's deadline is in the past by the server's clock: it is not held,
    // even though its entry is still in the sorted set.
    let _: i64 = raw::cmd(&conn, "ZADD", &["pool", "1", first.id()]).await;
    let refused = first.exec::<(i64,)>(&pipe).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert_eq!(first.cancel_reason(), Some(CancelReason::Lost));
    let (jobs,): (i64,) = second.exec(&pipe).await.unwrap();
    assert_eq!(jobs, 2, "the refused exec ran nothing");
    second.unlock().await.unwrap();
    let _ = first.unlock().await;
}

#[tokio::test]
async fn a_downgraded_guard_and_nested_guards_exec_on_the_lock_they_share() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "entry")
        .ttl(TTL)
        .reentrant(true)
        .build()
        .unwrap();
    let outer = mx.write().await.unwrap();
    // A nested writer writes on the outer writer's lock.
    let nested = mx.write().await.unwrap();
    let mut pipe = write_data("nested");
    pipe.get("data");
    let (writes, value): (i64, String) = nested.exec(&pipe).await.unwrap();
    assert_eq!((writes, value.as_str()), (1, "nested"));
    drop(nested);
    // A nested reader reads there, and is refused a write as any reader is.
    let nested = mx.read().await.unwrap();
    let mut read = redis::pipe();
    read.get("data").get("data:writes");
    let (value, writes): (String, i64) = nested.exec(&read).await.unwrap();
    assert_eq!((value.as_str(), writes), ("nested", 1));
    let refused = nested.exec::<(i64,)>(&write_data("nested reader")).await;
    assert!(
        matches!(refused, Err(Error::InvalidPipeline { .. })),
        "{refused:?}"
    );
    drop(nested);
    let (writes,): (i64,) = outer.exec(&write_data("outer")).await.unwrap();
    assert_eq!(writes, 2);
    let reader = outer.downgrade().await.unwrap();
    assert_eq!(raw::key_type(&conn, "entry").await, "set");
    let (value, writes): (String, i64) = reader.exec(&read).await.unwrap();
    assert_eq!((value.as_str(), writes), ("outer", 2));
    let refused = reader.exec::<(i64,)>(&write_data("downgraded")).await;
    assert!(
        matches!(refused, Err(Error::InvalidPipeline { .. })),
        "{refused:?}"
    );
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("outer"));
    reader.unlock().await.unwrap();
}

#[tokio::test]
async fn a_write_guard_nested_in_a_guard_since_downgraded_only_reads() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "entry")
        .ttl(TTL)
        .reentrant(true)
        .build()
        .unwrap();
    let outer = mx.write().await.unwrap();
    let nested = mx.write().await.unwrap();
    let (writes,): (i64,) = nested.exec(&write_data("before")).await.unwrap();
    assert_eq!(writes, 1);
    // The outer guard turns the lock into a read lock: other readers may join it now.
    let reader = outer.downgrade().await.unwrap();
    let other = common::mutex(&conn, "entry", TTL).try_read().await.unwrap();
    assert!(other.is_some(), "another process's reader shares the lock");
    let refused = nested.exec::<(i64,)>(&write_data("after")).await;
    let Err(Error::InvalidPipeline { reason, .. }) = &refused else {
        panic!("{refused:?}");
    };
    assert!(reason.contains("held shared"), "{reason}");
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("before"));
    // It still reads, on the lock it shares.
    let (value,): (String,) = nested.exec(redis::pipe().get("data")).await.unwrap();
    assert_eq!(value, "before");
    drop(nested);
    drop(other);
    reader.unlock().await.unwrap();
}

#[tokio::test]
async fn a_lock_key_of_another_type_is_not_held_and_is_left_alone() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "entry", TTL);
    let guard = mx.write().await.unwrap();
    // Somebody else's hash replaces the lock key.
    let _: () = raw::cmd(&conn, "DEL", &["entry"]).await;
    let _: i64 = raw::cmd(&conn, "HSET", &["entry", "f", "v"]).await;
    let refused = guard.exec::<(i64,)>(&write_data("x")).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert_eq!(raw::key_type(&conn, "entry").await, "hash");
    assert!(!raw::exists(&conn, "data").await);
    let _ = guard.unlock().await;
    assert_eq!(
        raw::key_type(&conn, "entry").await,
        "hash",
        "the hash stays"
    );
}
