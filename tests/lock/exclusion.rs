//! Many readers or one writer.

use std::time::Duration;

use crate::common::{raw, RedisServer};
use redismutex::{Error, ReadGuard, RwMutex, WriteGuard};

#[tokio::test]
async fn two_readers_share_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "shared");

    let a: ReadGuard = mx.read().await.unwrap();
    let b: ReadGuard = mx.read().await.unwrap();
    assert_ne!(a.id(), b.id());
    let mut ids = vec![a.id().to_string(), b.id().to_string()];
    ids.sort();
    assert_eq!(raw::key_type(&conn, "shared").await, "set");
    assert_eq!(raw::members(&conn, "shared").await, ids);
    assert!(
        mx.try_read().await.unwrap().is_some(),
        "a third reader shares too"
    );
}

#[tokio::test]
async fn readers_exclude_a_writer_until_they_leave() {
    let server = RedisServer::start();
    let mx = RwMutex::new(server.conn().await, "cache");

    let a = mx.read().await.unwrap();
    let b = mx.read().await.unwrap();
    assert!(mx.try_write().await.unwrap().is_none());
    let waited = mx.write().timeout(Duration::from_millis(200)).await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");

    assert!(a.unlock().await.unwrap());
    assert!(
        mx.try_write().await.unwrap().is_none(),
        "one reader still holds"
    );
    assert!(b.unlock().await.unwrap());
    assert!(mx.try_write().await.unwrap().is_some());
}

#[tokio::test]
async fn a_writer_excludes_readers_and_writers() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "cache");

    let w: WriteGuard = mx.write().await.unwrap();
    assert_eq!(raw::key_type(&conn, "cache").await, "string");
    assert_eq!(raw::get(&conn, "cache").await.as_deref(), Some(w.id()));
    assert!(mx.try_read().await.unwrap().is_none());
    assert!(mx.try_write().await.unwrap().is_none());
    let read = mx.read().timeout(Duration::from_millis(200)).await;
    assert!(matches!(read, Err(Error::Timeout)), "{read:?}");

    assert!(w.unlock().await.unwrap());
    assert!(!raw::exists(&conn, "cache").await);
    assert!(mx.try_read().await.unwrap().is_some());
}

#[tokio::test]
async fn keys_name_separate_locks_and_ids_are_hex() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "orders");

    let a = mx.write().key("42").await.unwrap();
    let b = mx
        .try_write()
        .key("43")
        .await
        .unwrap()
        .expect("another key is free");
    let whole = mx.write().key("").await.unwrap();
    assert_eq!(a.key(), "orders:42");
    assert_eq!(b.key(), "orders:43");
    assert_eq!(whole.key(), "orders", "an empty key is ignored, as in Go");
    for guard in [&a, &b, &whole] {
        assert_eq!(guard.id().len(), 32);
        assert!(guard
            .id()
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_eq!(
            raw::get(&conn, guard.key()).await.as_deref(),
            Some(guard.id())
        );
        let pttl = raw::pttl(&conn, guard.key()).await;
        assert!(
            (1..=4000).contains(&pttl),
            "PX is the 4 s default TTL, got {pttl}"
        );
    }
    assert!(mx.try_read().key("42").await.unwrap().is_none());
}
