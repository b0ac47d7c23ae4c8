//! Go clients beside an upgradable reader: the Go package (played by `GoPeer`) sees it as
//! a reader, so Go readers share the lock with it and Go writers stay out; its upgrade
//! waits for Go readers to leave (they publish nothing: the upgrade finds them gone by
//! its timer), and keeps new Go readers out meanwhile with the lock intent.

use std::time::{Duration, Instant};

use crate::common::go_peer::GoPeer;
use crate::common::{eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;

const KEY: &str = "shared:doc";
const INTENT: &str = "shared:doc:lock-intent";
const UPGRADER: &str = "shared:doc:upgrader";

/// A server, a connection for assertions, a notified mutex `shared` with `ttl`, and a Go
/// peer whose locks last `go_ttl_ms`.
async fn setup(
    ttl: Duration,
    go_ttl_ms: u64,
) -> (
    RedisServer,
    MultiplexedConnection,
    RwMutex<MultiplexedConnection>,
    GoPeer,
) {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(server.conn().await, "shared")
        .ttl(ttl)
        .notifier(server.client())
        .build()
        .unwrap();
    let go = GoPeer::new(server.conn().await, go_ttl_ms);
    (server, conn, mx, go)
}

#[tokio::test]
async fn a_go_reader_shares_the_lock_with_an_upgradable_reader() {
    let (_server, conn, mx, go) = setup(Duration::from_secs(30), 30_000).await;
    let upgradable = mx.upgradable_read().key("doc").await.unwrap();
    let go_id = GoPeer::new_id();
    assert_eq!(
        go.read(KEY, &go_id).await,
        None,
        "the Go reader was kept out"
    );
    let mut both = vec![upgradable.id().to_owned(), go_id.clone()];
    both.sort();
    assert_eq!(raw::members(&conn, KEY).await, both);
    assert_eq!(go.refresh(KEY, &go_id).await, 1);
    // Go's refresh and unlock leave the upgradable reader and its upgrader key alone.
    go.unlock(KEY, &go_id).await;
    assert_eq!(raw::members(&conn, KEY).await, [upgradable.id()]);
    assert_eq!(
        raw::get(&conn, UPGRADER).await.as_deref(),
        Some(upgradable.id())
    );
    assert!(!upgradable.is_cancelled());
    // Alone again, it upgrades at once.
    let writer = upgradable
        .try_upgrade()
        .await
        .unwrap()
        .expect("the Go reader left");
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(
        go.read(KEY, &go_id).await.is_some(),
        "a Go reader joined a writer"
    );
    assert!(writer.unlock().await.unwrap());
}

#[tokio::test]
async fn a_go_writer_is_kept_out_by_an_upgradable_reader() {
    let (_server, conn, mx, go) = setup(Duration::from_secs(30), 30_000).await;
    let upgradable = mx.upgradable_read().key("doc").await.unwrap();
    let go_id = GoPeer::new_id();
    let pttl = go
        .write(KEY, &go_id, true)
        .await
        .expect("a Go writer got in beside an upgradable reader");
    assert!(
        (1..=30_000).contains(&pttl),
        "Go reads the readers' PTTL: {pttl}"
    );
    assert_eq!(raw::members(&conn, KEY).await, [upgradable.id()]);
    // The Go writer's intent ("1") keeps new readers out, but the upgrade goes in: it
    // is the only reader, and leaves the Go writer's intent to it.
    assert_eq!(raw::get(&conn, INTENT).await.as_deref(), Some("1"));
    assert!(mx.try_read().key("doc").await.unwrap().is_none());
    let writer = tokio::time::timeout(LIVENESS, upgradable.upgrade())
        .await
        .expect("the upgrade waits for no one")
        .unwrap();
    assert_eq!(raw::get(&conn, INTENT).await.as_deref(), Some("1"));
    assert!(
        go.write(KEY, &go_id, true).await.is_some(),
        "Go beside the upgrade"
    );
    assert!(writer.unlock().await.unwrap());
    assert_eq!(go.write(KEY, &go_id, true).await, None, "Go goes in after");
    assert!(!raw::exists(&conn, INTENT).await);
    go.unlock(KEY, &go_id).await;
}

/// Go's unlock publishes nothing, so the upgrade learns the Go reader left from its own
/// timer (at most half its 1 s TTL), well within LIVENESS.
#[tokio::test]
async fn an_upgrade_waits_for_a_go_reader_to_leave() {
    let (_server, conn, mx, go) = setup(Duration::from_secs(1), 1_000).await;
    let upgradable = mx.upgradable_read().key("doc").await.unwrap();
    let read_token = upgradable.fencing_token();
    let go_id = GoPeer::new_id();
    assert_eq!(go.read(KEY, &go_id).await, None);

    let upgrading = tokio::spawn(upgradable.upgrade());
    assert!(eventually(|| async { raw::exists(&conn, INTENT).await }).await);
    // Past two of the upgrader's TTLs, the Go reader (refreshing) still holds it back.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            go.refresh(KEY, &go_id).await,
            1,
            "the Go reader lost its lock"
        );
        assert!(!upgrading.is_finished(), "upgraded beside a Go reader");
    }
    go.unlock(KEY, &go_id).await;
    let left = Instant::now();
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("the upgrade finds the Go reader gone by its timer")
        .unwrap()
        .unwrap();
    println!("upgraded {:?} after the Go reader left", left.elapsed());
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(writer.fencing_token() > read_token);
    assert!(!raw::exists(&conn, INTENT).await);
    assert!(writer.unlock().await.unwrap());
}

/// While the upgrade waits, its intent keeps Go's read lock out (Go checks the intent key
/// before joining): the upgrade then finishes once the readers present at the call have
/// left, and the Go reader gets in after the writer's release.
#[tokio::test]
async fn a_go_read_lock_is_kept_out_while_the_upgrade_waits() {
    let (_server, conn, mx, go) = setup(Duration::from_secs(30), 30_000).await;
    let upgradable = mx.upgradable_read().key("doc").await.unwrap();
    let reader = mx.read().key("doc").await.unwrap();
    let upgrading = tokio::spawn(upgradable.upgrade());
    assert!(eventually(|| async { raw::exists(&conn, INTENT).await }).await);

    let go_id = GoPeer::new_id();
    let pttl = go
        .read(KEY, &go_id)
        .await
        .expect("a Go reader joined while the upgrade waits");
    assert!(
        (1..=30_000).contains(&pttl),
        "Go reads the intent's PTTL: {pttl}"
    );
    assert_eq!(raw::members(&conn, KEY).await.len(), 2, "Go joined the set");

    // The reader present at the call leaves; its release wakes the upgrade.
    assert!(reader.unlock().await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("the upgrade finishes once the reader present at the call left")
        .unwrap()
        .unwrap();
    assert!(go.read(KEY, &go_id).await.is_some(), "Go joined a writer");
    assert!(writer.unlock().await.unwrap());
    assert_eq!(
        go.read(KEY, &go_id).await,
        None,
        "Go reads after the release"
    );
    assert_eq!(raw::members(&conn, KEY).await, [go_id.as_str()]);
    go.unlock(KEY, &go_id).await;
    assert!(!raw::exists(&conn, KEY).await);
}
