//! Odd and huge names and keys: every byte sequence UTF-8 allows goes to Redis and back
//! exactly, touching no neighbouring key, and a name or key longer than
//! `MAX_KEY_BYTES` is refused before anything is sent. Each gives a typed error naming
//! the key, at once, without a panic or a hang.
//!
//! Names and keys are `String`s, so "binary" here means every byte sequence UTF-8 allows
//! (NUL, CR/LF, quotes, braces, U+00FF, emoji, ...). Bytes that are not UTF-8 (a lone
//! 0xFF, say) cannot be passed at all: `RwMutex::new`, `builder` and `key` take
//! `impl Into<String>`, so the type system rejects them before anything runs, and no test
//! is needed for them.

use std::future::IntoFuture;
use std::time::Duration;

use crate::common;
use crate::common::hostile::{all_keys, assert_names_key, dbsize, key_set, PROMPT};
use crate::common::{every_acquire, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex, MAX_KEY_BYTES};

// 1. Binary names and keys.

/// Names and keys made of the bytes most likely to be cut, escaped or reinterpreted on
/// the way: NUL, CR/LF, spaces, hash-tag braces, quotes, U+00FF (bytes C3 BF), emoji,
/// and the protocol's own `:lock-intent` and `:fence` suffixes.
const NAMES: [&str; 8] = [
    "nul\0name",
    "cr\r\nlf",
    " spaced name ",
    "{tag}",
    "quo\"te'",
    "\u{ff}",
    "emoji\u{1f512}",
    "a:lock-intent:b",
];
const KEYS: [&str; 8] = [
    "k\0\0ey",
    "\r\n",
    " ",
    "}{",
    "\\\"'",
    "\u{ff}\u{fe}",
    "\u{1f5dd}\u{fe0f}",
    ":lock-intent:fence:x",
];

/// Keys one cut, one byte or one suffix away from `lock`: what a mangled key would hit.
fn decoys(lock: &str) -> Vec<String> {
    let mut decoys = vec![format!("{lock}x"), format!("{lock}\0")];
    let mut shorter = lock.to_owned();
    shorter.pop();
    decoys.push(shorter);
    if let Some(cut) = lock.find(|c: char| !c.is_ascii_alphanumeric()) {
        decoys.push(lock[..cut].to_owned());
    }
    decoys.push(lock.replace('\0', ""));
    decoys.push(lock.trim().to_owned());
    decoys.push(lock.replace("\r\n", "\n"));
    let own = [
        lock.to_owned(),
        format!("{lock}:lock-intent"),
        format!("{lock}:fence"),
    ];
    decoys.retain(|decoy| !decoy.is_empty() && !own.contains(decoy));
    decoys.sort();
    decoys.dedup();
    decoys
}

