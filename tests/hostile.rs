//! Bad input and hostile conditions: odd and huge names and keys, a server out of memory,
//! a read-only replica, missing passwords and rights, a server busy in a script, and
//! durations too large to represent. Each gives a typed error naming the key, at once,
//! without a panic or a hang, and changes nothing that is not the lock's.
//!
//! Names and keys are `String`s, so "binary" here means every byte sequence UTF-8 allows
//! (NUL, CR/LF, quotes, braces, U+00FF, emoji, ...). Bytes that are not UTF-8 (a lone
//! 0xFF, say) cannot be passed at all: `RwMutex::new`, `builder` and `key` take
//! `impl Into<String>`, so the type system rejects them before anything runs, and no test
//! is needed for them.

mod common;

use std::collections::BTreeSet;
use std::future::IntoFuture;
use std::time::{Duration, Instant};

use common::{at_once, every_acquire, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Refusal, RwMutex, MAX_KEY_BYTES};

/// How soon a refusal must come back: one round trip and the clean-up grace of 100 ms,
/// with plenty of slack for a loaded machine.
const PROMPT: Duration = Duration::from_secs(1);

/// Checks that `err` is `Refused { key, refusal }` whose server reply had error code
/// `code`, and that it names the key (`err.key()` and its message).
fn assert_refused(err: &Error, key: &str, refusal: Refusal, code: &str) {
    match err {
        Error::Refused {
            key: found,
            refusal: found_refusal,
            source,
        } => {
            assert_eq!(found, key, "{err:?}");
            assert_eq!(*found_refusal, refusal, "{err:?}");
            assert_eq!(source.code(), Some(code), "{source:?}");
        }
        other => panic!("expected Refused({refusal:?}) on {key:?}, got {other:?}"),
    }
    assert_names_key(err, key);
    assert!(err.to_string().contains(&refusal.to_string()), "{err}");
}

/// `err.key()` is `key`, and the message shows it (quoted and escaped).
fn assert_names_key(err: &Error, key: &str) {
    assert_eq!(err.key(), Some(key), "{err:?}");
    assert!(err.to_string().contains(&format!("{key:?}")), "{err}");
}

/// Every acquire on `<mx name>:<key>` is refused promptly with `refusal`.
async fn assert_every_acquire_refused(
    mx: &RwMutex<MultiplexedConnection>,
    key: &str,
    refusal: Refusal,
    code: &str,
) {
    let lock_key = format!("{}:{key}", mx.name());
    for (how, took, result) in every_acquire(mx, key).await {
        let err = result.expect_err(how);
        assert_refused(&err, &lock_key, refusal, code);
        assert!(took < PROMPT, "{how} took {took:?}");
    }
}

/// A raw command that may fail.
async fn try_cmd<T: redis::FromRedisValue>(
    conn: &MultiplexedConnection,
    name: &str,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut command = redis::cmd(name);
    for arg in args {
        command.arg(*arg);
    }
    command.query_async(&mut conn.clone()).await
}

/// Every key in the database, byte for byte.
async fn all_keys(conn: &MultiplexedConnection) -> BTreeSet<Vec<u8>> {
    raw::cmd::<Vec<Vec<u8>>>(conn, "KEYS", &["*"])
        .await
        .into_iter()
        .collect()
}

fn key_set<'a>(keys: impl IntoIterator<Item = &'a String>) -> BTreeSet<Vec<u8>> {
    keys.into_iter()
        .map(|key| key.as_bytes().to_vec())
        .collect()
}

async fn dbsize(conn: &MultiplexedConnection) -> i64 {
    raw::cmd(conn, "DBSIZE", &[]).await
}

