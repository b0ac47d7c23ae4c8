//! Keys of a foreign type, keys without a TTL, bad options and durations too large to
//! represent: a typed error at once, no hang, nothing changed.

use std::time::Duration;

use crate::common::hostile::dbsize;
use crate::common::wrong_type::assert_wrong_type;
use crate::common::{at_once, every_result, intent_mutex, raw, RedisServer};
use redismutex::{Error, RwMutex};

#[tokio::test]
async fn a_lock_key_of_a_foreign_type_is_a_wrong_type_error_and_stays_untouched() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");
    let setups: [(&str, &[&str]); 4] = [
        ("hash", &["HSET", "lk", "f", "v"]),
        ("list", &["RPUSH", "lk", "a", "b"]),
        ("zset", &["ZADD", "lk", "1", "m"]),
        ("stream", &["XADD", "lk", "*", "f", "v"]),
    ];
    for (kind, setup) in setups {
        raw::cmd::<i64>(&conn, "DEL", &["lk"]).await;
        raw::cmd::<redis::Value>(&conn, setup[0], &setup[1..]).await;
        let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk"]).await;
        for result in every_result(&mx).await {
            assert_wrong_type(result, "lk", kind);
        }
        let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk"]).await;
        assert_eq!(before, after, "{kind} was changed");
        assert_eq!(raw::pttl(&conn, "lk").await, -1, "{kind} got a TTL");
        assert!(
            !raw::exists(&conn, "lk:lock-intent").await,
            "{kind}: intent was set"
        );
    }
    let err = mx.try_write().await.unwrap_err();
    assert!(
        err.to_string().contains("\"lk\""),
        "the message names the key: {err}"
    );
}

#[tokio::test]
async fn an_intent_key_of_a_foreign_type_is_a_wrong_type_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");
    raw::cmd::<i64>(&conn, "HSET", &["lk:lock-intent", "f", "v"]).await;

    for result in every_result(&mx).await {
        assert_wrong_type(result, "lk:lock-intent", "hash");
    }
    assert_eq!(raw::key_type(&conn, "lk:lock-intent").await, "hash");
    assert!(!raw::exists(&conn, "lk").await);
}

#[tokio::test]
async fn a_lock_key_without_ttl_is_a_no_expiry_error_and_stays_untouched() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");

    for (setup, kind) in [
        (["SET", "lk", "forever"], "string"),
        (["SADD", "lk", "forever"], "set"),
    ] {
        raw::cmd::<i64>(&conn, "DEL", &["lk"]).await;
        raw::cmd::<redis::Value>(&conn, setup[0], &setup[1..]).await;
        for result in every_result(&mx).await {
            match result {
                Err(Error::NoExpiry { key, .. }) => assert_eq!(key, "lk"),
                other => panic!("{kind}: expected NoExpiry, got {other:?}"),
            }
        }
        assert_eq!(raw::key_type(&conn, "lk").await, kind);
        assert_eq!(raw::pttl(&conn, "lk").await, -1);
        assert!(!raw::exists(&conn, "lk:lock-intent").await);
    }
}

#[tokio::test]
async fn an_intent_key_without_ttl_is_a_no_expiry_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");
    raw::cmd::<()>(&conn, "SET", &["lk:lock-intent", "1"]).await;

    for result in every_result(&mx).await {
        match result {
            Err(Error::NoExpiry { key, .. }) => assert_eq!(key, "lk:lock-intent"),
            other => panic!("expected NoExpiry, got {other:?}"),
        }
    }
    assert_eq!(raw::pttl(&conn, "lk:lock-intent").await, -1);
    assert!(!raw::exists(&conn, "lk").await);
}

#[tokio::test]
async fn invalid_options_are_rejected_without_touching_redis() {
    let server = RedisServer::start();
    let conn = server.conn().await;

    let empty = RwMutex::builder(conn.clone(), "").build();
    assert!(matches!(empty, Err(Error::InvalidOptions(_))), "{empty:?}");
    for ttl in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_millis(9),
        Duration::from_secs(25 * 3600),
        Duration::MAX,
    ] {
        match RwMutex::builder(conn.clone(), "jobs").ttl(ttl).build() {
            Err(Error::InvalidOptions(message)) => assert!(message.contains("jobs"), "{message}"),
            other => panic!("ttl {ttl:?}: expected InvalidOptions, got {other:?}"),
        }
    }

    let unchecked = RwMutex::new(conn.clone(), "");
    for result in every_result(&unchecked).await {
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{result:?}"
        );
    }
    assert_eq!(raw::cmd::<i64>(&conn, "DBSIZE", &[]).await, 0);
}

