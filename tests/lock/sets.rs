//! `RwMutex::lock_all` and `try_lock_all`: read and write locks on several keys taken in
//! one step, each held as a single lock holds it; a set's token, `exec` over every key,
//! release, and the sets refused before anything is sent.

use std::time::Duration;

use crate::common::{at_once, eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Mode, MultiGuard, RwMutex, MAX_SET_KEYS};

const TTL: Duration = Duration::from_secs(30);

/// A mutex named `bank` on `server` with a 30 s TTL, the lock intent on and release
/// notifications.
async fn notified(server: &RedisServer) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(server.conn().await, "bank")
        .ttl(TTL)
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_set_holds_each_key_as_a_single_lock_does_with_its_own_token() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let before = mx.write().key("acct:1").await.unwrap();
    let earlier = before.fencing_token();
    assert!(before.unlock().await.unwrap());

    let set: MultiGuard = mx
        .lock_all()
        .write(["acct:1", "acct:2"])
        .read(["rates"])
        .await
        .unwrap();
    let id = set.id().to_owned();
    assert_eq!(raw::get(&conn, "bank:acct:1").await.as_deref(), Some(&*id));
    assert_eq!(raw::get(&conn, "bank:acct:2").await.as_deref(), Some(&*id));
    assert_eq!(raw::members(&conn, "bank:rates").await, [id.as_str()]);
    for key in ["bank:acct:1", "bank:acct:2", "bank:rates"] {
        let pttl = raw::pttl(&conn, key).await;
        assert!(pttl > 29_000 && pttl <= 30_000, "{key}: {pttl}");
    }
    let token = |key| set.fencing_token(key).unwrap();
    assert!(
        token("acct:1") > earlier,
        "acct:1's token grew past its last holder's"
    );
    assert_eq!(
        raw::stored_token(&conn, "bank:acct:2:fence").await,
        token("acct:2")
    );
    assert_eq!(set.fencing_token("bank:rates"), Some(token("rates")));
    assert_eq!(set.fencing_token("nope"), None);
    assert_eq!(set.mode("acct:1"), Some(Mode::Write));
    assert_eq!(set.mode("rates"), Some(Mode::Read));
    assert_eq!(
        set.keys().collect::<Vec<_>>(),
        ["acct:1", "acct:2", "rates"]
    );

    // Inspection sees each key as a single lock's.
    let state = mx.inspect("acct:2").await.unwrap();
    assert_eq!(state.mode(), Some(Mode::Write));
    assert_eq!(state.holders(), std::slice::from_ref(&id));
    assert_eq!(state.last_fencing_token(), Some(token("acct:2")));
    let state = mx.inspect("rates").await.unwrap();
    assert_eq!(state.mode(), Some(Mode::Read));
    assert_eq!(state.holders(), std::slice::from_ref(&id));

    // Single locks see every key: a reader shares the read key, nobody gets a write key.
    assert!(mx.try_write().key("acct:1").await.unwrap().is_none());
    assert!(mx.try_read().key("acct:2").await.unwrap().is_none());
    let reader = mx.try_read().key("rates").await.unwrap().expect("shared");
    assert!(mx.try_write().key("rates").await.unwrap().is_none());
    reader.unlock().await.unwrap();

    assert!(set.unlock().await.unwrap());
    for key in ["bank:acct:1", "bank:acct:2", "bank:rates"] {
        assert!(!raw::exists(&conn, key).await, "{key} left behind");
    }
}

#[tokio::test]
async fn an_attempt_takes_every_key_or_changes_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let holder = mx.write().key("b").await.unwrap();

    let tried = mx.try_lock_all().write(["a", "b", "c"]).await.unwrap();
    assert!(tried.is_none(), "b is held");
    for key in [
        "bank:a",
        "bank:c",
        "bank:a:lock-intent",
        "bank:c:lock-intent",
    ] {
        assert!(!raw::exists(&conn, key).await, "{key} was changed");
    }
    let timed_out = mx
        .lock_all()
        .write(["a", "b", "c"])
        .timeout(Duration::from_millis(300))
        .await;
    assert!(matches!(timed_out, Err(Error::Timeout)), "{timed_out:?}");
    assert!(!raw::exists(&conn, "bank:a").await);
    let gone = eventually(|| async { !raw::exists(&conn, "bank:a:lock-intent").await }).await;
    assert!(gone, "the intent it set was not removed when it gave up");
    holder.unlock().await.unwrap();
    let set = at_once(mx.try_lock_all().write(["a", "b", "c"]))
        .await
        .unwrap()
        .expect("free now");
    set.unlock().await.unwrap();
}

#[tokio::test]
async fn a_waiting_set_keeps_readers_out_of_its_write_keys_and_is_woken_by_a_release() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let reader = mx.read().key("b").await.unwrap();

    let waiting = tokio::spawn({
        let mx = mx.clone();
        async move { mx.lock_all().write(["a", "b"]).await }
    });
    let intents = eventually(|| async {
        raw::exists(&conn, "bank:a:lock-intent").await
            && raw::exists(&conn, "bank:b:lock-intent").await
    })
    .await;
    assert!(intents, "the waiting set set no intent on its write keys");
    assert!(
        mx.try_read().key("a").await.unwrap().is_none(),
        "a new reader got into a write key the set waits for"
    );
    assert!(!waiting.is_finished());
    // The release publishes; with a 30 s TTL only the message can wake it in time.
    reader.unlock().await.unwrap();
    let set = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap();
    assert!(!raw::exists(&conn, "bank:a:lock-intent").await);
    assert!(!raw::exists(&conn, "bank:b:lock-intent").await);
    set.unlock().await.unwrap();
}