/// A connection to `server` as `user` (empty for the default user) with `password`.
async fn conn_as(
    server: &RedisServer,
    user: &str,
    password: &str,
) -> redis::RedisResult<MultiplexedConnection> {
    let url = format!("redis://{user}:{password}@127.0.0.1:{}/", server.port());
    redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await
}

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
        let waiting = mx
            .write()
            .key(key)
            .timeout(Duration::from_millis(100))
            .into_future();
        let (raw_conn, intent_key) = (&conn, intent.as_str());
        let saw_intent = common::eventually(move || async move {
            raw::get(raw_conn, intent_key).await.as_deref() == Some("1")
        });
        let (waited, saw_intent) = tokio::join!(waiting, saw_intent);
        assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
        assert!(saw_intent, "no intent at {intent:?}");
        assert!(!raw::exists(&conn, &intent).await, "intent left behind");

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
                Error::InvalidKey { key, reason } => {
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
    // come back; the last test in this file covers a wait that ends before that.)
    let intent = format!("{lock}:lock-intent");
    let waiting = mx
        .write()
        .key(key.as_str())
        .timeout(Duration::from_millis(500))
        .into_future();
    let (raw_conn, intent_key) = (&conn, intent.as_str());
    let saw_intent = common::eventually(move || async move {
        raw::get(raw_conn, intent_key).await.as_deref() == Some("1")
    });
    let (waited, saw_intent) = tokio::join!(waiting, saw_intent);
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(saw_intent, "no 1 MiB intent key");
    assert!(!raw::exists(&conn, &intent).await, "intent left behind");
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

// 3. maxmemory reached with noeviction.

#[tokio::test]
async fn out_of_memory_refuses_new_locks_but_keeps_and_releases_held_ones() {
    common::init_tracing();
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "oom")
        .ttl(Duration::from_millis(400))
        .lock_intent(true)
        .build()
        .unwrap();
    let writer = mx.write().key("held").await.unwrap();
    let reader = mx.read().key("shared").await.unwrap();

    // An empty server may use less than 1 MB; with 2 MB of filler it is surely over.
    raw::cmd::<()>(&conn, "SET", &["filler", &"x".repeat(2 << 20)]).await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "maxmemory", "1mb"]).await;
    let probe = try_cmd::<()>(&conn, "SET", &["probe", "1"])
        .await
        .unwrap_err();
    assert_eq!(probe.code(), Some("OOM"), "{probe}");
    let before = all_keys(&conn).await;

    assert_every_acquire_refused(&mx, "k", Refusal::OutOfMemory, "OOM").await;
    // A writer blocked by the held lock would set the intent: that write is refused too.
    let blocked = at_once(mx.write().key("held")).await.unwrap_err();
    assert_refused(&blocked, "oom:held", Refusal::OutOfMemory, "OOM");
    assert_eq!(
        all_keys(&conn).await,
        before,
        "no lock, intent or fence created"
    );

    // Refresh only extends a TTL, which Redis allows out of memory: no false loss.
    tokio::time::sleep(Duration::from_millis(1200)).await; // three TTLs
    assert!(!writer.is_cancelled(), "{:?}", writer.cancel_reason());
    assert!(!reader.is_cancelled(), "{:?}", reader.cancel_reason());
    assert_eq!(
        raw::get(&conn, "oom:held").await.as_deref(),
        Some(writer.id())
    );
    assert_eq!(
        raw::members(&conn, "oom:shared").await,
        vec![reader.id().to_string()]
    );
    assert!(raw::pttl(&conn, "oom:held").await > 0);

    // Release deletes, which Redis allows out of memory as well.
    assert!(at_once(writer.unlock()).await.unwrap());
    assert!(at_once(reader.unlock()).await.unwrap());
    assert!(!raw::exists(&conn, "oom:held").await);
    assert!(!raw::exists(&conn, "oom:shared").await);
    let still = try_cmd::<()>(&conn, "SET", &["probe", "1"])
        .await
        .unwrap_err();
    assert_eq!(still.code(), Some("OOM"), "still out of memory: {still}");
    assert_eq!(
        raw::get(&conn, "filler").await.map(|f| f.len()),
        Some(2 << 20)
    );
}

// 4. A read-only replica.

#[tokio::test]
async fn a_read_only_replica_refuses_locks_and_nothing_changes() {
    // No diskless-sync delay (5 s by default), so the replica syncs at once.
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let on_primary = primary.conn().await;
    let on_replica = replica.conn().await;
    raw::cmd::<()>(&on_primary, "SET", &["marker", "m"]).await;
    let replica_conn = &on_replica;
    let synced = common::eventually(move || async move {
        let info: String = raw::cmd(replica_conn, "INFO", &["replication"]).await;
        info.contains("master_link_status:up")
            && raw::get(replica_conn, "marker").await.as_deref() == Some("m")
    })
    .await;
    assert!(synced, "replica did not sync:\n{}", replica.log());

    let mx = RwMutex::builder(on_replica.clone(), "ro")
        .lock_intent(true)
        .build()
        .unwrap();
    assert_every_acquire_refused(&mx, "k", Refusal::ReadOnly, "READONLY").await;

    let only_marker = key_set([&"marker".to_string()]);
    assert_eq!(all_keys(&on_replica).await, only_marker);
    assert_eq!(all_keys(&on_primary).await, only_marker);
}

