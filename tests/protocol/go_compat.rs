//! A Go service on the original package and a Rust service on this crate share locks:
//! the Go side is played by `GoPeer`, which sends what the Go package sends.

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;

const KEY: &str = "shared:doc";
const INTENT: &str = "shared:doc:lock-intent";

async fn setup(
    intent: bool,
) -> (
    RedisServer,
    MultiplexedConnection,
    RwMutex<MultiplexedConnection>,
    GoPeer,
) {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "shared")
        .lock_intent(intent)
        .build()
        .unwrap();
    let go = GoPeer::new(server.conn().await, 4000);
    (server, conn, mx, go)
}

#[tokio::test]
async fn a_rust_writer_excludes_go_readers_and_writers() {
    let (_server, conn, mx, go) = setup(false).await;
    let guard = mx.write().key("doc").await.unwrap();
    let go_id = GoPeer::new_id();

    let pttl = go
        .write(KEY, &go_id, false)
        .await
        .expect("Go writer blocked");
    assert!(
        (1..=4000).contains(&pttl),
        "Go reads the Rust lock's PTTL: {pttl}"
    );
    assert!(go.read(KEY, &go_id).await.is_some(), "Go reader blocked");
    go.unlock(KEY, &go_id).await;
    assert_eq!(go.refresh(KEY, &go_id).await, 0);
    assert_eq!(
        raw::get(&conn, KEY).await.as_deref(),
        Some(guard.id()),
        "Go removed nothing"
    );

    assert!(guard.unlock().await.unwrap());
    assert_eq!(
        go.write(KEY, &go_id, false).await,
        None,
        "Go acquires after Rust unlocks"
    );
}

#[tokio::test]
async fn a_go_writer_excludes_rust_readers_and_writers() {
    let (_server, conn, mx, go) = setup(false).await;
    let go_id = GoPeer::new_id();
    assert_eq!(go.write(KEY, &go_id, false).await, None);
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(go_id.as_str()));

    assert!(mx.try_write().key("doc").await.unwrap().is_none());
    assert!(mx.try_read().key("doc").await.unwrap().is_none());
    let waiter = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().key("doc").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());
    go.unlock(KEY, &go_id).await;
    let guard = tokio::time::timeout(LIVENESS, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(go.refresh(KEY, &go_id).await, 0, "Go sees its lock gone");
    assert!(go.read(KEY, &go_id).await.is_some());
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn go_and_rust_readers_share_one_set() {
    let (_server, conn, mx, go) = setup(false).await;
    let go_id = GoPeer::new_id();
    assert_eq!(go.read(KEY, &go_id).await, None);
    let reader = mx.read().key("doc").await.unwrap();

    let mut both = vec![go_id.clone(), reader.id().to_string()];
    both.sort();
    assert_eq!(raw::members(&conn, KEY).await, both);
    assert!(mx.try_write().key("doc").await.unwrap().is_none());
    assert!(go.write(KEY, &GoPeer::new_id(), false).await.is_some());
    assert_eq!(go.refresh(KEY, &go_id).await, 1);

    go.unlock(KEY, &go_id).await;
    assert_eq!(
        raw::members(&conn, KEY).await,
        vec![reader.id().to_string()]
    );
    assert!(!reader.is_cancelled());
    assert!(reader.unlock().await.unwrap());
    assert!(!raw::exists(&conn, KEY).await);
    assert_eq!(go.write(KEY, &go_id, false).await, None);
}

#[tokio::test]
async fn a_go_writers_intent_keeps_rust_readers_out() {
    let (_server, conn, mx, go) = setup(true).await;
    let go_reader = GoPeer::new_id();
    let go_writer = GoPeer::new_id();
    assert_eq!(go.read(KEY, &go_reader).await, None);
    assert!(go.write(KEY, &go_writer, true).await.is_some());
    assert_eq!(raw::get(&conn, INTENT).await.as_deref(), Some("1"));

    assert!(
        mx.try_read().key("doc").await.unwrap().is_none(),
        "the Go intent blocks Rust readers"
    );
    go.unlock(KEY, &go_reader).await;
    let writer = mx.write().key("doc").await.unwrap();
    assert_eq!(
        raw::get(&conn, INTENT).await.as_deref(),
        Some("1"),
        "a Rust writer deletes only its own intent: the Go writer still waits"
    );
    assert!(go.read(KEY, &go_reader).await.is_some());
    assert!(writer.unlock().await.unwrap());
}

#[tokio::test]
async fn a_rust_writers_intent_keeps_go_readers_out() {
    let (_server, conn, mx, go) = setup(true).await;
    let go_reader = GoPeer::new_id();
    assert_eq!(go.read(KEY, &go_reader).await, None);
    let writer = tokio::spawn({
        let mx = mx.clone();
        async move { mx.write().key("doc").await }
    });
    assert!(eventually(|| raw::exists(&conn, INTENT)).await);
    let intent = raw::get(&conn, INTENT).await.unwrap();
    assert!(
        intent.len() == 32 && intent.bytes().all(|b| b.is_ascii_hexdigit()),
        "a Rust writer's intent holds its id: {intent}"
    );
    let pttl = go
        .read(KEY, &GoPeer::new_id())
        .await
        .expect("Go reader blocked by the intent");
    assert!(pttl > 0);

    go.unlock(KEY, &go_reader).await;
    let writer = tokio::time::timeout(LIVENESS, writer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert_eq!(intent, writer.id(), "the intent was the writer's own");
    assert!(!raw::exists(&conn, INTENT).await, "and it deleted it");
    assert!(go.write(KEY, &GoPeer::new_id(), true).await.is_some());
    drop(writer);
}

/// A lease of a Go-visible lock stays a Go-visible lock: after a detach and an attach
/// (the hold under a new id), Go writers and readers are still kept out, a Go reader
/// shares an attached read lock, and once released Go takes the lock.
#[tokio::test]
async fn an_attached_lease_is_the_same_lock_to_go() {
    let (_server, conn, mx, go) = setup(false).await;
    let go_id = GoPeer::new_id();
    let lease = mx.write().key("doc").await.unwrap().detach();
    assert!(
        go.write(KEY, &go_id, false).await.is_some(),
        "detached: still held"
    );
    let writer = mx.attach_write(&lease).await.unwrap();
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(
        go.write(KEY, &go_id, false).await.is_some(),
        "Go writer blocked"
    );
    assert!(go.read(KEY, &go_id).await.is_some(), "Go reader blocked");
    assert!(writer.unlock().await.unwrap());

    let lease = mx.read().key("doc").await.unwrap().detach();
    let reader = mx.attach_read(&lease).await.unwrap();
    assert_eq!(go.read(KEY, &go_id).await, None, "a Go reader shares it");
    assert!(
        go.write(KEY, &go_id, false).await.is_some(),
        "Go writer blocked"
    );
    go.unlock(KEY, &go_id).await;
    assert!(reader.unlock().await.unwrap());
    assert_eq!(
        go.write(KEY, &go_id, false).await,
        None,
        "Go takes it after"
    );
}