#[tokio::test]
async fn binary_names_and_keys_round_trip_byte_exactly() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mut cases: Vec<(&str, &str)> = NAMES.iter().map(|name| (*name, "")).collect();
    cases.extend(NAMES.iter().copied().zip(KEYS));

    for (name, key) in cases {
        let lock = if key.is_empty() {
            name.to_owned()
        } else {
            format!("{name}:{key}")
        };
        let (intent, fence) = (format!("{lock}:lock-intent"), format!("{lock}:fence"));
        raw::cmd::<()>(&conn, "FLUSHALL", &[]).await;
        let decoys = decoys(&lock);
        for decoy in &decoys {
            raw::cmd::<()>(&conn, "SET", &[decoy, "decoy"]).await;
        }
        let mx = RwMutex::builder(conn.clone(), name)
            .ttl(Duration::from_secs(10))
            .lock_intent(true)
            .build()
            .unwrap();
        let other = RwMutex::new(conn.clone(), name);

        // A writer: the exact key holds its id; nobody else gets in.
        let writer = mx.write().key(key).await.unwrap();
        assert_eq!(writer.key(), lock);
        let stored: Vec<u8> = raw::cmd(&conn, "GET", &[&lock]).await;
        assert_eq!(stored, writer.id().as_bytes(), "{lock:?}");
        assert_eq!(
            all_keys(&conn).await,
            key_set(decoys.iter().chain([&lock, &fence])),
            "{lock:?}"
        );
        assert!(other.try_write().key(key).await.unwrap().is_none());
        assert!(other.try_read().key(key).await.unwrap().is_none());

        // A writer waiting behind it sets exactly `<lock>:lock-intent`, and clears it.
        waiting_writer_sets_and_clears(&mx, &conn, key, &intent, 100).await;

        // Release removes exactly that key.
        assert!(writer.unlock().await.unwrap());
        assert_eq!(
            all_keys(&conn).await,
            key_set(decoys.iter().chain([&fence])),
            "{lock:?}"
        );

        // Readers share the exact key as a set of their ids; a writer stays out.
        let r1 = mx.read().key(key).await.unwrap();
        let r2 = other.try_read().key(key).await.unwrap().unwrap();
        let mut ids = vec![r1.id().as_bytes().to_vec(), r2.id().as_bytes().to_vec()];
        ids.sort();
        let mut members: Vec<Vec<u8>> = raw::cmd(&conn, "SMEMBERS", &[&lock]).await;
        members.sort();
        assert_eq!(members, ids, "{lock:?}");
        assert!(other.try_write().key(key).await.unwrap().is_none());
        assert!(r1.unlock().await.unwrap());
        assert!(r2.unlock().await.unwrap());
        assert_eq!(
            all_keys(&conn).await,
            key_set(decoys.iter().chain([&fence])),
            "{lock:?}"
        );

        // The neighbours were never touched.
        for decoy in &decoys {
            assert_eq!(raw::get(&conn, decoy).await.as_deref(), Some("decoy"));
            assert_eq!(raw::pttl(&conn, decoy).await, -1, "{decoy:?}");
        }

        // An error about such a key names it exactly, escaped in the message.
        raw::cmd::<i64>(&conn, "HSET", &[&lock, "f", "v"]).await;
        let err = mx.try_write().key(key).await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
        assert_names_key(&err, &lock);
        assert!(!err.to_string().contains('\0') && !err.to_string().contains('\r'));
    }
}

// 2. Very long names and keys.

