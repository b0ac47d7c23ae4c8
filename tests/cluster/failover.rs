//! Faults of a real Redis Cluster's masters under held guards: a master killed
//! (SIGKILL) until its replica takes over, and a master frozen (SIGSTOP). Nothing may
//! hang past its own bound, a guard whose lock may be lost must fire, and the slots
//! must work again afterwards.
#![cfg(feature = "cluster")]

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use crate::common::cluster::{slot, Cluster};
use crate::common::either::Either;
use crate::common::LIVENESS;
use redis::cluster_async::ClusterConnection;
use redismutex::{CancelReason, Error, Guard, Notifier, RwMutex};

/// Slack for scheduling on a loaded 2-core machine, added to every bound.
const SLACK: Duration = Duration::from_millis(400);
/// The clean-up a wait that gives up may wait for (`GIVE_UP_GRACE`).
const GIVE_UP: Duration = Duration::from_millis(100);

/// The validity of a lock with `ttl`: the TTL minus Redlock's drift margin.
fn validity(ttl: Duration) -> Duration {
    ttl - ttl / 100 - Duration::from_millis(2)
}

/// A key of `mx` (tagged) whose slot master `i` serves.
fn key_on(cluster: &Cluster, i: usize) -> String {
    let name = cluster.name_on_master(i, "k");
    name.trim_matches(|c| c == '{' || c == '}').to_owned()
}

/// The mutex `f` with `ttl`: hash-tagged keys, the lock intent on, and release
/// notifications through `cluster`.
fn tagged_notified(
    conn: &ClusterConnection,
    ttl: Duration,
    cluster: &Cluster,
) -> RwMutex<ClusterConnection> {
    RwMutex::builder(conn.clone(), "f")
        .hash_tag_keys(true)
        .ttl(ttl)
        .lock_intent(true)
        .notifier(Notifier::cluster(cluster.client()))
        .build()
        .unwrap()
}

/// Runs `fut` and says how long it took; fails the test past [`LIVENESS`].
async fn timed<T>(fut: impl IntoFuture<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = tokio::time::timeout(LIVENESS * 4, fut.into_future())
        .await
        .expect("nothing hangs");
    (out, started.elapsed())
}

/// A master killed while guards on its slots (and on the others') are held: the guards
/// on its slots fire (their lock may be lost), the others do not (with
/// `cluster-require-full-coverage no`); requests on its slots
/// return within their bounds, with a guard, `None` or a clear error; once its replica
/// has taken over, new locks on those slots work, with tokens above the old ones.
#[tokio::test]
async fn a_killed_master_fires_its_guards_and_its_slots_work_after_the_failover() {
    let cluster = Cluster::start();
    // By default (`cluster-require-full-coverage yes`) every master refuses requests
    // (CLUSTERDOWN) while a slot has no master, so guards with a 1 s TTL would expire
    // on every master; here only the dead master's slots stop.
    for node in cluster.nodes() {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-require-full-coverage")
            .arg("no")
            .query_async(&mut cluster.node_conn(node.port).await)
            .await
            .unwrap();
    }
    let conn = cluster.conn().await;
    let ttl = Duration::from_secs(1);
    let mx = tagged_notified(&conn, ttl, &cluster);
    let keys: Vec<String> = (0..3).map(|i| key_on(&cluster, i)).collect();
    let victim = cluster.masters()[0].port;
    assert_eq!(
        cluster.master_of_slot(slot(&format!("f:{{{}}}", keys[0]))),
        victim
    );

    let mut guards: Vec<Either> = Vec::new();
    for key in &keys {
        guards.push(mx.write().key(key).await.unwrap().into());
        guards.push(
            mx.read()
                .key(format!("{key}:r"))
                .await
                .unwrap_or_else(|err| panic!("{err}"))
                .into(),
        );
    }
    let old_tokens: Vec<u64> = guards.iter().map(Either::fencing_token).collect();
    // A waiter on the victim's slot, with a timeout.
    let waiting = tokio::spawn({
        let mx = mx.clone();
        let key = keys[0].clone();
        async move { timed(mx.write().key(key).timeout(Duration::from_millis(1500))).await }
    });

    // Which guards are on the victim, decided before the slot map changes.
    let victims: Vec<String> = guards
        .iter()
        .map(|guard| guard.key().to_owned())
        .filter(|key| cluster.master_of_slot(slot(key)) == victim)
        .collect();
    let on_victim = |guard: &&Either| victims.iter().any(|key| key == guard.key());
    let killed = Instant::now();
    cluster.kill(victim);

    // The victim's guards fire by their deadline: the failover takes longer than the
    // 1 s TTL, so no refresh can succeed in time.
    for guard in guards.iter().filter(on_victim) {
        let (_, _) = timed(guard.cancelled()).await;
        let fired = killed.elapsed();
        eprintln!("{} fired {fired:?} after the kill", guard.key());
        let reason = guard.cancel_reason();
        assert_eq!(reason, Some(CancelReason::Expired), "{}", guard.key());
        assert!(
            fired < validity(ttl) + SLACK,
            "{} fired {fired:?}",
            guard.key()
        );
    }

    // Requests on the victim's slots return within their bounds.
    let (tried, took) = timed(mx.try_write().key(&keys[0])).await;
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_write took {took:?}: {tried:?}"
    );
    assert!(
        matches!(tried, Ok(None) | Err(Error::Timeout | Error::Redis { .. })),
        "{tried:?}"
    );
    let (waited, took) = waiting.await.unwrap();
    assert!(
        took < Duration::from_millis(1500) + GIVE_UP + SLACK,
        "write took {took:?}"
    );
    eprintln!(
        "write().timeout(1.5 s) during the failover: {:?} after {took:?}",
        waited.as_ref().map(Guard::key)
    );

    // The other masters' guards were refreshed all along.
    for guard in guards.iter().filter(|guard| !on_victim(guard)) {
        assert!(
            !guard.is_cancelled(),
            "{}: {:?}",
            guard.key(),
            guard.cancel_reason()
        );
    }

    let promoted = cluster.wait_failover(victim).await;
    eprintln!(
        "replica {promoted} took over {:?} after the kill",
        killed.elapsed()
    );
    // Every unlock returns within one TTL: true, or false for a lock lost on the way.
    for guard in guards {
        let (released, took) = timed(guard.unlock()).await;
        assert!(took < ttl + SLACK, "unlock took {took:?}");
        if let Err(err) = released {
            assert!(
                matches!(err, Error::Timeout | Error::Redis { .. }),
                "{err:?}"
            );
        }
    }
    // New locks on the victim's slots work, through the same connection and a fresh one,
    // and their tokens are above every earlier one.
    for conn in [conn.clone(), cluster.conn().await] {
        let mx = tagged_notified(&conn, ttl, &cluster);
        let guard = tokio::time::timeout(LIVENESS, mx.write().key(&keys[0]))
            .await
            .expect("acquired after the failover")
            .unwrap();
        assert!(guard.fencing_token() > old_tokens[0]);
        assert_eq!(cluster.master_of_slot(slot(guard.key())), promoted);
        assert!(guard.unlock().await.unwrap());
    }
}

