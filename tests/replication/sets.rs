//! Sets (`lock_all`) on a primary with replicas, as single locks are: with
//! `replicas(1, ..)` every key of a set is on the replica when the request returns, its
//! renewals are acknowledged too, and a frozen replica makes a set fail with
//! `Error::NotReplicated` leaving no key; with the feature `sentinel`, a set over a
//! `SentinelConnection` lands on the primary, waits, is woken by a release through
//! `Notifier::sentinel`, and is released.

use std::time::{Duration, Instant};

use crate::common::{eventually, raw, LIVENESS};
use crate::replicas::{patient, replicated};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex};

/// A mutex `bank` on `conn` with `ttl`, each acquire and renewal acknowledged by one
/// replica within `timeout`.
fn acknowledged(
    conn: &MultiplexedConnection,
    ttl: Duration,
    timeout: Duration,
) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(conn.clone(), "bank")
        .ttl(ttl)
        .replicas(1, timeout)
        .build()
        .unwrap()
}

/// Every key of an acknowledged set is on the replica when `lock_all` returns; over
/// three TTLs of 1 s its renewals (every 500 ms, acknowledged too) keep every key on the replica; its
/// release clears every key on both.
#[tokio::test]
async fn an_acknowledged_set_is_on_the_replica_renewed_and_released() {
    let (primary, replicas) = replicated(1).await;
    let (conn, replica) = (patient(&primary).await, replicas[0].conn().await);
    let ttl = Duration::from_secs(1);
    let mx = acknowledged(&conn, ttl, Duration::from_millis(250));

    let set = mx.lock_all().write(["a", "b"]).read(["c"]).await.unwrap();
    for key in ["bank:a", "bank:b"] {
        assert_eq!(
            raw::get(&replica, key).await.as_deref(),
            Some(set.id()),
            "{key}"
        );
    }
    assert_eq!(raw::members(&replica, "bank:c").await, [set.id()]);
    let token = set.fencing_token("a").unwrap();
    assert_eq!(raw::stored_token(&replica, "bank:a:fence").await, token);

    let until = Instant::now() + ttl * 3;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!set.is_cancelled(), "{:?}", set.cancel_reason());
        for key in ["bank:a", "bank:b", "bank:c"] {
            let pttl = raw::pttl(&replica, key).await;
            assert!(pttl > 0 && pttl <= 1_000, "{key} on the replica: {pttl}");
        }
    }
    assert!(set.refreshes() >= 4, "renewed {} times", set.refreshes());

    assert!(set.unlock().await.unwrap());
    for key in ["bank:a", "bank:b", "bank:c"] {
        assert!(!raw::exists(&conn, key).await, "{key} left on the primary");
        let gone = eventually(|| async { !raw::exists(&replica, key).await }).await;
        assert!(gone, "{key} left on the replica");
    }
}

/// A frozen replica: a tried set fails with `NotReplicated` within its timeout naming its
/// first key, and a waiting one times out; neither leaves a key. Once the replica answers
/// again the same set is taken.
#[tokio::test]
async fn a_frozen_replica_refuses_a_set_and_leaves_none_of_its_keys() {
    let (primary, replicas) = replicated(1).await;
    let conn = patient(&primary).await;
    let timeout = Duration::from_millis(200);
    let mx = acknowledged(&conn, Duration::from_secs(2), timeout);
    replicas[0].pause();

    let started = Instant::now();
    let refused = mx.try_lock_all().write(["a", "b"]).read(["c"]).await;
    let took = started.elapsed();
    assert!(
        matches!(
            &refused,
            Err(Error::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(took < timeout + Duration::from_secs(1), "{took:?}");
    let released = || async {
        let mut none = true;
        for key in ["bank:a", "bank:b", "bank:c"] {
            none &= !raw::exists(&conn, key).await;
        }
        none
    };
    assert!(
        eventually(released).await,
        "the unacknowledged set left keys"
    );

    let waited = mx
        .lock_all()
        .write(["a", "b"])
        .read(["c"])
        .timeout(Duration::from_millis(700))
        .await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    assert!(eventually(released).await, "the waiting set left keys");

    replicas[0].resume();
    let set = tokio::time::timeout(LIVENESS, mx.lock_all().write(["a", "b"]).read(["c"]))
        .await
        .expect("acknowledged once the replica answers")
        .unwrap();
    assert!(set.unlock().await.unwrap());
}

/// Over Sentinel, acknowledged by a replica: the set's keys land on the primary; a set
/// waiting for one of them is woken by the holder's release through the Sentinels'
/// notifier (a 30 s TTL: the fallback timer would be too late), then released.
#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_over_sentinel_is_taken_on_the_primary_woken_and_released() {
    use crate::common::sentinel::Sentinels;
    use crate::sentinel::acked_and_notified;

    let deployment = Sentinels::start();
    let ttl = Duration::from_secs(30);
    let mx = acked_and_notified(&deployment, "bank", ttl);
    let others = acked_and_notified(&deployment, "bank", ttl);
    let primary = deployment.server(deployment.primary()).conn().await;

    let set = mx.lock_all().write(["a", "b"]).read(["c"]).await.unwrap();
    for key in ["bank:a", "bank:b"] {
        assert_eq!(
            raw::get(&primary, key).await.as_deref(),
            Some(set.id()),
            "{key}"
        );
    }
    assert_eq!(raw::members(&primary, "bank:c").await, [set.id()]);
    assert!(others.try_lock_all().read(["b"]).await.unwrap().is_none());
    let waiting = tokio::spawn({
        let others = others.clone();
        async move { others.lock_all().write(["c"]).read(["d"]).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "taken beside a reader");
    assert!(!raw::exists(&primary, "bank:d").await, "d was taken alone");

    assert!(set.unlock().await.unwrap());
    let next = tokio::time::timeout(LIVENESS, waiting)
        .await
        .expect("woken by the release through the Sentinels")
        .unwrap()
        .unwrap();
    assert_eq!(
        raw::get(&primary, "bank:c").await.as_deref(),
        Some(next.id())
    );
    assert_eq!(raw::members(&primary, "bank:d").await, [next.id()]);
    assert!(next.unlock().await.unwrap());
    for key in ["bank:a", "bank:b", "bank:c", "bank:d"] {
        assert!(!raw::exists(&primary, key).await, "{key} left");
    }
}