#[tokio::test]
async fn names_and_keys_longer_than_max_key_bytes_are_rejected_before_sending() {
    let server = RedisServer::start();
    let conn = server.conn().await;

    let long_name = "n".repeat(MAX_KEY_BYTES + 1);
    match RwMutex::builder(conn.clone(), long_name.clone()).build() {
        Err(Error::InvalidOptions(message)) => {
            assert!(message.contains("MAX_KEY_BYTES"), "{message}");
            assert!(message.len() < 400, "{} chars", message.len());
        }
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    let unchecked = RwMutex::new(conn.clone(), long_name);
    for (how, _, result) in every_acquire(&unchecked, "").await {
        match result {
            Err(Error::InvalidOptions(message)) => assert!(message.len() < 400, "{how}"),
            other => panic!("{how}: expected InvalidOptions, got {other:?}"),
        }
    }

    // `big:<key>` one byte over the limit, and far over it.
    let mx = RwMutex::new(conn.clone(), "big");
    for len in [MAX_KEY_BYTES + 1, 16 * MAX_KEY_BYTES] {
        // Two-byte characters, so the cut in the message falls between characters.
        let room = len - "big:".len();
        let key = "\u{ff}".repeat(room / 2) + &"k".repeat(room % 2);
        let lock = format!("big:{key}");
        assert_eq!(lock.len(), len);
        for (how, took, result) in every_acquire(&mx, &key).await {
            let err = result.expect_err(how);
            match &err {
                Error::InvalidKey { key, reason, .. } => {
                    assert_eq!(key.len(), len, "{how}: the error holds the whole key");
                    assert!(*key == lock, "{how}");
                    assert!(reason.contains("MAX_KEY_BYTES"), "{reason}");
                }
                other => panic!("{how}: expected InvalidKey, got {other:?}"),
            }
            assert_eq!(err.key(), Some(lock.as_str()));
            let message = err.to_string();
            assert!(message.chars().count() < 400, "{how}: {message}");
            // The preview: the key's first 128 characters, quoted, then its length.
            let preview: String = lock.chars().take(128).collect();
            assert!(message.contains(&format!("{preview:?}...")), "{message}");
            assert!(message.contains(&format!("({len} bytes)")), "{message}");
            assert!(took < PROMPT, "{how} took {took:?}");
        }
    }
    assert_eq!(dbsize(&conn).await, 0, "nothing was stored");
    // Nor sent: this server has not yet run or loaded a single script.
    let stats: String = raw::cmd(&conn, "INFO", &["commandstats"]).await;
    for command in ["cmdstat_evalsha", "cmdstat_eval:", "cmdstat_script"] {
        assert!(!stats.contains(command), "{command} was sent:\n{stats}");
    }

    // The shared connection is still usable: no oversized request broke it.
    let fine = mx.try_write().key("fine").await.unwrap().expect("free");
    assert_eq!(
        raw::get(&conn, "big:fine").await.as_deref(),
        Some(fine.id())
    );
    assert!(fine.unlock().await.unwrap());
    let stats: String = raw::cmd(&conn, "INFO", &["commandstats"]).await;
    assert!(
        stats.contains("cmdstat_evalsha"),
        "the check above can see scripts"
    );
}

#[tokio::test]
async fn a_key_of_exactly_max_key_bytes_works_at_the_smallest_bulk_limit() {
    let server = RedisServer::start_with(&["--proto-max-bulk-len", "1mb"]);
    let conn = server.conn().await;
    let limit: Vec<String> = raw::cmd(&conn, "CONFIG", &["GET", "proto-max-bulk-len"]).await;
    assert_eq!(limit[1], (1024 * 1024).to_string());

    // The intent key, `<lock>:lock-intent`, is then exactly 1 MiB: the largest bulk
    // string this server takes.
    let mx = RwMutex::builder(conn.clone(), "max")
        .lock_intent(true)
        .build()
        .unwrap();
    let key = "k".repeat(MAX_KEY_BYTES - "max:".len());
    let lock = format!("max:{key}");
    assert_eq!(lock.len(), MAX_KEY_BYTES);

    let writer = mx.write().key(key.as_str()).await.unwrap();
    assert_eq!(writer.key(), lock);
    assert_eq!(raw::get(&conn, &lock).await.as_deref(), Some(writer.id()));
    // A waiting writer sets the 1 MiB intent key and clears it when its wait times out.
    // (The timeout leaves time for the first attempt, which carries 3 MiB of keys, to
    // come back; `tests/protocol/hostile/busy.rs` covers a wait that ends before that.)
    let intent = format!("{lock}:lock-intent");
    waiting_writer_sets_and_clears(&mx, &conn, &key, &intent, 500).await;
    assert!(writer.unlock().await.unwrap());
    assert!(!raw::exists(&conn, &lock).await);

    let reader = mx
        .try_read()
        .key(key.as_str())
        .await
        .unwrap()
        .expect("free");
    assert_eq!(
        raw::members(&conn, &lock).await,
        vec![reader.id().to_string()]
    );
    assert!(reader.unlock().await.unwrap());
    assert_eq!(dbsize(&conn).await, 1, "only the fence key is left");

    // A name of exactly MAX_KEY_BYTES is accepted and works too.
    let named = RwMutex::builder(conn.clone(), "m".repeat(MAX_KEY_BYTES))
        .build()
        .unwrap();
    let guard = named.try_write().await.unwrap().expect("free");
    assert!(guard.unlock().await.unwrap());
}

/// A writer waiting `timeout_ms` for `<name>:<key>` sets `intent` to its id while it
/// waits and clears it when it times out.
async fn waiting_writer_sets_and_clears(
    mx: &RwMutex<MultiplexedConnection>,
    conn: &MultiplexedConnection,
    key: &str,
    intent: &str,
    timeout_ms: u64,
) {
    let waiting = mx
        .write()
        .key(key)
        .timeout(Duration::from_millis(timeout_ms))
        .into_future();
    let saw_intent = common::eventually(move || async move {
        raw::get(conn, intent)
            .await
            .is_some_and(|id| id.len() == 32)
    });
    let (waited, saw_intent) = tokio::join!(waiting, saw_intent);
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(
        saw_intent,
        "no intent at the {}-byte intent key",
        intent.len()
    );
    // The wait waits a short grace for its clean-up and leaves the rest to the
    // background (src/wait/cleanup.rs), which a loaded machine can need.
    let cleared = common::eventually(|| async { !raw::exists(conn, intent).await }).await;
    assert!(cleared, "intent left behind");
}