// 5. A password the client lacks.

#[tokio::test]
async fn a_client_without_the_password_is_refused_as_not_authenticated() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    // redis-rs connects without AUTH; only the requests are refused.
    let anonymous = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("connecting needs no password");
    let mx = RwMutex::new(anonymous, "auth");
    assert_every_acquire_refused(&mx, "k", Refusal::NotAuthenticated, "NOAUTH").await;

    let admin = conn_as(&server, "", "s3cret").await.unwrap();
    assert_eq!(dbsize(&admin).await, 0);

    // A wrong password fails when connecting (AUTH is sent then): there is no
    // connection to make a mutex with.
    let wrong = conn_as(&server, "", "wrong").await.map(|_| ()).unwrap_err();
    assert_eq!(
        wrong.kind(),
        redis::ErrorKind::AuthenticationFailed,
        "{wrong:?}"
    );
    assert_eq!(dbsize(&admin).await, 0);
}

// 6. An ACL user without the rights a lock needs.

#[tokio::test]
async fn an_acl_user_without_script_rights_or_key_access_is_refused_with_no_permission() {
    let server = RedisServer::start();
    let admin = server.conn().await;
    let users: [(&str, &[&str]); 3] = [
        // No scripting at all: EVALSHA is refused.
        (
            "noscript",
            &["~*", "&*", "+@all", "-evalsha", "-eval", "-script"],
        ),
        // EVALSHA allowed but SCRIPT LOAD not: refused when the script must be loaded.
        ("noload", &["~*", "&*", "+@all", "-script"]),
        // Every command, but only keys under `other:`.
        ("otherkeys", &["~other:*", "&*", "+@all"]),
    ];
    for (user, rules) in users {
        let mut args = vec!["SETUSER", user, "on", ">pw"];
        args.extend_from_slice(rules);
        raw::cmd::<()>(&admin, "ACL", &args).await;
        let conn = conn_as(&server, user, "pw").await.unwrap();
        let mx = RwMutex::builder(conn, "acl")
            .lock_intent(true)
            .build()
            .unwrap();
        assert_every_acquire_refused(&mx, "k", Refusal::NoPermission, "NOPERM").await;
        assert_eq!(dbsize(&admin).await, 0, "{user}: nothing created");
    }
}

// 7. A server busy in another client's script.

/// A connection without a response timeout, to run a script that never ends by itself.
async fn patient_conn(server: &RedisServer) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// Starts an endless Lua loop on its own connection; the handle yields its reply.
async fn start_busy_script(
    server: &RedisServer,
) -> tokio::task::JoinHandle<redis::RedisResult<redis::Value>> {
    let mut busy = patient_conn(server).await;
    tokio::spawn(async move {
        redis::cmd("EVAL")
            .arg("local i = 0 while true do i = i + 1 end")
            .arg(0)
            .query_async(&mut busy)
            .await
    })
}

/// Checks that the busy script ended by SCRIPT KILL, not otherwise.
async fn assert_killed(busy: tokio::task::JoinHandle<redis::RedisResult<redis::Value>>) {
    let killed = at_once(busy).await.unwrap().unwrap_err();
    assert!(killed.to_string().contains("Script killed"), "{killed}");
}