#[tokio::test]
async fn a_key_deleted_under_a_set_fires_its_token_refuses_exec_and_releases_the_rest() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let set = mx.lock_all().write(["a", "b"]).read(["c"]).await.unwrap();
    let mut pipe = redis::pipe();
    pipe.cmd("INCR").arg("counter").cmd("INCR").arg("counter");
    let (one, two): (i64, i64) = set.exec(&pipe).await.unwrap();
    assert_eq!((one, two), (1, 2));

    raw::cmd::<i64>(&conn, "DEL", &["bank:b"]).await;
    let refused = set.exec::<(i64, i64)>(&pipe).await;
    match refused {
        Err(Error::NotHeld { key, .. }) => assert_eq!(key, "bank:b"),
        other => panic!("{other:?}"),
    }
    assert_eq!(raw::get(&conn, "counter").await.as_deref(), Some("2"));
    assert!(set.is_cancelled());
    assert_eq!(set.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(set.lost_key(), Some("b"));
    let released = eventually(|| async {
        !raw::exists(&conn, "bank:a").await && !raw::exists(&conn, "bank:c").await
    })
    .await;
    assert!(released, "the other keys were not released");
    assert!(
        !set.unlock().await.unwrap(),
        "unlock said every key was held"
    );
}

#[tokio::test]
async fn a_set_of_read_keys_is_refused_writes_and_cancelling_releases_every_key() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let set = mx.lock_all().read(["a", "b"]).await.unwrap();
    let mut pipe = redis::pipe();
    pipe.cmd("SET").arg("x").arg("1");
    let refused = set.exec::<()>(&pipe).await;
    assert!(
        matches!(refused, Err(Error::InvalidPipeline { .. })),
        "{refused:?}"
    );
    set.cancellation_token().cancel();
    assert_eq!(set.cancel_reason(), Some(CancelReason::Cancelled));
    let released = eventually(|| async {
        !raw::exists(&conn, "bank:a").await && !raw::exists(&conn, "bank:b").await
    })
    .await;
    assert!(released, "cancelling the set released nothing");
    drop(set);

    let parent = tokio_util::sync::CancellationToken::new();
    let set = mx
        .lock_all()
        .write(["a"])
        .read(["b"])
        .parent(parent.clone())
        .await
        .unwrap();
    parent.cancel();
    assert_eq!(set.cancel_reason(), Some(CancelReason::ParentCancelled));
    let released = eventually(|| async { !raw::exists(&conn, "bank:a").await }).await;
    assert!(released);
}

#[tokio::test]
async fn bad_sets_get_typed_errors_before_anything_is_sent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let (_, before) = raw::calls(&conn, "evalsha").await;
    let empty = mx.lock_all().await;
    assert!(
        matches!(&empty, Err(Error::InvalidKey { key, .. }) if key == "bank"),
        "{empty:?}"
    );
    let twice = mx.lock_all().write(["a", "b", "a"]).await;
    assert!(
        matches!(&twice, Err(Error::InvalidKey { key, reason, .. }) if key == "bank:a" && reason.contains("twice")),
        "{twice:?}"
    );
    let both = mx.try_lock_all().write(["a"]).read(["a"]).await;
    assert!(
        matches!(&both, Err(Error::InvalidKey { key, reason, .. }) if key == "bank:a" && reason.contains("reads and writes")),
        "{both:?}"
    );
    let many: Vec<String> = (0..=MAX_SET_KEYS).map(|i| i.to_string()).collect();
    let too_many = mx.lock_all().write(many).await;
    assert!(
        matches!(&too_many, Err(Error::InvalidKey { reason, .. }) if reason.contains("at most")),
        "{too_many:?}"
    );
    let bad_key = mx.lock_all().write(["a:fence"]).await;
    assert!(
        matches!(&bad_key, Err(Error::InvalidKey { .. })),
        "{bad_key:?}"
    );
    let tagged = RwMutex::builder(conn.clone(), "bank")
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let cross = tagged.lock_all().write(["a", "b"]).await;
    assert!(
        matches!(&cross, Err(Error::CrossSlot { key, foreign, .. }) if key == "bank:{a}" && foreign == "bank:{b}"),
        "{cross:?}"
    );
    let fair = RwMutex::builder(conn.clone(), "bank")
        .fair(true)
        .build()
        .unwrap();
    let refused = fair.lock_all().write(["a"]).await;
    assert!(
        matches!(&refused, Err(Error::InvalidOptions(why)) if why.contains("fair")),
        "{refused:?}"
    );
    let (_, after) = raw::calls(&conn, "evalsha").await;
    assert_eq!(before, after, "a refused set sent a script");
    // The largest set is taken whole.
    let largest: Vec<String> = (0..MAX_SET_KEYS).map(|i| format!("k{i}")).collect();
    let set = tokio::time::timeout(LIVENESS, mx.lock_all().write(largest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(set.keys().count(), MAX_SET_KEYS);
    assert!(set.unlock().await.unwrap());
}