/// A master frozen with SIGSTOP (shorter than the node timeout, so no failover): every
/// call on its slots returns within its own bound, though the connection has no
/// response timeout; after it resumes, everything works again.
#[tokio::test]
async fn a_paused_master_holds_no_call_past_its_bound() {
    let cluster = Cluster::start_with_node_timeout(15_000);
    let conn = cluster.conn().await;
    let ttl = Duration::from_secs(1);
    let mx = tagged_notified(&conn, ttl, &cluster);
    let key = key_on(&cluster, 1);
    let other = key_on(&cluster, 2);
    let paused = cluster.masters()[1].port;
    let held = mx.write().key(&key).await.unwrap();
    let elsewhere = mx.write().key(&other).await.unwrap();

    cluster.pause(paused);
    let frozen = Instant::now();
    // Scripts flushed on every other node must be sent again there without the frozen
    // one (`SCRIPT LOAD` would go to every master, the frozen one too).
    cluster.script_flush_all().await;
    let third = cluster.name_on_master(2, "j");
    let (elsewhere_too, took) =
        timed(mx.write().key(third.trim_matches(|c| c == '{' || c == '}'))).await;
    let elsewhere_too = elsewhere_too.unwrap_or_else(|err| panic!("{err} after {took:?}"));
    assert!(elsewhere_too.unlock().await.unwrap());
    let (tried, took) = timed(mx.try_write().key(&key)).await;
    assert!(matches!(tried, Err(Error::Timeout)), "{tried:?}");
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_write took {took:?}"
    );
    let (tried, took) = timed(mx.try_read().key(&key)).await;
    assert!(matches!(tried, Err(Error::Timeout)), "{tried:?}");
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_read took {took:?}"
    );
    let (waited, took) = timed(mx.write().key(&key).timeout(Duration::from_millis(300))).await;
    assert!(
        matches!(waited, Err(Error::Timeout)),
        "{:?}",
        waited.map(|guard| guard.key().to_owned())
    );
    assert!(
        took < Duration::from_millis(300) + GIVE_UP + SLACK,
        "write took {took:?}"
    );

    // The held guard's refresh gets no reply: it fires at its deadline.
    let (_, _) = timed(held.cancelled()).await;
    assert_eq!(held.cancel_reason(), Some(CancelReason::Expired));
    assert!(frozen.elapsed() < validity(ttl) * 3 + GIVE_UP * 2 + SLACK * 2);
    let (released, took) = timed(held.unlock()).await;
    assert!(took < ttl + SLACK, "unlock took {took:?}: {released:?}");
    // A lock on another master is untouched.
    assert!(!elsewhere.is_cancelled(), "{:?}", elsewhere.cancel_reason());

    cluster.resume(paused);
    let guard = tokio::time::timeout(LIVENESS, mx.write().key(&key))
        .await
        .expect("acquired after the resume")
        .unwrap();
    assert!(guard.unlock().await.unwrap());
    assert!(elsewhere.unlock().await.unwrap());
}

