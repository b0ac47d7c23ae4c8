//! Fence keys that are not ours or not usable: a foreign type or value and a key without
//! a TTL are typed errors that change nothing, a sub-lock may not be another lock's fence
//! or intent key, a fence key is small, and a hash-tagged name keeps it in the lock
//! key's cluster slot.

use crate::common::raw::stored_token;
use crate::common::wrong_type::assert_wrong_type;
use crate::common::{eventually, every_result, intent_mutex, raw, RedisServer};
use redismutex::{Error, RwMutex};

#[tokio::test]
async fn a_fence_key_of_a_foreign_type_or_value_is_a_wrong_type_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");
    let setups: [(&str, &[&str]); 13] = [
        ("hash", &["HSET", "lk:fence", "f", "v"]),
        ("list", &["RPUSH", "lk:fence", "1"]),
        ("set", &["SADD", "lk:fence", "1"]),
        ("zset", &["ZADD", "lk:fence", "1", "m"]),
        ("stream", &["XADD", "lk:fence", "*", "f", "v"]),
        ("non-integer string", &["SET", "lk:fence", "abc"]),
        ("non-integer string", &["SET", "lk:fence", ""]),
        ("non-integer string", &["SET", "lk:fence", "1.5"]),
        ("non-integer string", &["SET", "lk:fence", "nan"]),
        ("non-integer string", &["SET", "lk:fence", "-1"]),
        (
            "non-integer string",
            &["SET", "lk:fence", "9007199254740992"],
        ),
        (
            "non-integer string",
            &["SET", "lk:fence", "18446744073709551616"],
        ),
        ("non-integer string", &["SET", "lk:fence", "inf"]),
    ];
    for (found_expected, setup) in setups {
        raw::cmd::<i64>(&conn, "DEL", &["lk:fence"]).await;
        raw::cmd::<redis::Value>(&conn, setup[0], &setup[1..]).await;
        raw::cmd::<i64>(&conn, "PEXPIRE", &["lk:fence", "600000"]).await;
        let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        for result in every_result(&mx).await {
            assert_wrong_type(result, "lk:fence", found_expected);
        }
        let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        assert_eq!(before, after, "{setup:?} was changed");
        assert!(
            raw::pttl(&conn, "lk:fence").await > 500_000,
            "{setup:?}: TTL changed"
        );
        assert!(
            !raw::exists(&conn, "lk").await,
            "{setup:?}: lock key created"
        );
        assert!(
            !raw::exists(&conn, "lk:lock-intent").await,
            "{setup:?}: intent set"
        );
    }
}

#[tokio::test]
async fn a_fence_key_without_ttl_is_a_no_expiry_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = intent_mutex(&conn, "lk");
    raw::cmd::<()>(&conn, "SET", &["lk:fence", "12345"]).await;
    let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;

    for result in every_result(&mx).await {
        match result {
            Err(Error::NoExpiry { key, .. }) => assert_eq!(key, "lk:fence"),
            other => panic!("expected NoExpiry, got {other:?}"),
        }
    }
    let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
    assert_eq!(before, after);
    assert_eq!(raw::pttl(&conn, "lk:fence").await, -1);
    assert!(!raw::exists(&conn, "lk").await, "lock key created");
    assert!(!raw::exists(&conn, "lk:lock-intent").await, "intent set");
}

