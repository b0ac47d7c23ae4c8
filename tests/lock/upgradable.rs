//! `RwMutex::upgradable_read` and `UpgradableReadGuard`: a read lock that plain readers
//! share, that keeps writers and a second upgradable reader out, and that `upgrade`
//! turns into the write lock with no writer in between; `try_upgrade`, `downgrade` back to
//! a plain reader, read-only `exec`, release, and the options that refuse it.

use std::time::Duration;

use crate::common;
use crate::common::{at_once, eventually, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, RwMutex, UpgradableReadGuard};

const KEY: &str = "entry";
const UPGRADER: &str = "entry:upgrader";
const INTENT: &str = "entry:lock-intent";
const TTL: Duration = Duration::from_secs(30);

/// A mutex named `entry` on `server` with a 30 s TTL and release notifications.
async fn notified(server: &RedisServer) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(server.conn().await, KEY)
        .ttl(TTL)
        .notifier(server.client())
        .build()
        .unwrap()
}

#[tokio::test]
async fn plain_readers_share_it_and_writers_and_a_second_upgradable_reader_stay_out() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, TTL);

    let upgradable: UpgradableReadGuard = mx.upgradable_read().await.unwrap();
    assert_eq!(raw::members(&conn, KEY).await, [upgradable.id()]);
    assert_eq!(
        raw::get(&conn, UPGRADER).await.as_deref(),
        Some(upgradable.id())
    );
    let upgrader_pttl = raw::pttl(&conn, UPGRADER).await;
    assert!(
        upgrader_pttl > 0 && upgrader_pttl <= 30_000,
        "{upgrader_pttl}"
    );

    let reader = mx
        .try_read()
        .await
        .unwrap()
        .expect("a plain reader shares it");
    assert!(reader.fencing_token() > upgradable.fencing_token());
    assert!(mx.try_write().await.unwrap().is_none(), "a writer got in");
    assert!(
        mx.try_upgradable_read().await.unwrap().is_none(),
        "a second upgradable reader got in"
    );
    let second = mx
        .upgradable_read()
        .timeout(Duration::from_millis(200))
        .await;
    assert!(matches!(second, Err(Error::Timeout)), "{second:?}");

    // Once it leaves, the next upgradable reader gets in at once, beside the plain one.
    assert!(at_once(upgradable.unlock()).await.unwrap());
    assert!(
        !raw::exists(&conn, UPGRADER).await,
        "the upgrader key is left"
    );
    let next = mx.try_upgradable_read().await.unwrap().expect("free now");
    assert_eq!(raw::get(&conn, UPGRADER).await.as_deref(), Some(next.id()));
    assert!(next.unlock().await.unwrap());
    assert!(reader.unlock().await.unwrap());
    assert!(!raw::exists(&conn, KEY).await);
}

#[tokio::test]
async fn upgrade_waits_for_the_readers_keeps_new_ones_out_and_mints_a_larger_token() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let others = common::mutex(&server.conn().await, KEY, TTL);

    let upgradable = mx.upgradable_read().await.unwrap();
    let read_token = upgradable.fencing_token();
    let reader = others.read().await.unwrap();
    let upgrading = tokio::spawn(upgradable.upgrade());
    // The upgrade sets the intent: new readers and writers stay out.
    assert!(eventually(|| async { raw::exists(&conn, INTENT).await }).await);
    assert!(
        others.try_read().await.unwrap().is_none(),
        "a new reader joined"
    );
    assert!(others.try_write().await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!upgrading.is_finished(), "upgraded beside a reader");

    // The last other reader leaves: its release wakes the upgrade (the fallback timer
    // is 15 s, past LIVENESS).
    let reader_token = reader.fencing_token();
    assert!(reader.unlock().await.unwrap());
    let writer = tokio::time::timeout(LIVENESS, upgrading)
        .await
        .expect("woken by the last reader's release")
        .unwrap()
        .unwrap();
    assert_eq!(raw::key_type(&conn, KEY).await, "string");
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(writer.fencing_token() > reader_token && reader_token > read_token);
    assert!(
        !raw::exists(&conn, INTENT).await,
        "the upgrade's intent is left"
    );
    assert!(!raw::exists(&conn, UPGRADER).await);
    assert!(others.try_read().await.unwrap().is_none());

    // It is a write guard like any other: writes run, it downgrades, it is renewed.
    let mut pipe = redis::pipe();
    pipe.set("cache", "rebuilt").ignore();
    let () = writer.exec(&pipe).await.unwrap();
    let reader = writer.downgrade().await.unwrap();
    assert_eq!(raw::members(&conn, KEY).await, [reader.id()]);
    assert!(reader.unlock().await.unwrap());
    assert!(!raw::exists(&conn, KEY).await);
}

#[tokio::test]
async fn try_upgrade_gives_the_guard_back_while_others_read_and_sets_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, TTL);
    let upgradable = mx.upgradable_read().await.unwrap();
    let reader = mx.read().await.unwrap();

    let upgradable = match upgradable.try_upgrade().await.unwrap() {
        Ok(writer) => panic!("upgraded beside a reader: {writer:?}"),
        Err(upgradable) => upgradable,
    };
    assert!(
        !raw::exists(&conn, INTENT).await,
        "try_upgrade set the intent"
    );
    assert!(!upgradable.is_cancelled());
    assert!(reader.unlock().await.unwrap());
    let writer = upgradable
        .try_upgrade()
        .await
        .unwrap()
        .expect("alone now, it upgrades");
    assert_eq!(raw::get(&conn, KEY).await.as_deref(), Some(writer.id()));
    assert!(writer.unlock().await.unwrap());
}