/// A master frozen past the node timeout is failed over while still frozen. Its guards
/// fire. redis-rs 1.8.1 does not refresh its slot map on a timeout, so a cluster
/// connection made before the failover keeps sending that master's slots to the frozen
/// node: requests there fail within their bounds until it resumes (and answers MOVED). A
/// connection made after the failover works at once.
#[tokio::test]
async fn a_master_frozen_until_failed_over_fails_calls_in_bounds_and_recovers() {
    let cluster = Cluster::start();
    let client = redis::cluster::ClusterClientBuilder::new(cluster.urls())
        .use_protocol(redis::ProtocolVersion::RESP3)
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let conn = client.get_async_connection().await.unwrap();
    let ttl = Duration::from_secs(1);
    let mx = tagged_notified(&conn, ttl, &cluster);
    let key = key_on(&cluster, 0);
    let frozen = cluster.masters()[0].port;
    let held = mx.write().key(&key).await.unwrap();
    let token = held.fencing_token();

    cluster.pause(frozen);
    let paused = Instant::now();
    let promoted = cluster.wait_failover(frozen).await;
    eprintln!(
        "replica {promoted} took over {:?} after the freeze",
        paused.elapsed()
    );
    assert!(held.is_cancelled(), "the frozen master's guard fired");
    assert_eq!(held.cancel_reason(), Some(CancelReason::Expired));

    // The old connection still points at the frozen node: bounded failures.
    let (tried, took) = timed(mx.try_write().key(&key)).await;
    assert!(
        matches!(tried, Err(Error::Redis { .. } | Error::Timeout)),
        "{tried:?}"
    );
    assert!(
        took < validity(ttl) + GIVE_UP + SLACK,
        "try_write took {took:?}"
    );

    // A connection made now follows the new master at once.
    let fresh = tagged_notified(&cluster.conn().await, ttl, &cluster);
    let guard = tokio::time::timeout(LIVENESS, fresh.write().key(&key))
        .await
        .expect("acquired on the new master")
        .unwrap();
    assert!(guard.fencing_token() > token);
    assert_eq!(cluster.master_of_slot(slot(guard.key())), promoted);
    assert!(guard.unlock().await.unwrap());

    // Resumed, the old master redirects, and the old connection follows.
    cluster.resume(frozen);
    let (guard, took) = timed(async {
        loop {
            if let Ok(guard) = mx.write().key(&key).timeout(LIVENESS).await {
                break guard;
            }
        }
    })
    .await;
    eprintln!("the old connection acquired {took:?} after the resume");
    assert!(guard.fencing_token() > token);
    assert!(guard.unlock().await.unwrap());
}

/// With the default `cluster-require-full-coverage yes`, every master refuses requests
/// (CLUSTERDOWN) from the moment a dead master is marked failed until its replica takes
/// over. Guards with the default 4 s TTL on the other masters ride that out: their
/// refreshes are retried every ttl/8 and one lands before their deadline.
#[tokio::test]
async fn guards_on_other_masters_ride_out_a_failover_with_the_default_ttl() {
    let cluster = Cluster::start();
    let conn = cluster.conn().await;
    let mx = tagged_notified(&conn, Duration::from_secs(4), &cluster);
    let victim = cluster.masters()[0].port;
    let others = [key_on(&cluster, 1), key_on(&cluster, 2)];
    let mut guards = Vec::new();
    for key in &others {
        guards.push(Either::from(mx.write().key(key).await.unwrap()));
        guards.push(mx.read().key(format!("{key}:r")).await.unwrap().into());
    }
    guards.retain(|guard| cluster.master_of_slot(slot(guard.key())) != victim);
    let killed = Instant::now();
    cluster.kill(victim);
    cluster.wait_failover(victim).await;
    // Past the deadline any of them would have had without a refresh since the kill.
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(killed.elapsed())).await;
    for guard in guards {
        assert!(
            !guard.is_cancelled(),
            "{}: {:?}",
            guard.key(),
            guard.cancel_reason()
        );
        let key = guard.key().to_owned();
        assert!(guard.unlock().await.unwrap(), "{key}");
    }
}