#[tokio::test]
async fn a_fence_key_takes_under_100_bytes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "orders");
    let guard = mx.write().key("42").await.unwrap();
    assert!(guard.unlock().await.unwrap());

    let usage: i64 = raw::cmd(&conn, "MEMORY", &["USAGE", "orders:42:fence"]).await;
    let encoding: String = raw::cmd(&conn, "OBJECT", &["ENCODING", "orders:42:fence"]).await;
    println!("MEMORY USAGE orders:42:fence = {usage} bytes (encoding {encoding})");
    assert!((1..100).contains(&usage), "{usage} bytes");
    assert!(!raw::exists(&conn, "orders:42").await);

    // Many sub-locks: what each fence key adds to used_memory, with its TTL entry and
    // its share of the keyspace tables.
    let used = || async {
        let info: String = raw::cmd(&conn, "INFO", &["memory"]).await;
        info.lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|n| n.trim().parse::<i64>().ok())
            .expect("used_memory in INFO")
    };
    const KEYS: usize = 10_000;
    let bulk = RwMutex::new(conn.clone(), "bulk");
    let start = used().await;
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let mx = bulk.clone();
            tokio::spawn(async move {
                for n in (task..KEYS).step_by(8) {
                    let guard = mx.try_write().key(n.to_string()).await.unwrap().unwrap();
                    assert!(guard.unlock().await.unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let keys: i64 = raw::cmd(&conn, "DBSIZE", &[]).await;
    assert_eq!(keys, KEYS as i64 + 1, "only the fence keys remain");
    let per_key = (used().await - start) / KEYS as i64;
    println!("used_memory per fence key over {KEYS} sub-locks = {per_key} bytes");
    assert!(per_key < 200, "{per_key} bytes per fence key");
}

#[tokio::test]
async fn a_hash_tagged_name_keeps_the_fence_key_in_the_lock_keys_cluster_slot() {
    // One cluster node that serves every slot: a script whose keys span two slots fails
    // with CROSSSLOT, so an acquire succeeds only if all three keys share one slot.
    let server = RedisServer::start_with(&["--cluster-enabled", "yes"]);
    let conn = server.conn().await;
    // `ADDSLOTS` of every slot rather than `ADDSLOTSRANGE`, which came in Redis 7.0.
    let slots: Vec<String> = (0..16384).map(|slot: u32| slot.to_string()).collect();
    let mut args = vec!["ADDSLOTS"];
    args.extend(slots.iter().map(String::as_str));
    raw::cmd::<()>(&conn, "CLUSTER", &args).await;
    assert!(
        eventually(|| async {
            let info: String = raw::cmd(&conn, "CLUSTER", &["INFO"]).await;
            info.contains("cluster_state:ok")
        })
        .await
    );

    let tagged = RwMutex::new(conn.clone(), "{orders}");
    let guard = tagged.write().key("42").await.unwrap();
    let slot: i64 = raw::cmd(&conn, "CLUSTER", &["KEYSLOT", "{orders}:42"]).await;
    let fence_slot: i64 = raw::cmd(&conn, "CLUSTER", &["KEYSLOT", "{orders}:42:fence"]).await;
    assert_eq!(fence_slot, slot);
    assert_eq!(
        stored_token(&conn, "{orders}:42:fence").await,
        guard.fencing_token()
    );
    assert!(guard.unlock().await.unwrap());
    let reader = tagged.try_read().key("42").await.unwrap().expect("free");
    assert!(reader.unlock().await.unwrap());

    // Without a tag the keys span slots: as the cluster guide says, Cluster needs the tag.
    let untagged = RwMutex::new(conn.clone(), "orders");
    match untagged.try_write().key("42").await {
        Err(Error::Redis { source, .. }) => {
            assert_eq!(source.code(), Some("CROSSSLOT"), "{source}");
        }
        other => panic!("expected CROSSSLOT, got {other:?}"),
    }
}

#[tokio::test]
async fn a_fence_key_holding_a_non_canonical_number_is_a_wrong_type_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "lk");
    for value in ["1e5", "0x10", " 7", "7.0", "00012", "-0"] {
        raw::cmd::<()>(&conn, "SET", &["lk:fence", value, "PX", "600000"]).await;
        let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        match mx.try_write().await {
            Ok(Some(guard)) => {
                let token = guard.fencing_token();
                assert!(guard.unlock().await.unwrap());
                panic!("{value:?} was taken for a counter and overwritten by token {token}");
            }
            other => assert_wrong_type(other, "lk:fence", "non-integer string"),
        }
        let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        assert_eq!(before, after, "{value:?} was changed");
    }
}

#[tokio::test]
async fn a_sub_lock_that_would_be_another_locks_fence_or_intent_key_is_refused() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "a");

    let whole = mx.try_write().await.unwrap().expect("free");
    for key in ["fence", "lock-intent", "x:fence", "x:lock-intent"] {
        match mx.try_write().key(key).await {
            Err(Error::InvalidKey {
                key: lock_key,
                reason,
                ..
            }) => {
                assert_eq!(lock_key, format!("a:{key}"));
                assert!(reason.contains("key of lock"), "{reason}");
            }
            other => panic!("{key:?}: expected InvalidKey, got {other:?}"),
        }
        let read = mx.read().key(key).await;
        assert!(matches!(read, Err(Error::InvalidKey { .. })), "{read:?}");
    }
    assert!(!whole.is_cancelled(), "the whole lock was not touched");
    assert!(whole.unlock().await.unwrap());
    let named = RwMutex::builder(conn.clone(), "a:fence").build();
    assert!(matches!(named, Err(Error::InvalidOptions(_))), "{named:?}");
    let fence: String = raw::cmd(&conn, "TYPE", &["a:fence"]).await;
    assert_eq!(
        fence, "string",
        "only the whole lock's counter is at a:fence"
    );
}