#[tokio::test]
async fn downgrade_keeps_a_plain_reader_and_lets_the_next_upgradable_reader_in() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server).await;
    let upgradable = mx.upgradable_read().await.unwrap();
    let token = upgradable.fencing_token();
    let waiting = {
        let mx = mx.clone();
        tokio::spawn(async move { mx.upgradable_read().await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());

    let reader = at_once(upgradable.downgrade()).await.unwrap();
    assert_eq!(reader.fencing_token(), token);
    // The waiting upgradable reader is told, and gets in beside the plain one.
    let next = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("woken by the downgrade")
        .unwrap()
        .unwrap();
    let mut members = vec![reader.id().to_owned(), next.id().to_owned()];
    members.sort();
    assert_eq!(raw::members(&conn, KEY).await, members);
    assert_eq!(raw::get(&conn, UPGRADER).await.as_deref(), Some(next.id()));
    assert!(reader.unlock().await.unwrap());
    assert!(next.unlock().await.unwrap());
}

#[tokio::test]
async fn exec_runs_reads_and_refuses_writes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, TTL);
    let _: () = raw::cmd(&conn, "SET", &["cache", "v1"]).await;
    let upgradable = mx.upgradable_read().await.unwrap();
    let mut get = redis::pipe();
    get.get("cache");
    let (value,): (String,) = upgradable.exec(&get).await.unwrap();
    assert_eq!(value, "v1");
    let mut set = redis::pipe();
    set.set("cache", "v2");
    let refused = upgradable.exec::<()>(&set).await;
    assert!(
        matches!(refused, Err(Error::InvalidPipeline { .. })),
        "{refused:?}"
    );
    assert_eq!(raw::get(&conn, "cache").await.as_deref(), Some("v1"));
    upgradable.unlock().await.unwrap();
}

#[tokio::test]
async fn a_lost_upgradable_reader_fires_and_its_upgrade_is_refused() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, TTL);
    let upgradable = mx.upgradable_read().await.unwrap();
    let _: () = raw::cmd(&conn, "DEL", &[KEY]).await;
    let refused = at_once(upgradable.upgrade()).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert!(
        !raw::exists(&conn, KEY).await,
        "the upgrade took a lock it had lost"
    );

    // Found gone by the refresher, too: the token fires as lost.
    let short = common::mutex(&conn, KEY, Duration::from_millis(400));
    let upgradable = short.upgradable_read().await.unwrap();
    let _: () = raw::cmd(&conn, "DEL", &[KEY]).await;
    at_once(upgradable.cancelled()).await;
    assert_eq!(upgradable.cancel_reason(), Some(CancelReason::Lost));
}

#[tokio::test]
async fn the_refresher_keeps_the_upgrader_key_with_the_hold() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, Duration::from_millis(600));
    let upgradable = mx.upgradable_read().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!upgradable.is_cancelled());
    assert!(upgradable.refreshes() >= 2);
    assert_eq!(
        raw::get(&conn, UPGRADER).await.as_deref(),
        Some(upgradable.id())
    );
    assert!(raw::pttl(&conn, UPGRADER).await > 0);
    assert!(
        mx.try_upgradable_read().await.unwrap().is_none(),
        "the upgrader key expired under a live upgradable reader"
    );
    // Dropped, it is released with its upgrader key.
    drop(upgradable);
    assert!(eventually(|| async { !raw::exists(&conn, UPGRADER).await }).await);
    assert!(!raw::exists(&conn, KEY).await);
}

#[tokio::test]
async fn a_dropped_upgrade_releases_the_lock_and_its_intent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, KEY, TTL);
    let upgradable = mx.upgradable_read().await.unwrap();
    let reader = mx.read().await.unwrap();
    let upgrade = tokio::time::timeout(Duration::from_millis(300), upgradable.upgrade()).await;
    assert!(upgrade.is_err(), "upgraded beside a reader");
    assert!(
        eventually(|| async {
            !raw::exists(&conn, INTENT).await && !raw::exists(&conn, UPGRADER).await
        })
        .await,
        "the dropped upgrade left its intent or upgrader key"
    );
    assert_eq!(raw::members(&conn, KEY).await, [reader.id()]);
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn fair_mutexes_refuse_it_before_sending_anything() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let fair = RwMutex::builder(conn.clone(), KEY)
        .fair(true)
        .build()
        .unwrap();
    let refused = at_once(fair.upgradable_read()).await;
    assert!(
        matches!(&refused, Err(Error::InvalidOptions(why)) if why.contains("fair")),
        "{refused:?}"
    );
    let refused = at_once(fair.try_upgradable_read()).await;
    assert!(
        matches!(refused, Err(Error::InvalidOptions(_))),
        "{refused:?}"
    );
    let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["*"]).await;
    assert!(keys.is_empty(), "{keys:?}");
}
