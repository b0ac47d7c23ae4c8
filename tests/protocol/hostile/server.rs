//! A server that refuses: out of memory, a read-only replica, a missing password, an
//! ACL user without the rights a lock needs. Each gives a typed error naming the key, at
//! once, without a panic or a hang, and changes nothing that is not the lock's.

use std::time::Duration;

use crate::common;
use crate::common::either::Either;
use crate::common::hostile::{
    all_keys, assert_every_acquire_refused, assert_refused, dbsize, key_set, try_cmd,
};
use crate::common::{at_once, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Refusal, RwMutex, Semaphore};

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

// 1. maxmemory reached with noeviction.

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
    // A key whose fence this mutex has seen: its readers count without reading it first
    // (and a writer takes the fast path), both adding before they check.
    let warm = mx.read().key("counted").await.unwrap();
    assert!(warm.unlock().await.unwrap());

    // Fair queues whose one waiter stopped attempting long ago: a request's script drops
    // it, a removal, which OOM allows, and which would let the request's own write through.
    let lapsed = [("oomfair:lapsed", "w:gone"), ("oomsem:lapsed", "p:gone")];
    for (lock, member) in lapsed {
        for suffix in ["queue", "queue-deadline"] {
            let key = format!("{lock}:{suffix}");
            raw::cmd::<()>(&conn, "ZADD", &[&key, "1", member]).await;
            raw::cmd::<()>(&conn, "PEXPIRE", &[&key, "60000"]).await;
        }
    }
    // An empty server may use less than 1 MB; with 2 MB of filler it is surely over.
    raw::cmd::<()>(&conn, "SET", &["filler", &"x".repeat(2 << 20)]).await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "maxmemory", "1mb"]).await;
    let probe = try_cmd::<()>(&conn, "SET", &["probe", "1"])
        .await
        .unwrap_err();
    assert_eq!(probe.code(), Some("OOM"), "{probe}");
    let before = all_keys(&conn).await;

    assert_every_acquire_refused(&mx, "k", Refusal::OutOfMemory, "OOM").await;
    // A counting reader first: a failed request forgets the fence it had seen.
    let refused = at_once(mx.read().key("counted")).await.unwrap_err();
    assert_refused(&refused, "oom:counted", Refusal::OutOfMemory, "OOM");
    assert_every_acquire_refused(&mx, "counted", Refusal::OutOfMemory, "OOM").await;
    // So is every fair one, with nobody queued (the scripts then write nothing before the
    // lock: a write that OOM allows, a removal, would let the lock's write through).
    let fair = RwMutex::builder(conn.clone(), "oomfair")
        .fair(true)
        .build()
        .unwrap();
    assert_every_acquire_refused(&fair, "k", Refusal::OutOfMemory, "OOM").await;
    assert_every_acquire_refused(&fair, "lapsed", Refusal::OutOfMemory, "OOM").await;
    // And a permit of a semaphore, fair or not (fair, behind a lapsed waiter too).
    for (fair, keys) in [(false, &["k"][..]), (true, &["k", "lapsed"][..])] {
        let sem = Semaphore::builder(conn.clone(), "oomsem", 2)
            .fair(fair)
            .build()
            .unwrap();
        for key in keys {
            let lock = format!("oomsem:{key}");
            let refused = at_once(sem.acquire().key(*key)).await.unwrap_err();
            assert_refused(&refused, &lock, Refusal::OutOfMemory, "OOM");
            let refused = at_once(sem.try_acquire().key(*key)).await.unwrap_err();
            assert_refused(&refused, &lock, Refusal::OutOfMemory, "OOM");
        }
    }
    // Refused before the purge: the lapsed waiters are still there.
    for (lock, _) in lapsed {
        let queued = raw::cmd::<i64>(&conn, "ZCARD", &[&format!("{lock}:queue")]).await;
        assert_eq!(queued, 1, "{lock}");
    }
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

    // A guarded write is refused as a whole, typed, with nothing changed; a guarded read runs.
    let mut write = redis::pipe();
    write.set("oom:data", "x").ignore().strlen("filler");
    let refused = at_once(writer.exec::<(i64,)>(&write)).await.unwrap_err();
    assert_refused(&refused, "oom:held", Refusal::OutOfMemory, "OOM");
    assert!(!raw::exists(&conn, "oom:data").await);
    let mut read = redis::pipe();
    read.strlen("filler");
    let (len,): (i64,) = at_once(writer.exec(&read)).await.unwrap();
    assert_eq!(len, 2 << 20);
    assert!(
        !writer.is_cancelled(),
        "a refused write does not end the lock"
    );

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

// 2. A read-only replica.

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

// 3. A password the client lacks.

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

// 4. An ACL user without the rights a lock needs.

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
        // EVALSHA allowed but EVAL not: refused when the script must be sent (NOSCRIPT
        // on a fresh server).
        ("noeval", &["~*", "&*", "+@all", "-eval", "-script"]),
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

/// A user with every key but no Pub/Sub channel: publishing the release is refused
/// inside `unlock.lua`, which must not turn the release itself into an error.
#[tokio::test]
async fn a_user_without_channel_rights_still_releases() {
    let server = RedisServer::start();
    let admin = server.conn().await;
    raw::cmd::<()>(
        &admin,
        "ACL",
        &[
            "SETUSER",
            "nochannels",
            "on",
            ">pw",
            "~*",
            "resetchannels",
            "+@all",
        ],
    )
    .await;
    let conn = conn_as(&server, "nochannels", "pw").await.unwrap();
    let mx = RwMutex::new(conn, "acl");
    for write in [true, false] {
        let guard = if write {
            Either::from(mx.write().await.unwrap())
        } else {
            Either::from(mx.read().await.unwrap())
        };
        assert!(guard.unlock().await.unwrap(), "write {write}");
        assert_eq!(dbsize(&admin).await, 1, "only the fence key is left");
    }
}