#[tokio::test]
async fn a_busy_script_gives_busy_refusals_and_locks_work_after_script_kill() {
    common::init_tracing();
    let server = RedisServer::start();
    let admin = patient_conn(&server).await;
    raw::cmd::<()>(&admin, "CONFIG", &["SET", "busy-reply-threshold", "100"]).await;
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "busy", Duration::from_millis(400));
    let held = mx.write().key("held").await.unwrap();

    let busy = start_busy_script(&server).await;
    // Past busy-reply-threshold, Redis answers every other command with BUSY.
    let probe = &conn;
    let is_busy = common::eventually(move || async move {
        try_cmd::<String>(probe, "PING", &[])
            .await
            .is_err_and(|err| err.code() == Some("BUSY"))
    })
    .await;
    assert!(is_busy, "the script did not make the server busy");

    // The threshold (100 ms) is below redis-rs's response timeout (500 ms), so a request
    // sent now gets the BUSY reply rather than timing out.
    assert_every_acquire_refused(&mx, "k", Refusal::Busy, "BUSY").await;

    // The held guard cannot refresh (each try gets BUSY and is retried every ttl/8), so it
    // expires at its validity deadline; its release is refused too, and reported.
    at_once(held.cancelled()).await;
    assert_eq!(held.cancel_reason(), Some(CancelReason::Expired));
    let released = at_once(held.unlock()).await.unwrap_err();
    assert_refused(&released, "busy:held", Refusal::Busy, "BUSY");

    let killed: String = raw::cmd(&admin, "SCRIPT", &["KILL"]).await;
    assert_eq!(killed, "OK");
    assert_killed(busy).await;

    // Afterwards everything works again. The guard gave up a few ms before its key
    // expires (the drift margin), so wait for that, then the lock is free.
    let gone = common::eventually(move || async move { !raw::exists(probe, "busy:held").await });
    assert!(gone.await, "the expired lock's key did not expire");
    let again = mx.try_write().key("k").await.unwrap().expect("free");
    let taken = mx.try_write().key("held").await.unwrap().expect("expired");
    assert!(again.unlock().await.unwrap());
    assert!(taken.unlock().await.unwrap());
    assert_eq!(dbsize(&conn).await, 2, "only the two fence keys are left");
}

#[tokio::test]
async fn a_busy_script_past_the_response_timeout_gives_a_timeout_error() {
    let server = RedisServer::start();
    let admin = patient_conn(&server).await;
    // Redis reads nothing from other clients until the script has run this long, so a
    // request sent earlier waits for it: 1 s is past redis-rs's 500 ms response timeout.
    raw::cmd::<()>(&admin, "CONFIG", &["SET", "busy-reply-threshold", "1000"]).await;
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "slow");

    let busy = start_busy_script(&server).await;
    tokio::time::sleep(Duration::from_millis(100)).await; // the script is running
    let started = Instant::now();
    let err = at_once(mx.try_write().key("k")).await.unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Redis { key, source } => {
            assert_eq!(key, "slow:k");
            assert!(source.is_timeout(), "{source:?}");
        }
        other => panic!("expected a timed-out Redis error, got {other:?}"),
    }
    assert_names_key(&err, "slow:k");
    assert!(
        took >= Duration::from_millis(450) && took < PROMPT,
        "{took:?}"
    );

    // SCRIPT KILL, too, is read only once the threshold has passed.
    let killed: String = raw::cmd(&admin, "SCRIPT", &["KILL"]).await;
    assert_eq!(killed, "OK");
    assert_killed(busy).await;

    // The timed-out request did not take the lock (it was answered BUSY in the end), and
    // the same connection works.
    let guard = mx.try_write().key("k").await.unwrap().expect("free");
    assert!(guard.unlock().await.unwrap());
}

// 8. Durations too large to represent.

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

// A slow server (found with the 1 MiB keys above, whose first attempt can outlast a short
// wait): a wait that ends while its first attempt is in flight.

#[tokio::test]
async fn a_wait_that_gives_up_during_its_first_attempt_clears_the_intent_it_sets() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "slow")
        .ttl(Duration::from_secs(10))
        .lock_intent(true)
        .build()
        .unwrap();
    let holder = mx.write().await.unwrap();

    // Frozen, the server reads the attempt only after the wait has timed out and
    // cleaned up; then it runs the attempt (which sets the intent, as the lock is held)
    // and the clean-up after it, in that order, on the one connection.
    server.pause();
    let waited = mx.write().timeout(Duration::from_millis(50)).await;
    server.resume();
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    tokio::time::sleep(Duration::from_millis(200)).await; // both have run
    assert!(
        !raw::exists(&conn, "slow:lock-intent").await,
        "intent left for {} ms, keeping readers out",
        raw::pttl(&conn, "slow:lock-intent").await
    );
    assert!(holder.unlock().await.unwrap());
}