// Durations too large to represent.

#[tokio::test]
async fn durations_too_large_to_represent_are_invalid_options() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let huge = [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        Duration::from_millis(u64::MAX),
        Duration::from_nanos(u64::MAX),
    ];
    for ttl in huge {
        match RwMutex::builder(conn.clone(), "jobs").ttl(ttl).build() {
            Err(Error::InvalidOptions(message)) => {
                assert!(
                    message.contains("ttl") && message.contains("\"jobs\""),
                    "{message}"
                )
            }
            other => panic!("ttl {ttl:?}: expected InvalidOptions, got {other:?}"),
        }
    }
    for retention in huge {
        for ttl in [Duration::from_secs(1), Duration::from_secs(24 * 3600)] {
            let built = RwMutex::builder(conn.clone(), "jobs")
                .ttl(ttl)
                .fence_retention(retention)
                .build();
            match built {
                Err(Error::InvalidOptions(message)) => assert!(
                    message.contains("fence retention") && message.contains("\"jobs\""),
                    "{message}"
                ),
                other => panic!("retention {retention:?}: expected InvalidOptions, got {other:?}"),
            }
        }
        let both = RwMutex::builder(conn.clone(), "jobs")
            .ttl(retention)
            .fence_retention(retention)
            .build();
        assert!(matches!(both, Err(Error::InvalidOptions(_))), "{both:?}");
    }

    // A wait timeout too large for a deadline means no deadline, not a panic.
    let mx = RwMutex::new(conn.clone(), "jobs");
    let guard = at_once(mx.write().timeout(Duration::MAX)).await.unwrap();
    let waited = mx
        .read()
        .timeout(Duration::from_secs(u64::MAX))
        .parent(redismutex::tokio_util::sync::CancellationToken::new());
    assert!(
        tokio::time::timeout(Duration::from_millis(100), waited)
            .await
            .is_err(),
        "a reader waits behind the writer"
    );
    assert!(guard.unlock().await.unwrap());
    assert_eq!(dbsize(&conn).await, 1, "only the fence key of `jobs`");
}

/// Bytes that are not UTF-8, put at a lock's keys by someone else (a Go client can): a
/// typed error or a plain "held", never a panic, and nothing changed.
#[tokio::test]
async fn non_utf8_values_at_a_locks_keys_are_handled_and_left_alone() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");
    let set = |key: &'static str, value: &'static [u8]| {
        let mut conn = conn.clone();
        async move {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(value)
                .arg("PX")
                .arg(60_000)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    };
    let dump = |key: &'static str| {
        let conn = conn.clone();
        async move { raw::cmd::<Vec<u8>>(&conn, "DUMP", &[key]).await }
    };

    set("lk:fence", b"\xff\xfe1").await;
    let before = dump("lk:fence").await;
    for result in every_result(&mx).await {
        assert_wrong_type(result, "lk:fence", "non-integer string");
    }
    assert_eq!(dump("lk:fence").await, before);
    raw::cmd::<i64>(&conn, "DEL", &["lk:fence"]).await;

    // A writer whose id is not UTF-8 holds the lock; an intent that is not UTF-8 waits.
    set("lk", b"\xc3\x28 not utf-8").await;
    set("lk:lock-intent", b"\x80").await;
    let (lock, intent) = (dump("lk").await, dump("lk:lock-intent").await);
    assert!(mx.try_write().await.unwrap().is_none());
    assert!(mx.try_read().await.unwrap().is_none());
    let waited = mx.write().timeout(Duration::from_millis(100)).await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert_eq!(dump("lk").await, lock, "the holder's key was changed");
    assert_eq!(dump("lk:lock-intent").await, intent);
}
