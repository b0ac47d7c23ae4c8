//! Go clients beside sets (`lock_all`): the Go package (played by `GoPeer`) sees each key
//! of a set as a single lock, so a Go writer on one key keeps the whole set out (and the
//! set takes nothing), a Go reader shares a set's read key, a set's write key keeps Go
//! readers and writers out, and a Go writer's intent ("1") keeps a set's reads out.

use std::time::Duration;

use crate::common::go_peer::GoPeer;
use crate::common::{raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex};

/// A server, a connection for assertions, a notified mutex `bank` with a 30 s TTL and the
/// lock intent, and a Go peer whose locks last 30 s.
async fn setup() -> (
    RedisServer,
    MultiplexedConnection,
    RwMutex<MultiplexedConnection>,
    GoPeer,
) {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(server.conn().await, "bank")
        .ttl(Duration::from_secs(30))
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap();
    let go = GoPeer::new(server.conn().await, 30_000);
    (server, conn, mx, go)
}

#[tokio::test]
async fn a_go_writer_on_one_key_keeps_the_whole_set_out() {
    let (_server, conn, mx, go) = setup().await;
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("bank:b", &go_id, true).await, None);

    let tried = mx.try_lock_all().write(["a", "b"]).await.unwrap();
    assert!(tried.is_none(), "taken beside a Go writer");
    for key in ["bank:a", "bank:a:lock-intent", "bank:b:lock-intent"] {
        assert!(!raw::exists(&conn, key).await, "{key} was changed");
    }
    assert_eq!(raw::get(&conn, "bank:b").await.as_deref(), Some(&*go_id));
    let waited = mx
        .lock_all()
        .read(["a", "b"])
        .timeout(Duration::from_millis(300))
        .await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(!raw::exists(&conn, "bank:a").await, "a was taken in part");

    // Go's unlock publishes nothing; the set is tried again.
    go.unlock("bank:b", &go_id).await;
    let set = mx
        .try_lock_all()
        .write(["a", "b"])
        .await
        .unwrap()
        .expect("free once the Go writer left");
    assert!(
        go.write("bank:b", &GoPeer::new_id(), false).await.is_some(),
        "a Go writer got into a set's write key"
    );
    assert!(set.unlock().await.unwrap());
}

#[tokio::test]
async fn a_go_reader_shares_a_sets_read_key_both_ways() {
    let (_server, conn, mx, go) = setup().await;
    // The Go reader first: the set joins it.
    let go_id = GoPeer::new_id();
    assert_eq!(go.read("bank:rates", &go_id).await, None);
    let set = mx
        .try_lock_all()
        .write(["acct"])
        .read(["rates"])
        .await
        .unwrap()
        .expect("a Go reader shares the read key");
    let mut both = vec![set.id().to_owned(), go_id.clone()];
    both.sort();
    assert_eq!(raw::members(&conn, "bank:rates").await, both);
    assert_eq!(go.refresh("bank:rates", &go_id).await, 1);
    // Go's unlock leaves the set's id.
    go.unlock("bank:rates", &go_id).await;
    assert_eq!(raw::members(&conn, "bank:rates").await, [set.id()]);
    assert!(!set.is_cancelled());

    // Then a Go reader joins the set's read key.
    let later = GoPeer::new_id();
    assert_eq!(go.read("bank:rates", &later).await, None, "kept out");
    let mut both = vec![set.id().to_owned(), later.clone()];
    both.sort();
    assert_eq!(raw::members(&conn, "bank:rates").await, both);
    // The set's release removes only its own id.
    assert!(set.unlock().await.unwrap());
    assert_eq!(raw::members(&conn, "bank:rates").await, [later.as_str()]);
    assert!(!raw::exists(&conn, "bank:acct").await);
    go.unlock("bank:rates", &later).await;
}

#[tokio::test]
async fn a_sets_write_key_keeps_go_readers_and_writers_out() {
    let (_server, conn, mx, go) = setup().await;
    let set = mx.lock_all().write(["a"]).read(["b"]).await.unwrap();
    let pttl = go
        .read("bank:a", &GoPeer::new_id())
        .await
        .expect("a Go reader got into a set's write key");
    assert!((1..=30_000).contains(&pttl), "the write key's PTTL: {pttl}");
    assert!(go.write("bank:a", &GoPeer::new_id(), false).await.is_some());
    // A Go writer on the set's read key is kept out too, and leaves its intent there.
    assert!(go.write("bank:b", &GoPeer::new_id(), true).await.is_some());
    assert_eq!(
        raw::get(&conn, "bank:b:lock-intent").await.as_deref(),
        Some("1")
    );
    assert_eq!(raw::get(&conn, "bank:a").await.as_deref(), Some(set.id()));
    assert_eq!(raw::members(&conn, "bank:b").await, [set.id()]);
    assert!(set.unlock().await.unwrap());
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("bank:a", &go_id, false).await, None, "free after");
    go.unlock("bank:a", &go_id).await;
}

/// A Go writer blocked on `a` (by a reader) sets the intent "1": a set reading `a` is
/// kept out, tried or waiting, and takes none of its other keys; a set writing `a`
/// waits too, and leaves the Go writer's intent alone. Once the Go writer has come and
/// gone (its lock taken and released, its intent deleted), the set reading `a` goes in.
#[tokio::test]
async fn a_waiting_go_writers_intent_keeps_a_sets_reads_out() {
    let (_server, conn, mx, go) = setup().await;
    let reader = mx.read().key("a").await.unwrap();
    let go_id = GoPeer::new_id();
    assert!(go.write("bank:a", &go_id, true).await.is_some());
    assert_eq!(
        raw::get(&conn, "bank:a:lock-intent").await.as_deref(),
        Some("1")
    );

    let tried = mx.try_lock_all().read(["a", "c"]).await.unwrap();
    assert!(tried.is_none(), "a set read past a Go writer's intent");
    let waited = mx
        .lock_all()
        .write(["c"])
        .read(["a"])
        .timeout(Duration::from_millis(300))
        .await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    for key in ["bank:c", "bank:c:lock-intent"] {
        assert!(!raw::exists(&conn, key).await, "{key} was left");
    }
    let writing = mx
        .lock_all()
        .write(["a", "c"])
        .timeout(Duration::from_millis(300))
        .await;
    assert!(matches!(writing, Err(Error::Timeout)), "{writing:?}");
    assert_eq!(
        raw::get(&conn, "bank:a:lock-intent").await.as_deref(),
        Some("1"),
        "the Go writer's intent was replaced or removed"
    );
    assert!(!raw::exists(&conn, "bank:c").await);
    assert_eq!(raw::members(&conn, "bank:a").await, [reader.id()]);

    // The reader leaves; the Go writer retries, takes the lock and deletes its intent.
    assert!(reader.unlock().await.unwrap());
    assert_eq!(go.write("bank:a", &go_id, true).await, None);
    assert!(!raw::exists(&conn, "bank:a:lock-intent").await);
    assert!(mx.try_lock_all().read(["a", "c"]).await.unwrap().is_none());
    go.unlock("bank:a", &go_id).await;
    let set = mx.try_lock_all().read(["a", "c"]).await.unwrap();
    let set = set.expect("free once the Go writer left");
    assert_eq!(raw::members(&conn, "bank:c").await, [set.id()]);
    assert!(set.unlock().await.unwrap());
}
